"""Orderly consumption (4.x remoting client) and ordered sends, on the simulator.

What these tests hold rmqlab to is RocketMQ's client: ``ConsumeMessageOrderlyService``,
``ProcessQueue``, ``RebalanceImpl.lock`` / ``lockAll`` / ``unlock`` / ``unlockAll``,
``RebalancePushImpl.removeUnnecessaryMessageQueue``, ``DefaultMQPushConsumerImpl.pullMessage`` (the
orderly branch), ``SelectMessageQueueByHash`` (client/src/main/java/org/apache/rocketmq/client/), and
the broker's ``RebalanceLockManager`` and ``SendMessageProcessor.handleRetryAndDLQ``
(broker/src/main/java/org/apache/rocketmq/broker/).
"""

from __future__ import annotations

from rmqlab.client import DefaultMQProducer, DefaultMQPushConsumer, MessageQueue
from rmqlab.client.consumer import ConsumeOrderlyStatus, MessageListenerOrderly
from rmqlab.client.producer.selector import SelectMessageQueueByHash, java_hash_code
from rmqlab.common.message import Message
from rmqlab.remoting import RequestCode
from rmqlab.trace import client_ops
from tests.client_helpers import GROUP, NS, TOPIC, held_queues

SUCCESS = ConsumeOrderlyStatus.SUCCESS
SUSPEND = ConsumeOrderlyStatus.SUSPEND_CURRENT_QUEUE_A_MOMENT
ONE_MASTER = [("broker-a", "broker-a", 0, "ASYNC_MASTER", 10911, {})]
BROKER_A = "127.0.0.1:10911"


class OrderlyRecorder:
    """An orderly listener: records (client, queue id, offset, body), answers ``status(msg)``."""

    def __init__(self, name: str, log: list, status=lambda msg: SUCCESS):
        self.name, self.log, self.status = name, log, status

    def __call__(self, msgs, context):
        result = SUCCESS
        for m in msgs:
            self.log.append((self.name, context.message_queue.queue_id, m.queue_offset, m.body, m.reconsume_times))
            if self.status(m) is not SUCCESS:
                result = SUSPEND
        return result


def orderly_consumer(recorder, group: str = GROUP, topic: str = TOPIC, **kwargs) -> DefaultMQPushConsumer:
    consumer = DefaultMQPushConsumer(group, NS, **kwargs)
    consumer.subscribe(topic, "*")
    consumer.register_message_listener(MessageListenerOrderly(recorder))
    return consumer


def send_ordered(lab, producer: DefaultMQProducer, orders: int, steps: int, topic: str = TOPIC):
    """``orders`` orders of ``steps`` steps each, interleaved, each order by its id as sharding key:
    bodies "order-<o>:<step>"."""
    async def go():
        results = []
        for step in range(steps):
            for o in range(orders):
                msg = Message(topic, f"order-{o}:{step}".encode())
                results.append(await producer.send(msg, selector=SelectMessageQueueByHash(), arg=f"order-{o}"))
        return results
    return lab.run(go())


def steps_by_order(log) -> dict[str, list[int]]:
    out: dict[str, list[int]] = {}
    for _client, _q, _off, body, _n in log:
        order, step = body.decode().split(":")
        out.setdefault(order, []).append(int(step))
    return out


def frames(sim, node: str, code: int) -> list:
    return [e for e in sim.tracer.events if e.kind == "frame.send" and e.node == node
            and e.fields.get("code") == code and not e.fields["flag"] & 1]


# -- the selector ------------------------------------------------------------------------------------

def test_select_message_queue_by_hash_uses_javas_hash_code():
    # String.hashCode values known from Java (31-based, int overflow), and the abs of Java's %.
    assert java_hash_code("") == 0
    assert java_hash_code("hello") == 99162322
    assert java_hash_code("Aa") == java_hash_code("BB") == 2112
    assert java_hash_code("polygenelubricants") == -2147483648  # Integer.MIN_VALUE
    assert java_hash_code("\u65e5") == 0x65E5  # one UTF-16 unit: its value
    assert java_hash_code("\U0001F600") == 0xD83D * 31 + 0xDE00  # a surrogate pair: two units
    assert java_hash_code(7) == 7 and java_hash_code(-7) == -7  # Integer.hashCode
    assert java_hash_code(1 << 40) == 256  # Long.hashCode: (int) (v ^ (v >>> 32))
    assert java_hash_code(True) == 1231
    mqs = [MessageQueue(TOPIC, "broker-a", q) for q in range(3)]
    msg = Message(TOPIC, b"x")
    selector = SelectMessageQueueByHash()
    assert selector.select(mqs, msg, "hello") == mqs[99162322 % 3]
    assert selector.select(mqs, msg, -7) == mqs[1]  # -7 % 3 == -1 in Java: abs 1
    assert selector.select(mqs, msg, "polygenelubricants") == mqs[2]  # -2147483648 % 3 == -2 in Java


# -- one consumer, then two --------------------------------------------------------------------------

def test_one_orderly_consumer_consumes_each_queue_in_order_after_locking_it(lab):
    lab = lab(ONE_MASTER)
    lab.create_topic()
    log: list = []
    lab.add_client("c1", lambda: {"consumer": orderly_consumer(OrderlyRecorder("c1", log))})
    lab.sim.run_until(lambda: len(held_queues(lab, "c1")) == 4, 5_000)
    # Every queue was locked at the broker before it was taken: the topic's four and the retry topic's.
    manager = lab.sim.components["broker-a"].admin_broker_processor.rebalance_lock_manager
    cid = lab.client("c1", "consumer").client_factory.client_id
    assert [manager.lock_holder(GROUP, MessageQueue(TOPIC, "broker-a", q)) for q in range(4)] == [cid] * 4
    assert all(pq.locked for pq in lab.client("c1", "consumer").rebalance_impl.process_queue_table.values())

    lab.add_client("producer", lambda: {"producer": DefaultMQProducer("PG", NS)})
    results = send_ordered(lab, lab.client("producer", "producer"), orders=6, steps=10)
    # Ordered sends: one order, one queue -- the queue SelectMessageQueueByHash picks.
    queues_of: dict[str, set[int]] = {}
    for step in range(10):
        for o in range(6):
            queues_of.setdefault(f"order-{o}", set()).add(results[step * 6 + o].message_queue.queue_id)
    assert queues_of == {k: {abs(java_hash_code(k)) % 4} for k in queues_of}
    lab.sim.run_until(lambda: len(log) >= 60, 10_000)
    lab.sim.run_for(1_000)
    assert len(log) == 60
    assert steps_by_order(log) == {f"order-{o}": list(range(10)) for o in range(6)}
    for q in range(4):
        offsets = [off for _c, qid, off, _b, _n in log if qid == q]
        assert offsets == sorted(offsets) and len(set(offsets)) == len(offsets)

    # The trace: every consume says it is orderly and where the message was.
    ops = [op for op in client_ops(lab.sim.tracer.events) if op.f == "consume"]
    assert len(ops) == 60 and all(op.type == "ok" for op in ops)
    assert all(op.invoke_value["orderly"] is True for op in ops)
    assert sorted((op.invoke_value["queue_id"], op.invoke_value["queue_offset"]) for op in ops) == \
        sorted((q, off) for _c, q, off, _b, _n in log)
