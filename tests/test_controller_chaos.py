"""With allAckInSyncStateSet=true and unclean election off, no acknowledged message
is lost across 200 seeded random fault schedules (kill, crash, suspend, partition, loss on brokers
and controllers), and the replicas agree byte for byte on the committed prefix afterwards.

Maelstrom's shape (rmqlab.checker): a seeded fault schedule (the nemesis), a queue workload (a
producer at 10 sends/s, then a pull consumer draining every queue) and checkers that read only the
history — the trace, plus the replicas' store files for the byte-for-byte check. Each schedule:
a 3-controller, 3-replica controller-standalone cluster, 14 virtual s of faults, 6 s quiet, then
convergence and the drain (~35 virtual s, 1-3 s of wall time). The 200 schedules run in two
worker processes (each schedule is independent and seeded: same seed, same run). Seeds that break
the claim are findings, listed in KNOWN_FINDINGS with what the checkers name.
"""

from __future__ import annotations

import collections
import concurrent.futures
import logging
import multiprocessing
import os
import time

import pytest

from rmqlab.checker import (FaultSchedule, check_all, check_replicas, check_single_master, check_total_queue,
                            random_schedule, read_commitlog, run_and_check, run_chaos)
from rmqlab.common.cpu_quota import available_processors
from rmqlab.remoting.protocol.epoch_entry import EpochEntry
from rmqlab.store.epoch_file_cache import EpochFileCache
from rmqlab.trace import Tracer, trace_hash

SEEDS = range(200)
SCHEDULE = {"fault_window_ms": 14_000, "quiet_ms": 6_000}
CLEAN = {"enableElectUncleanMaster": False}
BROKERS = ["broker-n0", "broker-n1", "broker-n2"]
CONTROLLERS = ["controller-n0", "controller-n1", "controller-n2"]
# Found by running seeds 0..29 with enableElectUncleanMaster=true (run_and_check(seed,
# schedule_options=SCHEDULE, controller_overrides=UNCLEAN) for each, in order): 26 is the first
# whose total-queue check fails (82 acknowledged sends lost; the others elect no replica outside
# the SyncStateSet while it lacks acknowledged writes).
UNCLEAN_LOSS_SEED = 26
UNCLEAN = {"enableElectUncleanMaster": True}
# Findings of this test (reported, not worked around): seeds whose history breaks the claim, with
# the first violation each checker names. Asserted as found, so a fix shows up here as a failure.
# None open. Found and fixed: 173 (ASYNC_FLUSH, the conf/controller template): the master
# machine-crashed and lost its whole unflushed tail (every acknowledged message so far, held by both
# slaves); no controller noticed within the 3 s it was down, so its CONTROLLER_REGISTER_BROKER was
# answered "master = you" in the same epoch 1; it wrote new records there, and the slaves' handshake
# found epoch 1 on both sides and kept their own, different bytes below the master's shorter end
# (18 acknowledged messages lost, replicas diverged at offset 3). Fixed on the controller: the
# recorded master registering again is taken as gone and a new epoch is elected, ranking it by the
# log it now reports (tests/test_controller_mode_bugs.py, test_controller_core.py).
KNOWN_FINDINGS: dict[int, dict[str, str]] = {}


def _check_seed(seed: int):
    logging.disable(logging.CRITICAL)  # the cluster's WARN lines, 200 times over
    return run_and_check(seed, schedule_options=SCHEDULE, controller_overrides=CLEAN)


@pytest.mark.slow  # ~470 CPU s: 200 schedules of ~2.3 CPU s in a pool of two workers
def test_200_seeded_fault_schedules_lose_no_acknowledged_message_and_replicas_agree():
    t0 = time.monotonic()
    workers = min(2, available_processors())
    with concurrent.futures.ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("fork")) as pool:
        reports = list(pool.map(_check_seed, SEEDS))
    wall = time.monotonic() - t0
    invalid = [r for r in reports if not r.valid and r.seed not in KNOWN_FINDINGS]
    for seed, expected in KNOWN_FINDINGS.items():
        found = {name: res.first.what for name, res in reports[seed].results.items() if not res.valid}
        assert found == expected, f"seed {seed}: the known finding changed: {reports[seed]}"
    faults = collections.Counter(op.f for r in reports for op in r.schedule.faults)
    failovers = sum(1 for r in reports if len(r.results["single-master"].stats["epochs"]) > 1)
    lost_any = sum(r.results["total-queue"].stats["lost"] for r in reports)
    print(f"\n{len(reports)} schedules in {wall:.0f} s ({workers} workers): faults {dict(faults)} "
          f"({sum(faults.values()) / len(reports):.1f} per schedule); {failovers} with a failover; "
          f"{sum(not r.converged for r in reports)} not converged; "
          f"{sum(r.results['total-queue'].stats['acknowledged'] for r in reports)} acknowledged sends, "
          f"{lost_any} lost")
    assert not invalid, "\n".join(str(r) for r in invalid)
    # Not vacuous: every schedule acknowledged and replicated data, faults of every kind ran on
    # brokers and controllers, and many schedules forced elections.
    for r in reports:
        if r.seed in KNOWN_FINDINGS:
            continue
        assert r.results["total-queue"].stats["acknowledged"] > 0, str(r)
        assert r.results["replicas"].stats["broker-a"]["committed_offset"] > 0, str(r)
    assert set(faults) == {"kill", "crash", "suspend", "partition", "loss"}
    targets = {op.node for r in reports for op in r.schedule.faults if op.node}
    assert {"@master", *BROKERS, *CONTROLLERS} <= targets
    assert failovers >= len(reports) // 5, f"only {failovers} schedules had a failover"


def test_unclean_election_loses_acknowledged_messages_and_the_checker_finds_them():
    """The same schedule with enableElectUncleanMaster=true: a replica outside the SyncStateSet
    is elected and what the lost master acknowledged is gone — the total-queue checker names it,
    with the master that acknowledged it and the election after. Clean, nothing is lost."""
    unclean = run_and_check(UNCLEAN_LOSS_SEED, schedule_options=SCHEDULE, controller_overrides=UNCLEAN)
    queue = unclean.results["total-queue"]
    print(f"\n{unclean}")
    assert not queue.valid and queue.first.what == "lost"
    assert queue.stats["lost"] > 0 and {v.what for v in queue.violations} == {"lost"}
    d = queue.first.details
    assert d["master"] in BROKERS and d["next_master"] in BROKERS and d["next_epoch"] > d["master_epoch"]
    assert queue.first.node == "producer" and queue.first.seq is not None
    clean = run_and_check(UNCLEAN_LOSS_SEED, schedule_options=SCHEDULE, controller_overrides=CLEAN)
    assert clean.valid, str(clean)


def test_a_chaos_run_is_reproducible_from_its_seed():
    """Same seed, same schedule, same trace byte for byte (so a failing seed can be replayed and
    its first violation looked at in a lab)."""
    hashes = []
    for _ in range(2):
        run = run_chaos(9, schedule_options=SCHEDULE, controller_overrides=CLEAN)
        hashes.append(trace_hash(run.events))
        run.cleanup()
    assert hashes[0] == hashes[1]


# --- the checkers themselves -------------------------------------------------------------------------
def test_schedules_are_seeded_and_undo_every_fault_before_the_quiet_period():
    a = random_schedule(5, BROKERS, CONTROLLERS, **SCHEDULE)
    assert a == random_schedule(5, BROKERS, CONTROLLERS, **SCHEDULE)
    assert a != random_schedule(6, BROKERS, CONTROLLERS, **SCHEDULE)
    for seed in range(50):
        s = random_schedule(seed, BROKERS, CONTROLLERS, **SCHEDULE)
        ids = collections.Counter(op.fault_id for op in s.ops)
        assert set(ids.values()) == {2}, f"seed {seed}: a fault without exactly one undo\n{s}"
        assert all(op.time_ms <= s.fault_window_ms for op in s.ops)
        assert s.faults, f"seed {seed}: no fault\n{s}"


def test_replica_checker_finds_a_flipped_byte_in_the_committed_prefix():
    run = run_chaos(3, schedule=FaultSchedule(3, (), 2_000, 2_000))
    try:
        assert check_all(run)["replicas"].valid
        committed = check_replicas(run.events, run.stores).stats["broker-a"]["committed_offset"]
        assert committed > 1000
        victim = "broker-n1"
        path = os.path.join(run.stores[victim], "commitlog", sorted(os.listdir(os.path.join(run.stores[victim], "commitlog")))[0])
        with open(path, "r+b") as f:
            f.seek(777)
            b = f.read(1)
            f.seek(777)
            f.write(bytes([b[0] ^ 0xFF]))
        assert read_commitlog(run.stores[victim])[777] != b[0]
        r = check_replicas(run.events, run.stores)
        assert not r.valid and r.first.what == "commitlog-diverged"
        assert r.first.node == victim and r.first.details["offset"] == 777
        # An epoch file that starts epoch 1 elsewhere than the other replicas' files.
        epochs = EpochFileCache(os.path.join(run.stores["broker-n2"], "epochFileCheckpoint"))
        epochs.init_cache_from_entries([EpochEntry(1, 10)])
        r = check_replicas(run.events, run.stores)
        assert [(v.what, v.node) for v in r.violations] == [("commitlog-diverged", victim),
                                                             ("epochs-diverged", "broker-n2")]
        assert check_total_queue(run.events).valid
    finally:
        run.cleanup()


def test_single_master_checker_finds_two_masters_of_one_epoch():
    tracer = Tracer(lambda: 0.0)
    tracer.emit("broker-n0", "epoch", broker_set="broker-a", epoch=1, start_offset=0)
    tracer.emit("broker-n0", "role", from_=None, to="SYNC_MASTER", component="broker", epoch=1)
    tracer.emit("broker-n1", "epoch", broker_set="broker-a", epoch=2, start_offset=100)
    tracer.emit("broker-n1", "role", from_="SLAVE", to="SYNC_MASTER", component="broker", epoch=2)
    assert check_single_master(tracer.events).valid  # a stale master of epoch 1 is fenced by epoch 2
    bad = tracer.emit("broker-n2", "role", from_="SLAVE", to="SYNC_MASTER", component="broker", epoch=2)
    tracer.emit("broker-n2", "epoch", broker_set="broker-a", epoch=2, start_offset=100)  # its set, learnt later
    r = check_single_master(tracer.events)
    assert not r.valid and r.first.what == "two-masters" and (r.first.node, r.first.seq) == ("broker-n2", bad.seq)
    assert r.first.details == {"broker_set": "broker-a", "epoch": 2, "first": "broker-n1", "first_seq": 3}


def test_total_queue_checker_classifies_lost_unexpected_and_indeterminate_sends():
    tracer = Tracer(lambda: 0.0)

    def op(node, op_id, f, invoke, type_, value):
        tracer.emit(node, "client", type="invoke", process=0, f=f, op_id=op_id, value=invoke)
        return tracer.emit(node, "client", type=type_, process=0, f=f, op_id=op_id, value=value)

    msg = lambda k: {"topic": "T", "uniq_key": k, "keys": None, "tags": None, "body_crc": 1}  # noqa: E731
    acked = op("p", 1, "send", msg("A"), "ok", {"send_status": "SEND_OK"})
    op("p", 2, "send", msg("B"), "ok", {"send_status": "SEND_OK"})
    op("p", 3, "send", msg("C"), "info", None)
    op("p", 4, "send", msg("D"), "ok", {"send_status": "FLUSH_SLAVE_TIMEOUT"})  # not acknowledged
    op("r", 1, "pull", {}, "ok", {"messages": [msg("B"), msg("B"), msg("C")]})
    r = check_total_queue(tracer.events)
    assert r.stats == {"attempted": 4, "acknowledged": 2, "failed": 0, "indeterminate": 2, "read": 2, "lost": 1,
                       "duplicated": 1, "recovered": 1, "unexpected": 0}
    assert [(v.what, v.seq) for v in r.violations] == [("lost", acked.seq)]
    op("r", 2, "pull", {}, "ok", {"messages": [msg("A"), msg("Z")]})
    r = check_total_queue(tracer.events)
    assert [v.what for v in r.violations] == ["unexpected"] and r.first.details["uniq_key"] == "Z"
