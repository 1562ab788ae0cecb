"""ProcessQueue: the messages of one queue a push consumer has pulled and not yet finished
(``client/impl/consumer/ProcessQueue.java``).

Messages are kept by queue offset. The offset the consumer may commit after consuming some of them
is the smallest offset still held, or one past the largest ever held when none is left
(``removeMessage``): a message that is slow, or being retried locally, holds the committed offset
back, so a restart re-delivers it rather than skipping it. ``dropped`` is set when rebalancing
gives the queue to another consumer (or the pull offset turned illegal): its pulls stop and what
it still holds is not committed.

Orderly consumption (ConsumeMessageOrderlyService) uses the rest: ``locked`` and
``last_lock_timestamp`` (the broker granted this client the queue's lock; the client counts the
lock as expired 30 s after the last grant, half the broker's 60 s, so it stops before the broker
could give the queue to another client), ``take_messages`` moving messages in offset order into
``consuming_msg_orderly_tree_map`` while the listener has them, ``commit`` /
``make_message_to_consume_again`` / ``rollback`` ending that, and ``consume_lock``, held while the
listener runs so that a rebalance does not unlock a queue in the middle of a message.
"""

from __future__ import annotations

import asyncio

from rmqlab.common.message.message import MessageExt


class ProcessQueue:
    # A queue not pulled for this long is considered stuck and is re-created by the next
    # rebalance (rocketmq.client.pull.pullMaxIdleTime).
    PULL_MAX_IDLE_TIME = 120_000
    # rocketmq.client.rebalance.lockMaxLiveTime: the client's view of a lock's life.
    REBALANCE_LOCK_MAX_LIVE_TIME = 30_000
    # rocketmq.client.rebalance.lockInterval: how often an orderly consumer renews its locks (lockAll).
    REBALANCE_LOCK_INTERVAL = 20_000

    def __init__(self, now_ms: int):
        self.msg_tree_map: dict[int, MessageExt] = {}
        self.queue_offset_max = 0
        self.msg_size = 0
        self.dropped = False
        self.last_pull_timestamp = now_ms
        self.last_consume_timestamp = now_ms
        # Orderly consumption (see the module docstring).
        self.locked = False
        self.last_lock_timestamp = now_ms
        self.consuming = False
        self.consuming_msg_orderly_tree_map: dict[int, MessageExt] = {}
        self.consume_lock = ConsumeLock()
        self.try_unlock_times = 0

    @property
    def msg_count(self) -> int:
        return len(self.msg_tree_map) + len(self.consuming_msg_orderly_tree_map)

    def is_pull_expired(self, now_ms: int) -> bool:
        return now_ms - self.last_pull_timestamp > self.PULL_MAX_IDLE_TIME

    def is_lock_expired(self, now_ms: int) -> bool:
        return now_ms - self.last_lock_timestamp > self.REBALANCE_LOCK_MAX_LIVE_TIME

    def put_message(self, msgs: list[MessageExt]) -> bool:
        """Hold ``msgs``; True when an orderly consumer must start consuming the queue (it held
        messages and was not already consuming them: ``dispatchToConsume``)."""
        for msg in msgs:
            if msg.queue_offset not in self.msg_tree_map:
                self.msg_tree_map[msg.queue_offset] = msg
                self.queue_offset_max = msg.queue_offset
                self.msg_size += len(msg.body or b"")
        if self.msg_tree_map and not self.consuming:
            self.consuming = True
            return True
        return False

    def get_max_span(self) -> int:
        """Offsets between the first and last message held (flow control of concurrent consumption)."""
        if not self.msg_tree_map:
            return 0
        return max(self.msg_tree_map) - min(self.msg_tree_map)

    def contains_message(self, msg: MessageExt) -> bool:
        return msg.queue_offset in self.msg_tree_map

    def remove_message(self, msgs: list[MessageExt], now_ms: int) -> int:
        """Forget ``msgs``; the offset to commit now, or -1 when nothing was held."""
        self.last_consume_timestamp = now_ms
        if not self.msg_tree_map:
            return -1
        result = self.queue_offset_max + 1
        for msg in msgs:
            prev = self.msg_tree_map.pop(msg.queue_offset, None)
            if prev is not None:
                self.msg_size -= len(prev.body or b"")
        if self.msg_tree_map:
            result = min(self.msg_tree_map)
        return result

    # -- orderly consumption ---------------------------------------------------------------------
    def take_messages(self, batch_size: int, now_ms: int) -> list[MessageExt]:
        """The ``batch_size`` lowest offsets held, moved to the consuming map; none left ends the
        queue's consuming (the next pull that finds messages dispatches it again)."""
        self.last_consume_timestamp = now_ms
        result = []
        for offset in sorted(self.msg_tree_map)[:batch_size]:
            msg = self.msg_tree_map.pop(offset)
            self.consuming_msg_orderly_tree_map[offset] = msg
            result.append(msg)
        if not result:
            self.consuming = False
        return result

    def commit(self) -> int:
        """The messages being consumed are done: the offset to commit (one past the last), or -1."""
        if not self.consuming_msg_orderly_tree_map:
            return -1
        offset = max(self.consuming_msg_orderly_tree_map)
        for msg in self.consuming_msg_orderly_tree_map.values():
            self.msg_size -= len(msg.body or b"")
        self.consuming_msg_orderly_tree_map.clear()
        return offset + 1

    def make_message_to_consume_again(self, msgs: list[MessageExt]) -> None:
        for msg in msgs:
            self.consuming_msg_orderly_tree_map.pop(msg.queue_offset, None)
            self.msg_tree_map[msg.queue_offset] = msg

    def rollback(self) -> None:
        self.msg_tree_map.update(self.consuming_msg_orderly_tree_map)
        self.consuming_msg_orderly_tree_map.clear()

    def has_temp_message(self) -> bool:
        return bool(self.msg_tree_map)


class ConsumeLock:
    """``ProcessQueue.consumeLock`` (a ReentrantReadWriteLock): the listener runs under the read
    lock; a rebalance removing the queue takes the write lock (``try_write_lock``, 500 ms) before it
    unlocks the queue at the broker. An asyncio condition: only an asynchronous listener can be
    seen holding it."""

    def __init__(self) -> None:
        self.readers = 0
        self.writer = False
        self._changed = asyncio.Condition()

    async def acquire_read(self) -> None:
        async with self._changed:
            await self._changed.wait_for(lambda: not self.writer)
            self.readers += 1

    async def release_read(self) -> None:
        async with self._changed:
            self.readers -= 1
            self._changed.notify_all()

    async def try_write_lock(self, node, timeout_ms: float) -> bool:
        """Wait at most ``timeout_ms`` (the node's clock) for no reader; True when taken."""
        async def take() -> None:
            async with self._changed:
                await self._changed.wait_for(lambda: not self.writer and self.readers == 0)
                self.writer = True

        if not self.writer and self.readers == 0:
            self.writer = True
            return True
        task = node.spawn(take(), name="ProcessQueue.consumeLock")
        timed_out = []

        def time_out() -> None:
            if not task.done():
                timed_out.append(True)
                task.cancel()

        timer = node.call_later(timeout_ms, time_out)
        try:
            await task
        except asyncio.CancelledError:
            if timed_out:
                return False
            raise
        finally:
            timer.cancel()
        return True

    async def release_write(self) -> None:
        async with self._changed:
            self.writer = False
            self._changed.notify_all()
