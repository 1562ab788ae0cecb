"""RemotingClient: the connecting side of the remoting protocol (``NettyRemotingClient``).

Brokers use one to reach the name servers and the controller, the lab's clients to reach
brokers. Requests go to an address ``"host:port"``; the client keeps one connection per address
and multiplexes every request over it, as RocketMQ's client does. A lost connection is forgotten
when it closes (its pending requests fail with :class:`RemotingConnectError`), and the next call to
that address connects again.

The peer may send requests on the same connection (a broker notifying a consumer); they are
served with the processors registered here, as on a server.

Timing follows ``NettyRemotingClient.invokeSync``: connecting has its own bound
(``connect_timeout_ms``, ``connectTimeoutMillis`` in Java, 3000 ms), and the request then gets what
is left of ``timeout_ms``; none left raises :class:`RemotingTimeoutError` without sending.
``invoke_async`` (``invokeAsync``) times out by the once-a-second scan instead, as in RocketMQ
(``RemotingAbstract``).
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

from rmqlab.remoting.exceptions import RemotingConnectError, RemotingError, RemotingTimeoutError
from rmqlab.remoting.remoting_abstract import ChannelEventListener, RemotingAbstract
from rmqlab.remoting.remoting_channel import RemotingChannel
from rmqlab.remoting.remoting_command import RemotingCommand
from rmqlab.remoting.remoting_helper import string_to_address

if TYPE_CHECKING:
    from rmqlab.runtime.node import Node


class RemotingClient(RemotingAbstract):
    """Requests to ``host:port`` addresses over one cached connection per address."""

    def __init__(self, node: Node, connect_timeout_ms: float = 3000,
                 channel_event_listener: ChannelEventListener | None = None):
        super().__init__(node, channel_event_listener)
        self.connect_timeout_ms = connect_timeout_ms
        self._channels: dict[str, RemotingChannel] = {}
        self._connect_locks: dict[str, asyncio.Lock] = {}
        self._shut_down = False

    def channel(self, addr: str) -> RemotingChannel | None:
        """The open connection to ``addr``, if there is one."""
        channel = self._channels.get(addr)
        return channel if channel is not None and channel.is_active() else None

    async def is_address_reachable(self, addr: str) -> bool:
        """``isAddressReachable``: a connection to ``addr`` is open, or can be opened now."""
        try:
            await self._get_and_create_channel(addr)
            return True
        except (RemotingError, OSError):
            return False

    async def _get_and_create_channel(self, addr: str) -> RemotingChannel:
        channel = self.channel(addr)
        if channel is not None:
            return channel
        # One connect per address at a time: concurrent callers share the connection it makes.
        lock = self._connect_locks.setdefault(addr, asyncio.Lock())
        async with lock:
            channel = self.channel(addr)
            if channel is not None:
                return channel
            if self._shut_down:
                raise RemotingConnectError(addr, "the client is shut down")
            host, port = string_to_address(addr)
            try:
                reader, writer = await self.node.connect(host, port, self.connect_timeout_ms)
            except OSError as e:  # refused, unreachable, TimeoutError (an OSError too)
                raise RemotingConnectError(addr, f"connect failed: {e or type(e).__name__}") from e
            channel = RemotingChannel(self.node, reader, writer, self, remote_addr=addr)
            self._channels[addr] = channel
            self.node.spawn(channel.run(), name=f"remoting-client {addr}")
            self.on_channel_connected(channel)
            return channel

    async def invoke_sync(self, addr: str, request: RemotingCommand, timeout_ms: float) -> RemotingCommand:
        """Send ``request`` to ``addr`` and return the response (``invokeSync``).

        RemotingConnectError when ``addr`` cannot be reached or the connection is lost before
        the response; RemotingTimeoutError when ``timeout_ms`` passes first.
        """
        begin = self.node.now_ms()
        channel = await self._get_and_create_channel(addr)
        left = timeout_ms - (self.node.now_ms() - begin)
        if left <= 0:
            raise RemotingTimeoutError(addr, timeout_ms, "connecting used up the timeout")
        return await channel.invoke(request, left)

    async def invoke_async(self, addr: str, request: RemotingCommand, timeout_ms: float) -> RemotingCommand:
        """Send ``request`` to ``addr`` and return the response (``invokeAsync``, awaited instead
        of a callback): as :meth:`invoke_sync`, but the timeout is the periodic scan's
        (``RemotingChannel.invoke_async``: failed at the first scan after ``timeout_ms`` + 1 s),
        which costs no timer per request. For callers that, as RocketMQ's async send, do not
        need the timeout to the millisecond."""
        begin = self.node.now_ms()
        channel = await self._get_and_create_channel(addr)
        left = timeout_ms - (self.node.now_ms() - begin)
        if left <= 0:  # RocketMQ: RemotingTooMuchRequestException "invokeAsync call the addr[..] timeout"
            raise RemotingTimeoutError(addr, timeout_ms, "connecting used up the timeout")
        return await channel.invoke_async(request, left)

    async def invoke_oneway(self, addr: str, request: RemotingCommand) -> None:
        """Send ``request`` to ``addr`` marked oneway; nothing comes back."""
        channel = await self._get_and_create_channel(addr)
        await channel.invoke_oneway(request)

    def close_channel(self, addr: str) -> None:
        """Close the connection to ``addr`` (its pending requests fail); the next call reconnects."""
        channel = self._channels.pop(addr, None)
        if channel is not None:
            channel.close("local")

    def on_channel_closed(self, channel: RemotingChannel) -> None:
        if self._channels.get(channel.remote_addr) is channel:
            del self._channels[channel.remote_addr]
        super().on_channel_closed(channel)

    async def shutdown(self) -> None:
        """Close every connection; later calls fail with RemotingConnectError."""
        self._shut_down = True
        self.stop_scan()
        for channel in list(self._channels.values()):
            await channel.aclose("local")
        self._channels.clear()
