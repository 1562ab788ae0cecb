"""The Local-mode Proxy's way to its own broker on the simulator: an in-process pipe.

RocketMQ's Local-mode Proxy calls the broker's processors inside the JVM. rmqlab's goes through
the broker's remoting port (MessagingProcessor), which on the real runtime is a loopback TCP
connection. The simulator's network carries connections between two nodes, not from a node to
itself, so there the Proxy's remoting client is given `InProcessNode`: the Proxy's node, except
that a connect to the broker's own remoting address returns one end of an in-memory byte pipe
whose other end the broker's RemotingServer accepts. The bytes are the remoting frames, traced by
both channels as usual; they cross no network (no latency, no link faults), as in RocketMQ.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from rmqlab.runtime.node import Node


class _PipeWriter:
    """The StreamWriter side of one end: what it writes is fed to the other end's reader."""

    def __init__(self, peer_reader: asyncio.StreamReader, own_reader: asyncio.StreamReader,
                 sockname: tuple[str, int], peername: tuple[str, int]):
        self._peer_reader, self._own_reader = peer_reader, own_reader
        self._extra = {"sockname": sockname, "peername": peername}
        self._closing = False

    def write(self, data: bytes) -> None:
        if not self._closing and data and not self._peer_reader.at_eof():
            self._peer_reader.feed_data(bytes(data))

    def writelines(self, chunks) -> None:
        for c in chunks:
            self.write(c)

    async def drain(self) -> None:
        if self._closing:
            raise ConnectionResetError("in-process pipe closed")

    def can_write_eof(self) -> bool:
        return True

    def write_eof(self) -> None:
        if not self._peer_reader.at_eof():
            self._peer_reader.feed_eof()

    def close(self) -> None:
        if self._closing:
            return
        self._closing = True
        self.write_eof()
        if not self._own_reader.at_eof():
            self._own_reader.feed_eof()

    def is_closing(self) -> bool:
        return self._closing

    async def wait_closed(self) -> None:
        await asyncio.sleep(0)

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return self._extra.get(name, default)


class InProcessNode:
    """`node` for everything, except connects to `broker_addr`, which go to `accept(reader, writer)`
    (the broker's RemotingServer) through an in-memory pipe."""

    def __init__(self, node: Node, broker_addr: tuple[str, int], accept):
        self._node = node
        self._broker_addr = broker_addr
        self._accept = accept
        self._pipes = 0

    def __getattr__(self, name: str) -> Any:
        return getattr(self._node, name)

    async def connect(self, host: str, port: int, timeout_ms: float = 3000):
        if (host, port) != self._broker_addr:
            return await self._node.connect(host, port, timeout_ms)
        self._pipes += 1
        client_addr = (host, self._pipes)  # names this pipe's Proxy end in the broker's channel
        to_client, to_server = asyncio.StreamReader(limit=2 ** 31), asyncio.StreamReader(limit=2 ** 31)
        client_writer = _PipeWriter(to_server, to_client, client_addr, self._broker_addr)
        server_writer = _PipeWriter(to_client, to_server, self._broker_addr, client_addr)
        self._node.spawn(self._accept(to_server, server_writer), name=f"in-process accept {host}:{port}")
        return to_client, client_writer
