"""PopReviveService: what was popped and not acknowledged in time is put back, into the group's pop
retry topic (RocketMQ 5 ``broker/src/main/java/org/apache/rocketmq/broker/processor/PopReviveService.java``).

The service reads the revive queues of ``rmq_sys_REVIVE_LOG_<clusterName>`` as consumer group
``CID_RMQ_SYS_REVIVE_GROUP``: checkpoints (tag ``ck``) and acks (tag ``ack``, matched to their
checkpoint by topic, group, queueId, the checkpoint's start offset, pop time and broker name, the
ack's message offset setting the checkpoint's bit). A checkpoint whose revive time
(``popTime + invisibleTime``) has passed is revived: every message of it whose bit is not set is
read from its queue and put into ``%RETRY%<group>_<topic>`` (or into the retry topic it came from)
as a new message - same body, flag, sysFlag, born timestamp, tags and properties,
reconsumeTimes + 1, born and store host this broker, queue 0, and ``1ST_POP_TIME`` = the
checkpoint's popTime when it is the first revival (reconsumeTimes 0) or the property is missing.
That is all RocketMQ's ``reviveRetry`` sets: no RETRY_TOPIC, no ORIGIN_MESSAGE_ID (UNIQ_KEY is kept,
so the message keeps its id). The retry topic is created when missing (1 queue, perm 6,
SINGLE_TAG) and the group's offset on it set to 0. Checkpoints of a topic or group that no
longer exists are dropped. A message no longer in its queue is skipped.

Dead letters: RocketMQ's broker never moves a popped message to ``%DLQ%<group>`` here; it revives
it again and again with reconsumeTimes growing. It is the consumer side - the Proxy's
``ConsumerProcessor`` with ``PopMessageResultFilterImpl`` (reconsumeTimes >= maxAttempts -> TO_DLQ),
or the Java push consumer in pop mode - that sends such a message back with CONSUMER_SEND_MSG_BACK
(delayLevel -1, the message's commit-log offset; the broker stores it in ``%DLQ%<group>``) and then
acknowledges it. rmqlab's broker serves that request (SendMessageProcessor.consumer_send_msg_back).

Only a master revives (``shouldRunPopRevive``: brokerId 0 at start, then the broker's
``changeSpecialServiceStatus``); becoming a slave drops what is in memory, becoming master again
re-reads from the committed revive offsets (a slave has the master's, SlaveSynchronize copies
consumerOffset.json).

Deviation (rmqlab has no timer message store here). RocketMQ writes each checkpoint with
``TIMER_DELIVER_MS`` = revive time - 1 s and each ack with its checkpoint's revive time; the timer
wheel holds them back until then, so the revive topic receives them in revive-time order and the
service only has to compare the newest deliver time it read with a checkpoint's revive time.
rmqlab stores checkpoints and acks into the revive queue at once (the property is kept, as data)
and does the waiting here, on the node's clock:

* every ``reviveInterval`` ms each revive queue is read from where the service got to; checkpoints
  are kept in memory in revive-queue order, acks set their bits at once (an ack always follows its
  checkpoint in the same revive queue; one without a pending checkpoint - already revived, or
  never existing - is ignored, as RocketMQ ignores it with ``enableSkipLongAwaitingAck`` off);
  a checkpoint whose every message is acknowledged is done;
* each checkpoint whose revive time has passed (now >= popTime + invisibleTime) is revived, in
  revive-queue order. Revival is not blocked by an older checkpoint with a longer invisible time
  (RocketMQ's timer reorders them; an in-order scan here would hold every later one back);
* the revive offset - the consumer offset of ``CID_RMQ_SYS_REVIVE_GROUP`` on that revive queue,
  RocketMQ's, meaning "the last revive-queue offset done", so reading restarts one after it - is
  committed only up to just before the oldest checkpoint still pending. A broker restart re-reads
  everything from there: pending checkpoints come back with their acks, nothing popped and
  unacknowledged is lost. A checkpoint revived while an older one is still pending lies beyond the
  committed offset; so that a restart does not revive it a second time, the service then appends,
  after the revived messages are stored, an ack for each message it revived to that revive queue
  (RocketMQ's own AckMsg records; the restarted service finds the checkpoint fully acknowledged).
  As in RocketMQ, a crash between a revival and the commit (consumer offsets are persisted every
  ``flushConsumerOffsetInterval``) can revive a checkpoint again: at least once;
* checkpoints and acks another group's slave acting as master escaped here (RIP-32, through the
  EscapeBridge: their broker name is not this broker's) came as SEND_MESSAGE requests, so this
  broker's put hooks parked them in the timer wheel as RocketMQ's do: each arrives at its
  ``TIMER_DELIVER_MS``, an ack at its checkpoint's revive time, a slot (1 s) or so late. Such a
  checkpoint is revived ``ackTimeInterval`` + 1 s after its revive time, RocketMQ's margin
  (``mergeAndRevive`` waits until the records read reach that far), so that its acks are in;
* a revived message that could not be stored, or could not be read from a broker that may answer
  later (the EscapeBridge says "retry": a checkpoint an acting slave escaped here, whose message
  is read back from that slave), keeps its checkpoint pending (its stored siblings marked done)
  and is tried again next round; RocketMQ re-puts a checkpoint for it instead (``rePutCK``).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from rmqlab.broker.failover.escape_bridge import is_put_ok
from rmqlab.common import pop_ack_constants as pac
from rmqlab.common.key_builder import RETRY_GROUP_TOPIC_PREFIX, build_pop_retry_topic, parse_normal_topic
from rmqlab.common.message.message import MessageExt, MessageExtBrokerInner
from rmqlab.common.message.message_const import MessageConst
from rmqlab.common.message.message_decoder import properties_to_java_string
from rmqlab.common.message.message_decoder import decode
from rmqlab.common.topic_config import TopicConfig, TopicFilterType
from rmqlab.store.get_message_result import GetMessageStatus
from rmqlab.store.pop.ack_msg import AckMsg
from rmqlab.store.pop.pop_check_point import PopCheckPoint, merge_key

if TYPE_CHECKING:
    from rmqlab.broker.broker_controller import BrokerController

log = logging.getLogger("RocketmqPop")

READ_BATCH = 32              # getReviveMessage reads 32 at a time
NEW_MESSAGE_MAP_CAPACITY = 16


@dataclass
class ReviveQueueState:
    """One revive queue: where the service got to, and the checkpoints still pending."""

    queue_id: int
    committed: int = -1       # the REVIVE_GROUP consumer offset: last revive-queue offset done
    read_offset: int = 0      # next revive-queue offset to read
    pending: dict[str, PopCheckPoint] = field(default_factory=dict)  # mergeKey -> ck, revive-queue order
    loaded: bool = False


class PopReviveService:
    def __init__(self, broker: BrokerController):
        self.broker = broker
        bc = broker.broker_config
        self.revive_topic = pac.build_cluster_revive_topic(bc.brokerClusterName)
        self.should_run_pop_revive = bc.brokerId == 0
        self.queues = [ReviveQueueState(i) for i in range(bc.reviveQueueNum)]
        self.revived_count = 0  # messages put back into retry topics (tests, widgets)

    # -- status ---------------------------------------------------------------------------------
    def set_should_run_pop_revive(self, should_run: bool) -> None:
        """``setShouldRunPopRevive``: leaving the master role forgets the in-memory state."""
        if should_run != self.should_run_pop_revive:
            self.queues = [ReviveQueueState(i) for i in range(len(self.queues))]
        self.should_run_pop_revive = should_run

    def pending_count(self) -> int:
        return sum(len(q.pending) for q in self.queues)

    # -- one round ------------------------------------------------------------------------------
    async def revive(self) -> None:
        """One round over every revive queue (RocketMQ runs one thread per queue)."""
        if not self.should_run_pop_revive:
            return
        for state in self.queues:
            if not self.should_run_pop_revive or self.broker.message_store is None \
                    or not self.broker.message_store.running:
                return
            try:
                await self.revive_queue(state)
            except Exception:
                log.exception("reviveQueueId=%s, revive error", state.queue_id)

    async def revive_queue(self, state: ReviveQueueState) -> None:
        cof = self.broker.consumer_offset_manager
        if not state.loaded:
            state.committed = cof.query_offset(pac.REVIVE_GROUP, self.revive_topic, state.queue_id)
            state.read_offset = state.committed + 1
            state.pending = {}
            state.loaded = True
        self.consume_revive_message(state)

        now = self.broker.node.now_ms()
        revived: list[tuple[PopCheckPoint, list[int]]] = []
        for key, ck in list(state.pending.items()):
            if not self.should_run_pop_revive:
                return
            if now < ck.revive_time + self._escaped_record_margin(ck):
                continue
            normal_topic = parse_normal_topic(ck.topic, ck.cid)
            if self.broker.topic_config_manager.select_topic_config(normal_topic) is None:
                log.warning("reviveQueueId=%s, can not get normal topic %s, then continue", state.queue_id, ck.topic)
                del state.pending[key]
                continue
            if self.broker.subscription_group_manager.find_subscription_group_config(ck.cid) is None:
                log.warning("reviveQueueId=%s, can not get cid %s, then continue", state.queue_id, ck.cid)
                del state.pending[key]
                continue
            done = await self.revive_msg_from_ck(state, ck)
            if done is None:
                continue  # something could not be stored: pending, tried again next round
            del state.pending[key]
            revived.append((ck, done))

        if state.pending:
            new_committed = min(ck.revive_offset for ck in state.pending.values()) - 1
        else:
            new_committed = state.read_offset - 1
        # Revived beyond the committed offset: acks so that a re-read finds them done.
        for ck, offsets in revived:
            if ck.revive_offset > new_committed:
                for offset in offsets:
                    await self.append_revived_ack(state.queue_id, ck, offset)
        if new_committed > state.committed:
            cof.commit_offset(pac.LOCAL_HOST, pac.REVIVE_GROUP, self.revive_topic, state.queue_id, new_committed)
            state.committed = new_committed

    def _escaped_record_margin(self, ck: PopCheckPoint) -> int:
        """0 for the broker's own checkpoints; ``ackTimeInterval`` + 1 s for one another broker
        name's acting slave escaped here (module docstring)."""
        own = self.broker.broker_config.brokerName
        return pac.ACK_TIME_INTERVAL + pac.SECOND if ck.broker_name and ck.broker_name != own else 0

    def consume_revive_message(self, state: ReviveQueueState) -> None:
        """``consumeReviveMessage``: read the revive queue from ``read_offset`` to its end."""
        store = self.broker.message_store
        bc = self.broker.broker_config
        while True:
            result = store.get_message(pac.REVIVE_GROUP, self.revive_topic, state.queue_id, state.read_offset,
                                       READ_BATCH, None)
            status = result.status
            if status is GetMessageStatus.FOUND:
                for buffer, queue_offset in zip(result.message_buffers, result.queue_offsets):
                    self._handle_revive_message(state, buffer, queue_offset)
                state.read_offset = result.next_begin_offset
                continue
            if status in (GetMessageStatus.OFFSET_TOO_SMALL, GetMessageStatus.OFFSET_OVERFLOW_BADLY):
                # getReviveMessage: OFFSET_ILLEGAL -> commit nextBeginOffset - 1 and go on from there.
                log.error("reviveQueueId=%s, OFFSET_ILLEGAL %s, result is %s", state.queue_id, state.read_offset,
                          status.name)
                state.read_offset = result.next_begin_offset
                state.committed = result.next_begin_offset - 1
                self.broker.consumer_offset_manager.commit_offset(pac.LOCAL_HOST, pac.REVIVE_GROUP, self.revive_topic,
                                                                  state.queue_id, state.committed)
                if status is GetMessageStatus.OFFSET_TOO_SMALL:
                    continue
            if bc.enablePopLog:
                log.info("reviveQueueId=%s, reach tail,offset %s", state.queue_id, state.read_offset)
            return

    def _handle_revive_message(self, state: ReviveQueueState, buffer: bytes, queue_offset: int) -> None:
        try:
            msg = decode(buffer, check_crc=False)
        except ValueError:
            log.error("reviveQueueId=%s, undecodable revive message at %s", state.queue_id, queue_offset)
            return
        tags = msg.tags
        if tags == pac.CK_TAG:
            try:
                point = PopCheckPoint.from_json(msg.body or b"")
            except ValueError as e:
                log.error("reviveQueueId=%s, bad ck at %s: %s", state.queue_id, queue_offset, e)
                return
            if point.topic is None or point.cid is None:
                return
            point.revive_offset = queue_offset
            state.pending[merge_key(point.topic, point.cid, point.queue_id, point.start_offset, point.pop_time,
                                    point.broker_name)] = point
        elif tags == pac.ACK_TAG:
            try:
                ack = AckMsg.from_json(msg.body or b"")
            except ValueError as e:
                log.error("reviveQueueId=%s, bad ack at %s: %s", state.queue_id, queue_offset, e)
                return
            broker_name = ack.broker_name if ack.broker_name and ack.broker_name.strip() \
                else self.broker.broker_config.brokerName
            key = merge_key(ack.topic, ack.consumer_group, ack.queue_id, ack.start_offset, ack.pop_time, broker_name)
            point = state.pending.get(key)
            if point is None:
                return  # enableSkipLongAwaitingAck off: an ack without its checkpoint is skipped
            index = point.index_of_ack(ack.ack_offset)
            if index > -1:
                point.set_acked(index)
                if all(point.is_acked(i) for i in range(point.num)):
                    del state.pending[key]  # nothing left to revive
            else:
                log.error("invalid ack index, %s, %s", ack, point)

    # -- reviving -------------------------------------------------------------------------------
    async def revive_msg_from_ck(self, state: ReviveQueueState, ck: PopCheckPoint) -> list[int] | None:
        """``reviveMsgFromCk``: the offsets put back (None if one could not be stored)."""
        done: list[int] = []
        failed = False
        for j in range(ck.num):
            if ck.is_acked(j):
                continue
            msg_offset = ck.ack_offset_by_index(j)
            # The checkpoint's broker name: a checkpoint an acting slave escaped here names the slave's
            # group, and the message is read from it (EscapeBridge.get_message_async).
            message, info, need_retry = await self.broker.escape_bridge.get_message_async(
                ck.topic, msg_offset, ck.queue_id, ck.broker_name or self.broker.broker_config.brokerName)
            if message is None and need_retry:
                # RocketMQ re-puts the checkpoint (rePutCK); here it stays pending (module docstring).
                log.warning("reviveQueueId=%s, can not get biz msg, need retry: %s, topic:%s, qid:%s, offset:%s, "
                            "brokerName:%s", state.queue_id, info, ck.topic, ck.queue_id, msg_offset, ck.broker_name)
                failed = True
                continue
            if message is None:
                log.info("reviveQueueId=%s, can not get biz msg, topic:%s, qid:%s, offset:%s, brokerName:%s, "
                         "then continue", state.queue_id, ck.topic, ck.queue_id, msg_offset, ck.broker_name)
                ck.set_acked(j)
                continue
            if await self.revive_retry(ck, message):
                ck.set_acked(j)  # in memory only: a retry of this ck skips it
                done.append(msg_offset)
            else:
                failed = True
        return None if failed else done

    async def revive_retry(self, ck: PopCheckPoint, message: MessageExt) -> bool:
        """``reviveRetry``: put ``message`` into the pop retry topic (see the module docstring)."""
        broker = self.broker
        topic = ck.topic if ck.topic.startswith(RETRY_GROUP_TOPIC_PREFIX) else build_pop_retry_topic(ck.topic, ck.cid)
        inner = MessageExtBrokerInner(topic=topic, body=message.body, flag=message.flag)
        inner.queue_id = 0
        props: dict[str, str] = {}
        if message.tags is not None:
            props[MessageConst.PROPERTY_TAGS] = message.tags
        inner.born_timestamp = message.born_timestamp
        inner.sys_flag = message.sys_flag
        inner.born_host = broker.store_host
        inner.store_host = broker.store_host
        inner.reconsume_times = message.reconsume_times + 1
        props.update(message.properties)
        if message.reconsume_times == 0 or props.get(MessageConst.PROPERTY_FIRST_POP_TIME) is None:
            props[MessageConst.PROPERTY_FIRST_POP_TIME] = str(ck.pop_time)
        inner.properties = props
        inner.properties_string = properties_to_java_string(props, NEW_MESSAGE_MAP_CAPACITY)
        self.add_retry_topic_if_not_exist(topic, ck.cid)
        put = await broker.escape_bridge.put_message_to_specific_queue(inner)
        if broker.broker_config.enablePopLog:
            log.info("reviveQueueId=?,retry msg, ck=%s, msg queueId %s, offset %s, result is %s", ck,
                     message.queue_id, message.queue_offset, put.put_message_status.name)
        if not is_put_ok(put):
            log.error("revive error, msg is: %s, %s", inner.topic, put.put_message_status.name)
            return False
        self.revived_count += 1
        broker.broker_stats.on_put(put.append_message_result.wrote_bytes if put.append_message_result else 0)
        return True

    def add_retry_topic_if_not_exist(self, topic: str, consumer_group: str) -> None:
        tcm = self.broker.topic_config_manager
        if tcm.select_topic_config(topic) is not None:
            return
        tc = TopicConfig(topic, pac.RETRY_QUEUE_NUM, pac.RETRY_QUEUE_NUM)
        tc.topic_filter_type = TopicFilterType.SINGLE_TAG
        tc.perm = 6
        tc.topic_sys_flag = 0
        tcm.update_topic_config(tc)
        # initPopRetryOffset
        cof = self.broker.consumer_offset_manager
        if cof.query_offset(consumer_group, topic, 0) < 0:
            cof.commit_offset("initPopRetryOffset", consumer_group, topic, 0, 0)

    async def append_revived_ack(self, revive_qid: int, ck: PopCheckPoint, offset: int) -> None:
        """rmqlab's marker for a checkpoint revived beyond the committed offset (module docstring)."""
        from rmqlab.broker.processor.pop_message_processor import build_revive_message, gen_ack_unique_id
        ack = AckMsg(ack_offset=offset, start_offset=ck.start_offset, consumer_group=ck.cid, topic=ck.topic,
                     queue_id=ck.queue_id, pop_time=ck.pop_time, broker_name=ck.broker_name)
        msg = build_revive_message(self.broker, self.revive_topic, ack.encode(), revive_qid, pac.ACK_TAG,
                                   ck.revive_time, gen_ack_unique_id(ack))
        put = await self.broker.escape_bridge.put_message_to_specific_queue(msg)
        if not is_put_ok(put):
            log.error("revive: put ack of revived offset failed: %s, %s", ack, put.put_message_status.name)
