"""DefaultHAClient: the slave's end of classic HA (reference §3, seed 004).

Mirrors org.apache.rocketmq.store.ha.DefaultHAClient, one task on the slave's Node:

* READY: with a master HA address (haMasterAddress, or learned from the NameServer registration),
  connect (5 s timeout, RemotingHelper.connect); on success state TRANSFER, the report offset is
  the local max offset. Without an address or on failure, wait 5 s and try again.
* TRANSFER: report the local max offset whenever haSendHeartbeatInterval passed since the last
  report (also the very first time: until then the master sends nothing); decode TRANSFERs
  (ClientProtocol), append each body to the local commitlog — the slave's own dispatcher then
  builds its consume queues — and report the new max offset after every batch. A batch that does
  not continue the local log, a failed append or a lost connection closes the connection and waits
  5 s (closeMasterAndWait); nothing read for haHousekeepingInterval closes it and reconnects at once.

Frames are traced as frame.send / frame.recv with proto "ha", the written offset as an `offset`
event, the state changes as `state` events of machine "DefaultHAClient", closes as net.close.
"""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING, Any

from rmqlab.ha.default_ha_protocol import REPORT_HEADER_SIZE, ClientProtocol, HAProtocolError
from rmqlab.ha.flow_monitor import FlowMonitor
from rmqlab.ha.ha_connection_state import HAConnectionState
from rmqlab.remoting.remoting_helper import string_to_address

if TYPE_CHECKING:
    from rmqlab.ha.default_ha_service import DefaultHAService

log = logging.getLogger("rmqlab.ha")

MACHINE = "DefaultHAClient"
CONNECT_TIMEOUT_MS = 5000  # RemotingHelper.connect(remote)
RETRY_WAIT_MS = 5000       # waitForRunning(1000 * 5) after a failed connect or a closed connection
READ_SIZE = 4 * 1024 * 1024


class DefaultHAClient:
    def __init__(self, ha_service: "DefaultHAService"):
        self.ha_service = ha_service
        self.node = ha_service.node
        self.store = ha_service.store
        self.config = ha_service.config
        self.protocol = ClientProtocol(self.node.now_ms())
        self.flow_monitor = FlowMonitor(self.config, self.node.now_ms)
        self.master_ha_address: str | None = None
        self._reader: asyncio.StreamReader | None = None
        self._writer: Any = None
        self._task: asyncio.Task | None = None
        self._report_timer = None
        self._housekeeping_timer = None
        self._close_reason: str | None = None
        self._wait_after_close = True

    # -- what the broker and the service use -------------------------------------------------
    @property
    def current_state(self) -> HAConnectionState:
        return self.protocol.state

    def update_ha_master_address(self, new_addr: str | None) -> None:
        """Takes effect at the next connect; a live connection keeps its master (as in RocketMQ)."""
        if new_addr != self.master_ha_address:
            log.info("update master ha address, OLD: %s NEW: %s", self.master_ha_address, new_addr)
            self.master_ha_address = new_addr

    def get_ha_master_address(self) -> str | None:
        return self.master_ha_address

    def get_last_read_timestamp(self) -> int:
        return self.protocol.last_read_timestamp

    def get_last_write_timestamp(self) -> int:
        return self.protocol.last_write_timestamp

    def get_transferred_byte_in_second(self) -> int:
        return self.flow_monitor.get_transferred_byte_in_second()

    def start(self) -> None:
        self._trace_state(None, self.protocol.state, "started")
        self._task = self.node.spawn(self.run(), name="DefaultHAClient")

    def shutdown(self) -> None:
        if self.protocol.state is HAConnectionState.SHUTDOWN:
            return
        if self.protocol.state is HAConnectionState.TRANSFER:
            self.close_master("local: shutdown", wait=False)
        old, new = self.protocol.shutdown()
        self._trace_state(old, new, "shutdown")
        if self._task is not None and self._task is not asyncio.current_task():
            self._task.cancel()

    def on_crash(self) -> None:
        """Process crash: the node already cancelled the task and its timers; forget the socket."""
        self._reader = self._writer = None
        self._report_timer = self._housekeeping_timer = None

    # -- the service loop --------------------------------------------------------------------
    async def run(self) -> None:
        while self.protocol.state is not HAConnectionState.SHUTDOWN:
            if self.protocol.state is HAConnectionState.READY:
                if not await self.connect_master():
                    # Nothing to report before the master's address is known (the slave learns it
                    # from its name server registration); RocketMQ's connectMaster is silent then too.
                    if self.master_ha_address is not None:
                        log.warning("HAClient connect to master %s failed", self.master_ha_address)
                    await self.node.sleep(RETRY_WAIT_MS)
                continue
            await self._transfer_from_master()
            if self.protocol.state is HAConnectionState.READY and self._wait_after_close:
                await self.node.sleep(RETRY_WAIT_MS)  # closeMasterAndWait

    async def connect_master(self) -> bool:
        addr = self.master_ha_address
        if addr is None:
            return False
        try:
            host, port = string_to_address(addr)
            reader, writer = await self.node.connect(host, port, timeout_ms=CONNECT_TIMEOUT_MS)
        except (ConnectionError, TimeoutError, OSError, ValueError) as e:
            log.info("HAClient: connect to master %s: %s", addr, e)
            return False
        if self.protocol.state is not HAConnectionState.READY:  # shut down meanwhile
            writer.close()
            return False
        self._reader, self._writer = reader, writer
        self._close_reason = None
        self._wait_after_close = True
        log.info("HAClient connect to master %s", addr)
        old, new = self.protocol.connected(self.node.now_ms(), self.store.get_max_phy_offset())
        self._trace_state(old, new, f"connected to {addr}")
        return True

    def close_master(self, reason: str, wait: bool = True) -> None:
        """closeMaster (wait=False) or the close half of closeMasterAndWait."""
        if self.protocol.state is not HAConnectionState.TRANSFER or self._close_reason is not None:
            return
        self._close_reason = reason
        self._wait_after_close = wait
        for timer in (self._report_timer, self._housekeeping_timer):
            if timer is not None:
                timer.cancel()
        self._report_timer = self._housekeeping_timer = None
        if not self.ha_service.crashed:
            log.info("HAClient close connection with master %s: %s", self.master_ha_address, reason)
            self.node.trace("net.close", peer=self.master_ha_address or "?", reason=reason)
        try:
            if self._writer is not None:  # None after a crash: the network already closed it
                self._writer.close()      # the read in _transfer_from_master then sees EOF
        except (ConnectionError, OSError):
            pass
        self._reader = self._writer = None
        old, new = self.protocol.closed()
        self._trace_state(old, new, reason)

    async def _transfer_from_master(self) -> None:
        reader, peer = self._reader, self.master_ha_address or "?"
        self._arm_report_timer()
        self._arm_housekeeping_timer()
        reason = "remote"
        try:
            while self._close_reason is None:
                try:
                    data = await reader.read(READ_SIZE)
                except (ConnectionError, OSError) as e:
                    reason = f"reset: {e}" if str(e) else "reset"
                    break
                if not data or self._close_reason is not None:
                    break
                self.flow_monitor.add_byte_count_transferred(len(data))
                self.protocol.feed(data, self.node.now_ms())
                try:
                    self._dispatch_read_request(peer)
                except HAProtocolError as e:
                    log.error("HAClient, dispatchReadRequest error: %s", e)
                    reason = str(e)
                    break
                if self._writer is not None:
                    await self._writer.drain()
        except (ConnectionError, OSError) as e:
            reason = f"reset: {e}" if str(e) else "reset"
        except asyncio.CancelledError:
            reason = "local"
            raise
        finally:
            self.close_master(reason)

    def _dispatch_read_request(self, peer: str) -> None:
        """Apply every complete TRANSFER; report after each batch that grew the log."""
        store, node = self.store, self.node
        while (frame := self.protocol.next_frame(store.get_max_phy_offset())) is not None:
            node.trace("frame.recv", proto="ha", peer=peer, size=frame.wire_size,
                       name="heartbeat" if frame.is_heartbeat else "transfer", offset=frame.offset,
                       body_size=len(frame.body))
            if frame.body:
                if not store.append_to_commit_log(frame.offset, frame.body):
                    raise HAProtocolError(f"append of {len(frame.body)} bytes at offset {frame.offset} failed")
                node.trace("offset", which="written", value=store.get_max_phy_offset())
            report = self.protocol.report_plus(store.get_max_phy_offset(), node.now_ms())
            if report is not None:
                self._send_report(report)

    # -- reports and housekeeping (Node timers) ---------------------------------------------
    def _send_report(self, report: bytes) -> None:
        self._writer.write(report)
        self.node.trace("frame.send", proto="ha", peer=self.master_ha_address or "?", size=REPORT_HEADER_SIZE,
                        name="report", offset=self.protocol.current_reported_offset)

    def _arm_report_timer(self) -> None:
        interval = self.config.haSendHeartbeatInterval
        delay = max(0, self.protocol.last_write_timestamp + interval + 1 - self.node.now_ms())
        self._report_timer = self.node.call_later(delay, self._on_report_timer)

    def _on_report_timer(self) -> None:
        self._report_timer = None
        if self._close_reason is not None or self._writer is None:
            return
        if self.protocol.is_time_to_report(self.node.now_ms(), self.config.haSendHeartbeatInterval):
            self._send_report(self.protocol.report(self.node.now_ms()))
        self._arm_report_timer()

    def _arm_housekeeping_timer(self) -> None:
        interval = self.config.haHousekeepingInterval
        delay = max(0, self.protocol.last_read_timestamp + interval + 1 - self.node.now_ms())
        self._housekeeping_timer = self.node.call_later(delay, self._on_housekeeping_timer)

    def _on_housekeeping_timer(self) -> None:
        self._housekeeping_timer = None
        if self._close_reason is not None:
            return
        now = self.node.now_ms()
        if self.protocol.housekeeping_expired(now, self.config.haHousekeepingInterval):
            idle = now - self.protocol.last_read_timestamp
            log.warning("HAClient, housekeeping, found this connection[%s] expired, %d", self.master_ha_address, idle)
            self.close_master(f"housekeeping: nothing read for {idle} ms", wait=False)
        else:
            self._arm_housekeeping_timer()

    def _trace_state(self, old: HAConnectionState | None, new: HAConnectionState, reason: str) -> None:
        if not self.ha_service.crashed:
            self.node.trace("state", machine=MACHINE, from_=old.name if old else None, to=new.name, reason=reason)
