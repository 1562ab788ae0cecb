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
    mode: the controller elects a master with all three in the SyncStateSet, the broker knows the
    topic and the group from the kept files, and the restarted consumer reads the new queues from
    offset 0: nothing acknowledged, before or after the upgrade, is lost or read twice."""
    run = upgraded("procedure")
    assert min(run.drained.values()) > 0, run.drained
    assert run.kept_files == {b: ["config/subscriptionGroup.json", "config/topics.json"] for b in BROKERS}
    assert run.elected in BROKERS and len(run.sync_state_set) == 3, (run.elected, run.sync_state_set)
    assert run.topics_kept
    stats = run.total_queue.stats
    assert run.total_queue.valid and run.lost == 0 and stats["duplicated"] == 0, stats
    assert stats["acknowledged"] > sum(run.drained.values()) and stats["read"] == stats["acknowledged"], stats
    # consumerOffset.json is gone: the group has no offset, the broker answers 0 for a queue whose
    # first message is in memory, and the consumer reads each new queue from its first message.
    assert run.resumed_at == dict.fromkeys(range(4), 0), run.resumed_at
    assert run.committed_after == run.max_after and min(run.max_after.values()) > 0, \
        (run.committed_after, run.max_after)


def test_keeping_consumer_offsets_json_skips_what_was_sent_after_the_upgrade():
    """The old offsets lie past the new queues' ends; the broker moves the consumer to each queue's
    end at its first pull, past the messages sent since the upgrade: never read."""
    run = upgraded("offsets-kept")
    assert run.kept_files[BROKERS[0]] == ["config/consumerOffset.json", "config/subscriptionGroup.json",
                                          "config/topics.json"]
    assert run.lost > 0, run.total_queue.stats
    assert all(op.invoke_seq > run.restarted_seq for op in lost_sends(run))
    assert all(0 < run.resumed_at[q] < run.drained[q] for q in range(4)), (run.resumed_at, run.drained)


def test_a_consumer_left_running_through_the_upgrade_goes_on_from_its_old_offsets():
    run = upgraded("consumer-running")
    assert run.kept_files[BROKERS[0]] == ["config/subscriptionGroup.json", "config/topics.json"]
    assert run.resumed_at == run.drained, (run.resumed_at, run.drained)
    lost = lost_sends(run)
    assert lost and all(op.invoke_seq > run.restarted_seq for op in lost)
    assert all(op.value["queue_offset"] < run.drained[op.value["queue_id"]] for op in lost)


def test_unknown_case_is_refused():
    with pytest.raises(ValueError, match="case must be one of"):
        run_upgrade("sideways")
