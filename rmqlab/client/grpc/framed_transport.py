"""FramedTransport: the client end of framed RPC (rmqlab.proto.framed), what rmqlab's 5.x
client speaks inside the simulator. Deviation from RocketMQ's clients (gRPC over HTTP/2): grpcio
cannot run on the simulator's in-memory network; see the framed module.

One connection per endpoint, calls multiplexed on it by call id (as gRPC multiplexes HTTP/2
streams on one channel), opened at the first call and again after it is lost. Deadlines run on
the node's clock: when one passes, the call is cancelled (CANCEL) and fails DEADLINE_EXCEEDED,
as a gRPC client's does. Every frame is traced by FramedConnection.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Any

from google.protobuf.message import DecodeError

from rmqlab.client.grpc.rpc import BidiStream, Metadata, RpcError, RpcTransport
from rmqlab.proto.framed import CALL, CANCEL, CLIENT, END_STREAM, HALF_CLOSE, MESSAGE, STATUS, Frame
from rmqlab.proto.framed_connection import FramedConnection
from rmqlab.proto.status import status_name

if TYPE_CHECKING:
    from rmqlab.runtime.node import Node

CONNECT_TIMEOUT_MS = 3000
MAX_FRAME_LENGTH = 130 * 1024 * 1024 + 64  # the Proxy's grpcMaxInboundMessageSize, plus the frame header


class _Call:
    """One call's events, in order: ("message", msg), ("status", code, details), ("lost", reason),
    ("deadline",)."""

    def __init__(self, response_class: type):
        self.response_class = response_class
        self.events: asyncio.Queue = asyncio.Queue()
        self.ended = False


class _Channel:
    def __init__(self, endpoint: str):
        self.endpoint = endpoint
        self.conn: FramedConnection | None = None
        self.ready: asyncio.Future | None = None
        self.calls: dict[int, _Call] = {}
        self.next_call_id = 1
        self.lost = False


class FramedTransport(RpcTransport):
    def __init__(self, node: Node, connect_timeout_ms: float = CONNECT_TIMEOUT_MS):
        self.node = node
        self.connect_timeout_ms = connect_timeout_ms
        self._channels: dict[str, _Channel] = {}

    # -- connections ------------------------------------------------------------------------------
    async def _channel(self, endpoint: str) -> _Channel:
        ch = self._channels.get(endpoint)
        if ch is not None and not ch.lost:
            await asyncio.shield(ch.ready)  # connected, or another call is connecting
            return ch
        ch = self._channels[endpoint] = _Channel(endpoint)
        ch.ready = asyncio.get_running_loop().create_future()
        try:
            await self._connect(ch)
        except BaseException as e:
            ch.lost = True
            error = e if isinstance(e, RpcError) else RpcError("UNAVAILABLE", f"connect to {endpoint} abandoned",
                                                              sent=False)
            ch.ready.set_exception(error)
            ch.ready.exception()  # retrieved: the other callers, if any, get it too
            raise
        ch.ready.set_result(None)
        return ch

    async def _connect(self, ch: _Channel) -> None:
        host, _, port = ch.endpoint.rpartition(":")
        try:
            reader, writer = await self.node.connect(host, int(port), self.connect_timeout_ms)
        except (OSError, TimeoutError) as e:
            raise RpcError("UNAVAILABLE", f"cannot connect to {ch.endpoint}: {e}", sent=False) from None
        ch.conn = FramedConnection(self.node, reader, writer, CLIENT, lambda f: self._on_frame(ch, f),
                                   lambda reason: self._on_closed(ch, reason), lambda f: self._describe(ch, f),
                                   MAX_FRAME_LENGTH, remote_addr=ch.endpoint)
        self.node.spawn(ch.conn.run(), name=f"grpc-client {ch.endpoint}")

    def _describe(self, ch: _Channel, frame: Frame) -> dict:
        """Parse a response message as it is read, for the trace's `status` (and for the caller)."""
        call = ch.calls.get(frame.call_id)
        if frame.type != MESSAGE or call is None:
            return {}
        try:
            message = call.response_class.FromString(frame["message"])
        except DecodeError as e:
            frame.fields["parsed"] = RpcError("INTERNAL", f"the response is not a valid "
                                                          f"{call.response_class.DESCRIPTOR.full_name}: {e}")
            return {}
        frame.fields["parsed"] = message
        status = status_name(message)
        return {"status": status} if status else {}

    def _on_frame(self, ch: _Channel, frame: Frame) -> None:
        call = ch.calls.get(frame.call_id)
        if call is None:
            return  # a call this side gave up on (deadline): what was still on the way is dropped
        if frame.type == MESSAGE:
            call.events.put_nowait(("message", frame["parsed"]))
        elif frame.type == STATUS:
            ch.calls.pop(frame.call_id, None)
            call.events.put_nowait(("status", frame["code"], frame["details"]))

    def _on_closed(self, ch: _Channel, reason: str) -> None:
        ch.lost = True
        calls, ch.calls = ch.calls, {}
        for call in calls.values():
            call.events.put_nowait(("lost", reason))

    def _open(self, ch: _Channel, method: str, response_class: type, metadata: Metadata,
              timeout_ms: float) -> tuple[int, _Call]:
        call_id = ch.next_call_id
        ch.next_call_id += 1
        try:
            ch.conn.send(CALL, call_id, method=method, timeout_ms=int(timeout_ms), metadata=metadata)
        except ConnectionError as e:
            raise RpcError("UNAVAILABLE", str(e), sent=False) from None
        call = _Call(response_class)
        ch.calls[call_id] = call
        return call_id, call

    async def _next(self, ch: _Channel, call_id: int, call: _Call) -> tuple:
        event = await call.events.get()
        kind = event[0]
        if kind == "lost":
            call.ended = True
            raise RpcError("UNAVAILABLE", f"connection to {ch.endpoint} lost ({event[1]})")
        if kind == "deadline":
            call.ended = True
            if ch.calls.pop(call_id, None) is not None:
                _quietly(ch.conn.send, CANCEL, call_id)
            raise RpcError("DEADLINE_EXCEEDED", "Deadline Exceeded")
        if kind == "status":
            call.ended = True
            if event[1] != "OK":
                raise RpcError(event[1], event[2])
        elif isinstance(event[1], RpcError):
            raise event[1]
        return event

    def _deadline(self, call: _Call, timeout_ms: float):
        return self.node.call_later(timeout_ms, lambda: call.events.put_nowait(("deadline",)))

    # -- calls ------------------------------------------------------------------------------------
    async def unary(self, endpoint: str, method: str, request: Any, response_class: type, metadata: Metadata,
                    timeout_ms: float) -> Any:
        ch = await self._channel(endpoint)
        call_id, call = self._open(ch, method, response_class, metadata, timeout_ms)
        timer = self._deadline(call, timeout_ms)
        try:
            ch.conn.send(MESSAGE, call_id, flags=END_STREAM, message=request.SerializeToString())
            response = None
            while True:
                event = await self._next(ch, call_id, call)
                if event[0] == "message":
                    response = event[1]
                elif response is None:
                    raise RpcError("INTERNAL", f"{method}: the call ended without a response")
                else:
                    return response
        except ConnectionError as e:
            raise RpcError("UNAVAILABLE", str(e)) from None
        finally:
            timer.cancel()

    async def server_stream(self, endpoint: str, method: str, request: Any, response_class: type,
                            metadata: Metadata, timeout_ms: float) -> AsyncIterator[Any]:
        ch = await self._channel(endpoint)
        call_id, call = self._open(ch, method, response_class, metadata, timeout_ms)
        timer = self._deadline(call, timeout_ms)
        try:
            ch.conn.send(MESSAGE, call_id, flags=END_STREAM, message=request.SerializeToString())
            while True:
                event = await self._next(ch, call_id, call)
                if event[0] != "message":
                    return
                yield event[1]
        except ConnectionError as e:
            raise RpcError("UNAVAILABLE", str(e)) from None
        finally:
            timer.cancel()

    async def bidi(self, endpoint: str, method: str, response_class: type, metadata: Metadata) -> BidiStream:
        ch = await self._channel(endpoint)
        call_id, call = self._open(ch, method, response_class, metadata, 0)
        return _FramedBidi(self, ch, call_id, call)

    async def close(self) -> None:
        for ch in list(self._channels.values()):
            if ch.conn is not None:
                ch.conn.close("local")
        self._channels.clear()

    def drop(self) -> None:
        self._channels.clear()


class _FramedBidi(BidiStream):
    def __init__(self, transport: FramedTransport, ch: _Channel, call_id: int, call: _Call):
        self.transport, self.ch, self.call_id, self.call = transport, ch, call_id, call

    def write(self, message: Any) -> None:
        if self.call.ended:
            raise RpcError("CANCELLED", "the stream has ended")
        try:
            self.ch.conn.send(MESSAGE, self.call_id, flags=0, message=message.SerializeToString())
        except ConnectionError as e:
            raise RpcError("UNAVAILABLE", str(e)) from None

    async def read(self) -> Any:
        if self.call.ended:
            return None
        event = await self.transport._next(self.ch, self.call_id, self.call)
        return event[1] if event[0] == "message" else None

    def done_writing(self) -> None:
        """Half-close: no more requests (the server then ends the stream)."""
        if not self.call.ended:
            _quietly(self.ch.conn.send, HALF_CLOSE, self.call_id)

    def cancel(self) -> None:
        if self.call.ended:
            return
        self.call.ended = True
        if self.ch.calls.pop(self.call_id, None) is not None:
            _quietly(self.ch.conn.send, CANCEL, self.call_id)


def _quietly(send, *args) -> None:
    """Send a frame that only tells the server to stop: on a lost connection it has stopped."""
    try:
        send(*args)
    except ConnectionError:
        pass
