"""What the classic and the controller-mode HA protocols share, without sockets.

Both protocols (default_ha_protocol, autoswitch.auto_switch_ha_protocol) describe their frames with
FrameLayout, raise HAProtocolError for a peer that broke the protocol, move each end through an
HAConnectionState table, buffer what the slave reads until a whole frame is in, and have the slave
report its max offset the same way (periodically, and whenever its log grew). What differs on
purpose — the frames, the states, the handshake and truncation decisions — stays in each module.
"""

from __future__ import annotations

import abc

import struct
from dataclasses import dataclass

from rmqlab.ha.ha_connection_state import HAConnectionState

# DefaultHAClient / AutoSwitchHAClient.READ_MAX_BUFFER_SIZE: a TRANSFER must fit the slave's 4 MiB
# read buffer.
CLIENT_READ_MAX_BUFFER_SIZE = 4 * 1024 * 1024

Transitions = dict[tuple[HAConnectionState, str], HAConnectionState]


# -- frame layouts (big-endian, like Java's ByteBuffer) ------------------------------------------
@dataclass(frozen=True)
class FrameLayout:
    name: str
    direction: str
    codec: struct.Struct
    fields: tuple[str, ...]

    @property
    def size(self) -> int:
        return self.codec.size


class HAProtocolError(Exception):
    """The peer broke the protocol; the connection it came on must be closed (and only that one)."""


# The `hex` field of HA frame.send / frame.recv events (datasets/README.md): the frame's header
# and at most this many bytes after it — a transfer's commitlog bytes only as a preview, the
# labs' frame inspector (rmqlab.viz.frames) decodes the header from it.
HEX_BODY_PREVIEW = 16
HEX_EPOCH_ENTRIES = 20  # a master handshake's epoch list is traced whole up to this many entries


def hex_preview(frame: bytes, header_size: int, body_preview: int = HEX_BODY_PREVIEW) -> str:
    return frame[:header_size + body_preview].hex()


# -- state machines ------------------------------------------------------------------------------
def transition(table: Transitions, state: HAConnectionState, event: str, machine: str) -> HAConnectionState:
    """`machine` only names the protocol in the error (each module's next_state passes its own)."""
    try:
        return table[(state, event)]
    except KeyError:
        raise ValueError(f"{machine} state machine: no transition from {state.name} on {event!r}") from None


class ProtocolStateMachine:
    """One end's state, moved through its module's table (TRANSITIONS, named MACHINE in errors)."""

    TRANSITIONS: Transitions = {}
    MACHINE = "HA"
    state: HAConnectionState

    def _move(self, event: str) -> tuple[HAConnectionState, HAConnectionState]:
        old = self.state
        self.state = transition(self.TRANSITIONS, old, event, self.MACHINE)
        return old, self.state


class FrameBuffer:
    """Received bytes not yet decoded (RocketMQ's byteBufferRead + dispatchPosition/processPosition)."""

    def __init__(self) -> None:
        self._buf = bytearray()
        self._pos = 0

    def feed(self, data: bytes) -> None:
        self._buf += data

    def available(self) -> int:
        return len(self._buf) - self._pos

    def peek(self, codec: struct.Struct, extra: int = 0) -> tuple:
        return codec.unpack_from(self._buf, self._pos + extra)

    def take(self, n: int) -> bytes:
        out = bytes(self._buf[self._pos:self._pos + n])
        self._pos += n
        if self._pos == len(self._buf):
            self._buf.clear()
            self._pos = 0
        elif self._pos > CLIENT_READ_MAX_BUFFER_SIZE:  # reallocateByteBuffer: keep only the undecoded tail
            del self._buf[:self._pos]
            self._pos = 0
        return out

    def clear(self) -> None:
        self._buf.clear()
        self._pos = 0


# -- the slave's end: offset reports -------------------------------------------------------------
class ReportingClientProtocol(ProtocolStateMachine, abc.ABC):
    """What both slaves' protocol states keep for reporting: the last offset reported and when the
    slave last wrote and read. Times are the caller's clock in ms; as in RocketMQ,
    last_write_timestamp starts at construction, so the first periodic report after the very first
    connect waits haSendHeartbeatInterval. Subclasses encode the report frame (_encode_report)."""

    def __init__(self, now_ms: int):
        self.state = HAConnectionState.READY
        self.current_reported_offset = 0
        self.last_write_timestamp = now_ms
        self.last_read_timestamp = now_ms

    def shutdown(self) -> tuple[HAConnectionState, HAConnectionState]:
        return self._move("shutdown")

    @abc.abstractmethod
    def _encode_report(self, offset: int) -> bytes:
        """The mode's report frame for `offset` (classic: 8 bytes; controller mode: 12)."""

    def is_time_to_report(self, now_ms: int, heartbeat_interval_ms: int) -> bool:
        return now_ms - self.last_write_timestamp > heartbeat_interval_ms

    def report(self, now_ms: int) -> bytes:
        """The periodic report of currentReportedOffset."""
        self.last_write_timestamp = now_ms
        return self._encode_report(self.current_reported_offset)

    def report_plus(self, slave_max_offset: int, now_ms: int) -> bytes | None:
        """A report only when the local log grew past the last offset reported."""
        if slave_max_offset > self.current_reported_offset:
            self.current_reported_offset = slave_max_offset
            return self.report(now_ms)
        return None

    def housekeeping_expired(self, now_ms: int, housekeeping_interval_ms: int) -> bool:
        return now_ms - self.last_read_timestamp > housekeeping_interval_ms


# -- the master's end ----------------------------------------------------------------------------
class ConnectionProtocolBase(ProtocolStateMachine):
    """The master's per-slave state both protocols keep: what the slave asked for and acknowledged,
    and where the transfer continues (-1: not known yet)."""

    def __init__(self, state: HAConnectionState) -> None:
        self.state = state
        self.slave_request_offset = -1
        self.slave_ack_offset = -1
        self.next_transfer_from_where = -1

    def closed(self, event: str = "closed") -> tuple[HAConnectionState, HAConnectionState]:
        return self._move(event)
