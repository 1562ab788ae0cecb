"""Recorded workloads: the spec and its validation, the Parquet format and its
errors, deterministic replay (also in another process with another PYTHONHASHSEED), the committed
public workloads, and outcomes that catch a loss. Replays only a few short workloads (the
simulator runs a 20-virtual-second workload in about a second)."""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from rmqlab.checker.schedule import FaultOp
from rmqlab.example.benchmark import ConsumerSpec, ProducerSpec
from rmqlab.trace import TraceEvent, load_parquet, trace_hash
from rmqlab.workload import (CONDITIONAL_INVARIANTS, INVARIANTS, RecordedWorkload, TopicSpec, Workload, WorkloadClient, WorkloadFormatError,
                             WorkloadVersionError, load_workload, load_workload_bytes, outcome, outcome_json,
                             read_header, read_spec, run_workload, save_workload, schedule_of, workload_bytes)
from rmqlab.workload import parquet_format
from rmqlab.workload.catalog import CATALOG

REPO = Path(__file__).resolve().parents[1]
WORKLOADS = REPO / "datasets" / "workloads"


def small_workload(**changes) -> Workload:
    base = dict(name="tiny", mode="single-master", seed=5, description="a test workload",
                topics=(TopicSpec("TinyTopic", 2),),
                clients=(WorkloadClient("producer", ProducerSpec(topic="TinyTopic", interval_ms=200, body_size=32)),),
                faults=schedule_of([FaultOp(1_000.0, "kill", "broker-a", {}, 0), FaultOp(2_000.0, "restart", "broker-a", {}, 0)]),
                duration_ms=3_000.0)
    base.update(changes)
    return Workload(**base)


# --- the spec ----------------------------------------------------------------------------------------------
def test_every_catalog_workload_round_trips_through_json():
    for name, w in CATALOG.items():
        data = json.loads(json.dumps(w.to_dict()))
        assert Workload.from_dict(data) == w, name
        assert Workload.from_dict(data).to_dict() == w.to_dict(), name


def test_catalog_covers_every_mode_and_fault_kind():
    from rmqlab.checker.schedule import FAULTS

    deployments = {(w.mode, w.proxy) for w in CATALOG.values()}
    for mode in ("single-master", "2m-noslave", "2m-2s-async", "2m-2s-sync", "controller-embedded",
                 "controller-standalone"):
        assert (mode, None) in deployments, mode
    assert {p for _, p in deployments} >= {"local", "cluster"}
    assert {k for w in CATALOG.values() for k in w.fault_kinds} == set(FAULTS)
    assert len(CATALOG) >= 30
    assert sum(w.recorded_runtime == "real" for w in CATALOG.values()) >= 3
    assert any(op.node == "@master" for w in CATALOG.values() for op in w.faults.ops)


@pytest.mark.parametrize("change, field", [
    ({"mode": "3m-3s"}, "mode"),
    ({"seed": -1}, "seed"),
    ({"seed": True}, "seed"),
    ({"name": "a b/c"}, "name"),
    ({"proxy": "sidecar"}, "proxy"),
    ({"duration_ms": 0}, "duration_ms"),
    ({"controllers": 3}, "controllers"),
    ({"controller_overrides": {"enableElectUncleanMaster": True}}, "controller_overrides"),
    ({"overrides": {"broker-z": {"x": 1}}}, "overrides key 'broker-z'"),
    ({"client_overrides": {"retryTimes": 2}}, "client_overrides key 'retryTimes'"),
    ({"proxy_overrides": {"a": 1}}, "proxy_overrides"),
    ({"topics": []}, "topics"),
    ({"nonsense": 1}, "unknown field(s) nonsense"),
])
def test_bad_specs_name_the_field(change, field):
    data = {**small_workload().to_dict(), **change}
    with pytest.raises(ValueError) as e:
        Workload.from_dict(data)
    assert field in str(e.value)


@pytest.mark.parametrize("mutate, field", [
    (lambda d: d["clients"][0]["spec"].update(topic="OtherTopic"), "clients[0].spec.topic"),
    (lambda d: d["clients"][0]["spec"].update(protocol="grpc"), "clients[0].spec.protocol"),
    (lambda d: d["clients"][0]["spec"].update(interval_ms=-1), "clients[0].spec"),
    (lambda d: d["clients"][0].update(name="namesrv"), "clients[0].name"),
    (lambda d: d["clients"][0].update(start_ms=5_000), "clients[0].start_ms"),
    (lambda d: d["clients"][0].update(kind="admin"), "clients[0].kind"),
    (lambda d: d["clients"].append(dict(d["clients"][0])), "clients[1].name"),
    (lambda d: d["faults"][0].update(node="broker-q"), "faults[0].node"),
    (lambda d: d["faults"][0].update(f="explode"), "faults[0].f"),
    (lambda d: d["faults"][1].update(time_ms=4_000), "faults[1].time_ms"),
    (lambda d: d["faults"][1].update(time_ms=500), "faults[1].time_ms"),
    (lambda d: d["faults"][1].update(node="@master"), "faults[1].node"),
    (lambda d: d["faults"].append({"time_ms": 2_500, "f": "partition", "value": {"groups": [["broker-a"], ["x"]]}}),
     "faults[2].value.groups"),
    (lambda d: d["faults"].append({"time_ms": 2_500, "f": "loss", "value": {"node": "broker-a", "peers": ["namesrv"],
                                                                            "rate": 2}}), "faults[2].value.rate"),
    (lambda d: d["faults"][0].pop("time_ms"), "faults[0]: missing field 'time_ms'"),
])
def test_bad_clients_and_faults_name_the_field(mutate, field):
    data = json.loads(json.dumps(small_workload().to_dict()))
    mutate(data)
    with pytest.raises(ValueError) as e:
        Workload.from_dict(data)
    assert field in str(e.value)


# --- the file ----------------------------------------------------------------------------------------------
def synthetic_recording() -> RecordedWorkload:
    events = [TraceEvent(0, 0.0, "broker-a", "node.start", {"component": "broker"}),
              TraceEvent(1, 5.0, "workload", "log", {"level": "INFO", "message": "workload: t=0"}),
              TraceEvent(2, 7.5, "broker-a", "role", {"from": None, "to": "ASYNC_MASTER", "epoch": 0, "ünï": [1, 2.5]})]
    return RecordedWorkload(small_workload(), events, {"workload": "tiny", "lost": 0},
                            {"runtime": "sim", "rmqlab_version": "test"})


def test_parquet_round_trip_and_bytes(tmp_path):
    rec = synthetic_recording()
    path = tmp_path / "w.parquet"
    save_workload(path, rec)
    for back in (load_workload(path), load_workload_bytes(path.read_bytes(), "w.parquet"),
                 load_workload_bytes(workload_bytes(rec))):
        assert back.workload == rec.workload
        assert back.events == rec.events
        assert back.outcome == rec.outcome and back.meta == rec.meta
    assert read_spec(path) == rec.workload
    header = read_header(path)
    assert (header.workload, header.outcome, header.meta, header.events) == (rec.workload, rec.outcome, rec.meta, [])
    kv = pq.read_schema(path).metadata
    assert kv[b"rmqlab.schema"] == b"rmqlab.workload" and kv[b"rmqlab.schema_version"] == b"2"
    # Every trace tool reads it as a trace too.
    assert trace_hash(load_parquet(path).events) == trace_hash(rec.events)


def _with_metadata(tmp_path, change) -> Path:
    table = parquet_format._table(synthetic_recording())
    kv = dict(table.schema.metadata)
    change(kv)
    path = tmp_path / "changed.parquet"
    pq.write_table(table.replace_schema_metadata(kv), path)
    return path


def test_bad_files_give_clear_errors(tmp_path):
    text = tmp_path / "notes.parquet"
    text.write_text("not parquet at all")
    with pytest.raises(WorkloadFormatError, match=r"notes.parquet: not a readable Parquet file"):
        load_workload(text)
    with pytest.raises(WorkloadFormatError, match=r"<bytes>: not a readable Parquet file"):
        load_workload_bytes(b"PAR1 garbage")
    with pytest.raises(FileNotFoundError, match="missing.parquet"):
        load_workload(tmp_path / "missing.parquet")
    from rmqlab.trace import write_parquet

    write_parquet(synthetic_recording().events, tmp_path / "trace.parquet")  # a trace, not a workload
    with pytest.raises(WorkloadFormatError, match=r"trace.parquet: metadata key 'rmqlab.schema' is missing"):
        load_workload(tmp_path / "trace.parquet")
    newer = _with_metadata(tmp_path, lambda kv: kv.update({b"rmqlab.schema_version": b"3"}))
    with pytest.raises(WorkloadVersionError, match=r"changed.parquet: schema version 3 is newer"):
        load_workload(newer)
    missing = _with_metadata(tmp_path, lambda kv: kv.pop(b"rmqlab.workload"))
    with pytest.raises(WorkloadFormatError, match=r"'rmqlab.workload' is missing"):
        load_workload(missing)
    bad_spec = _with_metadata(tmp_path, lambda kv: kv.update({b"rmqlab.workload": json.dumps(
        {**small_workload().to_dict(), "mode": "3m"}).encode()}))
    with pytest.raises(WorkloadFormatError, match=r"bad workload spec: workload mode: must be one of"):
        load_workload(bad_spec)
    not_json = _with_metadata(tmp_path, lambda kv: kv.update({b"rmqlab.outcome": b"{oops"}))
    with pytest.raises(WorkloadFormatError, match=r"'rmqlab.outcome' is not JSON"):
        load_workload(not_json)


# --- running ---------------------------------------------------------------------------------------------
def test_run_workload_checks_its_arguments():
    w = small_workload()
    with pytest.raises(ValueError, match="runtime"):
        run_workload(w, runtime="docker")
    with pytest.raises(ValueError, match="seed"):
        run_workload(w, seed=-3)
    with pytest.raises(ValueError, match="patches"):
        run_workload(w, runtime="real", patches=[contextlib.nullcontext()])
    with pytest.raises(TypeError):
        run_workload(w.to_dict())


def test_patches_wrap_the_run_and_their_errors_propagate():
    seen = []

    @contextlib.contextmanager
    def patch(name):
        seen.append(f"enter {name}")
        yield
        seen.append(f"exit {name}")

    run = run_workload(small_workload(), patches=[patch("a"), patch("b")])
    assert seen == ["enter a", "enter b", "exit b", "exit a"]
    assert run.outcome["attempted"] > 0 and run.converged

    class Boom(Exception):
        pass

    @contextlib.contextmanager
    def failing():
        yield
        raise Boom()

    with pytest.raises(Boom):
        run_workload(small_workload(duration_ms=1_000.0, faults=schedule_of([])), patches=[failing()])


@pytest.mark.real
def test_replay_is_deterministic_across_runs_and_processes(tmp_path):
    """The same workload and seed give the same outcome bytes: twice here, once in another process
    with another PYTHONHASHSEED (through `replay --json`), and as the committed recording says."""
    recorded = load_workload(WORKLOADS / "single-suspend.parquet")
    first, second = run_workload(recorded.workload), run_workload(recorded.workload)
    assert outcome_json(first.outcome) == outcome_json(second.outcome)
    assert first.events == second.events
    env = {**os.environ, "PYTHONHASHSEED": "4242"}
    done = subprocess.run([sys.executable, "-m", "rmqlab.workload.cli", "replay", str(WORKLOADS / "single-suspend.parquet"),
                           "--json"], capture_output=True, env=env, cwd=REPO, timeout=120)
    assert done.returncode == 0, done.stderr.decode()
    assert done.stdout.rstrip(b"\n") == outcome_json(first.outcome)
    assert outcome_json(recorded.outcome) == outcome_json(first.outcome), (
        "the committed recording no longer replays byte for byte: the simulator changed; regenerate with "
        "`rmqlab record --all --sim-only --out-dir datasets/workloads`")
    other = run_workload(recorded.workload, seed=recorded.workload.seed + 1)
    assert other.outcome["seed"] == recorded.workload.seed + 1
    assert other.outcome["trace_hash"] != first.outcome["trace_hash"]


# --- the committed workloads --------------------------------------------------------------------------------
def test_committed_workloads_are_the_catalog():
    files = sorted(WORKLOADS.glob("*.parquet"))
    assert {f.name.removesuffix(".parquet") for f in files} == set(CATALOG)
    assert sum(f.stat().st_size for f in files) < 5.5 * 1024 * 1024
    for f in files:
        rec = read_header(f)  # the footer only (fast); load_workload reads rows in the tests that replay
        name = f.name.removesuffix(".parquet")
        assert rec.workload == CATALOG[name], name
        assert rec.meta["runtime"] == rec.workload.recorded_runtime, name
        assert rec.outcome is not None, name
        assert set(INVARIANTS) <= set(rec.outcome["invariants"]) <= {*INVARIANTS, *CONDITIONAL_INVARIANTS}, name
        if name.startswith(("tx-", "orderly-")):  # what they are for
            assert set(rec.outcome["invariants"]) - set(INVARIANTS) == \
                {"tx-": {"no-rolled-back-read"}, "orderly-": {"queue-order"}}[name.split("-")[0] + "-"], name
        assert rec.outcome["acknowledged"] > 0, name


def test_some_committed_workloads_cut_a_replica_log():
    """Failovers with returning old masters: some handshake truncates for real (below the log end)."""
    from rmqlab.checker.checkers import truncations

    cuts = {}
    for name in ("ctrl-embedded-partition-master", "ctrl-embedded-unclean"):
        rec = load_workload(WORKLOADS / f"{name}.parquet")
        cuts[name] = [t for t in truncations(rec.events) if t.point is not None and t.local_max and t.point < t.local_max]
    assert all(cuts.values()), cuts


def _disagreements(name: str, exercise: str, variant: str) -> list[tuple[list, object, object]]:
    """Run catalog workload `name` with the sample variant of `exercise` installed: (args, RocketMQ's
    answer, the variant's) for each call where they differ (what `rmqlab replay --exercise` reports)."""
    from rmqlab.grading.samples import FUNCTION, VARIANTS
    from rmqlab.lab.exercises import EXERCISES
    from rmqlab.workload.cli import disagreements

    ex = EXERCISES[exercise]
    namespace: dict = {}
    exec(VARIANTS[exercise][variant].source, namespace)  # our own sample "student" code
    fn = namespace[FUNCTION[exercise]]
    calls: list = []
    run_workload(CATALOG[name], decision_points=ex.decision_points(
        lambda *args: fn(*(ex.arg_adapter(list(args)) if ex.arg_adapter else args)), calls=calls))
    return disagreements(ex, calls)


def test_slow_replication_makes_the_master_shrink_a_lagging_slave_out():
    """ctrl-standalone-slow-replication exists for the time-based shrink (haMaxTimeSlaveNotCatchup):
    RocketMQ's rule drops the slaves that have not caught up for 15 s, which a rule that never
    shrinks does not; no other public workload asks that question."""
    differ = _disagreements("ctrl-standalone-slow-replication", "sync_state_set", "never-shrinks")
    assert differ
    for (sync_state_set, _master_id, slaves, _confirm, _epoch_start, now_ms, max_ms), rocketmq, wrong in differ:
        assert set(rocketmq) < set(sync_state_set) == set(wrong)
        dropped = set(sync_state_set) - set(rocketmq)
        assert all(caught_up is None or now_ms - caught_up > max_ms for slave, _ack, caught_up in slaves if slave in dropped)


def test_unclean_epochs_makes_the_election_weigh_epoch_before_bytes():
    """ctrl-standalone-unclean-epochs exists for DefaultElectPolicy's order: the unclean candidates are
    an old master of epoch 1 with more bytes and a replica of epoch 2 with fewer; RocketMQ takes the
    newer epoch, a rule that ranks by offset alone takes the other."""
    differ = _disagreements("ctrl-standalone-unclean-epochs", "elect_master", "ignores-epoch")
    assert differ
    (candidates, _old_master, _prefer), rocketmq, wrong = differ[0]
    live = {broker_id: info for broker_id, info in candidates}
    assert live[rocketmq][0] > live[wrong][0] and live[rocketmq][1] < live[wrong][1], candidates


def test_real_recordings_replay_on_the_simulator():
    rec = load_workload(WORKLOADS / "single-kill.real.parquet")
    assert rec.meta["runtime"] == "real" and rec.workload.recorded_runtime == "real"
    # The recorded outcome holds no wall-clock time: its times are ms after t=0.
    assert all(0 <= f["time_ms"] < rec.workload.duration_ms for f in rec.outcome["recovery"])
    assert any(e.kind == "node.kill" for e in rec.events)
    run = run_workload(rec.workload)
    assert run.converged and run.outcome["acknowledged"] > 0 and run.outcome["lost"] == 0
    assert [f["kind"] for f in run.outcome["recovery"]] == [f["kind"] for f in rec.outcome["recovery"]]


def test_outcome_catches_lost_messages():
    """An unclean election loses acknowledged messages: the total queue counts them, the election
    invariant lists it (not applicable: unclean elections were allowed), no-acknowledged-loss does
    not apply; with the same faults and unclean elections off nothing is lost."""
    unclean = load_workload(WORKLOADS / "ctrl-embedded-unclean.parquet")
    o = outcome(unclean.events, unclean.workload)
    assert o["lost"] > 0 and o["lost_keys"]
    assert o["invariants"]["elected-in-sync-state-set"]["applies"] is False
    assert o["invariants"]["elected-in-sync-state-set"]["violations"] >= 1
    assert o["invariants"]["no-acknowledged-loss"] == {**o["invariants"]["no-acknowledged-loss"], "applies": False,
                                                       "holds": False}
    clean = load_workload(WORKLOADS / "ctrl-embedded-clean.parquet")
    o = outcome(clean.events, clean.workload)
    assert o["lost"] == 0
    assert o["invariants"]["no-acknowledged-loss"]["applies"] and o["invariants"]["no-acknowledged-loss"]["holds"]
    # A machine crash without replicas, replayed: the unflushed tail is lost; nothing promised it.
    run = run_workload(CATALOG["2m-noslave-crash-a"])
    assert run.outcome["lost"] > 0
    assert run.outcome["invariants"]["no-acknowledged-loss"]["applies"] is False
    assert run.outcome["invariants"]["no-acknowledged-loss"]["first"]["what"] == "lost"


# --- the command line ------------------------------------------------------------------------------------
def _cli(*args, env=None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "rmqlab.workload.cli", *map(str, args)], capture_output=True,
                          text=True, cwd=REPO, timeout=120, env=env)


@pytest.mark.real
def test_record_a_hand_written_spec_and_replay_it(tmp_path):
    spec = small_workload(clients=(
        WorkloadClient("producer", ProducerSpec(topic="TinyTopic", interval_ms=200, body_size=32)),
        WorkloadClient("consumer", ConsumerSpec(topic="TinyTopic", group="tiny_consumer"), 500.0, 2_500.0)))
    (tmp_path / "spec.json").write_text(json.dumps(spec.to_dict(), indent=2))
    done = _cli("record", "--spec", tmp_path / "spec.json", "--out", tmp_path / "tiny.parquet")
    assert done.returncode == 0, done.stderr
    rec = load_workload(tmp_path / "tiny.parquet")
    assert rec.workload == spec and rec.meta["runtime"] == "sim"
    done = _cli("replay", tmp_path / "tiny.parquet")
    assert done.returncode == 0, done.stderr
    assert "matches the recorded outcome byte for byte" in done.stdout
    assert "no-acknowledged-loss" in done.stdout

    (tmp_path / "bad.json").write_text(json.dumps({**spec.to_dict(), "duration_ms": -5}))
    done = _cli("record", "--spec", tmp_path / "bad.json", "--out", tmp_path / "bad.parquet")
    assert done.returncode == 2 and "duration_ms" in done.stderr and not (tmp_path / "bad.parquet").exists()
    done = _cli("replay", tmp_path / "spec.json")
    assert done.returncode == 2 and "not a readable Parquet file" in done.stderr


@pytest.mark.real
def test_replay_with_an_exercise_solution(tmp_path):
    import inspect

    from rmqlab.grading.samples import VARIANTS
    from rmqlab.lab.exercises import EXERCISES

    exercise = EXERCISES["truncation_point"]
    source = inspect.getsource(exercise.reference)
    name = exercise.reference.__name__
    (tmp_path / "solution.py").write_text(source + (f"\n{exercise.function} = {name}\n" if name != exercise.function else ""))
    path = WORKLOADS / "ctrl-embedded-partition-master.parquet"
    done = _cli("replay", path, "--exercise", "truncation_point", "--solution", tmp_path / "solution.py", "--json")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == load_workload(path).outcome
    # A wrong rule: the replay says where it parted from RocketMQ's.
    (tmp_path / "wrong.py").write_text(VARIANTS["truncation_point"]["larger-end"].source)
    done = _cli("replay", path, "--exercise", "truncation_point", "--solution", tmp_path / "wrong.py")
    assert done.returncode == 0, done.stderr
    assert "answered differently from RocketMQ's rule: " in done.stdout, done.stdout
    done = _cli("replay", path, "--exercise", "truncation_point", "--solution", tmp_path / "solution.py")
    assert "every call was answered as RocketMQ's rule answers it" in done.stdout, done.stdout
    from rmqlab.lab.exercises import jail
    assert ("NOT SANDBOXED" in done.stderr) != jail.available(), done.stderr
    # Without bubblewrap a practice replay still runs, labelled as unsandboxed.
    done = _cli("replay", path, "--exercise", "truncation_point", "--solution", tmp_path / "solution.py",
                env={**os.environ, "RMQLAB_BWRAP": ""})
    assert done.returncode == 0 and "every call was answered" in done.stdout, done.stderr
    assert "NOT SANDBOXED (practice only)" in done.stderr and "apt-get install bubblewrap" in done.stderr


def test_readme_pyarrow_recipe_reads_a_committed_workload(monkeypatch):
    import re

    monkeypatch.chdir(REPO)  # the recipe names datasets/workloads/... from the repository's root
    text = (REPO / "datasets" / "README.md").read_text(encoding="utf-8")
    section = text.split("### Reading a recorded workload without rmqlab", 1)[1].split("\n## ", 1)[0]
    pyarrow_recipe = re.findall(r"```python\n(.*?)```", section, re.S)[0]
    namespace: dict = {}
    exec(pyarrow_recipe, namespace)
    rec = load_workload(WORKLOADS / "ctrl-embedded-kill-master.parquet")
    assert Workload.from_dict(namespace["spec"]) == rec.workload and namespace["outcome"] == rec.outcome
    assert namespace["events"] == [e.to_record() for e in rec.events]


def test_a_send_in_flight_when_the_next_fault_strikes_does_not_count_against_the_period_before():
    # broker-n1 dies at 1000 ms (writes go on), broker-n0 at 2000 ms; a send invoked at 1999.7 ms
    # is failed by the second fault, not by the first: the first period recovered.
    from rmqlab.workload.outcome import recovery

    events: list[TraceEvent] = []

    def ev(t: float, node: str, kind: str, **fields) -> None:
        events.append(TraceEvent(len(events), t, node, kind, fields))

    def send(op_id: int, t: float, done: float, ok: bool) -> None:
        ev(t, "producer", "client", type="invoke", process=0, f="send", op_id=op_id, value=None)
        pending.append((done, op_id, ok))

    pending: list[tuple[float, int, bool]] = []
    timeline = [(1000.0, "broker-n1"), (2000.0, "broker-n0")]
    for i, t in enumerate((900.0, 1100.0, 1500.0, 1999.7, 2100.0)):
        send(i, t, t + (3.2 if t == 1999.7 else 1.5), ok=t not in (1999.7, 2100.0))
    for done, op_id, ok in sorted(pending):
        while timeline and timeline[0][0] < done:
            at, node = timeline.pop(0)
            ev(at, node, "node.kill", signal=9)
        ev(done, "producer", "client", type="ok" if ok else "fail", process=0, f="send", op_id=op_id,
           value={"send_status": "SEND_OK"} if ok else None)
    events.sort(key=lambda e: e.time_ms)
    events = [TraceEvent(i, e.time_ms, e.node, e.kind, e.fields) for i, e in enumerate(events)]
    first, second = recovery(events, None, 0.0)["recovery"]
    assert (first["node"], first["recovered"]) == ("broker-n1", True)
    assert first["recovery_ms"] == pytest.approx(101.5)  # the first send after the fault, acknowledged
    assert (second["node"], second["recovered"]) == ("broker-n0", False)
