"""GrpcConverter (proxy/grpc/v2/common/GrpcConverter.java): a stored message (MessageExt, as the
broker's POP answer carries it) to an `apache.rocketmq.v2.Message` for ReceiveMessage.

System properties come from RocketMQ's property keys; every other property is a user property.
The body digest is MD5 in upper-case hex, as the real proxy sends (GrpcConverter.buildMessage); the body
encoding is GZIP only when the stored message has COMPRESSED_FLAG, else IDENTITY (never
UNSPECIFIED: the Python client cannot read that). As in RocketMQ, __SHARDINGKEY is not among
MessageConst.STRING_HASH_SET, so a FIFO message's group also comes back as a user property.
"""

from __future__ import annotations

import hashlib

from google.protobuf.timestamp_pb2 import Timestamp

from rmqlab.common.message.message import MessageExt
from rmqlab.common.message.message_const import MessageConst
from rmqlab.common.message.message_sys_flag import MessageSysFlag
from rmqlab.proto.v2 import definition_pb2 as pb
from rmqlab.proxy.service.metadata_service import message_type_of_properties

MC = MessageConst


def timestamp_from_millis(ms: int) -> Timestamp:
    ts = Timestamp()
    ts.FromMilliseconds(int(ms))
    return ts


def host_string(host: tuple[str, int] | None) -> str | None:
    return None if host is None else f"{host[0]}:{host[1]}"


def build_message(msg: MessageExt, now_ms: int) -> pb.Message:
    """GrpcConverter.buildMessage: `now_ms` is the proxy's clock, for a TIMER_DELAY_SEC message."""
    props = msg.properties
    body = msg.body or b""
    sp = pb.SystemProperties()
    tag = props.get(MC.PROPERTY_TAGS)
    if tag is not None:
        sp.tag = tag
    keys = props.get(MC.PROPERTY_KEYS)
    if keys is not None:
        sp.keys.extend(keys.split(MC.KEY_SEPARATOR))
    message_id = props.get(MC.PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX) or msg.msg_id
    if message_id is not None:
        sp.message_id = message_id
    sp.body_digest.type = pb.MD5
    sp.body_digest.checksum = hashlib.md5(body).hexdigest().upper()
    sp.body_encoding = pb.GZIP if msg.sys_flag & MessageSysFlag.COMPRESSED_FLAG else pb.IDENTITY
    sp.message_type = pb.MessageType.Value(message_type_of_properties(props))
    sp.born_timestamp.CopyFrom(timestamp_from_millis(msg.born_timestamp))
    born_host = props.get(MC.PROPERTY_BORN_HOST) or host_string(msg.born_host)
    if born_host:
        sp.born_host = born_host
    sp.store_timestamp.CopyFrom(timestamp_from_millis(msg.store_timestamp))
    store_host = host_string(msg.store_host)
    if store_host is not None:
        sp.store_host = store_host
    if props.get(MC.PROPERTY_TIMER_DELAY_SEC) is not None:
        sp.delivery_timestamp.CopyFrom(timestamp_from_millis(now_ms + int(props[MC.PROPERTY_TIMER_DELAY_SEC]) * 1000))
    elif props.get(MC.PROPERTY_TIMER_DELIVER_MS) is not None:
        sp.delivery_timestamp.CopyFrom(timestamp_from_millis(int(props[MC.PROPERTY_TIMER_DELIVER_MS])))
    group = props.get(MC.PROPERTY_SHARDING_KEY)
    if group is not None:
        sp.message_group = group
    handle = props.get(MC.PROPERTY_POP_CK)
    if handle is not None:
        sp.receipt_handle = handle
    sp.queue_id = msg.queue_id
    sp.queue_offset = msg.queue_offset
    sp.delivery_attempt = msg.reconsume_times + 1
    trace_context = props.get(MC.PROPERTY_TRACE_CONTEXT)
    if trace_context is not None:
        sp.trace_context = trace_context
    dlq_topic, dlq_id = props.get(MC.PROPERTY_DLQ_ORIGIN_TOPIC), props.get(MC.PROPERTY_DLQ_ORIGIN_MESSAGE_ID)
    if dlq_topic is not None and dlq_id is not None:
        sp.dead_letter_queue.topic = dlq_topic
        sp.dead_letter_queue.message_id = dlq_id
    user = {k: v for k, v in props.items() if k not in MC.STRING_HASH_SET}
    return pb.Message(topic=pb.Resource(name=msg.topic), user_properties=user, system_properties=sp, body=body)
