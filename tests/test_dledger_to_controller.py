"""DLedger mode → controller mode (RocketMQ's docs/cn/controller/deploy.md 「升级注意事项」, docs/en/controller/
deploy.md "Upgrade Considerations"), on the simulator: rmqlab.demo.dledger_to_controller stops
writes to conf/dledger's group, waits until the consumer group has read everything, clears each
broker's store except config/topics.json and config/subscriptionGroup.json and restarts the three
brokers in controller mode. The operator's procedure is docs/upgrade-to-controller-mode.md;
tests/test_dledger_to_controller_real.py runs it on processes.

Judged from the trace (Jepsen's total queue: every acknowledged send is read) and the brokers' state."""

from __future__ import annotations

import pytest

from rmqlab.demo.dledger_to_controller import BROKERS, run_upgrade
from rmqlab.trace import client_ops
from tests.sim_helpers import track


def upgraded(case: str):
    run = run_upgrade(case, seed=7)
    track(run.cluster)
    return run


def lost_sends(run):
    lost = {v.details["uniq_key"] for v in run.total_queue.violations if v.what == "lost"}
    return [op for op in client_ops(run.cluster.events())
            if op.f == "send" and op.type == "ok" and op.invoke_value["uniq_key"] in lost]


def test_the_procedure_keeps_every_acknowledged_message_the_topics_and_the_subscription_groups():
    """Drained, cleared but for topics.json and subscriptionGroup.json, restarted in controller
    mode: the controller elects a master with all three in the SyncStateSet, every broker knows a
    topic and a subscription group no client uses (so none auto-creates them) from the kept files, and the restarted consumer reads the new queues from
    offset 0: nothing acknowledged, before or after the upgrade, is lost or read twice."""
    run = upgraded("procedure")
    assert min(run.drained.values()) > 0, run.drained
    assert run.acked_after_drain == []   # the producer's refreshed route had no writable queue
    assert run.kept_files == {b: ["config/subscriptionGroup.json", "config/topics.json"] for b in BROKERS}
    assert run.elected in BROKERS and len(run.sync_state_set) == 3, (run.elected, run.sync_state_set)
    assert run.metadata_kept == dict.fromkeys(BROKERS, True), run.metadata_kept
    stats = run.total_queue.stats
    assert run.total_queue.valid and run.lost == 0 and stats["duplicated"] == 0, stats
    assert stats["acknowledged"] > sum(run.drained.values()) and stats["read"] == stats["acknowledged"], stats
    # consumerOffset.json is gone: the group has no offset, the broker answers 0 for a queue whose
    # first message is in memory, and the consumer reads each new queue from its first message.
    assert run.resumed_at == dict.fromkeys(range(4), 0), run.resumed_at
    assert run.committed_after == run.max_after and min(run.max_after.values()) > 0, \
        (run.committed_after, run.max_after)


def assert_old_offsets_skip_new_messages(run):
    """The consumer resumed above offset 0 in every queue; what it never read was sent after the
    upgrade and lies below where it resumed."""
    assert all(run.resumed_at[q] > 0 for q in range(4)), run.resumed_at
    lost = lost_sends(run)
    assert lost and all(op.invoke_seq > run.restarted_seq for op in lost), run.total_queue.stats
    assert all(op.value["queue_offset"] < run.resumed_at[op.value["queue_id"]] for op in lost)


def test_keeping_consumer_offsets_json_skips_what_was_sent_after_the_upgrade():
    """The old offsets lie past the new queues' ends: the consumer resumes at them (or, where the
    master corrects an offset past a queue's end, at that end): the messages sent since the upgrade
    below that point are never read."""
    run = upgraded("offsets-kept")
    assert run.kept_files[BROKERS[0]] == ["config/consumerOffset.json", "config/subscriptionGroup.json",
                                          "config/topics.json"]
    assert_old_offsets_skip_new_messages(run)
    assert all(run.resumed_at[q] <= run.drained[q] for q in range(4)), (run.resumed_at, run.drained)


def test_a_consumer_left_running_through_the_upgrade_goes_on_from_its_old_offsets():
    """Its offsets are in its memory, not in the deleted file: it goes on from about there, not from 0."""
    run = upgraded("consumer-running")
    assert run.kept_files[BROKERS[0]] == ["config/subscriptionGroup.json", "config/topics.json"]
    assert_old_offsets_skip_new_messages(run)
    assert all(run.resumed_at[q] <= run.drained[q] for q in range(4)), (run.resumed_at, run.drained)


def test_draining_before_the_producers_refresh_their_routes_loses_what_the_group_acknowledged_since():
    """brokerPermission=4 does not refuse sends to an unordered topic: until its route refresh the
    producer still sends to the read-only master, which stores and acknowledges them. Drained at
    once, the group acknowledges messages after the drain, and they go with the DLedger files."""
    run = upgraded("no-route-wait")
    assert run.acked_after_drain, "the read-only master should still have acknowledged sends"
    lost = {op.invoke_value["uniq_key"] for op in lost_sends(run)}
    assert lost and lost <= set(run.acked_after_drain), (lost, run.acked_after_drain)


def test_unknown_case_is_refused():
    with pytest.raises(ValueError, match="case must be one of"):
        run_upgrade("sideways")
