"""Master–slave → controller mode in place, with the data kept (RocketMQ's docs/en/controller/deploy.md
and docs/cn/controller/deploy.md, "Upgrade Considerations" / "升级注意事项"), on the simulator:
rmqlab.demo.upgrade_to_controller runs conf/2m-2s-async with a standalone controller under a
producer and a push consumer, and upgrades group broker-a. The operator's procedure is
docs/upgrade-to-controller-mode.md; tests/test_upgrade_to_controller_real.py runs it on processes.

Judged from the trace (Jepsen's total queue: every acknowledged send is read) and the store files
(the epoch files, the two commitlogs)."""

from __future__ import annotations

import pytest

from rmqlab.demo.upgrade_to_controller import GROUP, MASTER, SLAVE, run_upgrade
from tests.sim_helpers import track


def upgraded(case: str):
    run = run_upgrade(case, seed=7)
    track(run.cluster)
    return run


@pytest.fixture(scope="module")
def aligned():
    """The aligned upgrade, shared by two tests (the second adds a replica to its cluster)."""
    run = run_upgrade("aligned", seed=7)
    yield run
    run.cluster.close()


def second_started_log(run, prefix: str) -> list:
    other = SLAVE if run.started_first == MASTER else MASTER
    return [e for e in run.cluster.events() if e.node == other and e.kind == "log"
            and e.fields.get("message", "").startswith(prefix)]


def test_aligned_upgrade_keeps_every_acknowledged_message_and_the_consumer_offsets(aligned):
    """Writes stopped (brokerPermission 4), the slave caught up, both restarted in controller mode,
    master first: the controller elects the old master, the old slave joins the SyncStateSet,
    nothing acknowledged is lost and the restarted consumer resumes where it committed."""
    run = aligned
    assert run.stopped_at[MASTER] == run.stopped_at[SLAVE] > 0, run.stopped_at
    assert run.elected == MASTER
    assert len(run.sync_state_set) == 2, run.sync_state_set
    assert run.max_offsets[MASTER] == run.max_offsets[SLAVE] > run.stopped_at[MASTER], run.max_offsets
    assert run.total_queue.valid and run.lost == 0, run.total_queue.stats
    assert run.total_queue.stats["acknowledged"] > 0 and run.total_queue.stats["duplicated"] == 0
    # The restarted consumer asks the new master for the offsets committed on the old one.
    assert run.resumed_at == run.committed_before and min(run.committed_before.values()) > 0, \
        (run.resumed_at, run.committed_before)
    # The epoch file: epoch 1 holds the log the first master had (RocketMQ would start it at the
    # maxPhyOffset of the first election; see rmqlab.demo.upgrade_to_controller); the slave took
    # the master's entry, without truncating (its epoch file was empty).
    assert run.epochs == {MASTER: [(1, 0)], SLAVE: [(1, 0)]}, run.epochs
    assert second_started_log(run, "doTruncate: the local epoch cache is empty")
    assert run.first_difference is None


def test_misaligned_master_first_the_slave_catches_up_and_nothing_is_lost():
    """The asynchronous master acknowledged writes alone after its slave stopped: its log is
    longer. Started first, it is elected; the slave, whose log ends below the master's at the
    upgrade, is served from there and catches up. Fails without the first epoch covering the
    existing log: the slave then asks for an offset no epoch covers and is never served."""
    run = upgraded("master-first")
    assert run.stopped_at[MASTER] > run.stopped_at[SLAVE], run.stopped_at
    assert run.elected == MASTER
    assert run.max_offsets[SLAVE] == run.max_offsets[MASTER] > run.stopped_at[MASTER], run.max_offsets
    assert len(run.sync_state_set) == 2, run.sync_state_set
    assert run.epochs[SLAVE] == run.epochs[MASTER] == [(1, 0)], run.epochs
    assert run.first_difference is None
    assert run.total_queue.valid and run.lost == 0, run.total_queue.stats
    assert run.resumed_at == run.committed_before, (run.resumed_at, run.committed_before)


def test_misaligned_slave_first_loses_what_the_master_acknowledged_alone():
    """The hazard of the docs' note: the old slave, started first, is elected with the shorter
    log. What the old master acknowledged after the slave stopped is not on the new master: the
    consumer never reads it. The old master joins as a slave with an empty epoch file: it is not
    truncated (AutoSwitchHAClient.doTruncate skips an empty epoch cache), reports its longer log,
    enters the SyncStateSet, and receives the new master's bytes after its own: the two commitlogs
    differ from the offset where the slave's log ended. The consumer offsets come from the old
    slave's last SlaveSynchronize copy: it re-reads a little."""
    run = upgraded("slave-first")
    assert run.stopped_at[MASTER] > run.stopped_at[SLAVE], run.stopped_at
    assert run.elected == SLAVE
    assert run.lost > 0, run.total_queue.stats
    lost = [v for v in run.total_queue.violations if v.what == "lost"]
    assert {v.details["broker_name"] for v in lost} == {GROUP}
    assert run.lost_acked_by_master_alone, "the lost messages should include those the master acknowledged alone"
    assert second_started_log(run, "doTruncate: the local epoch cache is empty")
    assert len(run.sync_state_set) == 2, run.sync_state_set
    assert run.first_difference is not None
    assert run.stopped_at[SLAVE] <= run.first_difference < run.stopped_at[MASTER], \
        (run.first_difference, run.stopped_at)
    assert all(run.resumed_at[q] <= run.committed_before[q] for q in run.resumed_at), \
        (run.resumed_at, run.committed_before)
    assert run.total_queue.stats["duplicated"] > 0


@pytest.mark.parametrize("case", ["sideways"])
def test_unknown_case_is_refused(case):
    with pytest.raises(ValueError, match="case must be one of"):
        run_upgrade(case)


def test_an_empty_replica_joins_the_upgraded_group(aligned):
    """After the aligned upgrade a third replica starts on an empty disk: it asks for the master's
    first file (offset 0), inside epoch 1, and copies the whole log kept from before the upgrade.
    Fails without the first epoch covering that log: offset 0 lies below every epoch."""
    from rmqlab.demo.upgrade_to_controller import add_empty_replica, max_offset

    run = aligned
    c = run.cluster
    third = add_empty_replica(c)
    c.run_until(lambda: max_offset(c, third) == max_offset(c, MASTER)
                and len(c.components[MASTER].replicas_manager.sync_state_set) == 3, 60_000, 500)
    assert run.stopped_at[MASTER] < max_offset(c, third)
    assert c.components[third].replicas_manager.get_epoch_entries()[0].start_offset == 0
