"""pysyncobj's wire format, and the fields a trace shows of each message.

A frame on a pysyncobj TCP connection is what `pysyncobj.tcp_connection.TcpConnection.send`
writes: a 4-byte length packed with struct format 'i' (native byte order: little-endian on every
platform rmqlab runs on), then the message pickled with pysyncobj's pickle module (protocol 2) and
compressed with zlib level 3. A connection's first frame, from the side that dialled, is that
node's id (TCPTransport._sendSelfAddress); every later frame is a Raft message, a dict whose 'type'
is one of request_vote, response_vote, append_entries, next_node_idx, apply_command,
apply_command_response, timeout_now.

The simulator's transport writes exactly these bytes, so frame sizes in a simulated trace are the
sizes the real transport puts on the wire, and every replica gets its own unpickled copy of each
message — replicas never share an object.
"""

from __future__ import annotations

import struct
import zlib
from typing import Any

import pysyncobj.pickle as pickle

LENGTH = struct.Struct("i")  # as TcpConnection.send: struct.pack('i', len(data))
MAX_FRAME = 64 * 1024 * 1024  # a length beyond this is a corrupt stream, not a message


def encode_frame(message: Any) -> bytes:
    """The bytes TcpConnection.send writes for `message`."""
    data = zlib.compress(pickle.dumps(message), 3)
    return LENGTH.pack(len(data)) + data


def decode_payload(data: bytes) -> Any:
    """The message of a frame's payload (the bytes after the length)."""
    return pickle.loads(zlib.decompress(data))


def frame_fields(message: Any) -> dict[str, Any]:
    """The decoded fields a frame.send / frame.recv event carries for `message`.

    `type` is the message's own 'type' (or "self_address" for the first frame of a connection);
    `term` is the sender's term where the message has one; a few per-type fields show what moved.
    """
    if not isinstance(message, dict):
        return {"type": "self_address"}
    kind = message.get("type")
    fields: dict[str, Any] = {"type": str(kind)}
    if "term" in message:
        fields["term"] = int(message["term"])
    if kind == "append_entries":
        fields["commit_index"] = int(message["commit_index"])
        if "prevLogIdx" in message:
            fields["prev_log_idx"] = message["prevLogIdx"]
            fields["entries"] = len(message.get("entries", ()))
        if message.get("transmission") is not None:
            fields["transmission"] = str(message["transmission"])
        if "serialized" in message:
            fields["snapshot"] = True
    elif kind == "request_vote":
        fields["last_log_index"] = int(message["last_log_index"])
        fields["last_log_term"] = int(message["last_log_term"])
    elif kind == "next_node_idx":
        fields["next_node_idx"] = int(message["next_node_idx"])
        fields["success"] = bool(message["success"])
    elif kind in ("apply_command", "apply_command_response"):
        if "request_id" in message:
            fields["request_id"] = int(message["request_id"])
        if "error" in message:
            fields["error"] = int(message["error"])
        if "log_idx" in message:
            fields["log_idx"] = int(message["log_idx"])
    return fields
