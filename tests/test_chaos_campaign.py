"""Chaos campaigns (rmqlab.chaos): OpenChaos's fault loop as a schedule, the recovery checkers on
hand-built histories, one short case per deployment mode end to end on the simulator, and the
Parquet rows. The campaign files under conf/chaos/ are data a user copies: they must expand."""

from __future__ import annotations

import collections
import json
import os

import pyarrow.parquet as pq
import pytest

from rmqlab.chaos.campaign import expand, load_campaign
from rmqlab.chaos.case import Case
from rmqlab.chaos.results import FAULT_SCHEMA, RUN_SCHEMA, error_row, read_results, write_results
from rmqlab.chaos.runner import run_case, run_task
from rmqlab.checker.recovery import (check_queue_order, check_recovery, duplicated_per_reader, fault_windows,
                                     recoveries, unavailability_windows)
from rmqlab.checker.schedule import (CONTROLLER_LEADER, INTERVAL_KINDS, MASTER, FaultOp, MasterResolver,
                                     apply_op, interval_schedule, interval_targets)
from rmqlab.cli import main
from rmqlab.trace import Tracer, trace_hash

BROKERS = ["broker-n0", "broker-n1", "broker-n2"]
CONTROLLERS = ["controller-n0", "controller-n1", "controller-n2"]
LOOP = {"duration_ms": 2_000, "interval_ms": 3_000, "run_ms": 30_000, "lead_ms": 1_000}


# --- the schedule: OpenChaos's loop ---------------------------------------------------------------
@pytest.mark.parametrize("kind", INTERVAL_KINDS)
def test_interval_schedule_is_seeded_and_has_the_loops_shape_for_every_target(kind):
    for target in interval_targets(kind):
        if kind == "ring" and target != "servers":
            with pytest.raises(ValueError, match="at least 4 nodes"):
                interval_schedule(1, BROKERS, CONTROLLERS, kind=kind, target=target, **LOOP)
            continue
        s = interval_schedule(1, BROKERS, CONTROLLERS, kind=kind, target=target, **LOOP)
        assert s == interval_schedule(1, BROKERS, CONTROLLERS, kind=kind, target=target, **LOOP)
        # Fault k at 1 s + 5 s k, undone 2 s later; six fit in 30 s (the seventh would end at 33 s).
        assert [op.time_ms for op in s.faults] == [1_000 + 5_000 * k for k in range(6)]
        by_id = collections.defaultdict(list)
        for op in s.ops:
            by_id[op.fault_id].append(op)
        for fault, undo in by_id.values():
            assert undo.time_ms - fault.time_ms == 2_000
            assert undo.f == {"kill": "restart", "crash": "restart", "suspend": "resume", "loss": "loss-heal"}.get(kind, "heal")
            if kind in ("kill", "crash", "suspend"):  # the same nodes come back
                assert (fault.node, fault.value.get("nodes")) == (undo.node, undo.value.get("nodes"))
        assert s.fault_window_ms == 30_000


def _nodes(op: FaultOp) -> list[str]:
    return [op.node] if op.node else op.value["nodes"]


def test_interval_schedule_targets_name_the_nodes_seed_article_lists():
    def faults(kind, target, seed=3):
        return interval_schedule(seed, BROKERS, CONTROLLERS, kind=kind, target=target, **LOOP).faults

    assert {op.node for op in faults("kill", "master")} == {MASTER}
    assert {op.node for op in faults("suspend", "controller-leader")} == {CONTROLLER_LEADER}
    assert all(_nodes(op) == CONTROLLERS for op in faults("kill", "controllers-all"))
    assert all(len(_nodes(op)) == 2 and set(_nodes(op)) <= set(CONTROLLERS) for op in faults("kill", "controllers-majority"))
    # A majority of the brokers, one left working; a majority of all six servers.
    assert all(len(_nodes(op)) == 2 and set(_nodes(op)) <= set(BROKERS) for op in faults("suspend", "brokers-majority"))
    assert all(len(_nodes(op)) == 4 for op in faults("crash", "servers-majority"))
    # Random targets are drawn anew for each fault, from the seed.
    assert len({tuple(_nodes(op)) for op in faults("kill", "broker", seed=4)}) > 1
    assert [op.node for op in faults("kill", "broker", 4)] != [op.node for op in faults("kill", "broker", 5)]
    loss = faults("loss", "broker-controller")[0]
    assert (loss.value["srcs"], loss.value["dsts"], loss.value["rate"]) == (BROKERS, CONTROLLERS, 0.8)
    cc = faults("loss", "controller-controller")[0]
    assert cc.value["srcs"] == cc.value["dsts"] == CONTROLLERS
    assert sorted(faults("ring", "servers")[0].value["nodes"]) == sorted(BROKERS + CONTROLLERS)
    assert sorted(faults("bridge", "brokers")[0].value["nodes"]) == BROKERS
    one = faults("partition-one", "controllers")[0].value["groups"]
    assert len(one[0]) == 1 and sorted(one[0] + one[1]) == CONTROLLERS
    with pytest.raises(ValueError, match="no controllers"):
        interval_schedule(1, BROKERS, [], kind="kill", target="controllers-all", **LOOP)


class _Nemesis:
    def __init__(self):
        self.calls = []

    def __getattr__(self, name):
        return lambda *args, **kw: self.calls.append((name, *args))


class _Cluster:
    def master(self):
        return "broker-n1"

    def controller_leader(self):
        return "controller-n2"


def test_multi_node_and_link_class_ops_apply_to_every_node_and_link_and_leaders_resolve_when_applied():
    n = _Nemesis()
    apply_op(n, FaultOp(0, "suspend", None, {"nodes": CONTROLLERS}))
    apply_op(n, FaultOp(0, "loss", None, {"srcs": BROKERS, "dsts": CONTROLLERS, "rate": 0.8}))
    apply_op(n, FaultOp(0, "ring", None, {"nodes": BROKERS + CONTROLLERS}))
    assert n.calls == [("suspend", c) for c in CONTROLLERS] + [
        ("set_loss", BROKERS, CONTROLLERS, 0.8), ("set_loss", CONTROLLERS, BROKERS, 0.8),
        ("ring", BROKERS + CONTROLLERS)]
    resolve = MasterResolver(_Cluster())
    assert resolve(FaultOp(0, "kill", CONTROLLER_LEADER, {}, 1)).node == "controller-n2"
    assert resolve(FaultOp(0, "kill", MASTER, {}, 2)).node == "broker-n1"
    assert resolve(FaultOp(1, "restart", CONTROLLER_LEADER, {}, 1)).node == "controller-n2"


# --- the recovery checkers on hand-built histories ------------------------------------------------
class History:
    def __init__(self):
        self.now = 0.0
        self.tracer = Tracer(lambda: self.now)
        self.ids = collections.Counter()
        self.sends = 0

    def at(self, t):
        self.now = t
        return self

    def op(self, node, f, invoke, type_, value, t_invoke, t_complete):
        self.ids[node] += 1
        self.at(t_invoke).tracer.emit(node, "client", type="invoke", process=0, f=f, op_id=self.ids[node], value=invoke)
        return self.at(t_complete).tracer.emit(node, "client", type=type_, process=0, f=f, op_id=self.ids[node],
                                               value=value)

    def send(self, t, ok=True, took=5, queue=0, offset=None):
        self.sends += 1
        key = f"K{self.sends}"
        self.op("producer", "send", {"topic": "T", "uniq_key": key, "body_crc": 1}, "ok" if ok else "fail",
                {"send_status": "SEND_OK", "broker_name": "broker-a", "queue_id": queue,
                 "queue_offset": offset} if ok else None, t, t + took)
        return key

    def consume(self, t, key, queue=0, offset=0):
        self.op("consumer", "consume", {"topic": "T", "uniq_key": key, "queue_id": queue, "queue_offset": offset,
                                        "broker_name": "broker-a"}, "ok", None, t, t + 1)


def test_rto_per_fault_to_the_first_acknowledged_send_and_consumption_and_no_recovery_is_none_with_a_reason():
    h = History()
    for t in range(0, 1_000, 100):
        h.consume(t + 10, h.send(t))
    # Fault 1: the master killed at 1000, restarted at 3000; sends fail until 2500.
    h.at(1_000).tracer.emit("broker-n0", "node.kill", signal=9)
    for t in range(1_000, 2_500, 100):
        h.send(t, ok=False)
    h.consume(2_700, h.send(2_500, took=40))
    h.at(3_000).tracer.emit("broker-n0", "node.restart", incarnation=0)
    for t in range(2_600, 4_000, 100):
        h.send(t)
    # Fault 2: all three controllers suspended at once at 4000, never resumed; nothing succeeds after.
    for c in CONTROLLERS:
        h.at(4_000).tracer.emit(c, "node.suspend")
    for t in range(4_000, 6_000, 100):
        h.send(t, ok=False)
    events = h.tracer.events

    faults = fault_windows(events)
    assert [(f.kind, f.nodes, f.start_ms, f.end_ms) for f in faults] == [
        ("kill", ("broker-n0",), 1_000, 3_000), ("suspend", tuple(CONTROLLERS), 4_000, None)]
    windows = unavailability_windows(events)
    assert windows == [(905, 2_540), (3_905, None)]
    first, second = recoveries(events)
    # Its period runs to the next fault: the gap after the last acknowledged send (3905) counts to 4000.
    assert (first.rto_send_ms, first.rto_consume_ms, first.unavailable_ms) == (1_540, 1_700, 1_540 + 95)
    assert first.rto_send_reason is None and first.fault.duration_ms == 2_000
    # Never recovered: None and why, not 0.
    assert second.rto_send_ms is None and second.rto_consume_ms is None
    assert "no acknowledged send invoked after the fault" in second.rto_send_reason
    assert second.rto_consume_reason == "no message consumed after the fault"
    assert second.unavailable_ms == 5_900 - 4_000  # up to the last send
    r = check_recovery(events)
    assert not r.valid and [v.what for v in r.violations] == ["not-recovered"]
    assert r.stats["faults"] == 2 and r.stats["not_recovered"] == 1 and r.stats["rto_send_max_ms"] == 1_540


def test_faults_of_a_partition_ring_and_loss_end_at_their_heal():
    h = History()
    h.at(100).tracer.emit("nemesis", "fault.partition", groups=[["a"], ["b", "c"]], shape="groups")
    h.at(900).tracer.emit("nemesis", "fault.heal", fault="partition")
    h.at(1_000).tracer.emit("nemesis", "fault.partition", groups=[["a", "b"], ["b", "c"]], shape="ring")
    h.at(1_500).tracer.emit("nemesis", "fault.heal", fault="partition")
    h.at(2_000).tracer.emit("nemesis", "fault.loss", rate=0.8, links=[["a", "b"]])
    h.at(2_000).tracer.emit("nemesis", "fault.loss", rate=0.8, links=[["b", "a"]])
    h.at(2_600).tracer.emit("nemesis", "fault.loss", rate=0.0, links=[["a", "b"]])
    assert [(f.kind, f.nodes, f.duration_ms) for f in fault_windows(h.tracer.events)] == [
        ("partition", ("a", "b", "c"), 800), ("ring", ("a", "b", "c"), 500), ("loss", ("a", "b"), 600)]
    r = check_recovery(h.tracer.events)
    assert r.valid is False and r.stats["per_fault"][0]["rto_send_reason"] == "no send in the history"


def test_queue_order_checker_finds_a_message_stored_before_one_acknowledged_earlier():
    h = History()
    a, b, c = h.send(0, offset=0), h.send(100, offset=1), h.send(200, queue=1, offset=0)
    for key, q, off in ((a, 0, 0), (b, 0, 1), (c, 1, 0)):
        h.consume(500, key, q, off)
    assert check_queue_order(h.tracer.events).valid
    d = h.send(300, offset=5)
    e = h.send(400, offset=2)          # acknowledged after d was, stored below it
    h.consume(600, d, 0, 5)
    h.consume(600, e, 0, 2)
    h.consume(700, e, 0, 2)            # a redelivery
    r = check_queue_order(h.tracer.events)
    assert not r.valid and [v.details["uniq_key"] for v in r.violations] == [e]
    assert r.violations[0].details["ahead"] == {"uniq_key": d, "queue_offset": 5}
    assert duplicated_per_reader(h.tracer.events) == {"consumer": 1}


# --- campaigns ------------------------------------------------------------------------------------
def test_campaign_files_expand_and_cases_a_mode_cannot_have_are_skipped_with_the_reason():
    seed003 = load_campaign("seed003")
    kinds = {(c.kind, c.target) for c in seed003.cases if c.mode == "controller-standalone"}
    for needed in [("kill", "controllers-all"), ("suspend", "controllers-all"), ("kill", "servers-majority"),
                   ("loss", "broker-broker"), ("loss", "controller-controller"), ("loss", "broker-controller"),
                   ("ring", "servers"), ("bridge", "servers"), ("suspend", "master"), ("crash", "master")]:
        assert needed in kinds
    assert {c.mode for c in seed003.cases} == {"controller-embedded", "controller-standalone", "dledger",
                                               "acting-master", "2m-2s-sync", "2m-2s-async"}
    assert {c.duration_ms for c in seed003.cases} == {60_000} and seed003.seeds == (0, 1, 2, 3, 4)
    assert seed003.injections() >= 7_200
    fast = load_campaign("seed003-fast")  # base = "seed003": the same cases, shorter faults
    assert [c.name for c in fast.cases] == [c.name for c in seed003.cases] and fast.injections() >= 10_000
    assert {(c.campaign, c.duration_ms, c.workload["interval_ms"]) for c in fast.cases} == {("seed003-fast", 5_000, 1_000)}
    allack = seed003.case("controller-embedded/allAck/kill:master")
    assert allack.broker == {"allAckInSyncStateSet": True} and allack.controller == {"enableElectUncleanMaster": False}
    assert Case.from_dict(json.loads(json.dumps(allack.to_dict()))) == allack
    c = expand({"name": "x", "configs": {"a": {"broker": {"slaveReadEnable": True}, "controller": {"k": 1}}},
                "matrix": [{"modes": ["dledger", "controller-embedded"], "configs": ["a"],
                            "faults": ["ring:brokers", "kill:controllers-all", "kill:master"],
                            "durations_ms": [1_000, 5_000]}]})
    assert [x.name for x in c.cases] == ["dledger/a/kill:master/1s", "dledger/a/kill:master/5s",
                                         "controller-embedded/a/kill:controllers-all/1s",
                                         "controller-embedded/a/kill:controllers-all/5s",
                                         "controller-embedded/a/kill:master/1s", "controller-embedded/a/kill:master/5s"]
    assert c.cases[0].controller == {}  # a mode without controllers takes no controller settings
    assert len(c.skipped) == 6 and "at least 4 nodes" in c.skipped[0]
    with pytest.raises(ValueError, match="unknown workload settings rate"):
        Case("x", "dledger", "kill", "master", workload={"rate": 1})
    with pytest.raises(ValueError, match="kill takes targets"):
        Case("x", "dledger", "kill", "broker-broker")


# --- end to end on the simulator ------------------------------------------------------------------
SMOKE = load_campaign("smoke")


@pytest.mark.parametrize("case", SMOKE.cases, ids=lambda c: c.mode)
def test_a_smoke_case_of_every_mode_runs_end_to_end_and_keeps_every_acknowledged_message(case):
    run_row, fault_rows = run_task(case.to_dict(), 0)
    assert run_row["error"] is None, run_row["error"]
    assert run_row["valid"], run_row["first_violation"]
    assert run_row["acknowledged"] > 20 and run_row["lost"] == 0 and run_row["converged"]
    assert run_row["injections"] == run_row["planned_injections"] == 2 == len(fault_rows)
    assert all(f["rto_send_ms"] is not None and f["rto_send_ms"] > 0 for f in fault_rows)
    assert [f["start_ms"] for f in fault_rows] == pytest.approx([3_000, 8_000])
    assert all(f["duration_ms"] == pytest.approx(2_000) for f in fault_rows)
    trace_kind = {"kill": "kill", "suspend": "suspend", "partition-one": "partition", "loss": "loss"}[case.kind]
    assert {f["kind"] for f in fault_rows} == {trace_kind}
    verdicts = json.loads(run_row["verdicts"])
    assert verdicts["total-queue"] and verdicts["queue-order"] and verdicts["order"]
    assert run_row["consumed"] > 0 and run_row["unordered"] == 0


def test_a_case_run_is_reproducible_from_its_seed_and_an_orderly_consumer_is_checked_per_queue():
    case = SMOKE.select("2m-2s-async")[0]
    hashes = {trace_hash(run_case(case, 5, keep_events=True).events) for _ in range(2)}
    assert len(hashes) == 1
    orderly = run_case(SMOKE.select("controller-standalone")[0], 0)
    assert orderly.results["order"].valid and orderly.results["order"].stats["orderly_consumes"] > 20


def test_rows_round_trip_through_parquet_and_a_violation_row_carries_its_seed_and_replay_command(tmp_path):
    case = SMOKE.cases[0]
    run_row, fault_rows = run_task(case.to_dict(), 1)
    bad = error_row(case, 7, "TimeoutError: no master", 0.5)
    write_results(str(tmp_path), [run_row, bad], fault_rows)
    assert pq.read_schema(tmp_path / "runs.parquet").equals(RUN_SCHEMA, check_metadata=False)
    assert pq.read_schema(tmp_path / "faults.parquet").equals(FAULT_SCHEMA, check_metadata=False)
    assert all(f.metadata[b"doc"] for f in pq.read_schema(tmp_path / "runs.parquet"))
    runs, faults = read_results(str(tmp_path))
    assert runs == [run_row, bad] and faults == fault_rows
    assert bad["valid"] is False and bad["seed"] == 7
    assert bad["replay"] == f"rmqlab chaos run smoke --case '{case.name}' --seeds 7 --workers 1 --out chaos-replay"
    assert run_row["replay"] is None  # valid: nothing to replay


def test_rmqlab_chaos_run_writes_the_rows_and_prints_the_summary(tmp_path, capsys):
    out = tmp_path / "out"
    assert main(["chaos", "run", "smoke", "--case", "2m-2s-async", "--seeds", "3", "--workers", "1",
                 "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "2m-2s-async/template/loss:broker-broker" in printed and "1 runs, 2 injections" in printed
    assert sorted(os.listdir(out)) == ["faults.parquet", "runs.parquet"]
    runs, _ = read_results(str(out))
    assert [(r["case"], r["seed"]) for r in runs] == [("2m-2s-async/template/loss:broker-broker", 3)]
    assert main(["chaos", "run", "smoke", "--case", "no-such-case", "--out", str(out)]) == 2
    assert main(["chaos", "list", "smoke"]) == 0
    assert "dledger/template/kill:master" in capsys.readouterr().out
