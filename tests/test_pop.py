"""POP consumption (RocketMQ 5) on the simulator: POP_MESSAGE, ACK_MESSAGE,
CHANGE_MESSAGE_INVISIBLETIME, the revive service and orderly (FIFO) pops.

One broker ("broker-a", tests/test_broker.py's world) and a client node speaking through
rmqlab's MQClientAPIImpl (pop_message / ack_message / change_invisible_time), as the Proxy does.
Messages are sent the way the C++ producer sends them (CppClient), all to queue 0 of TopicTest
unless a test says otherwise. Time is the simulator's virtual time: invisible times of tens of
seconds cost nothing, and "before the poll time ended" is a statement about virtual time.
"""

from __future__ import annotations

import asyncio
import logging

import pytest

from rmqlab.client.consumer.ack_result import AckStatus
from rmqlab.client.consumer.pop_result import PopStatus
from rmqlab.client.exceptions import MQBrokerException
from rmqlab.client.impl.mq_client_api_impl import MQClientAPIImpl
from rmqlab.common import pop_ack_constants as pac
from rmqlab.common.message.message_const import MessageConst
from rmqlab.common.message.message_decoder import decode
from rmqlab.remoting import RemotingClient, RequestCode, ResponseCode
from rmqlab.remoting.protocol.header import extra_info_util as eiu
from rmqlab.remoting.protocol.header.broker.ack_message import AckMessageRequestHeader
from rmqlab.remoting.protocol.header.broker.change_invisible_time import ChangeInvisibleTimeRequestHeader
from rmqlab.remoting.protocol.header.broker.pop_message import ConsumeInitMode, PopMessageRequestHeader
from rmqlab.store.pop import AckMsg, PopCheckPoint
from tests.broker_helpers import BROKER, CppClient, props, world

TOPIC = "TopicTest"
GROUP = "CG-POP"
RETRY_TOPIC = f"%RETRY%{GROUP}_{TOPIC}"
REVIVE_TOPIC = "rmq_sys_REVIVE_LOG_DefaultCluster"
INVISIBLE = 10_000
UNIQ = MessageConst.PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX


class PopClient:
    """The client side of POP on node "client" (what the Proxy does with a receipt handle)."""

    def __init__(self, sim, node: str = "client"):
        self.sim = sim
        self.api = MQClientAPIImpl(sim.nodes[node], RemotingClient(sim.nodes[node]))

    def header(self, queue_id=-1, max_nums=32, invisible=INVISIBLE, poll=0, exp=None, order=False, group=GROUP,
               topic=TOPIC, attempt_id=None):
        return PopMessageRequestHeader(consumer_group=group, topic=topic, queue_id=queue_id, max_msg_nums=max_nums,
                                       invisible_time=invisible, poll_time=poll, born_time=0,
                                       init_mode=ConsumeInitMode.MIN, exp_type="TAG" if exp else None, exp=exp,
                                       order=order, attempt_id=attempt_id)

    async def pop_async(self, **kw):
        return await self.api.pop_message(BROKER, "broker-a", self.header(**kw), 3000)

    def pop(self, **kw):
        return self.sim.run(self.pop_async(**kw))

    @staticmethod
    def ack_header(handle: str, group: str = GROUP, topic: str = TOPIC) -> AckMessageRequestHeader:
        strs = eiu.split(handle)
        return AckMessageRequestHeader(group, eiu.get_real_topic(strs, topic, group), eiu.get_queue_id(strs), handle,
                                       eiu.get_queue_offset(strs))

    def ack(self, handle: str, group: str = GROUP):
        return self.sim.run(self.api.ack_message(BROKER, self.ack_header(handle, group), 3000))

    def change(self, handle: str, invisible: int, group: str = GROUP):
        strs = eiu.split(handle)
        header = ChangeInvisibleTimeRequestHeader(group, eiu.get_real_topic(strs, TOPIC, group), eiu.get_queue_id(strs),
                                                  handle, eiu.get_queue_offset(strs), invisible)
        return self.sim.run(self.api.change_invisible_time(BROKER, "broker-a", header, 3000))


def handle(msg) -> str:
    return msg.properties[MessageConst.PROPERTY_POP_CK]


def bodies(result) -> list[bytes]:
    return [m.body for m in result.msg_found_list]


def broker(sim):
    return sim.components["broker-a"]


def setup(n: int = 3, tags: str = "A", seed: int = 1, **overrides):
    sim = world(seed=seed, **overrides)
    producer = CppClient(sim, "client")
    for i in range(n):
        assert producer.send(TOPIC, f"m{i}".encode(), props(TAGS=tags)).code == ResponseCode.SUCCESS
    sim.run_for(10)
    return sim, producer, PopClient(sim)


def revive_records(sim, queue_id: int) -> list[tuple[str, object]]:
    """What the revive queue holds: ("ck", PopCheckPoint) / ("ack", AckMsg) in order."""
    sim.run_for(5)  # let the dispatcher build the consume queue
    store = broker(sim).message_store
    result = store.get_message("t", REVIVE_TOPIC, queue_id, 0, 1000)
    out = []
    for buf in result.message_buffers:
        m = decode(buf)
        out.append((m.tags, PopCheckPoint.from_json(m.body) if m.tags == "ck" else AckMsg.from_json(m.body)))
    return out


def retry_messages(sim):
    sim.run_for(5)
    store = broker(sim).message_store
    return [decode(b) for b in store.get_message("t", RETRY_TOPIC, 0, 0, 1000).message_buffers]


def errors(caplog, text: str = "") -> list[str]:
    """ERROR log lines (Python logging: the broker's node logger and RocketmqPop) containing ``text``."""
    return [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR and text in r.getMessage()]


# ---------------------------------------------------------------------------------------------


def test_pop_then_ack_round_trip(caplog):
    sim, _, client = setup(3)
    result = client.pop(max_nums=2)
    assert result.pop_status is PopStatus.FOUND and bodies(result) == [b"m0", b"m1"]
    assert result.invisible_time == INVISIBLE and result.rest_num == 1
    for m in result.msg_found_list:
        # RocketMQ's handle: ckQueueOffset popTime invisibleTime reviveQid retry brokerName queueId offset
        assert handle(m) == f"0 {result.pop_time} {INVISIBLE} 0 0 broker-a 0 {m.queue_offset}"
        assert m.properties[MessageConst.PROPERTY_FIRST_POP_TIME] == str(result.pop_time)
        assert m.topic == TOPIC and m.reconsume_times == 0
    b = broker(sim)
    # The checkpoint is in revive queue 0, and the group's offset moved past what was popped.
    [(tag, ck)] = revive_records(sim, 0)
    assert tag == "ck" and (ck.topic, ck.cid, ck.queue_id, ck.start_offset, ck.num, ck.queue_offset_diff) == \
        (TOPIC, GROUP, 0, 0, 2, [0, 1])
    assert (ck.pop_time, ck.invisible_time, ck.broker_name, ck.bit_map) == (result.pop_time, INVISIBLE, "broker-a", 0)
    assert b.consumer_offset_manager.query_offset(GROUP, TOPIC, 0) == 2
    # The next pop gets the rest only (revive queue 1 for its checkpoint).
    second = client.pop()
    assert bodies(second) == [b"m2"] and handle(second.msg_found_list[0]).split()[3] == "1"
    assert client.pop().pop_status is PopStatus.POLLING_NOT_FOUND

    for m in result.msg_found_list + second.msg_found_list:
        assert client.ack(handle(m)).status is AckStatus.OK
    assert [r[0] for r in revive_records(sim, 0)] == ["ck", "ack", "ack"]
    sim.run_for(INVISIBLE + 5_000)
    assert b.pop_revive_service.revived_count == 0 and b.pop_revive_service.pending_count() == 0
    assert retry_messages(sim) == []
    assert client.pop().pop_status is PopStatus.POLLING_NOT_FOUND
    # The revive offsets moved past everything read (the last record of each queue).
    cof = b.consumer_offset_manager
    assert cof.query_offset(pac.REVIVE_GROUP, REVIVE_TOPIC, 0) == 2
    assert cof.query_offset(pac.REVIVE_GROUP, REVIVE_TOPIC, 1) == 1
    assert not errors(caplog)
    sim.close()


def test_unacked_message_is_revived_into_the_retry_topic_and_popped_again():
    sim, _, client = setup(2)
    first = client.pop()
    assert bodies(first) == [b"m0", b"m1"]
    assert client.ack(handle(first.msg_found_list[0])).status is AckStatus.OK
    sim.run_for(INVISIBLE - 2_000)
    assert retry_messages(sim) == []  # still invisible
    assert client.pop().pop_status is PopStatus.POLLING_NOT_FOUND
    sim.run_for(4_000)
    [revived] = retry_messages(sim)
    m1 = first.msg_found_list[1]
    assert (revived.body, revived.reconsume_times, revived.queue_id) == (b"m1", 1, 0)
    assert revived.properties[UNIQ] == m1.properties[UNIQ]
    assert revived.properties[MessageConst.PROPERTY_FIRST_POP_TIME] == str(first.pop_time)
    assert revived.properties[MessageConst.PROPERTY_TAGS] == "A"
    tc = broker(sim).topic_config_manager.select_topic_config(RETRY_TOPIC)
    assert (tc.read_queue_nums, tc.write_queue_nums, tc.perm) == (1, 1, 6)

    again = client.pop()
    [m] = again.msg_found_list
    assert (m.body, m.topic, m.reconsume_times, m.properties[UNIQ]) == (b"m1", TOPIC, 1, m1.properties[UNIQ])
    strs = eiu.split(handle(m))
    assert eiu.get_retry(strs) == "1" and eiu.get_real_topic(strs, TOPIC, GROUP) == RETRY_TOPIC
    # Not acknowledged again: revived once more, reconsumeTimes 2, first pop time kept.
    sim.run_for(INVISIBLE + 3_000)
    third = client.pop()
    [m] = third.msg_found_list
    assert (m.body, m.reconsume_times) == (b"m1", 2)
    assert m.properties[MessageConst.PROPERTY_FIRST_POP_TIME] == str(first.pop_time)
    assert client.ack(handle(m)).status is AckStatus.OK
    sim.run_for(INVISIBLE + 3_000)
    assert len(retry_messages(sim)) == 2 and client.pop().pop_status is PopStatus.POLLING_NOT_FOUND
    assert broker(sim).pop_revive_service.pending_count() == 0
    sim.close()


def test_change_invisible_time_extends_and_the_old_handle_acks_nothing_more():
    sim, _, client = setup(2)
    first = client.pop()
    m0, m1 = first.msg_found_list
    sim.run_for(5_000)
    changed = client.change(handle(m0), 60_000)
    assert changed.status is AckStatus.OK and changed.pop_time > first.pop_time
    strs = eiu.split(changed.extra_info)
    assert changed.extra_info == f"0 {changed.pop_time} 60000 0 0 broker-a 0 0"
    assert (eiu.get_ck_queue_offset(strs), eiu.get_queue_offset(strs)) == (m0.queue_offset, m0.queue_offset)
    # Past the first invisible time: m1 is revived, m0 (given more time) is not.
    sim.run_for(INVISIBLE + 3_000)
    assert [m.body for m in retry_messages(sim)] == [b"m1"]
    # The old handle still acks "OK" (RocketMQ does not know it is stale) ...
    assert client.ack(handle(m0)).status is AckStatus.OK
    # ... but only the new checkpoint counts: m0 comes back when the new time is up.
    sim.run_for(60_000)
    assert [m.body for m in retry_messages(sim)] == [b"m1", b"m0"]

    # With the new handle acknowledged, nothing comes back.
    sim2, _, client2 = setup(1, seed=2)
    [m] = client2.pop().msg_found_list
    changed = client2.change(handle(m), 30_000)
    assert client2.ack(changed.extra_info).status is AckStatus.OK
    sim2.run_for(45_000)
    assert retry_messages(sim2) == [] and broker(sim2).pop_revive_service.pending_count() == 0
    sim.close()
    sim2.close()


def test_ack_answers_of_unknown_stale_and_malformed_handles(caplog):
    sim, _, client = setup(2)
    [m0, m1] = client.pop().msg_found_list
    # A handle of the right shape that no pop ever produced: recorded, "OK" (RocketMQ checks nothing).
    assert client.ack(f"0 123 {INVISIBLE} 0 0 broker-a 0 1").status is AckStatus.OK
    # An offset beyond the queue: NO_MESSAGE.
    r = client.ack(f"0 123 {INVISIBLE} 0 0 broker-a 0 99")
    assert r.status is AckStatus.NO_EXIST and r.response_code == ResponseCode.NO_MESSAGE
    assert r.remark == "offset is illegal, key:TopicTest@0, commit:99, store:0~2"
    # Malformed handles: SYSTEM_ERROR naming the Java exception, nothing escapes into the server.
    api = client.api
    # (The ack reads the broker name first, the change the revive queue: their Java messages differ.)
    short = "java.lang.IllegalArgumentException: {} fail, extraInfoStrs length 1"
    for extra, ack_remark, change_remark in [
            ("garbage", short.format("getBrokerName"), short.format("getReviveQid")),
            ("", short.format("getBrokerName"), short.format("getReviveQid")),
            ("x 1 2 3 0 broker-a 0 0", 'java.lang.NumberFormatException: For input string: "x"',
             'java.lang.NumberFormatException: For input string: "x"')]:
        header = AckMessageRequestHeader(GROUP, TOPIC, 0, extra, 0)
        r = sim.run(api.ack_message(BROKER, header, 3000))
        assert (r.status, r.response_code, r.remark) == (AckStatus.NO_EXIST, ResponseCode.SYSTEM_ERROR, ack_remark)
        change = ChangeInvisibleTimeRequestHeader(GROUP, TOPIC, 0, extra, 0, 5_000)
        r = sim.run(api.change_invisible_time(BROKER, "broker-a", change, 3000))
        assert (r.status, r.response_code, r.remark) == (AckStatus.NO_EXIST, ResponseCode.SYSTEM_ERROR, change_remark)
    # Nothing was written for them: the revive queue holds the one checkpoint of the pop, and the
    # processors answered without an exception reaching the remoting layer.
    assert [r[0] for r in revive_records(sim, 0)] == ["ck", "ack"]
    assert not errors(caplog, "process request exception")
    # A missing @CFNotNull field: the remoting layer's SYSTEM_ERROR, as RocketMQ's (and its log line).
    c = CppClient(sim, "client")
    r = c.call(RequestCode.ACK_MESSAGE, {"consumerGroup": GROUP, "topic": TOPIC, "queueId": 0, "offset": 0})
    assert r.code == ResponseCode.SYSTEM_ERROR and r.remark.startswith(
        "RemotingCommandError: the custom field <extraInfo> is null")
    assert len(errors(caplog, "process request exception")) == 1
    # Acking after the message was revived: "OK", and the revived copy is still delivered.
    sim.run_for(INVISIBLE + 3_000)
    assert client.ack(handle(m0)).status is AckStatus.OK
    assert sorted(bodies(client.pop())) == [b"m0", b"m1"]
    sim.close()


def test_long_polling_pop_wakes_on_a_new_message_before_its_poll_time():
    sim = world(seed=3)
    producer = CppClient(sim, "client")
    producer.send(TOPIC, b"warmup", props(TAGS="A"))
    sim.run_for(10)
    client = PopClient(sim)
    assert bodies(client.pop()) == [b"warmup"]
    done: dict = {}

    async def scenario():
        async def held():
            done["r"] = await client.pop_async(poll=20_000)
            done["at"] = sim.now_ms()
        task = asyncio.ensure_future(held())
        await asyncio.sleep(2.0)
        assert "r" not in done
        assert broker(sim).pop_message_processor.pop_long_polling_service.held_count() == 1
        r = await producer.request(RequestCode.SEND_MESSAGE, producer.send_ext(TOPIC, props(TAGS="A")), b"late")
        assert r.code == ResponseCode.SUCCESS
        done["sent_at"] = sim.now_ms()
        await task

    start = sim.now_ms()
    sim.run(scenario())
    assert done["r"].pop_status is PopStatus.FOUND and bodies(done["r"]) == [b"late"]
    assert done["at"] - start < 20_000 and done["at"] - done["sent_at"] < 100  # the arrival woke it
    assert broker(sim).pop_message_processor.pop_long_polling_service.held_count() == 0

    # Nothing arrives: answered POLLING_TIMEOUT once the poll time is up, not before.
    start = sim.now_ms()
    result = client.pop(poll=5_000)
    assert result.pop_status is PopStatus.POLLING_NOT_FOUND
    assert 5_000 - 100 <= sim.now_ms() - start <= 5_000 + 100
    assert broker(sim).pop_message_processor.pop_long_polling_service.held_count() == 0
    sim.close()


def test_long_polling_pop_ignores_messages_its_filter_does_not_match():
    sim = world(seed=4)
    producer = CppClient(sim, "client")
    producer.send(TOPIC, b"init", props(TAGS="A"))
    sim.run_for(10)
    client = PopClient(sim)
    client.pop()
    done: dict = {}

    async def scenario():
        async def held():
            done["r"] = await client.pop_async(poll=15_000, exp="B || C")
        task = asyncio.ensure_future(held())
        await asyncio.sleep(1.0)
        await producer.request(RequestCode.SEND_MESSAGE, producer.send_ext(TOPIC, props(TAGS="A")), b"a")
        await asyncio.sleep(1.0)
        assert "r" not in done
        await producer.request(RequestCode.SEND_MESSAGE, producer.send_ext(TOPIC, props(TAGS="C")), b"c")
        await task

    sim.run(scenario())
    assert bodies(done["r"]) == [b"c"]
    sim.close()


def test_tag_filter_returns_matching_messages_and_moves_past_the_others():
    sim = world(seed=5)
    producer = CppClient(sim, "client")
    for body, tag in [(b"a1", "A"), (b"b1", "B"), (b"c1", "C"), (b"a2", "A")]:
        producer.send(TOPIC, body, props(TAGS=tag))
    sim.run_for(10)
    client = PopClient(sim)
    assert bodies(client.pop(exp="A || C")) == [b"a1", b"c1", b"a2"]
    assert bodies(client.pop(exp="B", group="OTHER")) == [b"b1"]
    assert bodies(client.pop(exp="*", group="THIRD")) == [b"a1", b"b1", b"c1", b"a2"]
    sim.close()


@pytest.mark.parametrize("crash", [False, True])
def test_broker_restart_with_pending_checkpoints_loses_nothing_and_redelivers_no_acked_message(crash):
    sim, producer, client = setup(4, seed=6)
    first = client.pop(max_nums=2, invisible=60_000)
    second = client.pop(max_nums=2, invisible=60_000)
    msgs = first.msg_found_list + second.msg_found_list
    assert [m.body for m in msgs] == [b"m0", b"m1", b"m2", b"m3"]
    for m in (msgs[0], msgs[3]):
        assert client.ack(handle(m)).status is AckStatus.OK
    sim.run_for(20_000)  # the broker persisted its offsets by now (every 5 s after the first 10 s)
    if crash:
        sim.nemesis.kill("broker-a")
    else:
        sim.stop("broker-a")
    sim.nemesis.restart("broker-a")
    sim.run_for(100)
    client = PopClient(sim)
    assert client.pop().pop_status is PopStatus.POLLING_NOT_FOUND  # still invisible after the restart
    sim.run_for(45_000)
    assert sorted(m.body for m in retry_messages(sim)) == [b"m1", b"m2"]  # each once, acked ones never
    again = client.pop()
    assert sorted(bodies(again)) == [b"m1", b"m2"] and {m.reconsume_times for m in again.msg_found_list} == {1}
    for m in again.msg_found_list:
        assert client.ack(handle(m)).status is AckStatus.OK
    sim.run_for(30_000)
    assert len(retry_messages(sim)) == 2 and client.pop().pop_status is PopStatus.POLLING_NOT_FOUND
    sim.close()


def test_a_checkpoint_revived_past_an_older_pending_one_is_not_revived_again_after_a_restart():
    # One revive queue, so both checkpoints are in it: the older one with a long invisible time.
    sim, _, client = setup(2, seed=7, reviveQueueNum=1)
    [slow] = client.pop(max_nums=1, invisible=120_000).msg_found_list
    [fast] = client.pop(max_nums=1, invisible=INVISIBLE).msg_found_list
    sim.run_for(INVISIBLE + 3_000)
    assert [m.body for m in retry_messages(sim)] == [fast.body]  # not held back by the older one
    b = broker(sim)
    # The revive offset stays before the pending checkpoint (revive-queue offset 0).
    assert b.consumer_offset_manager.query_offset(pac.REVIVE_GROUP, REVIVE_TOPIC, 0) == -1
    assert [r[0] for r in revive_records(sim, 0)] == ["ck", "ck", "ack"]  # the ack marks the revived one
    sim.stop("broker-a")
    sim.nemesis.restart("broker-a")
    sim.run_for(20_000)
    assert [m.body for m in retry_messages(sim)] == [fast.body]
    sim.run_for(120_000)
    assert [m.body for m in retry_messages(sim)] == [fast.body, slow.body]
    assert broker(sim).consumer_offset_manager.query_offset(pac.REVIVE_GROUP, REVIVE_TOPIC, 0) >= 2
    sim.close()


def test_only_the_master_revives():
    sim, _, _ = setup(0, seed=8)
    b = broker(sim)
    assert b.pop_revive_service.should_run_pop_revive
    b.change_special_service_status(False)
    assert not b.pop_revive_service.should_run_pop_revive
    b.change_special_service_status(True)
    assert b.pop_revive_service.should_run_pop_revive
    sim.close()


def test_a_popped_retry_message_goes_to_the_dlq_the_way_the_proxy_sends_it():
    # RocketMQ's broker revives forever; the Proxy sends a message past maxAttempts back with
    # CONSUMER_SEND_MSG_BACK (delayLevel -1, its commit-log offset) and then acks it.
    sim, _, client = setup(1, seed=9)
    client.pop(invisible=5_000)
    sim.run_for(8_000)
    [m] = client.pop().msg_found_list
    assert m.reconsume_times == 1
    sim.run(client.api.consumer_send_message_back(BROKER, "broker-a", m, GROUP, -1, 3000, 0))
    assert client.ack(handle(m)).status is AckStatus.OK
    store = broker(sim).message_store
    sim.run_for(10)
    [dead] = [decode(b) for b in store.get_message("t", f"%DLQ%{GROUP}", 0, 0, 10).message_buffers]
    assert (dead.body, dead.properties[UNIQ]) == (b"m0", m.properties[UNIQ])
    sim.run_for(20_000)
    assert client.pop().pop_status is PopStatus.POLLING_NOT_FOUND
    sim.close()


def test_fifo_pop_blocks_the_queue_until_acked_or_invisible_then_redelivers_in_order():
    sim, _, client = setup(3, seed=10)
    first = client.pop(queue_id=0, max_nums=2, order=True)
    assert bodies(first) == [b"m0", b"m1"] and {m.reconsume_times for m in first.msg_found_list} == {0}
    assert {eiu.get_revive_qid(eiu.split(handle(m))) for m in first.msg_found_list} == {999}
    b = broker(sim)
    assert b.consumer_offset_manager.query_offset(GROUP, TOPIC, 0) == 0  # not committed past the batch
    assert revive_records(sim, 0) == []  # no checkpoint for an orderly pop
    # Blocked while the batch is in flight: m2 is not handed out.
    assert client.pop(queue_id=0, order=True).pop_status is PopStatus.POLLING_NOT_FOUND
    # Acking m1 first does not move the offset past the unacknowledged m0.
    assert client.ack(handle(first.msg_found_list[1])).status is AckStatus.OK
    assert b.consumer_offset_manager.query_offset(GROUP, TOPIC, 0) == 0
    assert client.pop(queue_id=0, order=True).pop_status is PopStatus.POLLING_NOT_FOUND
    # The invisible time ends: the same offsets come again, delivered a second time.
    sim.run_for(INVISIBLE + 100)
    second = client.pop(queue_id=0, max_nums=2, order=True)
    assert bodies(second) == [b"m0", b"m1"] and [m.reconsume_times for m in second.msg_found_list] == [1, 1]
    # An ack of the previous batch's handle names an old popTime: ignored, the offset stays.
    client.ack(handle(first.msg_found_list[0]))
    assert b.consumer_offset_manager.query_offset(GROUP, TOPIC, 0) == 0
    for m in second.msg_found_list:
        assert client.ack(handle(m)).status is AckStatus.OK
    assert b.consumer_offset_manager.query_offset(GROUP, TOPIC, 0) == 2
    third = client.pop(queue_id=0, order=True)
    assert bodies(third) == [b"m2"] and third.msg_found_list[0].reconsume_times == 0
    sim.close()


def test_fifo_ack_wakes_a_held_orderly_pop():
    sim, producer, client = setup(2, seed=11)
    [m0] = client.pop(queue_id=0, max_nums=1, order=True).msg_found_list
    done: dict = {}

    async def scenario():
        async def held():
            done["r"] = await client.pop_async(queue_id=0, order=True, poll=20_000)
            done["at"] = sim.now_ms()
        task = asyncio.ensure_future(held())
        await asyncio.sleep(1.0)
        assert "r" not in done  # blocked by m0
        r = await client.api.ack_message(BROKER, client.ack_header(handle(m0)), 3000)
        assert r.status is AckStatus.OK
        done["acked_at"] = sim.now_ms()
        await task

    sim.run(scenario())
    assert bodies(done["r"]) == [b"m1"] and done["at"] - done["acked_at"] < 100
    sim.close()


def test_fifo_change_invisible_time_moves_the_redelivery():
    sim, _, client = setup(1, seed=12)
    [m0] = client.pop(queue_id=0, order=True).msg_found_list
    changed = client.change(handle(m0), 40_000)
    assert changed.status is AckStatus.OK
    sim.run_for(INVISIBLE + 5_000)
    assert client.pop(queue_id=0, order=True).pop_status is PopStatus.POLLING_NOT_FOUND  # still blocked
    sim.run_for(30_000)
    again = client.pop(queue_id=0, order=True)
    assert bodies(again) == [b"m0"] and again.msg_found_list[0].reconsume_times == 1
    sim.close()


def test_pop_checks_answer_rocketmq_codes():
    sim, _, client = setup(1, seed=13)
    with pytest.raises(MQBrokerException) as e:
        client.pop(max_nums=33)
    assert e.value.response_code == ResponseCode.INVALID_PARAMETER
    with pytest.raises(MQBrokerException) as e:
        client.pop(topic="NoSuchTopic")
    assert e.value.response_code == ResponseCode.TOPIC_NOT_EXIST
    with pytest.raises(MQBrokerException) as e:
        client.pop(queue_id=7)
    assert e.value.response_code == ResponseCode.INVALID_PARAMETER
    # bornTime far behind the broker's clock: "timeout too much".
    header = client.header(poll=1_000)
    header.born_time = int(sim.now_ms()) - 10_000
    r = sim.run(client.api.pop_message(BROKER, "broker-a", header, 3000))
    assert r.pop_status is PopStatus.POLLING_NOT_FOUND
    sim.close()
