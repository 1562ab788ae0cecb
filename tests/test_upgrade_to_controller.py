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


def upgraded(case: str, **options):
    run = run_upgrade(case, seed=7, **options)
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
    # The epoch file: epoch 1 starts at the first master's maxPhyOffset, as RocketMQ's
    # AutoSwitchHAService.changeToMaster writes it: the log kept from before is in no epoch. The
    # slave took the master's entry, without truncating (its epoch file was empty).
    s = run.stopped_at[MASTER]
    assert run.epochs == {MASTER: [(1, s)], SLAVE: [(1, s)]}, run.epochs
    assert second_started_log(run, "doTruncate: the local epoch cache is empty")
    assert run.first_difference is None


def test_misaligned_master_first_leaves_the_slave_behind_for_good_as_rocketmqs_code_does(caplog):
    """The asynchronous master acknowledged writes alone after its slave stopped: its log is
    longer. Started first, it is elected, with epoch 1 from its maxPhyOffset. The slave, whose log
    ends below that, asks for an offset no epoch covers: never served (the order the docs recommend
    loses nothing, but the group runs on one replica)."""
    run = upgraded("master-first")
    assert run.stopped_at[MASTER] > run.stopped_at[SLAVE], run.stopped_at
    assert run.elected == MASTER
    assert run.epochs[MASTER] == [(1, run.stopped_at[MASTER])], run.epochs
    assert run.max_offsets[SLAVE] == run.stopped_at[SLAVE] < run.stopped_at[MASTER] < run.max_offsets[MASTER]
    assert len(run.sync_state_set) == 1, run.sync_state_set
    assert any(r.getMessage().startswith(f"Failed to find an epochEntry to match nextTransferFromWhere "
                                         f"{run.stopped_at[SLAVE]}") for r in caplog.records)
    assert run.total_queue.valid and run.lost == 0, run.total_queue.stats


def test_misaligned_master_first_with_rmqlabs_fix_the_slave_catches_up_and_nothing_is_lost():
    """rmqlabFirstEpochFromMinOffset=true: the first epoch starts at the commitlog's min offset, so
    it covers the log kept from before; the slave is served from where its log ends and catches up.
    (The previous test is the same run without the fix.)"""
    run = upgraded("master-first", first_epoch_from_min_offset=True)
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


def test_an_empty_replica_never_joins_the_upgraded_group_as_rocketmqs_code_goes(aligned):
    """After the aligned upgrade a third replica starts on an empty disk: it asks for the master's
    first file (offset 0), below epoch 1 (which starts at the first master's maxPhyOffset): never
    served, never in the SyncStateSet."""
    from rmqlab.demo.upgrade_to_controller import add_empty_replica, max_offset

    c = aligned.cluster
    third = add_empty_replica(c)
    c.run_for(30_000)
    assert max_offset(c, third) == 0
    assert len(c.components[MASTER].replicas_manager.sync_state_set) == 2


def test_with_rmqlabs_fix_an_empty_replica_joins_the_upgraded_group():
    """rmqlabFirstEpochFromMinOffset=true: epoch 1 starts at offset 0; the empty replica copies the
    whole log kept from before the upgrade and joins the SyncStateSet."""
    from rmqlab.demo.upgrade_to_controller import add_empty_replica, max_offset

    run = upgraded("aligned", first_epoch_from_min_offset=True)
    assert run.epochs == {MASTER: [(1, 0)], SLAVE: [(1, 0)]}, run.epochs
    c = run.cluster
    third = add_empty_replica(c)
    c.run_until(lambda: max_offset(c, third) == max_offset(c, MASTER)
                and len(c.components[MASTER].replicas_manager.sync_state_set) == 3, 60_000, 500)
    assert run.stopped_at[MASTER] < max_offset(c, third)
    assert c.components[third].replicas_manager.get_epoch_entries()[0].start_offset == 0
