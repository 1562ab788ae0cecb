"""FramedGrpcServer: MessagingService over framed RPC (rmqlab.proto.framed), the Proxy's
server on the simulator, where grpcio cannot open sockets. Deviation from RocketMQ (gRPC over
HTTP/2); see the framed module for why and what stays the same.

It serves the same method table (GrpcMessagingActivity.methods) the way GrpcServer serves it
through grpcio, and answers as grpcio would:

    unknown method                              STATUS UNIMPLEMENTED
    request bytes that are not the message      STATUS INVALID_ARGUMENT (the same text as GrpcServer)
    a unary call with a second message, or      STATUS INTERNAL
      ended without any
    Telemetry ended by the Proxy (StreamAbort)  STATUS with its code
    the caller's deadline passes                the call is cancelled (the caller reports
                                                DEADLINE_EXCEEDED itself, as a gRPC client does)
    CANCEL, or the connection is lost           the call is cancelled: ReceiveMessage hands back
                                                what it had found (nack), Telemetry forgets the client
    a bad frame                                 the connection is closed; the server goes on

Every call runs as a task of the node, so a crash of the Proxy's node ends them all.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from rmqlab.proto.framed import CALL, CANCEL, END_STREAM, HALF_CLOSE, MESSAGE, SERVER, STATUS, Frame
from rmqlab.proto.framed_connection import FramedConnection
from rmqlab.proto.status import status_name
from rmqlab.proxy.grpc.v2.client_activity import StreamAbort
from rmqlab.proxy.grpc.v2.grpc_messaging_activity import (BIDI_STREAM, SERVICE_NAME, UNARY, GrpcMessagingActivity,
                                                          InvalidRequest, MethodSpec)
from rmqlab.proxy.grpc.v2.proxy_context import ProxyContext

if TYPE_CHECKING:
    from rmqlab.runtime.node import Listener, Node, Timer

log = logging.getLogger("rmqlab.proxy")

_END = object()  # the end of a bidi call's request stream


@dataclass
class _Call:
    spec: MethodSpec
    ctx: ProxyContext
    requests: asyncio.Queue | None = None  # bidi: parsed requests, then _END
    got_request: bool = False
    task: asyncio.Task | None = None
    deadline: Timer | None = None
    done: bool = False


@dataclass
class _Connection:
    conn: FramedConnection | None = None
    calls: dict[int, _Call] = field(default_factory=dict)
    last_call_id: int = 0


class FramedGrpcServer:
    """The same surface as GrpcServer: start(), shutdown(), host, port."""

    def __init__(self, node: Node, activity: GrpcMessagingActivity, host: str, port: int,
                 max_inbound_message_size: int):
        self.node = node
        self.activity = activity
        self.host = host
        self.port = port
        self.max_inbound_message_size = max_inbound_message_size
        self._listener: Listener | None = None
        self._connections: list[_Connection] = []

    async def start(self) -> None:
        self._listener = await self.node.listen(self.host, self.port, self._on_accept)
        self.port = self._listener.port

    async def shutdown(self) -> None:
        if self._listener is not None:
            self._listener.close()
            self._listener = None
        for c in list(self._connections):
            c.conn.close("local")

    # -- connections ------------------------------------------------------------------------------
    async def _on_accept(self, reader, writer) -> None:
        state = _Connection()
        # Frame = type + call id + flags + the message: room for the largest message allowed.
        state.conn = FramedConnection(self.node, reader, writer, SERVER, lambda f: self._on_frame(state, f),
                                      lambda reason: self._on_closed(state), max_frame_length=
                                      self.max_inbound_message_size + 64)
        if self._listener is None:
            state.conn.close("local")
            return
        self._connections.append(state)
        self.node.spawn(state.conn.run(), name=f"grpc-server {state.conn.remote_addr}")

    def _on_closed(self, state: _Connection) -> None:
        if state in self._connections:
            self._connections.remove(state)
        for call_id in list(state.calls):
            self._end(state, call_id, cancel=True)

    def _on_frame(self, state: _Connection, frame: Frame) -> None:
        conn, call_id = state.conn, frame.call_id
        if frame.type == CALL:
            if call_id <= state.last_call_id:
                conn.close(f"frame error: call id {call_id} is not above the last one ({state.last_call_id})")
                return
            state.last_call_id = call_id
            self._open(state, frame)
            return
        call = state.calls.get(call_id)
        if call is None:
            if call_id > state.last_call_id:
                conn.close(f"frame error: {frame.name} for call {call_id}, which was never opened")
            # else: a call that has ended (answered, cancelled, expired): what the client sent
            # meanwhile is dropped, as for a reset HTTP/2 stream.
            return
        if frame.type == CANCEL:
            self._end(state, call_id, cancel=True)
        elif frame.type == MESSAGE:
            self._message(state, call_id, call, frame)
        elif frame.type == HALF_CLOSE:
            if call.requests is not None:
                call.requests.put_nowait(_END)
            elif not call.got_request:
                self._fail(state, call_id, "INTERNAL", f"{call.spec.name}: the request stream ended without "
                                                       "a request message")

    def _open(self, state: _Connection, frame: Frame) -> None:
        call_id, method = frame.call_id, frame["method"]
        spec = self.activity.methods.get(method)
        if spec is None:
            state.conn.send(STATUS, call_id, code="UNIMPLEMENTED",
                            details=f"Method not found: {SERVICE_NAME}/{method}")
            return
        timeout_ms = frame["timeout_ms"]
        ctx = ProxyContext.from_metadata(frame["metadata"], remote_address=state.conn.remote_addr,
                                         local_address=f"{self.host}:{self.port}",
                                         remaining_ms=float(timeout_ms) if timeout_ms else None)
        call = _Call(spec, ctx)
        state.calls[call_id] = call
        if timeout_ms:
            call.deadline = self.node.call_later(timeout_ms, lambda: self._end(state, call_id, cancel=True))
        if spec.shape == BIDI_STREAM:
            call.requests = asyncio.Queue()
            call.task = self.node.spawn(self._serve(state, call_id, call, None), name=f"grpc {method}")

    def _message(self, state: _Connection, call_id: int, call: _Call, frame: Frame) -> None:
        try:
            request = call.spec.parse_request(frame["message"])
        except InvalidRequest as e:
            self._fail(state, call_id, "INVALID_ARGUMENT", str(e))
            return
        if call.requests is not None:
            call.requests.put_nowait(request)
            if frame["flags"] & END_STREAM:
                call.requests.put_nowait(_END)
            return
        if call.got_request:
            self._fail(state, call_id, "INTERNAL", f"{call.spec.name}: more than one request message on a "
                                                   "call that takes one")
            return
        call.got_request = True
        call.task = self.node.spawn(self._serve(state, call_id, call, request), name=f"grpc {call.spec.name}")

    def _fail(self, state: _Connection, call_id: int, code: str, details: str) -> None:
        self._end(state, call_id, cancel=True)
        with contextlib.suppress(ConnectionError):
            state.conn.send(STATUS, call_id, code=code, details=details)

    def _end(self, state: _Connection, call_id: int, cancel: bool) -> None:
        call = state.calls.pop(call_id, None)
        if call is None:
            return
        call.done = True
        if call.deadline is not None:
            call.deadline.cancel()
        if cancel and call.task is not None and call.task is not asyncio.current_task():
            call.task.cancel()

    # -- one call ---------------------------------------------------------------------------------
    async def _serve(self, state: _Connection, call_id: int, call: _Call, request: Any) -> None:
        spec, conn = call.spec, state.conn

        def out(message) -> None:
            status = status_name(message)
            conn.send(MESSAGE, call_id, trace={"status": status} if status else None, flags=0,
                      message=message.SerializeToString())

        if spec.shape == BIDI_STREAM:
            async def push(message) -> None:
                if call.done:
                    raise ConnectionError(f"{spec.name} stream {call_id} has ended")
                out(message)
            call.ctx.push = push

        code, details = "OK", ""
        try:
            if spec.shape == UNARY:
                out(await self.activity.call_unary(spec, call.ctx, request))
            else:
                source = spec.handler(call.ctx, self._requests(call) if spec.shape == BIDI_STREAM else request)
                async with contextlib.aclosing(source) as responses:
                    async for response in responses:
                        out(response)
        except StreamAbort as e:
            code, details = e.grpc_code, e.message
        except ConnectionError:
            self._end(state, call_id, cancel=False)
            return  # the connection is gone: nobody to answer
        except asyncio.CancelledError:
            raise
        except Exception as e:  # a bug must end this call only, as grpcio answers UNKNOWN
            log.exception("proxy: %s failed", spec.name)
            code, details = "UNKNOWN", f"{type(e).__name__}: {e}"
        if call.done:
            return
        self._end(state, call_id, cancel=False)
        with contextlib.suppress(ConnectionError):
            conn.send(STATUS, call_id, code=code, details=details)

    @staticmethod
    async def _requests(call: _Call):
        while True:
            request = await call.requests.get()
            if request is _END:
                return
            yield request
