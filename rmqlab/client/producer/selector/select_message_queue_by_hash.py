"""SelectMessageQueueByHash: the queue at ``abs(arg.hashCode() % queues)``
(``client/producer/selector/SelectMessageQueueByHash.java``). The hash is Java's, so a sharding key
picks the same queue from rmqlab as from a Java producer: ``String.hashCode`` over UTF-16 code
units, ``Integer.hashCode`` / ``Long.hashCode`` for numbers; Java's ``%`` keeps the dividend's sign,
then the remainder's absolute value is taken."""

from __future__ import annotations

from typing import Any

from rmqlab.client.producer.selector.message_queue_selector import MessageQueueSelector
from rmqlab.common.message.message import Message
from rmqlab.remoting.protocol.header.broker.admin import MessageQueue


def _to_int32(value: int) -> int:
    value &= 0xFFFFFFFF
    return value - (1 << 32) if value >= 1 << 31 else value


def java_hash_code(arg: Any) -> int:
    """``arg.hashCode()`` as Java computes it for a String, Boolean, Integer or Long."""
    if isinstance(arg, bool):
        return 1231 if arg else 1237
    if isinstance(arg, int):
        if -(1 << 31) <= arg < 1 << 31:
            return arg  # Integer.hashCode
        value = arg & 0xFFFFFFFFFFFFFFFF  # Long.hashCode: (int) (value ^ (value >>> 32))
        return _to_int32(value ^ (value >> 32))
    if isinstance(arg, str):
        h = 0
        data = arg.encode("utf-16-be")
        for i in range(0, len(data), 2):
            h = (31 * h + (data[i] << 8 | data[i + 1])) & 0xFFFFFFFF
        return _to_int32(h)
    raise TypeError(f"no Java hashCode for {type(arg).__name__}: use a str or an int")


class SelectMessageQueueByHash(MessageQueueSelector):
    def select(self, mqs: list[MessageQueue], msg: Message, arg: Any) -> MessageQueue:
        # Math.abs(hashCode % size): Java's remainder has the dividend's sign, so its magnitude is |h| % size.
        return mqs[abs(java_hash_code(arg)) % len(mqs)]
