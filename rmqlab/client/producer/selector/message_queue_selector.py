"""MessageQueueSelector: picks the queue of an ordered send (``client/producer/MessageQueueSelector.java``;
rmqlab keeps it beside its implementations).

``DefaultMQProducer.send(msg, selector=..., arg=...)`` (Java's ``send(msg, selector, arg)``,
``DefaultMQProducerImpl.sendSelectImpl``) asks the selector for one of the topic's queues and sends
there, once, without retrying on another queue: messages with the same ``arg`` (a sharding key: an
order id) land in one queue, in the order they were sent, so an orderly consumer sees them in that
order.
"""

from __future__ import annotations

import abc
from typing import Any

from rmqlab.common.message.message import Message
from rmqlab.remoting.protocol.header.broker.admin import MessageQueue


class MessageQueueSelector(abc.ABC):
    @abc.abstractmethod
    def select(self, mqs: list[MessageQueue], msg: Message, arg: Any) -> MessageQueue:
        """One of ``mqs`` (the topic's publish queues, in route order) for ``msg``."""
