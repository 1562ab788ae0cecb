"""Timer messages (RocketMQ 5, RIP-43) on the simulator: HookUtils' send path and TimerMessageStore.

A message with ``TIMER_DELIVER_MS`` (what the 5.x proxy makes of a delivery timestamp),
``TIMER_DELAY_SEC`` or ``TIMER_DELAY_MS`` waits in ``rmq_sys_wheel_timer`` and is put back on its
topic and queue at the first ``timerPrecisionMs`` boundary at or after its deliver time (the
broker node's clock: virtual time here). Raw requests are sent as the C++ client sends them
(tests/test_broker.py's CppClient); one test uses rmqlab's producer and push consumer.
"""

from __future__ import annotations

import os
import random

import pytest

from rmqlab.client import DefaultMQProducer
from rmqlab.common.message import Message
from rmqlab.common.message.message_const import MessageConst
from rmqlab.common.message.message_decoder import decode, decodes
from rmqlab.remoting import ResponseCode
from rmqlab.store.timer import TIMER_TOPIC, TimerCheckpoint
from tests.broker_helpers import CppClient, close, cluster, props, world
from tests.client_helpers import NS, TOPIC, Recorder, history, push_consumer, uniq

ILLEGAL = ("timer message illegal, the delay time should not be bigger than the max delay {}ms; or if set del msg, "
           "the delay time should be bigger than the current time")
ONE_MASTER = [("broker-a", "broker-a", 0, "ASYNC_MASTER", 10911, {})]


def now(sim) -> int:
    return sim.nodes["broker-a"].now_ms()


def stored(broker, topic: str, queue_ids=range(4)):
    """Every message of ``topic`` in the broker's store, queue by queue."""
    msgs = []
    for qid in queue_ids:
        result = broker.message_store.get_message("T", topic, qid, 0, 10_000)
        msgs += [decode(data) for data in result.message_buffers]
    return msgs


def ceil_to_second(ms: int) -> int:
    return -(-ms // 1000) * 1000


def test_timer_deliver_ms_waits_in_the_timer_topic_then_arrives_intact():
    sim = world()
    c = CppClient(sim, "client")
    broker = sim.components["broker-a"]
    deliver_ms = now(sim) + 5500
    r = c.send("TopicTest", b"later", props(TAGS="TagT", KEYS="k1 k2", color="blue",
                                             TIMER_DELIVER_MS=str(deliver_ms)), queue_id=1)
    assert r.code == ResponseCode.SUCCESS and r.ext_fields["queueId"] == "1"
    sim.run_for(2)  # the dispatcher runs within 1 ms of the put
    # Parked in queue 0 of rmq_sys_wheel_timer with its slot (5.5 s rounded down) and real place.
    parked = stored(broker, TIMER_TOPIC, [0])
    assert len(parked) == 1 and parked[0].topic == TIMER_TOPIC and parked[0].queue_id == 0
    slot = deliver_ms // 1000 * 1000
    assert (parked[0].properties["TIMER_OUT_MS"], parked[0].properties["REAL_TOPIC"],
            parked[0].properties["REAL_QID"]) == (str(slot), "TopicTest", "1")
    # Not on the topic before the slot is passed: the first second boundary at or after 5.5 s.
    due = ceil_to_second(deliver_ms)
    sim.run_for(due - now(sim) - 5)
    assert broker.message_store.get_max_offset_in_queue("TopicTest", 1) == 0
    assert c.pull("TopicTest", 0, queue_id=1).code == ResponseCode.PULL_NOT_FOUND
    # A held pull is answered once it is delivered.
    r = c.pull("TopicTest", 0, queue_id=1, sys_flag=6, suspend_ms=15000)
    assert r.code == ResponseCode.SUCCESS
    assert due <= now(sim) < due + 300
    (m,) = decodes(r.body)
    assert (m.topic, m.queue_id, m.body, m.tags, m.keys) == ("TopicTest", 1, b"later", "TagT", "k1 k2")
    assert m.properties["color"] == "blue" and m.properties["UNIQ_KEY"] == r_uniq(parked[0])
    assert m.store_timestamp >= deliver_ms
    # TimerMessageStore.convert's bookkeeping, and (as in RocketMQ) the properties the string was
    # taken with before REAL_TOPIC / REAL_QID were cleared.
    p = m.properties
    assert p["TIMER_DELIVER_MS"] == str(deliver_ms) and p["TIMER_OUT_MS"] == str(slot)
    assert (p["REAL_TOPIC"], p["REAL_QID"]) == ("TopicTest", "1")
    assert int(p["TIMER_ENQUEUE_MS"]) <= int(p["TIMER_DEQUEUE_MS"]) and due <= int(p["TIMER_DEQUEUE_MS"])
    # Nothing more comes; the checkpoint (config/timercheck) moved past the delivered unit.
    sim.run_for(3000)
    assert broker.message_store.get_max_offset_in_queue("TopicTest", 1) == 1
    ckpt = broker.timer_message_store.timer_checkpoint
    assert (ckpt.last_timer_queue_offset, ckpt.master_timer_queue_offset) == (1, 1)
    close(sim)


def r_uniq(msg) -> str:
    return msg.properties[MessageConst.PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX]


def test_timer_delay_sec_with_rmqlab_producer_and_push_consumer(lab):
    lab = lab(ONE_MASTER)
    lab.create_topic(queues=2)
    recorder = Recorder("c")
    times = {}

    def listener(msgs, context):
        for m in msgs:
            times[uniq(m)] = lab.sim.now_ms()
        return recorder(msgs, context)

    lab.add_client("consumer", lambda: {"consumer": push_consumer(listener)})
    lab.add_client("producer", lambda: {"producer": DefaultMQProducer("PG", NS)})
    producer = lab.client("producer", "producer")
    sent_at = {}

    async def send(body: bytes, delay_sec: str):
        msg = Message(TOPIC, body)
        msg.tags, msg.keys = "TagA", body.decode()
        msg.put_property(MessageConst.PROPERTY_TIMER_DELAY_SEC, delay_sec)
        result = await producer.send(msg)
        sent_at[result.msg_id] = lab.sim.now_ms()
        return result

    results = [lab.run(send(b"t-%d" % i, "3")) for i in range(3)]
    lab.sim.run_until(lambda: len(times) == 3, 10_000)
    for r in results:
        waited = times[r.msg_id] - sent_at[r.msg_id]
        assert 3000 <= waited < 4300, waited
    lab.sim.run_for(5000)
    ops, acked, consumed = history(lab.sim)
    assert acked == {r.msg_id for r in results} and set(consumed) == acked and set(consumed.values()) == {1}


def test_over_the_max_delay_or_a_bad_value_is_message_illegal():
    sim = world()
    c = CppClient(sim, "client")
    max_ms = 3 * 24 * 3600 * 1000  # timerMaxDelaySec default: 3 days
    for bad in (props(TIMER_DELAY_SEC=str(3 * 24 * 3600 + 1)), props(TIMER_DELIVER_MS=str(now(sim) + max_ms + 1001)),
                props(TIMER_DELAY_MS="soon"), props(TIMER_DELIVER_MS="1.5e12"), props(TIMER_DELAY_SEC=" 5")):
        r = c.send("TopicTest", b"x", bad)
        assert (r.code, r.remark) == (ResponseCode.MESSAGE_ILLEGAL, ILLEGAL.format(max_ms)), bad
    # Exactly the max delay is accepted.
    assert c.send("TopicTest", b"x", props(TIMER_DELAY_SEC=str(3 * 24 * 3600))).code == ResponseCode.SUCCESS
    sim.run_for(2)  # the dispatcher runs within 1 ms of the put
    broker = sim.components["broker-a"]
    assert broker.message_store.get_max_offset_in_queue(TIMER_TOPIC, 0) == 1
    close(sim)

    sim = world(timerMaxDelaySec=10)
    c = CppClient(sim, "client")
    r = c.send("TopicTest", b"x", props(TIMER_DELAY_MS="10001"))
    assert (r.code, r.remark) == (ResponseCode.MESSAGE_ILLEGAL, ILLEGAL.format(10_000))
    assert c.send("TopicTest", b"x", props(TIMER_DELAY_MS="10000")).code == ResponseCode.SUCCESS
    close(sim)

    sim = world(timerWheelEnable="false")
    c = CppClient(sim, "client")
    r = c.send("TopicTest", b"t", props(TIMER_DELAY_SEC="3"))
    assert (r.code, r.remark) == (ResponseCode.SYSTEM_ERROR,
                                  "accurate timer message is not enabled, timerWheelEnable is false")
    assert sim.components["broker-a"].timer_message_store is None
    assert sim.components["broker-a"].topic_config_manager.select_topic_config(TIMER_TOPIC) is None
    close(sim)


def test_a_deliver_time_in_the_past_or_no_delay_is_stored_at_once():
    sim = world()
    c = CppClient(sim, "client")
    broker = sim.components["broker-a"]
    for i, timer in enumerate((props(TIMER_DELIVER_MS=str(now(sim) - 60_000)), props(TIMER_DELIVER_MS=str(now(sim))),
                               props(TIMER_DELAY_SEC="0"), props(TIMER_DELAY_MS="-5"))):
        r = c.send("TopicTest", b"now-%d" % i, timer, queue_id=2)
        assert r.code == ResponseCode.SUCCESS and r.ext_fields["queueOffset"] == str(i)
        sim.run_for(2)  # the dispatcher runs within 1 ms of the put
        # On the topic already, not parked; its timer property stays, it got no TIMER_OUT_MS.
        assert broker.message_store.get_max_offset_in_queue("TopicTest", 2) == i + 1
    assert broker.message_store.get_max_offset_in_queue(TIMER_TOPIC, 0) == 0
    msgs = stored(broker, "TopicTest", [2])
    assert [m.body for m in msgs] == [b"now-0", b"now-1", b"now-2", b"now-3"]
    assert all("TIMER_OUT_MS" not in m.properties and "REAL_TOPIC" not in m.properties for m in msgs)
    assert msgs[2].properties["TIMER_DELAY_SEC"] == "0"
    # A delete marker with a past time is refused.
    r = c.send("TopicTest", b"del", props(TIMER_DELAY_SEC="0", TIMER_DEL_UNIQKEY="TopicTest+X"))
    assert r.code == ResponseCode.MESSAGE_ILLEGAL
    close(sim)


def test_a_delay_level_wins_over_the_timer_properties():
    sim = world()
    c = CppClient(sim, "client")
    broker = sim.components["broker-a"]
    sent_at = now(sim)
    r = c.send("TopicTest", b"level", props(DELAY="2", TIMER_DELAY_SEC="60", TIMER_DELIVER_MS=str(sent_at + 90_000)))
    assert r.code == ResponseCode.SUCCESS
    sim.run_for(2)  # the dispatcher runs within 1 ms of the put
    assert broker.message_store.get_max_offset_in_queue(TIMER_TOPIC, 0) == 0
    (parked,) = stored(broker, "SCHEDULE_TOPIC_XXXX", [1])  # level 2 -> queue 1
    assert "TIMER_DELAY_SEC" not in parked.properties and "TIMER_DELIVER_MS" not in parked.properties
    r = c.pull("TopicTest", 0, queue_id=0, sys_flag=6, suspend_ms=15000)
    assert r.code == ResponseCode.SUCCESS and 5000 <= now(sim) - sent_at < 5300  # level 2: 5 s, not 60 s
    close(sim)


def test_many_timers_in_mixed_order_are_delivered_in_time_order():
    sim = world(seed=2)
    c = CppClient(sim, "client")
    broker = sim.components["broker-a"]
    base = now(sim)
    offsets = list(range(1, 31))
    random.Random(4).shuffle(offsets)
    deliver = {}
    for i, sec in enumerate(offsets):
        deliver[f"m{i}"] = base + sec * 1000 + 250
        assert c.send("TopicTest", f"m{i}".encode(), props(TIMER_DELIVER_MS=str(deliver[f"m{i}"])),
                      queue_id=0).code == ResponseCode.SUCCESS
    # Half-way, exactly those due are on the topic.
    sim.run_for(15_600 - (now(sim) - base))
    assert {m.body.decode() for m in stored(broker, "TopicTest", [0])} == \
        {name for name, at in deliver.items() if ceil_to_second(at) <= now(sim)}
    sim.run_for(20_000)
    msgs = stored(broker, "TopicTest", [0])
    assert [m.body.decode() for m in msgs] == sorted(deliver, key=deliver.get)
    for m in msgs:
        at = deliver[m.body.decode()]
        assert ceil_to_second(at) <= m.store_timestamp < ceil_to_second(at) + 300
    assert broker.timer_message_store.pending() == 0
    close(sim)


def _send_pending(sim, c, delays_ms):
    """Send one timer message per delay; returns {uniq key: deliver ms}."""
    base = now(sim)
    deliver = {}
    for i, delay in enumerate(delays_ms):
        r = c.send("TopicTest", f"r{i}".encode(), props(TIMER_DELIVER_MS=str(base + delay)), queue_id=i % 4)
        assert r.code == ResponseCode.SUCCESS
        deliver[r.ext_fields["transactionId"]] = base + delay
    return deliver


@pytest.mark.parametrize("how", ["stop", "kill"])
def test_a_restart_with_pending_timers_delivers_each_once(how):
    sim = world(seed=3)
    c = CppClient(sim, "client")
    deliver = _send_pending(sim, c, [2_000, 25_000, 4_000, 30_000, 8_000, 22_000, 20_500, 3_000])
    sim.run_for(11_000)  # 2, 3, 4 and 8 s delivered, the checkpoint written since
    broker = sim.components["broker-a"]
    assert len(stored(broker, "TopicTest")) == 4
    if how == "stop":
        sim.stop("broker-a")
    else:
        sim.nemesis.kill("broker-a")
    sim.nemesis.restart("broker-a")
    sim.run_for(100)
    broker = sim.components["broker-a"]
    assert broker.timer_message_store.pending() == 4  # rebuilt from config/timercheck
    sim.run_for(25_000)
    delivered = stored(broker, "TopicTest")
    assert sorted(r_uniq(m) for m in delivered) == sorted(deliver)  # each exactly once
    for m in delivered:
        assert m.store_timestamp >= deliver[r_uniq(m)]
    close(sim)


def test_a_kill_right_after_a_delivery_redelivers_only_that_one():
    # The checkpoint is written every timerFlushIntervalMs (1 s): what was delivered after the
    # last write comes again after a process crash; nothing is lost.
    sim = world(seed=3)
    c = CppClient(sim, "client")
    deliver = _send_pending(sim, c, [2_000, 6_000, 9_000])
    broker = sim.components["broker-a"]
    sim.run_until(lambda: len(stored(broker, "TopicTest")) == 2, 10_000)
    sim.nemesis.kill("broker-a")  # within the same ms as the 6 s delivery
    sim.nemesis.restart("broker-a")
    sim.run_for(10_000)
    broker = sim.components["broker-a"]
    counts = {}
    for m in stored(broker, "TopicTest"):
        counts[r_uniq(m)] = counts.get(r_uniq(m), 0) + 1
    by_delay = sorted(deliver, key=deliver.get)
    assert [counts.get(k, 0) for k in by_delay] == [1, 2, 1]
    close(sim)


def test_a_machine_crash_loses_no_timer_message():
    # ASYNC_FLUSH: deliveries after the commit log's last flush are lost with it; the checkpoint
    # that is forced never goes beyond the flushed commit log, so they are delivered again.
    sim = world(seed=5)
    c = CppClient(sim, "client")
    deliver = _send_pending(sim, c, [15_000, 16_000, 17_000, 40_000])
    broker = sim.components["broker-a"]
    sim.run_until(lambda: broker.message_store.commit_log.flushed_where() == broker.message_store.get_max_phy_offset(),
                  20_000)  # the sends are durable (flushCommitLogThoroughInterval)
    sim.run_until(lambda: len(stored(broker, "TopicTest")) == 3, 20_000)
    sim.run_for(1500)
    assert broker.message_store.commit_log.flushed_where() < broker.message_store.get_max_phy_offset()
    sim.nemesis.crash("broker-a")
    sim.nemesis.restart("broker-a")
    sim.run_for(30_000)
    broker = sim.components["broker-a"]
    assert {r_uniq(m) for m in stored(broker, "TopicTest")} == set(deliver)
    close(sim)


def test_only_the_master_delivers_and_the_slave_gets_the_copy():
    sim = cluster()
    master, slave = sim.components["broker-a"], sim.components["broker-a-s"]
    c = CppClient(sim, "client")
    assert c.send("TopicHA", b"t", props(TIMER_DELAY_SEC="2")).code == ResponseCode.SUCCESS
    sim.run_for(5000)
    assert master.timer_message_store.should_running_dequeue and not slave.timer_message_store.should_running_dequeue
    sim.run_until(lambda: slave.message_store.get_max_phy_offset() == master.message_store.get_max_phy_offset(),
                  timeout_ms=30_000)
    sim.run_for(100)
    assert len(stored(master, "TopicHA")) == 1 and len(stored(slave, "TopicHA")) == 1
    close(sim)


def test_timercheck_is_rocketmqs_layout(tmp_path):
    path = os.path.join(tmp_path, "config", "timercheck")
    ckpt = TimerCheckpoint(path)
    ckpt.last_read_time_ms, ckpt.last_timer_queue_offset, ckpt.master_timer_queue_offset = 1_700_000_001_000, 3, 7
    ckpt.data_version.next_version(42, 0)
    ckpt.flush()
    ckpt.close()
    data = open(path, "rb").read()
    assert len(data) == 4096
    assert [int.from_bytes(data[i:i + 8], "big") for i in range(0, 56, 8)] == [1_700_000_001_000, 0, 3, 7, 0, 42, 1]
    again = TimerCheckpoint(path)
    assert (again.last_read_time_ms, again.last_timer_queue_offset, again.master_timer_queue_offset,
            again.data_version.counter) == (1_700_000_001_000, 3, 7, 1)
    again.close()
