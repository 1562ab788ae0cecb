"""SimLoop: an asyncio event loop on a virtual clock.

Theory of operation
-------------------
The simulator has no file descriptors and no threads, so it needs only the part of an event loop
that orders callbacks in time. SimLoop implements asyncio's AbstractEventLoop interface for that
part (the documented way to plug in an event loop, as uvloop does), and asyncio's own Futures and
Tasks run on it unchanged:

* `ready`, a FIFO of callbacks to run now (call_soon: a task's next step, a future's callbacks);
* `timers`, a heap of (when, seq, handle): call_at / call_later. `seq` counts every timer ever
  scheduled, so timers due at the same instant run in the order they were scheduled;
* an iteration moves every timer due by now to the end of `ready`, then runs the callbacks that
  were ready at that moment (those they schedule wait for the next iteration), as asyncio's
  BaseEventLoop does;
* when nothing is ready, the virtual clock jumps to the earliest timer: idle virtual time costs
  nothing. Nothing ready and no timer while run_until_complete still waits is a deadlock.

A run is a pure function of its inputs: no wall clock, no threads, no set or dict whose order
depends on hashing of objects. So `run_in_executor` (and `asyncio.to_thread`) runs the function
inline, at the current virtual instant, and returns its result as a done future. Sockets, pipes,
subprocesses, signals and name lookups are not part of the simulator: a node talks through
`node.listen` / `node.connect` (rmqlab.runtime.sim.network); the loop's methods for them raise
SimulationUnsupported, which says so (the table NOT_SIMULATED).
"""

from __future__ import annotations

import asyncio
import contextvars
import heapq
import logging
import sys
from collections import deque
from collections.abc import Callable
from typing import Any

log = logging.getLogger("asyncio")

CLOCK_RESOLUTION_S = 1e-9  # timers due within this of the clock run together


class SimulationDeadlock(RuntimeError):
    """Nothing can run and no timer is pending, yet the awaited result is not there."""


class SimulationUnsupported(RuntimeError):
    """An event-loop service the simulator does not have (a socket, a subprocess, a signal, ...)."""


# AbstractEventLoop methods that need the operating system -> what a simulated component uses instead.
_NETWORK = "nodes talk through node.listen(host, port, handler) and node.connect(host, port)"
NOT_SIMULATED: dict[str, str] = {
    **{name: _NETWORK for name in (
        "create_connection", "create_server", "create_datagram_endpoint", "create_unix_connection",
        "create_unix_server", "connect_accepted_socket", "start_tls", "sendfile", "sock_recv",
        "sock_recv_into", "sock_recvfrom", "sock_recvfrom_into", "sock_sendall", "sock_sendto",
        "sock_connect", "sock_accept", "sock_sendfile", "add_reader", "remove_reader", "add_writer",
        "remove_writer", "connect_read_pipe", "connect_write_pipe")},
    "getaddrinfo": "addresses are host:port strings; nothing is resolved",
    "getnameinfo": "addresses are host:port strings; nothing is resolved",
    "subprocess_exec": "a simulated node is a Component on Simulation.add_node, not an OS process",
    "subprocess_shell": "a simulated node is a Component on Simulation.add_node, not an OS process",
    "add_signal_handler": "faults reach a node through the nemesis (sim.nemesis), not OS signals",
    "remove_signal_handler": "faults reach a node through the nemesis (sim.nemesis), not OS signals",
    "set_default_executor": "run_in_executor runs its function inline: there is no executor to set",
}


def _not_simulated(name: str, instead: str) -> Callable[..., Any]:
    def method(self, *args: Any, **kwargs: Any) -> Any:
        raise SimulationUnsupported(f"loop.{name}() is not available in the simulator: {instead}")

    method.__name__ = method.__qualname__ = name
    return method


class SimHandle:
    """What call_soon / call_at return: asyncio.Handle's and asyncio.TimerHandle's public surface
    (cancel, cancelled, when), without their per-handle bookkeeping."""

    __slots__ = ("_callback", "_args", "_context", "_cancelled", "_when", "_loop")

    def __init__(self, callback: Callable[..., Any], args: tuple, context: contextvars.Context | None,
                 when: float | None = None, loop: SimLoop | None = None):
        self._callback, self._args, self._context = callback, args, context
        self._cancelled = False
        self._when = when
        self._loop = loop  # set while the handle sits in the timer heap

    def cancel(self) -> None:
        if not self._cancelled:
            self._cancelled = True
            self._callback = self._args = None
            if self._loop is not None:
                self._loop._timer_cancelled()
                self._loop = None

    def cancelled(self) -> bool:
        return self._cancelled

    def when(self) -> float:
        return self._when

    def __repr__(self) -> str:
        cb = getattr(self._callback, "__qualname__", self._callback)
        state = " cancelled" if self._cancelled else ""
        return f"<SimHandle {cb}{state}{'' if self._when is None else f' when={self._when}'}>"


class SimLoop(asyncio.AbstractEventLoop):
    def __init__(self) -> None:
        self._now = 0.0  # virtual seconds since the start of the simulation
        self._ready: deque[SimHandle] = deque()
        self._timers: list[tuple[float, int, SimHandle]] = []
        self._seq = 0
        self._cancelled_timers = 0
        self._running = False
        self._stopping = False
        self._closed = False
        self._debug = False
        self._exception_handler: Callable[[asyncio.AbstractEventLoop, dict], Any] | None = None
        self._asyncgens: set = set()
        self._task_factory = None

    # -- the clock ---------------------------------------------------------------------------
    def time(self) -> float:
        return self._now

    # -- scheduling --------------------------------------------------------------------------
    def call_soon(self, callback: Callable[..., Any], *args: Any, context: contextvars.Context | None = None) -> SimHandle:
        if self._closed:
            raise RuntimeError("Event loop is closed")
        handle = SimHandle(callback, args, context)
        self._ready.append(handle)
        return handle

    # No other thread ever runs in a simulation.
    call_soon_threadsafe = call_soon

    def call_later(self, delay: float, callback: Callable[..., Any], *args: Any,
                   context: contextvars.Context | None = None) -> SimHandle:
        return self.call_at(self._now + delay, callback, *args, context=context)

    def call_at(self, when: float, callback: Callable[..., Any], *args: Any,
                context: contextvars.Context | None = None) -> SimHandle:
        if self._closed:
            raise RuntimeError("Event loop is closed")
        handle = SimHandle(callback, args, context, when, self)
        self._seq += 1
        heapq.heappush(self._timers, (when, self._seq, handle))
        return handle

    def _timer_cancelled(self) -> None:
        # Cancelled timers leave the heap lazily; rebuild it when they are most of it.
        self._cancelled_timers += 1
        if self._cancelled_timers > 256 and self._cancelled_timers * 2 > len(self._timers):
            self._timers = [t for t in self._timers if not t[2]._cancelled]
            heapq.heapify(self._timers)
            self._cancelled_timers = 0

    def create_future(self) -> asyncio.Future:
        return asyncio.Future(loop=self)

    def create_task(self, coro, *, name: str | None = None, context: contextvars.Context | None = None) -> asyncio.Task:
        if self._closed:
            raise RuntimeError("Event loop is closed")
        if self._task_factory is None:
            return asyncio.Task(coro, loop=self, name=name, context=context)
        # As BaseEventLoop.create_task calls a factory set with set_task_factory.
        task = self._task_factory(self, coro) if context is None else self._task_factory(self, coro, context=context)
        if name is not None:
            task.set_name(name)
        return task

    def set_task_factory(self, factory) -> None:
        if factory is not None and not callable(factory):
            raise TypeError("task factory must be a callable or None")
        self._task_factory = factory

    def get_task_factory(self):
        return self._task_factory

    def run_in_executor(self, executor, func: Callable[..., Any], *args: Any) -> asyncio.Future:
        """The function runs now, inline (the simulation has no threads; see the module
        docstring); the future holds its result or its exception."""
        if self._closed:
            raise RuntimeError("Event loop is closed")
        future = self.create_future()
        try:
            future.set_result(func(*args))
        except (SystemExit, KeyboardInterrupt):
            raise
        except BaseException as exc:
            future.set_exception(exc)
        return future

    # -- running -----------------------------------------------------------------------------
    def _run_once(self) -> None:
        ready, timers = self._ready, self._timers
        if not ready:
            while timers and timers[0][2]._cancelled:
                heapq.heappop(timers)
                self._cancelled_timers -= 1
            if not timers:
                if self._stopping:
                    return
                raise SimulationDeadlock("the simulation is waiting for something that can never happen "
                                         "(no task is runnable and no timer is pending)")
            if timers[0][0] > self._now:
                self._now = timers[0][0]
        end = self._now + CLOCK_RESOLUTION_S
        while timers and timers[0][0] < end:
            handle = heapq.heappop(timers)[2]
            if handle._cancelled:
                self._cancelled_timers -= 1
                continue
            handle._loop = None
            ready.append(handle)
        for _ in range(len(ready)):
            handle = ready.popleft()
            if handle._cancelled:
                continue
            try:
                if handle._context is None:
                    handle._callback(*handle._args)
                else:
                    handle._context.run(handle._callback, *handle._args)
            except (SystemExit, KeyboardInterrupt):
                raise
            except BaseException as exc:
                self.call_exception_handler({"message": f"Exception in callback {handle!r}", "exception": exc,
                                             "handle": handle})

    def run_forever(self) -> None:
        if self._closed:
            raise RuntimeError("Event loop is closed")
        if self._running:
            raise RuntimeError("This event loop is already running")
        if asyncio._get_running_loop() is not None:
            raise RuntimeError("Cannot run the event loop while another loop is running")
        old_hooks = sys.get_asyncgen_hooks()
        sys.set_asyncgen_hooks(firstiter=self._asyncgens.add, finalizer=self._asyncgen_finalizer)
        self._running = True
        asyncio._set_running_loop(self)
        try:
            while True:
                self._run_once()
                if self._stopping:
                    break
        finally:
            self._stopping = False
            self._running = False
            asyncio._set_running_loop(None)
            sys.set_asyncgen_hooks(*old_hooks)

    def _asyncgen_finalizer(self, agen) -> None:
        # An async generator dropped unfinished is closed on the loop, as asyncio does.
        self._asyncgens.discard(agen)
        if not self._closed:
            self.create_task(agen.aclose())

    def run_until_complete(self, future):
        if self._closed:
            raise RuntimeError("Event loop is closed")
        new_task = not asyncio.isfuture(future)
        future = asyncio.ensure_future(future, loop=self)

        def done(_fut) -> None:
            self.stop()

        future.add_done_callback(done)
        try:
            self.run_forever()
        except BaseException:
            if new_task and future.done() and not future.cancelled():
                future.exception()  # retrieved: no "never retrieved" warning on top of the raise
            raise
        finally:
            future.remove_done_callback(done)
        if not future.done():
            raise RuntimeError("Event loop stopped before Future completed.")
        return future.result()

    def run_until_complete_nested(self, future):
        """run_until_complete, also from inside a running loop (a Jupyter kernel runs one).

        The simulation runs to completion synchronously, so the outer loop is merely paused; it is
        restored afterwards.
        """
        outer = asyncio._get_running_loop()
        asyncio._set_running_loop(None)
        try:
            return self.run_until_complete(future)
        finally:
            asyncio._set_running_loop(outer)

    def stop(self) -> None:
        self._stopping = True

    def is_running(self) -> bool:
        return self._running

    def is_closed(self) -> bool:
        return self._closed

    def close(self) -> None:
        if self._running:
            raise RuntimeError("Cannot close a running event loop")
        self._closed = True
        self._ready.clear()
        self._timers.clear()

    async def shutdown_asyncgens(self) -> None:
        gens, self._asyncgens = list(self._asyncgens), set()
        for agen in gens:
            await agen.aclose()

    async def shutdown_default_executor(self, timeout: float | None = None) -> None:
        pass

    # -- errors and debug mode ---------------------------------------------------------------
    def get_debug(self) -> bool:
        return self._debug

    def set_debug(self, enabled: bool) -> None:
        self._debug = bool(enabled)

    def get_exception_handler(self):
        return self._exception_handler

    def set_exception_handler(self, handler) -> None:
        self._exception_handler = handler

    def default_exception_handler(self, context: dict) -> None:
        exc = context.get("exception")
        log.error(context.get("message", "Unhandled exception in the simulation"),
                  exc_info=(type(exc), exc, exc.__traceback__) if exc is not None else None)

    def call_exception_handler(self, context: dict) -> None:
        if self._exception_handler is None:
            self.default_exception_handler(context)
            return
        try:
            self._exception_handler(self, context)
        except (SystemExit, KeyboardInterrupt):
            raise
        except BaseException:
            log.exception("Unhandled error in the simulation's exception handler")


for _name, _instead in NOT_SIMULATED.items():
    setattr(SimLoop, _name, _not_simulated(_name, _instead))
