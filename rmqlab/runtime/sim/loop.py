"""SimLoop: an asyncio event loop on a virtual clock.

asyncio's loop asks its selector to wait for I/O until the next timer is due. The simulator has
no file descriptors, so the "selector" here never waits: it moves the virtual clock forward by the
timeout instead. Everything that is runnable runs at the current virtual instant; when nothing is,
time jumps to the next timer. Ready callbacks run in FIFO order and timers in time order (timers
due at the same instant in the heap's order, which depends only on the pushes and pops before),
so a run is a pure function of its inputs: no wall clock, no threads.
"""

from __future__ import annotations

import asyncio
import asyncio.base_events
import asyncio.events


def _earliest_timer(loop: asyncio.base_events.BaseEventLoop) -> float | None:
    """When the loop's earliest timer is due; None without one. CPython's BaseEventLoop keeps its
    timers in the heap `_scheduled` and has no public accessor for it: the one read of its internals."""
    scheduled = loop._scheduled
    return scheduled[0].when() if scheduled else None


class SimulationDeadlock(RuntimeError):
    """Nothing can run and no timer is pending, yet the awaited result is not there."""


class _VirtualSelector:
    def __init__(self, loop: SimLoop):
        self._loop = loop

    def select(self, timeout: float | None):
        if timeout is None:
            raise SimulationDeadlock("the simulation is waiting for something that can never happen "
                                     "(no task is runnable and no timer is pending)")
        if timeout > 0:
            self._loop.advance(timeout)
        return []

    def close(self) -> None:
        pass


class SimLoop(asyncio.base_events.BaseEventLoop):
    def __init__(self) -> None:
        super().__init__()
        self._now = 0.0  # virtual seconds since the start of the simulation
        self._selector = _VirtualSelector(self)
        # Timers due within this resolution run together; keep it tiny so the virtual clock, not
        # the wall clock's granularity, orders events.
        self._clock_resolution = 1e-9

    def time(self) -> float:
        return self._now

    def advance(self, timeout: float) -> None:
        """The selector's wait: the virtual clock moves `timeout` seconds on."""
        target = self._now + timeout
        # Land exactly on the timer that is due, not on a float sum that misses it by 1e-16.
        when = _earliest_timer(self)
        if when is not None and abs(when - target) < 1e-6:
            target = when
        self._now = max(self._now, target)

    # BaseEventLoop hooks that only a real selector loop needs.
    def _process_events(self, event_list) -> None:
        pass

    def _write_to_self(self) -> None:
        pass

    def run_until_complete_nested(self, future):
        """run_until_complete, also from inside a running loop (a Jupyter kernel runs one).

        The simulation runs to completion synchronously, so the outer loop is merely paused; it is
        restored afterwards.
        """
        # asyncio has no public way to set the running loop aside: CPython's own helpers do it.
        outer = asyncio.events._get_running_loop()
        asyncio.events._set_running_loop(None)
        try:
            return self.run_until_complete(future)
        finally:
            asyncio.events._set_running_loop(outer)
