"""QueueLockManager: one try-lock per (topic, group, queueId) for POP (RocketMQ 5
``PopMessageProcessor.QueueLockManager`` and ``TimedLock`` in
``broker/src/main/java/org/apache/rocketmq/broker/processor/PopMessageProcessor.java``).

A pop holds the lock of a queue from reading its offset to committing the new one (after its
checkpoint is stored), so two pops never return the same messages. A pop that finds a queue
locked skips it and only counts its backlog (``restNum``). The lock key is
``topic@group@queueId``. Locks unused for 60 s are dropped by :meth:`clean_unused_lock`, which
the broker runs every 60 s, on the node's clock.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from rmqlab.common.key_builder import build_polling_key

log = logging.getLogger("RocketmqPop")

CLEAN_INTERVAL_MS = 60_000


class TimedLock:
    """``TimedLock``: a flag and when it was last taken."""

    __slots__ = ("lock", "lock_time")

    def __init__(self, now_ms: int):
        self.lock = False
        self.lock_time = now_ms

    def try_lock(self, now_ms: int) -> bool:
        if self.lock:
            return False
        self.lock, self.lock_time = True, now_ms
        return True

    def un_lock(self) -> None:
        self.lock = False


class QueueLockManager:
    def __init__(self, clock: Callable[[], int]):
        self.clock = clock
        self.expired_local_cache: dict[str, TimedLock] = {}

    @staticmethod
    def build_lock_key(topic: str, consumer_group: str, queue_id: int) -> str:
        return build_polling_key(topic, consumer_group, queue_id)

    def try_lock(self, key: str) -> bool:
        lock = self.expired_local_cache.get(key)
        if lock is None:
            lock = self.expired_local_cache[key] = TimedLock(self.clock())
        return lock.try_lock(self.clock())

    def un_lock(self, key: str) -> None:
        lock = self.expired_local_cache.get(key)
        if lock is not None:
            lock.un_lock()

    def is_locked(self, key: str) -> bool:
        lock = self.expired_local_cache.get(key)
        return lock is not None and lock.lock

    def clean_unused_lock(self, used_expire_millis: int = CLEAN_INTERVAL_MS) -> int:
        """``cleanUnusedLock``: drop locks last taken more than ``used_expire_millis`` ago; the
        number of locks before the clean (as Java counts). Deviation: a lock that is held is kept
        (RocketMQ may drop it, letting a second pop take a fresh lock on the same queue)."""
        now = self.clock()
        total = len(self.expired_local_cache)
        for key in [k for k, v in self.expired_local_cache.items() if now - v.lock_time > used_expire_millis and not v.lock]:
            lock = self.expired_local_cache.pop(key)
            log.info("Remove unused queue lock: %s, %s, %s", key, lock.lock_time, lock.lock)
        return total
