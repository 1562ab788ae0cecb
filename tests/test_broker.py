"""The Broker on the simulator.

A BrokerController runs on node "broker-a" (its store under the node's store_dir, small files);
clients on other nodes talk to it the way the C++ client of PyPI ``rocketmq`` 0.4.4 does:
raw JSON frames whose extFields mix JSON numbers and strings, language CPP,
version 63, the Signature/OnsChannel/AccessKey fields, one multiplexed connection with replies
matched by opaque. Message bodies are decoded with ``message_decoder.decodes``, as the C++ client
decodes a pull body. The last tests add a NameServer and a slave (classic HA).
"""

from __future__ import annotations

import asyncio
import json
import os

import pytest

from rmqlab.broker.longpolling.pull_request_hold_service import REPLY_MARGIN_MS
from rmqlab.broker.broker_util import delete_property
from rmqlab.common.java_compat import java_string_hash_code
from rmqlab.common.message.message_decoder import properties_to_java_string
from rmqlab.common.message.message_decoder import decode_message_id, decodes, string_to_message_properties
from rmqlab.config import NettyServerConfig
from rmqlab.namesrv import NamesrvController
from rmqlab.remoting import RemotingClient, RemotingCommand, RequestCode, ResponseCode
from rmqlab.remoting.protocol import remoting_serializable
from rmqlab.remoting.protocol.body.register_broker_body import TopicConfigAndMappingSerializeWrapper
from rmqlab.remoting.protocol.header.broker import (ConsumeStats, ConsumeType, GetConsumerListByGroupResponseBody,
                                                    HeartbeatData, KVTable, SubscriptionGroupWrapper,
                                                    build_subscription_data)
from rmqlab.remoting.protocol.route import TopicRouteData
from rmqlab.runtime.sim import Simulation
from rmqlab.trace import trace_hash
from tests.broker_helpers import FAQ, NS, broker_factory, close, cluster, CppClient, Idle, props, world

REJECT = "[REJECTREQUEST]system busy, start flow control for a while"


# ---------------------------------------------------------------------------------------------
# Send and pull


def test_send_then_pull_round_trip_keeps_body_tags_keys_and_properties():
    sim = world()
    c = CppClient(sim, "client")
    sent = []
    for i in range(3):
        r = c.send("TopicTest", f"body-{i}".encode(), props(TAGS="TagA", KEYS=f"k{i} kk{i}", p1=f"v{i}",
                                                            UNIQ_KEY=f"UNIQ{i}", WAIT="true"))
        assert r.code == ResponseCode.SUCCESS and r.remark is None, r
        # Response extFields are strings (the C++ client reads them only if isString()).
        assert all(isinstance(v, str) for v in r.ext_fields.values())
        assert r.ext_fields["queueId"] == "0" and r.ext_fields["queueOffset"] == str(i)
        assert r.ext_fields["transactionId"] == f"UNIQ{i}"
        assert (r.ext_fields["MSG_REGION"], r.ext_fields["TRACE_ON"]) == ("DefaultRegion", "true")
        assert r.version == 479  # a RocketMQ 5.3.3 broker's MQVersion
        sent.append(r.ext_fields["msgId"])
    sim.run_for(10)  # the dispatcher builds the consume queue
    r = c.pull("TopicTest", 0)
    assert r.code == ResponseCode.SUCCESS and r.remark == "FOUND"
    assert {k: r.ext_fields[k] for k in ("nextBeginOffset", "minOffset", "maxOffset", "suggestWhichBrokerId")} == \
        {"nextBeginOffset": "3", "minOffset": "0", "maxOffset": "3", "suggestWhichBrokerId": "0"}
    msgs = decodes(r.body)
    assert [m.body for m in msgs] == [b"body-0", b"body-1", b"body-2"]
    assert [m.queue_offset for m in msgs] == [0, 1, 2]
    for i, m in enumerate(msgs):
        assert (m.tags, m.keys) == ("TagA", f"k{i} kk{i}")
        assert m.properties["p1"] == f"v{i}" and m.properties["UNIQ_KEY"] == f"UNIQ{i}"
        # What RocketMQ 5's broker adds: region, trace switch (buildMsgContext) and the cluster.
        assert (m.properties["CLUSTER"], m.properties["MSG_REGION"], m.properties["TRACE_ON"]) == \
            ("DefaultCluster", "DefaultRegion", "true")
        assert m.born_host[0] == "127.0.0.1" and m.store_host == ("127.0.0.1", 10911)
        # msgId is the offset message id: store host + commitlog offset.
        assert decode_message_id(sent[i]) == (("127.0.0.1", 10911), m.commit_log_offset)
    close(sim)


def test_stored_properties_string_is_in_java_hash_map_order():
    """The broker writes the properties as Java's HashMap(128) iterates them (what a Java broker
    stores), so the stored order depends on the keys' hash codes, not on the order sent."""
    sim = world()
    c = CppClient(sim, "client")
    assert c.send("TopicTest", b"x", props(WAIT="true", KEYS="k", TAGS="T", UNIQ_KEY="U", zz="1")).code == 0
    sim.run_for(10)
    m = decodes(c.pull("TopicTest", 0).body)[0]
    keys = list(m.properties)  # the decoder keeps the stored order

    def bucket(key: str) -> int:  # HashMap.hash(key) & (128 - 1), written out independently
        h = java_string_hash_code(key) & 0xFFFFFFFF
        return (h ^ (h >> 16)) & 127

    assert sorted(keys) == sorted(["WAIT", "KEYS", "TAGS", "UNIQ_KEY", "zz", "MSG_REGION", "TRACE_ON", "CLUSTER"])
    assert [bucket(k) for k in keys] == sorted(bucket(k) for k in keys)
    close(sim)


def test_send_message_v2_with_one_letter_fields():
    sim = world()
    c = CppClient(sim, "client")
    ext = {"a": "PID_TEST", "b": "TopicV2", "c": "TBW102", "d": 4, "e": 1, "f": 0, "g": c.node.now_ms(), "h": 7,
           "i": props(TAGS="TagV2"), "j": 0, "k": False, "m": False}
    r = c.call(RequestCode.SEND_MESSAGE_V2, ext, b"v2-body")
    assert r.code == 0 and r.ext_fields["queueId"] == "1" and r.ext_fields["queueOffset"] == "0"
    sim.run_for(10)
    m = decodes(c.pull("TopicV2", 0, queue_id=1).body)[0]
    assert (m.body, m.flag, m.tags, m.queue_id) == (b"v2-body", 7, "TagV2", 1)
    close(sim)


def test_auto_create_from_tbw102_and_topic_not_exist_without_it():
    sim = world()
    c = CppClient(sim, "client")
    r = c.send("AutoTopic", b"a", defaultTopicQueueNums=3)
    assert r.code == 0
    tc = sim.components["broker-a"].topic_config_manager.select_topic_config("AutoTopic")
    # min(client's defaultTopicQueueNums, TBW102's 8 write queues), TBW102's perm without INHERIT.
    assert (tc.read_queue_nums, tc.write_queue_nums, tc.perm) == (3, 3, 6)
    with open(os.path.join(sim.store_dir("broker-a"), "store", "config", "topics.json")) as f:
        assert "AutoTopic" in f.read()  # persisted at once
    close(sim)

    sim = world(autoCreateTopicEnable="false")
    c = CppClient(sim, "client")
    r = c.send("AutoTopic", b"a")
    assert r.code == ResponseCode.TOPIC_NOT_EXIST
    assert r.remark == "topic[AutoTopic] not exist, apply first please!" + FAQ
    assert r.ext_fields["MSG_REGION"] == "DefaultRegion"  # preSend's ext fields come with errors too
    close(sim)


def test_bad_sends_get_rocketmq_codes_and_remarks():
    sim = world(maxMessageSize=1024, rejectTransactionMessage="true")
    c = CppClient(sim, "client")
    r = c.send("bad topic!", b"x")
    assert (r.code, r.remark) == (ResponseCode.INVALID_PARAMETER, "The specified topic: bad topic!, contains "
                                  "illegal characters, allowing only ^[%|a-zA-Z0-9_-]+$")
    r = c.send("T" * 128, b"x")
    assert r.code == ResponseCode.INVALID_PARAMETER and "longer than topic max length: 127" in r.remark
    r = c.send("SCHEDULE_TOPIC_XXXX", b"x")
    assert (r.code, r.remark) == (ResponseCode.NO_PERMISSION, "Sending message to topic[SCHEDULE_TOPIC_XXXX] is forbidden.")
    r = c.send("TopicTest", b"x", queue_id=9)  # auto-created with 4 queues
    assert r.code == ResponseCode.INVALID_PARAMETER
    assert r.remark.startswith("request queueId[9] is illegal, TopicConfig [topicName=TopicTest, readQueueNums=4, "
                               "writeQueueNums=4, perm=RW-, topicFilterType=SINGLE_TAG, topicSysFlag=0, order=false, "
                               "attributes={}] Producer: 127.0.0.1:")
    r = c.send("TopicTest", b"x" * 2048)  # maxMessageSize bounds the body
    assert (r.code, r.remark) == (ResponseCode.MESSAGE_ILLEGAL, "the message is illegal, maybe msg body or properties "
                                  "length not matched. msg body length limit 1024B, msg properties length limit 32KB.")
    r = c.send("TopicTest", b"x", props(TRAN_MSG="true"))
    assert (r.code, r.remark) == (ResponseCode.NO_PERMISSION,
                                  "the broker[127.0.0.1] sending transaction message is forbidden")
    r = c.call(RequestCode.SEND_MESSAGE, {"producerGroup": "P", "topic": "TopicTest"}, b"x")
    assert r.code == ResponseCode.SYSTEM_ERROR and "the custom field <defaultTopic> is null" in r.remark
    assert c.send("TopicTest", b"ok").code == 0  # and the broker keeps serving
    close(sim)


def test_unknown_request_code_is_not_supported():
    sim = world()
    c = CppClient(sim, "client")
    r = c.call(9999, {"x": 1})
    assert (r.code, r.remark) == (ResponseCode.REQUEST_CODE_NOT_SUPPORTED, " request type 9999 not supported")
    r = c.call(RequestCode.SEND_BATCH_MESSAGE, {})
    assert r.code == ResponseCode.REQUEST_CODE_NOT_SUPPORTED
    close(sim)


def test_pull_status_codes_and_next_offsets():
    sim = world()
    c = CppClient(sim, "client")
    r = c.pull("NoSuchTopic", 0)
    assert (r.code, r.remark) == (ResponseCode.TOPIC_NOT_EXIST, "topic[NoSuchTopic] not exist, apply first please! " + FAQ)
    for _i in range(2):
        c.send("TopicTest", b"m")
    sim.run_for(10)
    r = c.pull("TopicTest", 0, queue_id=1)  # an empty queue, offset 0
    assert (r.code, r.remark, r.ext_fields["nextBeginOffset"]) == (ResponseCode.PULL_NOT_FOUND, "NO_MESSAGE_IN_QUEUE", "0")
    r = c.pull("TopicTest", 5, queue_id=1)  # an empty queue, offset 5: moved to 0
    assert (r.code, r.ext_fields["nextBeginOffset"]) == (ResponseCode.PULL_OFFSET_MOVED, "0")
    r = c.pull("TopicTest", 2)  # exactly the max offset
    assert (r.code, r.remark, r.ext_fields["nextBeginOffset"]) == (ResponseCode.PULL_NOT_FOUND, "OFFSET_OVERFLOW_ONE", "2")
    r = c.pull("TopicTest", 9)  # beyond it
    assert (r.code, r.remark, r.ext_fields["nextBeginOffset"]) == (ResponseCode.PULL_OFFSET_MOVED, "OFFSET_OVERFLOW_BADLY", "2")
    r = c.pull("TopicTest", 0, queue_id=7)
    assert r.code == ResponseCode.INVALID_PARAMETER and r.remark.startswith(
        "queueId[7] is illegal, topic:[TopicTest] topicConfig.readQueueNums:[4] consumer:[/127.0.0.1:")
    r = c.pull("TopicTest", 0, subscription="||")
    assert (r.code, r.remark) == (ResponseCode.SUBSCRIPTION_PARSE_FAILED, "parse the consumer's subscription failed")
    r = c.pull("TopicTest", 0, sys_flag=0)  # no subscription in the request and no heartbeat
    assert (r.code, r.remark) == (ResponseCode.SUBSCRIPTION_NOT_EXIST, "the consumer's group info not exist" + FAQ)
    close(sim)


def test_tag_filtering_uses_the_consume_queue_tags_code():
    sim = world()
    c = CppClient(sim, "client")
    for tag in ("TagA", "TagB", "TagC", "TagA"):
        assert c.send("TopicTest", tag.encode(), props(TAGS=tag)).code == 0
    c.send("TopicTest", b"untagged")
    sim.run_for(10)
    r = c.pull("TopicTest", 0, subscription="TagA || TagB")
    assert [m.body for m in decodes(r.body)] == [b"TagA", b"TagB", b"TagA"]
    assert r.ext_fields["nextBeginOffset"] == "5"
    r = c.pull("TopicTest", 0, subscription="TagC")
    assert [m.body for m in decodes(r.body)] == [b"TagC"]
    r = c.pull("TopicTest", 4, subscription="TagC")  # only a non-matching unit left
    assert (r.code, r.remark, r.ext_fields["nextBeginOffset"]) == \
        (ResponseCode.PULL_RETRY_IMMEDIATELY, "NO_MATCHED_MESSAGE", "5")
    assert len(decodes(c.pull("TopicTest", 0, subscription="*").body)) == 5
    close(sim)


# ---------------------------------------------------------------------------------------------
# Long polling


def test_long_poll_is_held_until_a_message_arrives():
    sim = world()
    c = CppClient(sim, "client")
    c.send("TopicTest", b"first")
    sim.run_for(10)
    assert c.pull("TopicTest", 0).code == 0
    done: dict = {}

    async def scenario():
        async def held():
            r = await c.request(RequestCode.PULL_MESSAGE, c.pull_ext("TopicTest", 1, sys_flag=6, suspend_ms=15000))
            done["at"], done["r"] = sim.now_ms(), r
        task = asyncio.ensure_future(held())
        await asyncio.sleep(2.0)
        assert "r" not in done  # still held
        assert sim.components["broker-a"].pull_request_hold_service.held_count() == 1
        # Another request on the same connection is answered meanwhile (no head-of-line blocking).
        r = await c.request(RequestCode.SEND_MESSAGE, c.send_ext("TopicTest", props(TAGS="late")), b"second")
        assert r.code == 0
        done["sent_at"] = sim.now_ms()
        await task

    sim.run(scenario())
    r = done["r"]
    assert r.code == ResponseCode.SUCCESS and [m.body for m in decodes(r.body)] == [b"second"]
    assert done["at"] - done["sent_at"] < 50  # woken by the arrival, not by the 5 s recheck
    assert sim.components["broker-a"].pull_request_hold_service.held_count() == 0
    close(sim)


def test_long_poll_times_out_with_pull_not_found_before_suspend_timeout():
    sim = world()
    c = CppClient(sim, "client")
    c.send("TopicTest", b"only")
    sim.run_for(10)
    start = sim.now_ms()
    r = c.pull("TopicTest", 1, sys_flag=6, suspend_ms=3000)
    elapsed = sim.now_ms() - start
    assert r.code == ResponseCode.PULL_NOT_FOUND and r.remark == "OFFSET_OVERFLOW_ONE"
    assert 3000 - REPLY_MARGIN_MS - 50 <= elapsed < 3000
    # Without the suspend flag the broker answers at once.
    start = sim.now_ms()
    assert c.pull("TopicTest", 1, sys_flag=4).code == ResponseCode.PULL_NOT_FOUND
    assert sim.now_ms() - start < 50
    close(sim)


def test_long_poll_ignores_messages_of_other_tags():
    sim = world()
    c = CppClient(sim, "client")
    c.send("TopicTest", b"init", props(TAGS="TagA"))
    sim.run_for(10)
    done: dict = {}

    async def scenario():
        async def held():
            done["r"] = await c.request(RequestCode.PULL_MESSAGE,
                                        c.pull_ext("TopicTest", 1, sys_flag=6, subscription="TagA", suspend_ms=15000))
            done["at"] = sim.now_ms()
        task = asyncio.ensure_future(held())
        await asyncio.sleep(1.0)
        await c.request(RequestCode.SEND_MESSAGE, c.send_ext("TopicTest", props(TAGS="TagB")), b"b")
        await asyncio.sleep(1.0)
        assert "r" not in done  # a TagB message does not wake a TagA pull
        await c.request(RequestCode.SEND_MESSAGE, c.send_ext("TopicTest", props(TAGS="TagA")), b"a")
        done["sent_at"] = sim.now_ms()
        await task

    sim.run(scenario())
    assert [m.body for m in decodes(done["r"].body)] == [b"a"]
    assert done["at"] - done["sent_at"] < 50
    close(sim)


def test_delay_level_messages_wait_in_the_schedule_topic_then_arrive():
    sim = world()
    c = CppClient(sim, "client")
    r = c.send("TopicTest", b"later", props(TAGS="TagD", DELAY="2"), queue_id=1)  # level 2 = 5 s
    assert r.code == 0 and r.ext_fields["queueId"] == "1"
    broker = sim.components["broker-a"]
    sent_at = sim.now_ms()
    sim.run_for(2)  # the dispatcher runs within 1 ms of the put
    # Parked in SCHEDULE_TOPIC_XXXX queue 1 (level - 1), not visible on the topic yet.
    assert broker.message_store.get_max_offset_in_queue("SCHEDULE_TOPIC_XXXX", 1) == 1
    assert c.pull("TopicTest", 0, queue_id=1).code == ResponseCode.PULL_NOT_FOUND
    # A held pull is answered when the message is delivered, 5 s after it was stored.
    r = c.pull("TopicTest", 0, queue_id=1, sys_flag=6, suspend_ms=15000)
    delivered_after = sim.now_ms() - sent_at
    assert r.code == 0 and 5000 <= delivered_after < 5300
    m = decodes(r.body)[0]
    assert (m.body, m.tags, m.queue_id) == (b"later", "TagD", 1)
    # As in RocketMQ, the delivered message keeps DELAY, REAL_TOPIC and REAL_QID on disk.
    assert (m.properties["DELAY"], m.properties["REAL_TOPIC"], m.properties["REAL_QID"]) == ("2", "TopicTest", "1")
    assert broker.schedule_message_service.query_offset(2) == 1  # the level's delivery progress
    sim.run_for(10_000)
    r = c.call(RequestCode.GET_ALL_DELAY_OFFSET, {})
    assert '"offsetTable":{2:1}' in r.body.decode().replace("\n", "").replace("\t", "")
    # Timer messages (TIMER_DELAY_SEC ...): tests/test_timer_message.py.
    close(sim)


def test_a_delay_level_idle_for_a_long_time_delivers_on_its_100_ms_schedule():
    # The level's task sleeps while its queue is empty and wakes at the step of RocketMQ's 100 ms
    # schedule that finds the message due: 1 s (level 1) after it was stored, plus less than a step.
    sim = world()
    c = CppClient(sim, "client")
    sim.run_for(30_000)
    for body in (b"first", b"second"):
        sent_at = sim.now_ms()
        assert c.send("TopicTest", body, props(DELAY="1"), queue_id=2).code == 0
        r = c.pull("TopicTest", 0 if body == b"first" else 1, queue_id=2, sys_flag=6, suspend_ms=15000)
        assert r.code == 0 and [m.body for m in decodes(r.body)] == [body]
        assert 1000 <= sim.now_ms() - sent_at < 1100 + 5  # + the network and the dispatcher's 1 ms
        sim.run_for(7_000)
    close(sim)


def test_delay_levels_follow_the_brokers_message_delay_level():
    # messageDelayLevel is the broker's, not RocketMQ's default table: level 1 here is 3 s (default 1 s).
    sim = world(messageDelayLevel="3s 7s")
    c = CppClient(sim, "client")
    sent_at = sim.now_ms()
    assert c.send("TopicTest", b"later", props(DELAY="1"), queue_id=0).code == 0
    r = c.pull("TopicTest", 0, queue_id=0, sys_flag=6, suspend_ms=15000)
    assert r.code == 0 and 3000 <= sim.now_ms() - sent_at < 3300
    close(sim)


# ---------------------------------------------------------------------------------------------
# Consumer offsets


def test_update_and_query_consumer_offset_and_queue_offsets():
    sim = world()
    c = CppClient(sim, "client")
    for _ in range(3):
        c.send("TopicTest", b"m")
    sim.run_for(10)
    q = {"consumerGroup": "CID_TEST", "topic": "TopicTest", "queueId": 0}
    # No stored offset, the queue starts at 0 and its first message is in memory: offset 0.
    r = c.call(RequestCode.QUERY_CONSUMER_OFFSET, q)
    assert (r.code, r.ext_fields["offset"]) == (ResponseCode.SUCCESS, "0")
    # A fresh topic's empty queue too (the C++ client asks it first).
    r = c.call(RequestCode.QUERY_CONSUMER_OFFSET, dict(q, queueId=3))
    assert (r.code, r.ext_fields["offset"]) == (ResponseCode.SUCCESS, "0")
    r = c.call(RequestCode.QUERY_CONSUMER_OFFSET, dict(q, setZeroIfNotFound="false"))
    assert (r.code, r.remark) == (ResponseCode.QUERY_NOT_FOUND, "Not found, do not set to zero, maybe this group boot first")
    # Committing needs a known group (no auto-creation here); a pull or heartbeat creates it.
    r = c.call(RequestCode.UPDATE_CONSUMER_OFFSET, dict(q, commitOffset=2))
    assert (r.code, r.remark) == (ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST, "Group CID_TEST not exist!")
    assert c.pull("TopicTest", 0).code == 0
    assert c.call(RequestCode.UPDATE_CONSUMER_OFFSET, dict(q, commitOffset=2)).code == 0
    r = c.call(RequestCode.QUERY_CONSUMER_OFFSET, q)
    assert (r.code, r.ext_fields["offset"]) == (0, "2")
    r = c.call(RequestCode.UPDATE_CONSUMER_OFFSET, dict(q, topic="Nope", commitOffset=1))
    assert (r.code, r.remark) == (ResponseCode.TOPIC_NOT_EXIST, "Topic Nope not exist!")
    r = c.call(RequestCode.GET_MAX_OFFSET, {"topic": "TopicTest", "queueId": 0})
    assert (r.code, r.ext_fields["offset"]) == (0, "3")
    r = c.call(RequestCode.GET_MIN_OFFSET, {"topic": "TopicTest", "queueId": 0})
    assert (r.code, r.ext_fields["offset"]) == (0, "0")
    # A push consumer's pull piggy-backs its commit offset (sysFlag bit 1).
    r = c.pull("TopicTest", 0, sys_flag=1 | 4, commit_offset=3)
    assert r.code == 0
    assert c.call(RequestCode.QUERY_CONSUMER_OFFSET, q).ext_fields["offset"] == "3"
    # Persisted every flushConsumerOffsetInterval (5 s, first after 10 s).
    sim.run_for(11_000)
    with open(os.path.join(sim.store_dir("broker-a"), "store", "config", "consumerOffset.json")) as f:
        assert '"TopicTest@CID_TEST":{0:3' in f.read()
    close(sim)


def test_lagging_consumer_is_suggested_the_slave_with_slave_read_enable():
    # 40 % of 10 KB of "physical memory": a consumer more than 4 KB behind the commitlog's end
    # is told to read from brokerId 1 (whichBrokerWhenConsumeSlowly), a close one from 0.
    sim = world(slaveReadEnable="true", controller_kwargs={"total_physical_memory_size": 10_000})
    c = CppClient(sim, "client")
    for _ in range(60):
        c.send("TopicTest", b"x" * 200)  # about 370 bytes stored each
    sim.run_for(10)
    # Pulling 32 from offset 0 leaves 28 messages (~10 KB) behind the end.
    assert c.pull("TopicTest", 0).ext_fields["suggestWhichBrokerId"] == "1"
    assert c.pull("TopicTest", 58).ext_fields["suggestWhichBrokerId"] == "0"
    close(sim)

    sim = world(controller_kwargs={"total_physical_memory_size": 10_000})  # slaveReadEnable off
    c = CppClient(sim, "client")
    for _ in range(60):
        c.send("TopicTest", b"x" * 200)
    sim.run_for(10)
    assert c.pull("TopicTest", 0).ext_fields["suggestWhichBrokerId"] == "0"
    close(sim)


def test_query_offset_not_found_when_the_first_message_is_only_on_disk():
    # With "physical memory" of 10 KB, 40 % = 4 KB: message 0 is more than that behind the end.
    sim = world(controller_kwargs={"total_physical_memory_size": 10_000})
    c = CppClient(sim, "client")
    for _ in range(30):
        c.send("TopicTest", b"x" * 200)
    sim.run_for(10)
    r = c.call(RequestCode.QUERY_CONSUMER_OFFSET, {"consumerGroup": "G", "topic": "TopicTest", "queueId": 0})
    assert (r.code, r.remark) == (ResponseCode.QUERY_NOT_FOUND,
                                  "Not found, V3_0_6_SNAPSHOT maybe this group consumer boot first")
    close(sim)


# ---------------------------------------------------------------------------------------------
# Clients: heartbeat, consumer list, unregister


def heartbeat_body(client_id: str, enum_style: str) -> dict:
    if enum_style == "int":
        enums = {"consumeType": 1, "messageModel": 1, "consumeFromWhere": 0}
    else:
        enums = {"consumeType": "CONSUME_PASSIVELY", "messageModel": "CLUSTERING",
                 "consumeFromWhere": "CONSUME_FROM_LAST_OFFSET"}
    return {"clientID": client_id,
            "consumerDataSet": [dict(groupName="CID_TEST", subscriptionDataSet=[
                {"topic": "TopicTest", "subString": "TagA || TagB", "subVersion": "1700000000000",
                 "tagsSet": ["TagA", "TagB"], "codeSet": [2598919, 2598920]}], **enums)],
            "producerDataSet": [{"groupName": "PID_TEST"}]}


def test_heartbeat_enums_as_ints_or_names_consumer_list_and_unregister():
    sim = world(clients=("c1", "c2"))
    c1, c2 = CppClient(sim, "c1"), CppClient(sim, "c2")
    r = c1.heartbeat(heartbeat_body("ip@c1", "int"))
    assert r.code == 0 and r.ext_fields == {"IS_SUPPORT_HEART_BEAT_V2": "true", "IS_SUB_CHANGE": "true"}
    assert c2.heartbeat(heartbeat_body("ip@c2", "names")).code == 0
    broker = sim.components["broker-a"]
    info = broker.consumer_manager.get_consumer_group_info("CID_TEST")
    assert info.consume_type is ConsumeType.CONSUME_PASSIVELY and info.message_model.name == "CLUSTERING"
    assert info.find_subscription_data("TopicTest").sub_string == "TagA || TagB"
    assert broker.producer_manager.group_online("PID_TEST")
    assert "%RETRY%CID_TEST" in broker.topic_config_manager.topic_config_table  # the retry topic
    r = c1.call(RequestCode.GET_CONSUMER_LIST_BY_GROUP, {"consumerGroup": "CID_TEST"})
    assert GetConsumerListByGroupResponseBody.decode(r.body).consumer_id_list == ["ip@c1", "ip@c2"]
    sim.run_for(10)
    # The members heard that the group changed (NOTIFY_CONSUMER_IDS_CHANGED, oneway).
    notified = [n for n in c1.notifications if n.code == RequestCode.NOTIFY_CONSUMER_IDS_CHANGED]
    assert notified and notified[-1].ext_str("consumerGroup") == "CID_TEST" and notified[-1].is_oneway_rpc()
    # A heartbeat-registered subscription serves pulls without the subscription flag.
    c1.send("TopicTest", b"a", props(TAGS="TagA"))
    c1.send("TopicTest", b"c", props(TAGS="TagC"))
    sim.run_for(10)
    assert [m.body for m in decodes(c1.pull("TopicTest", 0, sys_flag=0, group="CID_TEST").body)] == [b"a"]
    r = c2.call(RequestCode.UNREGISTER_CLIENT, {"clientID": "ip@c2", "consumerGroup": "CID_TEST",
                                                "producerGroup": "PID_TEST"})
    assert r.code == 0
    r = c1.call(RequestCode.GET_CONSUMER_LIST_BY_GROUP, {"consumerGroup": "CID_TEST"})
    assert GetConsumerListByGroupResponseBody.decode(r.body).consumer_id_list == ["ip@c1"]
    assert c1.call(RequestCode.UNREGISTER_CLIENT, {"clientID": "ip@c1", "consumerGroup": "CID_TEST"}).code == 0
    r = c1.call(RequestCode.GET_CONSUMER_LIST_BY_GROUP, {"consumerGroup": "CID_TEST"})
    assert (r.code, r.remark) == (ResponseCode.SYSTEM_ERROR, "no consumer for this group, CID_TEST")
    close(sim)


def test_closed_connection_leaves_the_group():
    sim = world(clients=("c1",))
    c1 = CppClient(sim, "c1")
    assert c1.heartbeat(heartbeat_body("ip@c1", "int")).code == 0
    sim.nemesis.kill("c1")
    sim.run_for(100)
    assert sim.components["broker-a"].consumer_manager.get_consumer_group_info("CID_TEST") is None
    close(sim)


def test_heartbeat_data_parses_leniently_and_refuses_nonsense():
    hb = HeartbeatData.decode(json.dumps(heartbeat_body("x", "int")).encode())
    assert hb.consumer_data_set[0].consume_from_where.name == "CONSUME_FROM_LAST_OFFSET"
    assert hb.consumer_data_set[0].subscription_data_set[0].sub_version == 1700000000000
    assert HeartbeatData.decode(hb.encode()) == hb
    with pytest.raises(ValueError, match="consumeType"):
        HeartbeatData.decode(b'{"clientID":"x","consumerDataSet":[{"groupName":"g","consumeType":7}]}')
    with pytest.raises(ValueError, match="not JSON"):
        HeartbeatData.decode(b"{")
    sub = build_subscription_data("T", " TagA ||TagB|| ")
    assert sub.tags_set == {"TagA", "TagB"} and sub.code_set == {java_string_hash_code("TagA"),
                                                                  java_string_hash_code("TagB")}


def test_broken_heartbeat_is_a_system_error():
    sim = world()
    c = CppClient(sim, "client")
    r = c.call(RequestCode.HEART_BEAT, {}, b'{"clientID":"x","consumerDataSet":[{"groupName":"g","messageModel":"NOPE"}]}')
    assert r.code == ResponseCode.SYSTEM_ERROR and "messageModel" in r.remark
    close(sim)


# ---------------------------------------------------------------------------------------------
# Admin


def test_admin_requests():
    sim = world()
    c = CppClient(sim, "client")
    r = c.call(RequestCode.UPDATE_AND_CREATE_TOPIC, {"topic": "AdminTopic", "defaultTopic": "TBW102", "readQueueNums": 2,
                                                     "writeQueueNums": 2, "perm": 6, "topicFilterType": "SINGLE_TAG",
                                                     "topicSysFlag": 0, "order": False,
                                                     "attributes": "+message.type=NORMAL"})
    assert r.code == 0
    r = c.call(RequestCode.UPDATE_AND_CREATE_TOPIC, {"topic": "TBW102", "defaultTopic": "TBW102", "readQueueNums": 2,
                                                     "writeQueueNums": 2, "perm": 6, "topicFilterType": "SINGLE_TAG",
                                                     "order": "false"})
    assert (r.code, r.remark) == (ResponseCode.INVALID_PARAMETER, "The topic[TBW102] is conflict with system topic.")
    r = c.call(RequestCode.GET_ALL_TOPIC_CONFIG, {})
    wrapper = TopicConfigAndMappingSerializeWrapper.from_json_dict(remoting_serializable.decode_json(r.body, "t"))
    tc = wrapper.topic_config_table["AdminTopic"]
    assert (tc.read_queue_nums, tc.perm, tc.attributes) == (2, 6, {"message.type": "NORMAL"})
    assert wrapper.data_version == sim.components["broker-a"].topic_config_manager.data_version

    for i in range(4):
        c.send("AdminTopic", b"m", queue_id=i % 2)
    sim.run_for(10)
    assert c.pull("AdminTopic", 0, group="CG").code == 0
    assert c.call(RequestCode.UPDATE_CONSUMER_OFFSET, {"consumerGroup": "CG", "topic": "AdminTopic", "queueId": 0,
                                                       "commitOffset": 1}).code == 0
    r = c.call(RequestCode.GET_CONSUME_STATS, {"consumerGroup": "CG", "topic": "AdminTopic"})
    stats = ConsumeStats.decode(r.body)
    assert stats.compute_total_diff() == 3
    offsets = {mq.queue_id: (w.broker_offset, w.consumer_offset) for mq, w in stats.offset_table.items()}
    assert offsets == {0: (2, 1), 1: (2, 0)}
    assert ConsumeStats.decode(stats.encode()) == stats

    r = c.call(RequestCode.GET_BROKER_RUNTIME_INFO, {})
    table = KVTable.decode(r.body).table
    assert table["putMessageTimesTotal"] == "4" and table["brokerVersionDesc"] == "V5_3_3"
    assert int(table["commitLogMaxOffset"]) > 0 and table["brokerActive"] == "true"
    r = c.call(RequestCode.GET_ALL_CONSUMER_OFFSET, {})
    assert '"AdminTopic@CG":{0:1' in r.body.decode()
    r = c.call(RequestCode.GET_ALL_DELAY_OFFSET, {})
    assert r.code == 0 and '"offsetTable"' in r.body.decode()
    r = c.call(RequestCode.GET_ALL_SUBSCRIPTIONGROUP_CONFIG, {})
    groups = SubscriptionGroupWrapper.decode(r.body).subscription_group_table
    assert "CG" in groups and "TOOLS_CONSUMER" in groups
    close(sim)


# ---------------------------------------------------------------------------------------------
# Roles, restarts, determinism


def test_slave_refuses_sends_and_without_slave_read_enable_pulls():
    sim = world(brokerRole="SLAVE", brokerId=1)
    c = CppClient(sim, "client")
    r = c.send("TopicTest", b"x")
    assert (r.code, r.remark) == (ResponseCode.SYSTEM_BUSY, REJECT)
    r = c.pull("TopicTest", 0)
    assert (r.code, r.remark) == (ResponseCode.SYSTEM_BUSY, REJECT)
    close(sim)


def test_clean_restart_keeps_messages_topics_and_offsets():
    sim = world()
    c = CppClient(sim, "client")
    for i in range(3):
        c.send("Restart", f"m{i}".encode(), props(TAGS="T"))
    sim.run_for(10)
    assert c.pull("Restart", 0, group="G").code == 0
    assert c.call(RequestCode.UPDATE_CONSUMER_OFFSET, {"consumerGroup": "G", "topic": "Restart", "queueId": 0,
                                                       "commitOffset": 2}).code == 0
    sim.stop("broker-a")
    sim.nemesis.restart("broker-a")
    sim.run_for(100)
    c = CppClient(sim, "client")
    assert [m.body for m in decodes(c.pull("Restart", 0).body)] == [b"m0", b"m1", b"m2"]
    r = c.call(RequestCode.QUERY_CONSUMER_OFFSET, {"consumerGroup": "G", "topic": "Restart", "queueId": 0})
    assert r.ext_fields["offset"] == "2"
    assert c.send("Restart", b"m3").ext_fields["queueOffset"] == "3"
    close(sim)


def test_same_seed_same_trace():
    def run() -> str:
        sim = world(seed=5)
        c = CppClient(sim, "client")
        for _i in range(3):
            c.send("TopicTest", b"x", props(TAGS="A"))
        sim.run_for(10)
        c.pull("TopicTest", 3, sys_flag=6, suspend_ms=2000)
        digest = trace_hash(sim.tracer.events)
        sim.close()
        return digest
    assert run() == run()


def test_helpers_match_rocketmq():
    assert delete_property("A\x011\x02POP_CK\x01x\x02B\x012\x02", "POP_CK") == "A\x011\x02B\x012\x02"
    assert delete_property("POP_CKX\x011\x02", "POP_CK") == "POP_CKX\x011\x02"
    text = properties_to_java_string({"b": "1", "a": "2"})
    assert string_to_message_properties(text) == {"a": "2", "b": "1"} and text.index("a") < text.index("b")


# ---------------------------------------------------------------------------------------------
# With a NameServer and a slave (classic HA)


def route_of(sim: Simulation, topic: str) -> TopicRouteData:
    client = RemotingClient(sim.nodes["client"])
    request = RemotingCommand.create_request_command(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": topic})
    r = sim.run(client.invoke_sync(NS, request, 3000))
    assert r.code == 0, r
    return TopicRouteData.decode(r.body)


def test_master_and_slave_register_replicate_and_sync_metadata():
    sim = cluster()
    master, slave = sim.components["broker-a"], sim.components["broker-a-s"]
    assert master.boot_success_message() == ("The broker[broker-a, 127.0.0.1:10911] boot success. serializeType=JSON "
                                             "and name server is 127.0.0.1:9876")
    # The slave learnt its master from the registration: SlaveSynchronize's address and HA address.
    assert slave.slave_synchronize.master_addr == "127.0.0.1:10911"
    c = CppClient(sim, "client")
    for i in range(5):
        assert c.send("TopicHA", f"m{i}".encode(), props(TAGS="T")).code == 0
    assert c.send("TopicHA", b"delayed", props(DELAY="1"), queue_id=1).code == 0  # delivered by the master
    assert c.pull("TopicHA", 0, group="G").code == 0
    assert c.call(RequestCode.UPDATE_CONSUMER_OFFSET, {"consumerGroup": "G", "topic": "TopicHA", "queueId": 0,
                                                       "commitOffset": 3}).code == 0
    # The new topic is registered at once; both members of broker-a are in the route.
    route = route_of(sim, "TopicHA")
    assert route.broker_datas[0].broker_addrs == {0: "127.0.0.1:10911", 1: "127.0.0.1:10921"}
    sim.run_until(lambda: slave.message_store.get_max_phy_offset() == master.message_store.get_max_phy_offset(),
                  timeout_ms=30_000)
    sim.run_until(lambda: slave.message_store.get_max_offset_in_queue("TopicHA", 0) == 5, timeout_ms=1000)
    # SlaveSynchronize (period 5 s here, checked every 3 s after a first 10 s) copies topics and offsets.
    sim.run_until(lambda: slave.topic_config_manager.select_topic_config("TopicHA") is not None
                  and slave.consumer_offset_manager.query_offset("G", "TopicHA", 0) == 3
                  # the group the pull auto-created on the master
                  and "G" in slave.subscription_group_manager.subscription_group_table
                  # the master's delivery progress of delay level 1
                  and slave.schedule_message_service.query_offset(1) == 1, timeout_ms=30_000)
    assert os.path.exists(os.path.join(sim.store_dir("broker-a-s"), "store", "config", "topics.json"))
    # Reads from the slave while the master is down (slaveReadEnable on the slave).
    sim.nemesis.kill("broker-a")
    s = CppClient(sim, "client", "127.0.0.1:10921")
    r = s.pull("TopicHA", 0)
    assert r.code == 0 and [m.body for m in decodes(r.body)] == [f"m{i}".encode() for i in range(5)]
    # A slave answers anything but FOUND with "retry at the master" (RocketMQ 5, see the processor).
    r = s.pull("TopicHA", 5)
    assert (r.code, r.ext_fields["suggestWhichBrokerId"]) == (ResponseCode.PULL_RETRY_IMMEDIATELY, "0")
    r = s.call(RequestCode.QUERY_CONSUMER_OFFSET, {"consumerGroup": "G", "topic": "TopicHA", "queueId": 0})
    assert r.ext_fields["offset"] == "3"
    assert s.send("TopicHA", b"x").code == ResponseCode.SYSTEM_BUSY  # still no writes on a slave
    close(sim)


def test_sync_master_waits_for_its_slave():
    sim = cluster(master_role="SYNC_MASTER")
    master, slave = sim.components["broker-a"], sim.components["broker-a-s"]
    c = CppClient(sim, "client")
    # inSyncReplicas=2 (rmqlab's 2m-2s-sync templates): the send returns once the slave has it.
    master.message_store_config.inSyncReplicas = 2
    sim.run_until(lambda: master.ha_service.get_connection_count() == 1, timeout_ms=30_000)
    r = c.send("TopicSync", b"acked")
    assert r.code == ResponseCode.SUCCESS
    offset = int(r.ext_fields["queueOffset"])
    assert slave.message_store.get_max_phy_offset() == master.message_store.get_max_phy_offset()
    assert offset == 0
    sim.nemesis.kill("broker-a-s")
    r = c.send("TopicSync", b"unacked", timeout_ms=30_000)
    assert r.code == ResponseCode.FLUSH_SLAVE_TIMEOUT  # stored, but not acknowledged by a slave
    close(sim)


def test_registers_with_every_name_server_and_again_after_a_name_server_restart():
    sim = Simulation(seed=4)
    sim.add_node("ns1", NamesrvController)
    sim.add_node("ns2", lambda: NamesrvController(netty_server_config=NettyServerConfig(listenPort=9877)))
    sim.add_node("broker-a", broker_factory(sim, "broker-a", namesrv="127.0.0.1:9876;127.0.0.1:9877",
                                            registerNameServerPeriod=10000))
    sim.add_node("client", Idle)
    sim.start_all()
    client = RemotingClient(sim.nodes["client"])

    def route(ns: str) -> RemotingCommand:
        request = RemotingCommand.create_request_command(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": "TBW102"})
        return sim.run(client.invoke_sync(ns, request, 3000))

    assert route("127.0.0.1:9876").code == 0 and route("127.0.0.1:9877").code == 0
    sim.nemesis.kill("ns2")
    sim.nemesis.restart("ns2")
    sim.run_for(100)
    assert route("127.0.0.1:9877").code == ResponseCode.TOPIC_NOT_EXIST  # a restarted name server knows nothing
    # The next periodic registration (every 10 s here, the first 10 s after start) fills it again.
    start = sim.now_ms()
    while route("127.0.0.1:9877").code != 0:
        assert sim.now_ms() - start < 12_000, "not registered again within a period"
        sim.run_for(500)
    close(sim)


def test_shutdown_unregisters_from_the_name_server():
    sim = cluster()
    CppClient(sim, "client").send("TopicGone", b"x")
    assert 0 in route_of(sim, "TopicGone").broker_datas[0].broker_addrs
    sim.stop("broker-a")
    route = route_of(sim, "TopicGone")
    assert 0 not in route.broker_datas[0].broker_addrs
    close(sim)
