"""Node: everything a component may use from outside itself.

Theory of operation
-------------------
A component (NameServer, Broker, Controller, Proxy, a client) is written once as ordinary asyncio
code against this interface and never imports socket, time or random. Two runtimes implement it:

* the **simulator** (`rmqlab.runtime.sim`): all nodes in one process, a virtual clock that jumps
  to the next timer when nothing can run, an in-memory network, seeded randomness — so the same
  seed gives the same event trace, byte for byte;
* the **real runtime** (`rmqlab.runtime.real`): asyncio over TCP on the wall clock; each node can
  be its own OS process, started from the CLI.

A node is one machine running one process. Its surface, in full:

  clock      now_ms(), call_later(ms, fn), sleep(ms)
  tasks      spawn(coro)               — owned by the node: a crash cancels them
  network    listen(host, port, handler), connect(host, port) — byte streams with the
             asyncio StreamReader / StreamWriter interface
  disk       store_dir                 — survives a process crash; a machine crash loses what
                                         was not flushed (rmqlab.runtime.page_cache)
  random     random                    — a seeded random.Random of this node
  output     log (logging.Logger), trace(kind, **fields) — the event trace, the only road
             from the running system to widgets, checkers and grading
  lifecycle  exit(reason)              — the component is done (a client that finished its
                                         work): the runtime stops the node cleanly

Faults (the nemesis) act on nodes from outside: a process crash cancels the node's tasks and
closes its connections; suspend freezes its timers and the delivery of its input (SIGSTOP).
"""

from __future__ import annotations

import abc
import asyncio
import logging
import random as _random
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any, Protocol

ConnectionHandler = Callable[[asyncio.StreamReader, Any], Awaitable[None]]


class Timer(Protocol):
    def cancel(self) -> None: ...


class Listener(Protocol):
    """A listening endpoint; `port` is the bound port (useful when 0 was asked)."""

    port: int

    def close(self) -> None: ...


class Node(abc.ABC):
    name: str
    store_dir: str
    random: _random.Random
    log: logging.Logger
    # True on the simulator: the node's machine is virtual, and nothing may depend on the host's,
    # so a store measures its disk usage on a virtual disk (rmqlab.store.disk_space) and reads
    # the hour of the day (deleteWhen) in UTC rather than the host's time zone.
    simulated: bool = False

    # -- clock -------------------------------------------------------------------------------
    @abc.abstractmethod
    def now_ms(self) -> int:
        """This node's clock in epoch milliseconds (what System.currentTimeMillis() gives Java)."""

    @abc.abstractmethod
    def call_later(self, delay_ms: float, callback: Callable[..., Any], *args: Any) -> Timer:
        """Run `callback(*args)` after `delay_ms` of this node's time."""

    async def sleep(self, delay_ms: float) -> None:
        fut = asyncio.get_running_loop().create_future()
        self.call_later(delay_ms, lambda: fut.done() or fut.set_result(None))
        await fut

    # -- tasks -------------------------------------------------------------------------------
    @abc.abstractmethod
    def spawn(self, coro: Coroutine[Any, Any, Any], name: str | None = None) -> asyncio.Task:
        """Start a task owned by this node (cancelled when the node crashes or stops)."""

    # -- network -----------------------------------------------------------------------------
    @abc.abstractmethod
    async def listen(self, host: str, port: int, handler: ConnectionHandler) -> Listener:
        """Accept connections on (host, port); `handler(reader, writer)` runs as a node task."""

    @abc.abstractmethod
    async def connect(self, host: str, port: int, timeout_ms: float = 3000) -> tuple[asyncio.StreamReader, Any]:
        """Open a byte stream; raises ConnectionRefusedError, or TimeoutError after `timeout_ms`."""

    # -- lifecycle ---------------------------------------------------------------------------
    @abc.abstractmethod
    def exit(self, reason: str = "finished") -> None:
        """Ask the runtime to stop this node cleanly, as on SIGTERM: the component's shutdown runs
        (after the caller returns), then ``node.stop`` is traced with `reason`. For a component that
        is done (a benchmark client after its count); idempotent."""

    # -- output ------------------------------------------------------------------------------
    @abc.abstractmethod
    def trace(self, kind: str, **fields: Any) -> None:
        """Emit an event of the trace (schema: rmqlab.trace.kinds) attributed to this node."""
