"""Controller mode after a restart: the consume queue never serves beyond the confirm offset.

RocketMQ fences a controller-mode broker before its store loads
(broker/src/main/java/org/apache/rocketmq/broker/BrokerController.java, recoverAndInitService), so
CommitLog.getConfirmOffset is the checkpoint's confirmPhyOffset while it recovers:
recoverAbnormally dispatches only the messages below it, and DefaultMessageStore.start sets the
dispatcher's reputFromOffset there (store/src/main/java/org/apache/rocketmq/store/CommitLog.java,
DefaultMessageStore.java).
"""

from __future__ import annotations

from tests.controller_mode_helpers import BROKERS, ok, send, start


def test_a_replica_restarted_after_a_crash_dispatches_only_up_to_its_stored_confirm_offset():
    """RocketMQ fences a controller-mode broker before its store loads (BrokerController.
    recoverAndInitService), so CommitLog.getConfirmOffset is the checkpoint's confirmPhyOffset and
    recoverAbnormally dispatches only the messages below it; the dispatcher then starts there.
    A slave holds the last batch before the master's next frame tells it the batch is confirmed;
    killed then, it must come back without those messages in its consume queue (slaveReadEnable
    would serve them before its group has confirmed them)."""
    c = start(seed=61, allAckInSyncStateSet=True)
    slave = [n for n in BROKERS if n != c.master()][0]
    assert len(ok(send(c, 20, "a"))) == 20
    c.run_for(100)
    store = c.components[slave].message_store
    assert store.get_max_phy_offset() > store.store_checkpoint.confirm_phy_offset  # the last batch
    c.nemesis.kill(slave)
    c.nemesis.restart(slave)

    def loaded():
        component = c.components.get(slave)
        return getattr(component, "message_store", None) is not None and component.message_store.running

    c.run_until(loaded, 10_000)
    store = c.components[slave].message_store
    assert not store.load_report.last_exit_ok
    confirm = store.store_checkpoint.confirm_phy_offset
    assert 0 < confirm < store.get_max_phy_offset()
    assert max(cq.max_physic_offset for cq in store.consume_queues()) <= confirm
