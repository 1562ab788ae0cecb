"""Orderly consumption (4.x remoting client) and ordered sends, on the simulator.

What these tests hold rmqlab to is RocketMQ's client: ``ConsumeMessageOrderlyService``,
``ProcessQueue``, ``RebalanceImpl.lock`` / ``lockAll`` / ``unlock`` / ``unlockAll``,
``RebalancePushImpl.removeUnnecessaryMessageQueue``, ``DefaultMQPushConsumerImpl.pullMessage`` (the
orderly branch), ``SelectMessageQueueByHash`` (client/src/main/java/org/apache/rocketmq/client/), and
the broker's ``RebalanceLockManager`` and ``SendMessageProcessor.handleRetryAndDLQ``
(broker/src/main/java/org/apache/rocketmq/broker/).
"""

from __future__ import annotations

import asyncio

import pytest

from rmqlab.client import DefaultMQProducer, DefaultMQPushConsumer, MessageQueue
from rmqlab.client.consumer import ConsumeOrderlyStatus, MessageListenerOrderly
from rmqlab.client.producer.selector import SelectMessageQueueByHash, java_hash_code
from rmqlab.common.message import Message
from rmqlab.common.message.message_const import MessageConst
from rmqlab.common.message.message_decoder import decodes
from rmqlab.remoting import RequestCode
from rmqlab.trace import client_ops
from tests.client_helpers import GROUP, NS, TOPIC, held_queues

SUCCESS = ConsumeOrderlyStatus.SUCCESS
SUSPEND = ConsumeOrderlyStatus.SUSPEND_CURRENT_QUEUE_A_MOMENT
ONE_MASTER = [("broker-a", "broker-a", 0, "ASYNC_MASTER", 10911, {})]
BROKER_A = "127.0.0.1:10911"


class OrderlyRecorder:
    """An orderly listener: records each message given as (client, queue id, offset, body,
    reconsume times, virtual ms), answers ``status(msg)``; a body listed in ``slow`` takes that many
    ms of the node's clock (the listener is a coroutine then, holding the queue's consume lock)."""

    def __init__(self, name: str, log: list, sim, status=lambda msg: SUCCESS, slow: dict | None = None):
        self.name, self.log, self.sim, self.status, self.slow = name, log, sim, status, slow or {}

    def __call__(self, msgs, context):
        if any(m.body in self.slow for m in msgs):
            return self._slowly(msgs, context)
        return self._record(msgs, context)

    def _record(self, msgs, context):
        result = SUCCESS
        for m in msgs:
            self.log.append((self.name, context.message_queue.queue_id, m.queue_offset, m.body, m.reconsume_times,
                             self.sim.now_ms()))
            if self.status(m) is not SUCCESS:
                result = SUSPEND
        return result

    async def _slowly(self, msgs, context):
        result = self._record(msgs, context)
        await asyncio.sleep(sum(self.slow.get(m.body, 0) for m in msgs) / 1000)  # the simulation's clock
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
    for _client, _q, _off, body, _n, _t in log:
        order, step = body.decode().split(":")
        out.setdefault(order, []).append(int(step))
    return out


def first_msg_id(lab, entry) -> str:
    """The UNIQ_KEY of the message a log entry was, from the consume operation of the trace."""
    for op in client_ops(lab.sim.tracer.events):
        if op.f == "consume" and (op.invoke_value["queue_id"], op.invoke_value["queue_offset"]) == entry[1:3]:
            return op.invoke_value["uniq_key"]
    raise AssertionError(entry)


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
    lab.add_client("c1", lambda: {"consumer": orderly_consumer(OrderlyRecorder("c1", log, lab.sim))})
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
        offsets = [off for _c, qid, off, _b, _n, _t in log if qid == q]
        assert offsets == sorted(offsets) and len(set(offsets)) == len(offsets)

    # The trace: every consume says it is orderly and where the message was.
    ops = [op for op in client_ops(lab.sim.tracer.events) if op.f == "consume"]
    assert len(ops) == 60 and all(op.type == "ok" for op in ops)
    assert all(op.invoke_value["orderly"] is True for op in ops)
    assert sorted((op.invoke_value["queue_id"], op.invoke_value["queue_offset"]) for op in ops) == \
        sorted((q, off) for _c, q, off, _b, _n, _t in log)
    check_order_reads_the_trace(list(lab.sim.tracer.events))

    # A clean shutdown unlocks every queue (unlockAll), so the next member need not wait.
    lab.sim.stop("c1")
    lab.sim.run_for(100)
    assert [manager.lock_holder(GROUP, MessageQueue(TOPIC, "broker-a", q)) for q in range(4)] == [None] * 4


@pytest.mark.parametrize("status", [ConsumeOrderlyStatus.COMMIT, ConsumeOrderlyStatus.ROLLBACK])
def test_the_deprecated_commit_and_rollback_count_as_success_with_auto_commit(lab, status):
    lab = lab(ONE_MASTER)
    lab.create_topic()
    log: list = []
    lab.add_client("c1", lambda: {"consumer": orderly_consumer(OrderlyRecorder("c1", log, lab.sim))})
    lab.client("c1", "consumer").message_listener.function = lambda msgs, ctx: (log.extend(msgs), status)[1]
    lab.sim.run_until(lambda: len(held_queues(lab, "c1")) == 4, 5_000)
    lab.add_client("producer", lambda: {"producer": DefaultMQProducer("PG", NS)})
    send_ordered(lab, lab.client("producer", "producer"), orders=1, steps=3)
    lab.sim.run_for(3_000)
    assert [m.body for m in log] == [b"order-0:0", b"order-0:1", b"order-0:2"]  # each once
    mq = MessageQueue(TOPIC, "broker-a", abs(java_hash_code("order-0")) % 4)
    assert lab.client("c1", "consumer").offset_store.offset_table[mq].value == log[-1].queue_offset + 1
    assert {op.type for op in client_ops(lab.sim.tracer.events) if op.f == "consume"} == {"ok"}


def lock_holders(lab, topic: str = TOPIC, group: str = GROUP, broker: str = "broker-a") -> list[str | None]:
    manager = lab.sim.components[broker].admin_broker_processor.rebalance_lock_manager
    return [manager.lock_holder(group, MessageQueue(topic, "broker-a", q)) for q in range(4)]


def client_id(lab, node: str) -> str:
    return lab.client(node, "consumer").client_factory.client_id


def test_a_second_consumer_waits_for_the_lock_of_a_queue_still_being_consumed(lab):
    """c2 joins while c1's listener is in the middle of a slow message of queue X: the rebalance
    gives X to c2, but c1 cannot unlock it while the listener holds the consume lock (500 ms try),
    so X stays locked by c1 and c2's LOCK_BATCH_MQ for it is refused until c1 unlocks it (its next
    rebalance). Each queue is consumed by one client at a time, and every order stays in order."""
    lab = lab(ONE_MASTER)
    lab.create_topic()
    log: list = []
    slow = {b"order-0:0": 5_000}
    lab.add_client("c1", lambda: {"consumer": orderly_consumer(OrderlyRecorder("c1", log, lab.sim, slow=slow))})
    lab.sim.run_until(lambda: len(held_queues(lab, "c1")) == 4, 5_000)
    lab.add_client("producer", lambda: {"producer": DefaultMQProducer("PG", NS)})
    producer = lab.client("producer", "producer")
    send_ordered(lab, producer, orders=8, steps=3)
    x = abs(java_hash_code("order-0")) % 4
    lab.sim.run_until(lambda: any(e[3] == b"order-0:0" for e in log), 5_000)

    lab.add_client("c2", lambda: {"consumer": orderly_consumer(OrderlyRecorder("c2", log, lab.sim))})
    c1, c2 = client_id(lab, "c1"), client_id(lab, "c2")
    # c1's rebalance dropped X (it belongs to c2 now) but could not unlock it: c1's lock stays.
    lab.sim.run_until(lambda: MessageQueue(TOPIC, "broker-a", x) not in held_queues(lab, "c1"), 3_000)
    lab.sim.run_for(1_000)
    assert lock_holders(lab)[x] == c1
    assert MessageQueue(TOPIC, "broker-a", x) not in held_queues(lab, "c2")
    refused_at = lab.sim.now_ms()
    # c2 gets X once c1 unlocked it, and then the rest of the queues are split two and two.
    lab.sim.run_until(lambda: len(held_queues(lab, "c1")) == len(held_queues(lab, "c2")) == 2, 60_000)
    assert lock_holders(lab)[x] == c2
    assert lab.sim.now_ms() > refused_at

    async def more():
        for step in range(3, 6):
            for o in range(8):
                await producer.send(Message(TOPIC, f"order-{o}:{step}".encode()), selector=SelectMessageQueueByHash(),
                                    arg=f"order-{o}")
    lab.run(more())
    lab.sim.run_until(lambda: {e[3] for e in log} >= {f"order-{o}:5".encode() for o in range(8)}, 10_000)
    lab.sim.run_for(1_000)

    # Never two clients on one queue at once: per queue, c1's consumptions, then c2's.
    for q in range(4):
        clients = [e[0] for e in log if e[1] == q]
        assert clients == sorted(clients), (q, clients)
    # Each order in order; the slow message is consumed again by c2 (c1 could not commit it: its
    # queue was dropped meanwhile) -- at least once, never out of order.
    for order, steps in steps_by_order(log).items():
        collapsed = [s for i, s in enumerate(steps) if i == 0 or steps[i - 1] != s]
        assert collapsed == list(range(6)), (order, steps)
    assert [e[0] for e in log if e[3] == b"order-0:0"] == ["c1", "c2"]


def test_lock_all_renews_the_locks_every_20_s(lab):
    """lockAll, 1 s after start and every 20 s after: one LOCK_BATCH_MQ with every queue held
    (the topic's and the retry topic's); the broker's 60 s lock never runs out."""
    lab = lab(ONE_MASTER)
    lab.create_topic()
    log: list = []
    lab.add_client("c1", lambda: {"consumer": orderly_consumer(OrderlyRecorder("c1", log, lab.sim))})
    start = lab.sim.now_ms()
    lab.sim.run_until(lambda: len(held_queues(lab, "c1")) == 4, 5_000)
    lab.sim.run_for(125_000)
    cid = client_id(lab, "c1")
    assert lock_holders(lab) == [cid] * 4
    locks = frames(lab.sim, "c1", RequestCode.LOCK_BATCH_MQ)
    # The rebalance's one-queue locks, then lockAll: every queue held in one request (the largest body).
    biggest = max(e.fields["body_size"] for e in locks)
    lock_all = [round((e.time_ms - start) / 1000) for e in locks if e.fields["body_size"] == biggest]
    assert lock_all == [21, 41, 61, 81, 101, 121]
    # Before: one lock per queue added by the first rebalance, and the first lockAll 1 s after start,
    # with what was held by then (the rebalance runs at the same time: none or some queues).
    early = [round((e.time_ms - start) / 1000) for e in locks if e.fields["body_size"] != biggest]
    held = len(lab.client("c1", "consumer").rebalance_impl.process_queue_table)
    assert set(early) == {1} and held <= len(early) <= held + 1
    # The client's view: locked, renewed less than 20 s ago.
    pqs = lab.client("c1", "consumer").rebalance_impl.process_queue_table
    assert all(pq.locked and lab.sim.now_ms() - pq.last_lock_timestamp <= 20_000 for pq in pqs.values())


# -- failures: SUSPEND, the reconsume limit ----------------------------------------------------------

def test_suspend_consumes_the_same_message_again_first_after_the_suspend_time(lab):
    """SUSPEND_CURRENT_QUEUE_A_MOMENT: the message goes back in front of its queue, its reconsume
    count +1, and the queue waits suspendCurrentQueueTimeMillis; nothing behind it is consumed
    meanwhile. The default maxReconsumeTimes (-1) is Integer.MAX_VALUE: it is never sent back."""
    lab = lab(ONE_MASTER)
    lab.create_topic()
    log: list = []
    failures = {b"order-0:1": 2}

    def status(msg):
        if failures.get(msg.body, 0) > 0:
            failures[msg.body] -= 1
            return SUSPEND
        return SUCCESS

    lab.add_client("c1", lambda: {"consumer": orderly_consumer(OrderlyRecorder("c1", log, lab.sim, status=status),
                                                               suspend_current_queue_time_millis=2_000)})
    lab.sim.run_until(lambda: len(held_queues(lab, "c1")) == 4, 5_000)
    lab.add_client("producer", lambda: {"producer": DefaultMQProducer("PG", NS)})
    send_ordered(lab, lab.client("producer", "producer"), orders=1, steps=4)
    lab.sim.run_until(lambda: len(log) >= 6, 10_000)
    lab.sim.run_for(3_000)
    assert [(e[3], e[4]) for e in log] == [(b"order-0:0", 0), (b"order-0:1", 0), (b"order-0:1", 1),
                                           (b"order-0:1", 2), (b"order-0:2", 0), (b"order-0:3", 0)]
    times = [e[5] for e in log]
    assert [round(b - a) >= 2_000 for a, b in zip(times[1:4], times[2:5])] == [True, True, False]
    assert [round(b - a) < 2_100 for a, b in zip(times[1:3], times[2:4])] == [True, True]
    ops = [op for op in client_ops(lab.sim.tracer.events) if op.f == "consume"]
    assert [op.type for op in ops] == ["ok", "fail", "fail", "ok", "ok", "ok"]
    assert not [op for op in client_ops(lab.sim.tracer.events) if op.f == "send_back"]
    # The offset moved past the message only once it succeeded.
    mq = MessageQueue(TOPIC, "broker-a", abs(java_hash_code("order-0")) % 4)
    assert lab.client("c1", "consumer").offset_store.offset_table[mq].value == log[-1][2] + 1


def test_past_max_reconsume_times_the_message_goes_to_the_dlq_and_the_queue_moves_on(lab):
    """A message still failing after maxReconsumeTimes is sent back (a normal send to
    %RETRY%<group>); the broker sees the group holds a live lock and stores it straight in
    %DLQ%<group>. The queue then goes on with the next message."""
    lab = lab(ONE_MASTER)
    lab.create_topic()
    log: list = []
    lab.add_client("c1", lambda: {"consumer": orderly_consumer(
        OrderlyRecorder("c1", log, lab.sim, status=lambda m: SUSPEND if m.body == b"order-0:0" else SUCCESS),
        max_reconsume_times=2, suspend_current_queue_time_millis=100)})
    lab.sim.run_until(lambda: len(held_queues(lab, "c1")) == 4, 5_000)
    lab.add_client("producer", lambda: {"producer": DefaultMQProducer("PG", NS)})
    send_ordered(lab, lab.client("producer", "producer"), orders=1, steps=3)
    lab.sim.run_until(lambda: len(log) >= 5, 10_000)
    lab.sim.run_for(2_000)
    assert [(e[3], e[4]) for e in log] == [(b"order-0:0", 0), (b"order-0:0", 1), (b"order-0:0", 2),
                                           (b"order-0:1", 0), (b"order-0:2", 0)]
    store = lab.sim.components["broker-a"].message_store
    assert store.get_max_offset_in_queue("%DLQ%" + GROUP, 0) == 1
    assert store.get_max_offset_in_queue("%RETRY%" + GROUP, 0) == 0
    [dlq] = decodes(store.get_message("t", "%DLQ%" + GROUP, 0, 0, 1).message_buffers[0])
    first = log[0]
    assert dlq.body == b"order-0:0" and dlq.reconsume_times == 3
    assert dlq.properties[MessageConst.PROPERTY_RETRY_TOPIC] == TOPIC
    assert dlq.properties[MessageConst.PROPERTY_ORIGIN_MESSAGE_ID] == first_msg_id(lab, first)
    backs = [op for op in client_ops(lab.sim.tracer.events) if op.f == "send_back"]
    assert [(op.type, op.invoke_value["delay_level"], op.invoke_value["reconsume_times"]) for op in backs] == \
        [("ok", 5, 2)]
    sends = [op for op in client_ops(lab.sim.tracer.events) if op.f == "send" and op.invoke_value["topic"] ==
             "%RETRY%" + GROUP]
    assert len(sends) == 1 and sends[0].type == "ok"


# -- a consumer killed -------------------------------------------------------------------------------

def test_a_killed_consumers_queues_are_taken_over_once_its_locks_expire(lab):
    """c2 dies without unlocking. The broker drops it from the group (its connection closed) and
    c1's rebalance allocates it all queues, but c2's locks live on at the broker until 60 s after
    its last lockAll: until then c1's LOCK_BATCH_MQ for them is refused and those queues wait. Then c1
    takes them over and consumes their messages from c2's last committed offset, in order."""
    lab = lab(ONE_MASTER)
    lab.create_topic()
    log: list = []
    for n in ("c1", "c2"):
        lab.add_client(n, lambda n=n: {"consumer": orderly_consumer(OrderlyRecorder(n, log, lab.sim))})
    lab.sim.run_until(lambda: len(held_queues(lab, "c1")) == len(held_queues(lab, "c2")) == 2, 30_000)
    lab.add_client("producer", lambda: {"producer": DefaultMQProducer("PG", NS)})
    producer = lab.client("producer", "producer")
    send_ordered(lab, producer, orders=8, steps=2)
    lab.sim.run_until(lambda: len(log) >= 16, 10_000)
    lab.sim.run_for(11_000)  # the offsets written to the broker (every 5 s, the first 10 s after start)
    c1, c2 = client_id(lab, "c1"), client_id(lab, "c2")
    c2_queues = sorted(mq.queue_id for mq in held_queues(lab, "c2"))
    last_lock = max(e.time_ms for e in frames(lab.sim, "c2", RequestCode.LOCK_BATCH_MQ))

    lab.sim.nemesis.kill("c2")
    killed_at = lab.sim.now_ms()

    async def more():
        for step in range(2, 4):
            for o in range(8):
                await producer.send(Message(TOPIC, f"order-{o}:{step}".encode()), selector=SelectMessageQueueByHash(),
                                    arg=f"order-{o}")
    lab.run(more())
    # c1 is allocated every queue within seconds, and asks for c2's locks, in vain, until they expire.
    lab.sim.run_until(lambda: lab.sim.now_ms() > last_lock + 59_000, 120_000)
    assert [lock_holders(lab)[q] for q in c2_queues] == [c2] * len(c2_queues)
    refused = [e for e in frames(lab.sim, "c1", RequestCode.LOCK_BATCH_MQ) if e.time_ms > killed_at]
    assert len(refused) > 10  # a rebalance every second, each trying c2's queues
    assert not [e for e in log if e[0] == "c1" and e[1] in c2_queues]
    lab.sim.run_until(lambda: len(held_queues(lab, "c1")) == 4, 10_000)
    assert lab.sim.now_ms() - last_lock > 60_000
    assert lock_holders(lab) == [c1] * 4
    lab.sim.run_until(lambda: len(log) >= 32, 10_000)
    lab.sim.run_for(1_000)
    assert len(log) == 32  # nothing consumed twice: c2 committed what it consumed before it died
    assert steps_by_order(log) == {f"order-{o}": [0, 1, 2, 3] for o in range(8)}
    assert {e[0] for e in log if e[1] in c2_queues and e[3].endswith((b":2", b":3"))} == {"c1"}


def check_order_reads_the_trace(events: list) -> None:
    """rmqlab.checker.check_order on a run where one consumer consumed every queue in order: valid;
    the same trace with two messages of a queue swapped (out-of-order, both named) or with one
    consume in the middle of a queue's run done by another consumer (two-consumers): not."""
    from rmqlab.checker import check_order
    from rmqlab.trace import TraceEvent

    r = check_order(events)
    assert r.valid and r.stats["orderly_consumes"] == 60 and r.stats["reconsumed"] == 0, r.violations
    invokes = [e for e in events if e.kind == "client" and e.fields.get("f") == "consume"
               and e.fields.get("type") == "invoke" and e.fields["value"]["queue_id"] == 0]
    first, second = invokes[0], invokes[1]

    def with_value(e: TraceEvent, **value) -> TraceEvent:
        return TraceEvent(e.seq, e.time_ms, e.node, e.kind, {**e.fields, "value": {**e.fields["value"], **value}})

    a, b = first.fields["value"], second.fields["value"]
    swapped = [with_value(e, queue_offset=b["queue_offset"], uniq_key=b["uniq_key"]) if e is first else
               with_value(e, queue_offset=a["queue_offset"], uniq_key=a["uniq_key"]) if e is second else e
               for e in events]
    r = check_order(swapped)
    assert [v.what for v in r.violations] == ["out-of-order"]
    assert r.violations[0].details["first"]["uniq_key"] == a["uniq_key"]
    assert r.violations[0].details["ahead"]["uniq_key"] == b["uniq_key"]
    # One consume of queue 0 by another node: its invoke and completion move there.
    middle = invokes[len(invokes) // 2]
    op_id = middle.fields["op_id"]
    moved = [TraceEvent(e.seq, e.time_ms, "c2", e.kind, e.fields)
             if e.kind == "client" and e.node == middle.node and e.fields.get("op_id") == op_id else e
             for e in events]
    r = check_order(moved)
    assert [v.what for v in r.violations] == ["two-consumers"]
