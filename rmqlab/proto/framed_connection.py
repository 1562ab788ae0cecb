"""FramedConnection: one connection carrying framed RPC (rmqlab.proto.framed), either end.

It reads and decodes frames and hands each to its owner (the Proxy's FramedGrpcServer, or the
client's FramedTransport), writes frames, and traces both: `frame.recv` / `frame.send` with
proto "grpc", the peer, the size, the frame type (`frame`), `call_id`, the call's `method`, and
what the owner reads from the message: `status` (the response's Status code name, as the grpcio
server traces it) or, for STATUS frames, `grpc_status` and `details`. A bad frame closes the
connection (traced as `net.close` with the reason) and nothing else. Only the Node interface and
the stream methods both runtimes provide are used.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from rmqlab.proto.framed import CALL, CANCEL, DEFAULT_MAX_FRAME_LENGTH, FRAME_TYPES, GRPC_STATUS_CODES, STATUS, \
    Frame, FrameDecoder, GrpcFrameError, encode_frame
from rmqlab.remoting.remoting_helper import peer_address

if TYPE_CHECKING:
    from rmqlab.runtime.node import Node

_READ_SIZE = 256 * 1024


class FramedConnection:
    """`on_frame(frame)` is called for every frame read, `on_closed(reason)` once when the
    connection ends; `describe(frame) -> dict` adds fields to a received frame's trace event (it
    must not trace or send anything itself: the event is emitted after it returns)."""

    def __init__(self, node: Node, reader: Any, writer: Any, side: str, on_frame: Callable[[Frame], None],
                 on_closed: Callable[[str], None], describe: Callable[[Frame], dict] | None = None,
                 max_frame_length: int = DEFAULT_MAX_FRAME_LENGTH, remote_addr: str | None = None):
        self.node = node
        self.side = side  # "client" or "server": which frame types this end may receive
        self._reader, self._writer = reader, writer
        self.remote_addr = remote_addr or peer_address(writer.get_extra_info("peername"))
        self._on_frame, self._on_closed = on_frame, on_closed
        self._describe = describe or (lambda frame: {})
        self._decoder = FrameDecoder(max_frame_length)
        self.methods: dict[int, str] = {}  # open calls: call id -> method, for the trace
        self.closed = False
        self.close_reason: str | None = None
        self._run_task: asyncio.Task | None = None

    async def run(self) -> None:
        """Read until the connection ends, then close. A node task; `close` cancels it."""
        self._run_task = asyncio.current_task()
        reason = "remote"
        try:
            while not self.closed:
                try:
                    data = await self._reader.read(_READ_SIZE)
                except (ConnectionError, OSError) as e:
                    reason = f"reset: {e}" if str(e) else "reset"
                    break
                if not data:
                    break
                error = None
                try:
                    frames = self._decoder.feed(data)
                except GrpcFrameError as e:
                    frames, error = e.frames, e
                for frame in frames:
                    if self.closed:
                        break
                    self._receive(frame)
                if error is not None:
                    reason = f"frame error: {error.reason}"
                    self.node.log.warning("grpc: closing the connection with %s: %s", self.remote_addr, error.reason)
                    break
        except ConnectionError as e:  # an answer the owner wrote found the connection reset
            reason = f"reset: {e}"
        except asyncio.CancelledError:
            reason = "local"
            raise
        finally:
            self.close(reason)

    def _receive(self, frame: Frame) -> None:
        spec = FRAME_TYPES[frame.type]
        if spec.sent_by == self.side:
            self.close(f"frame error: a {spec.name} frame is sent by the {spec.sent_by}, not to it")
            return
        if frame.type == STATUS and frame["code"] not in GRPC_STATUS_CODES:
            self.close(f"frame error: STATUS with {frame['code']!r}, not a gRPC status code")
            return
        if frame.type == CALL:
            self.methods[frame.call_id] = frame["method"]
        fields = {"proto": "grpc", "peer": self.remote_addr, "size": frame.size, "frame": spec.name,
                  "call_id": frame.call_id}
        method = self.methods.get(frame.call_id)
        if method is not None:
            fields["method"] = method
        if frame.type == STATUS:
            fields["grpc_status"] = frame["code"]
            if frame["details"]:
                fields["details"] = frame["details"]
        fields.update(self._describe(frame))
        if frame.type in (STATUS, CANCEL):
            self.methods.pop(frame.call_id, None)
        self.node.trace("frame.recv", **fields)
        self._on_frame(frame)

    def send(self, type_: int, call_id: int, trace: dict | None = None, **values: Any) -> None:
        """Write one frame (ConnectionResetError when the connection is closed). `trace`: extra
        fields for its frame.send event (a response's status)."""
        if self.closed or self._writer.is_closing():
            raise ConnectionResetError(f"connection to {self.remote_addr} is closed ({self.close_reason or 'closing'})")
        data = encode_frame(type_, call_id, **values)
        if type_ == CALL:
            self.methods[call_id] = values["method"]
        fields = {"proto": "grpc", "peer": self.remote_addr, "size": len(data), "frame": FRAME_TYPES[type_].name,
                  "call_id": call_id}
        method = self.methods.get(call_id)
        if method is not None:
            fields["method"] = method
        if type_ == STATUS:
            fields["grpc_status"] = values["code"]
            if values["details"]:
                fields["details"] = values["details"]
        if trace:
            fields.update(trace)
        if type_ in (STATUS, CANCEL):
            self.methods.pop(call_id, None)
        self.node.trace("frame.send", **fields)
        self._writer.write(data)

    def close(self, reason: str = "local") -> None:
        if self.closed:
            return
        self.closed = True
        self.close_reason = reason
        self.node.trace("net.close", peer=self.remote_addr, reason=reason)
        try:
            self._writer.close()
        except (ConnectionError, OSError):
            pass
        if self._run_task is not None and self._run_task is not asyncio.current_task():
            self._run_task.cancel()
        self._on_closed(reason)
