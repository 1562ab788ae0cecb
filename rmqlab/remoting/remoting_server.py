"""RemotingServer: the listening side of the remoting protocol (``NettyRemotingServer``).

The name server, the broker and the controller each run one: it accepts connections on
``host:port``, makes each a :class:`RemotingChannel` and serves the requests on it with the
registered processors (``RemotingAbstract``). A processor may also call the client back on the
channel it was given (``invoke_sync(channel, ...)``), as a broker does to tell consumers their
group changed.

A connection that sends undecodable bytes is closed on its own (``RemotingChannel``); the server
keeps serving every other connection.

What a client can make the server hold is bounded:

* **idle connections**: a connection on which no whole frame was read or written for
  ``channel_max_idle_seconds`` (``NettyServerConfig.serverChannelMaxIdleTimeSeconds``, 120 by
  default, 0 for never) is closed, as NettyRemotingServer's ``IdleStateHandler(0, 0, idle)``
  and NettyConnectManageHandler do on ALL_IDLE (log line ``NETTY SERVER PIPELINE: IDLE exception
  [addr]``). Netty's handler sits after NettyDecoder, so it sees whole frames only: a sender that
  trickles a frame a byte a second is idle too, and is closed the same way (RocketMQ has no other
  deadline for finishing a frame, and none is added here);
* **unfinished frames**: one connection buffers at most one frame of up to ``FRAME_MAX_LENGTH``
  (16 MiB, NettyDecoder's limit; a larger length prefix closes it at once). Deviation: Netty caps
  only the frame, so N connections may hold N * 16 MiB until the JVM's heap runs out; here the
  connections of one server share ``max_buffered_bytes`` (:data:`SERVER_BUFFERED_BYTES_MAX`,
  64 MiB: four maximal frames at once, far more than real clients, whose messages are at most
  4 MiB, ever have in flight). When the total goes beyond it the connections holding the largest
  unfinished frames (the oldest first among equals) are closed, each with one log line, until it
  fits again.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from rmqlab.remoting.frame_decoder import FRAME_MAX_LENGTH
from rmqlab.remoting.remoting_abstract import ChannelEventListener, RemotingAbstract
from rmqlab.remoting.remoting_channel import RemotingChannel
from rmqlab.remoting.remoting_command import RemotingCommand

# NettyServerConfig.serverChannelMaxIdleTimeSeconds's default.
SERVER_CHANNEL_MAX_IDLE_TIME_SECONDS = 120
# The unfinished frames all connections of one server may hold together (module docstring).
SERVER_BUFFERED_BYTES_MAX = 4 * FRAME_MAX_LENGTH


class BufferBudget:
    """The bytes of unfinished frames the connections of one server hold, bounded in total."""

    def __init__(self, node: Node, max_bytes: int):
        if max_bytes < FRAME_MAX_LENGTH:
            raise ValueError(f"max_buffered_bytes {max_bytes} is below one maximal frame ({FRAME_MAX_LENGTH})")
        self.node = node
        self.max_bytes = max_bytes
        self.total = 0
        # channel -> (bytes held, node time its unfinished frame began); insertion order = age.
        self._held: dict[RemotingChannel, tuple[int, int]] = {}

    def account(self, channel: RemotingChannel, buffered: int) -> None:
        """``channel`` now holds ``buffered`` bytes of an unfinished frame; shed if over budget."""
        old = self._held.pop(channel, None)
        if old is not None:
            self.total -= old[0]
        if buffered:
            self._held[channel] = (buffered, old[1] if old is not None else self.node.now_ms())
            self.total += buffered
        if self.total > self.max_bytes:
            self._shed()

    def forget(self, channel: RemotingChannel) -> None:
        old = self._held.pop(channel, None)
        if old is not None:
            self.total -= old[0]

    def _shed(self) -> None:
        # Largest first (it frees the most); among equals the oldest, as dict order is age.
        victims = sorted(self._held.items(), key=lambda kv: -kv[1][0])
        for channel, (held, since) in victims:
            if self.total <= self.max_bytes:
                break
            self.node.log.warning("remoting: closing the connection with %s: its unfinished frame of %d bytes "
                                  "(since %d ms) is beyond the server's budget of %d buffered bytes",
                                  channel.remote_addr, held, self.node.now_ms() - since, self.max_bytes)
            self.forget(channel)
            channel.close("buffer budget exceeded")

if TYPE_CHECKING:
    from rmqlab.runtime.node import Listener, Node


class RemotingServer(RemotingAbstract):
    """Listen on ``host:port`` (0 picks a free port, see :attr:`port`) once :meth:`start` ran."""

    def __init__(self, node: Node, host: str, port: int,
                 channel_event_listener: ChannelEventListener | None = None, *,
                 channel_max_idle_seconds: int = SERVER_CHANNEL_MAX_IDLE_TIME_SECONDS,
                 max_buffered_bytes: int = SERVER_BUFFERED_BYTES_MAX):
        super().__init__(node, channel_event_listener)
        self.channel_max_idle_seconds = channel_max_idle_seconds
        self.buffer_budget = BufferBudget(node, max_buffered_bytes)
        self.host = host
        self._requested_port = port
        self._listener: Listener | None = None
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
        self._listener = await self.node.listen(self.host, self._requested_port, self.on_accept)

    async def on_accept(self, reader, writer) -> None:
        channel = RemotingChannel(self.node, reader, writer, self)
        if self._shut_down:
            channel.close("local")
            return
        self._channels.add(channel)
        channel.buffer_budget = self.buffer_budget
        channel.watch_idle(self.channel_max_idle_seconds * 1000)
        self.on_channel_connected(channel)
        # The reader is a task of the node's own, so closing the channel can cancel it; the
        # listener's handler task is the runtime's and just returns.
        self.node.spawn(channel.run(), name=f"remoting-server {channel.remote_addr}")

    def on_channel_closed(self, channel: RemotingChannel) -> None:
        self._channels.discard(channel)
        self.buffer_budget.forget(channel)
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
