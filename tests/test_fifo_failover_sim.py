"""5.x FIFO message groups across a controller-mode master failover, on the simulator.

The set-up of tests/test_orderly_fifo_failover.py (which runs it on real processes with Apache's
Python client), with rmqlab's 5.x client: controller-standalone, broker set broker-a of three
replicas, the lab's short controller timeouts, a Cluster-mode Proxy re-reading routes every
second, a FIFO topic of 4 queues, an orderly group (consumeMessageOrderly). A producer sends a
message every 40 ms in message groups g0, g1, g2 (message i in g<i mod 3>, one send after the
other). The consumer works as the official clients' PushConsumer does for a FIFO group: several
receives in flight (it keeps one per queue of its assignment, and each pops every queue of the
broker), each batch consumed message after message, each message acked, a failed ack retried
every second. Then the master gets SIGKILL.

What decides the outcome is whether the slave that takes over already has the topic's and the
group's metadata. `mqadmin updateTopic -c` / `updateSubGroup -c` write to the masters only
(tools CommandUtil.fetchMasterAddrByClusterName); a slave copies them in SlaveSynchronize.syncAll,
every 10 s in controller mode (broker/.../controller/ReplicasManager.java, handleSlaveSynchronize).

* Failover inside that window: the new master has neither. The first request naming the group
  (the Proxy's heartbeat or pop) creates it with defaults (SubscriptionGroupManager.
  findSubscriptionGroupConfig, autoCreateSubscriptionGroup: consumeMessageOrderly=false), as the
  first send creates the topic without message.type (createTopicInSendMessageMethod from TBW102,
  autoCreateTopicEnable). The Proxy's metadata cache, refreshed from a master of the cluster
  (ClusterMetadataService), then reads consumeMessageOrderly=false, so the client's settings say
  fifo=false (GrpcClientSettingsManager) and ReceiveMessageActivity pops without `order`: no
  per-queue block (ConsumerOrderInfoManager), a checkpoint per batch, and two receives hold
  messages of one queue at once. A later message of a group is first delivered before earlier
  ones: order within the group is broken - RocketMQ's hazard, kept. FIFO sends are refused from
  then on (the topic's type is NORMAL there). rmqlab's Proxy re-reads metadata at its route
  refresh period (1 s here); RocketMQ's every subscriptionGroupConfigCacheRefreshSeconds (20 s by
  default): there the switch comes later, not never. Whether a run breaks the order depends on
  where the kill falls: seed 2 with the kill 2.2 s after the clients started does.
* Failover after the slaves copied them: every pop on the new master is orderly and each group's
  messages are first delivered in the order they were sent. The new master has the consumer
  offsets of its last copy, so it hands out again what the old master had already delivered:
  at least once, in order.

Not the cause: an orderly pop writes no checkpoint (PopMessageProcessor.popMsgFromQueue:
ConsumerOrderInfoManager.update instead of appendCheckPoint), so no revived message comes late.
The new master has no ConsumerOrderInfo of the old master's batches (nothing replicates it):
served orderly, it replays the queue from its own committed offset, which keeps the order.
"""

from __future__ import annotations

import collections
from dataclasses import dataclass, field

from rmqlab.client.client_process import ClientProcess
from rmqlab.client.grpc import ClientConfiguration, ClientException, Producer, SimpleConsumer
from rmqlab.cluster import Cluster
from rmqlab.common.message.message import Message
from rmqlab.common.message.message_const import MessageConst
from rmqlab.proto.v2 import definition_pb2 as pb
from rmqlab.remoting.protocol.header import extra_info_util as eiu
from rmqlab.trace import client_ops
from tests.controller_mode_helpers import ALL_IDS, BROKERS, sync_state_set
from tests.deployment_helpers import LAB_BROKER, LAB_CONTROLLER

TOPIC, GROUP = "FifoFailoverSimTopic", "GID_fifo_failover_sim"
COUNT, INTERVAL_MS = 150, 40
RECEIVES = 4           # one receive in flight per queue of the FIFO group's assignment
CONSUME_MS = 150       # the listener's work per message
ACK_RETRY_MS = 1_000   # PushConsumer's ACK_MESSAGE_FAILURE_BACKOFF_DELAY
RECEIVE_RETRY_MS = 1_000


@dataclass
class Delivery:
    time_ms: float
    receiver: int
    group: str
    seq: int
    queue_id: int
    queue_offset: int


@dataclass
class FailoverRun:
    c: Cluster
    old: str
    new: str
    kill_ms: float
    deliveries: list[Delivery] = field(default_factory=list)
    # Each slave's copy of the group's consumeMessageOrderly and of the topic's message.type when
    # the master died (None: it has no such group / topic).
    orderly_at_kill: dict[str, bool | None] = field(default_factory=dict)
    topic_type_at_kill: dict[str, str | None] = field(default_factory=dict)

    def acked_sends(self) -> set[str]:
        return {op.invoke_value["keys"] for op in client_ops(self.c.events()) if op.f == "send" and op.type == "ok"}

    def first_deliveries(self) -> dict[str, list[int]]:
        """Each group's acknowledged messages (seq) in the order they were first delivered."""
        acked, seen = self.acked_sends(), set()
        out: dict[str, list[int]] = collections.defaultdict(list)
        for d in self.deliveries:
            key = f"{d.group}-{d.seq}"
            if key in acked and key not in seen:
                seen.add(key)
                out[d.group].append(d.seq)
        return dict(out)

    def pops(self, broker: str) -> list[tuple[float, bool, dict[str, list[int]]]]:
        """The Proxy's POP_MESSAGE calls to `broker` that found messages: (time of the answer,
        the request's `order`, the queue offsets handed out by "<retry>@<queueId>")."""
        addr = f"127.0.0.1:{self.c.components[broker].netty_server_config.listenPort}"
        asked: dict[int, bool] = {}
        out = []
        for e in self.c.events():
            f = e.fields
            if e.node != "proxy" or f.get("proto") != "remoting" or f.get("peer") != addr:
                continue
            if e.kind == "frame.send" and f.get("name") == "POP_MESSAGE":
                asked[f["opaque"]] = f["ext_fields"].get("order") == "true"
            elif e.kind == "frame.recv" and f["opaque"] in asked and f.get("remark") == "FOUND":
                out.append((e.time_ms, asked.pop(f["opaque"]),
                            eiu.parse_msg_offset_info(f["ext_fields"].get("msgOffsetInfo"))))
        return out


def group_orderly(c: Cluster, broker: str) -> bool | None:
    config = c.components[broker].subscription_group_manager.subscription_group_table.get(GROUP)
    return None if config is None else config.consume_message_orderly


def topic_type(c: Cluster, broker: str) -> str | None:
    tc = c.components[broker].topic_config_manager.select_topic_config(TOPIC)
    return None if tc is None else tc.attributes.get("message.type", "NORMAL")


def fifo_failover(tmp_path, seed: int, kill_after_ms: float, synced: bool) -> FailoverRun:
    """Produce and consume as the module docstring says, kill the master `kill_after_ms` after the
    clients started and run 40 s more. `synced`: first wait until the slaves copied the topic
    and the group (SlaveSynchronize)."""
    c = Cluster("controller-standalone", seed=seed, proxy="cluster", root_dir=str(tmp_path),
                overrides={"*": dict(LAB_BROKER)}, controller_overrides=dict(LAB_CONTROLLER),
                proxy_overrides={"topicRouteServiceCacheRefreshSeconds": 1})
    c.start(60_000)
    c.create_topic(TOPIC, message_type="FIFO")
    c.create_group(GROUP, orderly=True)
    c.run_until(lambda: sync_state_set(c) == ALL_IDS, 60_000)
    if synced:
        c.run_until(lambda: all(group_orderly(c, b) and topic_type(c, b) == "FIFO" for b in BROKERS), 30_000)
    endpoints = ";".join(c.proxy_endpoints)
    c.add_client("producer", lambda: ClientProcess(producer=Producer(ClientConfiguration(endpoints), topics=[TOPIC])))
    c.add_client("consumer", lambda: ClientProcess(
        consumer=SimpleConsumer(ClientConfiguration(endpoints), GROUP, {TOPIC: "*"})))
    producer, consumer = c.sim.components["producer"]["producer"], c.sim.components["consumer"]["consumer"]
    pnode, cnode = c.sim.nodes["producer"], c.sim.nodes["consumer"]
    run = FailoverRun(c, old="", new="", kill_ms=0.0)

    async def produce() -> None:
        for i in range(COUNT):
            msg = Message(TOPIC, f"body {i}".encode())
            msg.keys = f"g{i % 3}-{i}"
            msg.put_property(MessageConst.PROPERTY_SHARDING_KEY, f"g{i % 3}")
            try:
                await producer.send(msg)
            except ClientException:
                pass  # traced; the next message follows
            await pnode.sleep(INTERVAL_MS)

    async def receive_loop(receiver: int) -> None:
        while True:
            try:
                views = await consumer.receive(32, 60_000)
            except ClientException:
                await cnode.sleep(RECEIVE_RETRY_MS)
                continue
            for v in views:
                group, seq = v.to_message_ext().keys.split("-")
                run.deliveries.append(Delivery(c.sim.now_ms(), receiver, group, int(seq), v.queue_id, v.queue_offset))
                await cnode.sleep(CONSUME_MS)
                while True:
                    try:
                        await consumer.ack(v)
                        break
                    except ClientException as e:
                        if e.code == pb.INVALID_RECEIPT_HANDLE:
                            break
                        await cnode.sleep(ACK_RETRY_MS)

    pnode.spawn(produce(), name="fifo producer")
    for r in range(RECEIVES):
        cnode.spawn(receive_loop(r), name=f"fifo receive {r}")
    c.run_for(kill_after_ms)
    run.old = c.master()
    for b in BROKERS:
        if b != run.old:
            run.orderly_at_kill[b], run.topic_type_at_kill[b] = group_orderly(c, b), topic_type(c, b)
    run.kill_ms = c.sim.now_ms()
    c.sim.nemesis.kill(run.old)
    c.run_until(lambda: c.master() not in (None, run.old), 30_000)
    run.new = c.master()
    c.run_for(40_000)
    return run


def inversions(firsts: dict[str, list[int]]) -> list[tuple[str, int, int]]:
    """(group, later, earlier): `later` was first delivered before `earlier`, sent before it."""
    out = []
    for g, seqs in sorted(firsts.items()):
        for i, later in enumerate(seqs):
            out += [(g, later, earlier) for earlier in seqs[i + 1:] if earlier < later]
    return out


def test_failover_before_the_slaves_copied_the_orderly_group_breaks_the_order_within_a_group(tmp_path):
    run = fifo_failover(tmp_path, seed=2, kill_after_ms=2_200, synced=False)
    c, old, new = run.c, run.old, run.new
    try:
        # The old master had the FIFO topic and the orderly group; the slave that took over had
        # neither (created on the masters only, after that slave's last SlaveSynchronize).
        assert (group_orderly(c, old), topic_type(c, old)) == (True, "FIFO")
        assert (run.orderly_at_kill[new], run.topic_type_at_kill[new]) == (None, None)
        # The new master created both with their defaults on the first requests naming them.
        assert (group_orderly(c, new), topic_type(c, new)) == (False, "NORMAL")
        pops = run.pops(new)
        orderly = [ordered for _, ordered, _ in pops]
        # The Proxy popped orderly until it re-read the group from the new master, then not.
        assert orderly[0] is True and False in orderly and orderly.index(False) == orderly.count(True)
        assert all(ordered for _, ordered, _ in run.pops(old))

        firsts = run.first_deliveries()
        found = inversions(firsts)
        # g0's message 54 reached the consumer before 30, 33, ... sent before it.
        assert found[0] == ("g0", 54, 30), found
        later = next(d for d in run.deliveries if (d.group, d.seq) == ("g0", 54))
        earlier = next(d for d in run.deliveries if (d.group, d.seq) == ("g0", 30))
        assert later.queue_id == earlier.queue_id and later.queue_offset > earlier.queue_offset
        assert later.time_ms < earlier.time_ms and later.receiver != earlier.receiver
        # Both came from the new master, each in a pop without `order` (no block, no
        # ConsumerOrderInfo): the one holding 30 was still being consumed when another receive
        # got the same queue's next messages, 54 among them.
        key = f"0@{later.queue_id}"

        def pops_of(d: Delivery) -> list[tuple[float, bool]]:
            return [(t, ordered) for t, ordered, offsets in pops if d.queue_offset in (offsets or {}).get(key, [])]

        assert [ordered for _, ordered in pops_of(later)] == [False]
        assert False in [ordered for _, ordered in pops_of(earlier)]
        assert max(t for t, ordered in pops_of(earlier) if not ordered) < pops_of(later)[0][0] < earlier.time_ms
        # And FIFO sends are refused once the Proxy read the topic's type from the new master.
        refused = [op for op in client_ops(c.events()) if op.f == "send" and op.type == "fail"
                   and "topic type: NORMAL, message type: FIFO" in (op.error or "")]
        assert refused and min(op.invoke_time_ms for op in refused) > run.kill_ms
    finally:
        c.close()


def test_failover_after_the_slaves_copied_the_orderly_group_keeps_each_group_in_order(tmp_path):
    run = fifo_failover(tmp_path, seed=2, kill_after_ms=2_200, synced=True)
    c, new = run.c, run.new
    try:
        assert (run.orderly_at_kill[new], run.topic_type_at_kill[new]) == (True, "FIFO")
        assert (group_orderly(c, new), topic_type(c, new)) == (True, "FIFO")
        assert all(ordered for _, ordered, _ in run.pops(new)) and run.pops(new)
        acked = run.acked_sends()
        firsts = run.first_deliveries()
        assert inversions(firsts) == []
        # Every acknowledged message was delivered, sends went on after the kill ...
        assert sum(len(s) for s in firsts.values()) == len(acked)
        sends = [op for op in client_ops(c.events()) if op.f == "send" and op.type == "ok"]
        assert any(op.invoke_time_ms > run.kill_ms for op in sends)
        # ... and the new master handed out again what the old one had delivered (its consumer
        # offsets are the ones it copied at its last sync, from before this consumer began).
        before = {(d.group, d.seq) for d in run.deliveries if d.time_ms < run.kill_ms}
        again = [d for d in run.deliveries if d.time_ms > run.kill_ms and (d.group, d.seq) in before]
        assert again
    finally:
        c.close()


def test_the_proxy_keeps_a_groups_config_when_a_refresh_finds_no_such_group():
    """A master that does not have the group (a slave promoted before it copied it) answers
    SUBSCRIPTION_GROUP_NOT_EXIST; RocketMQ's Proxy keeps the config it had (AbstractCacheLoader.
    reload returns the old value when ClusterSubscriptionGroupConfigCacheLoader.getDirectly
    throws), so the group stays FIFO until the new master has a config of its own for it. A first
    load with no such group is None (RocketMQ's defaults)."""
    import asyncio
    from types import SimpleNamespace

    from rmqlab.client.exceptions import MQBrokerException
    from rmqlab.proxy.service.metadata_service import ClusterMetadataService
    from rmqlab.remoting.protocol.subscription.subscription_group_config import SubscriptionGroupConfig
    from rmqlab.remoting.response_code import ResponseCode

    class Api:
        def __init__(self):
            self.groups = {GROUP: SubscriptionGroupConfig(GROUP, consume_message_orderly=True)}
            self.asked = 0

        async def get_broker_cluster_info(self, timeout_ms):
            return SimpleNamespace(cluster_addr_table={"DefaultCluster": {"broker-a"}},
                                   broker_addr_table={"broker-a": SimpleNamespace(broker_addrs={0: "127.0.0.1:10911"})})

        async def get_subscription_group_config(self, addr, group, timeout_ms):
            self.asked += 1
            if group not in self.groups:
                raise MQBrokerException(ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST, "No group in this broker", addr)
            return self.groups[group]

    async def go():
        api, clock = Api(), [0]
        tasks = []
        service = ClusterMetadataService(api, None, "DefaultCluster", lambda: clock[0], 1,
                                         lambda coro, name: tasks.append(asyncio.ensure_future(coro)))
        assert (await service.get_subscription_group_config(GROUP)).consume_message_orderly
        assert await service.get_subscription_group_config("GID_nobody") is None
        api.groups.clear()  # the master that answers now does not know the group
        clock[0] += 1_000
        assert (await service.get_subscription_group_config(GROUP)).consume_message_orderly  # refresh started
        await asyncio.gather(*tasks)
        assert api.asked == 3
        assert (await service.get_subscription_group_config(GROUP)).consume_message_orderly
        # Once that master has a config of its own for the group (created with defaults), it is the one.
        api.groups[GROUP] = SubscriptionGroupConfig(GROUP)
        clock[0] += 1_000
        await service.get_subscription_group_config(GROUP)
        await asyncio.gather(*tasks)
        assert (await service.get_subscription_group_config(GROUP)).consume_message_orderly is False

    asyncio.run(go())
