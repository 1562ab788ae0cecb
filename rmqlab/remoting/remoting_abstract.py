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
  remark, and the exception logged with its traceback.

Oneway requests get neither (``writeResponse`` sends nothing for them).

Deviation: RocketMQ gives each processor a thread pool and answers SYSTEM_BUSY when the pool's
queue is full; here each request is a task of the node, so there is no queue to overflow.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, Protocol

from rmqlab.remoting.remoting_command import RemotingCommand
from rmqlab.remoting.remoting_helper import exception_simple_desc
from rmqlab.remoting.response_code import RemotingSysResponseCode

if TYPE_CHECKING:
    from rmqlab.remoting.remoting_channel import RemotingChannel
    from rmqlab.runtime.node import Node

ProcessFunction = Callable[["RemotingChannel", RemotingCommand], Awaitable[RemotingCommand | None]]


class RequestProcessor(Protocol):
    async def process(self, channel: "RemotingChannel", request: RemotingCommand) -> RemotingCommand | None: ...


class ChannelEventListener(Protocol):
    """``ChannelEventListener``: told when a channel opens and when it closes (the name server
    drops a broker's routes, the broker a client's registrations, when their channel closes)."""

    def on_channel_connect(self, remote_addr: str, channel: "RemotingChannel") -> None: ...

    def on_channel_close(self, remote_addr: str, channel: "RemotingChannel") -> None: ...


def _process_function(processor: RequestProcessor | ProcessFunction) -> ProcessFunction:
    fn = getattr(processor, "process", processor)
    if not callable(fn):
        raise TypeError(f"{processor!r} is neither a processor with process(channel, request) nor a callable")
    return fn


class RemotingAbstract:
    """Processor table and request dispatch; subclassed by RemotingServer and RemotingClient."""

    def __init__(self, node: "Node", channel_event_listener: ChannelEventListener | None = None):
        self.node = node
        self.channel_event_listener = channel_event_listener
        self._processor_table: dict[int, ProcessFunction] = {}
        self._default_processor: ProcessFunction | None = None

    def register_processor(self, request_code: int, processor: RequestProcessor | ProcessFunction) -> None:
        """Serve requests with ``request_code`` by ``processor`` (replacing any earlier one)."""
        self._processor_table[request_code] = _process_function(processor)

    def register_default_processor(self, processor: RequestProcessor | ProcessFunction) -> None:
        """Serve every code without a processor of its own by ``processor``."""
        self._default_processor = _process_function(processor)

    async def process_request_command(self, channel: "RemotingChannel", request: RemotingCommand) -> None:
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
            except Exception as e:
                self.node.log.exception("process request exception, remoteAddr: %s, %r",
                                        channel.remote_addr, request)
                response = RemotingCommand.create_response_command(RemotingSysResponseCode.SYSTEM_ERROR,
                                                                   exception_simple_desc(e))
        await channel.write_response(request, response)

    # -- channel events ---------------------------------------------------------------------------
    def on_channel_connected(self, channel: "RemotingChannel") -> None:
        if self.channel_event_listener is not None:
            self._notify(self.channel_event_listener.on_channel_connect, channel)

    def on_channel_closed(self, channel: "RemotingChannel") -> None:
        """Called once by a channel of this owner when it closes; subclasses forget it here."""
        if self.channel_event_listener is not None:
            self._notify(self.channel_event_listener.on_channel_close, channel)

    def _notify(self, callback: Callable[[str, Any], None], channel: "RemotingChannel") -> None:
        try:
            callback(channel.remote_addr, channel)
        except Exception:
            # A listener's bug must not stop the connection from being opened or cleaned up.
            self.node.log.exception("remoting: channel event listener failed for %s", channel.remote_addr)
