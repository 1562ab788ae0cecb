"""The control channel of a process that tests and operators drive: JSON objects, one per line,
each answered by one line that echoes the request's "id". Requests on one connection are served
concurrently, so a status query is not stuck behind a write that waits for a leader.

Used by the processes that run one replica of a replicated log on its own (rmqlab.raft.counter_process,
rmqlab.dledger.dledger_member); each supplies `handle(request) -> reply fields`.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable
from typing import Any

from rmqlab.runtime.node import Node

CONTROL_HOST = "127.0.0.1"

Handler = Callable[[dict[str, Any]], Awaitable[dict[str, Any]]]


async def listen_control(node: Node, port: int, handle: Handler, name: str) -> int:
    """Serve the control channel on CONTROL_HOST:`port` (0: any free port); the port it listens on."""

    async def serve(reader: asyncio.StreamReader, writer: Any) -> None:
        requests: set[asyncio.Task] = set()
        try:
            while line := await reader.readline():
                task = node.spawn(_answer(line, writer, handle), name=name)
                requests.add(task)
                task.add_done_callback(requests.discard)
        except ConnectionError:
            pass
        finally:
            if requests:
                await asyncio.gather(*requests, return_exceptions=True)
            writer.close()

    listener = await node.listen(CONTROL_HOST, port, serve)
    return listener.port


async def _answer(line: bytes, writer: Any, handle: Handler) -> None:
    try:
        request = json.loads(line)
        if not isinstance(request, dict):
            raise ValueError("a request is a JSON object")
    except ValueError as e:
        reply: dict[str, Any] = {"ok": False, "error": f"bad request: {e}"}
    else:
        reply = {"id": request.get("id"), **await handle(request)}
    if not writer.is_closing():
        writer.write(json.dumps(reply).encode() + b"\n")
        await writer.drain()
