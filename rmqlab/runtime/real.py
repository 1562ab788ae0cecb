"""The real runtime: Node on asyncio, TCP sockets and the wall clock (issue 3 §2).

Several nodes can share one process (tests), or `run_process` runs one component as its own OS
process the way RocketMQ's scripts do: logs under `<logs_dir>/<name>.log`, a boot line on stdout
once the component has started, and a clean shutdown on SIGTERM / SIGINT.
"""

from __future__ import annotations

import asyncio
import logging
import os
import random
import signal
import sys
import time
from collections.abc import Callable, Coroutine
from typing import Any

from rmqlab.runtime.component import Component
from rmqlab.runtime.node import ConnectionHandler, Listener, Node, Timer
from rmqlab.trace import Tracer


class _ServerListener:
    def __init__(self, server: asyncio.base_events.Server):
        self._server = server
        self.port = server.sockets[0].getsockname()[1]

    def close(self) -> None:
        self._server.close()


class RealNode(Node):
    def __init__(self, name: str, store_dir: str, *, tracer: Tracer | None = None, seed: int | None = None):
        self.name = name
        self.store_dir = store_dir
        # Seeded when asked (repeatable client choices in tests); else from the OS, like Java.
        self.random = random.Random(seed if seed is not None else os.urandom(16))
        self.log = logging.getLogger(f"rmqlab.{name}")
        self.tracer = tracer or Tracer(lambda: time.time() * 1000.0)
        self._tasks: set[asyncio.Task] = set()
        self._listeners: list[_ServerListener] = []

    def now_ms(self) -> int:
        return int(time.time() * 1000)

    def call_later(self, delay_ms: float, callback: Callable[..., Any], *args: Any) -> Timer:
        return asyncio.get_running_loop().call_later(max(0.0, delay_ms) / 1000.0, callback, *args)

    def spawn(self, coro: Coroutine[Any, Any, Any], name: str | None = None) -> asyncio.Task:
        task = asyncio.get_running_loop().create_task(coro, name=name)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task

    async def listen(self, host: str, port: int, handler: ConnectionHandler) -> Listener:
        async def on_connect(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            peer = writer.get_extra_info("peername")
            self.trace("net.accept", peer=f"{peer[0]}:{peer[1]}" if peer else "?", local=f"{host}:{port}")
            await handler(reader, writer)

        server = await asyncio.start_server(on_connect, host, port)
        listener = _ServerListener(server)
        self._listeners.append(listener)
        return listener

    async def connect(self, host: str, port: int, timeout_ms: float = 3000) -> tuple[asyncio.StreamReader, Any]:
        try:
            streams = await asyncio.wait_for(asyncio.open_connection(host, port), timeout_ms / 1000.0)
        except asyncio.TimeoutError:
            raise TimeoutError(f"{self.name}: connect to {host}:{port} timed out after {timeout_ms:.0f} ms") from None
        self.trace("net.connect", peer=f"{host}:{port}")
        return streams

    def trace(self, kind: str, **fields: Any) -> None:
        self.tracer.emit(self.name, kind, **fields)

    async def close(self) -> None:
        """Stop listening and cancel this node's tasks (after the component's own shutdown)."""
        for listener in self._listeners:
            listener.close()
        tasks = [t for t in self._tasks if t is not asyncio.current_task()]
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)


def run_process(component: Component, name: str, *, store_dir: str, logs_dir: str, boot_line: Callable[[], str],
                trace_path: str | None = None) -> int:
    """Run `component` as this OS process until SIGTERM/SIGINT; returns the exit code."""
    os.makedirs(logs_dir, exist_ok=True)
    handler = logging.FileHandler(os.path.join(logs_dir, f"{name}.log"))
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s - %(message)s"))
    root = logging.getLogger("rmqlab")
    root.addHandler(handler)
    root.setLevel(logging.INFO)
    tracer = Tracer(lambda: time.time() * 1000.0, jsonl_path=trace_path) if trace_path else None
    node = RealNode(name, store_dir, tracer=tracer)

    async def main() -> int:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, stop.set)
        await component.start(node)
        node.trace("node.start")
        line = boot_line()
        root.info(line)
        print(line, flush=True)
        await stop.wait()
        root.info("%s: shutting down (signal)", name)
        await component.shutdown()
        await node.close()
        node.trace("node.stop")
        return 0

    try:
        return asyncio.run(main())
    except Exception:
        root.exception("%s: failed", name)
        print(f"rmqlab {name}: failed, see {os.path.join(logs_dir, name + '.log')}", file=sys.stderr)
        return 1
