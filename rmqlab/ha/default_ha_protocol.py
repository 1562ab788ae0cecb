"""The classic master–slave replication protocol (RocketMQ's DefaultHAService), without sockets.

Theory of operation
-------------------
The slave opens one TCP connection to the master's HA port (haListenPort, 10912, or the broker's
listenPort + 1). There is no handshake and there are no epochs; two kinds of frame flow:

  master → slave   TRANSFER  physicOffset (long) + bodySize (int) + body     12-byte header
  slave  → master  REPORT    slaveMaxOffset (long)                             8 bytes

A REPORT is at once the slave's request and its acknowledgement: "my commitlog ends here". The
first one after a connect says where to start: the master streams its commitlog from that offset
or, when the slave reports 0 (an empty slave), from the start of the master's *last* commitlog
file — a brand-new slave does not copy history. Batches are at most haTransferBatchSize (32 KiB)
and never cross a commitlog file; when there is nothing to send for haSendHeartbeatInterval (5 s)
the master sends a heartbeat, a TRANSFER with bodySize 0. The slave appends each body at its own
max offset and reports its new max offset; a header whose offset is not where the slave's log ends
(unless the slave is empty) is an error: the slave drops the connection and reconnects, and its
first report puts the stream back where its log ends. Nothing is ever truncated: classic HA
assumes the slave's log is a prefix of the master's.

The master checks nothing either: any 8 bytes are the slave's ack offset
(DefaultHAConnection.ReadSocketService.processReadEvent), DefaultHAService.notifyTransferSome
raises push2SlaveMaxOffset to it, and GroupTransferService counts the connection as a replica of
every message that ends at or below it. So when the assumption breaks, nothing notices. A master
that loses its unflushed tail in a machine crash (ASYNC_FLUSH) restarts with a log shorter than
its slave's, and in RocketMQ (store/src/main/java/org/apache/rocketmq/store/ha/DefaultHAConnection.java,
DefaultHAClient.java, GroupTransferService.java) — rmqlab does the same:

1. the slave reconnects and reports its max offset S, beyond the master's end M: S becomes the
   request and ack offset, so every SYNC_MASTER put ending at or below S is acknowledged at once,
   although the slave holds other bytes there (the tail the master lost);
2. WriteSocketService starts at S (the request, not 0) and, as its log has nothing at S yet,
   sends heartbeats at S; DefaultHAClient.dispatchReadRequest finds masterPhyOffset == S ==
   its own max offset, so the check that would close the connection ("master pushed offset not
   equal the max phy offset in slave") passes: no reconnect loop, no stall of the stream;
3. once the master's log passes S it streams from S, usually the middle of one of its new
   records; the slave appends those bytes at S and acknowledges them. Its commitlog is now the
   common prefix, the lost tail, then the master's bytes from S: it diverged silently;
4. the slave's ReputMessageService meets an invalid record at S and, on a slave, stops there for
   good (doNext = false, nothing skipped, nothing logged): the slave never serves a message
   written after S, while its reports say it holds everything.

rmqlab's MessageStoreConfig.rmqlabRejectImpossibleHaReport (not a RocketMQ key, default false)
makes the master close a connection whose report is below 0 or beyond its max offset instead:
the slave keeps its log, retries every 5 s and is refused again, and sync puts wait for an ack
that does not come (FLUSH_SLAVE_TIMEOUT). The master stores those puts all the same, so once its
log is longer than the slave's the report is possible again, is accepted, and steps 3 and 4 follow:
the guard delays the divergence, it cannot prevent it. Telling a diverged slave from a lagging
one needs the history of the logs, which is what controller mode's epochs and truncation add
(AutoSwitchHAConnection's handshake, rmqlab.ha.autoswitch).

Each side also reports on a timer: the slave every haSendHeartbeatInterval since its last write,
and either side closes a connection on which nothing was read for haHousekeepingInterval (20 s).

States (HAConnectionState, as RocketMQ names them):

  slave  (DefaultHAClient)      READY --connected--> TRANSFER --closed--> READY; any --shutdown--> SHUTDOWN
  master (DefaultHAConnection)  TRANSFER (from accept) --closed / shutdown--> SHUTDOWN

This module is the socket-free core: the frame layouts, the codecs and each end's protocol state.
It never touches a stream, a clock or a store; the services (default_ha_client,
default_ha_connection) feed it the bytes they read and the offsets they know, and write the bytes
it returns. rmqlab deviations are marked "Deviation" where they occur; the rmqlab-only option
above is named where it applies (ConnectionProtocol.feed_reports).
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from rmqlab.ha.ha_connection_state import HAConnectionState
from rmqlab.ha.ha_protocol import (CLIENT_READ_MAX_BUFFER_SIZE, ConnectionProtocolBase, FrameBuffer, FrameLayout,
                                   HAProtocolError, ReportingClientProtocol, Transitions, transition)

READY = HAConnectionState.READY
TRANSFER = HAConnectionState.TRANSFER
SHUTDOWN = HAConnectionState.SHUTDOWN


# -- frame layouts (big-endian, like Java's ByteBuffer) ------------------------------------------
# DefaultHAConnection.TRANSFER_HEADER_SIZE and DefaultHAClient.REPORT_HEADER_SIZE.
TRANSFER_HEADER = FrameLayout("transfer", "master->slave", struct.Struct(">qi"), ("physic_offset", "body_size"))
REPORT = FrameLayout("report", "slave->master", struct.Struct(">q"), ("slave_max_offset",))
TRANSFER_HEADER_SIZE = TRANSFER_HEADER.size  # 12
REPORT_HEADER_SIZE = REPORT.size             # 8


def encode_transfer_header(physic_offset: int, body_size: int) -> bytes:
    return TRANSFER_HEADER.codec.pack(physic_offset, body_size)


def encode_report(slave_max_offset: int) -> bytes:
    return REPORT.codec.pack(slave_max_offset)


# -- state machines ------------------------------------------------------------------------------
CLIENT_TRANSITIONS: Transitions = {
    (READY, "connected"): TRANSFER,
    (TRANSFER, "closed"): READY,
    (READY, "shutdown"): SHUTDOWN,
    (TRANSFER, "shutdown"): SHUTDOWN,
}

CONNECTION_TRANSITIONS: Transitions = {
    (TRANSFER, "closed"): SHUTDOWN,
    (TRANSFER, "shutdown"): SHUTDOWN,
}


def next_state(table: Transitions, state: HAConnectionState, event: str) -> HAConnectionState:
    return transition(table, state, event, "HA")


# -- the slave's end (DefaultHAClient) -----------------------------------------------------------
@dataclass(frozen=True)
class TransferFrame:
    """A TRANSFER as the slave decoded it; an empty body is a heartbeat."""

    offset: int
    body: bytes

    @property
    def is_heartbeat(self) -> bool:
        return not self.body

    @property
    def wire_size(self) -> int:
        return TRANSFER_HEADER_SIZE + len(self.body)


class ClientProtocol(ReportingClientProtocol):
    """The slave's protocol state: what DefaultHAClient keeps besides its socket.

    Times are the caller's clock in ms. `last_write_timestamp` starts at construction time, as in
    DefaultHAClient, so the first report after the very first connect waits for
    haSendHeartbeatInterval: until then the master sends nothing (it waits for the request).
    """

    TRANSITIONS = CLIENT_TRANSITIONS

    def __init__(self, now_ms: int):
        super().__init__(now_ms)
        self._buf = FrameBuffer()

    def connected(self, now_ms: int, slave_max_offset: int) -> tuple[HAConnectionState, HAConnectionState]:
        """connectMaster succeeded: report from the local max offset on."""
        self.current_reported_offset = slave_max_offset
        self.last_read_timestamp = now_ms
        return self._move("connected")

    def closed(self) -> tuple[HAConnectionState, HAConnectionState]:
        """closeMaster: forget the half-read stream; the next connection starts afresh."""
        self.last_read_timestamp = 0
        self._buf.clear()
        return self._move("closed")

    # reading
    def feed(self, data: bytes, now_ms: int) -> None:
        self._buf.feed(data)
        self.last_read_timestamp = now_ms

    def next_frame(self, slave_max_offset: int) -> TransferFrame | None:
        """The next complete TRANSFER, or None until more bytes arrive.

        The offset is checked as soon as the header is in (dispatchReadRequest): unless the slave
        is empty, a frame that does not start where the slave's log ends raises HAProtocolError.
        """
        buf = self._buf
        if buf.available() < TRANSFER_HEADER_SIZE:
            return None
        offset, body_size = buf.peek(TRANSFER_HEADER.codec)
        if slave_max_offset != 0 and slave_max_offset != offset:
            raise HAProtocolError(f"offset gap: master pushed offset {offset}, the slave's log ends at "
                                  f"{slave_max_offset}")
        # Deviation: RocketMQ trusts bodySize (a negative one throws later, a huge one stalls the
        # stream until housekeeping); here a size that cannot fit the read buffer is an error now.
        if not 0 <= body_size <= CLIENT_READ_MAX_BUFFER_SIZE - TRANSFER_HEADER_SIZE:
            raise HAProtocolError(f"bad transfer header: body size {body_size} at offset {offset}")
        if buf.available() < TRANSFER_HEADER_SIZE + body_size:
            return None
        return TransferFrame(offset, buf.take(TRANSFER_HEADER_SIZE + body_size)[TRANSFER_HEADER_SIZE:])

    def buffered(self) -> int:
        """Bytes received but not yet decoded (a partial frame)."""
        return self._buf.available()

    # reporting: is_time_to_report, report (reportSlaveMaxOffset(currentReportedOffset)),
    # report_plus (reportSlaveMaxOffsetPlus) and housekeeping_expired are ReportingClientProtocol's.
    def _encode_report(self, offset: int) -> bytes:
        return encode_report(offset)


# -- the master's end (DefaultHAConnection) ------------------------------------------------------
def transfer_start_offset(slave_request_offset: int, master_max_offset: int, mapped_file_size: int) -> int:
    """Where the master's WriteSocketService starts: the slave's request, or for a request of 0
    (an empty slave) the start of the master's last commitlog file."""
    if slave_request_offset == 0:
        return max(0, master_max_offset - master_max_offset % mapped_file_size)
    return slave_request_offset


class ConnectionProtocol(ConnectionProtocolBase):
    """The master's per-slave protocol state: what DefaultHAConnection keeps besides its socket."""

    TRANSITIONS = CONNECTION_TRANSITIONS

    def __init__(self) -> None:
        super().__init__(TRANSFER)  # no handshake: a classic connection transfers from the start
        self._pending = b""  # an incomplete report

    def feed_reports(self, data: bytes, master_max_offset: int, reject_impossible: bool = False) -> list[int]:
        """Decode the complete 8-byte reports in `data`; the last one becomes the slave's ack
        offset (and the first ever its request offset). Returns every report decoded.

        RocketMQ's ReadSocketService keeps only the last complete report of what it read at once
        (its buffer position rounded down to a multiple of 8), which is the last one here too.

        As in RocketMQ, any 8 bytes are an offset: nothing is checked against the master's log.
        A slave ahead of its master (the master lost its unflushed tail in a machine crash and
        restarted) or garbage on the HA port (an HTTP request reads as an offset near 5e18) becomes
        this connection's ack offset, and GroupTransferService counts the connection as a replica
        of every message up to it: a SYNC_MASTER acknowledges sends that no slave holds.

        `reject_impossible` is rmqlab's own guard (MessageStoreConfig.rmqlabRejectImpossibleHaReport,
        not a RocketMQ key): a report below 0 or beyond `master_max_offset` raises HAProtocolError,
        which closes this connection only, before the report counts as an ack. It only catches a
        report the master's log cannot explain yet (see the module docstring for its limit).
        """
        data = self._pending + data
        whole = len(data) - len(data) % REPORT_HEADER_SIZE
        self._pending = data[whole:]
        reports = [v for (v,) in REPORT.codec.iter_unpack(data[:whole])]
        if reject_impossible:
            for value in reports:
                if not 0 <= value <= master_max_offset:
                    raise HAProtocolError(f"bad report: offset {value} (0x{value & (2**64 - 1):016x}) is outside "
                                          f"[0, {master_max_offset}], the master's commitlog "
                                          "(rmqlabRejectImpossibleHaReport=true)")
        if reports:
            self.slave_ack_offset = reports[-1]
            if self.slave_request_offset < 0:
                self.slave_request_offset = reports[-1]
        return reports

    def transfer_start(self, master_max_offset: int, mapped_file_size: int) -> int:
        """Fix where the transfer starts (once, after the first report) and return it.

        As WriteSocketService, which waits while slaveRequestOffset == -1: a report of -1 (eight
        0xff bytes) is no request, while any other offset, negative or beyond the log, is one."""
        if self.slave_request_offset == -1:
            raise ValueError("the transfer starts after the slave's first report")
        if self.next_transfer_from_where < 0:
            self.next_transfer_from_where = transfer_start_offset(
                self.slave_request_offset, master_max_offset, mapped_file_size)
        return self.next_transfer_from_where

    def heartbeat(self) -> bytes:
        """A TRANSFER without body at the next transfer offset."""
        return encode_transfer_header(self.next_transfer_from_where, 0)

    def batch(self, body_size: int) -> tuple[int, bytes]:
        """The header of the next batch of `body_size` bytes; returns (its offset, the header)."""
        offset = self.next_transfer_from_where
        self.next_transfer_from_where += body_size
        return offset, encode_transfer_header(offset, body_size)
