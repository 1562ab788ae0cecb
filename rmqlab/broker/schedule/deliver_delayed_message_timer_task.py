"""Delayed messages (delay levels): parking them in SCHEDULE_TOPIC_XXXX and delivering them on time.

RocketMQ ``broker/src/main/java/org/apache/rocketmq/broker/util/HookUtils.java``
(``handleScheduleMessage``, ``transformDelayLevelMessage``) and the delivery half of
``broker/.../schedule/ScheduleMessageService.java`` (``DeliverDelayedMessageTimerTask``,
``messageTimeUp``, ``correctDelayOffset``); the metadata half (levels, delayOffset.json) is
``rmqlab.broker.schedule.schedule_message_service``.

1. A message sent with ``DELAY`` = n > 0 (not a transaction half message) is stored in queue n-1 of
   SCHEDULE_TOPIC_XXXX instead of its topic, with ``REAL_TOPIC`` / ``REAL_QID`` remembering where it
   belongs (a level above the highest is clamped to it). The store's dispatcher writes its deliver
   time (store time + the level's delay) as the consume-queue tags code.
2. On the group's master (the special services; with slave acting master, the smallest-id live
   slave while the group has no master), one task per level walks its queue from the
   level's offset: a unit whose deliver time has come is read back, turned into the original
   message (``messageTimeUp``: topic and queue restored, ``WAIT=false``), and put again through
   the EscapeBridge (``rmqlab.broker.failover.escape_bridge``, ``put_message``); the level's
   offset advances past it (``updateOffset``, persisted every ``flushDelayOffsetInterval``). A unit
   not yet due stops the walk until 100 ms later; a failed put retries 100 ms later. The first run
   is 1 s after start.

**Quirk** kept from RocketMQ: ``messageTimeUp`` takes the properties string before clearing
``DELAY`` and the timer properties, so the delivered message still carries ``DELAY``,
``REAL_TOPIC`` and ``REAL_QID`` on disk (consumers see them); only the in-memory map loses them.

The broker's put hook is ``rmqlab.broker.util.hook_utils.handle_schedule_message``, which also
parks timer messages (``TIMER_DELIVER_MS`` / ``TIMER_DELAY_SEC`` / ``TIMER_DELAY_MS``, RIP-43) for
``rmqlab.store.timer``; ``handle_schedule_message`` below is its form without a timer wheel (such a
message is refused as with ``timerWheelEnable=false``).

Not implemented: asynchronous delivery (``enableScheduleAsyncDeliver``, off by default).
"""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING

from rmqlab.common.java_compat import java_parse_int
from rmqlab.common.message.message import MessageExt, MessageExtBrokerInner
from rmqlab.common.message.message_const import MessageConst
from rmqlab.common.message.message_decoder import properties_to_java_string
from rmqlab.common.message.message_decoder import decode
from rmqlab.common.message.message_sys_flag import MessageSysFlag
from rmqlab.common.topic.topic_validator import TopicValidator
from rmqlab.store.put_message_result import PutMessageResult, PutMessageStatus

if TYPE_CHECKING:
    from rmqlab.broker.broker_controller import BrokerController
    from rmqlab.broker.schedule.schedule_message_service import ScheduleMessageService

log = logging.getLogger("rmqlab.broker")

FIRST_DELAY_TIME = 1000
DELAY_FOR_A_WHILE = 100
DELAY_FOR_A_PERIOD = 10000

_TIMER_PROPERTIES = (MessageConst.PROPERTY_TIMER_DELIVER_MS, MessageConst.PROPERTY_TIMER_DELAY_SEC,
                     MessageConst.PROPERTY_TIMER_DELAY_MS)


def handle_schedule_message(msg: MessageExtBrokerInner, schedule: ScheduleMessageService) -> PutMessageResult | None:
    """``HookUtils.handleScheduleMessage`` (a put hook): park a delay-level message; refuse a timer
    message (no timer wheel). None means "put it as it is now"."""
    tran_type = MessageSysFlag.get_transaction_value(msg.sys_flag)
    if tran_type not in (MessageSysFlag.TRANSACTION_NOT_TYPE, MessageSysFlag.TRANSACTION_COMMIT_TYPE):
        return None
    level = msg.delay_time_level
    if level > 0:
        # checkIfTimerMessage: a delay level wins; the timer properties are dropped.
        if any(msg.properties.get(p) is not None for p in _TIMER_PROPERTIES):
            for p in _TIMER_PROPERTIES:
                msg.properties.pop(p, None)
            msg.properties_string = properties_to_java_string(msg.properties)
    elif (msg.topic != "rmq_sys_wheel_timer" and msg.properties.get(MessageConst.PROPERTY_TIMER_OUT_MS) is None
          and any(msg.properties.get(p) is not None for p in _TIMER_PROPERTIES)):
        return PutMessageResult(PutMessageStatus.WHEEL_TIMER_NOT_ENABLE)
    if level > 0:
        transform_delay_level_message(msg, schedule)
    return None


def transform_delay_level_message(msg: MessageExtBrokerInner, schedule: ScheduleMessageService) -> None:
    """``transformDelayLevelMessage``: remember the real topic and queue, park in the level's queue."""
    level = min(msg.delay_time_level, schedule.max_delay_level)
    msg.properties[MessageConst.PROPERTY_DELAY_TIME_LEVEL] = str(level)
    msg.properties[MessageConst.PROPERTY_REAL_TOPIC] = msg.topic
    msg.properties[MessageConst.PROPERTY_REAL_QUEUE_ID] = str(msg.queue_id)
    msg.properties_string = properties_to_java_string(msg.properties)
    msg.topic = TopicValidator.RMQ_SYS_SCHEDULE_TOPIC
    msg.queue_id = schedule.delay_level2_queue_id(level)


def message_time_up(msg_ext: MessageExt) -> MessageExtBrokerInner:
    """``messageTimeUp``: the parked message as it goes back to its real topic (see the quirk in
    the module docstring)."""
    inner = MessageExtBrokerInner(topic=msg_ext.topic, body=msg_ext.body, flag=msg_ext.flag)
    props = dict(msg_ext.properties)
    properties_string = properties_to_java_string(props)
    inner.sys_flag = msg_ext.sys_flag
    inner.born_timestamp = msg_ext.born_timestamp
    inner.born_host = msg_ext.born_host
    inner.store_host = msg_ext.store_host
    inner.reconsume_times = msg_ext.reconsume_times
    props[MessageConst.PROPERTY_WAIT_STORE_MSG_OK] = "false"
    for name in (MessageConst.PROPERTY_DELAY_TIME_LEVEL, MessageConst.PROPERTY_TIMER_DELIVER_MS,
                 MessageConst.PROPERTY_TIMER_DELAY_SEC):
        props.pop(name, None)
    inner.properties = props
    inner.properties_string = properties_string
    inner.topic = props.get(MessageConst.PROPERTY_REAL_TOPIC)
    inner.queue_id = java_parse_int(props.get(MessageConst.PROPERTY_REAL_QUEUE_ID))
    return inner


def correct_delay_offset(broker: BrokerController) -> None:
    """``correctDelayOffset``: keep each level's offset within its queue (after a restart)."""
    schedule, store = broker.schedule_message_service, broker.message_store
    for level in schedule.delay_level_table:
        current = schedule.offset_table.get(level)
        if current is None:
            continue
        queue_id = schedule.delay_level2_queue_id(level)
        low = store.get_min_offset_in_queue(TopicValidator.RMQ_SYS_SCHEDULE_TOPIC, queue_id)
        high = store.get_max_offset_in_queue(TopicValidator.RMQ_SYS_SCHEDULE_TOPIC, queue_id)
        corrected = min(max(current, low), high)
        if corrected != current:
            log.error("schedule CQ offset invalid. offset=%s, cqMinOffset=%s, cqMaxOffset=%s, queueId=%s",
                      current, low, high, queue_id)
            schedule.offset_table[level] = corrected


class DeliverDelayedMessageTimerTask:
    """One delay level's delivery loop (RocketMQ schedules a new task object per step; one task
    that sleeps between steps is the same on a Node).

    Deviation, for the simulator's sake: RocketMQ runs a step every DELAY_FOR_A_WHILE (100 ms) even
    when the level's queue holds nothing due. Here the task sleeps through the steps that would
    find nothing to do and wakes at the first one of that same 100 ms schedule that finds
    something: the one at or after the head unit's deliver time, or, with nothing past the offset,
    the one after a unit is dispatched into the level's queue (`notify_arriving`). Deliveries
    happen at the same times; eighteen idle levels no longer cost 180 steps a second."""

    def __init__(self, broker: BrokerController, delay_level: int, offset: int):
        self.broker = broker
        self.delay_level = delay_level
        self.queue_id = broker.schedule_message_service.delay_level2_queue_id(delay_level)
        self.offset = offset
        self.started = True
        self._arriving: asyncio.Future | None = None

    def stop(self) -> None:
        self.started = False
        self.notify_arriving()

    def notify_arriving(self) -> None:
        """A unit was dispatched into this level's queue (or the task stops): an idle wait ends."""
        if self._arriving is not None and not self._arriving.done():
            self._arriving.set_result(None)

    async def run(self) -> None:
        await self.broker.node.sleep(FIRST_DELAY_TIME)
        while self.started:
            try:
                delay = await self.execute_on_time_up()
            except Exception:
                log.exception("ScheduleMessageService, executeOnTimeUp exception")
                delay = DELAY_FOR_A_PERIOD
            if delay == DELAY_FOR_A_WHILE:
                await self._sleep_through_idle_steps(delay)
            else:
                await self.broker.node.sleep(delay)

    async def _sleep_through_idle_steps(self, period: int) -> None:
        """Sleep to the first step of the `period` schedule from now that finds work."""
        node = self.broker.node
        begin = node.now_ms()
        while self.started:
            due = self._head_deliver_timestamp()
            if due is not None:
                steps = max(1, -(-(due - begin) // period))  # ceil: the first step at or after `due`
                await node.sleep(begin + steps * period - node.now_ms())
                return
            self._arriving = asyncio.get_running_loop().create_future()
            await self._arriving
            self._arriving = None

    def _head_deliver_timestamp(self) -> int | None:
        """When the first unit past the offset is due (as the step corrects it); None when there
        is none yet."""
        cq = self.broker.message_store.consume_queue_table.get((TopicValidator.RMQ_SYS_SCHEDULE_TOPIC, self.queue_id))
        if cq is None:
            return None
        offset = min(max(self.offset, cq.get_min_offset_in_queue()), cq.get_max_offset_in_queue())
        units = cq.get_units(offset, 1)
        if not units:
            return None
        return self._correct_deliver_timestamp(self.broker.node.now_ms(), units[0][2])

    def _correct_deliver_timestamp(self, now: int, deliver_timestamp: int) -> int:
        max_timestamp = now + self.broker.schedule_message_service.delay_level_table[self.delay_level]
        return now if deliver_timestamp > max_timestamp else deliver_timestamp

    async def execute_on_time_up(self) -> int:
        """One step; returns the delay until the next (sets ``self.offset``)."""
        broker = self.broker
        schedule, store = broker.schedule_message_service, broker.message_store
        queue_id = schedule.delay_level2_queue_id(self.delay_level)
        cq = store.consume_queue_table.get((TopicValidator.RMQ_SYS_SCHEDULE_TOPIC, queue_id))
        if cq is None:
            return DELAY_FOR_A_WHILE
        units = cq.get_units(self.offset, 1024)  # iterateFrom: the rest of the current file
        if not units:
            low, high = cq.get_min_offset_in_queue(), cq.get_max_offset_in_queue()
            if low > self.offset:
                log.error("schedule CQ offset invalid. offset=%s, cqMinOffset=%s, queueId=%s", self.offset, low, queue_id)
                self.offset = low
            elif high < self.offset:
                log.error("schedule CQ offset invalid. offset=%s, cqMaxOffset=%s, queueId=%s", self.offset, high,
                          queue_id)
                self.offset = high
            return DELAY_FOR_A_WHILE
        for offset_py, size_py, tags_code in units:
            if not self.started:
                break
            now = broker.node.now_ms()
            deliver_timestamp = self._correct_deliver_timestamp(now, tags_code)
            curr_offset = self.offset
            if deliver_timestamp - now > 0:
                schedule.update_offset(self.delay_level, curr_offset)
                return DELAY_FOR_A_WHILE
            data = store.commit_log.get_message(offset_py, size_py)
            if len(data) != size_py:  # lookMessageByOffset found nothing
                self.offset = curr_offset + 1
                continue
            inner = message_time_up(decode(data))
            if inner.topic == TopicValidator.RMQ_SYS_TRANS_HALF_TOPIC:
                log.error("[BUG] the real topic of schedule msg is %s, discard the msg. msg=%s", inner.topic, inner)
                self.offset = curr_offset + 1
                continue
            if not await self._sync_deliver(inner, curr_offset):
                return DELAY_FOR_A_WHILE
            self.offset = curr_offset + 1
        return DELAY_FOR_A_WHILE

    async def _sync_deliver(self, inner: MessageExtBrokerInner, offset: int) -> bool:
        """``syncDeliver``: put it through the EscapeBridge (``EscapeBridge.put_message``: the local
        store on the group's master; on a slave acting as master, the escape to another group's
        master) and move on only when it is stored."""
        store = self.broker.message_store
        if not store.running:
            return False
        result = await self.broker.escape_bridge.put_message(inner)
        ok = result is not None and result.put_message_status is PutMessageStatus.PUT_OK
        if ok:
            self.broker.schedule_message_service.update_offset(self.delay_level, offset + 1)
        else:
            log.error("ScheduleMessageService, a message time up, but reput it failed, topic: %s msgId %s",
                      inner.topic, result.put_message_status if result else None)
        return ok
