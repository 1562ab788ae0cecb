"""RemotingAbstract: what the remoting server and client share (``NettyRemotingAbstract``).

Both own a processor table, request code -> processor, plus an optional default processor, and
serve the requests arriving on their channels with it (``processRequestCommand``). A processor is
an object with ``async def process(channel, request) -> RemotingCommand | None`` (RocketMQ's
``NettyRequestProcessor.processRequest``), or such a coroutine function itself. Returning None
sends nothing, for a processor that answers later or never (a held long poll answers through
``channel.write_response`` when data arrives).

What the layer answers on its own, as RocketMQ does:

* no processor for the code: REQUEST_CODE_NOT_SUPPORTED (3) with RocketMQ's remark
  ``" request type N not supported"`` (leading space included: Java builds it as
  ``" request type " + code + " not supported"``);
* the processor raised: SYSTEM_ERROR (1) with ``exception_simple_desc`` of the exception as the
  remark, and the exception logged with its traceback. Deviation: a request the processor
  found malformed (``RemotingCommandError``: a missing or mistyped header field, a body that is
  not what the code carries) is the client's mistake, not the server's: it is answered the same
  way and logged with RocketMQ's line, but as one line, without the traceback (RocketMQ logs
  every processor exception with its stack trace, which a misbehaving client can turn into
  gigabytes of log). Whatever
  the peer sent is quoted clipped (``remoting_helper.clip``), in the log and in the remark.

Oneway requests get neither (``writeResponse`` sends nothing for them).

Async request timeouts (``scanResponseTable``): RocketMQ arms no timer per async request; a timer
task of the client (first run 3 s after start, then every second) scans the responseTable and
fails every request whose ``beginTimestamp + timeoutMillis + 1000`` has passed. Here the owner
runs the same scan over the channels holding async requests (``RemotingChannel.invoke_async``),
on the node's timer and on the same grid (3 s after the owner was created, then every 1000 ms),
so on the simulator a timeout fails at the same virtual time every run. Deviation: the timer runs
only while some async request is pending (a scan of nothing does nothing, so the failures come at
the same ticks as with a timer that never stops), which lets a simulation go idle; and the
server side (NettyRemotingServer) gets the same scan for its callbacks to clients.

Deviation: RocketMQ gives each processor a thread pool and answers SYSTEM_BUSY when the pool's
queue is full; here each request is a task of the node, so there is no queue to overflow.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, Protocol

from rmqlab.remoting.exceptions import RemotingCommandError
from rmqlab.remoting.remoting_command import RemotingCommand
from rmqlab.remoting.remoting_helper import clip, exception_simple_desc, get_request_code_desc, get_response_code_desc
from rmqlab.remoting.response_code import RemotingSysResponseCode

if TYPE_CHECKING:
    from rmqlab.remoting.remoting_channel import RemotingChannel
    from rmqlab.runtime.node import Node

# NettyRemotingClient.start: the scan's first run, and its period.
SCAN_INITIAL_DELAY_MS = 3000
SCAN_PERIOD_MS = 1000

ProcessFunction = Callable[["RemotingChannel", RemotingCommand], Awaitable[RemotingCommand | None]]


class RequestProcessor(Protocol):
    async def process(self, channel: RemotingChannel, request: RemotingCommand) -> RemotingCommand | None: ...


class ChannelEventListener(Protocol):
    """``ChannelEventListener``: told when a channel opens and when it closes (the name server
    drops a broker's routes, the broker a client's registrations, when their channel closes)."""

    def on_channel_connect(self, remote_addr: str, channel: RemotingChannel) -> None: ...

    def on_channel_close(self, remote_addr: str, channel: RemotingChannel) -> None: ...


def _process_function(processor: RequestProcessor | ProcessFunction) -> ProcessFunction:
    fn = getattr(processor, "process", processor)
    if not callable(fn):
        raise TypeError(f"{processor!r} is neither a processor with process(channel, request) nor a callable")
    return fn


class RemotingAbstract:
    """Processor table and request dispatch; subclassed by RemotingServer and RemotingClient."""

    def __init__(self, node: Node, channel_event_listener: ChannelEventListener | None = None):
        self.node = node
        self.channel_event_listener = channel_event_listener
        self._processor_table: dict[int, ProcessFunction] = {}
        self._default_processor: ProcessFunction | None = None
        # scan_response_table: the channels holding async requests, and the scan's grid.
        self._scan_channels: dict[RemotingChannel, None] = {}  # insertion-ordered: scanned in that order
        self._scan_timer: Any = None
        self._next_scan_ms = node.now_ms() + SCAN_INITIAL_DELAY_MS
        # How the frame.* events name codes: RocketMQ's by default. A protocol of its own on this
        # transport (DLedger's RPC: request codes 50000+, SUCCESS = 200) names its own, so a trace
        # never calls a DLedger SUCCESS "TRANSACTION_SHOULD_COMMIT".
        self.describe_request_code: Callable[[int], str] = get_request_code_desc
        self.describe_response_code: Callable[[int], str] = get_response_code_desc

    def register_processor(self, request_code: int, processor: RequestProcessor | ProcessFunction) -> None:
        """Serve requests with ``request_code`` by ``processor`` (replacing any earlier one)."""
        self._processor_table[request_code] = _process_function(processor)

    def register_default_processor(self, processor: RequestProcessor | ProcessFunction) -> None:
        """Serve every code without a processor of its own by ``processor``."""
        self._default_processor = _process_function(processor)

    async def process_request_command(self, channel: RemotingChannel, request: RemotingCommand) -> None:
        """Serve one request and write its response (``processRequestCommand``)."""
        processor = self._processor_table.get(request.code, self._default_processor)
        if processor is None:
            error = f" request type {request.code} not supported"
            self.node.log.error("%s%s", channel.remote_addr, error)
            response: RemotingCommand | None = RemotingCommand.create_response_command(
                RemotingSysResponseCode.REQUEST_CODE_NOT_SUPPORTED, error)
        else:
            try:
                response = await processor(channel, request)
            except asyncio.CancelledError:
                raise
            except RemotingCommandError as e:
                self.node.log.error("process request exception, remoteAddr: %s, code %s: %s",
                                    channel.remote_addr, request.code, clip(e))
                response = RemotingCommand.create_response_command(RemotingSysResponseCode.SYSTEM_ERROR,
                                                                   clip(exception_simple_desc(e)))
            except Exception as e:
                self.node.log.exception("process request exception, remoteAddr: %s, %s",
                                        channel.remote_addr, clip(repr(request)))
                response = RemotingCommand.create_response_command(RemotingSysResponseCode.SYSTEM_ERROR,
                                                                   clip(exception_simple_desc(e)))
        await channel.write_response(request, response)

    # -- async request timeouts (scanResponseTable) -----------------------------------------------
    def watch_response_table(self, channel: RemotingChannel) -> None:
        """``channel`` holds an async request now: scan it until it holds none."""
        if channel not in self._scan_channels:
            self._scan_channels[channel] = None
        if self._scan_timer is None:
            self._arm_scan()

    def _arm_scan(self) -> None:
        now = self.node.now_ms()
        if self._next_scan_ms < now:  # ticks passed while nothing was pending: the next one on the grid
            self._next_scan_ms += -(-(now - self._next_scan_ms) // SCAN_PERIOD_MS) * SCAN_PERIOD_MS
        self._scan_timer = self.node.call_later(self._next_scan_ms - now, self._scan_tick)

    def _scan_tick(self) -> None:
        self._scan_timer = None
        self._next_scan_ms += SCAN_PERIOD_MS
        try:
            self.scan_response_table()
        except Exception:  # as RocketMQ's timer task: log, and scan again next time
            self.node.log.exception("remoting: scanResponseTable failed")
        if self._scan_channels:
            self._arm_scan()

    def scan_response_table(self) -> None:
        """Fail the async requests whose timeout plus 1000 ms has passed (``scanResponseTable``)."""
        now = self.node.now_ms()
        for channel in list(self._scan_channels):
            if not channel.scan_response_table(now):
                del self._scan_channels[channel]

    def stop_scan(self) -> None:
        """Stop the scan (``timer.cancel()`` of shutdown); the channels' close fails what is left."""
        if self._scan_timer is not None:
            self._scan_timer.cancel()
            self._scan_timer = None
        self._scan_channels.clear()

    # -- channel events ---------------------------------------------------------------------------
    def on_channel_connected(self, channel: RemotingChannel) -> None:
        if self.channel_event_listener is not None:
            self._notify(self.channel_event_listener.on_channel_connect, channel)

    def on_channel_closed(self, channel: RemotingChannel) -> None:
        """Called once by a channel of this owner when it closes; subclasses forget it here."""
        self._scan_channels.pop(channel, None)  # close failed its requests already
        if self.channel_event_listener is not None:
            self._notify(self.channel_event_listener.on_channel_close, channel)

    def _notify(self, callback: Callable[[str, Any], None], channel: RemotingChannel) -> None:
        try:
            callback(channel.remote_addr, channel)
        except Exception:
            # A listener's bug must not stop the connection from being opened or cleaned up.
            self.node.log.exception("remoting: channel event listener failed for %s", channel.remote_addr)
