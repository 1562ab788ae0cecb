"""HookUtils.handleScheduleMessage: the put hook that parks delayed messages.

RocketMQ ``broker/src/main/java/org/apache/rocketmq/broker/util/HookUtils.java``
(``handleScheduleMessage``, ``checkIfTimerMessage``, ``transformTimerMessage``; the delay-level
half, ``transformDelayLevelMessage``, is ``rmqlab.broker.schedule``). For a message that is not a
transaction half/rollback message:

1. ``checkIfTimerMessage``: a message with a delay level (``DELAY`` > 0) is a delay-level message;
   its timer properties (``TIMER_DELIVER_MS``, ``TIMER_DELAY_SEC``, ``TIMER_DELAY_MS``) are dropped.
   A message already in ``rmq_sys_wheel_timer`` or carrying ``TIMER_OUT_MS`` (a timer message being
   delivered) is not one again. Otherwise any of the three timer properties makes it a timer message;
2. a timer message with ``timerWheelEnable=false`` -> WHEEL_TIMER_NOT_ENABLE (SYSTEM_ERROR);
3. ``transformTimerMessage``: the deliver time is now + ``TIMER_DELAY_SEC`` * 1000, else now +
   ``TIMER_DELAY_MS``, else ``TIMER_DELIVER_MS`` (Long.parseLong; not a number ->
   WHEEL_TIMER_MSG_ILLEGAL, i.e. MESSAGE_ILLEGAL). If it is in the future: more than
   ``timerMaxDelaySec`` ahead -> WHEEL_TIMER_MSG_ILLEGAL; else it is rounded down to a
   ``timerPrecisionMs`` slot (a time exactly on a boundary goes one slot back: the slot is
   delivered once the clock has passed it) and stored as ``TIMER_OUT_MS`` with ``REAL_TOPIC`` /
   ``REAL_QID``, in queue 0 of ``rmq_sys_wheel_timer``. A deliver time now or in the past (a delay
   <= 0) leaves the message as it is: it is stored on its topic at once, timer properties and all;
   only a past delete marker (``TIMER_DEL_UNIQKEY``) is refused (WHEEL_TIMER_MSG_ILLEGAL);
4. a delay level > 0 -> SCHEDULE_TOPIC_XXXX (``transform_delay_level_message``).

"now" is the broker node's clock. Not implemented: the flow control (``isReject``:
``timerCongestNumEachSlot``, unlimited by default, so RocketMQ's default never rejects).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from rmqlab.broker.schedule.deliver_delayed_message_timer_task import transform_delay_level_message
from rmqlab.common.java_compat import java_parse_int
from rmqlab.common.message.message import MessageExtBrokerInner
from rmqlab.common.message.message_const import MessageConst
from rmqlab.common.message.message_decoder import properties_to_java_string
from rmqlab.common.message.message_sys_flag import MessageSysFlag
from rmqlab.store.put_message_result import PutMessageResult, PutMessageStatus
from rmqlab.store.timer.timer_message_store import TIMER_TOPIC

if TYPE_CHECKING:
    from rmqlab.broker.broker_controller import BrokerController

TIMER_PROPERTIES = (MessageConst.PROPERTY_TIMER_DELIVER_MS, MessageConst.PROPERTY_TIMER_DELAY_SEC,
                    MessageConst.PROPERTY_TIMER_DELAY_MS)


def _java_long(value: int) -> int:
    """Java long arithmetic wraps around."""
    value &= (1 << 64) - 1
    return value - (1 << 64) if value >= 1 << 63 else value


def handle_schedule_message(broker: BrokerController, msg: MessageExtBrokerInner) -> PutMessageResult | None:
    """``handleScheduleMessage``; None means "put it as it is now"."""
    tran_type = MessageSysFlag.get_transaction_value(msg.sys_flag)
    if tran_type not in (MessageSysFlag.TRANSACTION_NOT_TYPE, MessageSysFlag.TRANSACTION_COMMIT_TYPE):
        return None
    if msg.topic != TIMER_TOPIC and check_if_timer_message(msg):  # not a rolled timer message
        if not broker.message_store_config.timerWheelEnable:
            return PutMessageResult(PutMessageStatus.WHEEL_TIMER_NOT_ENABLE)
        result = transform_timer_message(broker, msg)
        if result is not None:
            return result
    if msg.delay_time_level > 0:
        transform_delay_level_message(msg, broker.schedule_message_service)
    return None


def check_if_timer_message(msg: MessageExtBrokerInner) -> bool:
    """``checkIfTimerMessage`` (drops the timer properties of a delay-level message)."""
    props = msg.properties
    if msg.delay_time_level > 0:
        if any(props.get(name) is not None for name in TIMER_PROPERTIES):
            for name in TIMER_PROPERTIES:
                props.pop(name, None)
            msg.properties_string = properties_to_java_string(props)
        return False
    if msg.topic == TIMER_TOPIC or props.get(MessageConst.PROPERTY_TIMER_OUT_MS) is not None:
        return False
    return any(props.get(name) is not None for name in TIMER_PROPERTIES)


def transform_timer_message(broker: BrokerController, msg: MessageExtBrokerInner) -> PutMessageResult | None:
    """``transformTimerMessage`` (see the module docstring)."""
    props = msg.properties
    msc = broker.message_store_config
    now = broker.node.now_ms()
    try:
        if props.get(MessageConst.PROPERTY_TIMER_DELAY_SEC) is not None:
            deliver_ms = _java_long(now + _java_long(
                java_parse_int(props[MessageConst.PROPERTY_TIMER_DELAY_SEC], 64) * 1000))
        elif props.get(MessageConst.PROPERTY_TIMER_DELAY_MS) is not None:
            deliver_ms = _java_long(now + java_parse_int(props[MessageConst.PROPERTY_TIMER_DELAY_MS], 64))
        else:
            deliver_ms = java_parse_int(props[MessageConst.PROPERTY_TIMER_DELIVER_MS], 64)
    except ValueError:
        return PutMessageResult(PutMessageStatus.WHEEL_TIMER_MSG_ILLEGAL)
    if deliver_ms > now:
        if msg.delay_time_level <= 0 and deliver_ms - now > msc.timerMaxDelaySec * 1000:
            return PutMessageResult(PutMessageStatus.WHEEL_TIMER_MSG_ILLEGAL)
        precision = msc.get_timer_precision_ms()
        if deliver_ms % precision == 0:
            deliver_ms -= precision
        else:
            deliver_ms = deliver_ms // precision * precision
        props[MessageConst.PROPERTY_TIMER_OUT_MS] = str(deliver_ms)
        props[MessageConst.PROPERTY_REAL_TOPIC] = msg.topic
        props[MessageConst.PROPERTY_REAL_QUEUE_ID] = str(msg.queue_id)
        msg.properties_string = properties_to_java_string(props)
        msg.topic = TIMER_TOPIC
        msg.queue_id = 0
    elif props.get(MessageConst.PROPERTY_TIMER_DEL_UNIQKEY) is not None:
        return PutMessageResult(PutMessageStatus.WHEEL_TIMER_MSG_ILLEGAL)
    return None
