"""SendMessageActivity (proxy/grpc/v2/producer/SendMessageActivity.java): a gRPC Message becomes
a RocketMQ message with RocketMQ's property keys, checked as the real proxy checks it:

    no message                      MESSAGE_CORRUPTED
    body over maxMessageSize        MESSAGE_BODY_TOO_LARGE
    too many / too large / system-named user properties   MESSAGE_PROPERTIES_TOO_LARGE, ILLEGAL_MESSAGE_PROPERTY_KEY
    tag with '|' or blank           ILLEGAL_MESSAGE_TAG;  key blank: ILLEGAL_MESSAGE_KEY
    no message id                   ILLEGAL_MESSAGE_ID
    message group too long / blank  ILLEGAL_MESSAGE_GROUP
    delivery time beyond maxDelayTimeMills   ILLEGAL_DELIVERY_TIME
    message type not the topic's    MESSAGE_PROPERTY_CONFLICT_WITH_TYPE (MessagingProcessor)

A TRANSACTION message is a half message (TRAN_MSG=true, the prepared sysFlag), its
orphaned_transaction_recovery_duration becomes CHECK_IMMUNITY_TIME_IN_SECONDS (whole seconds; over
maxTransactionRecoverySecond, 3600: BAD_REQUEST); its producer group is the topic.

A DELAY message's delivery_timestamp becomes TIMER_DELIVER_MS (plus a delay level when
useDelayLevel is set), which the broker's timer message store holds until then.

Deviation: several messages in one request are sent one after another to the same topic
(RocketMQ sends them as one MessageBatch); each gets its own entry either way.
"""

from __future__ import annotations

from rmqlab.common.message.message import Message
from rmqlab.common.message.message_const import MessageConst
from rmqlab.common.message.message_sys_flag import MessageSysFlag
from rmqlab.config.proxy import ProxyConfig
from rmqlab.proto.v2 import definition_pb2 as pb
from rmqlab.proto.v2 import service_pb2 as spb
from rmqlab.proxy.grpc.v2.common import Code, GrpcProxyException, build_status, status_of
from rmqlab.proxy.grpc.v2.grpc_validator import contain_control_character, validate_tag, validate_topic
from rmqlab.proxy.grpc.v2.proxy_context import ProxyContext
from rmqlab.proxy.service.transaction_service import MAX_TRANSACTION_RECOVERY_SECOND, proxy_config_value

MC = MessageConst

STATUS_CODES = {
    "SEND_OK": Code.OK,
    "FLUSH_DISK_TIMEOUT": Code.MASTER_PERSISTENCE_TIMEOUT,
    "FLUSH_SLAVE_TIMEOUT": Code.SLAVE_PERSISTENCE_TIMEOUT,
    "SLAVE_NOT_AVAILABLE": Code.HA_NOT_AVAILABLE,
}


def build_sys_flag(message: pb.Message) -> int:
    flag = 0
    if message.system_properties.body_encoding == pb.GZIP:
        flag |= MessageSysFlag.COMPRESSED_FLAG
    if message.system_properties.message_type == pb.TRANSACTION:
        flag |= MessageSysFlag.TRANSACTION_PREPARED_TYPE
    return flag


class SendMessageActivity:
    def __init__(self, processor, config: ProxyConfig):
        self.processor = processor
        self.config = config

    def build_message(self, ctx: ProxyContext, message: pb.Message, producer_group: str) -> Message:
        c = self.config
        if c.maxMessageSize > 0 and len(message.body) > c.maxMessageSize:
            raise GrpcProxyException(Code.MESSAGE_BODY_TOO_LARGE, f"message body cannot exceed the max {c.maxMessageSize}")
        sp = message.system_properties
        user = dict(message.user_properties)
        if len(user) > c.userPropertyMaxNum:
            raise GrpcProxyException(Code.MESSAGE_PROPERTIES_TOO_LARGE,
                                     f"too many user properties, max is {c.userPropertyMaxNum}")
        size = 0
        for k, v in user.items():
            if k in MC.STRING_HASH_SET:
                raise GrpcProxyException(Code.ILLEGAL_MESSAGE_PROPERTY_KEY, f"property is used by system: {k}")
            if contain_control_character(k):
                raise GrpcProxyException(Code.ILLEGAL_MESSAGE_PROPERTY_KEY,
                                         "the key of property cannot contain control character")
            if contain_control_character(v):
                raise GrpcProxyException(Code.ILLEGAL_MESSAGE_PROPERTY_KEY,
                                         "the value of property cannot contain control character")
            size += len(k.encode()) + len(v.encode())
        props: dict[str, str] = dict(user)
        validate_tag(sp.tag)
        if sp.tag:
            # RocketMQ sets TAGS even when empty; its property reader then drops the empty value,
            # which rmqlab's encoder refuses up front, so an empty tag is simply not stored.
            props[MC.PROPERTY_TAGS] = sp.tag
        size += len(sp.tag.encode())
        for key in sp.keys:
            if key and not key.strip():
                raise GrpcProxyException(Code.ILLEGAL_MESSAGE_KEY, "key cannot be the char sequence of whitespace")
            if contain_control_character(key):
                raise GrpcProxyException(Code.ILLEGAL_MESSAGE_KEY, "key cannot contain control character")
            size += len(key.encode())
        if sp.keys:
            props[MC.PROPERTY_KEYS] = MC.KEY_SEPARATOR.join(sp.keys)
        if size > c.maxUserPropertySize:
            raise GrpcProxyException(Code.MESSAGE_PROPERTIES_TOO_LARGE,
                                     f"the total size of user property is too large, max is {c.maxUserPropertySize}")
        if not sp.message_id.strip():
            raise GrpcProxyException(Code.ILLEGAL_MESSAGE_ID, "message id cannot be empty")
        props[MC.PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX] = sp.message_id
        if sp.message_type == pb.TRANSACTION:
            props[MC.PROPERTY_TRANSACTION_PREPARED] = "true"
            if sp.HasField("orphaned_transaction_recovery_duration"):
                # Durations.toSeconds: whole seconds, the nanos dropped.
                seconds = sp.orphaned_transaction_recovery_duration.seconds
                limit = proxy_config_value(c, "maxTransactionRecoverySecond", MAX_TRANSACTION_RECOVERY_SECOND)
                if 0 < limit < seconds:
                    raise GrpcProxyException(Code.BAD_REQUEST, "the max transaction recovery time of message is "
                                                               f"too large, max is {limit}")
                props[MC.PROPERTY_CHECK_IMMUNITY_TIME_IN_SECONDS] = str(seconds)
        if sp.HasField("delivery_timestamp"):
            deliver_ms = sp.delivery_timestamp.ToMilliseconds()
            if c.maxDelayTimeMills > 0 and deliver_ms - self.processor.now_ms() > c.maxDelayTimeMills:
                raise GrpcProxyException(Code.ILLEGAL_DELIVERY_TIME,
                                         f"the max delay time of message is too large, max is {c.maxDelayTimeMills}")
            if c.useDelayLevel:
                props[MC.PROPERTY_DELAY_TIME_LEVEL] = str(c.compute_delay_level(deliver_ms, self.processor.now_ms()))
            props[MC.PROPERTY_TIMER_DELIVER_MS] = str(deliver_ms)
        props[MC.PROPERTY_RECONSUME_TIME] = str(sp.delivery_attempt)
        props[MC.PROPERTY_PRODUCER_GROUP] = producer_group
        group = sp.message_group
        if group:
            if not group.strip():
                raise GrpcProxyException(Code.ILLEGAL_MESSAGE_GROUP, "message group cannot be the char sequence of whitespace")
            if c.maxMessageGroupSize > 0 and len(group.encode()) >= c.maxMessageGroupSize:
                raise GrpcProxyException(Code.ILLEGAL_MESSAGE_GROUP,
                                         f"message group exceed the max size {c.maxMessageGroupSize}")
            if contain_control_character(group):
                raise GrpcProxyException(Code.ILLEGAL_MESSAGE_GROUP, "message group cannot contain control character")
            props[MC.PROPERTY_SHARDING_KEY] = group
        if sp.trace_context:
            props[MC.PROPERTY_TRACE_CONTEXT] = sp.trace_context
        born_host = sp.born_host.strip() or ctx.remote_address
        if born_host:
            props[MC.PROPERTY_BORN_HOST] = born_host
        if sp.HasField("born_timestamp"):
            props[MC.PROPERTY_BORN_TIMESTAMP] = str(sp.born_timestamp.ToMilliseconds())
        return Message(topic=message.topic.name, body=bytes(message.body), properties=props)

    async def send_message(self, ctx: ProxyContext, request: spb.SendMessageRequest) -> spb.SendMessageResponse:
        if not request.messages:
            raise GrpcProxyException(Code.MESSAGE_CORRUPTED, "no message to send")
        first = request.messages[0]
        validate_topic(first.topic)
        topic = first.topic.name
        # "here use topicName as producerGroup for transactional checker" (RocketMQ)
        messages = [self.build_message(ctx, m, topic) for m in request.messages]
        if any(m.topic.name != topic for m in request.messages):
            raise GrpcProxyException(Code.MESSAGE_CORRUPTED, "all messages of one request must have the same topic")
        transactions = self.processor.transactions
        if transactions is not None and first.system_properties.message_type == pb.TRANSACTION:
            # Checks of this group (= the topic) come back through this Proxy from now on; see
            # rmqlab.proxy.service.transaction_service for why here and not at the settings.
            transactions.add_transaction_subscription(topic, topic)
        entries: list[spb.SendResultEntry] = []
        sharding_key = first.system_properties.message_group if len(request.messages) == 1 else None
        for pm, msg in zip(request.messages, messages):
            try:
                result = await self.processor.send_message(topic, msg, build_sys_flag(pm), sharding_key)
            except Exception as e:
                if len(messages) == 1:
                    raise
                entries.append(spb.SendResultEntry(status=status_of(e)))
                continue
            code = STATUS_CODES.get(result.send_status.value, Code.INTERNAL_SERVER_ERROR)
            if code != Code.OK:
                entries.append(spb.SendResultEntry(status=build_status(
                    code, f"send message failed, sendStatus={result.send_status.value}")))
            else:
                entries.append(spb.SendResultEntry(status=build_status(Code.OK), offset=result.queue_offset,
                                                   message_id=result.msg_id or "",
                                                   transaction_id=result.transaction_id or ""))
        codes = {e.status.code for e in entries}
        status = build_status(Code.MULTIPLE_RESULTS) if len(codes) > 1 else build_status(codes.pop())
        return spb.SendMessageResponse(status=status, entries=entries)
