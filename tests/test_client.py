"""The clients: producer, pull and push consumers, admin, on the simulator (and one run
on the real runtime).

Each scenario is a real cluster: a NamesrvController and BrokerControllers (configured through
load_namesrv_config / load_broker_config, stores under each node's store_dir), and client
processes (ClientProcess) on nodes of their own. Results are read from the clients' return values
and, as a checker would, from the trace alone: every send and every consumed message is a
``client`` operation carrying the message's UNIQ_KEY (rmqlab.trace.client_ops).

Facts of RocketMQ the scenarios lean on:

* topics are created up front with the admin client (``updateTopic -c``): an auto-created topic
  exists only on the brokers that received its first messages, and clients learn of the others
  only at their next 30 s route refresh;
* a process kill closes the broker's connection to the name server, which then drops the broker
  from its routes at once; clients see that at their next route refresh (pollNameServerInterval,
  30 s) - until then they keep trying the dead broker;
* a consumer group with no stored offset starts a fresh queue at 0 (the broker answers offset 0
  while the queue's first message is in memory).
"""

from __future__ import annotations

import asyncio
import random
from collections import Counter

import pytest

from rmqlab.broker.broker_controller import BrokerController
from rmqlab.common.topic_config import TopicConfig
from rmqlab.client import (AllocateMessageQueueAveragely, ClientConfig, ClientProcess, ConsumeFromWhere,
                           DefaultMQAdminExt, DefaultMQProducer, DefaultMQPullConsumer, MessageQueue,
                           MQBrokerException, MQClientException, MQClientManager, PullStatus, SendStatus)
from rmqlab.client.exceptions import outcome_unknown, request_never_sent
from rmqlab.client.impl.mq_client_api_impl import MQClientAPIImpl
from rmqlab.client.impl.mq_client_instance import topic_route_data_to_topic_subscribe_info
from rmqlab.client.latency.mq_fault_strategy import MQFaultStrategy
from rmqlab.client.producer.topic_publish_info import TopicPublishInfo
from rmqlab.common.message import Message
from rmqlab.common.message.message_const import MessageConst
from rmqlab.config.loader import load_broker_config, load_namesrv_config
from rmqlab.namesrv import NamesrvController
from rmqlab.remoting.exceptions import RemotingConnectError, RemotingTimeoutError
from rmqlab.remoting.protocol.route.topic_route_data import BrokerData, QueueData, TopicRouteData
from rmqlab.remoting.remoting_command import RemotingCommand
from rmqlab.remoting.response_code import ResponseCode
from rmqlab.runtime.component import Component
from rmqlab.runtime.real import RealNode
from rmqlab.runtime.real_cluster import free_ports
from rmqlab.runtime.sim import Simulation
from rmqlab.trace import Tracer, client_ops, trace_hash
from tests.client_helpers import (CLUSTER, GROUP, MASTER_SLAVE, NS, TOPIC, TWO_MASTERS, held_queues, history,
                                  history_of, Lab, push_consumer, Recorder, send_all, uniq)

# ---------------------------------------------------------------------------------------------
# producer
# ---------------------------------------------------------------------------------------------

def test_sync_async_and_oneway_sends_store_every_message(lab):
    lab = lab()
    lab.create_topic()
    lab.add_client("producer", lambda: {"producer": DefaultMQProducer("PG", NS)})
    producer = lab.client("producer", "producer")

    results = send_all(lab, producer, [f"sync-{i}".encode() for i in range(6)])
    for r in results:
        assert r.send_status is SendStatus.SEND_OK
        assert r.message_queue.topic == TOPIC and r.message_queue.broker_name in ("broker-a", "broker-b")
        assert len(r.msg_id) == 32 and len(r.offset_msg_id) == 32  # UNIQ_KEY; store host + commitlog offset
    assert len({r.msg_id for r in results}) == 6

    callbacks = []

    class SendCallback:  # Java's SendCallback shape
        def on_success(self, result):
            callbacks.append((result, None))

        def on_exception(self, error):
            callbacks.append((None, error))

    async def send_async():
        futures = [producer.send_async(Message(TOPIC, f"async-{i}".encode()),
                                       SendCallback() if i % 2 else lambda r, e: callbacks.append((r, e)))
                   for i in range(4)]
        return await asyncio.gather(*futures)

    async_results = lab.run(send_async())
    assert [r.send_status for r in async_results] == [SendStatus.SEND_OK] * 4
    assert sorted(r.msg_id for r, e in callbacks if e is None) == sorted(r.msg_id for r in async_results)

    oneway = [Message(TOPIC, f"oneway-{i}".encode()) for i in range(3)]

    async def send_oneway():
        for m in oneway:
            assert await producer.send_oneway(m) is None

    lab.run(send_oneway())
    lab.sim.run_for(100)

    # Everything is on the brokers: a pull consumer reads the 13 bodies back, UNIQ_KEYs intact.
    lab.add_client("reader", lambda: {"consumer": DefaultMQPullConsumer("reader", NS)})
    reader = lab.client("reader", "consumer")

    async def read_all():
        found = {}
        for mq in await reader.fetch_subscribe_message_queues(TOPIC):
            result = await reader.pull(mq, "*", 0, 32)
            for m in result.msg_found_list:
                found[uniq(m)] = m.body
        return found

    found = lab.run(read_all())
    expected = {r.msg_id: None for r in results + async_results}
    expected.update({uniq(m): None for m in oneway})
    assert set(found) == set(expected)
    assert sorted(found.values()) == sorted([f"sync-{i}".encode() for i in range(6)]
                                            + [f"async-{i}".encode() for i in range(4)]
                                            + [f"oneway-{i}".encode() for i in range(3)])

    # The trace tells the same story: sync and async sends ok with their queue, oneway sends info.
    ops = [op for op in client_ops(lab.sim.tracer.events) if op.f == "send"]
    assert Counter(op.type for op in ops) == {"ok": 10, "info": 3}
    for op in ops:
        assert op.invoke_value["topic"] == TOPIC and op.invoke_value["uniq_key"]
        if op.type == "ok":
            assert op.value["send_status"] == "SEND_OK" and op.value["msg_id"] == op.invoke_value["uniq_key"]
    assert {op.invoke_value["uniq_key"] for op in ops} == set(expected)


def test_send_failures_are_traced_as_fail(lab):
    lab = lab()
    lab.add_client("producer", lambda: {"producer": DefaultMQProducer("PG", NS)})
    producer = lab.client("producer", "producer")
    with pytest.raises(MQClientException) as e:
        lab.run(producer.send(Message(TOPIC, b"")))
    assert e.value.response_code == ResponseCode.MESSAGE_ILLEGAL
    with pytest.raises(MQClientException):
        lab.run(producer.send(Message("bad topic!", b"x")))
    ops = [op for op in client_ops(lab.sim.tracer.events) if op.f == "send"]
    assert [op.type for op in ops] == ["fail", "fail"]
    assert "body length is zero" in ops[0].error


def test_auto_create_through_tbw102(lab):
    lab = lab()
    lab.add_client("producer", lambda: {"producer": DefaultMQProducer("PG", NS)})
    producer = lab.client("producer", "producer")
    result = lab.run(producer.send(Message("NewTopic", b"first")))
    assert result.send_status is SendStatus.SEND_OK
    # The broker created the topic from TBW102 with the producer's defaultTopicQueueNums (4) queues
    # and registered it with the name server at once.
    async def registered():
        return await lab.route_brokers("NewTopic") == {result.message_queue.broker_name}

    lab.wait_until(registered, 1000)
    route = lab.run(lab.admin.examine_topic_route_info("NewTopic"))
    assert [(q.read_queue_nums, q.write_queue_nums) for q in route.queue_datas] == [(4, 4)]
    frames = [e.fields["name"] for e in lab.sim.tracer.events
              if e.node == "producer" and e.kind == "frame.send"]
    # As the C++ client does: route of the topic (17), then TBW102's, then the send.
    assert frames[:3] == ["GET_ROUTEINFO_BY_TOPIC", "GET_ROUTEINFO_BY_TOPIC", "SEND_MESSAGE_V2"]


def test_routes_come_from_the_next_name_server_when_one_is_gone(lab):
    lab = lab(namesrvs={"namesrv-1": 9876, "namesrv-2": 9877})
    lab.create_topic()
    lab.create_topic("Other")
    addrs = {"127.0.0.1:9876": "namesrv-1", "127.0.0.1:9877": "namesrv-2"}
    lab.add_client("producer", lambda: {"producer": DefaultMQProducer("PG", lab.namesrv_addr)})
    producer = lab.client("producer", "producer")
    send_all(lab, producer, [b"first"])
    api = producer.client_factory.mq_client_api_impl
    chosen = api.namesrv_addr_chosen
    lab.sim.nemesis.kill(addrs[chosen])
    lab.sim.run_for(50)
    # A topic the producer has no route for yet: the route request goes to the other name server.
    result = lab.run(producer.send(Message("Other", b"second")))
    assert result.send_status is SendStatus.SEND_OK
    routes = [e.fields["peer"] for e in lab.sim.tracer.events if e.node == "producer" and e.kind == "frame.recv"
              and e.fields.get("name") == "SUCCESS" and e.fields["peer"] in addrs]
    assert routes[-1] != chosen and api.namesrv_addr_chosen != chosen


def test_queue_selection_is_round_robin_over_queues_and_brokers(lab):
    lab = lab()
    lab.create_topic()
    lab.add_client("producer", lambda: {"producer": DefaultMQProducer("PG", NS)})
    producer = lab.client("producer", "producer")
    results = send_all(lab, producer, [f"m{i}".encode() for i in range(24)])
    queues = [(r.message_queue.broker_name, r.message_queue.queue_id) for r in results]
    # 8 writable queues (4 per broker, sorted by broker name), visited in turn from a random start.
    order = [("broker-a", i) for i in range(4)] + [("broker-b", i) for i in range(4)]
    start = order.index(queues[0])
    assert queues == [order[(start + i) % 8] for i in range(24)]
    assert Counter(queues) == {q: 3 for q in order}
    # Each queue's offsets count up from 0.
    for q in order:
        assert [r.queue_offset for r in results if (r.message_queue.broker_name, r.message_queue.queue_id) == q] \
            == [0, 1, 2]


def _kill_broker_a_and_send(lab, latency_enable: bool, count: int, gap_ms: float):
    config = ClientConfig(send_latency_enable=latency_enable)
    lab.add_client("producer", lambda: {"producer": DefaultMQProducer("PG", NS, client_config=config)})
    producer = lab.client("producer", "producer")
    assert {r.message_queue.broker_name for r in send_all(lab, producer, [b"warm-%d" % i for i in range(8)])} \
        == {"broker-a", "broker-b"}
    lab.sim.run_for(100)  # past the producer's first route refresh (10 ms after start; then every 30 s)
    lab.sim.nemesis.kill("broker-a")
    killed_at = lab.sim.now_ms()

    async def go():
        sent = []
        for i in range(count):
            result = await producer.send(Message(TOPIC, b"after-%d" % i))
            sent.append((lab.sim.now_ms() - killed_at, result))
            await lab.sim.nodes["producer"].sleep(gap_ms)
        return sent

    sent = lab.run(go())
    ops = [op for op in client_ops(lab.sim.tracer.events) if op.f == "send"][8:]
    return sent, ops, producer


def test_send_to_a_killed_broker_retries_on_another_and_latency_fault_avoidance_skips_it(lab):
    lab = lab()
    lab.create_topic()
    # One send every 500 ms for 14 s after broker-a's process dies (before the producer's next
    # route refresh, which would drop broker-a altogether).
    sent, ops, producer = _kill_broker_a_and_send(lab, True, 28, 500)
    assert all(r.send_status is SendStatus.SEND_OK and r.message_queue.broker_name == "broker-b" for _, r in sent)
    assert all(op.type == "ok" for op in ops)
    attempts = [op.value["brokers_sent"] for op in ops]
    # The first send that picked broker-a failed there (connection refused) and was retried on
    # broker-b; the failure isolated broker-a for 10 s (a failed attempt counts as 10 000 ms of
    # latency), so every send in the next 10 s went straight to broker-b.
    first = next(i for i, a in enumerate(attempts) if a[0] == "broker-a")
    assert attempts[first] == ["broker-a", "broker-b"]
    failed_at = sent[first][0]
    isolated = [a for (t, _), a in zip(sent, attempts) if failed_at < t < failed_at + 10_000]
    assert len(isolated) >= 18 and all(a == ["broker-b"] for a in isolated)
    # After the isolation broker-a is tried again (and isolated again).
    later = [a for (t, _), a in zip(sent, attempts) if t > failed_at + 10_000]
    assert ["broker-a", "broker-b"] in later
    assert not producer.mq_fault_strategy.latency_fault_tolerance.is_available("broker-a")


def test_without_latency_fault_avoidance_the_dead_broker_keeps_its_turn(lab):
    lab = lab()
    lab.create_topic()
    sent, ops, _ = _kill_broker_a_and_send(lab, False, 16, 500)
    assert all(r.message_queue.broker_name == "broker-b" for _, r in sent)
    attempts = [op.value["brokers_sent"] for op in ops]
    # Plain round robin over [a0 a1 a2 a3 b0 b1 b2 b3]: when the index reaches a0 the send fails
    # there, and the retry's filter walks the index past a1..a3 to b0; then b1, b2, b3, and a0
    # again. So one send in four tries the dead broker first, for as long as the route lists it.
    assert sum(a == ["broker-a", "broker-b"] for a in attempts) == len(attempts) // 4
    assert all(a in (["broker-a", "broker-b"], ["broker-b"]) for a in attempts)


def test_async_sends_retry_on_another_broker_and_oneway_sends_do_not(lab):
    lab = lab()
    lab.create_topic()
    lab.add_client("producer", lambda: {"producer": DefaultMQProducer("PG", NS)})
    producer = lab.client("producer", "producer")
    send_all(lab, producer, [b"warm"])
    lab.sim.run_for(100)  # past the producer's first route refresh (10 ms after start; then every 30 s)
    lab.sim.nemesis.kill("broker-a")
    lab.sim.run_for(50)

    async def go():
        results = [await producer.send_async(Message(TOPIC, b"async-%d" % i)) for i in range(8)]
        oneway = []
        for i in range(8):
            try:
                await producer.send_oneway(Message(TOPIC, b"oneway-%d" % i))
                oneway.append("written")
            except RemotingConnectError:
                oneway.append("refused")
        return results, oneway

    results, oneway = lab.run(go())
    assert {r.message_queue.broker_name for r in results} == {"broker-b"}
    ops = [op for op in client_ops(lab.sim.tracer.events) if op.f == "send"][1:]
    async_ops, oneway_ops = ops[:8], ops[8:]
    assert all(op.type == "ok" for op in async_ops)
    assert ["broker-a", "broker-b"] in [op.value["brokers_sent"] for op in async_ops]
    # A oneway send has one attempt: to the dead broker it fails (certainly not stored).
    assert "refused" in oneway and "written" in oneway
    assert [op.type for op in oneway_ops] == ["fail" if o == "refused" else "info" for o in oneway]


def test_no_broker_left_fails_after_all_retries(lab):
    lab = lab()
    lab.create_topic()
    lab.add_client("producer", lambda: {"producer": DefaultMQProducer("PG", NS)})
    producer = lab.client("producer", "producer")
    send_all(lab, producer, [b"warm"])
    lab.sim.nemesis.kill("broker-a")
    lab.sim.nemesis.kill("broker-b")
    # Once the producer has read the end of its connections (a request written before that could
    # not tell whether it arrived: it would be traced as info).
    lab.sim.run_for(50)
    with pytest.raises(MQClientException) as e:
        lab.run(producer.send(Message(TOPIC, b"lost")))
    assert "Send [3] times, still failed" in str(e.value)
    op = [op for op in client_ops(lab.sim.tracer.events) if op.f == "send"][-1]
    # Every attempt was refused before anything was written: certainly not stored.
    assert op.type == "fail" and len(op.value["brokers_sent"]) == 3


# ---------------------------------------------------------------------------------------------
# pull consumer
# ---------------------------------------------------------------------------------------------

def test_pull_consumer_reads_every_queue_in_order(lab):
    lab = lab()
    lab.create_topic()
    lab.add_client("producer", lambda: {"producer": DefaultMQProducer("PG", NS)})
    producer = lab.client("producer", "producer")
    results = send_all(lab, producer, [f"m{i:02d}".encode() for i in range(40)])
    lab.add_client("reader", lambda: {"consumer": DefaultMQPullConsumer(GROUP, NS)})
    reader = lab.client("reader", "consumer")

    async def read_queue(mq, expression="*", batch=3):
        offset, msgs, statuses = 0, [], []
        while True:
            result = await reader.pull(mq, expression, offset, batch)
            statuses.append(result.pull_status)
            if result.pull_status is not PullStatus.FOUND:
                return msgs, statuses, result
            assert result.next_begin_offset == offset + len(result.msg_found_list)
            msgs.extend(result.msg_found_list)
            offset = result.next_begin_offset

    async def read_all():
        mqs = await reader.fetch_subscribe_message_queues(TOPIC)
        return mqs, {mq: await read_queue(mq) for mq in mqs}

    mqs, per_queue = lab.run(read_all())
    assert mqs == sorted(MessageQueue(TOPIC, b, q) for b in ("broker-a", "broker-b") for q in range(4))
    for mq, (msgs, statuses, last) in per_queue.items():
        sent_here = [r for r in results if r.message_queue == mq]
        # In send order, offsets 0, 1, 2, ..., UNIQ_KEY and keys intact.
        assert [m.queue_offset for m in msgs] == list(range(len(sent_here)))
        assert [uniq(m) for m in msgs] == [r.msg_id for r in sent_here]
        assert [m.keys for m in msgs] == [m.body.decode() for m in msgs]
        assert statuses[-1] is PullStatus.NO_NEW_MSG
        assert (last.min_offset, last.max_offset, last.next_begin_offset) == (0, len(sent_here), len(sent_here))
    assert sum(len(v[0]) for v in per_queue.values()) == 40

    # An offset far beyond the queue's end is illegal; the broker says where the queue ends.
    mq = mqs[0]
    result = lab.run(reader.pull(mq, "*", 1000, 8))
    assert result.pull_status is PullStatus.OFFSET_ILLEGAL
    assert result.next_begin_offset == len(per_queue[mq][0])
    assert lab.run(reader.max_offset(mq)) == len(per_queue[mq][0]) and lab.run(reader.min_offset(mq)) == 0

    # Each pull is a traced operation listing what it found.
    pulls = [op for op in client_ops(lab.sim.tracer.events) if op.f == "pull"]
    assert all(op.type == "ok" for op in pulls)
    pulled = [m["uniq_key"] for op in pulls for m in op.value["messages"]]
    assert sorted(pulled) == sorted(r.msg_id for r in results)


def test_pull_consumer_filters_by_tag(lab):
    lab = lab()
    lab.create_topic(queues=1)
    lab.add_client("producer", lambda: {"producer": DefaultMQProducer("PG", NS)})
    producer = lab.client("producer", "producer")
    tagged = {}
    for tag in ("TagA", "TagB", "TagC"):
        tagged[tag] = {r.msg_id for r in send_all(lab, producer, [f"{tag}-{i}".encode() for i in range(4)], tags=tag)}
    lab.add_client("reader", lambda: {"consumer": DefaultMQPullConsumer(GROUP, NS)})
    reader = lab.client("reader", "consumer")

    async def read(expression):
        found = set()
        for mq in await reader.fetch_subscribe_message_queues(TOPIC):
            result = await reader.pull(mq, expression, 0, 32)
            found |= {uniq(m) for m in result.msg_found_list}
        return found

    assert lab.run(read("TagA || TagC")) == tagged["TagA"] | tagged["TagC"]
    assert lab.run(read("TagB")) == tagged["TagB"]
    assert lab.run(read("*")) == tagged["TagA"] | tagged["TagB"] | tagged["TagC"]

    async def pull_unmatched():
        return [await reader.pull(mq, "TagD", 0, 32) for mq in await reader.fetch_subscribe_message_queues(TOPIC)]

    # Messages exist but none matches: NO_MATCHED_MSG, and the offset moves past what was scanned.
    results = lab.run(pull_unmatched())
    assert len(results) == 2 and all(r.max_offset > 0 for r in results)
    for result in results:
        assert result.pull_status is PullStatus.NO_MATCHED_MSG and not result.msg_found_list
        assert result.next_begin_offset == result.max_offset


def test_pull_consumer_offsets_are_kept_by_the_broker(lab):
    lab = lab()
    lab.create_topic()
    lab.add_client("reader", lambda: {"consumer": DefaultMQPullConsumer(GROUP, NS)})
    reader = lab.client("reader", "consumer")
    mqs = lab.run(reader.fetch_subscribe_message_queues(TOPIC))
    # A broker keeps offsets only for a subscription group it knows; a pull (or a heartbeat)
    # creates the group (autoCreateSubscriptionGroup).
    for mq in mqs:
        assert lab.run(reader.pull(mq, "*", 0, 1)).pull_status is PullStatus.NO_NEW_MSG
    for i, mq in enumerate(mqs):
        reader.update_consume_offset(mq, 10 + i)
    assert lab.run(reader.fetch_consume_offset(mqs[0], False)) == 10
    lab.sim.stop("reader")  # shutdown writes the offsets (UPDATE_CONSUMER_OFFSET)
    lab.sim.nemesis.restart("reader")
    lab.sim.run_for(10)
    reader = lab.client("reader", "consumer")
    assert [lab.run(reader.fetch_consume_offset(mq, True)) for mq in mqs] == [10 + i for i in range(len(mqs))]


# ---------------------------------------------------------------------------------------------
# push consumer
# ---------------------------------------------------------------------------------------------

def test_two_push_consumers_split_the_queues_and_consume_everything_once(lab):
    lab = lab()
    lab.create_topic()
    recorders = {n: Recorder(n) for n in ("consumer-1", "consumer-2")}
    for n in recorders:
        lab.add_client(n, lambda n=n: {"consumer": push_consumer(recorders[n])})
    # The second member's heartbeat makes the brokers notify the first (NOTIFY_CONSUMER_IDS_CHANGED):
    # both rebalance within a few seconds, long before the 20 s timer.
    lab.sim.run_until(lambda: len(held_queues(lab, "consumer-1")) == len(held_queues(lab, "consumer-2")) == 4,
                      5_000)
    q1, q2 = held_queues(lab, "consumer-1"), held_queues(lab, "consumer-2")
    all_queues = sorted(MessageQueue(TOPIC, b, q) for b in ("broker-a", "broker-b") for q in range(4))
    assert q1 | q2 == set(all_queues) and not q1 & q2
    # AllocateMessageQueueAveragely over the sorted client ids and queues: contiguous halves.
    ids = sorted(lab.client(n, "consumer").client_factory.client_id for n in recorders)
    strategy = AllocateMessageQueueAveragely()
    for n in recorders:
        cid = lab.client(n, "consumer").client_factory.client_id
        assert held_queues(lab, n) == set(strategy.allocate(GROUP, cid, all_queues, ids))

    lab.add_client("producer", lambda: {"producer": DefaultMQProducer("PG", NS)})
    results = send_all(lab, lab.client("producer", "producer"), [f"m{i}".encode() for i in range(60)])
    sent = {r.msg_id: r.message_queue for r in results}
    lab.sim.run_until(lambda: sum(len(r.consumed) for r in recorders.values()) >= 60, 10_000)
    lab.sim.run_for(1000)  # nothing more arrives

    consumed = [c for r in recorders.values() for c in r.consumed]
    assert sorted(c[0] for c in consumed) == sorted(sent)  # each message once
    for n, r in recorders.items():
        assert all(MessageQueue(TOPIC, b, q) in held_queues(lab, n) for _, b, q, _, _ in r.consumed)
        assert all(sent[key] == MessageQueue(TOPIC, b, q) for key, b, q, _, _ in r.consumed)
    # In order within each queue.
    for mq in all_queues:
        offsets = [o for r in recorders.values() for _, b, q, o, _ in r.consumed
                   if (b, q) == (mq.broker_name, mq.queue_id)]
        assert offsets == sorted(offsets)

    # The checker's view, from the trace alone: nothing lost, nothing duplicated, no failure.
    ops, acked, consumed_keys = history(lab.sim)
    assert acked == set(sent)
    assert set(consumed_keys) == acked and set(consumed_keys.values()) == {1}
    assert not [op for op in ops if op.type != "ok"]


def test_a_push_consumer_takes_over_the_queues_of_one_that_leaves(lab):
    lab = lab()
    lab.create_topic()
    recorders = {n: Recorder(n) for n in ("consumer-1", "consumer-2")}
    for n in recorders:
        lab.add_client(n, lambda n=n: {"consumer": push_consumer(recorders[n])})
    lab.sim.run_until(lambda: len(held_queues(lab, "consumer-1")) == 4, 5_000)
    lab.sim.stop("consumer-2")  # clean shutdown: offsets written, UNREGISTER_CLIENT
    lab.sim.run_until(lambda: len(held_queues(lab, "consumer-1")) == 8, 5_000)
    lab.add_client("producer", lambda: {"producer": DefaultMQProducer("PG", NS)})
    results = send_all(lab, lab.client("producer", "producer"), [f"m{i}".encode() for i in range(16)])
    lab.sim.run_until(lambda: len(recorders["consumer-1"].consumed) >= 16, 5_000)
    assert sorted(c[0] for c in recorders["consumer-1"].consumed) == sorted(r.msg_id for r in results)


def test_push_consumer_tag_subscription(lab):
    lab = lab()
    lab.create_topic()
    recorder = Recorder("c")
    lab.add_client("consumer", lambda: {"consumer": push_consumer(recorder, expression="TagA || TagB")})
    lab.sim.run_for(2000)
    lab.add_client("producer", lambda: {"producer": DefaultMQProducer("PG", NS)})
    producer = lab.client("producer", "producer")
    wanted = set()
    for tag in ("TagA", "TagB", "TagC"):
        keys = {r.msg_id for r in send_all(lab, producer, [f"{tag}-{i}".encode() for i in range(5)], tags=tag)}
        if tag != "TagC":
            wanted |= keys
    lab.sim.run_until(lambda: len(recorder.consumed) >= 10, 5_000)
    lab.sim.run_for(1000)
    assert {c[0] for c in recorder.consumed} == wanted and len(recorder.consumed) == 10


def consume_stats(lab: Lab):
    stats = lab.run(lab.admin.examine_consume_stats(GROUP, TOPIC))
    return {mq: w for mq, w in stats.offset_table.items() if mq.topic == TOPIC}, stats


def test_offsets_are_committed_and_a_restarted_consumer_resumes(lab):
    lab = lab()
    lab.create_topic()
    recorder = Recorder("c")
    lab.add_client("consumer", lambda: {"consumer": push_consumer(recorder)})
    lab.add_client("producer", lambda: {"producer": DefaultMQProducer("PG", NS)})
    producer = lab.client("producer", "producer")
    lab.sim.run_for(2000)

    batch1 = {r.msg_id for r in send_all(lab, producer, [b"one-%d" % i for i in range(20)])}
    lab.sim.run_until(lambda: len(recorder.consumed) == 20, 5_000)
    # Offsets reach the brokers (piggybacked on pulls, and UPDATE_CONSUMER_OFFSET every 5 s):
    # consumerProgress shows no backlog.
    lab.sim.run_for(11_000)
    table, stats = consume_stats(lab)
    assert sum(w.broker_offset for w in table.values()) == 20
    assert all(w.consumer_offset == w.broker_offset for w in table.values())
    assert stats.compute_total_diff() == 0
    updates = [e for e in lab.sim.tracer.events
               if e.node == "consumer" and e.kind == "frame.send" and e.fields["name"] == "UPDATE_CONSUMER_OFFSET"]
    assert updates and all(e.fields["flag"] == 2 for e in updates)  # oneway, as Java sends them

    # A clean stop writes the offsets; the new process resumes from them: only the new messages.
    lab.sim.stop("consumer")
    batch2 = {r.msg_id for r in send_all(lab, producer, [b"two-%d" % i for i in range(20)])}
    table, stats = consume_stats(lab)
    assert stats.compute_total_diff() == 20
    lab.sim.nemesis.restart("consumer")
    lab.sim.run_until(lambda: len(recorder.consumed) == 40, 10_000)
    lab.sim.run_for(2000)
    keys = [c[0] for c in recorder.consumed]
    assert set(keys[:20]) == batch1 and set(keys[20:]) == batch2 and len(keys) == 40

    # A kill loses what was consumed since the offsets last reached a broker: those messages (and
    # only those) come again. Nothing is lost.
    batch3 = {r.msg_id for r in send_all(lab, producer, [b"three-%d" % i for i in range(30)])}
    lab.sim.run_until(lambda: len(recorder.consumed) == 70, 5_000)
    lab.sim.nemesis.kill("consumer")
    committed, _ = consume_stats(lab)
    lab.sim.nemesis.restart("consumer")
    lab.sim.run_for(8000)
    after = recorder.consumed[70:]
    assert batch3 <= {c[0] for c in recorder.consumed[40:]}
    for key, broker, queue_id, offset, _ in after:
        assert key in batch3 and offset >= committed[MessageQueue(TOPIC, broker, queue_id)].consumer_offset
    _, acked, consumed = history(lab.sim)
    assert acked == batch1 | batch2 | batch3 and set(consumed) == acked


def test_consume_from_last_offset_and_from_first_offset(lab):
    lab = lab()
    lab.create_topic(queues=1)
    lab.add_client("producer", lambda: {"producer": DefaultMQProducer("PG", NS)})
    producer = lab.client("producer", "producer")
    old = {r.msg_id for r in send_all(lab, producer, [b"old-%d" % i for i in range(4)])}
    # Past its first messages (the broker no longer answers "offset 0" for a new group's queue
    # once its first message is beyond the in-memory share; here the share is shrunk to nothing).
    for node in ("broker-a", "broker-b"):
        lab.sim.components[node].total_physical_memory_size = 0
    last, first = Recorder("last"), Recorder("first")
    lab.add_client("c-last", lambda: {"consumer": push_consumer(last, group="G-LAST")})
    lab.add_client("c-first", lambda: {"consumer": push_consumer(
        first, group="G-FIRST", consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET)})
    lab.sim.run_for(3000)
    new = {r.msg_id for r in send_all(lab, producer, [b"new-%d" % i for i in range(4)])}
    lab.sim.run_until(lambda: len(last.consumed) >= 4 and len(first.consumed) >= 8, 5_000)
    assert {c[0] for c in last.consumed} == new
    assert {c[0] for c in first.consumed} == old | new


# ---------------------------------------------------------------------------------------------
# master-slave: consumption continues from the slave
# ---------------------------------------------------------------------------------------------

def test_push_consumer_keeps_consuming_from_the_slave_when_the_master_dies(lab):
    lab = lab(MASTER_SLAVE)
    lab.create_topic()
    master_addr, slave_addr = lab.addr("broker-a"), lab.addr("broker-a-s")
    recorder = Recorder("c")
    lab.add_client("consumer", lambda: {"consumer": push_consumer(recorder)})
    lab.add_client("producer", lambda: {"producer": DefaultMQProducer("PG", NS)})
    producer = lab.client("producer", "producer")
    # The slave copies the master's topics (SlaveSynchronize) once a minute; replication itself
    # starts ~5 s after it connects.
    lab.sim.run_for(65_000)
    assert lab.sim.components["broker-a-s"].topic_config_manager.select_topic_config(TOPIC) is not None

    # Meanwhile the clients' periodic tasks ran: heartbeats every 30 s to every broker (a producer
    # alone skips the slaves: it never sends to one), route refreshes every 30 s.
    def sent_by(node, name):
        return [(e.time_ms, e.fields["peer"]) for e in lab.sim.tracer.events
                if e.node == node and e.kind == "frame.send" and e.fields["name"] == name]

    heartbeats = sent_by("consumer", "HEART_BEAT")
    assert {peer for _, peer in heartbeats} == {master_addr, slave_addr, lab.addr("broker-b")}
    assert len({round(t / 1000) for t, peer in heartbeats if peer == slave_addr}) >= 3
    assert {peer for _, peer in sent_by("producer", "HEART_BEAT")} == {master_addr, lab.addr("broker-b")}
    refreshes = [t for t, _ in sent_by("consumer", "GET_ROUTEINFO_BY_TOPIC")]
    assert max(refreshes) - min(refreshes) >= 60_000

    batch1 = {r.msg_id for r in send_all(lab, producer, [b"one-%d" % i for i in range(16)])}
    lab.sim.run_until(lambda: len(recorder.consumed) == 16, 5_000)

    # The consumer falls behind on broker-a: its requests stop reaching the master (one way; the
    # pulls the master holds answer empty after their 15 s), so the second batch's broker-a half
    # is still unconsumed when the master's process dies...
    lab.sim.nemesis.partition_one_way(["consumer"], ["broker-a"])
    lab.sim.run_for(16_000)
    results2 = send_all(lab, producer, [b"two-%d" % i for i in range(16)])
    on_a = {r.msg_id for r in results2 if r.message_queue.broker_name == "broker-a"}
    assert len(on_a) == 8
    lab.sim.run_until(lambda: len(recorder.consumed) == 24, 5_000)
    master, slave = lab.sim.components["broker-a"], lab.sim.components["broker-a-s"]
    lab.sim.run_until(lambda: slave.message_store.get_max_phy_offset() == master.message_store.get_max_phy_offset(),
                      2_000)  # async replication trails by ~100 ms
    lab.sim.nemesis.kill("broker-a")
    killed_at = lab.sim.now_ms()
    lab.sim.nemesis.heal()

    # ... and it consumes them from the slave once its route no longer lists the master (the next
    # route refresh, within 30 s); until then its pulls to the dead master fail.
    lab.sim.run_until(lambda: len(recorder.consumed) == 32, 35_000)
    assert {c[0] for c in recorder.consumed[24:]} == on_a
    assert {c[1] for c in recorder.consumed[24:]} == {"broker-a"}
    pulls = [e for e in lab.sim.tracer.events if e.node == "consumer" and e.kind == "frame.recv"
             and e.time_ms > killed_at and e.fields.get("peer") == slave_addr and e.fields["remark"] == "FOUND"]
    assert pulls, "no message was pulled from the slave"

    # Offsets then live on the slave: the consumer writes them there (the master is gone). The
    # persist task's next run is done at once here: a consumer caught up on a slave re-pulls
    # without pause (the slave answers PULL_RETRY_IMMEDIATELY, see DefaultMQPushConsumer), which
    # makes every simulated second costly.
    consumer = lab.client("consumer", "consumer")
    lab.run(consumer.persist_consumer_offset())
    lab.sim.run_for(20)
    updates = {e.fields["peer"] for e in lab.sim.tracer.events if e.node == "consumer" and e.kind == "frame.send"
               and e.time_ms > killed_at and e.fields["name"] == "UPDATE_CONSUMER_OFFSET"}
    assert slave_addr in updates and master_addr not in updates
    offsets = slave.consumer_offset_manager
    assert [offsets.query_offset(GROUP, TOPIC, q) for q in range(4)] \
        == [slave.message_store.get_max_offset_in_queue(TOPIC, q) for q in range(4)]
    assert sum(offsets.query_offset(GROUP, TOPIC, q) for q in range(4)) == 16

    # The master comes back: once the clients' routes list it again and the consumer's heartbeat
    # has told the new master process about the group (both periodic tasks, every 30 s, are run at
    # once here, for the same reason), the producer writes to it again, the consumer's pulls go to
    # it, and new messages flow from there.
    lab.sim.nemesis.restart("broker-a")
    lab.sim.run_for(100)
    for client in (consumer, producer):
        lab.run(client.client_factory.update_all_topic_route_info_from_name_server())
    lab.run(consumer.client_factory.send_heartbeat_to_all_broker_with_lock())
    lab.sim.run_for(100)
    back_at = lab.sim.now_ms()
    results3 = send_all(lab, producer, [b"three-%d" % i for i in range(16)])
    batch3 = {r.msg_id for r in results3}
    assert {r.message_queue.broker_name for r in results3} == {"broker-a", "broker-b"}
    lab.sim.run_until(lambda: len(recorder.consumed) >= 48, 5_000)
    assert {c[0] for c in recorder.consumed[32:]} == batch3
    found = {e.fields["peer"] for e in lab.sim.tracer.events if e.node == "consumer" and e.kind == "frame.recv"
             and e.time_ms > back_at and e.fields["remark"] == "FOUND"}
    assert master_addr in found and slave_addr not in found

    _, acked, consumed = history(lab.sim)
    assert acked == batch1 | {r.msg_id for r in results2} | batch3 and set(consumed) == acked


def test_a_lagging_consumer_is_sent_to_the_slave_by_suggest_which_broker_id(lab):
    # slaveReadEnable on the master too: it then suggests the group's whichBrokerWhenConsumeSlowly
    # (1) to a consumer whose next message is no longer in memory (here: any but the newest, the
    # broker's memory estimate being shrunk to nothing).
    brokers = [(n, b, i, r, p, dict(o, slaveReadEnable=True)) for n, b, i, r, p, o in MASTER_SLAVE]
    lab = lab(brokers, slave_synchronize_period_ms=3_000)
    lab.create_topic(queues=1)
    lab.sim.run_for(12_000)  # the slave has the topic (first sync after 10 s) and replicates
    slave_addr = lab.addr("broker-a-s")
    lab.add_client("producer", lambda: {"producer": DefaultMQProducer("PG", NS)})
    producer = lab.client("producer", "producer")
    queue = MessageQueue(TOPIC, "broker-a", 0)

    async def send_to_a():
        return [await producer.send(Message(TOPIC, b"m-%d" % i), queue) for i in range(40)]

    sent = {r.msg_id for r in lab.run(send_to_a())}
    master, slave = lab.sim.components["broker-a"], lab.sim.components["broker-a-s"]
    lab.sim.run_until(lambda: slave.message_store.get_max_phy_offset() == master.message_store.get_max_phy_offset(),
                      2_000)
    master.total_physical_memory_size = 0
    started = lab.sim.now_ms()
    recorder = Recorder("c")
    # From the first offset: a new group's first message being "on disk" now, the broker gives no
    # offset and CONSUME_FROM_LAST_OFFSET would start at the end.
    lab.add_client("consumer", lambda: {"consumer": push_consumer(
        recorder, pull_batch_size=8, consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET)})
    lab.sim.run_until(lambda: len(recorder.consumed) == 40, 5_000)
    assert {c[0] for c in recorder.consumed} == sent
    found_from = [e.fields["peer"] for e in lab.sim.tracer.events
                  if e.node == "consumer" and e.kind == "frame.recv" and e.time_ms > started
                  and e.fields["name"] == "SUCCESS" and e.fields["remark"] == "FOUND"]
    # The master answers each batch with "next from broker 1"; the slave (whose group still has a
    # master) answers with "next from broker 0": the consumer alternates.
    master_addr = lab.addr("broker-a")
    assert found_from == [master_addr, slave_addr, master_addr, slave_addr, master_addr]
    # A pull sent to a slave never commits an offset there (the commitOffset bit is cleared).
    to_slave = [int(e.fields["ext_fields"]["sysFlag"]) for e in lab.sim.tracer.events
                if e.node == "consumer" and e.kind == "frame.send" and e.fields["peer"] == slave_addr
                and e.fields["name"] == "PULL_MESSAGE"]
    assert to_slave and not any(flag & 1 for flag in to_slave)


# ---------------------------------------------------------------------------------------------
# admin
# ---------------------------------------------------------------------------------------------

def test_admin_cluster_list_topic_route_update_topic_broker_status_consumer_progress(lab):
    lab = lab(MASTER_SLAVE)
    admin = lab.admin

    info = lab.run(admin.examine_broker_cluster_info())  # clusterList
    assert set(info.cluster_addr_table) == {CLUSTER}
    assert sorted(info.cluster_addr_table[CLUSTER]) == ["broker-a", "broker-b"]
    assert info.broker_addr_table["broker-a"].broker_addrs == {0: lab.addr("broker-a"), 1: lab.addr("broker-a-s")}
    assert info.broker_addr_table["broker-b"].broker_addrs == {0: lab.addr("broker-b")}

    # updateTopic -c: every master of the cluster, never the slave.
    masters = lab.run(admin.create_and_update_topic_config_by_cluster(CLUSTER, TopicConfig("Orders", 8, 6)))
    assert masters == [lab.addr("broker-a"), lab.addr("broker-b")]
    lab.sim.run_for(100)
    route = lab.run(admin.examine_topic_route_info("Orders"))  # topicRoute
    assert sorted((q.broker_name, q.read_queue_nums, q.write_queue_nums, q.perm) for q in route.queue_datas) == \
        [("broker-a", 8, 6, 6), ("broker-b", 8, 6, 6)]
    assert {b.broker_name: b.broker_addrs for b in route.broker_datas} == \
        {"broker-a": {0: lab.addr("broker-a"), 1: lab.addr("broker-a-s")}, "broker-b": {0: lab.addr("broker-b")}}
    with pytest.raises(MQClientException) as e:
        lab.run(admin.examine_topic_route_info("NoSuchTopic"))
    assert e.value.response_code == ResponseCode.TOPIC_NOT_EXIST
    with pytest.raises(MQClientException):
        lab.run(admin.create_and_update_topic_config_by_cluster("NoSuchCluster", TopicConfig("X")))

    lab.add_client("producer", lambda: {"producer": DefaultMQProducer("PG", NS)})
    results = send_all(lab, lab.client("producer", "producer"), [b"o-%d" % i for i in range(12)], topic="Orders")
    on_a = sum(r.message_queue.broker_name == "broker-a" for r in results)

    status = lab.run(admin.fetch_broker_runtime_stats(lab.addr("broker-a"))).table  # brokerStatus
    assert status["brokerRole"] == "ASYNC_MASTER" and status["brokerVersionDesc"].startswith("V5_")
    assert int(status["msgPutTotalTodayNow"]) == on_a and int(status["commitLogMaxOffset"]) > 0
    assert lab.run(admin.fetch_broker_runtime_stats(lab.addr("broker-a-s"))).table["brokerRole"] == "SLAVE"

    # consumerProgress: per queue the broker's offset, the group's and the difference.
    recorder = Recorder("c")
    lab.add_client("consumer", lambda: {"consumer": push_consumer(recorder, topic="Orders")})
    lab.sim.run_until(lambda: len(recorder.consumed) == 12, 5_000)
    lab.sim.run_for(11_000)
    stats = lab.run(admin.examine_consume_stats(GROUP, "Orders"))
    table = {mq: w for mq, w in stats.offset_table.items() if mq.topic == "Orders"}
    assert sorted(table) == sorted(MessageQueue("Orders", b, q) for b in ("broker-a", "broker-b") for q in range(8))
    assert sum(w.broker_offset for w in table.values()) == 12
    assert all(w.consumer_offset == w.broker_offset for w in table.values()) and stats.compute_total_diff() == 0
    lab.sim.stop("consumer")
    send_all(lab, lab.client("producer", "producer"), [b"p-%d" % i for i in range(5)], topic="Orders")
    assert lab.run(admin.examine_consume_stats(GROUP, "Orders")).compute_total_diff() == 5
    with pytest.raises(MQClientException):
        lab.run(admin.examine_consume_stats("NoSuchGroup", "NoSuchTopic"))


# ---------------------------------------------------------------------------------------------
# determinism
# ---------------------------------------------------------------------------------------------

def _scenario_trace(seed: int) -> str:
    lab = Lab(TWO_MASTERS, seed)
    try:
        lab.create_topic()
        recorders = {n: Recorder(n) for n in ("consumer-1", "consumer-2")}
        for n in recorders:
            lab.add_client(n, lambda n=n: {"consumer": push_consumer(recorders[n])})
        lab.add_client("producer", lambda: {"producer": DefaultMQProducer("PG", NS)})
        producer = lab.client("producer", "producer")
        send_all(lab, producer, [b"m-%d" % i for i in range(20)])
        async def send_async():
            await asyncio.gather(*[producer.send_async(Message(TOPIC, b"a-%d" % i)) for i in range(5)])

        lab.run(send_async())
        lab.sim.nemesis.kill("broker-b")
        send_all(lab, producer, [b"n-%d" % i for i in range(5)])
        lab.sim.run_for(3000)
        return trace_hash(lab.sim.tracer.events)
    finally:
        lab.close()


def test_same_seed_same_trace():
    assert _scenario_trace(11) == _scenario_trace(11)
    assert _scenario_trace(11) != _scenario_trace(12)


# ---------------------------------------------------------------------------------------------
# parts on their own
# ---------------------------------------------------------------------------------------------

def test_allocate_message_queue_averagely():
    mqs = [MessageQueue("T", b, q) for b in ("a", "b") for q in range(4)]
    ids = ["c1", "c2", "c3"]
    strategy = AllocateMessageQueueAveragely()
    shares = [strategy.allocate("G", c, mqs, ids) for c in ids]
    assert shares == [mqs[0:3], mqs[3:6], mqs[6:8]]
    assert [strategy.allocate("G", c, mqs[:2], ids) for c in ids] == [[mqs[0]], [mqs[1]], []]
    assert strategy.allocate("G", "stranger", mqs, ids) == []  # its heartbeat has not arrived yet
    assert strategy.allocate("G", "c1", mqs, ["c1"]) == mqs


def test_fault_strategy_isolation_durations_and_selection():
    now = [1000]
    strategy = MQFaultStrategy(lambda: now[0], send_latency_fault_enable=True)
    assert [strategy.compute_not_available_duration(ms) for ms in (10, 60, 100, 600, 2000, 3500, 6000, 20000)] \
        == [0, 0, 0, 2000, 5000, 6000, 10000, 30000]
    route = TopicRouteData(
        queue_datas=[QueueData("b", 2, 2, 6), QueueData("a", 2, 2, 6)],
        broker_datas=[BrokerData("C", "a", {0: "h:1"}), BrokerData("C", "b", {0: "h:2"})])
    info = TopicPublishInfo.from_route("T", route, random.Random(1))
    assert [(m.broker_name, m.queue_id) for m in info.message_queue_list] == [("a", 0), ("a", 1), ("b", 0), ("b", 1)]
    strategy.update_fault_item("a", 80, isolation=True, reachable=True)  # a failure: 10 s out
    picks = {strategy.select_one_message_queue(info, None, False).broker_name for _ in range(20)}
    assert picks == {"b"}
    now[0] += 10_000
    picks = {strategy.select_one_message_queue(info, None, False).broker_name for _ in range(20)}
    assert picks == {"a", "b"}
    # A slow but successful send (700 ms) isolates for 2 s; a fast one does not.
    strategy.update_fault_item("b", 700, isolation=False, reachable=True)
    assert not strategy.latency_fault_tolerance.is_available("b")
    strategy.update_fault_item("a", 30, isolation=False, reachable=True)
    assert strategy.latency_fault_tolerance.is_available("a")
    # A retry avoids the last broker even with the strategy off.
    plain = MQFaultStrategy(lambda: now[0])
    assert all(plain.select_one_message_queue(info, "a", True).broker_name == "b" for _ in range(10))


def test_publish_info_skips_groups_without_master_and_unwritable_queues():
    route = TopicRouteData(
        queue_datas=[QueueData("a", 4, 4, 6), QueueData("b", 4, 4, 6), QueueData("c", 4, 4, 4)],
        broker_datas=[BrokerData("C", "a", {1: "h:1"}), BrokerData("C", "b", {0: "h:2", 1: "h:3"}),
                      BrokerData("C", "c", {0: "h:4"})])
    info = TopicPublishInfo.from_route("T", route, random.Random(1))
    assert {m.broker_name for m in info.message_queue_list} == {"b"}  # a: no master; c: read-only
    assert {m.broker_name for m in topic_route_data_to_topic_subscribe_info("T", route)} == {"a", "b", "c"}


@pytest.mark.parametrize("code,status", [(0, SendStatus.SEND_OK), (10, SendStatus.FLUSH_DISK_TIMEOUT),
                                         (12, SendStatus.FLUSH_SLAVE_TIMEOUT), (11, SendStatus.SLAVE_NOT_AVAILABLE)])
def test_send_status_mapping(code, status):
    msg = Message(TOPIC, b"x")
    msg.put_property(MessageConst.PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX, "U1")
    response = RemotingCommand.create_response_command(code, ext_fields={
        "msgId": "7F00000100002A9F0000000000000000", "queueId": "3", "queueOffset": "42"})
    result = MQClientAPIImpl.process_send_response("broker-a", msg, response, "h:1")
    assert (result.send_status, result.msg_id, result.message_queue, result.queue_offset) == \
        (status, "U1", MessageQueue(TOPIC, "broker-a", 3), 42)


def test_send_error_codes_and_remoting_outcomes():
    with pytest.raises(MQBrokerException) as e:
        MQClientAPIImpl.process_send_response("broker-a", Message(TOPIC, b"x"),
                                              RemotingCommand.create_response_command(14, "busy"), "h:1")
    assert e.value.response_code == ResponseCode.SERVICE_NOT_AVAILABLE
    refused = RemotingConnectError("h:1", "connect failed: refused")
    lost = RemotingConnectError("h:1", "connection closed (remote)")
    assert request_never_sent(refused) and not outcome_unknown(refused)
    assert outcome_unknown(lost) and outcome_unknown(RemotingTimeoutError("h:1", 3000))


# ---------------------------------------------------------------------------------------------
# the real runtime
# ---------------------------------------------------------------------------------------------

def test_producer_and_consumers_on_the_real_runtime(tmp_path):
    """The same clients over TCP on the wall clock: a name server, a broker and a client process,
    each a RealNode of this process on 127.0.0.1."""
    ns_port, broker_port, ha_port = free_ports(3)
    namesrv_addr = f"127.0.0.1:{ns_port}"

    async def main():
        tracer = Tracer(lambda: 0.0)
        nodes = {n: RealNode(n, str(tmp_path / n), tracer=tracer, seed=1) for n in ("namesrv", "broker", "client")}
        namesrv = NamesrvController.from_startup_config(load_namesrv_config(overrides={"listenPort": ns_port}))
        broker = BrokerController(load_broker_config(namesrv_addr=namesrv_addr, overrides={
            "brokerName": "broker-a", "listenPort": broker_port, "haListenPort": ha_port, "brokerIP1": "127.0.0.1",
            "storePathRootDir": str(tmp_path / "broker" / "store"), "mappedFileSizeCommitLog": 1024 * 1024,
            "mappedFileSizeConsumeQueue": 6000}))
        recorder = Recorder("real")
        consumer = push_consumer(recorder)
        process = ClientProcess(admin=DefaultMQAdminExt(namesrv_addr), producer=DefaultMQProducer("PG", namesrv_addr),
                                consumer=consumer, reader=DefaultMQPullConsumer("reader", namesrv_addr))
        started = []
        try:
            for name, component in (("namesrv", namesrv), ("broker", broker)):
                component.node = nodes[name]
                await component.start(nodes[name])
                started.append(component)
            await process.clients["admin"].start(nodes["client"])
            await process.clients["admin"].create_and_update_topic_config_by_cluster(CLUSTER, TopicConfig(TOPIC, 2, 2))
            await process.start(nodes["client"])
            started.append(process)
            producer = process.clients["producer"]
            results = [await producer.send(Message(TOPIC, b"real-%d" % i)) for i in range(6)]
            assert all(r.send_status is SendStatus.SEND_OK for r in results)
            async_result = await producer.send_async(Message(TOPIC, b"real-async"))
            sent = {r.msg_id for r in results} | {async_result.msg_id}
            for _ in range(400):  # at most 20 s of wall time
                if len(recorder.consumed) >= 7:
                    break
                await asyncio.sleep(0.05)
            assert {c[0] for c in recorder.consumed} == sent
            reader = process.clients["reader"]
            pulled = set()
            for mq in await reader.fetch_subscribe_message_queues(TOPIC):
                pulled |= {uniq(m) for m in (await reader.pull(mq, "*", 0, 32)).msg_found_list}
            assert pulled == sent
        finally:
            for component in reversed(started):
                await component.shutdown()
            for node in nodes.values():
                await node.close()
        _, acked, consumed = history_of(tracer.events)
        assert acked == sent and set(consumed) == sent

    asyncio.run(asyncio.wait_for(main(), 60))


def test_broker_address_selection():
    class Idle(Component):
        async def start(self, node):
            self.node = node

    sim = Simulation(seed=1)
    try:
        sim.add_node("client", Idle)
        sim.start("client")
        instance = MQClientManager.get_instance(sim.nodes["client"]).get_or_create_mq_client_instance(
            ClientConfig(namesrv_addr=NS))
        assert instance.client_id == "127.0.0.1@client"
        instance.broker_addr_table = {"a": {0: "m:1", 1: "s:1"}, "b": {1: "s:2", 2: "s:3"}}
        find = instance.find_broker_address_in_subscribe
        assert (find("a", 0, False).broker_addr, find("a", 0, False).slave) == ("m:1", False)
        assert (find("a", 1, False).broker_addr, find("a", 1, False).slave) == ("s:1", True)
        # b's master is gone: sends have nowhere to go, pulls and offsets go to a slave.
        assert instance.find_broker_address_in_publish("b") is None
        assert (find("b", 0, False).broker_addr, find("b", 0, False).slave) == ("s:2", True)
        assert find("b", 0, True) is None
        assert find("b", 1, True).broker_addr == "s:2" and find("b", 3, True) is None
        assert find("c", 0, False) is None
    finally:
        sim.close()
