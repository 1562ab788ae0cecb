"""Controller-mode replication (AutoSwitchHAService), without sockets or clocks.

Theory of operation
-------------------
In controller mode (RIP-44) every broker of a set can be master or slave; the controller names the
master and gives each master a new *epoch*. Every broker keeps an epoch file: for each epoch, the
commitlog offset where that master started writing (EpochFileCache). The slave opens
one TCP connection to the master's HA port and the conversation has two phases:

  HANDSHAKE  slave → master  state=1, isSyncFromLastFile, isAsyncLearner, slaveBrokerId   16 bytes
             master → slave  state=1, bodySize, maxPhyOffset, lastEpoch + (epoch, start)*  20 + 12n
  TRANSFER   master → slave  state=2, bodySize, offset, epoch, epochStartOffset,           36 + body
                             confirmOffset + commitlog bytes (bodySize 0: heartbeat)
             slave → master  state=2, slaveMaxOffset (the request, then every ack)         12 bytes

In the handshake the slave compares its epoch file with the master's, walking its own epochs from
the newest down: the first epoch both have with the same start offset is where the logs agree, up
to the smaller of the two ends (find_consistent_point). Everything after that is cut from the
slave's commitlog, consume queues and epoch file (`do_truncate`); with no such epoch the slave
refuses and keeps its log — an operator must decide. Then the slave's first ack says where the
master should start streaming. The master sends batches of at most haTransferBatchSize that never
cross a commitlog file and never cross an epoch (`plan_batch`): each header names the epoch of its
bytes, and a slave that sees a new epoch in a header records it in its own epoch file.

The master tracks which slaves are in sync (the SyncStateSet, confirmed by the controller): a
slave whose acks keep up joins it (expand), one that stops catching up for haMaxTimeSlaveNotCatchup
or disconnects leaves it (shrink); both go through the controller (AlterSyncStateSet), and until
it answers the master counts the union of old and proposed sets. The *confirm offset* is the
smallest max offset among the set's members; consume queues are built only up to it, so nobody
reads a message a later truncation could remove. A SYNC_MASTER write waits for the set (allAck)
or for inSyncReplicas replicas, and is refused when fewer than minInSyncReplicas are in sync.

States (HAConnectionState; the wire value is the ordinal):

  slave  (AutoSwitchHAClient)      READY --connected--> HANDSHAKE --truncated--> TRANSFER
                                   HANDSHAKE/TRANSFER --closed--> READY; SUSPEND idles;
                                   any --shutdown--> SHUTDOWN
  master (AutoSwitchHAConnection)  HANDSHAKE (from accept); it adopts the state of each frame
                                   the slave sends; --closed/shutdown--> SHUTDOWN

This module holds the frame codecs, both ends' state tables and every pure decision; the services
(auto_switch_ha_service, auto_switch_ha_connection, auto_switch_ha_client) feed it bytes, offsets
and the time, and do the I/O. Where rmqlab deviates from RocketMQ a comment says "Deviation".
"""

from __future__ import annotations

import struct
from collections.abc import Iterable, Mapping, Sequence, Set
from dataclasses import dataclass, field
from typing import Protocol

from rmqlab.common.checkpoint_file import INT_MAX, LONG_MAX
from rmqlab.ha.ha_connection_state import HAConnectionState
from rmqlab.ha.ha_protocol import (CLIENT_READ_MAX_BUFFER_SIZE, ConnectionProtocolBase, FrameBuffer, FrameLayout,
                                   HAProtocolError, ReportingClientProtocol, Transitions, transition)
from rmqlab.remoting.protocol.epoch_entry import EpochEntry
from rmqlab.store.epoch_file_cache import EpochFileCache
from rmqlab.store.put_message_result import PutMessageStatus

READY = HAConnectionState.READY
HANDSHAKE = HAConnectionState.HANDSHAKE
TRANSFER = HAConnectionState.TRANSFER
SUSPEND = HAConnectionState.SUSPEND
SHUTDOWN = HAConnectionState.SHUTDOWN

__all__ = [
    "HAProtocolError", "SLAVE_HANDSHAKE", "SLAVE_TRANSFER", "MASTER_HANDSHAKE_HEADER", "MASTER_TRANSFER_HEADER",
    "EPOCH_ENTRY", "LEGACY_SLAVE_HANDSHAKE_HEADER", "SlaveHandshake", "SlaveAck", "MasterHandshake", "MasterTransfer",
    "LegacySlaveHandshake", "encode_slave_handshake", "encode_slave_ack", "encode_master_handshake",
    "encode_master_transfer", "encode_legacy_slave_handshake", "decode_legacy_slave_handshake", "SlaveFrameDecoder",
    "MasterFrameDecoder", "CLIENT_TRANSITIONS", "CONNECTION_TRANSITIONS", "next_state", "TruncateDecision",
    "do_truncate", "FindConsistentPoint", "find_consistent_point", "transfer_start_offset", "BatchPlan", "plan_batch",
    "heartbeat_epoch", "caught_up_time_on_ack",
    "SyncStateSetState", "SyncStateSetView", "ShrinkSyncStateSet", "ExpandSyncStateSet", "shrink_sync_state_set",
    "expand_sync_state_set", "compute_confirm_offset", "reported_confirm_offset", "WriteAckDecision",
    "decide_write_ack", "all_ack_transfer_ok", "ALL_ACK_IN_SYNC_STATE_SET",
]

ALL_ACK_IN_SYNC_STATE_SET = -1  # MixAll.ALL_ACK_IN_SYNC_STATE_SET


# -- frame layouts (big-endian, like Java's ByteBuffer) ------------------------------------------
# AutoSwitchHAClient.HANDSHAKE_HEADER_SIZE = 4 + 4 + 8 (since 5.1.1: the slave's broker id).
SLAVE_HANDSHAKE = FrameLayout("handshake", "slave->master", struct.Struct(">ihhq"),
                              ("state", "is_sync_from_last_file", "is_async_learner", "slave_broker_id"))
# AutoSwitchHAClient.TRANSFER_HEADER_SIZE = 4 + 8: the offset report, at once request and ack.
SLAVE_TRANSFER = FrameLayout("ack", "slave->master", struct.Struct(">iq"), ("state", "slave_max_offset"))
# AutoSwitchHAConnection.HANDSHAKE_HEADER_SIZE = 4 + 4 + 8 + 4, followed by EPOCH_ENTRY_SIZE * n.
MASTER_HANDSHAKE_HEADER = FrameLayout("handshake", "master->slave", struct.Struct(">iiqi"),
                                      ("state", "body_size", "max_phy_offset", "last_epoch"))
EPOCH_ENTRY = FrameLayout("epoch entry", "master->slave", struct.Struct(">iq"), ("epoch", "start_offset"))
# AutoSwitchHAConnection.TRANSFER_HEADER_SIZE = 20 + 8 + 8, followed by bodySize commitlog bytes.
MASTER_TRANSFER_HEADER = FrameLayout("transfer", "master->slave", struct.Struct(">iiqiqq"),
                                     ("state", "body_size", "offset", "epoch", "epoch_start_offset",
                                      "confirm_offset"))
# RocketMQ 5.0.0 - 5.1.0 (docs/en/controller/design.md, "Handshake stage": "current state + Two
# flags + slaveAddressLength + slaveAddress"): 12 bytes then the address. History only: nothing
# here speaks it on a connection.
LEGACY_SLAVE_HANDSHAKE_HEADER = FrameLayout("handshake (5.0-5.1.0)", "slave->master", struct.Struct(">ihhi"),
                                            ("state", "is_sync_from_last_file", "is_async_learner",
                                             "address_length"))

SLAVE_HANDSHAKE_SIZE = SLAVE_HANDSHAKE.size                  # 16
SLAVE_TRANSFER_SIZE = SLAVE_TRANSFER.size                    # 12
MASTER_HANDSHAKE_HEADER_SIZE = MASTER_HANDSHAKE_HEADER.size  # 20
EPOCH_ENTRY_SIZE = EPOCH_ENTRY.size                          # 12
MASTER_TRANSFER_HEADER_SIZE = MASTER_TRANSFER_HEADER.size    # 36
LEGACY_SLAVE_HANDSHAKE_HEADER_SIZE = LEGACY_SLAVE_HANDSHAKE_HEADER.size  # 12
LEGACY_ADDRESS_MAX = 50  # HANDSHAKE_SIZE = header + 50: the buffer 5.0 allocated for the address

# The master's handshake body buffer holds 1000 entries (EPOCH_ENTRY_SIZE * 1000).
MAX_HANDSHAKE_ENTRIES = 1000
# AutoSwitchHAClient.READ_MAX_BUFFER_SIZE (CLIENT_READ_MAX_BUFFER_SIZE): a whole TRANSFER must fit
# the slave's 4 MiB read buffer.
MAX_TRANSFER_BODY = CLIENT_READ_MAX_BUFFER_SIZE - MASTER_TRANSFER_HEADER_SIZE


# -- decoded frames ------------------------------------------------------------------------------
@dataclass(frozen=True)
class SlaveHandshake:
    is_sync_from_last_file: bool
    is_async_learner: bool
    slave_broker_id: int
    name = "handshake"
    wire_size = SLAVE_HANDSHAKE_SIZE


@dataclass(frozen=True)
class SlaveAck:
    """The slave's TRANSFER frame: its commitlog ends at `slave_max_offset`."""

    slave_max_offset: int
    name = "ack"
    wire_size = SLAVE_TRANSFER_SIZE


@dataclass(frozen=True)
class MasterHandshake:
    max_phy_offset: int
    last_epoch: int
    entries: tuple[EpochEntry, ...]
    name = "handshake"

    @property
    def wire_size(self) -> int:
        return MASTER_HANDSHAKE_HEADER_SIZE + EPOCH_ENTRY_SIZE * len(self.entries)


@dataclass(frozen=True)
class MasterTransfer:
    offset: int
    epoch: int
    epoch_start_offset: int
    confirm_offset: int
    body: bytes = b""

    @property
    def is_heartbeat(self) -> bool:
        return not self.body

    @property
    def name(self) -> str:
        return "heartbeat" if self.is_heartbeat else "transfer"

    @property
    def wire_size(self) -> int:
        return MASTER_TRANSFER_HEADER_SIZE + len(self.body)


@dataclass(frozen=True)
class LegacySlaveHandshake:
    is_sync_from_last_file: bool
    is_async_learner: bool
    slave_address: str


# -- encoders ------------------------------------------------------------------------------------
def _flag(value: bool) -> int:
    return 1 if value else 0


def encode_slave_handshake(is_sync_from_last_file: bool, is_async_learner: bool, slave_broker_id: int) -> bytes:
    """AutoSwitchHAClient.sendHandshakeHeader."""
    return SLAVE_HANDSHAKE.codec.pack(HANDSHAKE.value, _flag(is_sync_from_last_file), _flag(is_async_learner),
                                      slave_broker_id)


def encode_slave_ack(slave_max_offset: int) -> bytes:
    """AutoSwitchHAClient.reportSlaveOffset(TRANSFER, offset)."""
    return SLAVE_TRANSFER.codec.pack(TRANSFER.value, slave_max_offset)


def encode_master_handshake(max_phy_offset: int, last_epoch: int, entries: Iterable[EpochEntry]) -> bytes:
    """AutoSwitchHAConnection.buildHandshakeBuffer: header, then (epoch, startOffset) per entry."""
    entries = list(entries)
    if len(entries) > MAX_HANDSHAKE_ENTRIES:
        raise ValueError(f"{len(entries)} epoch entries do not fit the master's handshake buffer "
                         f"({MAX_HANDSHAKE_ENTRIES})")
    body = b"".join(EPOCH_ENTRY.codec.pack(e.epoch, e.start_offset) for e in entries)
    return MASTER_HANDSHAKE_HEADER.codec.pack(HANDSHAKE.value, len(body), max_phy_offset, last_epoch) + body


def encode_master_transfer(offset: int, epoch: int, epoch_start_offset: int, confirm_offset: int,
                           body: bytes = b"") -> bytes:
    """AutoSwitchHAConnection.buildTransferHeaderBuffer + the batch (none for a heartbeat)."""
    return MASTER_TRANSFER_HEADER.codec.pack(TRANSFER.value, len(body), offset, epoch, epoch_start_offset,
                                             confirm_offset) + body


def encode_legacy_slave_handshake(is_sync_from_last_file: bool, is_async_learner: bool, slave_address: str) -> bytes:
    """The 5.0.0 - 5.1.0 handshake (docs/en/controller/design.md): the slave named itself by address.

    Quirk kept: 5.0 wrote `String.length()` (UTF-16 units) as the length but UTF-8 bytes after it;
    the two agree for the ASCII addresses brokers have, and other addresses are refused here.
    """
    raw = slave_address.encode("utf-8")
    if len(raw) != len(slave_address):
        raise ValueError(f"slave address {slave_address!r} is not ASCII: 5.0 would send a wrong length")
    if len(raw) > LEGACY_ADDRESS_MAX:
        raise ValueError(f"slave address {slave_address!r} is longer than the {LEGACY_ADDRESS_MAX} bytes 5.0 allowed")
    return LEGACY_SLAVE_HANDSHAKE_HEADER.codec.pack(HANDSHAKE.value, _flag(is_sync_from_last_file),
                                                    _flag(is_async_learner), len(raw)) + raw


def decode_legacy_slave_handshake(data: bytes) -> LegacySlaveHandshake:
    if len(data) < LEGACY_SLAVE_HANDSHAKE_HEADER_SIZE:
        raise HAProtocolError(f"short 5.0 handshake: {len(data)} bytes, the header alone is "
                              f"{LEGACY_SLAVE_HANDSHAKE_HEADER_SIZE}")
    state, sync, learner, length = LEGACY_SLAVE_HANDSHAKE_HEADER.codec.unpack_from(data)
    _expect_state("5.0 slave handshake", state, HANDSHAKE)
    if not 0 <= length <= LEGACY_ADDRESS_MAX:
        raise HAProtocolError(f"5.0 slave handshake: address length {length} outside [0, {LEGACY_ADDRESS_MAX}]")
    end = LEGACY_SLAVE_HANDSHAKE_HEADER_SIZE + length
    if len(data) != end:
        raise HAProtocolError(f"5.0 slave handshake: {len(data)} bytes, header and address make {end}")
    return LegacySlaveHandshake(_decode_flag("isSyncFromLastFile", sync), _decode_flag("isAsyncLearner", learner),
                                data[LEGACY_SLAVE_HANDSHAKE_HEADER_SIZE:end].decode("ascii", "replace"))


# -- decoders (one per direction, streaming) -----------------------------------------------------
def _state_name(value: int) -> str:
    try:
        return HAConnectionState(value).name
    except ValueError:
        return f"unknown state {value}"


def _expect_state(what: str, value: int, *allowed: HAConnectionState) -> HAConnectionState:
    if value not in {s.value for s in allowed}:
        names = " or ".join(f"{s.name} ({s.value})" for s in allowed)
        raise HAProtocolError(f"{what}: state field is {value} ({_state_name(value)}), expected {names}")
    return HAConnectionState(value)


def _decode_flag(name: str, value: int) -> bool:
    # Deviation: Java takes anything but 1 as false. A value other than 0 or 1 is not something a
    # RocketMQ slave sends, so it is reported as a malformed handshake instead of guessed at.
    if value not in (0, 1):
        raise HAProtocolError(f"slave handshake: flag {name} is {value}, expected 0 or 1")
    return value == 1


class _FrameDecoder:
    """A streaming decoder over what one end received (both directions buffer the same way)."""

    def __init__(self) -> None:
        self._buf = FrameBuffer()

    def feed(self, data: bytes) -> None:
        self._buf.feed(data)

    def buffered(self) -> int:
        return self._buf.available()

    def clear(self) -> None:
        self._buf.clear()


class SlaveFrameDecoder(_FrameDecoder):
    """What the master reads: slave HANDSHAKEs and TRANSFER acks (AutoSwitchHAConnection.HAServerReader).

    Deviation: Java (HAServerReader.processReadResult) dispatches on the state int once 12 bytes
    are buffered, so a HANDSHAKE split after byte 12 reads its broker id from bytes not yet
    received. Here a HANDSHAKE is decoded only once all 16 bytes are in.
    """

    def next_frame(self, master_max_offset: int, reject_impossible: bool = False) -> SlaveHandshake | SlaveAck | None:
        """The next whole frame, or None. As in RocketMQ (AutoSwitchHAConnection's reader) any 8
        bytes of a TRANSFER ack are the slave's offset, checked against nothing: a forged or garbled
        ack counts as a replica holding data it does not have (it can expand the SyncStateSet and
        complete sync puts). `reject_impossible` is rmqlab's own guard
        (MessageStoreConfig.rmqlabRejectImpossibleHaReport, not a RocketMQ key): an ack below 0 or
        beyond `master_max_offset` raises HAProtocolError, closing this connection only."""
        buf = self._buf
        if buf.available() < 4:
            return None
        (state,) = buf.peek(struct.Struct(">i"))
        kind = _expect_state("slave frame", state, HANDSHAKE, TRANSFER)
        if kind is HANDSHAKE:
            if buf.available() < SLAVE_HANDSHAKE_SIZE:
                return None
            _, sync, learner, broker_id = buf.peek(SLAVE_HANDSHAKE.codec)
            frame = SlaveHandshake(_decode_flag("isSyncFromLastFile", sync), _decode_flag("isAsyncLearner", learner),
                                   broker_id)
            # Controller-assigned ids start at 1 (nextAssignBrokerId); a negative one is damage.
            if broker_id < 0:
                raise HAProtocolError(f"slave handshake: slaveBrokerId {broker_id} is negative")
            buf.take(SLAVE_HANDSHAKE_SIZE)
            return frame
        if buf.available() < SLAVE_TRANSFER_SIZE:
            return None
        _, offset = buf.peek(SLAVE_TRANSFER.codec)
        if reject_impossible and not 0 <= offset <= master_max_offset:
            raise HAProtocolError(f"slave ack: offset {offset} is outside [0, {master_max_offset}], the master's "
                                  f"commitlog (rmqlabRejectImpossibleHaReport=true)")
        buf.take(SLAVE_TRANSFER_SIZE)
        return SlaveAck(offset)


class MasterFrameDecoder(_FrameDecoder):
    """What the slave reads: the master's HANDSHAKE and TRANSFER frames (AutoSwitchHAClient.HAClientReader).

    `current_state` is the slave's state: a frame for another state is an error (Java skips it
    and fails the read, which closes the connection; the effect is the same).
    """

    def next_frame(self, current_state: HAConnectionState) -> MasterHandshake | MasterTransfer | None:
        buf = self._buf
        if buf.available() < MASTER_HANDSHAKE_HEADER_SIZE:
            return None
        state, body_size, offset, epoch = buf.peek(MASTER_HANDSHAKE_HEADER.codec)
        kind = _expect_state("master frame", state, HANDSHAKE, TRANSFER)
        if kind is not current_state:
            raise HAProtocolError(f"state not matched: the master sent a {kind.name} frame while the slave is in "
                                  f"{current_state.name} (bodySize {body_size}, offset {offset}, epoch {epoch})")
        if kind is HANDSHAKE:
            if body_size % EPOCH_ENTRY_SIZE or not 0 <= body_size <= EPOCH_ENTRY_SIZE * MAX_HANDSHAKE_ENTRIES:
                raise HAProtocolError(f"master handshake: body size {body_size} is not a whole number of "
                                      f"{EPOCH_ENTRY_SIZE}-byte epoch entries (at most {MAX_HANDSHAKE_ENTRIES})")
            if offset < 0:
                raise HAProtocolError(f"master handshake: max offset {offset} is negative")
            if buf.available() < MASTER_HANDSHAKE_HEADER_SIZE + body_size:
                return None
            raw = buf.take(MASTER_HANDSHAKE_HEADER_SIZE + body_size)[MASTER_HANDSHAKE_HEADER_SIZE:]
            try:
                entries = tuple(EpochEntry(e, s) for e, s in EPOCH_ENTRY.codec.iter_unpack(raw))
                EpochFileCache().init_cache_from_entries(entries)  # validates: strictly ascending
            except (TypeError, ValueError) as exc:
                raise HAProtocolError(f"master handshake: bad epoch entry list: {exc}") from None
            last = entries[-1].epoch if entries else -1
            if epoch != last:
                raise HAProtocolError(f"master handshake: header says last epoch {epoch}, the entries end at {last}")
            return MasterHandshake(offset, epoch, entries)
        if buf.available() < MASTER_TRANSFER_HEADER_SIZE:
            return None
        _, body_size, offset, epoch, epoch_start, confirm = buf.peek(MASTER_TRANSFER_HEADER.codec)
        # Deviation: Java trusts these fields (a negative size throws later, a huge one stalls the
        # stream until housekeeping); here they are checked as soon as the header is in.
        if not 0 <= body_size <= MAX_TRANSFER_BODY:
            raise HAProtocolError(f"master transfer: body size {body_size} outside [0, {MAX_TRANSFER_BODY}]")
        if offset < 0 and not (offset == -1 and body_size == 0):
            raise HAProtocolError(f"master transfer: offset {offset} is negative")
        if not 0 <= epoch <= INT_MAX or not 0 <= epoch_start <= LONG_MAX:
            raise HAProtocolError(f"master transfer: epoch {epoch} / epochStartOffset {epoch_start} is negative")
        # Not checked: epochStartOffset <= offset. A RocketMQ master labels a batch cut at an epoch
        # end with the next epoch (see plan_batch), whose start is this batch's end.
        if buf.available() < MASTER_TRANSFER_HEADER_SIZE + body_size:
            return None
        body = buf.take(MASTER_TRANSFER_HEADER_SIZE + body_size)[MASTER_TRANSFER_HEADER_SIZE:]
        return MasterTransfer(offset, epoch, epoch_start, confirm, body)


# -- state machines ------------------------------------------------------------------------------
CLIENT_TRANSITIONS: Transitions = {
    (READY, "connected"): HANDSHAKE,      # connectMaster
    (HANDSHAKE, "truncated"): TRANSFER,   # doTruncate succeeded
    (HANDSHAKE, "closed"): READY,         # closeMaster (write/read failure, refused truncation)
    (TRANSFER, "closed"): READY,
    # Nothing in RocketMQ enters SUSPEND; the client idles there (5 s per loop) until resumed.
    (READY, "suspend"): SUSPEND,
    (SUSPEND, "resume"): READY,
    (READY, "shutdown"): SHUTDOWN,
    (HANDSHAKE, "shutdown"): SHUTDOWN,
    (TRANSFER, "shutdown"): SHUTDOWN,
    (SUSPEND, "shutdown"): SHUTDOWN,
}

CONNECTION_TRANSITIONS: Transitions = {
    # After each slave frame the master adopts the slave's state ("Master change state from X to Y").
    (HANDSHAKE, "slave_handshake"): HANDSHAKE,
    (HANDSHAKE, "slave_ack"): TRANSFER,
    (TRANSFER, "slave_ack"): TRANSFER,
    (TRANSFER, "slave_handshake"): HANDSHAKE,
    (HANDSHAKE, "closed"): SHUTDOWN,
    (TRANSFER, "closed"): SHUTDOWN,
    (HANDSHAKE, "shutdown"): SHUTDOWN,
    (TRANSFER, "shutdown"): SHUTDOWN,
}


_MACHINE = "AutoSwitch HA"  # names this protocol in state-machine errors


def next_state(table: Transitions, state: HAConnectionState, event: str) -> HAConnectionState:
    return transition(table, state, event, _MACHINE)


# -- the slave's handshake decision (AutoSwitchHAClient.doTruncate) ------------------------------
@dataclass(frozen=True)
class TruncateDecision:
    """What the slave does with the master's handshake.

    ok: go to TRANSFER; truncate_offset: where to cut the commitlog, consume queues and epoch file
    (None: nothing to cut); reported_offset: the new currentReportedOffset (the slave's first ack
    goes out only when its max offset exceeds it, else at the next periodic report); reason: why,
    in words (shown in the trace and the labs); consistent_epoch: the newest epoch both epoch files
    hold with the same start offset, where the point was found (None when none was compared).
    """

    ok: bool
    truncate_offset: int | None
    reported_offset: int | None
    reason: str
    master_entries: tuple[EpochEntry, ...] = ()
    local_entries: tuple[EpochEntry, ...] = ()
    consistent_epoch: int | None = None


class FindConsistentPoint(Protocol):
    """The decision point ``find_consistent_point`` (rmqlab.common.decision_points): the offset the
    slave truncates to, given both epoch files (ascending) and both log ends; -1: no consistent
    point (the slave refuses). doTruncate asks it only when the local file holds data."""

    def __call__(self, local_entries: Sequence[EpochEntry], local_max_offset: int,
                 master_entries: Sequence[EpochEntry], master_max_offset: int) -> int: ...


def find_consistent_point(local_entries: Sequence[EpochEntry], local_max_offset: int,
                          master_entries: Sequence[EpochEntry], master_max_offset: int) -> int:
    """RocketMQ's rule: EpochFileCache.findConsistentPoint on the two scratch caches doTruncate
    builds (each last epoch ends at its log's end)."""
    return _scratch_cache(local_entries, local_max_offset).find_consistent_point(
        _scratch_cache(master_entries, master_max_offset))


def _scratch_cache(entries: Iterable[EpochEntry], max_offset: int) -> EpochFileCache:
    cache = EpochFileCache()
    cache.init_cache_from_entries(entries)
    cache.set_last_epoch_entry_end_offset(max_offset)
    return cache


def do_truncate(local_entries: Iterable[EpochEntry], local_max_offset: int, master_entries: Iterable[EpochEntry],
                master_max_offset: int, *, consistent_point: FindConsistentPoint | None = None) -> TruncateDecision:
    """AutoSwitchHAClient.doTruncate's decision; the caller cuts the store and the epoch file.
    `consistent_point`: the decision point find_consistent_point (None: RocketMQ's rule)."""
    local_entries = [e.copy() for e in local_entries]
    master_entries = list(master_entries)
    if not local_entries:
        return TruncateDecision(True, None, 0, "the local epoch cache is empty (a new replica): nothing to truncate")
    if local_entries[0].start_offset >= local_max_offset:
        # Deviation: RocketMQ compares these epochs too. None of them holds a byte of the local log
        # (recorded from a master's heartbeat before any data came), so they prove nothing; a
        # master that never saw them (an unclean election, whose new epoch replaced its own empty
        # ones) would otherwise be refused by a replica that has nothing to lose. They are cut
        # and the replica starts as a new one would, from its log's end.
        return TruncateDecision(True, local_max_offset, local_max_offset,
                                f"the local epochs hold no data (local max {local_max_offset}): drop them, "
                                f"nothing to truncate", tuple(master_entries), tuple(local_entries))
    master_cache = _scratch_cache(master_entries, master_max_offset)
    local_cache = _scratch_cache(local_entries, local_max_offset)
    shown_master, shown_local = tuple(master_cache.get_all_entries()), tuple(local_cache.get_all_entries())
    point = (consistent_point or find_consistent_point)([e.copy() for e in local_entries], local_max_offset,
                                                        [e.copy() for e in master_entries], master_max_offset)
    if point < 0:
        ours = ", ".join(f"({e.epoch}, {e.start_offset})" for e in shown_local)
        theirs = ", ".join(f"({e.epoch}, {e.start_offset})" for e in shown_master) or "none"
        return TruncateDecision(False, None, None,
                                f"no consistent point: no local (epoch, startOffset) [{ours}] matches one of the "
                                f"master's [{theirs}]; the slave keeps its log and refuses to replicate "
                                f"(manual intervention needed: the master's files expired, or it was "
                                f"elected uncleanly holding none of the slave's epochs)",
                                shown_master, shown_local)
    # None only when the point did not come from find_consistent_point's own walk (another rule
    # given as `consistent_point`, e.g. a lab exercise's).
    epoch = next((e.epoch for e in reversed(shown_local)
                  if (m := master_cache.get_entry(e.epoch)) is not None and m.start_offset == e.start_offset), None)
    return TruncateDecision(True, point, point,
                            f"consistent epoch {epoch}: truncate to {point} (local max {local_max_offset}, master "
                            f"max {master_max_offset})", shown_master, shown_local, epoch)


# -- the master's transfer planning (AutoSwitchHAConnection.WriteSocketService) ------------------
def transfer_start_offset(slave_request_offset: int, is_sync_from_last_file: bool, master_max_offset: int,
                          master_min_offset: int, mapped_file_size: int) -> int:
    """Where WriteSocketService starts: the request, or for a request of 0 (an empty slave) the start
    of the master's last file (isSyncFromLastFile) or its first (commitlog minOffset, -1 when the
    master has no file)."""
    if slave_request_offset != 0:
        return slave_request_offset
    if is_sync_from_last_file:
        return max(0, master_max_offset - master_max_offset % mapped_file_size)
    return master_min_offset


@dataclass(frozen=True)
class BatchPlan:
    offset: int
    size: int
    epoch: int
    epoch_start_offset: int
    cut_at_epoch_end: bool  # the batch stops early because the next byte belongs to the next epoch


def _entry_for(entries: list[EpochEntry], offset: int) -> EpochEntry | None:
    for e in entries:
        if e.start_offset <= offset < e.end_offset:
            return e
    return None


def plan_batch(next_transfer_from_where: int, readable: int, batch_size: int, allowance: int,
               entries: Iterable[EpochEntry]) -> BatchPlan | None:
    """The next batch: `readable` bytes are available from next_transfer_from_where within its file.

    Size is capped at haTransferBatchSize, then the flow-control allowance, then the end of the
    epoch the first byte belongs to: one batch = one epoch. None when nothing can be sent.
    Raises LookupError when no epoch covers the offset (Java logs and retries after 100/500 ms).

    Deviations from AutoSwitchHAConnection.transferToSlave:
    * the cut batch's label: Java switches epochs before building the header, so a batch cut at
      an epoch end carries the next epoch. Here every batch carries the epoch its bytes belong
      to, so a slave never records an epoch that starts beyond its data.
    * the epoch is looked up from the epoch file for every batch, not remembered per connection,
      so a master re-elected without a reconnect (changeToMasterWhenLastRoleIsMaster) labels new
      data with its new epoch at once (Java keeps the old label until the slave reconnects).
    """
    size = min(readable, batch_size, allowance)
    if size <= 0:
        return None
    entries = list(entries)
    entry = _entry_for(entries, next_transfer_from_where)
    if entry is None:
        raise LookupError(f"no epoch entry covers offset {next_transfer_from_where}")
    cut = entry.end_offset != LONG_MAX and next_transfer_from_where + size > entry.end_offset
    if cut:
        size = entry.end_offset - next_transfer_from_where
    return BatchPlan(next_transfer_from_where, size, entry.epoch, entry.start_offset, cut)


def heartbeat_epoch(next_transfer_from_where: int, entries: Iterable[EpochEntry]) -> EpochEntry | None:
    """The epoch a heartbeat carries: the one next_transfer_from_where belongs to; before the
    transfer start is known (or if none covers it) the first entry, as Java falls back to."""
    entries = list(entries)
    return _entry_for(entries, next_transfer_from_where) or (entries[0] if entries else None)


# -- SyncStateSet maintenance (AutoSwitchHAService, AutoSwitchHAConnection) ----------------------
def caught_up_time_on_ack(is_async_learner: bool, ack_offset: int, last_master_max_offset: int,
                          master_max_offset: int, last_transfer_time_ms: int, now_ms: int) -> int | None:
    """maybeExpandInSyncStateSet's first half: the slave's new lastCaughtUpTimeMs, or None when
    this ack says nothing (an async learner, or an ack below what the master had at its last send).

    Caught up to the master's current end: now; to what the last batch carried: that send's time.
    """
    if is_async_learner or ack_offset < last_master_max_offset:
        return None
    return now_ms if master_max_offset == ack_offset else last_transfer_time_ms


@dataclass(frozen=True)
class SyncStateSetView:
    """What the master's SyncStateSet decisions see: the confirmed set (`sync_state_set`, the
    master included), this broker's id, connectionCaughtUpTimeTable (`caught_up`: slave id ->
    lastCaughtUpTimeMs), each connected slave's slaveAckOffset (`acks`), the confirm offset, where
    the master's current epoch starts, the clock and haMaxTimeSlaveNotCatchup."""

    sync_state_set: frozenset[int]
    local_broker_id: int | None
    caught_up: Mapping[int, int]
    acks: Mapping[int, int]
    confirm_offset: int
    epoch_start_offset: int
    now_ms: int
    max_not_catchup_ms: int


class ShrinkSyncStateSet(Protocol):
    """The decision point ``sync_state_set_shrink`` (rmqlab.common.decision_points): the set the
    master wants at a maybeShrinkSyncStateSet check; only its removals are used."""

    def __call__(self, view: SyncStateSetView) -> Set[int]: ...


class ExpandSyncStateSet(Protocol):
    """The decision point ``sync_state_set_expand``: does `slave_id`, outside the confirmed set,
    join it on this ack (maybeExpandInSyncStateSet)? `view.acks[slave_id]` is the ack."""

    def __call__(self, view: SyncStateSetView, slave_id: int) -> bool: ...


def shrink_sync_state_set(view: SyncStateSetView) -> set[int]:
    """RocketMQ's maybeShrinkSyncStateSet: members that have not caught up for
    haMaxTimeSlaveNotCatchup leave, and so do members (other than this broker) that never caught
    up since this master took over (no entry in the table)."""
    new_set = set(view.sync_state_set)
    for slave_id, last in view.caught_up.items():
        if slave_id in new_set and view.now_ms - last > view.max_not_catchup_ms:
            new_set.discard(slave_id)
    for slave_id in sorted(new_set):
        if slave_id != view.local_broker_id and slave_id not in view.caught_up:
            new_set.discard(slave_id)
    return new_set


def expand_sync_state_set(view: SyncStateSetView, slave_id: int) -> bool:
    """RocketMQ's maybeExpandInSyncStateSet: the slave's ack reached the confirm offset and the
    current leader epoch."""
    ack = view.acks.get(slave_id)
    return ack is not None and ack >= view.confirm_offset and ack >= view.epoch_start_offset


@dataclass
class SyncStateSetState:
    """AutoSwitchHAService's SyncStateSet bookkeeping (broker ids), without locks or threads.

    `local` is what the controller confirmed; `remote` what the master proposed and waits for
    (only meaningful while `is_synchronizing`); `caught_up` is connectionCaughtUpTimeTable.
    """

    local_broker_id: int | None = None
    local: set[int] = field(default_factory=set)
    remote: set[int] = field(default_factory=set)
    is_synchronizing: bool = False
    caught_up: dict[int, int] = field(default_factory=dict)

    def get_sync_state_set(self) -> set[int]:
        """The union of confirmed and proposed while an alter is in flight: writes wait on it."""
        return set(self.local | self.remote) if self.is_synchronizing else set(self.local)

    def get_local_sync_state_set(self) -> set[int]:
        return set(self.local)

    def mark_synchronizing(self, new_set: set[int]) -> None:
        self.is_synchronizing = True
        self.remote = set(new_set)

    def set_sync_state_set(self, new_set: Iterable[int]) -> None:
        """The controller's answer (or a newer set learned from it)."""
        self.is_synchronizing = False
        self.local = set(new_set)

    def in_sync_replicas_nums(self) -> int:
        return max(len(self.local), len(self.remote)) if self.is_synchronizing else len(self.local)

    def update_connection_last_caught_up_time(self, slave_id: int, caught_up_ms: int) -> None:
        self.caught_up[slave_id] = max(self.caught_up.get(slave_id, 0), caught_up_ms)

    def view(self, *, acks: Mapping[int, int] | None = None, confirm_offset: int = 0, epoch_start_offset: int = 0,
             now_ms: int = 0, max_not_catchup_ms: int = 0) -> SyncStateSetView:
        """What a shrink or expand decision sees of this state, with the service's values."""
        return SyncStateSetView(frozenset(self.local), self.local_broker_id, dict(self.caught_up), dict(acks or {}),
                                confirm_offset, epoch_start_offset, now_ms, max_not_catchup_ms)

    def expand(self, slave_id: int) -> set[int]:
        """Propose the confirmed set plus `slave_id` (an expand decided yes); returns it."""
        proposed = self.get_local_sync_state_set() | {slave_id}
        self.mark_synchronizing(proposed)
        return proposed

    def shrink_to(self, wanted: Iterable[int]) -> set[int]:
        """Propose the confirmed set less the members `wanted` leaves out (only removals count: a
        shrink adds nobody), when that changes it; returns the resulting set either way."""
        local = self.get_local_sync_state_set()
        new_set = local & set(wanted)
        if new_set != local:
            self.mark_synchronizing(new_set)
        return new_set

    def maybe_expand(self, slave_id: int, ack_offset: int, confirm_offset: int,
                     leader_epoch_start_offset: int) -> set[int] | None:
        """Expand by RocketMQ's rule (expand_sync_state_set): a slave outside the set whose ack
        reached the confirm offset and the current leader epoch joins; returns the proposed set
        (now being synchronized), else None."""
        if slave_id in self.local:
            return None
        view = self.view(acks={slave_id: ack_offset}, confirm_offset=confirm_offset,
                         epoch_start_offset=leader_epoch_start_offset)
        return self.expand(slave_id) if expand_sync_state_set(view, slave_id) else None

    def maybe_shrink(self, now_ms: int, ha_max_time_slave_not_catchup: int) -> set[int]:
        """Shrink by RocketMQ's rule (shrink_sync_state_set); returns the resulting set either way."""
        return self.shrink_to(shrink_sync_state_set(self.view(now_ms=now_ms,
                                                              max_not_catchup_ms=ha_max_time_slave_not_catchup)))

    def on_connection_removed(self, slave_id: int) -> set[int] | None:
        """removeConnection: propose the set without the slave. The confirmed set is unchanged
        until the controller answers (setSyncStateSet), so writes still wait for it."""
        if slave_id not in self.local:
            return None
        proposed = self.get_local_sync_state_set() - {slave_id}
        self.mark_synchronizing(proposed)
        return proposed


# -- confirm offset (AutoSwitchHAService.computeConfirmOffset) -----------------------------------
def compute_confirm_offset(master_max_offset: int, sync_state_set: set[int], local_broker_id: int | None,
                           connections: Iterable[tuple[int, int]], stored_confirm_offset: int) -> int:
    """computeConfirmOffset: the smallest ack of the set's connected members, capped at the master's
    max offset. `connections` is (slaveId, slaveAckOffset) per live connection.

    Kept from RocketMQ (apache/rocketmq issue #6662): while a member other than this broker has
    no connection, the stored value is returned unchanged — the confirm offset freezes until the
    set shrinks.
    """
    connections = list(connections)
    connected = {slave_id for slave_id, _ in connections}
    for member in sync_state_set:
        if member not in connected and local_broker_id is not None and member != local_broker_id:
            return stored_confirm_offset
    value = master_max_offset
    for slave_id, ack in connections:
        if slave_id in sync_state_set and ack > 0:
            value = min(value, ack)
    return value


def reported_confirm_offset(is_slave: bool, local_sync_state_set_size: int, all_ack_in_sync_state_set: bool,
                            master_max_offset: int, stored_confirm_offset: int) -> int:
    """CommitLog.getConfirmOffset in controller mode (fencing is not modelled).

    A master alone in its set, or one not waiting for every member, confirms everything it has.
    """
    if not is_slave and (local_sync_state_set_size == 1 or not all_ack_in_sync_state_set):
        return master_max_offset
    return stored_confirm_offset


# -- the write-ack rule (CommitLog.asyncPutMessage, GroupTransferService) ------------------------
@dataclass(frozen=True)
class WriteAckDecision:
    refuse: PutMessageStatus | None  # IN_SYNC_REPLICAS_NOT_ENOUGH: fail before appending
    need_ack_nums: int               # -1: every member of the SyncStateSet; 0/1: do not wait

    @property
    def waits(self) -> bool:
        return self.refuse is None and not 0 <= self.need_ack_nums <= 1


def decide_write_ack(in_sync_replicas_nums: int, min_in_sync_replicas: int, in_sync_replicas: int,
                     all_ack_in_sync_state_set: bool) -> WriteAckDecision:
    """CommitLog.asyncPutMessage for a SYNC_MASTER message with waitStoreMsgOK in controller mode."""
    if in_sync_replicas_nums < min_in_sync_replicas:
        return WriteAckDecision(PutMessageStatus.IN_SYNC_REPLICAS_NOT_ENOUGH, 0)
    return WriteAckDecision(None, ALL_ACK_IN_SYNC_STATE_SET if all_ack_in_sync_state_set else in_sync_replicas)


def all_ack_transfer_ok(sync_state_set: set[int], connections: Iterable[tuple[int, int]], next_offset: int) -> bool:
    """GroupTransferService for ackNums == -1: the master plus every other member holds next_offset.

    `connections` is (slaveId, slaveAckOffset) per live connection; members without one never count,
    so a dead member still in the set makes every such write time out.
    """
    if len(sync_state_set) <= 1:
        return True
    acks = 1 + sum(1 for slave_id, ack in connections if slave_id in sync_state_set and ack >= next_offset)
    return acks >= len(sync_state_set)


# -- the slave's end (AutoSwitchHAClient) --------------------------------------------------------
class ClientProtocol(ReportingClientProtocol):
    """The slave's protocol state: what AutoSwitchHAClient keeps besides its socket and store.

    Times are the caller's clock in ms; as in RocketMQ, last_write_timestamp starts at construction,
    so the first periodic ack waits haSendHeartbeatInterval (see TruncateDecision.reported_offset).
    """

    TRANSITIONS = CLIENT_TRANSITIONS
    MACHINE = _MACHINE

    def __init__(self, now_ms: int):
        super().__init__(now_ms)
        self.current_received_epoch = -1
        self.decoder = MasterFrameDecoder()

    def connected(self, now_ms: int, slave_max_offset: int) -> tuple[HAConnectionState, HAConnectionState]:
        """connectMaster succeeded.

        Deviation: currentReceivedEpoch is forgotten on every connect (Java keeps it for the
        client's life). Otherwise a handshake that truncates away the entry of the last received
        epoch — a slave that had recorded epoch E but none of its data — would not re-record E
        when the master streams E's data again, leaving data in no epoch.
        """
        self.current_reported_offset = slave_max_offset
        self.current_received_epoch = -1
        self.last_read_timestamp = now_ms
        self.decoder.clear()
        return self._move("connected")

    def closed(self) -> tuple[HAConnectionState, HAConnectionState]:
        """closeMaster: the half-read stream is dropped."""
        self.last_read_timestamp = 0
        self.decoder.clear()
        return self._move("closed")

    def suspend(self) -> tuple[HAConnectionState, HAConnectionState]:
        return self._move("suspend")

    def resume(self) -> tuple[HAConnectionState, HAConnectionState]:
        return self._move("resume")

    def handshake(self, is_sync_from_last_file: bool, is_async_learner: bool, slave_broker_id: int,
                  now_ms: int) -> bytes:
        self.last_write_timestamp = now_ms
        return encode_slave_handshake(is_sync_from_last_file, is_async_learner, slave_broker_id)

    def feed(self, data: bytes, now_ms: int) -> None:
        self.decoder.feed(data)
        self.last_read_timestamp = now_ms

    def next_frame(self) -> MasterHandshake | MasterTransfer | None:
        return self.decoder.next_frame(self.state)

    def truncated(self, decision: TruncateDecision) -> tuple[HAConnectionState, HAConnectionState]:
        """doTruncate succeeded: report from decision.reported_offset on, state TRANSFER."""
        if not decision.ok:
            raise ValueError(f"the handshake was refused: {decision.reason}")
        self.current_reported_offset = decision.reported_offset
        return self._move("truncated")

    def check_transfer(self, frame: MasterTransfer, slave_max_offset: int) -> EpochEntry | None:
        """AutoSwitchHAClient.HAClientReader: the offset must continue the local log (unless the slave
        is empty); returns the epoch entry to append when the header names a new epoch."""
        if slave_max_offset != 0 and slave_max_offset != frame.offset:
            raise HAProtocolError(f"offset gap: master pushed offset {frame.offset}, the slave's log ends at "
                                  f"{slave_max_offset}")
        if frame.epoch != self.current_received_epoch:
            self.current_received_epoch = frame.epoch
            return EpochEntry(frame.epoch, frame.epoch_start_offset)
        return None

    @staticmethod
    def slave_confirm_offset(header_confirm_offset: int, slave_max_offset: int) -> int:
        """A slave confirms what the master confirmed, as far as its own log goes."""
        return min(header_confirm_offset, slave_max_offset)

    # acks: is_time_to_report, report (reportSlaveOffset(TRANSFER, currentReportedOffset)),
    # report_plus (reportSlaveMaxOffset) and housekeeping_expired are ReportingClientProtocol's.
    def _encode_report(self, offset: int) -> bytes:
        return encode_slave_ack(offset)


# -- the master's end (AutoSwitchHAConnection) ---------------------------------------------------
class ConnectionProtocol(ConnectionProtocolBase):
    """The master's per-slave protocol state: what AutoSwitchHAConnection keeps besides its socket."""

    TRANSITIONS = CONNECTION_TRANSITIONS
    MACHINE = _MACHINE

    def __init__(self) -> None:
        super().__init__(HANDSHAKE)
        self.slave_id = -1
        self.is_sync_from_last_file = False
        self.is_async_learner = False
        self.is_slave_send_handshake = False
        self.current_transfer_epoch = -1
        self.last_master_max_offset = -1
        self.last_transfer_time_ms = 0
        self.decoder = SlaveFrameDecoder()

    def feed(self, data: bytes) -> None:
        self.decoder.feed(data)

    def next_frame(self, master_max_offset: int,
                   reject_impossible: bool = False) -> tuple[SlaveHandshake | SlaveAck, tuple | None] | None:
        """Decode and apply the next slave frame; returns it with the state change it caused (or None)."""
        frame = self.decoder.next_frame(master_max_offset, reject_impossible)
        if frame is None:
            return None
        if isinstance(frame, SlaveHandshake):
            self.slave_id = frame.slave_broker_id
            # As in Java a flag, once set on this connection, stays set.
            self.is_sync_from_last_file |= frame.is_sync_from_last_file
            self.is_async_learner |= frame.is_async_learner
            self.is_slave_send_handshake = True
            old, new = self._move("slave_handshake")
        else:
            self.slave_ack_offset = frame.slave_max_offset
            if self.slave_request_offset < 0:
                self.slave_request_offset = frame.slave_max_offset
            old, new = self._move("slave_ack")
        return frame, ((old, new) if old is not new else None)

    def master_handshake(self, max_phy_offset: int, entries: list[EpochEntry]) -> bytes:
        """buildHandshakeBuffer; the master answers every slave handshake once."""
        self.is_slave_send_handshake = False
        return encode_master_handshake(max_phy_offset, entries[-1].epoch if entries else -1, entries)

    def transfer_start(self, master_max_offset: int, master_min_offset: int, mapped_file_size: int) -> int:
        """Fix nextTransferFromWhere after the slave's first ack (-1 while the master has no data)."""
        if self.slave_request_offset < 0:
            raise ValueError("the transfer starts after the slave's first ack")
        if self.next_transfer_from_where < 0:
            self.next_transfer_from_where = transfer_start_offset(
                self.slave_request_offset, self.is_sync_from_last_file, master_max_offset, master_min_offset,
                mapped_file_size)
        return self.next_transfer_from_where

    def heartbeat(self, entries: list[EpochEntry], confirm_offset: int) -> bytes | None:
        """A TRANSFER without body at nextTransferFromWhere; None while the master has no epoch
        (Java would throw there; a master always has one after changeToMaster)."""
        entry = heartbeat_epoch(self.next_transfer_from_where, entries)
        if entry is None:
            return None
        return encode_master_transfer(self.next_transfer_from_where, entry.epoch, entry.start_offset, confirm_offset)

    def batch(self, plan: BatchPlan, master_max_offset: int, now_ms: int, confirm_offset: int) -> bytes:
        """Commit to sending `plan`: advance nextTransferFromWhere, remember what the master had
        (updateLastTransferInfo, for lastCaughtUpTimeMs) and return the header."""
        if plan.offset != self.next_transfer_from_where:
            raise ValueError(f"plan at {plan.offset} but the transfer is at {self.next_transfer_from_where}")
        self.next_transfer_from_where += plan.size
        self.current_transfer_epoch = plan.epoch
        self.last_master_max_offset = master_max_offset
        self.last_transfer_time_ms = now_ms
        return MASTER_TRANSFER_HEADER.codec.pack(TRANSFER.value, plan.size, plan.offset, plan.epoch,
                                                 plan.epoch_start_offset, confirm_offset)

    def caught_up_time(self, master_max_offset: int, now_ms: int) -> int | None:
        """This connection's lastCaughtUpTimeMs after its latest ack (None: unchanged)."""
        return caught_up_time_on_ack(self.is_async_learner, self.slave_ack_offset, self.last_master_max_offset,
                                     master_max_offset, self.last_transfer_time_ms, now_ms)
