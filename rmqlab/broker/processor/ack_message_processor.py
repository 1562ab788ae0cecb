"""AckMessageProcessor: ACK_MESSAGE (200051), acknowledging a popped message.

RocketMQ 5 ``broker/src/main/java/org/apache/rocketmq/broker/processor/AckMessageProcessor.java``
(``appendAck`` and ``ackOrderly``, with buffer merge off). In order:

1. unknown topic -> TOPIC_NOT_EXIST; ``queueId`` outside the topic's read queues -> MESSAGE_ILLEGAL;
   ``offset`` outside the queue's [min, max] -> NO_MESSAGE (208) ``offset is illegal, ...``;
2. the handle (``extraInfo``) is read: broker name, revive queue, the checkpoint's start offset,
   pop time, invisible time. A malformed handle: RocketMQ lets ExtraInfoUtil's
   IllegalArgumentException / NumberFormatException escape, and its remoting layer answers
   SYSTEM_ERROR with the exception's text; rmqlab answers the same code and text
   (``java.lang.IllegalArgumentException: getBrokerName fail, extraInfoStrs length 1``) without
   letting anything escape;
3. an orderly handle (revive queue 999): under the queue's pop lock, ConsumerOrderInfoManager marks
   the offset acknowledged and the consumer offset moves to the first unacknowledged message of
   the batch; an ack below the committed offset is a no-op; an offset not in the batch ->
   MESSAGE_ILLEGAL; once the queue is no longer blocked, held pops of the group are woken;
4. otherwise an :class:`AckMsg` (tag ``ack``, ``TIMER_DELIVER_MS`` = popTime + invisibleTime, UNIQ_KEY
   ``genAckUniqueId``) is written to the handle's revive queue, where the revive service matches
   it with its checkpoint. SUCCESS - whatever the handle names: an ack of a message already revived,
   of a checkpoint that never existed, or an ack whose write failed is answered SUCCESS too (RocketMQ
   only logs the failed put); the client's AckResult is then OK. The broker does not know whether
   the handle is still live; that is what the revive service sorts out.

Deviation: a handle naming a revive queue that does not exist (not 999 and outside
[0, reviveQueueNum)) is answered MESSAGE_ILLEGAL; RocketMQ would write the ack to that queue of the
revive topic, where nothing ever reads it. BATCH_ACK_MESSAGE (200151) is not served.
"""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING

from rmqlab.broker.failover.escape_bridge import is_put_ok
from rmqlab.broker.pop.queue_lock_manager import QueueLockManager
from rmqlab.broker.processor.pop_message_processor import build_revive_message, gen_ack_unique_id
from rmqlab.broker.processor.send_message_processor import FAQ_URL, suggest_todo
from rmqlab.common import pop_ack_constants as pac
from rmqlab.common.key_builder import POP_ORDER_REVIVE_QUEUE
from rmqlab.remoting.protocol.header import extra_info_util as eiu
from rmqlab.remoting.protocol.header.broker.ack_message import AckMessageRequestHeader
from rmqlab.remoting.remoting_command import RemotingCommand
from rmqlab.remoting.request_code import RequestCode
from rmqlab.remoting.response_code import ResponseCode
from rmqlab.store.pop.ack_msg import AckMsg

if TYPE_CHECKING:
    from rmqlab.broker.broker_controller import BrokerController
    from rmqlab.remoting.remoting_channel import RemotingChannel

log = logging.getLogger("RocketmqPop")

LOCK_RETRY_MS = 1  # how long ackOrderly waits between tries of a held queue lock (Java spins)


async def lock_queue(lock_manager: QueueLockManager, key: str) -> None:
    """``while (!tryLock(key)) {}``: on one event loop the holder must get to run, so wait a tick."""
    while not lock_manager.try_lock(key):
        await asyncio.sleep(LOCK_RETRY_MS / 1000)


def check_topic_and_queue(broker: BrokerController, header, channel: RemotingChannel,
                          response: RemotingCommand) -> bool:
    """The checks ACK_MESSAGE and CHANGE_MESSAGE_INVISIBLETIME share: the topic exists and the queue
    id is one of its read queues. False when they pass; else `response` holds the error."""
    topic_config = broker.topic_config_manager.select_topic_config(header.topic)
    if topic_config is None:
        log.error("The topic %s not exist, consumer: %s ", header.topic, channel.remote_addr)
        response.code = ResponseCode.TOPIC_NOT_EXIST
        response.remark = f"topic[{header.topic}] not exist, apply first please! {suggest_todo(FAQ_URL)}"
        return True
    if header.queue_id >= topic_config.read_queue_nums or header.queue_id < 0:
        error = (f"queueId[{header.queue_id}] is illegal, topic:[{header.topic}] topicConfig.readQueueNums:"
                 f"[{topic_config.read_queue_nums}] consumer:[/{channel.remote_addr}]")
        log.warning(error)
        response.code, response.remark = ResponseCode.MESSAGE_ILLEGAL, error
        return True
    return False


class AckMessageProcessor:
    def __init__(self, broker: BrokerController):
        self.broker = broker
        self.revive_topic = pac.build_cluster_revive_topic(broker.broker_config.brokerClusterName)

    def reject_request(self) -> bool:
        return False

    async def process(self, channel: RemotingChannel, request: RemotingCommand) -> RemotingCommand:
        response = RemotingCommand.create_response_command(ResponseCode.SUCCESS, None)
        if request.code != RequestCode.ACK_MESSAGE:
            log.error("AckMessageProcessor failed to process RequestCode: %s, consumer: %s ", request.code,
                      channel.remote_addr)
            response.code = ResponseCode.MESSAGE_ILLEGAL
            response.remark = f"AckMessageProcessor failed to process RequestCode: {request.code}"
            return response
        header = AckMessageRequestHeader.decode(request)
        store = self.broker.message_store
        if check_topic_and_queue(self.broker, header, channel, response):
            return response
        min_offset = store.get_min_offset_in_queue(header.topic, header.queue_id)
        max_offset = store.get_max_offset_in_queue(header.topic, header.queue_id)
        if header.offset < min_offset or header.offset > max_offset:
            error = (f"offset is illegal, key:{header.topic}@{header.queue_id}, commit:{header.offset}, "
                     f"store:{min_offset}~{max_offset}")
            log.warning(error)
            response.code, response.remark = ResponseCode.NO_MESSAGE, error
            return response
        await self.append_ack(header, response, channel)
        return response

    async def append_ack(self, header: AckMessageRequestHeader, response: RemotingCommand,
                         channel: RemotingChannel) -> None:
        try:
            extra_info = eiu.split(header.extra_info)
            broker_name = eiu.get_broker_name(extra_info)
            rq_id = eiu.get_revive_qid(extra_info)
            start_offset = eiu.get_ck_queue_offset(extra_info)
            pop_time = eiu.get_pop_time(extra_info)
            invisible_time = eiu.get_invisible_time(extra_info)
        except eiu.ExtraInfoError as e:
            log.warning("ack with a malformed extraInfo %r: %s", header.extra_info, e)
            response.code, response.remark = ResponseCode.SYSTEM_ERROR, e.java_desc()
            return
        if rq_id == POP_ORDER_REVIVE_QUEUE:
            await self.ack_orderly(header.topic, header.consumer_group, header.queue_id, header.offset, pop_time,
                                   invisible_time, channel, response)
            return
        if not 0 <= rq_id < self.broker.broker_config.reviveQueueNum:
            response.code = ResponseCode.MESSAGE_ILLEGAL
            response.remark = (f"reviveQid {rq_id} of extraInfo is illegal, the revive topic {self.revive_topic} has "
                               f"{self.broker.broker_config.reviveQueueNum} queues")
            return
        ack = AckMsg(ack_offset=header.offset, start_offset=start_offset, consumer_group=header.consumer_group,
                     topic=header.topic, queue_id=header.queue_id, pop_time=pop_time, broker_name=broker_name)
        msg = build_revive_message(self.broker, self.revive_topic, ack.encode(), rq_id, pac.ACK_TAG,
                                   pop_time + invisible_time, gen_ack_unique_id(ack))
        put = await self.broker.escape_bridge.put_message_to_specific_queue(msg)
        if not is_put_ok(put):
            log.error("put ack msg error:%s", put.put_message_status.name)
        elif self.broker.broker_config.enablePopLog:
            log.info("append ack %s to revive queue %d", ack, rq_id)

    async def ack_orderly(self, topic: str, group: str, queue_id: int, ack_offset: int, pop_time: int,
                          invisible_time: int, channel: RemotingChannel, response: RemotingCommand) -> None:
        """``ackOrderly``."""
        broker = self.broker
        cof = broker.consumer_offset_manager
        lock_manager = broker.pop_message_processor.queue_lock_manager
        lock_key = QueueLockManager.build_lock_key(topic, group, queue_id)
        old_offset = cof.query_offset(group, topic, queue_id)
        if ack_offset < old_offset:
            return
        await lock_queue(lock_manager, lock_key)
        try:
            old_offset = cof.query_offset(group, topic, queue_id)
            if ack_offset < old_offset:
                return
            order_info = broker.consumer_order_info_manager
            next_offset = order_info.commit_and_next(topic, group, queue_id, ack_offset, pop_time)
            if next_offset > -1:
                if not cof.has_offset_reset(topic, group, queue_id):
                    cof.commit_offset(channel.remote_addr, group, topic, queue_id, next_offset)
                if not order_info.check_block(None, topic, group, queue_id, invisible_time):
                    broker.pop_message_processor.notify_message_arriving(topic, queue_id, group)
            elif next_offset == -1:
                error = (f"offset is illegal, key:{lock_key}, old:{old_offset}, commit:{ack_offset}, "
                         f"next:{next_offset}, /{channel.remote_addr}")
                log.warning(error)
                response.code, response.remark = ResponseCode.MESSAGE_ILLEGAL, error
        finally:
            lock_manager.un_lock(lock_key)
