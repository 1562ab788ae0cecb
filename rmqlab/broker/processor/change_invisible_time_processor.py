"""ChangeInvisibleTimeProcessor: CHANGE_MESSAGE_INVISIBLETIME (200053), more (or less) time for a
popped message.

RocketMQ 5 ``broker/src/main/java/org/apache/rocketmq/broker/processor/ChangeInvisibleTimeProcessor.java``
(buffer merge off). In order:

1. unknown topic -> TOPIC_NOT_EXIST; ``queueId`` outside the read queues -> MESSAGE_ILLEGAL;
   ``offset`` outside [min, max) of the queue -> NO_MESSAGE (no remark);
2. the handle is read (a malformed one: SYSTEM_ERROR with the Java exception's text, see the ack
   processor);
3. orderly handle (revive queue 999): under the queue's pop lock the message's next visible time
   becomes now + invisibleTime (ConsumerOrderInfoManager); the answer keeps the batch's popTime and
   says invisibleTime = nextVisibleTime - popTime. An offset below the committed one is answered
   SUCCESS with a header of zeros (Java's unset primitives);
4. otherwise a new :class:`PopCheckPoint` for this one message is written to the handle's revive
   queue: popTime = now (broker clock), the new invisibleTime, startOffset = the message's offset,
   diff [0]; then the old handle is acknowledged (an AckMsg for the old checkpoint). The answer:
   ``popTime`` now, ``invisibleTime``, ``reviveQid``; the client builds the new handle from them
   (``ckQueueOffset`` = the message's offset). A checkpoint that could not be stored -> SYSTEM_ERROR;
   the old handle then stays as it was.

What follows for the old handle: acking it later still answers SUCCESS (an AckMsg for a checkpoint
that is already fully acknowledged), and does *not* acknowledge the message, whose new checkpoint
only the new handle matches: unacknowledged, it is revived when the new invisible time ends.

Deviation: every field of the handle is checked before anything is written (RocketMQ reads the
checkpoint's start offset and pop time only after storing the new checkpoint, so a handle broken
there leaves a checkpoint without the ack of the old one).
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from rmqlab.broker.failover.escape_bridge import is_put_ok
from rmqlab.broker.pop.queue_lock_manager import QueueLockManager
from rmqlab.broker.processor.ack_message_processor import check_topic_and_queue, lock_queue
from rmqlab.broker.processor.pop_message_processor import build_revive_message, gen_ack_unique_id
from rmqlab.common import pop_ack_constants as pac
from rmqlab.remoting.protocol.header import extra_info_util as eiu
from rmqlab.remoting.protocol.header.broker.change_invisible_time import (ChangeInvisibleTimeRequestHeader,
                                                                          ChangeInvisibleTimeResponseHeader)
from rmqlab.remoting.protocol.header.broker.header_util import write_header
from rmqlab.remoting.remoting_command import RemotingCommand
from rmqlab.remoting.response_code import ResponseCode
from rmqlab.store.pop.ack_msg import AckMsg
from rmqlab.store.pop.pop_check_point import PopCheckPoint

if TYPE_CHECKING:
    from rmqlab.broker.broker_controller import BrokerController
    from rmqlab.remoting.remoting_channel import RemotingChannel

log = logging.getLogger("RocketmqPop")


class ChangeInvisibleTimeProcessor:
    def __init__(self, broker: BrokerController):
        self.broker = broker
        self.revive_topic = pac.build_cluster_revive_topic(broker.broker_config.brokerClusterName)

    def reject_request(self) -> bool:
        return False

    async def process(self, channel: RemotingChannel, request: RemotingCommand) -> RemotingCommand:
        broker = self.broker
        header = ChangeInvisibleTimeRequestHeader.decode(request)
        response = RemotingCommand.create_response_command(ResponseCode.SUCCESS, None)
        response_header = ChangeInvisibleTimeResponseHeader()
        if check_topic_and_queue(broker, header, channel, response):
            return response
        store = broker.message_store
        min_offset = store.get_min_offset_in_queue(header.topic, header.queue_id)
        max_offset = store.get_max_offset_in_queue(header.topic, header.queue_id)
        if header.offset < min_offset or header.offset >= max_offset:
            response.code = ResponseCode.NO_MESSAGE
            return response
        try:
            extra_info = eiu.split(header.extra_info)
            revive_qid = eiu.get_revive_qid(extra_info)
            pop_time = eiu.get_pop_time(extra_info)
            if revive_qid != eiu.POP_ORDER_REVIVE_QUEUE:
                old_invisible_time = eiu.get_invisible_time(extra_info)
                ck_queue_offset = eiu.get_ck_queue_offset(extra_info)
                broker_name = eiu.get_broker_name(extra_info)
        except eiu.ExtraInfoError as e:
            log.warning("change invisible time with a malformed extraInfo %r: %s", header.extra_info, e)
            response.code, response.remark = ResponseCode.SYSTEM_ERROR, e.java_desc()
            return response
        if revive_qid == eiu.POP_ORDER_REVIVE_QUEUE:
            await self.process_change_invisible_time_for_order(header, pop_time, revive_qid, response_header)
            return write_header(response, response_header)
        if not 0 <= revive_qid < broker.broker_config.reviveQueueNum:
            response.code = ResponseCode.MESSAGE_ILLEGAL
            response.remark = (f"reviveQid {revive_qid} of extraInfo is illegal, the revive topic {self.revive_topic} "
                               f"has {broker.broker_config.reviveQueueNum} queues")
            return response

        now = broker.node.now_ms()
        ok = await self.append_check_point_then_ack_origin(header, revive_qid, now, broker_name, ck_queue_offset,
                                                           pop_time, old_invisible_time)
        if not ok:
            response.code = ResponseCode.SYSTEM_ERROR
            return response
        response_header.invisible_time = header.invisible_time
        response_header.pop_time = now
        response_header.revive_qid = revive_qid
        return write_header(response, response_header)

    async def process_change_invisible_time_for_order(self, header: ChangeInvisibleTimeRequestHeader, pop_time: int,
                                                      revive_qid: int,
                                                      response_header: ChangeInvisibleTimeResponseHeader) -> None:
        broker = self.broker
        cof = broker.consumer_offset_manager
        response_header.pop_time = response_header.invisible_time = response_header.revive_qid = 0
        if header.offset < cof.query_offset(header.consumer_group, header.topic, header.queue_id):
            return
        lock_manager = broker.pop_message_processor.queue_lock_manager
        lock_key = QueueLockManager.build_lock_key(header.topic, header.consumer_group, header.queue_id)
        await lock_queue(lock_manager, lock_key)
        try:
            if header.offset < cof.query_offset(header.consumer_group, header.topic, header.queue_id):
                return
            next_visible_time = broker.node.now_ms() + header.invisible_time
            broker.consumer_order_info_manager.update_next_visible_time(
                header.topic, header.consumer_group, header.queue_id, header.offset, pop_time, next_visible_time)
            response_header.invisible_time = next_visible_time - pop_time
            response_header.pop_time = pop_time
            response_header.revive_qid = revive_qid
        finally:
            lock_manager.un_lock(lock_key)

    async def append_check_point_then_ack_origin(self, header: ChangeInvisibleTimeRequestHeader, revive_qid: int,
                                                 pop_time: int, broker_name: str, ck_queue_offset: int,
                                                 old_pop_time: int, old_invisible_time: int) -> bool:
        broker = self.broker
        ck = PopCheckPoint(bit_map=0, num=1, pop_time=pop_time, invisible_time=header.invisible_time,
                           start_offset=header.offset, cid=header.consumer_group, topic=header.topic,
                           queue_id=header.queue_id, broker_name=broker_name)
        ck.add_diff(0)
        put = await broker.escape_bridge.put_message_to_specific_queue(
            broker.pop_message_processor.build_ck_msg(ck, revive_qid))
        if broker.broker_config.enablePopLog:
            log.info("change Invisible, appendCheckPoint, topic %s, queueId %s,reviveId %s, cid %s, startOffset %s, "
                     "rt %s, result %s", header.topic, header.queue_id, revive_qid, header.consumer_group,
                     header.offset, ck.revive_time, put)
        if not is_put_ok(put):
            log.error("change invisible, put new ck error: %s", put.put_message_status.name)
            return False
        # ackOrigin
        ack = AckMsg(ack_offset=header.offset, start_offset=ck_queue_offset, consumer_group=header.consumer_group,
                     topic=header.topic, queue_id=header.queue_id, pop_time=old_pop_time, broker_name=broker_name)
        msg = build_revive_message(broker, self.revive_topic, ack.encode(), revive_qid, pac.ACK_TAG,
                                   old_pop_time + old_invisible_time, gen_ack_unique_id(ack))
        ack_put = await broker.escape_bridge.put_message_to_specific_queue(msg)
        if not is_put_ok(ack_put):
            log.error("change Invisible, put ack msg fail: %s, %s", ack, ack_put.put_message_status.name)
        return True
