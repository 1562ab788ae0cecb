"""AutoSwitchHAConnection: the master's end of one slave's controller-mode HA connection.

Mirrors org.apache.rocketmq.store.ha.autoswitch.AutoSwitchHAConnection and its two threads, here
two tasks on the master's Node; the wire format and every decision are in auto_switch_ha_protocol:

* ReadSocketService (HAConnection's, rmqlab.ha.ha_connection) decodes the slave's frames. A HANDSHAKE records the slave's broker id and flags
  and asks the write side to answer; an ack records the slave's offset (the first one is where to
  start), updates its lastCaughtUpTimeMs, may propose it for the SyncStateSet, recomputes the
  confirm offset if it is a member, and wakes waiting SYNC_MASTER puts. The master adopts the
  state of each frame. Nothing read for haHousekeepingInterval closes the connection.
* WriteSocketService answers each handshake with the master's max offset and epoch entries, then
  (TRANSFER) streams the commitlog from the start offset in batches of one file and one epoch at
  most, with heartbeats after haSendHeartbeatInterval without a write; with nothing to send it
  records that the slave was sent everything (lastCaughtUpTime) and waits up to 100 ms.

Traced like the classic connection: frame.send / frame.recv (proto "ha"), `state` events of machine
"AutoSwitchHAConnection", net.close with the reason.
"""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING, Any

from rmqlab.ha.autoswitch.auto_switch_ha_protocol import (EPOCH_ENTRY_SIZE, MASTER_HANDSHAKE_HEADER_SIZE,
                                                          MASTER_TRANSFER_HEADER, MASTER_TRANSFER_HEADER_SIZE,
                                                          ConnectionProtocol, SlaveHandshake, encode_slave_ack,
                                                          encode_slave_handshake, plan_batch)
from rmqlab.ha.ha_connection import IDLE_WAIT_MS, READ_MAX_BUFFER_SIZE, HAConnection
from rmqlab.ha.ha_connection_state import HAConnectionState
from rmqlab.ha.ha_protocol import HEX_BODY_PREVIEW, HEX_EPOCH_ENTRIES, hex_preview
from rmqlab.ha.wait_notify_object import wait_at_most

if TYPE_CHECKING:
    from rmqlab.ha.autoswitch.auto_switch_ha_service import AutoSwitchHAService

log = logging.getLogger("rmqlab.ha")

MACHINE = "AutoSwitchHAConnection"
NO_DATA_WAIT_MS = 500               # empty master, or no epoch for the start offset
NO_EPOCH_WAIT_MS = 100              # "Can't find a bigger epochEntry"

__all__ = ["AutoSwitchHAConnection", "MACHINE", "READ_MAX_BUFFER_SIZE", "IDLE_WAIT_MS", "NO_DATA_WAIT_MS",
           "NO_EPOCH_WAIT_MS"]


class AutoSwitchHAConnection(HAConnection):
    MACHINE = MACHINE

    def __init__(self, ha_service: AutoSwitchHAService, reader: asyncio.StreamReader, writer: Any):
        super().__init__(ha_service, reader, writer, ConnectionProtocol())
        self._notified = False  # the read side got a frame the write side may be waiting for
        self._waiter: asyncio.Future | None = None
        self.last_write_timestamp = self.node.now_ms()

    def __repr__(self) -> str:
        return (f"AutoSwitchHAConnection({self.client_address}, slave {self.slave_id}, {self.current_state.name}, "
                f"ack={self.slave_ack_offset}, next={self.protocol.next_transfer_from_where})")

    # -- what the service and GroupTransferService read (besides HAConnection's) -------------
    @property
    def slave_id(self) -> int:
        return self.protocol.slave_id

    def is_async_learner(self) -> bool:
        return self.protocol.is_async_learner

    def is_sync_from_last_file(self) -> bool:
        return self.protocol.is_sync_from_last_file

    def _log_closed(self, reason: str) -> None:
        log.info("%s: HA connection with slave %s (id %d) closed: %s", self.node.name, self.client_address,
                 self.slave_id, reason)

    # -- ReadSocketService -------------------------------------------------------------------
    def process_read(self, data: bytes) -> None:
        self.protocol.feed(data)
        self._process_frames()

    def _process_frames(self) -> None:
        ha, proto = self.ha_service, self.protocol
        reject = ha.config.rmqlabRejectImpossibleHaReport
        while (decoded := proto.next_frame(ha.store.get_max_phy_offset(), reject)) is not None:
            frame, moved = decoded
            if isinstance(frame, SlaveHandshake):
                # The decoders check every field, so re-encoding gives back the bytes read.
                self.node.trace("frame.recv", proto="ha", peer=self.client_address, size=frame.wire_size,
                                name="handshake", slave_broker_id=frame.slave_broker_id,
                                is_sync_from_last_file=frame.is_sync_from_last_file,
                                is_async_learner=frame.is_async_learner,
                                hex=encode_slave_handshake(frame.is_sync_from_last_file, frame.is_async_learner,
                                                           frame.slave_broker_id).hex())
                log.info("Receive slave handshake, slaveBrokerId:%d, isSyncFromLastFile:%s, isAsyncLearner:%s",
                         frame.slave_broker_id, frame.is_sync_from_last_file, frame.is_async_learner)
            else:
                self.node.trace("frame.recv", proto="ha", peer=self.client_address, size=frame.wire_size,
                                name="ack", offset=frame.slave_max_offset,
                                hex=encode_slave_ack(frame.slave_max_offset).hex())
            if moved is not None:
                log.warning("Master change state from %s to %s", moved[0].name, moved[1].name)
                self._trace_state(moved[0], moved[1], f"slave sent {frame.name}")
            if not isinstance(frame, SlaveHandshake):
                self._on_ack(frame.slave_max_offset)
            self._notify_writer()

    def _on_ack(self, offset: int) -> None:
        """maybeExpandInSyncStateSet, updateConfirmOffsetWhenSlaveAck, notifyTransferSome."""
        ha, proto = self.ha_service, self.protocol
        caught_up = proto.caught_up_time(ha.store.get_max_phy_offset(), self.node.now_ms())
        if caught_up is not None:
            ha.update_connection_last_caught_up_time(proto.slave_id, caught_up)
            ha.maybe_expand_in_sync_state_set(proto.slave_id, offset)
        ha.update_confirm_offset_when_slave_ack(proto.slave_id)
        ha.notify_transfer_some(offset)

    # -- WriteSocketService ------------------------------------------------------------------
    def _send(self, data: bytes, name: str, header_size: int, **fields: Any) -> None:
        self.writer.write(data)
        self.last_write_timestamp = self.node.now_ms()
        self.flow_monitor.add_byte_count_transferred(len(data))
        preview = EPOCH_ENTRY_SIZE * HEX_EPOCH_ENTRIES if name == "handshake" else HEX_BODY_PREVIEW
        self.node.trace("frame.send", proto="ha", peer=self.client_address, size=len(data), name=name,
                        body_size=len(data) - header_size, hex=hex_preview(data, header_size, preview), **fields)

    def _heartbeat_if_needed(self) -> None:
        ha, proto = self.ha_service, self.protocol
        if self.node.now_ms() - self.last_write_timestamp <= ha.config.haSendHeartbeatInterval:
            return
        entries = ha.epoch_cache.get_all_entries()
        frame = proto.heartbeat(entries, ha.get_confirm_offset())
        if frame is not None:
            _, _, offset, epoch, epoch_start, confirm = MASTER_TRANSFER_HEADER.codec.unpack_from(frame)
            self._send(frame, "heartbeat", MASTER_TRANSFER_HEADER_SIZE, offset=offset, epoch=epoch,
                       epoch_start_offset=epoch_start, confirm_offset=confirm)

    def _notify_writer(self) -> None:
        self._notified = True
        if self._waiter is not None and not self._waiter.done():
            self._waiter.set_result(None)

    async def _wait_for_slave(self, timeout_ms: float) -> None:
        """waitForRunning while the write side needs something from the slave (a handshake, an ack);
        a frame that arrived meanwhile is remembered, so the wait then returns at once."""
        if self._notified:
            self._notified = False
            return
        fut = asyncio.get_running_loop().create_future()
        self._waiter = fut
        try:
            await wait_at_most(self.node, fut, timeout_ms)
        finally:
            self._waiter = None
            self._notified = False

    async def _write_loop(self) -> str:
        ha, proto = self.ha_service, self.protocol
        cfg, store = ha.config, ha.store
        while self.close_reason is None:
            if self.writer.is_closing():
                return "reset"
            if proto.state is HAConnectionState.HANDSHAKE:
                if not proto.is_slave_send_handshake:
                    await self._wait_for_slave(1000)
                    continue
                entries = ha.epoch_cache.get_all_entries()
                frame = proto.master_handshake(store.get_max_phy_offset(), entries)
                self._send(frame, "handshake", MASTER_HANDSHAKE_HEADER_SIZE, offset=store.get_max_phy_offset(),
                           epoch=entries[-1].epoch if entries else -1, entries=len(entries),
                           epoch_entries=[[e.epoch, e.start_offset] for e in entries])
                await self.writer.drain()
                continue
            if proto.slave_request_offset < 0:
                await self._wait_for_slave(1000)
                continue
            if proto.next_transfer_from_where < 0:
                start = proto.transfer_start(store.get_max_phy_offset(), store.get_min_phy_offset(),
                                             cfg.mappedFileSizeCommitLog)
                if start < 0:  # an empty master: nothing to send yet
                    self._heartbeat_if_needed()
                    await self.node.sleep(NO_DATA_WAIT_MS)
                    continue
                log.info("Master transfer data to slave %s, from offset:%d, currentEpoch:%s", self.client_address,
                         start, ha.epoch_cache.find_epoch_entry_by_offset(start))
            await self._transfer_to_slave()
        return "local"

    async def _transfer_to_slave(self) -> None:
        ha, proto = self.ha_service, self.protocol
        cfg, store = ha.config, ha.store
        self._heartbeat_if_needed()
        start = proto.next_transfer_from_where
        data = store.commit_log.get_data(start, cfg.haTransferBatchSize)
        if not data:
            ha.update_connection_last_caught_up_time(proto.slave_id, self.node.now_ms())
            await self.writer.drain()
            await ha.wait_notify_object.all_wait_for_running(self, IDLE_WAIT_MS)
            return
        entries = ha.epoch_cache.get_all_entries()
        try:
            plan = plan_batch(start, len(data), cfg.haTransferBatchSize, self.flow_monitor.can_transfer_max_byte_num(),
                              entries)
        except LookupError as e:
            log.error("Failed to find an epochEntry to match nextTransferFromWhere %d: %s", start, e)
            await self.node.sleep(NO_DATA_WAIT_MS)
            return
        if plan is None:
            # Deviation (as classic): wait for the next flow-control window instead of polling.
            await self.node.sleep(self.flow_monitor.ms_until_next_window())
            return
        confirm = ha.get_confirm_offset()
        header = proto.batch(plan, store.get_max_phy_offset(), self.node.now_ms(), confirm)
        self._send(header + data[:plan.size], "transfer", MASTER_TRANSFER_HEADER_SIZE, offset=plan.offset,
                   epoch=plan.epoch, epoch_start_offset=plan.epoch_start_offset, confirm_offset=confirm,
                   cut_at_epoch_end=plan.cut_at_epoch_end)
        await self.writer.drain()
