"""SendMessageProcessor: SEND_MESSAGE (10), SEND_MESSAGE_V2 (310) and CONSUMER_SEND_MSG_BACK (36).

RocketMQ ``broker/src/main/java/org/apache/rocketmq/broker/processor/SendMessageProcessor.java`` and
``AbstractSendMessageProcessor.java`` (``handlePutMessageResult`` for the status mapping; the
fields are what the C++ client, PyPI ``rocketmq`` 0.4.4, sends and reads back). In order:

1. ``rejectRequest``: a SLAVE (without slave-acting-master) refuses every send at the remoting
   layer with SYSTEM_BUSY (2) ``[REJECTREQUEST]system busy, start flow control for a while``;
2. the header (V1, or V2's one-letter fields; numbers may arrive as JSON numbers);
3. ``buildMsgContext`` adds ``MSG_REGION`` (regionId, ``DefaultRegion``) and ``TRACE_ON``
   (``true``) to the properties, and the reserved ``POP_CK`` property is dropped;
4. ``preSend``/``msgCheck``: the response starts with ext fields MSG_REGION and TRACE_ON;
   no write permission on the broker for an ordered topic -> NO_PERMISSION; an invalid topic name ->
   INVALID_PARAMETER (29) with TopicValidator's remark; a system topic
   clients may not send to -> NO_PERMISSION; an unknown topic is created from ``defaultTopic``
   (TBW102, ``createTopicInSendMessageMethod``), else TOPIC_NOT_EXIST (17); a queueId beyond
   ``max(writeQueueNums, readQueueNums)`` -> INVALID_PARAMETER;
5. the message: body, flag, properties from the wire, ``UNIQ_KEY`` created when missing, ``CLUSTER``
   = brokerClusterName, born host = the connection's peer, store host = brokerIP1:listenPort,
   born timestamp and reconsume times from the header; retry topics (``%RETRY%group``) check the
   group and go to ``%DLQ%group`` past maxReconsumeTimes; then the properties string is written
   once, in the order Java's ``HashMap(128)`` iterates the final properties (what a Java broker
   stores, byte for byte);
6. the store's put hook (``rmqlab.broker.util.hook_utils``) parks a message with a delay level in
   SCHEDULE_TOPIC_XXXX (``rmqlab.broker.schedule.deliver_delayed_message_timer_task``) and a timer
   message (``TIMER_DELIVER_MS`` / ``TIMER_DELAY_SEC`` / ``TIMER_DELAY_MS``) in rmq_sys_wheel_timer
   (``rmqlab.store.timer``; a bad or too distant time -> MESSAGE_ILLEGAL (13) ``timer message
   illegal, ...``, timerWheelEnable=false -> SYSTEM_ERROR), then the store's put, then the
   status mapping of ``handlePutMessageResult``: PUT_OK -> SUCCESS with
   ext ``msgId`` (offset message id), ``queueId``, ``queueOffset``, ``transactionId`` (UNIQ_KEY), all
   strings on the wire; FLUSH_DISK_TIMEOUT -> 10, FLUSH_SLAVE_TIMEOUT -> 12, SLAVE_NOT_AVAILABLE -> 11
   (stored: they carry the same ext fields); IN_SYNC_REPLICAS_NOT_ENOUGH -> 1 ``in-sync replicas not
   enough``; MESSAGE_ILLEGAL / PROPERTIES_SIZE_EXCEEDED -> 13 with RocketMQ's remark naming the
   limits; SERVICE_NOT_AVAILABLE -> 14; OS_PAGE_CACHE_BUSY -> 2.

CONSUMER_SEND_MSG_BACK (``AbstractSendMessageProcessor.consumerSendMsgBack``, RocketMQ 5; 4.9 differs
only in keeping the original store host): a push consumer could not consume a message and hands it
back by its commit-log offset. In order:

1. the group's config (auto-created like a pull's), else SUBSCRIPTION_GROUP_NOT_EXIST (26)
   ``subscription group not exist, <group> <FAQ>``; a broker without write permission ->
   NO_PERMISSION; a group with ``retryQueueNums`` <= 0 -> SUCCESS and the message is dropped;
2. ``%RETRY%<group>`` is created on demand (``createTopicInSendMessageBackMethod``, retryQueueNums
   queues, READ|WRITE) and a random queue of it chosen; a retry topic without write permission ->
   NO_PERMISSION;
3. the original message is read back from the commit log (``lookMessageByOffset``); nothing
   there -> SYSTEM_ERROR ``look message by offset failed, <offset>``;
4. ``RETRY_TOPIC`` = its topic unless set already (a retry of a retry keeps the first topic);
   ``WAIT`` = false; maxReconsumeTimes from the header (client version >= V3_4_9) or the group's
   ``retryMaxTimes``; a message already reconsumed that many times, or a negative delay level,
   goes to ``%DLQ%<group>`` (1 queue, READ|WRITE, ``DELAY`` = 0), any other to the retry topic with
   ``DELAY`` = the header's level, or 3 + reconsumeTimes when it is 0;
5. a new message: body, flag, properties, sysFlag, born timestamp and host of the original, this
   broker as store host, reconsumeTimes + 1, ``ORIGIN_MESSAGE_ID`` = the first message's offset
   message id; stored through the same put path as a send (so a delay level parks it in
   SCHEDULE_TOPIC_XXXX, from where the schedule service brings it to ``%RETRY%<group>`` when due);
6. PUT_OK -> SUCCESS; any other put status -> SYSTEM_ERROR with the status name as remark (even a
   FLUSH_SLAVE_TIMEOUT, whose message is stored: RocketMQ's behaviour).

A message sent to the DLQ is also a ``log`` trace event of logger ``RocketmqDLQ`` (RocketMQ's
DLQ_LOG line). Not implemented: consume-message hooks, metrics and the send-back statistics.

A transaction half message (``TRAN_MSG=true``) is refused with NO_PERMISSION ``sending transaction
message is forbidden`` when ``rejectTransactionMessage=true``; else it is stored as a half message
(``TransactionalMessageServiceImpl.asyncPrepareMessage``, ``rmqlab.broker.transaction``), and the
answer carries the half message's offsets and its UNIQ_KEY as ``transactionId``.

Not implemented (answered as RocketMQ answers a broker configured without them):

* batch sends (the ``batch`` header field; SEND_BATCH_MESSAGE is unregistered, hence 3):
  SYSTEM_ERROR naming the limitation;
* static topics (RIP-21) and send hooks.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from rmqlab.broker.broker_util import wait_completable
from rmqlab.broker.util.hook_utils import handle_schedule_message
from rmqlab.common.constant.perm_name import PermName
from rmqlab.common.java_compat import java_hash_map_order
from rmqlab.common.message.message import MessageExtBrokerInner
from rmqlab.common.message.message import MessageExt
from rmqlab.common.message.message_const import MessageConst
from rmqlab.common.message.message_decoder import PROPERTIES_MAP_CAPACITY, properties_to_java_string
from rmqlab.common.message.message_decoder import string_to_message_properties
from rmqlab.common.message.message_decoder import decode
from rmqlab.common.message.message_sys_flag import MessageSysFlag
from rmqlab.common.mix_all import DLQ_GROUP_TOPIC_PREFIX, RETRY_GROUP_TOPIC_PREFIX
from rmqlab.common.topic.topic_validator import TopicValidator
from rmqlab.common.topic_config import TopicConfig, TopicFilterType
from rmqlab.config.broker import BrokerRole
from rmqlab.remoting.protocol.header.broker.consumer_send_msg_back import ConsumerSendMsgBackRequestHeader
from rmqlab.remoting.protocol.header.broker.send_message import SendMessageRequestHeader
from rmqlab.remoting.remoting_command import RemotingCommand
from rmqlab.remoting.remoting_helper import string_to_address
from rmqlab.remoting.request_code import RequestCode
from rmqlab.remoting.response_code import ResponseCode
from rmqlab.store.put_message_result import PutMessageResult, PutMessageStatus

if TYPE_CHECKING:
    from rmqlab.broker.broker_controller import BrokerController
    from rmqlab.remoting.remoting_channel import RemotingChannel

log = logging.getLogger("rmqlab.broker")

# MixAll.DEFAULT_TRACE_REGION_ID / BrokerConfig.regionId and traceOn defaults (not configurable in
# rmqlab: the loader reports both keys as not implemented).
DEFAULT_REGION_ID = "DefaultRegion"
TRACE_ON = True
DLQ_NUMS_PER_GROUP = 1
FAQ_URL = "https://rocketmq.apache.org/docs/bestPractice/06FAQ"
# MQVersion.Version.V3_4_9.ordinal(): from this client version on the header's maxReconsumeTimes counts.
V3_4_9 = 121
REJECT_REQUEST_REMARK = "[REJECTREQUEST]system busy, start flow control for a while"
DLQ_LOGGER_NAME = "RocketmqDLQ"  # LoggerName.DLQ_LOGGER_NAME
_CHECKED_TOPICS_MAX = 4096  # names remembered per cache (topics passing msgCheck, producers' addresses)


def suggest_todo(url: str) -> str:
    """``FAQUrl.suggestTodo``."""
    return f"\nSee {url} for further details."


def reject_request_response() -> RemotingCommand:
    """What ``NettyRemotingAbstract`` answers when a processor's ``rejectRequest()`` is true."""
    return RemotingCommand.create_response_command(ResponseCode.SYSTEM_BUSY, REJECT_REQUEST_REMARK)


def topic_config_to_string(tc: TopicConfig) -> str:
    """``TopicConfig.toString`` (the attributes as Java's ``Map.toString``)."""
    attrs = "{" + ", ".join(f"{k}={v}" for k, v in tc.attributes.items()) + "}"
    return (f"TopicConfig [topicName={tc.topic_name}, readQueueNums={tc.read_queue_nums}, "
            f"writeQueueNums={tc.write_queue_nums}, perm={PermName.perm2string(tc.perm)}, "
            f"topicFilterType={tc.topic_filter_type.value}, topicSysFlag={tc.topic_sys_flag}, "
            f"order={'true' if tc.order else 'false'}, attributes={attrs}]")


def look_message_by_offset(store, commit_log_offset: int) -> MessageExt | None:
    """``DefaultMessageStore.lookMessageByOffset``: the message whose record starts at
    ``commit_log_offset`` (its TOTALSIZE read first), or None when nothing readable is there.

    Deviation in placement: RocketMQ has it on the store; it lives here beside its only caller so
    the store keeps its interface. Like Java's ``MessageDecoder.decode(buf, true, false)`` it does
    not check the body CRC, and anything that does not decode (an offset in the middle of a
    record, a BLANK file tail) is None, as Java's decoder swallows the exception and returns null.
    """
    head = store.commit_log.get_message(commit_log_offset, 4)
    if len(head) != 4:
        return None
    size = int.from_bytes(head, "big", signed=True)
    if size <= 0:
        return None
    data = store.commit_log.get_message(commit_log_offset, size)
    if len(data) != size:
        return None
    try:
        return decode(data, check_crc=False)
    except (ValueError, IndexError):  # MessageFormatError is a ValueError; struct.error too
        return None


class SendMessageProcessor:
    def __init__(self, broker: BrokerController):
        self.broker = broker
        # Topic names that passed msg_check's name checks (TopicValidator's, pure functions of
        # the name), so a send does not validate its topic's characters again.
        self._checked_topics: set[str] = set()
        self._born_hosts: dict[str, tuple[str, int]] = {}  # string_to_address of producers' addresses

    # -- entry ---------------------------------------------------------------------------------
    def reject_request(self) -> bool:
        return (not self.broker.broker_config.enableSlaveActingMaster
                and self.broker.message_store_config.brokerRole == BrokerRole.SLAVE)

    async def process(self, channel: RemotingChannel, request: RemotingCommand) -> RemotingCommand | None:
        if self.reject_request():
            return reject_request_response()
        if request.code == RequestCode.CONSUMER_SEND_MSG_BACK:
            return await self.consumer_send_msg_back(channel, request)
        header = SendMessageRequestHeader.parse_request_header(request)
        if header.is_batch():
            return RemotingCommand.create_response_command(
                ResponseCode.SYSTEM_ERROR, "batch messages are not supported by rmqlab's broker")
        return await self.send_message(channel, request, header, self.build_msg_properties(header.properties))

    @staticmethod
    def build_msg_properties(properties: str | None) -> dict[str, str]:
        """The message's properties as ``sendMessage`` reads them: ``buildMsgContext`` (always run,
        hooks or not) adds the region and trace switch and writes the properties string back into
        the header (a HashMap(128)'s order), ``clearReservedProperties`` deletes POP_CK from that
        string, and ``sendMessage`` parses it again.

        Deviation in the steps, not the result: parsed once. Parsing that rewritten string gives
        these same entries in that same order (every parsed name and value is non-empty and
        free of \x02, a name free of \x01, so each entry reads back as written), POP_CK left
        out; ``header.properties`` is not rewritten, nothing reads it afterwards."""
        props = string_to_message_properties(properties)
        props[MessageConst.PROPERTY_MSG_REGION] = DEFAULT_REGION_ID
        props[MessageConst.PROPERTY_TRACE_SWITCH] = "true" if TRACE_ON else "false"
        ordered = {name: props[name] for name in java_hash_map_order(props, PROPERTIES_MAP_CAPACITY)}
        ordered.pop(MessageConst.PROPERTY_POP_CK, None)
        return ordered

    # -- preSend / msgCheck --------------------------------------------------------------------
    def pre_send(self, channel: RemotingChannel, header: SendMessageRequestHeader) -> RemotingCommand:
        response = RemotingCommand.create_response_command(-1, ext_fields={
            MessageConst.PROPERTY_MSG_REGION: DEFAULT_REGION_ID,
            MessageConst.PROPERTY_TRACE_SWITCH: "true" if TRACE_ON else "false"})
        self.msg_check(channel, header, response)
        return response

    def msg_check(self, channel: RemotingChannel, header: SendMessageRequestHeader,
                  response: RemotingCommand) -> RemotingCommand:
        broker = self.broker
        tcm = broker.topic_config_manager
        if not PermName.is_writeable(broker.broker_config.brokerPermission) and tcm.is_order_topic(header.topic):
            response.code = ResponseCode.NO_PERMISSION
            response.remark = f"the broker[{broker.broker_config.brokerIP1}] sending message is forbidden"
            return response
        if header.topic not in self._checked_topics:
            result = TopicValidator.validate_topic(header.topic)
            if not result.valid:
                response.code = ResponseCode.INVALID_PARAMETER
                response.remark = result.remark
                return response
            if TopicValidator.is_not_allowed_send_topic(header.topic):
                response.code = ResponseCode.NO_PERMISSION
                response.remark = f"Sending message to topic[{header.topic}] is forbidden."
                return response
            if len(self._checked_topics) >= _CHECKED_TOPICS_MAX:
                self._checked_topics.clear()
            self._checked_topics.add(header.topic)
        topic_config = tcm.select_topic_config(header.topic)
        if topic_config is None:
            topic_sys_flag = 0
            if header.is_unit_mode():
                # TopicSysFlag.buildSysFlag(unit, hasUnitSub): FLAG_UNIT = 1, FLAG_UNIT_SUB = 2
                topic_sys_flag = 2 if header.topic.startswith(RETRY_GROUP_TOPIC_PREFIX) else 1
            log.warning("the topic %s not exist, producer: %s", header.topic, channel.remote_addr)
            topic_config = tcm.create_topic_in_send_message_method(
                header.topic, header.default_topic, channel.remote_addr, header.default_topic_queue_nums, topic_sys_flag,
                auto_create_topic_enable=broker.broker_config.autoCreateTopicEnable)
            if topic_config is None and header.topic.startswith(RETRY_GROUP_TOPIC_PREFIX):
                topic_config = tcm.create_topic_in_send_message_back_method(
                    header.topic, 1, PermName.PERM_WRITE | PermName.PERM_READ, topic_sys_flag)
            if topic_config is None:
                response.code = ResponseCode.TOPIC_NOT_EXIST
                response.remark = f"topic[{header.topic}] not exist, apply first please!{suggest_todo(FAQ_URL)}"
                return response
        queue_id = header.queue_id
        id_valid = max(topic_config.write_queue_nums, topic_config.read_queue_nums)
        if queue_id >= id_valid:
            error = (f"request queueId[{queue_id}] is illegal, {topic_config_to_string(topic_config)} "
                     f"Producer: {channel.remote_addr}")
            log.warning(error)
            response.code = ResponseCode.INVALID_PARAMETER
            response.remark = error
        return response

    # -- sendMessage ---------------------------------------------------------------------------
    async def send_message(self, channel: RemotingChannel, request: RemotingCommand,
                           header: SendMessageRequestHeader,
                           properties: dict[str, str] | None = None) -> RemotingCommand:
        """``sendMessage``. ``properties``: what :meth:`build_msg_properties` made of the header's
        (parsed from ``header.properties`` when not given); this message takes them over."""
        broker = self.broker
        response = self.pre_send(channel, header)
        if response.code != -1:
            return response
        topic_config = broker.topic_config_manager.select_topic_config(header.topic)
        queue_id = header.queue_id
        if queue_id < 0:
            queue_id = broker.node.random.randrange(99999999) % topic_config.write_queue_nums
        msg = MessageExtBrokerInner(topic=header.topic, body=request.body or b"")
        msg.queue_id = queue_id
        ori_props = string_to_message_properties(header.properties) if properties is None else properties
        if not self.handle_retry_and_dlq(header, response, request, msg, topic_config, ori_props):
            return response
        msg.flag = header.flag
        uniq_key = ori_props.get(MessageConst.PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX)
        if not uniq_key:
            uniq_key = broker.message_client_id_setter.create_uniq_id()
            ori_props[MessageConst.PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX] = uniq_key
        if (topic_config.attributes.get("cleanup.policy") == "COMPACTION"
                and not (ori_props.get(MessageConst.PROPERTY_KEYS) or "").strip()):
            response.code = ResponseCode.MESSAGE_ILLEGAL
            response.remark = "Required message key is missing"
            return response
        msg.born_timestamp = header.born_timestamp
        born_host = self._born_hosts.get(channel.remote_addr)
        if born_host is None:
            born_host = string_to_address(channel.remote_addr)
            if len(self._born_hosts) >= _CHECKED_TOPICS_MAX:
                self._born_hosts.clear()
            self._born_hosts[channel.remote_addr] = born_host
        msg.born_host = born_host
        msg.store_host = broker.store_host
        msg.reconsume_times = header.reconsume_times or 0
        ori_props[MessageConst.PROPERTY_CLUSTER] = broker.broker_config.brokerClusterName
        msg.properties = ori_props
        msg.properties_string = properties_to_java_string(ori_props)
        tran_flag = ori_props.get(MessageConst.PROPERTY_TRANSACTION_PREPARED)
        if (tran_flag is not None and tran_flag.lower() == "true"
                and not (msg.reconsume_times > 0 and msg.delay_time_level > 0)):
            if broker.broker_config.rejectTransactionMessage:
                response.code = ResponseCode.NO_PERMISSION
                response.remark = (f"the broker[{broker.broker_config.brokerIP1}] sending transaction message is "
                                   "forbidden")
                return response
            # A half message (rmqlab.broker.transaction): stored in RMQ_SYS_TRANS_HALF_TOPIC queue 0.
            put_result = self.check_store_status()
            if put_result is None:
                put_result = await broker.transactional_message_service.prepare_message(msg)
                broker.transactional_message_check_service.notify_half_message()
            return self.handle_put_message_result(put_result, response, msg, queue_id)
        put_result = self.check_store_status()
        if put_result is None:
            # The store's put hook (HookUtils.handleScheduleMessage): delay levels wait in
            # SCHEDULE_TOPIC_XXXX, timer messages in rmq_sys_wheel_timer.
            put_result = handle_schedule_message(broker, msg)
        if put_result is None:
            put_result = await wait_completable(broker.message_store.async_put_message(msg))
        return self.handle_put_message_result(put_result, response, msg, queue_id)

    # -- consumerSendMsgBack ---------------------------------------------------------------------
    async def consumer_send_msg_back(self, channel: RemotingChannel, request: RemotingCommand) -> RemotingCommand:
        """``consumerSendMsgBack`` (see the module docstring)."""
        broker = self.broker
        bc = broker.broker_config
        response = RemotingCommand.create_response_command(ResponseCode.SYSTEM_ERROR, None)
        header = ConsumerSendMsgBackRequestHeader.decode(request)

        def answer(code: int, remark: str | None) -> RemotingCommand:
            response.code, response.remark = code, remark
            return response

        # peekMasterBroker: only the group's master (brokerId 0) takes it back. A SLAVE is refused
        # by reject_request already, unless slave acting master is on: then it answers here.
        if broker.peek_master_broker() is None:
            return answer(ResponseCode.SYSTEM_ERROR, f"no master available along with {bc.brokerIP1}")
        group_config = broker.subscription_group_manager.find_subscription_group_config(header.group)
        if group_config is None:
            return answer(ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST,
                          f"subscription group not exist, {header.group} {suggest_todo(FAQ_URL)}")
        if not PermName.is_writeable(bc.brokerPermission):
            return answer(ResponseCode.NO_PERMISSION, f"the broker[{bc.brokerIP1}] sending message is forbidden")
        if group_config.retry_queue_nums <= 0:
            # RocketMQ's answer: the consumer counts the message as handled; it is not retried.
            return answer(ResponseCode.SUCCESS, None)

        tcm = broker.topic_config_manager
        new_topic = RETRY_GROUP_TOPIC_PREFIX + header.group
        queue_id = broker.node.random.randrange(group_config.retry_queue_nums)
        topic_sys_flag = 2 if header.is_unit_mode() else 0  # TopicSysFlag.buildSysFlag(false, true)
        topic_config = tcm.create_topic_in_send_message_back_method(
            new_topic, group_config.retry_queue_nums, PermName.PERM_WRITE | PermName.PERM_READ, topic_sys_flag)
        if not PermName.is_writeable(topic_config.perm):
            return answer(ResponseCode.NO_PERMISSION, f"the topic[{new_topic}] sending message is forbidden")

        msg_ext = look_message_by_offset(broker.message_store, header.offset)
        if msg_ext is None:
            return answer(ResponseCode.SYSTEM_ERROR, f"look message by offset failed, {header.offset}")
        # Java edits msgExt's property map and hands that same map to the new message.
        props = msg_ext.properties
        if props.get(MessageConst.PROPERTY_RETRY_TOPIC) is None:
            props[MessageConst.PROPERTY_RETRY_TOPIC] = msg_ext.topic
        props[MessageConst.PROPERTY_WAIT_STORE_MSG_OK] = "false"

        delay_level = header.delay_level
        max_reconsume_times = group_config.retry_max_times
        if request.version >= V3_4_9 and header.max_reconsume_times is not None:
            max_reconsume_times = header.max_reconsume_times
        is_dlq = msg_ext.reconsume_times >= max_reconsume_times or delay_level < 0
        if is_dlq:
            new_topic = DLQ_GROUP_TOPIC_PREFIX + header.group
            queue_id = broker.node.random.randrange(DLQ_NUMS_PER_GROUP)
            tcm.create_topic_in_send_message_back_method(new_topic, DLQ_NUMS_PER_GROUP,
                                                         PermName.PERM_WRITE | PermName.PERM_READ, 0)
            props[MessageConst.PROPERTY_DELAY_TIME_LEVEL] = "0"
        else:
            if delay_level == 0:
                delay_level = 3 + msg_ext.reconsume_times
            props[MessageConst.PROPERTY_DELAY_TIME_LEVEL] = str(delay_level)

        inner = MessageExtBrokerInner(topic=new_topic, body=msg_ext.body, flag=msg_ext.flag)
        inner.queue_id = queue_id
        inner.sys_flag = msg_ext.sys_flag
        inner.born_timestamp = msg_ext.born_timestamp
        inner.born_host = msg_ext.born_host
        inner.store_host = broker.store_host
        inner.reconsume_times = msg_ext.reconsume_times + 1
        # MessageAccessor.setOriginMessageId: the first message's offset message id, kept across
        # every later retry.
        origin_msg_id = props.get(MessageConst.PROPERTY_ORIGIN_MESSAGE_ID)
        props[MessageConst.PROPERTY_ORIGIN_MESSAGE_ID] = (origin_msg_id if origin_msg_id and origin_msg_id.strip()
                                                          else msg_ext.msg_id)
        inner.properties = props
        inner.properties_string = properties_to_java_string(props)

        put_result = self.check_store_status()
        if put_result is None:
            put_result = handle_schedule_message(broker, inner)
        if put_result is None:
            put_result = await wait_completable(broker.message_store.async_put_message(inner))
        if put_result is None:
            return answer(ResponseCode.SYSTEM_ERROR, "putMessageResult is null")
        status = put_result.put_message_status
        if status is not PutMessageStatus.PUT_OK:
            broker.broker_stats.on_put_failed()
            return answer(ResponseCode.SYSTEM_ERROR, status.name)
        broker.broker_stats.on_put(put_result.append_message_result.wrote_bytes)
        if is_dlq:
            owner = (request.ext_fields or {}).get("Commercial_Owner") or "null"  # BrokerStatsManager.COMMERCIAL_OWNER
            line = (f"send msg to DLQ {new_topic}, owner={owner}, "
                    f"originalTopic={header.origin_topic}, consumerId={header.group}, "
                    f"msgUniqKey={props.get(MessageConst.PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX)}, "
                    f"storeTimestamp={put_result.append_message_result.store_timestamp}")
            log.info(line)
            broker.node.trace("log", level="INFO", message=line, logger=DLQ_LOGGER_NAME)
        return answer(ResponseCode.SUCCESS, None)

    def handle_retry_and_dlq(self, header: SendMessageRequestHeader, response: RemotingCommand,
                             request: RemotingCommand, msg: MessageExtBrokerInner, topic_config: TopicConfig,
                             properties: dict[str, str]) -> bool:
        """``handleRetryAndDLQ``: a retry topic's message past maxReconsumeTimes, or of a group holding
        a live queue lock (RebalanceLockManager.isLockAllExpired), goes to the DLQ."""
        broker = self.broker
        new_topic = header.topic
        if new_topic.startswith(RETRY_GROUP_TOPIC_PREFIX):
            group = new_topic[len(RETRY_GROUP_TOPIC_PREFIX):]  # KeyBuilder.parseGroup
            group_config = broker.subscription_group_manager.find_subscription_group_config(group)
            if group_config is None:
                response.code = ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST
                response.remark = f"subscription group not exist, {group} {suggest_todo(FAQ_URL)}"
                return False
            max_reconsume_times = group_config.retry_max_times
            if request.version >= V3_4_9 and header.max_reconsume_times is not None:
                max_reconsume_times = header.max_reconsume_times
            reconsume_times = header.reconsume_times or 0
            # A group holding a live queue lock consumes orderly: its retries go to the DLQ at once.
            lock_held = not broker.admin_broker_processor.rebalance_lock_manager.is_lock_all_expired(group)
            if lock_held:
                log.info("Group has unexpired lock record, which show it is ordered message, send it to DLQ right "
                         "now group=%s, topic=%s, reconsumeTimes=%s, maxReconsumeTimes=%s.", group, new_topic,
                         reconsume_times, max_reconsume_times)
            if reconsume_times > max_reconsume_times or lock_held:
                properties[MessageConst.PROPERTY_DELAY_TIME_LEVEL] = "-1"
                new_topic = DLQ_GROUP_TOPIC_PREFIX + group
                queue_id = broker.node.random.randrange(99999999) % DLQ_NUMS_PER_GROUP
                topic_config = broker.topic_config_manager.create_topic_in_send_message_back_method(
                    new_topic, DLQ_NUMS_PER_GROUP, PermName.PERM_WRITE | PermName.PERM_READ, 0)
                msg.topic = new_topic
                msg.queue_id = queue_id
        sys_flag = header.sys_flag
        if topic_config.topic_filter_type is TopicFilterType.MULTI_TAG:
            sys_flag |= MessageSysFlag.MULTI_TAGS_FLAG
        msg.sys_flag = sys_flag
        return True

    def check_store_status(self) -> PutMessageResult | None:
        """The refusals of ``DefaultMessageStore.checkStoreStatus`` the broker can see: a stopped
        store and a SLAVE store take no put (SERVICE_NOT_AVAILABLE)."""
        store = self.broker.message_store
        if not store.running:
            log.warning("message store has shutdown, so putMessage is forbidden")
            return PutMessageResult(PutMessageStatus.SERVICE_NOT_AVAILABLE)
        if self.broker.message_store_config.brokerRole == BrokerRole.SLAVE:
            log.warning("broke role is slave, so putMessage is forbidden")
            return PutMessageResult(PutMessageStatus.SERVICE_NOT_AVAILABLE)
        return None

    def handle_put_message_result(self, put_result: PutMessageResult, response: RemotingCommand,
                                  msg: MessageExtBrokerInner, queue_id: int) -> RemotingCommand:
        """``handlePutMessageResult`` (``SendMessageProcessor.java``)."""
        cfg = self.broker.message_store_config
        status = put_result.put_message_status
        S = PutMessageStatus
        send_ok = False
        if status is S.PUT_OK:
            send_ok, response.code = True, ResponseCode.SUCCESS
        elif status is S.FLUSH_DISK_TIMEOUT:
            send_ok, response.code = True, ResponseCode.FLUSH_DISK_TIMEOUT
        elif status is S.FLUSH_SLAVE_TIMEOUT:
            send_ok, response.code = True, ResponseCode.FLUSH_SLAVE_TIMEOUT
        elif status is S.SLAVE_NOT_AVAILABLE:
            send_ok, response.code = True, ResponseCode.SLAVE_NOT_AVAILABLE
        elif status is S.IN_SYNC_REPLICAS_NOT_ENOUGH:
            response.code, response.remark = ResponseCode.SYSTEM_ERROR, "in-sync replicas not enough"
        elif status is S.CREATE_MAPPED_FILE_FAILED:
            response.code = ResponseCode.SYSTEM_ERROR
            response.remark = "create mapped file failed, server is busy or broken."
        elif status in (S.MESSAGE_ILLEGAL, S.PROPERTIES_SIZE_EXCEEDED):
            response.code = ResponseCode.MESSAGE_ILLEGAL
            response.remark = (f"the message is illegal, maybe msg body or properties length not matched. msg body "
                               f"length limit {cfg.maxMessageSize}B, msg properties length limit 32KB.")
        elif status is S.SERVICE_NOT_AVAILABLE:
            response.code = ResponseCode.SERVICE_NOT_AVAILABLE
            # diskUtil(): rmqlab does not measure the disk (a simulator run must not depend on the
            # machine), so it prints what RocketMQ prints for a path it cannot measure.
            response.remark = ("service not available now. It may be caused by one of the following reasons: "
                               "the broker's disk is full [CL: -1.00 CQ: -1.00 INDEX: -1.00], messages are put to "
                               "the slave, message store has been shut down, etc.")
        elif status is S.WHEEL_TIMER_MSG_ILLEGAL:
            response.code = ResponseCode.MESSAGE_ILLEGAL
            response.remark = (f"timer message illegal, the delay time should not be bigger than the max delay "
                               f"{cfg.timerMaxDelaySec * 1000}ms; or if set del msg, the delay time should be "
                               "bigger than the current time")
        elif status is S.WHEEL_TIMER_FLOW_CONTROL:
            # Never produced by rmqlab (no flow control); RocketMQ's remark with its default limit.
            limit = 2**31 - 1  # timerCongestNumEachSlot
            response.code = ResponseCode.SYSTEM_ERROR
            response.remark = (f"timer message is under flow control, max num limit is {limit * 2} or the current "
                               f"value is greater than {limit} and less than {limit * 2}, trigger random flow "
                               "control")
        elif status is S.WHEEL_TIMER_NOT_ENABLE:
            response.code = ResponseCode.SYSTEM_ERROR
            response.remark = ("accurate timer message is not enabled, timerWheelEnable is "
                               f"{'true' if cfg.timerWheelEnable else 'false'}")
        elif status is S.OS_PAGE_CACHE_BUSY:
            response.code = ResponseCode.SYSTEM_BUSY
            response.remark = "[PC_SYNCHRONIZED]broker busy, start flow control for a while"
        elif status is S.LMQ_CONSUME_QUEUE_NUM_EXCEEDED:
            response.code = ResponseCode.SYSTEM_ERROR
            response.remark = ("[LMQ_CONSUME_QUEUE_NUM_EXCEEDED]broker config enableLmq and enableMultiDispatch, lmq "
                               "consumeQueue num exceed maxLmqConsumeQueueNum config num, default limit 2w.")
        elif status is S.UNKNOWN_ERROR:
            response.code, response.remark = ResponseCode.SYSTEM_ERROR, "UNKNOWN_ERROR"
        else:
            response.code, response.remark = ResponseCode.SYSTEM_ERROR, "UNKNOWN_ERROR DEFAULT"
        stats = self.broker.broker_stats
        if send_ok:
            append = put_result.append_message_result
            stats.on_put(append.wrote_bytes)
            response.remark = None
            # write_header(response, SendMessageResponseHeader(...)) inline: its non-None fields
            # added to the extFields preSend started (MSG_REGION, TRACE_ON), same keys and values.
            if response.ext_fields is None:
                response.ext_fields = {}
            ext = response.ext_fields
            ext["msgId"] = append.msg_id
            ext["queueId"] = queue_id
            ext["queueOffset"] = append.logics_offset
            transaction_id = msg.properties.get(MessageConst.PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX)
            if transaction_id is not None:
                ext["transactionId"] = transaction_id
        else:
            stats.on_put_failed()
        return response
