"""The claims of RocketMQ 5.0's deployment documentation (部署方式: single master, 2m-noslave,
2m-2s-async, 2m-2s-sync) about the classic deployment modes, as seeded experiments.

Each experiment builds a mode with rmqlab.cluster from the conf/ templates, drives it with
rmqlab's clients, injects the fault of the claim, and judges the outcome from the event trace.
"""

from __future__ import annotations

from rmqlab.checker.checkers import check_total_queue, read_commitlog, send_acknowledged
from rmqlab.client import ClientProcess, DefaultMQPullConsumer, SendStatus
from rmqlab.cluster import Cluster
from rmqlab.demo import mode_comparison as mc
from rmqlab.common.message.message_decoder import decode_message_id
from rmqlab.trace import client_ops
from tests.cluster_helpers import TOPIC, send, start


def acked_keys(cluster: Cluster) -> set[str]:
    return {op.invoke_value["uniq_key"] for op in client_ops(cluster.events())
            if op.f == "send" and op.type == "ok"}


def readable_keys(cluster: Cluster, name: str) -> set[str]:
    """Every message a fresh pull consumer can read now (from masters, or slaves of dead masters)."""
    cluster.add_client(name, lambda: ClientProcess(consumer=DefaultMQPullConsumer(name, cluster.namesrv_addr)))
    consumer = cluster.sim.components[name]["consumer"]

    async def read():
        keys = set()
        for mq in await consumer.fetch_subscribe_message_queues(TOPIC):
            offset = 0
            while True:
                r = await consumer.pull(mq, "*", offset, 32)
                if not r.msg_found_list:
                    break
                keys.update(m.get_property("UNIQ_KEY") for m in r.msg_found_list)
                offset = r.next_begin_offset
        return keys

    return cluster.sim.run(read())


def test_2m_noslave_survives_a_master_but_its_messages_wait_for_it():
    c = start("2m-noslave", seed=3)
    first = send(c, 20, "before")
    assert all(r.send_status is SendStatus.SEND_OK for r in first)
    on_a = {r.msg_id for r in first if r.message_queue.broker_name == "broker-a"}
    assert on_a and len(on_a) < 20  # spread over both masters
    c.nemesis.kill("broker-a")
    c.run_for(1_000)
    during = send(c, 20, "during")
    # "单个Master宕机或重启维护对应用无影响": every send succeeds, on broker-b.
    assert all(not isinstance(r, Exception) and r.message_queue.broker_name == "broker-b" for r in during)
    # "这台机器上未被消费的消息在机器恢复之前不可订阅": broker-a's messages are unreadable meanwhile...
    assert not (readable_keys(c, "reader-1") & on_a)
    c.nemesis.restart("broker-a")
    c.run_for(35_000)  # re-registration and the clients' 30 s route refresh
    # ...and readable again once it is back (process crash: its page cache kept everything).
    assert on_a <= readable_keys(c, "reader-2")
    c.close()


def test_2m_2s_async_master_machine_crash_loses_the_unreplicated_tail():
    c = start("2m-2s-async", seed=5)
    send(c, 30, "warm")
    # Replicated at once, but the slave learns the auto-created topic only from SlaveSynchronize,
    # every 60 s: before that it refuses pulls ("topic[...] not exist") even though it has the data.
    c.run_for(65_000)
    burst = send(c, 40, "burst")  # acknowledged at once (ASYNC_MASTER), replicated ~100 ms later
    assert all(r.send_status is SendStatus.SEND_OK for r in burst)
    c.nemesis.crash("broker-a")  # power loss right after the burst: nothing of it flushed
    # A dead machine sends no FIN: the name server drops broker-a only when its 120 s live timeout
    # expires, and clients see that on their next 30 s route refresh.
    c.run_for(160_000)
    # Consumers keep reading broker-a's queues, now from its slave.
    survivors = readable_keys(c, "reader")
    acked = acked_keys(c)
    lost = acked - survivors
    # "Master宕机，磁盘损坏情况下会丢失少量消息": the tail acknowledged but not yet replicated.
    assert lost, "this seed crashes the master before the burst replicated"
    assert all(k in {r.msg_id for r in burst} for k in lost)  # only the unreplicated burst tail
    c.close()


def test_2m_2s_sync_loses_nothing_acknowledged_and_the_slave_stays_a_slave():
    c = start("2m-2s-sync", seed=5)  # templates: totalReplicas=2, inSyncReplicas=2 (RIP-34)
    send(c, 30, "warm")
    c.run_for(65_000)  # SlaveSynchronize copies the topic to the slave (see above)
    burst = send(c, 40, "burst")
    assert all(r.send_status is SendStatus.SEND_OK for r in burst)  # each waited for the slave's ack
    c.nemesis.crash("broker-a")
    c.run_for(160_000)  # the name server's 120 s live timeout, then a route refresh (see above)
    assert acked_keys(c) <= readable_keys(c, "reader")  # "服务可用性与数据可用性都非常高"
    # "目前版本在主节点宕机后，备机不能自动切换为主机": no automatic failover in this mode.
    roles = [e.fields["to"] for e in c.events() if e.kind == "role" and e.node == "broker-a-s"]
    assert roles and all(r == "SLAVE" for r in roles)
    after = send(c, 10, "after")
    assert all(not isinstance(r, Exception) and r.message_queue.broker_name == "broker-b" for r in after)
    c.close()


def _restart_broker_a_behind_its_slave(guard: bool) -> tuple[Cluster, int, int]:
    """2m-2s-sync (SYNC_MASTER, ASYNC_FLUSH, inSyncReplicas=2): a burst is acknowledged once
    broker-a-s holds it, broker-a's machine loses power before flushing it and restarts without it.
    Returns the cluster, broker-a's log end after the restart and broker-a-s's log end."""
    c = start("2m-2s-sync", seed=5, rmqlabRejectImpossibleHaReport=guard)
    send(c, 30, "warm")
    c.run_for(65_000)  # SlaveSynchronize copies the topic to the slave (see above)
    burst = send(c, 40, "burst")
    assert all(r.send_status is SendStatus.SEND_OK for r in burst)
    c.nemesis.crash("broker-a")
    slave_end = c.sim.components["broker-a-s"].message_store.get_max_phy_offset()
    c.run_for(1_000)
    c.nemesis.restart("broker-a")
    c.run_for(40_000)  # broker-a-s notices the dead connection (housekeeping, 20 s) and reconnects
    master_end = c.sim.components["broker-a"].message_store.get_max_phy_offset()
    assert master_end < slave_end  # broker-a lost the unflushed tail broker-a-s holds
    return c, master_end, slave_end


def test_2m_2s_sync_master_restarted_behind_its_slave_acknowledges_sends_the_slave_never_holds():
    """RocketMQ's classic HA takes broker-a-s's report (beyond broker-a's log) as its ack, so sync
    sends are SEND_OK at once with no replica holding them: the first land at offsets where
    broker-a-s holds the lost tail instead. The logs diverge silently, and once broker-a is gone for
    good its consumers read from broker-a-s and the acknowledged messages are lost."""
    c, master_end, slave_end = _restart_broker_a_behind_its_slave(guard=False)
    after = send(c, 40, "after")
    assert not [r for r in after if isinstance(r, Exception)]  # none waits: broker-a-s "acks" at once
    to_a = [r for r in after if r.message_queue.broker_name == "broker-a"]
    assert len(to_a) >= 10 and all(r.send_status is SendStatus.SEND_OK for r in to_a)
    at = sorted(decode_message_id(r.offset_msg_id)[1] for r in to_a)  # commitlog offsets on broker-a
    assert master_end <= at[0] < slave_end  # acknowledged where broker-a-s holds other bytes
    c.run_for(2_000)
    master, slave = (read_commitlog(c.sim.store_dir(n)) for n in ("broker-a", "broker-a-s"))
    assert master[:master_end] == slave[:master_end]
    assert master[at[0]:slave_end] != slave[at[0]:slave_end]  # same offsets, other bytes
    # The deployment-mode comparison counts these from the trace alone.
    events = c.events()
    restart_at = next(e.time_ms for e in events if e.kind == "node.restart" and e.node == "broker-a")
    acked = [op for op in client_ops(events) if op.f == "send" and send_acknowledged(op)]
    assert mc.acked_behind_slave(events, acked, "broker-a", restart_at) == sum(o < slave_end for o in at) > 0
    c.nemesis.crash("broker-a")  # this time it stays down
    c.run_for(160_000)  # the name server's 120 s live timeout, then a route refresh
    acked_on_a = {r.msg_id for r in to_a}
    assert not acked_on_a & readable_keys(c, "reader")  # broker-a-s cannot serve any of them
    lost = {v.details["uniq_key"] for v in check_total_queue(c.events()).violations if v.what == "lost"}
    assert acked_on_a <= lost  # the no-acknowledged-loss check reports every one of them
    c.close()


def test_2m_2s_sync_master_restarted_behind_its_slave_with_the_rmqlab_guard_refuses_only_for_a_while():
    """rmqlabRejectImpossibleHaReport=true (rmqlab only): broker-a closes the connection of a slave
    reporting beyond its log, so its sync sends wait for an ack that does not come and fail. But
    broker-a stores each of them all the same: once its log is longer than broker-a-s's, the
    report is no longer impossible, the slave is accepted and the logs splice as without the
    guard. The guard delays the divergence; only a protocol that compares histories (controller
    mode's epochs and truncation) prevents it."""
    c, master_end, slave_end = _restart_broker_a_behind_its_slave(guard=True)
    refused = [e for e in c.events() if e.kind == "net.close" and e.node == "broker-a"
               and "outside" in str(e.fields.get("reason"))]
    assert refused and f"offset {slave_end} " in refused[0].fields["reason"]
    after = send(c, 40, "after")
    # A send to broker-a waits slaveTimeout (3 s) for an ack, and the producer's 3 s send timeout
    # runs out first: the send fails (indeterminate: broker-a stored it).
    first_ok = next(i for i, r in enumerate(after) if not isinstance(r, Exception)
                    and r.message_queue.broker_name == "broker-a")
    assert first_ok >= 5 and all(isinstance(r, Exception) or r.message_queue.broker_name == "broker-b"
                                 for r in after[:first_ok])
    c.run_for(2_000)
    master, slave = (read_commitlog(c.sim.store_dir(n)) for n in ("broker-a", "broker-a-s"))
    assert master[master_end:slave_end] != slave[master_end:slave_end]  # diverged all the same
    c.close()


def _mode_result(**changes) -> mc.ModeResult:
    base = dict(mode="2m-2s-sync", sent=100, acknowledged=100, failed=0, indeterminate=0, acknowledged_lost=0,
                missing_after_recovery=0, acked_during_outage=50, sends_during_outage=50, p50_ms=2.0, p99_ms=3.0,
                readable_during_outage=20, on_broker_a=20, guide_says="", read_from="slave broker-a-s (20)",
                set_writable_after_ms=131_000.0, route_dropped_after_ms=1_000.0)
    return mc.ModeResult(**{**base, **changes})


def test_sync_double_write_claim_fails_when_the_restarted_master_acknowledged_what_no_replica_holds():
    """The deployment documentation's "数据与服务都无单点故障" for 2m-2s-sync: acknowledgements that
    no replica holds (a master restarted behind its slave, whose report classic HA takes as an ack)
    contradict it."""
    def no_spof(result):
        return next(c for c in mc.claims([result]) if c.quote.startswith("数据与服务都无单点故障"))

    assert no_spof(_mode_result()).holds and "no replica" not in no_spof(_mode_result()).measured
    hazard = no_spof(_mode_result(acked_behind_slave=3))
    assert not hazard.holds
    assert "acknowledged 3 sync sends that no replica holds" in hazard.measured
    no_failover = next(c for c in mc.claims([_mode_result(acked_behind_slave=3)]) if c.quote.startswith("目前版本"))
    assert no_failover.holds and "refused" not in no_failover.measured
