"""PopMessageProcessor: POP_MESSAGE (200050), RocketMQ 5's server-side consumption.

RocketMQ ``broker/src/main/java/org/apache/rocketmq/broker/processor/PopMessageProcessor.java`` (with
``PopBufferMergeService.addCkJustOffset``, the path taken with ``enablePopBufferMerge=false``, the
default). A pop asks for up to ``maxMsgNums`` (at most 32) messages of a topic for a consumer
group; the broker - not the client - decides which, and keeps track of them:

1. checks, in RocketMQ's order: ``bornTime`` (filled with the broker's clock when missing or 0)
   more than 500 ms behind ``now - pollTime`` -> POLLING_TIMEOUT; broker not readable ->
   NO_PERMISSION; ``maxMsgNums`` > 32 -> INVALID_PARAMETER; unknown topic -> TOPIC_NOT_EXIST; topic
   not readable -> NO_PERMISSION; ``queueId`` >= readQueueNums -> INVALID_PARAMETER; unknown group
   (auto-created by default) -> SUBSCRIPTION_GROUP_NOT_EXIST; group not allowed to consume ->
   NO_PERMISSION; a filter expression that does not parse -> SUBSCRIPTION_PARSE_FAILED. The group
   is registered as a POP, CLUSTERING consumer of the topic and of its pop retry topic;
2. which queues: ``queueId`` >= 0 that queue, -1 every queue of the topic starting at a random one
   (``random.nextInt(100) % readQueueNums``). The pop retry topic ``%RETRY%<group>_<topic>`` is read
   first for ``popFromRetryProbability`` (20) % of the requests, and for every other request after
   the topic when the topic's queues did not fill the batch (never for an orderly pop);
3. per queue, under the queue's lock (QueueLockManager; a locked queue is skipped): the start
   offset is the group's consumer offset, or for a group without one ``initMode`` MIN -> the queue's
   min offset (always for a retry topic), MAX -> 0 if the queue's first message is still in memory
   (``initPopOffsetByCheckMsgInMem``), else max - 1; an admin reset offset wins. The tag filter is
   applied on the consume queue. A store answer of OFFSET_TOO_SMALL / OFFSET_OVERFLOW_BADLY /
   OFFSET_FOUND_NULL moves the offset to the store's next offset and reads again;
4. messages found (not orderly): a :class:`PopCheckPoint` (start offset, the messages' offsets as
   differences, popTime, invisibleTime, group, topic, queue, broker name) is written to revive
   queue ``ckMessageNumber++ % reviveQueueNum`` of ``rmq_sys_REVIVE_LOG_<clusterName>`` (tag ``ck``,
   ``TIMER_DELIVER_MS`` = revive time - 1 s, UNIQ_KEY ``genCkUniqueId``), and once it is stored the
   group's consumer offset moves past the messages read. A checkpoint that could not be stored
   returns nothing of that queue and leaves the offset. Nothing matched the filter: the offset
   moves past what was filtered out;
   orderly: no checkpoint; ConsumerOrderInfoManager remembers the batch, the consumer offset stays
   at its start, a queue with an unacknowledged batch still invisible is skipped;
5. the answer: messages found -> SUCCESS (remark FOUND), body = the stored messages. A message of the
   pop retry topic is re-encoded with the topic the client asked for and its ``POP_CK`` handle
   (``popResponseReturnActualRetryTopic=false``, the default); others go out as stored, the client
   builds their handles from the header. Header: ``popTime``, ``invisibleTime``, ``reviveQid``,
   ``restNum`` (what is left behind in the queues looked at), ``startOffsetInfo``, ``msgOffsetInfo``
   and, orderly, ``orderCountInfo``. Nothing found: with ``pollTime`` > 0 the request is held
   (PopLongPollingService; POLLING_FULL when too many are); when it times out, or without
   pollTime, POLLING_TIMEOUT (remark NO_MESSAGE_IN_QUEUE).

Deviations: RocketMQ refuses pops when ``timerWheelEnable`` is false (its revive depends on the
timer wheel); rmqlab's revive service does not (see rmqlab.broker.pop.pop_revive_service), so pops
are served regardless. Not implemented: the KV-store pop service (``popConsumerKVServiceEnable``),
buffer merge (``enablePopBufferMerge``), the in-flight threshold (``enablePopMessageThreshold``),
v2 retry topics (``enableRetryTopicV2``), SQL92 filters (answered as the pull processor answers
them), LMQ, metrics and PEEK/NOTIFICATION/POLLING_INFO.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from rmqlab.broker.broker_util import answer_held_request
from rmqlab.broker.filter.expression_message_filter import ExpressionMessageFilter
from rmqlab.broker.longpolling.pop_long_polling_service import PollingHeader, PollingResult, PopLongPollingService
from rmqlab.broker.failover.escape_bridge import is_put_ok
from rmqlab.broker.pop.queue_lock_manager import QueueLockManager
from rmqlab.broker.processor.send_message_processor import FAQ_URL, suggest_todo
from rmqlab.common import pop_ack_constants as pac
from rmqlab.common.constant.perm_name import PermName
from rmqlab.common.key_builder import POP_ORDER_REVIVE_QUEUE, RETRY_GROUP_TOPIC_PREFIX, build_pop_retry_topic
from rmqlab.common.message.message import MessageExtBrokerInner
from rmqlab.common.message.message_const import MessageConst
from rmqlab.common.message.message_decoder import properties_to_java_string
from rmqlab.common.message.message_decoder import decode
from rmqlab.remoting.protocol.header import extra_info_util as eiu
from rmqlab.remoting.protocol.header.broker.header_util import write_header
from rmqlab.remoting.protocol.header.broker.heartbeat import (SUB_ALL, ConsumeType, ExpressionType, MessageModel,
                                                              build_subscription_data)
from rmqlab.remoting.protocol.header.broker.pop_message import (ConsumeInitMode, PopMessageRequestHeader,
                                                                PopMessageResponseHeader)
from rmqlab.remoting.remoting_command import RemotingCommand
from rmqlab.remoting.response_code import ResponseCode
from rmqlab.store.get_message_result import GetMessageStatus
from rmqlab.store.message_ext_encoder import MessageExtEncoder
from rmqlab.store.pop.pop_check_point import PopCheckPoint

if TYPE_CHECKING:
    from rmqlab.broker.broker_controller import BrokerController
    from rmqlab.remoting.remoting_channel import RemotingChannel

log = logging.getLogger("RocketmqPop")  # LoggerName.ROCKETMQ_POP_LOGGER_NAME

BORN_TIME = "bornTime"
MAX_MSG_NUMS = 32
# Java's HashMap(): the properties map of a MessageExtBrokerInner the broker builds itself.
NEW_MESSAGE_MAP_CAPACITY = 16

_RESTART_AT_STORE_OFFSET = (GetMessageStatus.OFFSET_TOO_SMALL, GetMessageStatus.OFFSET_OVERFLOW_BADLY,
                            GetMessageStatus.OFFSET_FOUND_NULL)
_FILTERED_OR_GONE = (GetMessageStatus.NO_MATCHED_MESSAGE, GetMessageStatus.OFFSET_FOUND_NULL,
                     GetMessageStatus.MESSAGE_WAS_REMOVING)


def gen_ck_unique_id(ck: PopCheckPoint) -> str:
    """``genCkUniqueId``: the UNIQ_KEY of a checkpoint message."""
    s = pac.SPLIT
    return f"{ck.topic}{s}{ck.queue_id}{s}{ck.start_offset}{s}{ck.cid}{s}{ck.pop_time}{s}{ck.broker_name}{s}{pac.CK_TAG}"


def gen_ack_unique_id(ack) -> str:
    """``genAckUniqueId``: the UNIQ_KEY of an ack message."""
    s = pac.SPLIT
    return (f"{ack.topic}{s}{ack.queue_id}{s}{ack.ack_offset}{s}{ack.consumer_group}{s}{ack.pop_time}{s}"
            f"{ack.broker_name}{s}{pac.ACK_TAG}")


def build_revive_message(broker: BrokerController, revive_topic: str, body: bytes, revive_qid: int, tag: str,
                         deliver_time_ms: int, uniq_key: str) -> MessageExtBrokerInner:
    """A checkpoint or ack message for the revive topic, as ``buildCkMsg`` / ``appendAck`` build it:
    tags, ``TIMER_DELIVER_MS`` (setDeliverTimeMs) and UNIQ_KEY, in a new HashMap's order."""
    now = broker.node.now_ms()
    msg = MessageExtBrokerInner(topic=revive_topic, body=body)
    msg.queue_id = revive_qid
    props = {MessageConst.PROPERTY_TAGS: tag, MessageConst.PROPERTY_TIMER_DELIVER_MS: str(deliver_time_ms),
             MessageConst.PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX: uniq_key}
    msg.properties = props
    msg.properties_string = properties_to_java_string(props, NEW_MESSAGE_MAP_CAPACITY)
    msg.born_timestamp = now
    msg.born_host = broker.store_host
    msg.store_host = broker.store_host
    return msg


class _PopContext:
    """What one pop request accumulates across the queues it reads (Java passes these around)."""

    def __init__(self, header: PopMessageRequestHeader, channel: RemotingChannel, pop_time: int, revive_qid: int,
                 message_filter: ExpressionMessageFilter):
        self.header = header
        self.channel = channel
        self.pop_time = pop_time
        self.revive_qid = revive_qid
        self.message_filter = message_filter
        self.buffers: list[bytes] = []
        self.start_offset_info: list[str] = []
        self.msg_offset_info: list[str] = []
        self.order_count_info: list[str] | None = [] if header.is_order() else None

    @property
    def client_address(self) -> str:
        return self.channel.remote_addr


class PopMessageProcessor:
    def __init__(self, broker: BrokerController):
        self.broker = broker
        self.revive_topic = pac.build_cluster_revive_topic(broker.broker_config.brokerClusterName)
        self.pop_long_polling_service = PopLongPollingService(broker, self, False)
        self.queue_lock_manager = QueueLockManager(broker.node.now_ms)
        self.ck_message_number = 0
        self._encoder = MessageExtEncoder(broker.message_store_config.maxMessageSize)

    def reject_request(self) -> bool:
        return False

    def shutdown(self) -> None:
        self.pop_long_polling_service.shutdown()

    async def process(self, channel: RemotingChannel, request: RemotingCommand) -> RemotingCommand | None:
        return await self.process_request(channel, request)

    def execute_request_when_wakeup(self, channel: RemotingChannel, request: RemotingCommand) -> None:
        """PopLongPollingService.wakeUp: run a held request again and answer it."""
        answer_held_request(self.broker, channel, request, lambda: self.process_request(channel, request), "pop-wakeup")

    # -- notifications ------------------------------------------------------------------------
    def notify_message_arriving(self, topic: str, queue_id: int, cid: str) -> None:
        """``notifyMessageArriving(topic, queueId, cid)``: wake one pop of the group held for the queue."""
        self.pop_long_polling_service.notify_message_arriving_cid(topic, queue_id, cid)

    def notify_long_polling_request_if_need(self, topic: str, group: str, queue_id: int) -> None:
        """``notifyLongPollingRequestIfNeed``: the queue has messages beyond the group's offset."""
        consumer_offset = self.broker.consumer_offset_manager.query_offset(group, topic, queue_id)
        max_offset = self.broker.message_store.get_max_offset_in_queue(topic, queue_id)
        if max_offset > consumer_offset:
            service = self.pop_long_polling_service
            if not service.notify_message_arriving_cid(topic, -1, group):
                service.notify_message_arriving_cid(topic, queue_id, group)

    # -- the request --------------------------------------------------------------------------
    async def process_request(self, channel: RemotingChannel, request: RemotingCommand) -> RemotingCommand | None:
        broker = self.broker
        bc = broker.broker_config
        now = broker.node.now_ms()
        # addExtFieldIfNotExist(BORN_TIME, now), and a "0" replaced by now.
        ext = request.ext_fields
        if ext is None or ext.get(BORN_TIME) is None or str(ext.get(BORN_TIME)) == "0":
            request.add_ext_field(BORN_TIME, str(now))
        header = PopMessageRequestHeader.decode(request)
        response = RemotingCommand.create_response_command(ResponseCode.SYSTEM_ERROR, None)

        def fail(code: int, remark: str) -> RemotingCommand:
            response.code, response.remark = code, remark
            return response

        broker.consumer_manager.compensate_basic_consumer_info(header.consumer_group, ConsumeType.CONSUME_POP,
                                                               MessageModel.CLUSTERING)
        if bc.enablePopLog:
            log.info("receive PopMessage request command, %r", request)
        if header.is_timeout_too_much(now):
            return fail(ResponseCode.POLLING_TIMEOUT, f"the broker[{bc.brokerIP1}] pop message is timeout too much")
        if not PermName.is_readable(bc.brokerPermission):
            return fail(ResponseCode.NO_PERMISSION, f"the broker[{bc.brokerIP1}] pop message is forbidden")
        if header.max_msg_nums > MAX_MSG_NUMS:
            return fail(ResponseCode.INVALID_PARAMETER,
                        f"the broker[{bc.brokerIP1}] pop message's num is greater than 32")
        topic_config = broker.topic_config_manager.select_topic_config(header.topic)
        if topic_config is None:
            log.error("The topic %s not exist, consumer: %s ", header.topic, channel.remote_addr)
            return fail(ResponseCode.TOPIC_NOT_EXIST,
                        f"topic[{header.topic}] not exist, apply first please! {suggest_todo(FAQ_URL)}")
        if not PermName.is_readable(topic_config.perm):
            return fail(ResponseCode.NO_PERMISSION, f"the topic[{header.topic}] peeking message is forbidden")
        if header.get_queue_id() >= topic_config.read_queue_nums:
            error = (f"queueId[{header.get_queue_id()}] is illegal, topic:[{header.topic}] "
                     f"topicConfig.readQueueNums:[{topic_config.read_queue_nums}] consumer:[/{channel.remote_addr}]")
            log.warning(error)
            return fail(ResponseCode.INVALID_PARAMETER, error)
        group_config = broker.subscription_group_manager.find_subscription_group_config(header.consumer_group)
        if group_config is None:
            return fail(ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST,
                        f"subscription group [{header.consumer_group}] does not exist, {suggest_todo(FAQ_URL)}")
        if not group_config.consume_enable:
            return fail(ResponseCode.NO_PERMISSION, f"subscription group no permission, {header.consumer_group}")

        retry_topic = build_pop_retry_topic(header.topic, header.consumer_group)
        exp = header.exp if header.exp else SUB_ALL
        exp_type = header.exp_type if header.exp else ExpressionType.TAG
        try:
            subscription_data = build_subscription_data(header.topic, exp, exp_type)
        except ValueError:
            log.warning("Parse the consumer's subscription[%s] error, group: %s", header.exp, header.consumer_group)
            return fail(ResponseCode.SUBSCRIPTION_PARSE_FAILED, "parse the consumer's subscription failed")
        subscription_data.sub_version = now
        broker.consumer_manager.compensate_subscribe_data(header.consumer_group, header.topic, subscription_data)
        retry_subscription = build_subscription_data(retry_topic, SUB_ALL, exp_type)
        retry_subscription.sub_version = now
        broker.consumer_manager.compensate_subscribe_data(header.consumer_group, retry_topic, retry_subscription)
        if not ExpressionType.is_tag_type(subscription_data.expression_type):
            # No ConsumerFilterManager in rmqlab (see the pull processor): refused the same way.
            return fail(ResponseCode.SYSTEM_ERROR,
                        f"The broker does not support consumer to filter message by {subscription_data.expression_type}")
        message_filter = ExpressionMessageFilter(subscription_data)

        random_q = broker.node.random.randrange(100)
        if header.is_order():
            revive_qid = POP_ORDER_REVIVE_QUEUE
        else:
            revive_qid = abs(self.ck_message_number % bc.reviveQueueNum)
            self.ck_message_number += 1
        ctx = _PopContext(header, channel, broker.node.now_ms(), revive_qid, message_filter)
        need_retry = random_q < bc.popFromRetryProbability
        rest_num = 0
        if need_retry and not header.is_order():
            rest_num = await self.pop_msg_from_topic(retry_topic, True, ctx, random_q, rest_num)
        if header.get_queue_id() < 0:
            rest_num = await self.pop_msg_from_topic(topic_config.topic_name, False, ctx, random_q, rest_num)
        else:
            rest_num = await self.pop_msg_from_queue(topic_config.topic_name, False, ctx, header.get_queue_id(),
                                                     rest_num)
        # If not full, fetch retry again.
        if not need_retry and len(ctx.buffers) < header.max_msg_nums and not header.is_order():
            rest_num = await self.pop_msg_from_topic(retry_topic, True, ctx, random_q, rest_num)

        response_header = PopMessageResponseHeader()
        if ctx.buffers:
            response.code = ResponseCode.SUCCESS
            status = GetMessageStatus.FOUND
            if rest_num > 0:
                # all queue pop can not notify specified queue pop, and vice versa
                self.pop_long_polling_service.notify_message_arriving_cid(header.topic, header.get_queue_id(),
                                                                          header.consumer_group)
        else:
            polling_result = self.pop_long_polling_service.polling(channel, request, PollingHeader.of(header),
                                                                   subscription_data, message_filter)
            if polling_result is PollingResult.POLLING_SUC:
                if rest_num > 0:
                    self.pop_long_polling_service.notify_message_arriving_cid(
                        header.topic, header.get_queue_id(), header.consumer_group)
                return None
            response.code = (ResponseCode.POLLING_FULL if polling_result is PollingResult.POLLING_FULL
                             else ResponseCode.POLLING_TIMEOUT)
            status = GetMessageStatus.NO_MESSAGE_IN_QUEUE
        response_header.invisible_time = header.invisible_time
        response_header.pop_time = ctx.pop_time
        response_header.revive_qid = revive_qid
        response_header.rest_num = rest_num
        response_header.start_offset_info = ";".join(ctx.start_offset_info)
        response_header.msg_offset_info = ";".join(ctx.msg_offset_info)
        if header.is_order() and ctx.order_count_info is not None:
            response_header.order_count_info = ";".join(ctx.order_count_info)
        response.remark = status.name
        if response.code == ResponseCode.SUCCESS:
            broker.broker_stats.on_get(len(ctx.buffers))
            response.body = b"".join(ctx.buffers)
        return write_header(response, response_header)

    async def pop_msg_from_topic(self, topic: str, is_retry: bool, ctx: _PopContext, random_q: int,
                                 rest_num: int) -> int:
        """Every queue of ``topic`` (if it exists), starting at ``random_q % readQueueNums``."""
        topic_config = self.broker.topic_config_manager.select_topic_config(topic)
        if topic_config is None:
            return rest_num
        n = topic_config.read_queue_nums
        for i in range(n):
            queue_id = (random_q + i) % n
            rest_num = await self.pop_msg_from_queue(topic_config.topic_name, is_retry, ctx, queue_id, rest_num)
        return rest_num

    async def pop_msg_from_queue(self, topic: str, is_retry: bool, ctx: _PopContext, queue_id: int,
                                 rest_num: int) -> int:
        """``popMsgFromQueue``: read one queue under its lock; returns the new restNum."""
        broker = self.broker
        store = broker.message_store
        header = ctx.header
        group = header.consumer_group
        lock_key = QueueLockManager.build_lock_key(topic, group, queue_id)
        is_order = header.is_order()
        offset = self.get_pop_offset(topic, group, queue_id, header.init_mode, False, False)
        if not self.queue_lock_manager.try_lock(lock_key):
            if not is_order:
                rest_num = store.get_max_offset_in_queue(topic, queue_id) - offset + rest_num
            return rest_num
        try:
            offset = self.get_pop_offset(topic, group, queue_id, header.init_mode, True, True)
            if is_order and broker.consumer_order_info_manager.check_block(
                    header.attempt_id, topic, group, queue_id, header.invisible_time):
                return rest_num  # should not add accumulation(max offset - consumer offset) here
            if len(ctx.buffers) >= header.max_msg_nums:
                return store.get_max_offset_in_queue(topic, queue_id) - offset + rest_num
            if not store.running:
                return store.get_max_offset_in_queue(topic, queue_id) - offset + rest_num
            want = header.max_msg_nums - len(ctx.buffers)
            result = store.get_message(group, topic, queue_id, offset, want, ctx.message_filter)
            if result.status is GetMessageStatus.NO_MATCHED_LOGIC_QUEUE:
                # RocketMQ's store creates a known topic's queue on read (see the pull processor).
                return rest_num
            if result.status in _RESTART_AT_STORE_OFFSET:
                log.warning("Pop initial offset, because store is no correct, %s, %s->%s", lock_key, offset,
                            result.next_begin_offset)
                broker.consumer_offset_manager.commit_offset(ctx.client_address, group, topic, queue_id,
                                                             result.next_begin_offset)
                offset = result.next_begin_offset
                result = store.get_message(group, topic, queue_id, offset, want, ctx.message_filter)
            final_offset = offset
            if result.message_buffers:
                if is_order:
                    broker.consumer_order_info_manager.update(
                        header.attempt_id, is_retry, topic, group, queue_id, ctx.pop_time, header.invisible_time,
                        result.queue_offsets, ctx.order_count_info)
                    broker.consumer_offset_manager.commit_offset(ctx.client_address, group, topic, queue_id,
                                                                 final_offset)
                elif not await self.append_check_point(header, topic, ctx.revive_qid, queue_id, final_offset,
                                                       result, ctx.pop_time, broker.broker_config.brokerName,
                                                       ctx.client_address):
                    return rest_num + result.message_count
                eiu.build_start_offset_info(ctx.start_offset_info, topic, queue_id, final_offset)
                eiu.build_msg_offset_info(ctx.msg_offset_info, topic, queue_id, result.queue_offsets)
            elif result.status in _FILTERED_OR_GONE and result.next_begin_offset > -1:
                # Orderly: commit; otherwise RocketMQ's addCkMock, whose offset the buffer service
                # commits at once (the mocked checkpoint counts as stored): the same commit.
                broker.consumer_offset_manager.commit_offset(ctx.client_address, group, topic, queue_id,
                                                             result.next_begin_offset)
            rest_num = result.max_offset - result.next_begin_offset + rest_num
            broker_name = broker.broker_config.brokerName
            for buffer, queue_offset in zip(result.message_buffers, result.queue_offsets):
                if broker.broker_config.popResponseReturnActualRetryTopic or not is_retry:
                    ctx.buffers.append(buffer)
                else:
                    ctx.buffers.append(self._recode_retry_message(buffer, queue_offset, final_offset, ctx,
                                                                  broker_name))
            return rest_num
        finally:
            self.queue_lock_manager.un_lock(lock_key)

    def _recode_retry_message(self, buffer: bytes, queue_offset: int, ck_offset: int, ctx: _PopContext,
                              broker_name: str) -> bytes:
        """A pop retry message as the client gets it: POP_CK set (if absent), the topic it asked
        for, re-encoded (``MessageDecoder.encode(messageExt, false)``)."""
        msg = decode(buffer, check_crc=False)
        msg.queue_offset = queue_offset
        header = ctx.header
        props = msg.properties
        props.setdefault(MessageConst.PROPERTY_POP_CK, eiu.build_extra_info(
            ck_offset, ctx.pop_time, header.invisible_time, ctx.revive_qid, msg.topic, broker_name, msg.queue_id,
            msg.queue_offset))
        inner = MessageExtBrokerInner(topic=header.topic, body=msg.body, flag=msg.flag)
        for name in ("queue_id", "sys_flag", "born_timestamp", "born_host", "store_timestamp", "store_host",
                     "reconsume_times", "prepared_transaction_offset"):
            setattr(inner, name, getattr(msg, name))
        inner.properties = props
        inner.properties_string = properties_to_java_string(props)
        return self._encoder.encode(inner, queue_offset=msg.queue_offset, physical_offset=msg.commit_log_offset)

    # -- offsets --------------------------------------------------------------------------------
    def get_pop_offset(self, topic: str, group: str, queue_id: int, init_mode: int, init: bool,
                       check_reset_offset: bool) -> int:
        """``getPopOffset``: the group's offset, an initial one, or a pending admin reset."""
        offset = self.broker.consumer_offset_manager.query_offset(group, topic, queue_id)
        if offset < 0:
            offset = self.get_init_offset(topic, group, queue_id, init_mode, init)
        if check_reset_offset:
            reset = self.reset_pop_offset(topic, group, queue_id)
            if reset is not None:
                return reset
        return offset

    def get_init_offset(self, topic: str, group: str, queue_id: int, init_mode: int, init: bool) -> int:
        """``getInitOffset``: MIN (or any retry topic) -> the queue's min offset; MAX -> 0 when the
        queue's first message is in memory, else the last message (max - 1). ``init`` commits it."""
        broker = self.broker
        store = broker.message_store
        if init_mode == ConsumeInitMode.MIN or topic.startswith(RETRY_GROUP_TOPIC_PREFIX):
            offset = store.get_min_offset_in_queue(topic, queue_id)
        elif (broker.broker_config.initPopOffsetByCheckMsgInMem and store.get_min_offset_in_queue(topic, queue_id) <= 0
              and self._check_in_mem_by_consume_offset(topic, queue_id, 0)):
            offset = 0
        else:
            offset = max(0, store.get_max_offset_in_queue(topic, queue_id) - 1)
        if init:
            broker.consumer_offset_manager.commit_offset("getPopOffset", group, topic, queue_id, offset)
        return offset

    def _check_in_mem_by_consume_offset(self, topic: str, queue_id: int, consume_offset: int) -> bool:
        """``DefaultMessageStore.checkInMemByConsumeOffset(topic, queueId, offset, 1)``."""
        store = self.broker.message_store
        cq = store.consume_queue_table.get((topic, queue_id))
        if cq is None:
            return False
        units = cq.get_units(consume_offset, 1)
        if not units:
            return False
        return self.broker.estimate_in_mem_by_commit_offset(units[0][0], store.get_max_phy_offset())

    def reset_pop_offset(self, topic: str, group: str, queue_id: int) -> int | None:
        """``resetPopOffset``: an admin reset clears the orderly block and becomes the offset."""
        cof = self.broker.consumer_offset_manager
        reset = cof.query_then_erase_reset_offset(topic, group, queue_id)
        if reset is not None:
            self.broker.consumer_order_info_manager.clear_block(topic, group, queue_id)
            cof.commit_offset("ResetPopOffset", group, topic, queue_id, reset)
        return reset

    # -- checkpoints ----------------------------------------------------------------------------
    def build_ck_msg(self, ck: PopCheckPoint, revive_qid: int) -> MessageExtBrokerInner:
        """``buildCkMsg``."""
        return build_revive_message(self.broker, self.revive_topic, ck.encode(), revive_qid, pac.CK_TAG,
                                    ck.revive_time - pac.ACK_TIME_INTERVAL, gen_ck_unique_id(ck))

    async def append_check_point(self, header: PopMessageRequestHeader, topic: str, revive_qid: int, queue_id: int,
                                 offset: int, result, pop_time: int, broker_name: str, client_address: str) -> bool:
        """``appendCheckPoint`` + ``addCkJustOffset`` (buffer merge off): store the checkpoint in
        the revive queue, then commit the consumer offset past what was read."""
        ck = PopCheckPoint(bit_map=0, num=result.message_count, pop_time=pop_time,
                           invisible_time=header.invisible_time, start_offset=offset, cid=header.consumer_group,
                           topic=topic, queue_id=queue_id, broker_name=broker_name)
        for queue_offset in result.queue_offsets:
            ck.add_diff(queue_offset - offset)
        put = await self.broker.escape_bridge.put_message_to_specific_queue(self.build_ck_msg(ck, revive_qid))
        if self.broker.broker_config.enablePopLog:
            log.info("[PopBuffer]add ck just offset, %s, result %s", ck, put)
        if not is_put_ok(put):
            log.error("[PopBuffer]put ck to store fail: %s, %s", ck, put.put_message_status.name)
            return False
        self.broker.consumer_offset_manager.commit_offset(client_address, header.consumer_group, topic, queue_id,
                                                          result.next_begin_offset)
        return True
