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
import contextvars
import heapq


_MIN_SCHEDULED_TIMER_HANDLES = asyncio.base_events._MIN_SCHEDULED_TIMER_HANDLES
_MIN_CANCELLED_TIMER_HANDLES_FRACTION = asyncio.base_events._MIN_CANCELLED_TIMER_HANDLES_FRACTION
_MAXIMUM_SELECT_TIMEOUT = asyncio.base_events.MAXIMUM_SELECT_TIMEOUT


class SimulationDeadlock(RuntimeError):
    """Nothing can run and no timer is pending, yet the awaited result is not there."""


class _SimTimerHandle(asyncio.events.TimerHandle):
    """A TimerHandle built without TimerHandle's debug-mode bookkeeping and compared without its
    isinstance check: every timer of every node is one, and the heap compares them millions of
    times per chaos run. Same order as TimerHandle: `_when` alone (heapq uses only `<`)."""

    __slots__ = ()

    def __init__(self, when, callback, args, loop, context=None):
        # Handle.__init__ and TimerHandle.__init__ outside asyncio's debug mode.
        self._context = contextvars.copy_context() if context is None else context
        self._loop = loop
        self._callback = callback
        self._args = args
        self._cancelled = False
        self._repr = None
        self._source_traceback = None
        self._when = when
        self._scheduled = False

    def __lt__(self, other):
        return self._when < other._when


class _VirtualSelector:
    def __init__(self, loop: "SimLoop"):
        self._loop = loop

    def select(self, timeout: float | None):
        if timeout is None:
            raise SimulationDeadlock("the simulation is waiting for something that can never happen "
                                     "(no task is runnable and no timer is pending)")
        if timeout > 0:
            loop = self._loop
            target = loop._now + timeout
            # Land exactly on the timer that is due, not on a float sum that misses it by 1e-16.
            if loop._scheduled and abs(loop._scheduled[0]._when - target) < 1e-6:
                target = loop._scheduled[0]._when
            loop._now = max(loop._now, target)
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

    # call_at and _run_once are BaseEventLoop's (CPython 3.11) minus what a virtual loop never
    # needs: debug checks, source tracebacks, I/O events. Every timer of every node goes through
    # them, so they are most of a simulation's overhead. The heap operations are the same, in the
    # same order, so the timers fire in the same order and a seed's trace stays byte for byte the
    # same (tests/test_sim_runtime.py and tests/test_controller_chaos.py check that a seed
    # reproduces its trace).
    def call_at(self, when, callback, *args, context=None):
        if when is None:
            raise TypeError("when cannot be None")
        if self._closed:
            raise RuntimeError("Event loop is closed")
        if self._debug:  # asyncio's debug mode: its own checks and tracebacks
            return super().call_at(when, callback, *args, context=context)
        timer = _SimTimerHandle(when, callback, args, self, context)
        heapq.heappush(self._scheduled, timer)
        timer._scheduled = True
        return timer

    def _run_once(self) -> None:
        if self._debug:
            return super()._run_once()
        scheduled = self._scheduled
        sched_count = len(scheduled)
        if (sched_count > _MIN_SCHEDULED_TIMER_HANDLES and
                self._timer_cancelled_count / sched_count > _MIN_CANCELLED_TIMER_HANDLES_FRACTION):
            # Remove delayed calls that were cancelled if their number is too high.
            new_scheduled = []
            for handle in scheduled:
                if handle._cancelled:
                    handle._scheduled = False
                else:
                    new_scheduled.append(handle)
            heapq.heapify(new_scheduled)
            self._scheduled = scheduled = new_scheduled
            self._timer_cancelled_count = 0
        else:
            # Remove delayed calls that were cancelled from head of queue.
            while scheduled and scheduled[0]._cancelled:
                self._timer_cancelled_count -= 1
                handle = heapq.heappop(scheduled)
                handle._scheduled = False

        ready = self._ready
        timeout = None
        if ready or self._stopping:
            timeout = 0
        elif scheduled:
            timeout = min(max(0, scheduled[0]._when - self._now), _MAXIMUM_SELECT_TIMEOUT)
        self._selector.select(timeout)

        # Handle 'later' callbacks that are ready.
        end_time = self._now + self._clock_resolution
        while scheduled:
            handle = scheduled[0]
            if handle._when >= end_time:
                break
            handle = heapq.heappop(scheduled)
            handle._scheduled = False
            ready.append(handle)

        # Run the callbacks ready now, not those they schedule (those run next time around).
        popleft = ready.popleft
        for _ in range(len(ready)):
            handle = popleft()
            if not handle._cancelled:
                handle._run()
        handle = None  # Needed to break cycles when an exception occurs.

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
        outer = asyncio.events._get_running_loop()
        asyncio.events._set_running_loop(None)
        try:
            return self.run_until_complete(future)
        finally:
            asyncio.events._set_running_loop(outer)
