"""Framed RPC: `apache.rocketmq.v2.MessagingService` on a plain byte stream, the Proxy's transport
on the simulator. The protocol core: the frame table, encoding, and an incremental decoder; no I/O.

Deviation from RocketMQ: RocketMQ's Proxy speaks gRPC (HTTP/2) and so does rmqlab's on real
processes (rmqlab.proxy.grpc.grpc_server). grpcio opens its own sockets, which the simulator's
in-memory network cannot give it, so on the simulator the same activities
(GrpcMessagingActivity.methods) are served over this framing instead. What travels is the same:
per call a method name, the caller's metadata and deadline, the serialized protobuf request and
response messages, server streaming (ReceiveMessage) and bidirectional streaming (Telemetry), and
a gRPC status at the end. What differs is only the envelope: one length-prefixed frame per gRPC
event instead of HTTP/2 frames and HPACK headers.

Frame (big-endian):

    length   u32   bytes after this field (type, call id and the type's fields)
    type     u8    a key of FRAME_TYPES
    call_id  u32   chosen by the client, increasing on a connection (an HTTP/2 stream id)
    fields   ...   the type's fields, in table order

    type  name        sent by  fields                                    gRPC / HTTP/2 counterpart
    1     CALL        client   method str, timeout_ms u32, metadata      HEADERS (:path, grpc-timeout, metadata)
    2     MESSAGE     both     flags u8, message bytes                   DATA (one length-prefixed message)
    3     HALF_CLOSE  client   -                                         empty DATA with END_STREAM
    4     STATUS      server   code str, details str                     trailers (grpc-status, grpc-message)
    5     CANCEL      client   -                                         RST_STREAM (CANCEL)

Field codecs: `str` a u16 byte count then UTF-8; `u8` / `u32` unsigned integers; `pairs` a u16
count then that many (str key, str value); `bytes` the rest of the frame. `timeout_ms` 0 means
no deadline. MESSAGE flag END_STREAM (bit 0): the client sends no more messages on this call
(a unary request is CALL then MESSAGE with END_STREAM; HALF_CLOSE ends a stream without a
message). STATUS codes are gRPC's status code names (OK, INVALID_ARGUMENT, UNIMPLEMENTED, ...).

A bad frame (unknown type, a field cut short, text that is not UTF-8, a length under the 5-byte
minimum or over the limit, judged from the prefix before the frame is buffered) raises
GrpcFrameError and poisons the decoder: the stream has lost its framing and the connection
carrying it is closed, as an HTTP/2 connection error closes an HTTP/2 connection.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field
from typing import Any

CALL, MESSAGE, HALF_CLOSE, STATUS, CANCEL = 1, 2, 3, 4, 5
END_STREAM = 0x01
CLIENT, SERVER = "client", "server"
MIN_FRAME_LENGTH = 5  # type + call id
DEFAULT_MAX_FRAME_LENGTH = 16 * 1024 * 1024 + 64

# gRPC's status codes (grpc.StatusCode names), what STATUS frames carry.
GRPC_STATUS_CODES = ("OK", "CANCELLED", "UNKNOWN", "INVALID_ARGUMENT", "DEADLINE_EXCEEDED", "NOT_FOUND",
                     "ALREADY_EXISTS", "PERMISSION_DENIED", "RESOURCE_EXHAUSTED", "FAILED_PRECONDITION",
                     "ABORTED", "OUT_OF_RANGE", "UNIMPLEMENTED", "INTERNAL", "UNAVAILABLE", "DATA_LOSS",
                     "UNAUTHENTICATED")


@dataclass(frozen=True)
class FrameType:
    name: str
    sent_by: str
    fields: tuple[tuple[str, str], ...]  # (name, codec)


FRAME_TYPES: dict[int, FrameType] = {
    CALL: FrameType("CALL", CLIENT, (("method", "str"), ("timeout_ms", "u32"), ("metadata", "pairs"))),
    MESSAGE: FrameType("MESSAGE", "both", (("flags", "u8"), ("message", "bytes"))),
    HALF_CLOSE: FrameType("HALF_CLOSE", CLIENT, ()),
    STATUS: FrameType("STATUS", SERVER, (("code", "str"), ("details", "str"))),
    CANCEL: FrameType("CANCEL", CLIENT, ()),
}

_U8, _U16, _U32 = struct.Struct(">B"), struct.Struct(">H"), struct.Struct(">I")
_HEAD = struct.Struct(">IBI")  # length, type, call id


class GrpcFrameError(ValueError):
    """Bytes that are not a valid frame; `reason` says what was wrong. `frames` holds the frames
    completed before the bad one (they arrived intact and are still handled)."""

    def __init__(self, reason: str, frames: list | None = None):
        super().__init__(reason)
        self.reason = reason
        self.frames = frames if frames is not None else []


@dataclass
class Frame:
    type: int
    call_id: int
    fields: dict[str, Any] = field(default_factory=dict)
    size: int = 0  # bytes on the wire, length prefix included

    @property
    def name(self) -> str:
        return FRAME_TYPES[self.type].name

    def __getitem__(self, key: str) -> Any:
        return self.fields[key]


# -- encoding ------------------------------------------------------------------------------------
def _put_str(out: list[bytes], value: str, what: str) -> None:
    data = value.encode("utf-8")
    if len(data) > 0xFFFF:
        raise ValueError(f"{what}: {len(data)} bytes of text, more than a frame field holds (65535)")
    out.append(_U16.pack(len(data)))
    out.append(data)


def _encode_field(out: list[bytes], codec: str, value: Any, what: str) -> None:
    if codec == "str":
        _put_str(out, value, what)
    elif codec == "u8":
        out.append(_U8.pack(value))
    elif codec == "u32":
        out.append(_U32.pack(value))
    elif codec == "pairs":
        pairs = list(value)
        out.append(_U16.pack(len(pairs)))
        for k, v in pairs:
            _put_str(out, k, what)
            _put_str(out, v, what)
    else:  # bytes: the rest of the frame
        out.append(bytes(value))


def encode_frame(type_: int, call_id: int, **values: Any) -> bytes:
    """The bytes of one frame; `values` are the type's fields (all of them)."""
    spec = FRAME_TYPES[type_]
    body: list[bytes] = []
    for name, codec in spec.fields:
        _encode_field(body, codec, values[name], f"{spec.name}.{name}")
    unknown = set(values) - {name for name, _ in spec.fields}
    if unknown:
        raise ValueError(f"{spec.name} has no field(s) {', '.join(sorted(unknown))}")
    payload = b"".join(body)
    return _HEAD.pack(MIN_FRAME_LENGTH + len(payload), type_, call_id) + payload


# -- decoding ------------------------------------------------------------------------------------
def _take_str(view: memoryview, pos: int, end: int, what: str) -> tuple[str, int]:
    if end - pos < 2:
        raise GrpcFrameError(f"{what}: frame ends inside a text length")
    n = _U16.unpack_from(view, pos)[0]
    pos += 2
    if end - pos < n:
        raise GrpcFrameError(f"{what}: text of {n} bytes runs past the end of the frame")
    try:
        return bytes(view[pos:pos + n]).decode("utf-8"), pos + n
    except UnicodeDecodeError as e:
        raise GrpcFrameError(f"{what}: text is not UTF-8 ({e.reason})") from None


def decode_fields(type_: int, view: memoryview, pos: int, end: int) -> dict[str, Any]:
    """The fields of a frame of `type_` from view[pos:end] (the bytes after the call id)."""
    spec = FRAME_TYPES[type_]
    out: dict[str, Any] = {}
    for name, codec in spec.fields:
        what = f"{spec.name}.{name}"
        if codec == "str":
            out[name], pos = _take_str(view, pos, end, what)
        elif codec in ("u8", "u32"):
            s = _U8 if codec == "u8" else _U32
            if end - pos < s.size:
                raise GrpcFrameError(f"{what}: frame ends inside the field")
            out[name] = s.unpack_from(view, pos)[0]
            pos += s.size
        elif codec == "pairs":
            if end - pos < 2:
                raise GrpcFrameError(f"{what}: frame ends inside the pair count")
            count = _U16.unpack_from(view, pos)[0]
            pos += 2
            pairs = []
            for _ in range(count):
                k, pos = _take_str(view, pos, end, what)
                v, pos = _take_str(view, pos, end, what)
                pairs.append((k, v))
            out[name] = pairs
        else:
            out[name] = bytes(view[pos:end])
            pos = end
    if pos != end:
        raise GrpcFrameError(f"{spec.name}: {end - pos} bytes after the last field")
    return out


class FrameDecoder:
    """Incremental decoder for one connection's incoming bytes: `feed` returns the frames it
    completed and keeps a partial one for the next call."""

    def __init__(self, max_frame_length: int = DEFAULT_MAX_FRAME_LENGTH):
        self.max_frame_length = max_frame_length
        self._buf = bytearray()
        self._failed: str | None = None

    def feed(self, data: bytes) -> list[Frame]:
        if self._failed is not None:
            raise GrpcFrameError(f"decoder already failed: {self._failed}")
        self._buf += data
        out: list[Frame] = []
        pos = 0
        try:
            with memoryview(self._buf) as view:
                size = len(view)
                while size - pos >= 4:
                    length = _U32.unpack_from(view, pos)[0]
                    if length < MIN_FRAME_LENGTH:
                        raise GrpcFrameError(f"frame length {length} is below {MIN_FRAME_LENGTH} "
                                             "(no room for the type and the call id)")
                    if length + 4 > self.max_frame_length:
                        raise GrpcFrameError(f"frame of {length + 4} bytes exceeds the "
                                             f"{self.max_frame_length}-byte limit")
                    end = pos + 4 + length
                    if end > size:
                        break
                    type_ = view[pos + 4]
                    if type_ not in FRAME_TYPES:
                        raise GrpcFrameError(f"unknown frame type {type_}")
                    call_id = _U32.unpack_from(view, pos + 5)[0]
                    out.append(Frame(type_, call_id, decode_fields(type_, view, pos + 9, end), 4 + length))
                    pos = end
        except GrpcFrameError as e:
            self._failed = e.reason
            self._buf = bytearray()
            e.frames = out
            raise
        del self._buf[:pos]
        return out
