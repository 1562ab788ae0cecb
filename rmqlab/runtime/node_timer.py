"""NodeTimer: a timer on a node's own clock, shared by the simulated and the real node.

Both runtimes let the nemesis stop a node's clock (and the simulator stops timers of a suspended
node), so a timer keeps its deadline in node time and is (re-)armed on the event loop only while
the node's clock runs. The node gives each timer its clock (`clock_ms`) and its registry of pending
timers (`timers`, keyed by id), which the timer leaves when it fires or is cancelled.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any


class NodeTimer:
    def __init__(self, clock_ms: Callable[[], float], timers: dict[int, NodeTimer], loop: asyncio.AbstractEventLoop,
                 deadline_ms: float, callback: Callable[..., Any], args: tuple):
        self.clock_ms, self.timers = clock_ms, timers
        self.loop, self.deadline_ms, self.callback, self.args = loop, deadline_ms, callback, args
        self.handle: asyncio.TimerHandle | None = None
        self.cancelled = False

    def cancel(self) -> None:
        self.cancelled = True
        if self.handle is not None:
            self.handle.cancel()
            self.handle = None
        self.timers.pop(id(self), None)

    def arm(self) -> None:
        delay_s = max(0.0, self.deadline_ms - self.clock_ms()) / 1000.0
        self.handle = self.loop.call_later(delay_s, self._fire)

    def _fire(self) -> None:
        self.handle = None
        if self.clock_ms() < self.deadline_ms - 1e-3:
            # The loop's clock and the node's can disagree (a real node's clock was paused): not
            # due yet in node time. Within a microsecond it is float rounding, and it is due.
            self.arm()
            return
        self.timers.pop(id(self), None)
        if not self.cancelled:
            self.callback(*self.args)
