"""The EscapeBridge (RIP-32 "Special message escape") on the simulator.

Two broker groups with slave acting master and remote escape on: "broker-a" (a master, id 0, and
broker-a-s1, id 1) and "broker-b" (a master), one name server with its defaults. Once broker-a's
master is gone, broker-a-s1 is the smallest live id and runs the special services; what they put
escapes to broker-b's master. RocketMQ's behaviour these tests hold rmqlab to:
``broker/src/main/java/org/apache/rocketmq/broker/failover/EscapeBridge.java``,
``BrokerOuterAPI.sendMessageToSpecificBroker`` / ``pullMessageFromSpecificBrokerAsync`` and
``broker/.../topic/TopicRouteInfoManager.java``. (Until pre-online exists the brokers run with
``skipPreOnline=true``.)
"""

from __future__ import annotations

import pytest

from rmqlab.broker.failover.escape_bridge import java_socket_address_string, specific_queue_index
from rmqlab.common.message.message import MessageExtBrokerInner
from rmqlab.common.message.message_const import MessageConst
from rmqlab.common.message.message_decoder import decodes
from rmqlab.common.topic.topic_validator import TopicValidator
from rmqlab.namesrv import NamesrvController
from rmqlab.remoting import RemotingCommand, RequestCode, ResponseCode
from rmqlab.remoting.protocol.header.broker.send_message import SendMessageRequestHeader
from rmqlab.remoting.protocol.route import TopicRouteData
from rmqlab.remoting.protocol.route.topic_route_data import BrokerData, QueueData
from rmqlab.remoting.remoting_server import RemotingServer
from rmqlab.runtime.component import Component
from rmqlab.runtime.sim import Simulation
from rmqlab.store.put_message_result import PutMessageStatus
from tests.broker_helpers import NS, CppClient, Idle, broker_factory, close, props

A, A_S1, B, FAKE = "127.0.0.1:10911", "127.0.0.1:10921", "127.0.0.1:10941", "127.0.0.1:10951"
TOPIC = "TopicD"
LEVEL, LEVEL_DELAY_MS = 3, 10_000  # delay level 3 is 10 s (messageDelayLevel's default)


def cluster(seed: int = 7, escape: bool = True, **overrides) -> Simulation:
    sim = Simulation(seed=seed)
    sim.add_node("namesrv", NamesrvController)
    acting = {"enableSlaveActingMaster": "true", "enableRemoteEscape": str(escape).lower(), "skipPreOnline": "true",
              **overrides}
    sim.add_node("broker-a", broker_factory(sim, "broker-a", namesrv=NS, **acting))
    sim.add_node("broker-a-s1", broker_factory(sim, "broker-a-s1", port=10921, namesrv=NS, brokerRole="SLAVE",
                                               brokerId=1, slaveReadEnable="true", **acting))
    sim.add_node("broker-b", broker_factory(sim, "broker-b", port=10941, namesrv=NS, brokerName="broker-b", **acting))
    sim.add_node("client", Idle)
    sim.start_all()
    return sim


def b(sim: Simulation, name: str):
    return sim.components[name]


def create_topic_on_b(sim: Simulation, topic: str = TOPIC) -> None:
    """One plain message to broker-b creates the topic there (auto-create) and in the route."""
    assert CppClient(sim, "client", B).send(topic, b"seed").code == ResponseCode.SUCCESS


def kill_a_and_wait_for_acting(sim: Simulation) -> float:
    s1, master = b(sim, "broker-a-s1"), b(sim, "broker-a")
    sim.run_until(lambda: s1.message_store.get_max_phy_offset() == master.message_store.get_max_phy_offset(), 30_000,
                  poll_ms=10)
    sim.nemesis.kill("broker-a")
    killed = sim.now_ms()
    sim.run_until(lambda: s1.special_service_running, timeout_ms=5_000, poll_ms=10)
    return killed


def messages_in(sim: Simulation, addr: str, topic: str, group: str = "CID_CHECK") -> list:
    """Every message of the topic at ``addr``, pulled as a client would (queues 0..15)."""
    client = CppClient(sim, "client", addr)
    found = []
    for queue_id in range(16):
        response = client.pull(topic, 0, queue_id=queue_id, group=group, suspend_ms=0)
        if response.code == ResponseCode.SUCCESS:
            found.extend(decodes(response.body))
    return found


def stored(sim: Simulation, node: str, topic: str = TOPIC) -> int:
    """How many messages the node's store holds in the topic (queues 0..15)."""
    store = b(sim, node).message_store
    return sum(store.get_max_offset_in_queue(topic, q) for q in range(16))


def remote_sends(sim: Simulation, node: str, peer: str) -> list[dict]:
    return [e.fields for e in sim.tracer.events if e.kind == "frame.send" and e.node == node
            and e.fields.get("proto") == "remoting" and e.fields["peer"] == peer and not e.fields["flag"] & 1
            and e.fields["code"] == RequestCode.SEND_MESSAGE_V2]


def inner(topic: str = TOPIC, body: bytes = b"x", **properties: str) -> MessageExtBrokerInner:
    msg = MessageExtBrokerInner(topic=topic, body=body)
    msg.properties = dict(properties)
    msg.born_host = msg.store_host = ("127.0.0.1", 10921)
    return msg


def delayed_messages_then_kill(sim: Simulation, count: int = 3, kill_before_due_ms: int = 2_000
                               ) -> tuple[list[int], float]:
    """``count`` messages of delay level 3 sent to broker-a; broker-a killed ``kill_before_due_ms``
    before they are due. Returns their deliver times (the schedule queue's tags codes) and the
    time the slave started acting, on the nodes' clock."""
    client = CppClient(sim, "client", A)
    for i in range(count):
        assert client.send(TOPIC, f"delayed-{i}".encode(), props(DELAY=str(LEVEL))).code == ResponseCode.SUCCESS
    master = b(sim, "broker-a")
    store = master.message_store
    sim.run_until(lambda: store.get_max_offset_in_queue(TopicValidator.RMQ_SYS_SCHEDULE_TOPIC, LEVEL - 1) == count,
                  timeout_ms=1_000)  # dispatched
    cq = store.consume_queue_table[(TopicValidator.RMQ_SYS_SCHEDULE_TOPIC, LEVEL - 1)]
    due = [unit[2] for unit in cq.get_units(0, count)]
    clock = sim.nodes["client"].now_ms  # the nodes' clock (the simulator's epoch + virtual time)
    sim.run_for(max(0, min(due) - kill_before_due_ms - clock()))
    kill_a_and_wait_for_acting(sim)
    assert clock() < min(due)
    return due, clock()


def test_delayed_messages_of_a_dead_master_are_delivered_on_time_into_another_groups_master():
    sim = cluster()
    create_topic_on_b(sim)
    due, _ = delayed_messages_then_kill(sim)
    s1 = b(sim, "broker-a-s1")
    s1_end = s1.message_store.get_max_phy_offset()
    broker_b = b(sim, "broker-b")
    sim.run_until(lambda: stored(sim, "broker-b") == 1 + len(due), timeout_ms=LEVEL_DELAY_MS + 5_000, poll_ms=10)
    delivered = sorted((m for m in messages_in(sim, B, TOPIC) if m.body != b"seed"), key=lambda m: m.body)
    assert [m.body for m in delivered] == [b"delayed-0", b"delayed-1", b"delayed-2"]
    # On time: stored by broker-b's master at, not before, the time each fell due (the delay
    # level's 100 ms step plus one request on the simulated network).
    for msg, when in zip(delivered, due):
        assert when <= msg.store_timestamp < when + 500, (msg.store_timestamp, when)
        assert msg.store_host == ("127.0.0.1", 10941)
        # messageTimeUp cleared DELAY from the properties map, which is what is sent (else
        # broker-b would park it again); WAIT=false (setWaitStoreMsgOK(false)); REAL_TOPIC stays.
        assert MessageConst.PROPERTY_DELAY_TIME_LEVEL not in msg.properties
        assert msg.properties[MessageConst.PROPERTY_WAIT_STORE_MSG_OK] == "false"
        assert msg.properties[MessageConst.PROPERTY_REAL_TOPIC] == TOPIC
    # Real SEND_MESSAGE_V2 frames from the acting slave to broker-b, nothing written into the
    # slave's own log, and the slave's delay level moved past them.
    assert len(remote_sends(sim, "broker-a-s1", B)) == len(due)
    assert s1.message_store.get_max_phy_offset() == s1_end
    assert s1.schedule_message_service.offset_table[LEVEL] == len(due)
    assert broker_b.message_store.get_max_offset_in_queue(TopicValidator.RMQ_SYS_SCHEDULE_TOPIC, LEVEL - 1) == 0
    close(sim)


def test_timer_messages_of_a_dead_master_are_delivered_into_another_groups_master():
    sim = cluster()
    create_topic_on_b(sim)
    deliver_ms = sim.nodes["client"].now_ms() + 8_000
    assert CppClient(sim, "client", A).send(TOPIC, b"timer", props(TIMER_DELIVER_MS=str(deliver_ms))).code == 0
    kill_a_and_wait_for_acting(sim)
    sim.run_until(lambda: stored(sim, "broker-b") == 2, timeout_ms=15_000, poll_ms=10)
    msg = next(m for m in messages_in(sim, B, TOPIC) if m.body == b"timer")
    assert msg.store_timestamp >= deliver_ms
    assert MessageConst.PROPERTY_REAL_TOPIC not in msg.properties  # convertMessage cleared it from the map
    assert len(remote_sends(sim, "broker-a-s1", B)) == 1  # the acting slave's timer dequeue sent it
    close(sim)


def test_without_remote_escape_the_acting_slave_answers_service_not_available_and_delayed_messages_wait():
    sim = cluster(escape=False)
    create_topic_on_b(sim)
    due, _ = delayed_messages_then_kill(sim)
    s1 = b(sim, "broker-a-s1")
    result = sim.run(s1.escape_bridge.put_message(inner()))
    assert result.put_message_status is PutMessageStatus.SERVICE_NOT_AVAILABLE
    result = sim.run(s1.escape_bridge.put_message_to_specific_queue(inner()))
    assert result.put_message_status is PutMessageStatus.SERVICE_NOT_AVAILABLE
    sim.run_for(max(due) - sim.nodes["client"].now_ms() + 3_000)
    assert [m.body for m in messages_in(sim, B, TOPIC)] == [b"seed"]
    assert s1.schedule_message_service.offset_table.get(LEVEL, 0) == 0
    assert remote_sends(sim, "broker-a-s1", B) == []
    close(sim)


def test_the_master_puts_locally():
    sim = cluster()
    master = b(sim, "broker-a")
    result = sim.run(master.escape_bridge.put_message(inner(body=b"local")))
    assert result.put_message_status is PutMessageStatus.PUT_OK
    sim.run_until(lambda: master.message_store.get_max_offset_in_queue(TOPIC, 0) == 1, timeout_ms=1_000)  # dispatched
    assert remote_sends(sim, "broker-a", B) == []
    close(sim)


# -- every outcome of the remote put -----------------------------------------------------------
class FakeBroker(Component):
    """A broker that answers each SEND_MESSAGE_V2 with the next code of ``codes`` (and records the
    request), to drive the outcomes a real master rarely gives a WAIT=false message."""

    component_type = "broker"

    def __init__(self, codes: list[int]):
        self.codes, self.requests = codes, []

    async def start(self, node):
        self.node = node
        server = RemotingServer(node, "127.0.0.1", 10951)

        async def send(channel, request):
            self.requests.append(request)
            code = self.codes.pop(0)
            return RemotingCommand.create_response_command(
                code, "fake", {"msgId": "7F00000100002A9F0000000000000000", "queueId": "2", "queueOffset": "5"})

        server.register_processor(RequestCode.SEND_MESSAGE_V2, send)
        await server.start()


def route_to_fake(topic: str = TOPIC) -> TopicRouteData:
    """broker-a without a master (its slave, read-only) and a group "broker-f" whose master is the fake."""
    return TopicRouteData(
        queue_datas=[QueueData("broker-a", 4, 4, 4, 0), QueueData("broker-f", 4, 4, 6, 0)],
        broker_datas=[BrokerData("DefaultCluster", "broker-a", {1: A_S1}),
                      BrokerData("DefaultCluster", "broker-f", {0: FAKE})])


@pytest.fixture
def acting_with_fake():
    sim = cluster()
    fake = FakeBroker([])
    sim.add_node("fake", lambda: fake)
    sim.start("fake")
    kill_a_and_wait_for_acting(sim)
    s1 = b(sim, "broker-a-s1")
    s1.topic_route_info_manager._update_topic_route_table(TOPIC, route_to_fake())
    yield sim, s1, fake
    close(sim)


@pytest.mark.parametrize("code, sync_status, async_status", [
    (ResponseCode.SUCCESS, PutMessageStatus.PUT_OK, PutMessageStatus.PUT_OK),
    # putMessageToRemoteBroker keeps only SEND_OK: on the synchronous path the other three are
    # failures (the module docstring's quirk); the asynchronous path maps them 1:1.
    (ResponseCode.FLUSH_DISK_TIMEOUT, PutMessageStatus.PUT_TO_REMOTE_BROKER_FAIL, PutMessageStatus.FLUSH_DISK_TIMEOUT),
    (ResponseCode.FLUSH_SLAVE_TIMEOUT, PutMessageStatus.PUT_TO_REMOTE_BROKER_FAIL,
     PutMessageStatus.FLUSH_SLAVE_TIMEOUT),
    (ResponseCode.SLAVE_NOT_AVAILABLE, PutMessageStatus.PUT_TO_REMOTE_BROKER_FAIL,
     PutMessageStatus.SLAVE_NOT_AVAILABLE),
    (ResponseCode.SYSTEM_ERROR, PutMessageStatus.PUT_TO_REMOTE_BROKER_FAIL, PutMessageStatus.PUT_TO_REMOTE_BROKER_FAIL),
    (ResponseCode.NO_PERMISSION, PutMessageStatus.PUT_TO_REMOTE_BROKER_FAIL,
     PutMessageStatus.PUT_TO_REMOTE_BROKER_FAIL),
])
def test_outcome_mapping_of_the_remote_put(acting_with_fake, code, sync_status, async_status):
    sim, s1, fake = acting_with_fake
    fake.codes[:] = [code, code]
    msg = inner(body=b"sync", PGROUP="PID_ORIGINAL", DELAY="3", WAIT="true")
    msg.clear_property(MessageConst.PROPERTY_DELAY_TIME_LEVEL)  # as messageTimeUp leaves it
    assert sim.run(s1.escape_bridge.put_message(msg)).put_message_status is sync_status
    assert sim.run(s1.escape_bridge.async_put_message(inner(body=b"async"))).put_message_status is async_status
    # Both went to the only other group's master, as SEND_MESSAGE_V2 with the message's map.
    first = SendMessageRequestHeader.parse_request_header(fake.requests[0])
    assert (first.producer_group, first.topic, first.default_topic) == ("PID_ORIGINAL", TOPIC, "TBW102")
    assert fake.requests[0].body == b"sync"
    assert "DELAY" not in first.properties and "WAIT\x01false" in first.properties
    second = SendMessageRequestHeader.parse_request_header(fake.requests[1])
    assert second.producer_group == "InnerProducerGroup_broker-a_1"
    assert 0 <= first.queue_id < 4 and 0 <= second.queue_id < 4


def test_remote_put_without_a_route_without_another_group_or_with_a_dead_master_fails(acting_with_fake):
    sim, s1, fake = acting_with_fake
    bridge = s1.escape_bridge
    # No route: the name server does not know the topic.
    assert sim.run(bridge.put_message_to_remote_broker(inner("NoSuchTopic"), None)) is None
    assert sim.run(bridge.put_message(inner("NoSuchTopic"))).put_message_status \
        is PutMessageStatus.PUT_TO_REMOTE_BROKER_FAIL
    assert sim.run(bridge.async_put_message(inner("NoSuchTopic"))).put_message_status \
        is PutMessageStatus.PUT_TO_REMOTE_BROKER_FAIL
    # The own group only (say the route showed the acting slave as its master): nowhere to escape.
    own = TopicRouteData(queue_datas=[QueueData("broker-a", 4, 4, 6, 0)],
                         broker_datas=[BrokerData("DefaultCluster", "broker-a", {0: A_S1})])
    s1.topic_route_info_manager._update_topic_route_table("TopicOwn", own)
    assert sim.run(bridge.put_message_to_remote_broker(inner("TopicOwn"), None)) is None
    # Sending to the own name is not an escape.
    assert sim.run(bridge.put_message_to_remote_broker(inner(), "broker-a")) is None
    # The other group's master is dead: the request fails.
    sim.nemesis.kill("fake")
    assert sim.run(bridge.put_message(inner())).put_message_status is PutMessageStatus.PUT_TO_REMOTE_BROKER_FAIL
    assert sim.run(bridge.async_put_message(inner())).put_message_status \
        is PutMessageStatus.PUT_TO_REMOTE_BROKER_FAIL
    assert sim.run(bridge.put_message_to_specific_queue(inner())).put_message_status \
        is PutMessageStatus.UNKNOWN_ERROR
    assert fake.requests == []


# -- the specific queue ------------------------------------------------------------------------
def test_specific_queue_index_is_javas_floor_mod_of_string_hash_code():
    # Expected values worked out with Java's String.hashCode: h = 31*h + c over the UTF-16 units,
    # kept as a signed 32-bit int (wrapping), then Math.floorMod(h, n), which is never negative
    # (Java's h % n is, for a negative h). storeHost is InetSocketAddress.toString() of an IP
    # literal: "/" + ip + ":" + port.
    # "T/1.2.3.4:5" (84, 47, 49, 46, 50, 46, 51, 46, 52, 58, 53): h = 1718656192; floorMod(h, 7) = 1.
    assert java_socket_address_string(("1.2.3.4", 5)) == "/1.2.3.4:5"
    assert specific_queue_index("T", ("1.2.3.4", 5), 7) == 1
    # An acting slave at 127.0.0.1:10921 writing the revive topic:
    # "rmq_sys_REVIVE_LOG_DefaultCluster/127.0.0.1:10921".hashCode() = -1859092016;
    # floorMod(h, 7) = 2 (h % 7 = -5, Math.abs(h) % 7 = 5).
    assert specific_queue_index("rmq_sys_REVIVE_LOG_DefaultCluster", ("127.0.0.1", 10921), 7) == 2
    # IPv6, as Java 14+ prints it (Inet6Address.getHostAddress, in brackets).
    assert java_socket_address_string(("::1", 10911)) == "/[0:0:0:0:0:0:0:1]:10911"


def test_specific_queue_put_goes_to_the_hashed_queue_of_the_other_master(acting_with_fake):
    sim, s1, fake = acting_with_fake
    fake.codes[:] = [ResponseCode.SUCCESS] * 3
    for _ in range(3):  # the same slave and topic: always the same queue, so the same master
        assert sim.run(s1.escape_bridge.put_message_to_specific_queue(inner())).put_message_status \
            is PutMessageStatus.PUT_OK
    # The publish info lists broker-f's 4 queues only (broker-a has no master):
    # "TopicD/127.0.0.1:10921".hashCode() = -456532862, floorMod(h, 4) = 2 (h % 4 = -2).
    assert [SendMessageRequestHeader.parse_request_header(r).queue_id for r in fake.requests] == [2] * 3


# -- reading another broker name's message ------------------------------------------------------
def test_get_message_reads_locally_or_from_the_other_brokers_id0_member():
    sim = cluster()
    create_topic_on_b(sim)
    assert CppClient(sim, "client", A).send(TOPIC, b"owned-by-a").code == ResponseCode.SUCCESS
    sim.run(b(sim, "broker-a-s1").slave_synchronize.sync_topic_config())  # the slave knows the topic
    kill_a_and_wait_for_acting(sim)
    broker_b = b(sim, "broker-b")
    bridge = broker_b.escape_bridge
    # broker-a's master is dead: the route's broker-a lists the slave only, which answers.
    msg, info, retry = sim.run(bridge.get_message_async(TOPIC, 0, 0, "broker-a"))
    assert (msg.body, info, retry) == (b"owned-by-a", "", False)
    pulls = [e.fields for e in sim.tracer.events if e.kind == "frame.send" and e.node == "broker-b"
             and e.fields.get("peer") == A_S1 and e.fields["code"] == RequestCode.PULL_MESSAGE]
    assert len(pulls) == 1
    # Nothing at that offset (the queue's end): the answer says so, no retry.
    assert sim.run(bridge.get_message_async(TOPIC, 1, 0, "broker-a")) == (None, "NO_NEW_MSG", False)
    # Its own name: the local store (no request); a miss there is not retried either.
    local_queue = next(q for q in range(16) if broker_b.message_store.get_max_offset_in_queue(TOPIC, q) == 1)
    msg, _, retry = sim.run(bridge.get_message_async(TOPIC, 0, local_queue, "broker-b"))
    assert (msg.body, retry) == (b"seed", False)
    assert sim.run(bridge.get_message_async(TOPIC, 9, local_queue, "broker-b")) == (None, "Can not get msg", False)
    # The slave refuses (a topic it does not know): retry later.
    assert sim.run(bridge.get_message_async("TopicX", 0, 0, "broker-a")) == (None, "Response Code:17", True)
    # A broker name no route knows: retry later.
    assert sim.run(bridge.get_message_async(TOPIC, 0, 0, "broker-x")) == (None, "brokerAddress not found", True)
    close(sim)


# -- POP on the acting slave ------------------------------------------------------------------
REVIVE_TOPIC = "rmq_sys_REVIVE_LOG_DefaultCluster"
GROUP = "CG-POP"


def revive_records(sim: Simulation, node: str) -> dict[int, list[str]]:
    """The tags ("ck"/"ack") each revive queue of ``node`` holds."""
    store = b(sim, node).message_store
    out = {}
    for queue_id in range(8):
        result = store.get_message("t", REVIVE_TOPIC, queue_id, 0, 1000)
        if result.message_buffers:
            out[queue_id] = [decodes(buf)[0].tags for buf in result.message_buffers]
    return out


def test_pop_checkpoints_and_acks_of_the_acting_slave_go_to_one_revive_queue_of_one_master():
    """RIP-32: the CK/ACK records of the acting slave escape to one master ("the same master is
    required; otherwise, CK/ACK cannot cancel and the message is duplicated"); that master's revive
    service cancels the acknowledged message and revives the other one, read back from the slave,
    into its own retry topic."""
    from rmqlab.client.impl.mq_client_api_impl import MQClientAPIImpl
    from rmqlab.remoting import RemotingClient
    from rmqlab.remoting.protocol.header import extra_info_util as eiu
    from rmqlab.remoting.protocol.header.broker.ack_message import AckMessageRequestHeader
    from rmqlab.remoting.protocol.header.broker.pop_message import ConsumeInitMode, PopMessageRequestHeader

    sim = cluster()
    create_topic_on_b(sim)
    CppClient(sim, "client", B).pull(TOPIC, 0, group=GROUP, suspend_ms=0)  # broker-b knows the group
    producer = CppClient(sim, "client", A)
    for body in (b"acked", b"not-acked"):
        assert producer.send(TOPIC, body).code == ResponseCode.SUCCESS
    s1 = b(sim, "broker-a-s1")
    sim.run(s1.slave_synchronize.sync_topic_config())
    kill_a_and_wait_for_acting(sim)
    api = MQClientAPIImpl(sim.nodes["client"], RemotingClient(sim.nodes["client"]))
    header = PopMessageRequestHeader(consumer_group=GROUP, topic=TOPIC, queue_id=0, max_msg_nums=32,
                                     invisible_time=10_000, poll_time=0, born_time=0, init_mode=ConsumeInitMode.MIN)
    popped = sim.run(api.pop_message(A_S1, "broker-a", header, 3000)).msg_found_list
    assert sorted(m.body for m in popped) == [b"acked", b"not-acked"]
    acked = next(m for m in popped if m.body == b"acked")
    handle = acked.properties[MessageConst.PROPERTY_POP_CK]
    strs = eiu.split(handle)
    ack = AckMessageRequestHeader(GROUP, TOPIC, eiu.get_queue_id(strs), handle, eiu.get_queue_offset(strs))
    sim.run(api.ack_message(A_S1, ack, 3000))
    sim.run_for(100)
    # Both records went to broker-b, where its put hooks park them in the timer wheel (as RocketMQ's
    # master does: they carry TIMER_DELIVER_MS); nothing went into the slave's store.
    assert b(sim, "broker-b").message_store.get_max_offset_in_queue("rmq_sys_wheel_timer", 0) == 2
    assert s1.message_store.get_max_offset_in_queue(REVIVE_TOPIC, 0) == 0
    # They come out into one revive queue of broker-b: the one floorMod(hash(revive topic + the
    # slave's store host), 8) names ("rmq_sys_REVIVE_LOG_DefaultCluster/127.0.0.1:10921".hashCode()
    # = -1859092016, floorMod 8 = 0), the checkpoint, then the ack at the checkpoint's revive time.
    retry_topic = f"%RETRY%{GROUP}_{TOPIC}"
    sim.run_until(lambda: b(sim, "broker-b").message_store.get_max_offset_in_queue(retry_topic, 0) >= 1,
                  timeout_ms=20_000, poll_ms=10)
    assert revive_records(sim, "broker-b") == {0: ["ck", "ack"]}
    # broker-b revived the unacknowledged message only, read from the slave, into its retry topic.
    sim.run_for(5_000)
    assert [m.body for m in messages_in(sim, B, retry_topic, group=GROUP)] == [b"not-acked"]
    close(sim)
