"""The Proxy's protocol pieces without sockets: queue choice, handles, routes, settings, checks and
conversions, each against what RocketMQ's Proxy does."""

from __future__ import annotations

import hashlib

import pytest

from rmqlab.client.exceptions import MQBrokerException, MQClientException
from rmqlab.common.constant.perm_name import PermName
from rmqlab.common.consumer.receipt_handle import ReceiptHandle, create_handle
from rmqlab.common.message.message import MessageExt
from rmqlab.common.message.message_sys_flag import MessageSysFlag
from rmqlab.config.proxy import ProxyConfig
from rmqlab.proto.v2 import definition_pb2 as pb
from rmqlab.proto.v2 import service_pb2 as spb
from rmqlab.proxy.grpc.v2.common import GrpcProxyException, status_of
from rmqlab.proxy.grpc.v2.grpc_client_settings_manager import GrpcClientSettingsManager
from rmqlab.proxy.grpc.v2.grpc_converter import build_message
from rmqlab.proxy.grpc.v2.proxy_context import ProxyContext
from rmqlab.proxy.grpc.v2.receive_message_activity import ReceiveMessageActivity
from rmqlab.proxy.grpc.v2.route_activity import gen_message_queues
from rmqlab.proxy.grpc.v2.send_message_activity import SendMessageActivity
from rmqlab.proxy.processor.messaging_processor import consistent_hash
from rmqlab.remoting.protocol.route.topic_route_data import QueueData
from rmqlab.remoting.protocol.subscription.subscription_group_config import SubscriptionGroupConfig
from rmqlab.remoting.response_code import ResponseCode


def test_message_group_queue_choice_is_guavas_consistent_hash():
    # Guava's own golden values (HashingTest.testConsistentHash_linearCongruentialGeneratorCompatibility).
    assert [consistent_hash(i, 100) for i in range(20)] == [0, 55, 62, 8, 45, 59, 86, 97, 82, 59, 73, 37, 17,
                                                           56, 86, 21, 90, 37, 38, 83]
    assert consistent_hash(10863919174838991, 11) == 6
    assert consistent_hash(2016238256797177309, 11) == 3
    assert consistent_hash(1673758223894951030, 11) == 5
    assert (consistent_hash(2, 100001), consistent_hash(2201, 100001), consistent_hash(2202, 100001)) == \
        (80343, 22152, 15018)


def test_receipt_handle_is_the_extra_info_plus_the_commitlog_offset():
    handle = create_handle("3 1700000000000 60000 2 0 broker-a 1 5", 4242)
    h = ReceiptHandle.decode(handle)
    assert (h.start_offset, h.retrieve_time, h.invisible_time, h.revive_queue_id, h.topic_type, h.broker_name,
            h.queue_id, h.offset, h.commit_log_offset) == (3, 1700000000000, 60000, 2, "0", "broker-a", 1, 5, 4242)
    assert h.encode() == handle and h.receipt_handle == handle
    assert h.is_expired(1700000060000) and not h.is_expired(1700000059999)
    assert ReceiptHandle.decode("3 1 2 0 0 b 1 5").commit_log_offset == -1  # a broker's handle as is
    for bad in ("", "not a handle", "a b c d e f g h"):
        with pytest.raises(ValueError, match="Parse failed"):
            ReceiptHandle.decode(bad)


def test_route_queues_split_by_permission_like_gen_message_queue_from_queue_data():
    broker, topic = pb.Broker(name="broker-a", id=0), pb.Resource(name="T")
    rw = gen_message_queues(QueueData("broker-a", 4, 6, PermName.PERM_READ | PermName.PERM_WRITE), topic, "FIFO", broker)
    assert [(q.id, q.permission) for q in rw] == [(0, pb.WRITE), (1, pb.WRITE)] + [(i, pb.READ_WRITE) for i in range(2, 6)]
    assert all(list(q.accept_message_types) == [pb.FIFO] for q in rw)
    ro = gen_message_queues(QueueData("broker-a", 2, 2, PermName.PERM_READ), topic, "NORMAL", broker)
    assert [q.permission for q in ro] == [pb.READ, pb.READ]
    none = gen_message_queues(QueueData("broker-a", 0, 0, 0), topic, "NORMAL", broker)
    assert [q.permission for q in none] == [pb.NONE]
    mixed = gen_message_queues(QueueData("broker-a", 1, 1, 6), topic, "MIXED", broker)
    assert list(mixed[0].accept_message_types) == [pb.NORMAL, pb.FIFO, pb.DELAY, pb.TRANSACTION]


def test_settings_reply_carries_what_the_official_client_needs():
    manager = GrpcClientSettingsManager(ProxyConfig())
    producer = manager.merge(pb.Settings(client_type=pb.PRODUCER, publishing=pb.Publishing()))
    assert producer.publishing.max_body_size == 4 * 1024 * 1024 and producer.publishing.validate_message_type
    assert producer.backoff_policy.max_attempts == 3
    assert producer.backoff_policy.exponential_backoff.initial.ToMilliseconds() == 10
    assert producer.metric.on is False
    group = SubscriptionGroupConfig("GID", consume_message_orderly=True, retry_max_times=5)
    consumer = manager.merge(pb.Settings(client_type=pb.PUSH_CONSUMER, subscription=pb.Subscription(
        group=pb.Resource(name="GID"))), group)
    sub = consumer.subscription
    assert (sub.fifo, sub.receive_batch_size, sub.long_polling_timeout.seconds) == (True, 32, 20)
    assert consumer.backoff_policy.max_attempts == 6
    assert [d.ToMilliseconds() for d in consumer.backoff_policy.customized_backoff.next][:3] == [1000, 5000, 10000]


def test_polling_time_is_clamped_to_the_callers_deadline():
    config = ProxyConfig()
    activity = ReceiveMessageActivity(None, GrpcClientSettingsManager(config), config)
    request = spb.ReceiveMessageRequest()
    request.long_polling_timeout.FromMilliseconds(30_000)
    assert activity._polling_time(ProxyContext(remaining_ms=60_000), request, None) == 20_000  # max
    request.long_polling_timeout.FromMilliseconds(1_000)
    assert activity._polling_time(ProxyContext(remaining_ms=60_000), request, None) == 5_000  # min
    request.long_polling_timeout.FromMilliseconds(15_000)
    assert activity._polling_time(ProxyContext(remaining_ms=8_000), request, None) == 8_000
    for version, code in (("5.1.2", pb.ILLEGAL_POLLING_TIME), ("5.0.1", pb.BAD_REQUEST)):
        with pytest.raises(GrpcProxyException) as e:
            activity._polling_time(ProxyContext(remaining_ms=3_000, client_version=version), request, None)
        assert e.value.code == code


class _Clock:
    def now_ms(self):
        return 1_700_000_000_000


def _message(**system) -> pb.Message:
    return pb.Message(topic=pb.Resource(name="T"), body=b"hello",
                      system_properties=pb.SystemProperties(message_id="01ABC", **system))


@pytest.mark.parametrize("change, code", [
    (lambda m: setattr(m, "body", b"x" * (4 * 1024 * 1024 + 1)), pb.MESSAGE_BODY_TOO_LARGE),
    (lambda m: m.user_properties.update({"KEYS": "x"}), pb.ILLEGAL_MESSAGE_PROPERTY_KEY),
    (lambda m: m.user_properties.update({"k": "a\x01"}), pb.ILLEGAL_MESSAGE_PROPERTY_KEY),
    (lambda m: m.user_properties.update({f"k{i}": "v" for i in range(129)}), pb.MESSAGE_PROPERTIES_TOO_LARGE),
    (lambda m: setattr(m.system_properties, "tag", "a|b"), pb.ILLEGAL_MESSAGE_TAG),
    (lambda m: m.system_properties.keys.append("  "), pb.ILLEGAL_MESSAGE_KEY),
    (lambda m: setattr(m.system_properties, "message_id", ""), pb.ILLEGAL_MESSAGE_ID),
    (lambda m: setattr(m.system_properties, "message_group", "g" * 64), pb.ILLEGAL_MESSAGE_GROUP),
    (lambda m: m.system_properties.delivery_timestamp.FromMilliseconds(1_700_000_000_000 + 25 * 3600 * 1000),
     pb.ILLEGAL_DELIVERY_TIME),
])
def test_send_checks_answer_the_real_proxys_codes(change, code):
    message = _message()
    change(message)
    with pytest.raises(GrpcProxyException) as e:
        SendMessageActivity(_Clock(), ProxyConfig()).build_message(ProxyContext(), message, "T")
    assert e.value.code == code


def test_send_maps_grpc_fields_to_rocketmq_properties():
    m = _message(tag="TagA", message_group="g1")
    m.system_properties.keys.extend(["k1", "k2"])
    m.user_properties["seq"] = "7"
    msg = SendMessageActivity(_Clock(), ProxyConfig()).build_message(ProxyContext(remote_address="1.2.3.4:5"), m, "T")
    p = msg.properties
    assert (p["TAGS"], p["KEYS"], p["UNIQ_KEY"], p["__SHARDINGKEY"], p["seq"], p["PGROUP"]) == \
        ("TagA", "k1 k2", "01ABC", "g1", "7", "T")
    assert p["__BORNHOST"] == "1.2.3.4:5"
    d = _message()
    d.system_properties.delivery_timestamp.FromMilliseconds(1_700_000_003_000)
    config = ProxyConfig(useDelayLevel=True)
    p = SendMessageActivity(_Clock(), config).build_message(ProxyContext(), d, "T").properties
    assert p["TIMER_DELIVER_MS"] == "1700000003000" and p["DELAY"] == "2"  # 5 s: the first level over 3 s


def test_received_message_has_md5_digest_identity_encoding_and_attempts():
    ext = MessageExt(topic="T", body=b"hello", properties={"TAGS": "TagA", "UNIQ_KEY": "01ABC", "seq": "1",
                                                           "POP_CK": "h"},
                     queue_id=2, queue_offset=9, reconsume_times=2, born_host=("10.0.0.1", 1),
                     store_host=("10.0.0.2", 10911))
    m = build_message(ext, 0)
    sp = m.system_properties
    assert sp.body_digest.type == pb.MD5 and sp.body_digest.checksum == hashlib.md5(b"hello").hexdigest().upper()
    assert sp.body_encoding == pb.IDENTITY and sp.delivery_attempt == 3 and sp.receipt_handle == "h"
    assert (sp.queue_id, sp.queue_offset, sp.tag, sp.message_id) == (2, 9, "TagA", "01ABC")
    assert dict(m.user_properties) == {"seq": "1"} and sp.message_type == pb.NORMAL
    ext.sys_flag = MessageSysFlag.COMPRESSED_FLAG
    assert build_message(ext, 0).system_properties.body_encoding == pb.GZIP


def test_errors_become_the_real_proxys_status_codes():
    assert status_of(MQClientException(ResponseCode.TOPIC_NOT_EXIST, "no route")).code == pb.TOPIC_NOT_FOUND
    assert status_of(MQBrokerException(ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST, "x")).code == \
        pb.CONSUMER_GROUP_NOT_FOUND
    assert status_of(MQBrokerException(ResponseCode.SYSTEM_BUSY, "busy")).code == pb.TOO_MANY_REQUESTS
    assert status_of(MQBrokerException(ResponseCode.SYSTEM_ERROR, "x")).code == pb.INTERNAL_SERVER_ERROR
    assert status_of(RuntimeError("boom")).code == pb.INTERNAL_SERVER_ERROR
