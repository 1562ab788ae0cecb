"""What an orderly push consumer's listener returns and receives (``client/consumer/listener/``:
``MessageListenerOrderly``, ``ConsumeOrderlyStatus``, ``ConsumeOrderlyContext``).

Java tells the two listener kinds apart by their interface (``registerMessageListener`` is
overloaded); a Python function has no such type, so an orderly listener is a function wrapped in
``MessageListenerOrderly``:

    consumer.register_message_listener(MessageListenerOrderly(lambda msgs, ctx: ConsumeOrderlyStatus.SUCCESS))

The function is called with at most ``consume_message_batch_max_size`` (1) messages of one queue,
one batch of a queue at a time, in queue order. It may be a coroutine function (rmqlab's
deviation, so that a listener can take time on the node's clock while it holds its queue's
consume lock). Raising, or returning no status, counts as SUSPEND_CURRENT_QUEUE_A_MOMENT, as in
ConsumeMessageOrderlyService.
"""

from __future__ import annotations

import enum
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from rmqlab.common.message.message import MessageExt
from rmqlab.remoting.protocol.header.broker.admin import MessageQueue


class ConsumeOrderlyStatus(enum.Enum):
    SUCCESS = "SUCCESS"
    # Deprecated in RocketMQ (transactional consumption was dropped); with autoCommit both count as SUCCESS.
    ROLLBACK = "ROLLBACK"
    COMMIT = "COMMIT"
    SUSPEND_CURRENT_QUEUE_A_MOMENT = "SUSPEND_CURRENT_QUEUE_A_MOMENT"


@dataclass
class ConsumeOrderlyContext:
    message_queue: MessageQueue
    auto_commit: bool = True
    # -1: the consumer's suspendCurrentQueueTimeMillis; clamped to [10, 30000] ms when used.
    suspend_current_queue_time_millis: int = -1


OrderlyListenerFunction = Callable[[list[MessageExt], ConsumeOrderlyContext],
                                   "ConsumeOrderlyStatus | None | Awaitable[ConsumeOrderlyStatus | None]"]


class MessageListenerOrderly:
    """``MessageListenerOrderly``: ``consume_message(msgs, context)`` calls the wrapped function."""

    __slots__ = ("function",)

    def __init__(self, function: OrderlyListenerFunction):
        self.function = function

    def consume_message(self, msgs: list[MessageExt], context: ConsumeOrderlyContext):
        return self.function(msgs, context)
