"""SimNode: the Node interface inside the simulator (see rmqlab.runtime.node).

A node's clock is the virtual clock plus an epoch, minus the time its clock spent paused. Its
timers are kept here, not only in the loop, so the nemesis can freeze them: while the node is
suspended (SIGSTOP) or its clock is paused, none fires; a resumed node fires the ones that came
due meanwhile, a node whose clock resumes continues where its clock stopped.
"""

from __future__ import annotations

import asyncio
import logging
import random
from collections.abc import Callable, Coroutine
from typing import Any

from rmqlab.runtime.node import ConnectionHandler, Listener, Node, Timer
from rmqlab.runtime.node_timer import NodeTimer


class SimNode(Node):
    simulated = True  # a virtual disk and UTC hours for the store (Node.simulated)

    def __init__(self, sim, name: str, store_dir: str, incarnation: int):
        self.sim = sim
        self.loop: asyncio.AbstractEventLoop = sim.loop
        self.name = name
        self.store_dir = store_dir
        self.incarnation = incarnation
        # Every incarnation (process start) draws its own stream, derived from the seed only.
        self.random = random.Random(f"{sim.seed}|node|{name}|{incarnation}")
        self.log = logging.getLogger(f"rmqlab.{name}")
        self._timers: dict[int, NodeTimer] = {}
        self._tasks: list[asyncio.Task] = []
        self.suspended = False
        self.clock_paused_at: float | None = None  # virtual ms when the clock stopped
        self._clock_lag_ms = 0.0                   # total time the clock spent paused
        self.alive = True
        self._exiting = False

    # -- clock -------------------------------------------------------------------------------
    def _clock_ms(self) -> float:
        virtual_ms = self.loop.time() * 1000.0
        if self.clock_paused_at is not None:
            virtual_ms = self.clock_paused_at
        return virtual_ms - self._clock_lag_ms

    def now_ms(self) -> int:
        # Floor like currentTimeMillis, but not below a whole millisecond that float sums of
        # delays (0.1 + 0.1 + ...) miss by a hair.
        return self.sim.epoch_ms + int(self._clock_ms() + 1e-6)

    def monotonic_s(self) -> float:
        """The node's clock in seconds, for libraries that read a monotonic clock (pysyncobj)."""
        return self._clock_ms() / 1000.0

    def _frozen(self) -> bool:
        return self.suspended or self.clock_paused_at is not None

    def call_later(self, delay_ms: float, callback: Callable[..., Any], *args: Any) -> Timer:
        timer = NodeTimer(self._clock_ms, self._timers, self.loop, self._clock_ms() + max(0.0, delay_ms), callback,
                          args)
        self._timers[id(timer)] = timer
        if self.alive and not self._frozen():
            timer.arm()
        return timer

    # -- used by the simulation and its nemesis ----------------------------------------------
    def freeze_timers(self) -> None:
        """No timer fires until thaw_timers (suspended, or the clock paused)."""
        for t in self._timers.values():
            if t.handle is not None:
                t.handle.cancel()
                t.handle = None

    def thaw_timers(self) -> None:
        """Re-arm the timers, unless the node is still frozen or gone."""
        if self._frozen() or not self.alive:
            return
        for t in sorted(self._timers.values(), key=lambda t: t.deadline_ms):
            if t.handle is None:
                t.arm()

    def clock_pause(self) -> None:
        """Stop this node's clock (and its timers) where it is."""
        if self.clock_paused_at is None:
            self.clock_paused_at = self.loop.time() * 1000.0
            self.freeze_timers()

    def clock_resume(self) -> None:
        """Let the clock run again from where it stopped; the time it stood still is its lag."""
        if self.clock_paused_at is not None:
            self._clock_lag_ms += self.loop.time() * 1000.0 - self.clock_paused_at
            self.clock_paused_at = None
            self.thaw_timers()

    def keep_machine_clock(self, old: SimNode) -> None:
        """A new process on the same machine keeps the machine's clock (its lag, a pause in force)."""
        self._clock_lag_ms, self.clock_paused_at = old._clock_lag_ms, old.clock_paused_at

    # -- tasks -------------------------------------------------------------------------------
    def spawn(self, coro: Coroutine[Any, Any, Any], name: str | None = None) -> asyncio.Task:
        if not self.alive:
            coro.close()
            raise RuntimeError(f"{self.name} is not running")
        task = self.loop.create_task(coro, name=name)
        self._tasks.append(task)
        task.add_done_callback(self._task_done)
        return task

    def _task_done(self, task: asyncio.Task) -> None:
        if task in self._tasks:
            self._tasks.remove(task)
        if not task.cancelled() and task.exception() is not None:
            exc = task.exception()
            self.log.error("%s: task %s failed: %r", self.name, task.get_name(), exc)
            self.trace("log", level="ERROR", message=f"task {task.get_name()} failed: {exc!r}")

    # -- network -----------------------------------------------------------------------------
    async def listen(self, host: str, port: int, handler: ConnectionHandler) -> Listener:
        return self.sim.network.listen(self.name, host, port, handler)

    async def connect(self, host: str, port: int, timeout_ms: float = 3000) -> tuple[asyncio.StreamReader, Any]:
        if not self.alive:
            raise RuntimeError(f"{self.name} is not running")
        return await self.sim.network.connect(self.name, host, port, timeout_ms)

    # -- lifecycle ---------------------------------------------------------------------------
    def exit(self, reason: str = "finished") -> None:
        if self._exiting:
            return
        self._exiting = True

        async def stop() -> None:
            # A loop task, not the node's: stopping cancels the node's own tasks, the caller's too.
            if self.alive and self.sim.nodes.get(self.name) is self:
                await self.sim.stop_node(self.name, reason)

        self.loop.create_task(stop())

    # -- output ------------------------------------------------------------------------------
    def trace(self, kind: str, **fields: Any) -> None:
        self.sim.tracer.emit(self.name, kind, **fields)

    # -- used by the simulation --------------------------------------------------------------
    def die(self) -> None:
        """The process is gone: no timer fires, every task is cancelled."""
        self.alive = False
        for t in list(self._timers.values()):
            t.cancel()
        for task in list(self._tasks):
            task.cancel()
