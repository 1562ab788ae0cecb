"""MessageQueueLock: one lock per queue, so that one consume request at a time runs a queue's
messages (``client/impl/consumer/MessageQueueLock.java``; Java synchronizes on an object per queue,
rmqlab awaits an asyncio lock)."""

from __future__ import annotations

import asyncio

from rmqlab.remoting.protocol.header.broker.admin import MessageQueue


class MessageQueueLock:
    def __init__(self) -> None:
        self.mq_lock_table: dict[MessageQueue, asyncio.Lock] = {}

    def fetch_lock_object(self, mq: MessageQueue) -> asyncio.Lock:
        lock = self.mq_lock_table.get(mq)
        if lock is None:
            lock = self.mq_lock_table[mq] = asyncio.Lock()
        return lock
