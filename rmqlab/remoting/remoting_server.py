"""RemotingServer: the listening side of the remoting protocol (``NettyRemotingServer``).

The name server, the broker and the controller each run one: it accepts connections on
``host:port``, makes each a :class:`RemotingChannel` and serves the requests on it with the
registered processors (``RemotingAbstract``). A processor may also call the client back on the
channel it was given (``invoke_sync(channel, ...)``), as a broker does to tell consumers their
group changed.

A connection that sends undecodable bytes is closed on its own (``RemotingChannel``); the server
keeps serving every other connection.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from rmqlab.remoting.remoting_abstract import ChannelEventListener, RemotingAbstract
from rmqlab.remoting.remoting_channel import RemotingChannel
from rmqlab.remoting.remoting_command import RemotingCommand

if TYPE_CHECKING:
    from rmqlab.runtime.node import Listener, Node


class RemotingServer(RemotingAbstract):
    """Listen on ``host:port`` (0 picks a free port, see :attr:`port`) once :meth:`start` ran."""

    def __init__(self, node: "Node", host: str, port: int,
                 channel_event_listener: ChannelEventListener | None = None):
        super().__init__(node, channel_event_listener)
        self.host = host
        self._requested_port = port
        self._listener: "Listener | None" = None
        self._channels: set[RemotingChannel] = set()
        self._shut_down = False

    @property
    def port(self) -> int:
        """The bound port (the one asked for, or the one the system chose for 0)."""
        if self._listener is None:
            raise RuntimeError("RemotingServer is not started")
        return self._listener.port

    @property
    def channels(self) -> frozenset[RemotingChannel]:
        """The open connections."""
        return frozenset(self._channels)

    async def start(self) -> None:
        self._listener = await self.node.listen(self.host, self._requested_port, self._on_accept)

    async def _on_accept(self, reader, writer) -> None:
        channel = RemotingChannel(self.node, reader, writer, self)
        if self._shut_down:
            channel.close("local")
            return
        self._channels.add(channel)
        self.on_channel_connected(channel)
        # The reader is a task of the node's own, so closing the channel can cancel it; the
        # listener's handler task is the runtime's and just returns.
        self.node.spawn(channel.run(), name=f"remoting-server {channel.remote_addr}")

    def on_channel_closed(self, channel: RemotingChannel) -> None:
        self._channels.discard(channel)
        super().on_channel_closed(channel)

    async def invoke_sync(self, channel: RemotingChannel, request: RemotingCommand,
                          timeout_ms: float) -> RemotingCommand:
        """Send a request to the peer of ``channel`` and wait for its response."""
        return await channel.invoke(request, timeout_ms)

    async def invoke_async(self, channel: RemotingChannel, request: RemotingCommand,
                           timeout_ms: float) -> RemotingCommand:
        """As :meth:`invoke_sync`, timed out by the periodic scan (``invokeAsync``)."""
        return await channel.invoke_async(request, timeout_ms)

    async def invoke_oneway(self, channel: RemotingChannel, request: RemotingCommand) -> None:
        """Send a oneway request to the peer of ``channel``."""
        await channel.invoke_oneway(request)

    async def shutdown(self) -> None:
        """Stop listening and close every connection (their pending requests fail)."""
        self._shut_down = True
        self.stop_scan()
        if self._listener is not None:
            self._listener.close()
        for channel in list(self._channels):
            await channel.aclose("local")
