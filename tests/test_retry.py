"""Consumer send-back, retry topics and the dead-letter queue, on the simulator.

A push consumer whose listener answers RECONSUME_LATER (or raises) hands the message back to the
broker (CONSUMER_SEND_MSG_BACK, 36); the broker parks a copy in SCHEDULE_TOPIC_XXXX at delay level
3 + reconsumeTimes, the schedule service moves it to ``%RETRY%<group>`` when due, and the consumer
(subscribed to that topic automatically) gets it again with reconsumeTimes + 1 and its original
topic restored. Past maxReconsumeTimes the broker parks it in ``%DLQ%<group>`` instead.

The brokers keep RocketMQ's default delay levels (1s 5s 10s 30s 1m 2m ...: the first retry waits
10 s, the second 30 s); time is the simulator's virtual time, so waiting costs nothing. Clusters
and clients are built as in tests/test_client.py (its Lab); raw requests are sent the way the C++
client sends them (tests/test_broker.py's CppClient).
"""

from __future__ import annotations

from collections import Counter, defaultdict

from rmqlab.client import (ConsumeConcurrentlyStatus, DefaultMQProducer, DefaultMQPullConsumer,
                           DefaultMQPushConsumer, MessageQueue, PullStatus)
from rmqlab.common.constant.perm_name import PermName
from rmqlab.common.message import Message
from rmqlab.common.message.message_const import MessageConst
from rmqlab.common.message.message_decoder import create_message_id, decodes
from rmqlab.remoting import RemotingClient, RemotingCommand, RequestCode, ResponseCode
from rmqlab.trace import client_ops
from tests.broker_helpers import BROKER, FAQ, CppClient, world
from tests.client_helpers import NS, TOPIC, Lab, held_queues, history, send_all, uniq

GROUP = "CG-RETRY"
RETRY_TOPIC = "%RETRY%" + GROUP
DLQ_TOPIC = "%DLQ%" + GROUP
SUCCESS = ConsumeConcurrentlyStatus.CONSUME_SUCCESS
LATER = ConsumeConcurrentlyStatus.RECONSUME_LATER
ONE_MASTER = [("broker-a", "broker-a", 0, "ASYNC_MASTER", 10911, {})]
TWO_MASTERS = [("broker-a", "broker-a", 0, "ASYNC_MASTER", 10911, {}),
               ("broker-b", "broker-b", 0, "ASYNC_MASTER", 10921, {})]
LEVEL_MS = {3: 10_000, 4: 30_000, 5: 60_000}  # the default messageDelayLevel


class Deliveries:
    """A push consumer's listener: records every delivery, answers with ``decide(msg, attempt,
    context)`` (attempt counts from 1 per UNIQ_KEY)."""

    def __init__(self, lab: Lab, decide):
        self.lab, self.decide = lab, decide
        self.by_key: dict[str, list[dict]] = defaultdict(list)

    def __call__(self, msgs, context):
        status = SUCCESS
        for m in msgs:
            attempts = self.by_key[uniq(m)]
            attempts.append({"topic": m.topic, "queue_topic": context.message_queue.topic,
                             "reconsume_times": m.reconsume_times, "properties": dict(m.properties),
                             "body": m.body, "time": self.lab.sim.now_ms()})
            if self.decide(m, len(attempts), context) is not SUCCESS:
                status = LATER
        return status

    def count(self) -> int:
        return sum(len(v) for v in self.by_key.values())


def start_consumer(lab: Lab, listener, **kwargs):
    def make():
        consumer = DefaultMQPushConsumer(GROUP, NS, **kwargs)
        consumer.subscribe(TOPIC, "*")
        consumer.register_message_listener(listener)
        return {"consumer": consumer}

    lab.add_client("consumer", make)
    # The retry topic is created by the consumer's first heartbeat; the consumer learns its route
    # at its next route refresh (pollNameServerInterval, 30 s) and then pulls it too.
    lab.sim.run_until(lambda: held_queues(lab, "consumer", RETRY_TOPIC), 35_000)
    return lab.client("consumer", "consumer")


def frames(lab: Lab, node: str, code: int, kind: str = "frame.send"):
    return [e for e in lab.sim.tracer.events if e.node == node and e.kind == kind and e.fields.get("code") == code]


def test_a_failed_message_comes_back_from_the_retry_topic(lab):
    lab = lab(ONE_MASTER)
    lab.create_topic(queues=2)
    listener = Deliveries(lab, lambda m, attempt, ctx: LATER if attempt == 1 else SUCCESS)
    consumer = start_consumer(lab, listener)
    lab.add_client("producer", lambda: {"producer": DefaultMQProducer("PG", NS)})
    results = send_all(lab, lab.client("producer", "producer"), [b"m-%d" % i for i in range(3)])
    lab.sim.run_until(lambda: listener.count() == 6, 30_000)
    lab.sim.run_for(40_000)  # nothing more comes
    assert listener.count() == 6

    for r in results:
        first, second = listener.by_key[r.msg_id]
        assert (first["topic"], first["queue_topic"], first["reconsume_times"]) == (TOPIC, TOPIC, 0)
        # From %RETRY%<group>, shown with the topic it was sent to, one more reconsume time.
        assert (second["topic"], second["queue_topic"], second["reconsume_times"]) == (TOPIC, RETRY_TOPIC, 1)
        assert second["body"] == first["body"]
        props = second["properties"]
        assert props[MessageConst.PROPERTY_RETRY_TOPIC] == TOPIC
        assert props[MessageConst.PROPERTY_ORIGIN_MESSAGE_ID] == r.offset_msg_id  # the first copy's offset id
        assert props[MessageConst.PROPERTY_KEYS] == first["body"].decode()
        # Delay level 3 + reconsumeTimes(0) (10 s) in SCHEDULE_TOPIC_XXXX before it came back.
        assert props[MessageConst.PROPERTY_DELAY_TIME_LEVEL] == "3"
        assert second["time"] - first["time"] >= LEVEL_MS[3]

    broker = lab.sim.components["broker-a"]
    # Parked in queue 2 (level 3) of the schedule topic, then put on the retry topic (1 queue).
    assert broker.message_store.get_max_offset_in_queue("SCHEDULE_TOPIC_XXXX", 2) == 3
    assert broker.message_store.get_max_offset_in_queue(RETRY_TOPIC, 0) == 3
    retry_config = broker.topic_config_manager.select_topic_config(RETRY_TOPIC)
    assert (retry_config.read_queue_nums, retry_config.perm) == (1, PermName.PERM_READ | PermName.PERM_WRITE)
    # The consumer sent each back once, to the broker, which stored them.
    assert len(frames(lab, "consumer", RequestCode.CONSUMER_SEND_MSG_BACK)) == 3
    # The offsets moved past the messages sent back: nothing of TOPIC is pending.
    lab.sim.run_for(6_000)
    for r in results:
        assert consumer.offset_store.offset_table[r.message_queue].value >= r.queue_offset + 1

    # The checker's view: every acknowledged send consumed successfully exactly once; each failed
    # consumption followed by a successful send-back.
    ops, acked, consumed = history(lab.sim)
    assert acked == {r.msg_id for r in results}
    assert set(consumed) == acked and set(consumed.values()) == {1}
    consume_ops = [op for op in ops if op.f == "consume"]
    for r in results:
        mine = [op for op in consume_ops if op.invoke_value["uniq_key"] == r.msg_id]
        assert [(op.type, op.invoke_value["reconsume_times"], op.invoke_value["topic"]) for op in mine] == \
            [("fail", 0, TOPIC), ("ok", 1, TOPIC)]
    backs = [op for op in ops if op.f == "send_back"]
    assert sorted(op.invoke_value["uniq_key"] for op in backs) == sorted(acked)
    assert all(op.type == "ok" and op.value == {"via": "CONSUMER_SEND_MSG_BACK"} for op in backs)


def test_after_max_reconsume_times_the_message_is_parked_in_the_dlq(lab):
    lab = lab(ONE_MASTER)
    lab.create_topic(queues=2)
    listener = Deliveries(lab, lambda m, attempt, ctx: LATER)  # never consumed
    start_consumer(lab, listener, max_reconsume_times=2)
    lab.add_client("producer", lambda: {"producer": DefaultMQProducer("PG", NS)})
    results = send_all(lab, lab.client("producer", "producer"), [b"d-%d" % i for i in range(2)])
    broker = lab.sim.components["broker-a"]
    store = broker.message_store
    # 1 delivery + 2 retries (levels 3 and 4: 10 s, then 30 s); the third failure goes to the DLQ.
    lab.sim.run_until(lambda: store.get_max_offset_in_queue(DLQ_TOPIC, 0) == 2, 120_000)
    lab.sim.run_for(70_000)  # nothing comes again
    for r in results:
        attempts = listener.by_key[r.msg_id]
        assert [a["reconsume_times"] for a in attempts] == [0, 1, 2]
        assert [a["queue_topic"] for a in attempts] == [TOPIC, RETRY_TOPIC, RETRY_TOPIC]
        assert [a["properties"].get(MessageConst.PROPERTY_DELAY_TIME_LEVEL) for a in attempts] == [None, "3", "4"]
        assert attempts[2]["time"] - attempts[1]["time"] >= LEVEL_MS[4]

    dlq = broker.topic_config_manager.select_topic_config(DLQ_TOPIC)
    assert (dlq.read_queue_nums, dlq.write_queue_nums, dlq.perm) == (1, 1, PermName.PERM_READ | PermName.PERM_WRITE)
    dlq_lines = [e for e in lab.sim.tracer.events if e.kind == "log" and e.fields.get("logger") == "RocketmqDLQ"]
    assert sorted(e.fields["message"].split("msgUniqKey=")[1].split(",")[0] for e in dlq_lines) == \
        sorted(r.msg_id for r in results)

    # An operator reads the DLQ with a pull consumer: the same message, its history in properties.
    lab.add_client("dlq-reader", lambda: {"pull": DefaultMQPullConsumer("DLQ-READER", NS)})
    reader = lab.client("dlq-reader", "pull")
    queues = lab.run(reader.fetch_subscribe_message_queues(DLQ_TOPIC))
    assert queues == [MessageQueue(DLQ_TOPIC, "broker-a", 0)]
    pulled = lab.run(reader.pull(queues[0], "*", 0, 32))
    assert pulled.pull_status is PullStatus.FOUND
    by_key = {uniq(m): m for m in pulled.msg_found_list}
    assert set(by_key) == {r.msg_id for r in results}
    for r in results:
        m = by_key[r.msg_id]
        assert (m.topic, m.body, m.reconsume_times) == (DLQ_TOPIC, listener.by_key[r.msg_id][0]["body"], 3)
        assert m.properties[MessageConst.PROPERTY_RETRY_TOPIC] == TOPIC
        assert m.properties[MessageConst.PROPERTY_ORIGIN_MESSAGE_ID] == r.offset_msg_id
        assert m.properties[MessageConst.PROPERTY_KEYS] == m.body.decode()
        assert m.properties[MessageConst.PROPERTY_DELAY_TIME_LEVEL] == "0"

    # From the trace: nothing consumed successfully, every failure sent back (3 per message).
    ops, acked, consumed = history(lab.sim)
    assert acked == {r.msg_id for r in results} and not consumed
    backs = Counter(op.invoke_value["uniq_key"] for op in ops if op.f == "send_back" and op.type == "ok")
    assert backs == {r.msg_id: 3 for r in results}


def test_a_negative_delay_level_sends_the_message_straight_to_the_dlq(lab):
    lab = lab(ONE_MASTER)
    lab.create_topic(queues=1)

    def decide(m, attempt, context):
        context.delay_level_when_next_consume = -1
        return LATER

    listener = Deliveries(lab, decide)
    start_consumer(lab, listener)
    lab.add_client("producer", lambda: {"producer": DefaultMQProducer("PG", NS)})
    [r] = send_all(lab, lab.client("producer", "producer"), [b"poison"])
    store = lab.sim.components["broker-a"].message_store
    lab.sim.run_until(lambda: store.get_max_offset_in_queue(DLQ_TOPIC, 0) == 1, 10_000)
    lab.sim.run_for(40_000)
    assert len(listener.by_key[r.msg_id]) == 1  # never retried
    assert store.get_max_offset_in_queue("SCHEDULE_TOPIC_XXXX", 2) == 0
    [back] = [op for op in client_ops(lab.sim.tracer.events) if op.f == "send_back"]
    assert (back.type, back.invoke_value["delay_level"]) == ("ok", -1)


def send_back_ext(offset, group=GROUP, delay_level=0, **extra) -> dict:
    """What the C++ client 0.4.4 sends: offset as a string, delayLevel as a JSON number."""
    return {"group": group, "offset": str(offset), "delayLevel": delay_level, **extra}


def test_bad_send_back_requests_get_rocketmq_answers():
    sim = world(autoCreateSubscriptionGroup="false")
    try:
        client = CppClient(sim, "client")
        r = client.send("TopicTest", b"hello", "KEYS\x01k1\x02", defaultTopicQueueNums=1)
        assert r.code == ResponseCode.SUCCESS
        broker = sim.components["broker-a"]
        # The group must exist (no auto-creation here): SUBSCRIPTION_GROUP_NOT_EXIST with the FAQ.
        r = client.call(RequestCode.CONSUMER_SEND_MSG_BACK, send_back_ext(0, group="NOPE"))
        assert (r.code, r.remark) == (ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST,
                                      f"subscription group not exist, NOPE {FAQ}")
        # A system group exists from the start; an offset with no message at it is SYSTEM_ERROR.
        group = "TOOLS_CONSUMER"
        for bad in (10_000_000, 1, -5):
            r = client.call(RequestCode.CONSUMER_SEND_MSG_BACK, send_back_ext(bad, group=group))
            assert (r.code, r.remark) == (ResponseCode.SYSTEM_ERROR, f"look message by offset failed, {bad}")
        # A header without its offset is refused before anything happens.
        r = client.call(RequestCode.CONSUMER_SEND_MSG_BACK, {"group": group, "delayLevel": 0})
        assert r.code == ResponseCode.SYSTEM_ERROR and "offset" in r.remark
        assert broker.message_store.get_max_offset_in_queue("SCHEDULE_TOPIC_XXXX", 2) == 0

        # A good one: parked at level 3 for %RETRY%<group>, one more reconsume time. Version 63 <
        # V3_4_9, so the header's maxReconsumeTimes (0) does not count: not the DLQ.
        r = client.call(RequestCode.CONSUMER_SEND_MSG_BACK, send_back_ext(0, group=group, maxReconsumeTimes=0))
        assert (r.code, r.remark) == (ResponseCode.SUCCESS, None)
        sim.run_for(2)  # the dispatcher runs within 1 ms of the put
        retry = "%RETRY%" + group
        assert broker.topic_config_manager.select_topic_config(retry).read_queue_nums == 1
        cq = broker.message_store.consume_queue_table[("SCHEDULE_TOPIC_XXXX", 2)]
        [(phy, size, deliver_at)] = cq.get_units(0, 10)
        [m] = decodes(broker.message_store.commit_log.get_message(phy, size))
        assert (m.topic, m.reconsume_times, m.body) == ("SCHEDULE_TOPIC_XXXX", 1, b"hello")
        assert m.properties["REAL_TOPIC"] == retry and m.properties["DELAY"] == "3"
        assert m.properties["RETRY_TOPIC"] == "TopicTest" and m.properties["KEYS"] == "k1"
        assert m.properties["ORIGIN_MESSAGE_ID"] == create_message_id(broker.store_host, 0)  # its offset id
        assert deliver_at == m.store_timestamp + 10_000
        # A negative delay level: straight to %DLQ%<group>, whatever the count.
        r = client.call(RequestCode.CONSUMER_SEND_MSG_BACK, send_back_ext(0, group=group, delay_level=-1))
        assert r.code == ResponseCode.SUCCESS
        sim.run_until(lambda: broker.message_store.get_max_offset_in_queue("%DLQ%" + group, 0) == 1, 1_000)
    finally:
        sim.close()


def test_a_java_client_version_sets_max_reconsume_times():
    sim = world()
    try:
        client = CppClient(sim, "client")
        assert client.send("TopicTest", b"x", "", defaultTopicQueueNums=1).code == ResponseCode.SUCCESS
        broker = sim.components["broker-a"]

        async def send_back(version: int, max_times: int):
            remoting = RemotingClient(sim.nodes["client"])
            request = RemotingCommand.create_request_command(RequestCode.CONSUMER_SEND_MSG_BACK, {
                "offset": 0, "group": "G", "delayLevel": 0, "maxReconsumeTimes": max_times, "unitMode": False})
            request.version = version
            try:
                return await remoting.invoke_sync(BROKER, request, 3000)
            finally:
                await remoting.shutdown()

        # From V3_4_9 (121) on the header's limit counts: 0 retries allowed -> the DLQ at once.
        store = broker.message_store
        assert sim.run(send_back(121, 0)).code == ResponseCode.SUCCESS
        sim.run_until(lambda: store.get_max_offset_in_queue("%DLQ%G", 0) == 1, 1_000)
        assert store.get_max_offset_in_queue("SCHEDULE_TOPIC_XXXX", 2) == 0
        assert sim.run(send_back(121, 1)).code == ResponseCode.SUCCESS
        sim.run_until(lambda: store.get_max_offset_in_queue("SCHEDULE_TOPIC_XXXX", 2) == 1, 1_000)
    finally:
        sim.close()


def test_send_back_falls_back_to_the_retry_topic_and_then_to_a_local_retry(lab):
    """CONSUMER_SEND_MSG_BACK refused -> the inner producer sends the message to %RETRY%<group>;
    the brokers unreachable as well -> the consumer retries it itself 5 s later, holding its
    queue's offset back meanwhile."""
    lab = lab(TWO_MASTERS)
    lab.create_topic(queues=1)
    brokers = ["broker-a", "broker-b"]

    def decide(m, attempt, context):
        if attempt == 1 and m.body == b"cut-off":
            for b in brokers:
                lab.sim.nemesis.kill(b)
        return LATER if attempt == 1 else SUCCESS

    listener = Deliveries(lab, decide)
    consumer = start_consumer(lab, listener)
    lab.sim.run_until(lambda: len(held_queues(lab, "consumer", RETRY_TOPIC)) == 2, 35_000)
    lab.add_client("producer", lambda: {"producer": DefaultMQProducer("PG", NS)})
    producer = lab.client("producer", "producer")
    queue_a = MessageQueue(TOPIC, "broker-a", 0)

    def send_to_a(body: bytes):
        msg = Message(TOPIC, body)
        msg.keys = body.decode()
        return lab.run(producer.send(msg, queue_a))

    def send_back_done(key: str) -> bool:
        """The consumer's send-back of ``key`` has completed (ok, fail or info) in the trace."""
        events = [e for e in lab.sim.tracer.events if e.node == "consumer" and e.kind == "client"]
        ids = {e.fields["op_id"] for e in events if e.fields["type"] == "invoke" and e.fields["f"] == "send_back"
               and e.fields["value"]["uniq_key"] == key}
        return any(e.fields["op_id"] in ids and e.fields["type"] != "invoke" for e in events)

    # 1. broker-a refuses the send-back (made read-only, as mqadmin updateBrokerConfig
    #    brokerPermission=4 would): NO_PERMISSION, so the message goes out as a new message.
    broker_a = lab.sim.components["broker-a"]
    broker_a.broker_config.brokerPermission = PermName.PERM_READ
    r1 = send_to_a(b"refused")
    lab.sim.run_until(lambda: send_back_done(r1.msg_id), 10_000)
    broker_a.broker_config.brokerPermission = PermName.PERM_READ | PermName.PERM_WRITE
    back_frames = frames(lab, "broker-a", RequestCode.CONSUMER_SEND_MSG_BACK, "frame.recv")
    assert back_frames
    lab.sim.run_until(lambda: len(listener.by_key[r1.msg_id]) == 2, 60_000)
    first, second = listener.by_key[r1.msg_id]
    assert (second["queue_topic"], second["topic"], second["reconsume_times"]) == (RETRY_TOPIC, TOPIC, 1)
    assert second["properties"][MessageConst.PROPERTY_ORIGIN_MESSAGE_ID] == r1.msg_id  # the client's id
    assert second["properties"][MessageConst.PROPERTY_RETRY_TOPIC] == TOPIC
    assert second["properties"][MessageConst.PROPERTY_DELAY_TIME_LEVEL] == "3"
    assert second["time"] - first["time"] >= LEVEL_MS[3]
    ops = client_ops(lab.sim.tracer.events)
    [back] = [op for op in ops if op.f == "send_back" and op.invoke_value["uniq_key"] == r1.msg_id]
    assert (back.type, back.value) == ("ok", {"via": "RETRY_TOPIC"})
    inner = [op for op in ops if op.f == "send" and op.invoke_value["topic"] == RETRY_TOPIC]
    assert [(op.type, op.invoke_value["uniq_key"]) for op in inner] == [("ok", r1.msg_id)]

    # 2. Both brokers die while the listener runs: neither way reaches one, so the message stays
    #    with the consumer and is retried from memory 5 s later. (A partition would not do: TCP
    #    keeps the timed-out requests and delivers them when it heals, so the message would come
    #    back from the retry topic too - at least once.)
    lab.sim.run_for(15_000)  # the offsets reach the brokers and their consumerOffset.json
    r2 = send_to_a(b"cut-off")
    lab.sim.run_until(lambda: send_back_done(r2.msg_id), 30_000)
    assert consumer.offset_store.offset_table[queue_a].value == r2.queue_offset  # held back
    lab.sim.run_until(lambda: len(listener.by_key[r2.msg_id]) == 2, 10_000)
    first, second = listener.by_key[r2.msg_id]
    # Retried from memory: same queue, reconsumeTimes counted by the consumer, 5 s later.
    assert (second["queue_topic"], second["reconsume_times"]) == (TOPIC, 1)
    assert second["time"] - first["time"] >= 5_000
    assert MessageConst.PROPERTY_RETRY_TOPIC not in second["properties"]
    ops = client_ops(lab.sim.tracer.events)
    [back] = [op for op in ops if op.f == "send_back" and op.invoke_value["uniq_key"] == r2.msg_id]
    # The requests went out on connections that then died: for the client their outcome is
    # unknown (info, not fail); the brokers, killed first, stored nothing, as the end shows.
    assert back.type == "info"
    for b in brokers:
        lab.sim.nemesis.restart(b)
    lab.sim.run_for(40_000)
    assert consumer.offset_store.offset_table[queue_a].value == r2.queue_offset + 1
    assert len(listener.by_key[r2.msg_id]) == 2

    # Nothing lost, nothing consumed successfully twice.
    _, acked, consumed = history(lab.sim)
    assert {r1.msg_id, r2.msg_id} <= acked and set(consumed) == acked and set(consumed.values()) == {1}
