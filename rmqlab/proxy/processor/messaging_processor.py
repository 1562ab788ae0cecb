"""MessagingProcessor (proxy/processor/DefaultMessagingProcessor, ProducerProcessor,
ConsumerProcessor): the Proxy's side of the remoting protocol.

* send: the Proxy picks the queue itself, whatever queue the client chose (SendMessageQueueSelector):
  a message group goes to the write queue `Hashing.consistentHash(group.hashCode(), n)`, so one
  group always lands in one queue; anything else round-robin. It checks the topic's message type
  first (TopicMessageTypeValidator) and sends SEND_MESSAGE_V2 with the topic as producer group.
* receive: POP_MESSAGE (200050) on the broker the client named (queue id -1: any queue), FIFO
  groups with order=true. Each POP_CK becomes a receipt handle with the commitlog offset appended;
  messages that do not match the tag filter are acked at once and messages past the group's max
  attempts go to the DLQ (PopMessageResultFilterImpl).
* ack / change invisible time: ACK_MESSAGE (200051) / CHANGE_MESSAGE_INVISIBLETIME (200053) to the
  master of the broker named in the handle; an expired handle is refused with
  INVALID_RECEIPT_HANDLE before anything is sent (ConsumerProcessor.validateReceiptHandle).

No consumption state lives here: pop checkpoints, acks and retries are in the broker's revive
topic, so a restarted Proxy (or another Proxy) acks a handle it never issued.

Deviation: RocketMQ's Local mode calls the broker's processors inside the JVM; rmqlab's goes
through the broker's own remoting port on loopback (one code path for both modes, at the price of
a local round trip); on the simulator through an in-process pipe (rmqlab.proxy.in_process).
"""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING
from collections.abc import Callable

from rmqlab.common.consumer.receipt_handle import RETRY_TOPIC, RETRY_TOPIC_V2, ReceiptHandle, create_handle
from rmqlab.common.java_compat import java_string_hash_code
from rmqlab.common.message.message import Message, MessageExt
from rmqlab.common.message.message_const import MessageConst
from rmqlab.common.message.message_decoder import message_properties_to_string
from rmqlab.common.message.message_sys_flag import MessageSysFlag
from rmqlab.proxy.grpc.v2.common import Code, GrpcProxyException
from rmqlab.proxy.service.metadata_service import message_type_of_properties
from rmqlab.remoting.protocol.header.broker.send_message import SendMessageRequestHeader

if TYPE_CHECKING:
    from rmqlab.client.impl.mq_client_api_impl import MQClientAPIImpl
    from rmqlab.proxy.service.topic_route_service import TopicRouteService
    from rmqlab.proxy.service.transaction_service import TransactionService

log = logging.getLogger("rmqlab.proxy")

MC = MessageConst
AUTO_CREATE_TOPIC_KEY_TOPIC = "TBW102"
DEFAULT_TOPIC_QUEUE_NUMS = 4
MAX_MSG_NUMS_FOR_POP_REQUEST = 32  # ProxyUtils
DEFAULT_TIMEOUT_MS = 3000  # MessagingProcessor.DEFAULT_TIMEOUT_MILLS


def consistent_hash(input_: int, buckets: int) -> int:
    """Guava's Hashing.consistentHash(long, int) (Lamping & Veach's jump hash with Guava's
    LinearCongruentialGenerator), so a message group lands in the queue the real Proxy picks."""
    state = input_ & 0xFFFFFFFFFFFFFFFF
    candidate = 0
    while True:
        state = (2862933555777941757 * state + 1) & 0xFFFFFFFFFFFFFFFF
        # nextDouble(): ((int) (state >>> 33) + 1) / 2^31; 31 bits, so the int is never negative.
        next_ = int((candidate + 1) / (((state >> 33) + 1) / 2 ** 31))
        if 0 <= next_ < buckets:
            candidate = next_
        else:
            return candidate


class MessagingProcessor:
    def __init__(self, api: MQClientAPIImpl, routes: TopicRouteService, metadata, now_ms: Callable[[], int]):
        self.api = api
        self.routes = routes
        self.metadata = metadata
        self.now_ms = now_ms
        self.transactions: TransactionService | None = None  # set by ProxyController

    # -- send -------------------------------------------------------------------------------------
    async def send_message(self, topic: str, msg: Message, sys_flag: int, sharding_key: str | None,
                           timeout_ms: float = DEFAULT_TIMEOUT_MS):
        message_type = message_type_of_properties(msg.properties)
        topic_type = await self.metadata.get_topic_message_type(topic)
        if topic_type != "MIXED" and topic_type != message_type:
            # TopicMessageTypeValidator
            raise GrpcProxyException(Code.MESSAGE_PROPERTY_CONFLICT_WITH_TYPE,
                                     f"current message type not match with topic accept message types, topic "
                                     f"type: {topic_type}, message type: {message_type}")
        view = await self.routes.get_current_message_queue_view(topic)
        queues = view.write_selector.queues
        if sharding_key:
            mq = queues[consistent_hash(java_string_hash_code(sharding_key), len(queues))] if queues else None
        else:
            mq = view.write_selector.select_one(False)
        if mq is None:
            # No master in the route (a failover under way): ask the name server again next time.
            self.routes.invalidate(topic)
            raise GrpcProxyException(Code.FORBIDDEN, "no writable queue")
        header = SendMessageRequestHeader(
            producer_group=topic, topic=topic, default_topic=AUTO_CREATE_TOPIC_KEY_TOPIC,
            default_topic_queue_nums=DEFAULT_TOPIC_QUEUE_NUMS, queue_id=mq.queue_id, sys_flag=sys_flag,
            born_timestamp=self.now_ms(), flag=msg.flag, properties=message_properties_to_string(msg.properties),
            reconsume_times=0, unit_mode=False, batch=False, broker_name=mq.broker_name)
        try:
            result = await self.api.send_message(mq.broker_addr, mq.broker_name, msg, header, timeout_ms)
        except (Exception, asyncio.CancelledError):
            # A broker that fails, or does not answer before the client gives up (its deadline
            # cancels the call), may be a dead master: look the route up again at the next send
            # rather than at the next refresh. Deviation: RocketMQ marks the broker in its latency
            # fault table and keeps the cached route until topicRouteServiceCacheRefreshSeconds
            # (20 s), so its Proxy follows a failover only then.
            self.routes.invalidate(topic)
            raise
        if (MessageSysFlag.get_transaction_value(sys_flag) == MessageSysFlag.TRANSACTION_PREPARED_TYPE
                and result.send_status.value == "SEND_OK" and (result.transaction_id or "").strip()):
            self._fill_transaction_data(topic, mq, result)
        return result

    def _fill_transaction_data(self, producer_group: str, mq, result) -> None:
        """ProducerProcessor.fillTransactionData: where the half message is, for the EndTransaction
        (the commit-log offset from the offset message id, the half queue offset from the result)."""
        from rmqlab.common.message.message_decoder import decode_message_id

        try:
            _, commit_log_offset = decode_message_id(result.offset_msg_id or result.msg_id)
            self.transactions.add_transaction_data(producer_group, mq.broker_name, mq.topic, result.queue_offset,
                                                   commit_log_offset, result.transaction_id)
        except Exception as e:  # RocketMQ logs it; the EndTransaction then finds no data
            log.warning("fillTransactionData failed. messageQueue: %s, sendResult: %s, %s", mq, result, e)

    async def end_transaction(self, topic: str, transaction_id: str, message_id: str, producer_group: str,
                              commit_or_rollback: int, from_transaction_check: bool) -> None:
        await self.transactions.end_transaction(topic, transaction_id, message_id, producer_group,
                                                commit_or_rollback, from_transaction_check)

    # -- receive ----------------------------------------------------------------------------------
    async def pop_message(self, broker_name: str, group: str, topic: str, max_msg_nums: int, invisible_ms: int,
                          poll_ms: int, fifo: bool, exp_type: str, exp: str, attempt_id: str | None,
                          max_attempts: int, timeout_ms: float):
        from rmqlab.client.consumer.pop_result import PopStatus
        from rmqlab.remoting.protocol.header.broker.pop_message import ConsumeInitMode, PopMessageRequestHeader

        view = await self.routes.get_current_message_queue_view(topic)
        mq = (view.read_selector.get_queue_by_broker_name(broker_name) if broker_name else None) \
            or view.read_selector.select_one(True)
        if mq is None:
            raise GrpcProxyException(Code.FORBIDDEN, "no readable queue")
        header = PopMessageRequestHeader(
            consumer_group=group, topic=topic, queue_id=mq.queue_id,
            max_msg_nums=min(max_msg_nums, MAX_MSG_NUMS_FOR_POP_REQUEST), invisible_time=invisible_ms,
            poll_time=poll_ms, born_time=self.now_ms(), init_mode=ConsumeInitMode.MAX, exp_type=exp_type, exp=exp,
            order=fifo, attempt_id=attempt_id)
        result = await self.api.pop_message(mq.broker_addr, mq.broker_name, header, timeout_ms)
        if result.pop_status == PopStatus.FOUND and result.msg_found_list:
            kept = []
            for msg in result.msg_found_list:
                handle = create_handle(msg.properties[MC.PROPERTY_POP_CK], msg.commit_log_offset)
                msg.properties[MC.PROPERTY_POP_CK] = handle
                verdict = self._filter(msg, exp_type, exp, max_attempts, fifo)
                if verdict == "MATCH":
                    kept.append(msg)
                elif verdict == "NO_MATCH":
                    await self._quietly(self.ack_message(ReceiptHandle.decode(handle), msg.msg_id, group, topic))
                else:
                    await self._quietly(self.forward_message_to_dead_letter_queue(
                        ReceiptHandle.decode(handle), msg.msg_id, group, topic, max_attempts))
            result.msg_found_list = kept
        return result

    @staticmethod
    def _filter(msg: MessageExt, exp_type: str, exp: str, max_attempts: int, fifo: bool) -> str:
        """PopMessageResultFilterImpl: attempts first (FIFO messages are sent to the DLQ by the client
        itself), then the tag expression."""
        if not fifo and msg.reconsume_times >= max_attempts:
            return "TO_DLQ"
        if exp_type == "TAG" and exp.strip() not in ("", "*"):
            tags = {t.strip() for t in exp.split("||")}
            if msg.tags not in tags:
                return "NO_MATCH"
        return "MATCH"

    @staticmethod
    async def _quietly(coro) -> None:
        try:
            await coro
        except Exception as e:  # RocketMQ logs these and goes on; the revive service retries
            log.warning("proxy: %s", e)

    # -- ack / change invisible time ----------------------------------------------------------------
    def _validate_receipt_handle(self, handle: ReceiptHandle) -> None:
        if handle.is_expired(self.now_ms()):
            raise GrpcProxyException(Code.INVALID_RECEIPT_HANDLE, "receipt handle is expired")

    async def _broker_addr(self, handle: ReceiptHandle, topic: str) -> str:
        addr = await self.routes.get_broker_addr(handle.broker_name, topic)
        if addr is None:
            raise GrpcProxyException(Code.INTERNAL_SERVER_ERROR, f"cannot find master of broker {handle.broker_name}")
        return addr

    async def ack_message(self, handle: ReceiptHandle, message_id: str | None, group: str, topic: str,
                          timeout_ms: float = DEFAULT_TIMEOUT_MS):
        from rmqlab.remoting.protocol.header.broker.ack_message import AckMessageRequestHeader

        self._validate_receipt_handle(handle)
        header = AckMessageRequestHeader(consumer_group=group, topic=real_topic(handle, topic, group),
                                         queue_id=handle.queue_id, extra_info=handle.receipt_handle,
                                         offset=handle.offset)
        return await self.api.ack_message(await self._broker_addr(handle, topic), header, timeout_ms)

    async def change_invisible_time(self, handle: ReceiptHandle, message_id: str | None, group: str, topic: str,
                                    invisible_ms: int, timeout_ms: float = DEFAULT_TIMEOUT_MS):
        from rmqlab.remoting.protocol.header.broker.change_invisible_time import ChangeInvisibleTimeRequestHeader

        self._validate_receipt_handle(handle)
        header = ChangeInvisibleTimeRequestHeader(
            consumer_group=group, topic=real_topic(handle, topic, group), queue_id=handle.queue_id,
            extra_info=handle.receipt_handle, offset=handle.offset, invisible_time=invisible_ms)
        result = await self.api.change_invisible_time(await self._broker_addr(handle, topic), handle.broker_name,
                                                      header, timeout_ms)
        if result.extra_info:
            result.extra_info = create_handle(result.extra_info, handle.commit_log_offset)
        return result

    async def forward_message_to_dead_letter_queue(self, handle: ReceiptHandle, message_id: str | None, group: str,
                                                   topic: str, max_attempts: int,
                                                   timeout_ms: float = DEFAULT_TIMEOUT_MS) -> None:
        """ConsumerProcessor.forwardMessageToDeadLetterQueue: CONSUMER_SEND_MSG_BACK with delay level
        -1 (straight to %DLQ%group), then ack the handle."""
        self._validate_receipt_handle(handle)
        addr = await self._broker_addr(handle, topic)
        # The broker reads the message back from its commitlog by this offset.
        msg = MessageExt(topic=real_topic(handle, topic, group), body=None, commit_log_offset=handle.commit_log_offset,
                         msg_id=message_id)
        if message_id:
            msg.properties[MC.PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX] = message_id
        await self.api.consumer_send_message_back(addr, handle.broker_name, msg, group, -1, timeout_ms,
                                                  max_attempts - 1)
        await self.ack_message(handle, message_id, group, topic, timeout_ms)


def real_topic(handle: ReceiptHandle, topic: str, group: str) -> str:
    """ReceiptHandle.getRealTopic: a message popped from the retry topic is acked there."""
    from rmqlab.common import key_builder

    if handle.topic_type == RETRY_TOPIC:
        return key_builder.build_pop_retry_topic_v1(topic, group)
    if handle.topic_type == RETRY_TOPIC_V2:
        return key_builder.build_pop_retry_topic_v2(topic, group)
    return topic

