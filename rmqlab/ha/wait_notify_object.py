"""WaitNotifyObject: "wait up to N ms unless woken" for the HA services.

Mirrors org.apache.rocketmq.store.ha.WaitNotifyObject's allWaitForRunning / wakeupAll, used by the
master's WriteSocketService: with nothing to send it waits up to 100 ms, and a SYNC_MASTER put
(CommitLog.handleHA) wakes every waiter at once. A wake-up that comes while a waiter is busy is
remembered, so its next wait returns at once (Java's per-thread "notified" flag; here per waiter
key). The timeout is a Node timer, so a suspended node's waiters stay asleep.
"""

from __future__ import annotations

import asyncio
from collections.abc import Hashable

from rmqlab.runtime.node import Node


class _Waiter:
    __slots__ = ("notified", "future")

    def __init__(self) -> None:
        self.notified = False
        self.future: asyncio.Future | None = None


async def wait_at_most(node: Node, future: asyncio.Future, timeout_ms: float) -> None:
    """waitForRunning's timed wait on the node's clock: `future` completes early on a wakeup."""
    timer = node.call_later(timeout_ms, lambda: future.done() or future.set_result(None))
    try:
        await future
    finally:
        timer.cancel()


class WaitNotifyObject:
    def __init__(self, node: Node):
        self.node = node
        self._waiting: dict[Hashable, _Waiter] = {}  # waitingThreadTable

    async def all_wait_for_running(self, key: Hashable, interval_ms: float) -> None:
        waiter = self._waiting.setdefault(key, _Waiter())
        if waiter.notified:
            waiter.notified = False
            return
        future = asyncio.get_running_loop().create_future()
        waiter.future = future
        try:
            await wait_at_most(self.node, future, interval_ms)
        finally:
            waiter.future = None
            waiter.notified = False

    def wakeup_all(self) -> None:
        for waiter in self._waiting.values():
            waiter.notified = True
            if waiter.future is not None and not waiter.future.done():
                waiter.future.set_result(None)

    def remove_from_waiting_thread_table(self, key: Hashable) -> None:
        self._waiting.pop(key, None)
