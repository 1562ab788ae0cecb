"""ShutdownAbleTask: DLedger's ShutdownAbleThread (a loop of doWork + waitForRunning) as a node task.

DLedger's threads poll: the elector every 10 ms, the pusher's threads every 1 ms. On the simulator a
poll wakes the virtual clock, so thousands of wake-ups per second per member would make a run slow
and its trace long. Here `do_work()` returns when it must run again: a delay in ms (its next
deadline: a heartbeat, a vote, a timeout) or None (only when something changes); whoever changes
something it waits for calls `wakeup()`, as DLedger's `wakeup()` does. A wakeup that comes while
do_work runs is not lost (ServiceThread's hasNotified): the next wait returns at once.
"""

from __future__ import annotations

import abc
import asyncio
import logging
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from rmqlab.runtime.node import Node, Timer


def node_loop(node: Node) -> asyncio.AbstractEventLoop:
    """The event loop the node runs on: the simulator's SimNode names it (a caller outside the loop,
    a test or a notebook, may create futures for it); a real node runs in the running loop."""
    loop = getattr(node, "loop", None)
    return loop if loop is not None else asyncio.get_running_loop()


class ShutdownAbleTask(abc.ABC):
    """Subclasses (the quorum-ack checker, the entry dispatchers and handler, the elector's state
    maintainer) implement `do_work`, as DLedger's ShutdownAbleThread subclasses implement doWork."""

    def __init__(self, name: str, node: Node, log: logging.Logger | None = None):
        self.name = name
        self.node = node
        self.log = log or node.log
        self.running = False
        self._notified = False
        self._waiting: asyncio.Future | None = None
        self._task: asyncio.Task | None = None

    @abc.abstractmethod
    async def do_work(self) -> float | None:
        """One pass; returns the ms until the next pass (None: wait for a wakeup)."""

    def start(self) -> None:
        self.running = True
        self._task = self.node.spawn(self._run(), name=self.name)

    def shutdown(self) -> None:
        self.running = False
        self.wakeup()
        if self._task is not None and not self._task.done():
            self._task.cancel()

    def wakeup(self) -> None:
        self._notified = True
        if self._waiting is not None and not self._waiting.done():
            self._waiting.set_result(None)

    async def _run(self) -> None:
        while self.running:
            try:
                delay = await self.do_work()
            except asyncio.CancelledError:
                raise
            except Exception:
                self.log.exception("%s: error in doWork", self.name)
                delay = 100.0
            if not self.running:
                break
            await self.wait_for_running(delay)

    async def wait_for_running(self, delay_ms: float | None) -> None:
        """waitForRunning: until woken, or `delay_ms` has passed on the node's clock."""
        if self._notified:
            self._notified = False
            await asyncio.sleep(0)  # let others run: a loop that is always woken must not starve them
            return
        fut = asyncio.get_running_loop().create_future()
        self._waiting = fut
        timer: Timer | None = None
        if delay_ms is not None:
            timer = self.node.call_later(max(0.0, delay_ms), lambda: fut.done() or fut.set_result(None))
        try:
            await fut
        finally:
            self._waiting = None
            self._notified = False
            if timer is not None:
                timer.cancel()
