"""What a push consumer's listener returns and receives (``client/consumer/listener/``:
``ConsumeConcurrentlyStatus``, ``ConsumeConcurrentlyContext``, ``MessageListenerConcurrently``).

A listener is a plain function ``listener(msgs, context) -> ConsumeConcurrentlyStatus``, called with
at most ``consume_message_batch_max_size`` (1) messages of one queue. Raising, or returning
anything but CONSUME_SUCCESS, counts as RECONSUME_LATER, as in ConsumeMessageConcurrentlyService.
"""

from __future__ import annotations

import enum
from collections.abc import Callable
from dataclasses import dataclass

from rmqlab.common.message.message import MessageExt
from rmqlab.remoting.protocol.header.broker.admin import MessageQueue


class ConsumeConcurrentlyStatus(enum.Enum):
    CONSUME_SUCCESS = "CONSUME_SUCCESS"
    RECONSUME_LATER = "RECONSUME_LATER"


@dataclass
class ConsumeConcurrentlyContext:
    message_queue: MessageQueue
    # Java: 0 lets the broker pick the next delay level (3 + reconsumeTimes); used by send-back.
    delay_level_when_next_consume: int = 0
    # For batch consumption: the index of the last message consumed successfully.
    ack_index: int = 0x7FFFFFFF


MessageListenerConcurrently = Callable[[list[MessageExt], ConsumeConcurrentlyContext], ConsumeConcurrentlyStatus]
