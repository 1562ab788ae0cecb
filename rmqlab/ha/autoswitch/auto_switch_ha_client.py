"""AutoSwitchHAClient: the slave's end of controller-mode HA (reference §2.3-§2.5, §2.13).

Mirrors org.apache.rocketmq.store.ha.autoswitch.AutoSwitchHAClient, one task on the slave's Node;
the wire format and the decisions are in auto_switch_ha_protocol:

* READY: cut a torn tail (truncateInvalidMsg) and the epoch file with it; with the master's HA
  address known, connect (state HANDSHAKE), else wait 5 s.
* HANDSHAKE: send the 16-byte handshake (again every 5 s until answered). The master's answer
  carries its max offset and epoch entries; doTruncate finds the consistent point, cuts the
  commitlog, consume queues and epoch file there and moves to TRANSFER — or, with no consistent
  point, refuses: the connection is closed with the reason, the log is left alone, and the client
  retries after 2 s + 5 s (the master's log may change, or an operator intervenes).
* TRANSFER: each frame must continue the local log; a header naming a new epoch is recorded in the
  epoch file before the bytes are appended; the slave's confirm offset becomes min(the master's,
  its own max offset); an ack goes out whenever the log grew, and every haSendHeartbeatInterval.
  Nothing read for haHousekeepingInterval closes the connection.
* SUSPEND: idle (nothing in RocketMQ enters it; ``suspend()`` / ``resume()`` do here).

Traced as frame.send / frame.recv (proto "ha"), `state` events of machine "AutoSwitchHAClient", the
written offset as `offset` events, the truncation decision as a `log` event, closes as net.close.
"""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING, Any

from rmqlab.ha.autoswitch.auto_switch_ha_protocol import (SLAVE_HANDSHAKE_SIZE, SLAVE_TRANSFER_SIZE, ClientProtocol,
                                                          HAProtocolError, MasterHandshake, do_truncate)
from rmqlab.ha.flow_monitor import FlowMonitor
from rmqlab.ha.ha_connection_state import HAConnectionState
from rmqlab.remoting.remoting_helper import string_to_address

if TYPE_CHECKING:
    from rmqlab.ha.autoswitch.auto_switch_ha_service import AutoSwitchHAService

log = logging.getLogger("rmqlab.ha")

MACHINE = "AutoSwitchHAClient"
CONNECT_TIMEOUT_MS = 5000
RETRY_WAIT_MS = 5000          # waitForRunning(1000 * 5): failed connect, closed connection, SUSPEND
TRUNCATE_FAIL_WAIT_MS = 2000  # waitForRunning(1000 * 2) after a failed doTruncate
HANDSHAKE_RESEND_MS = 5000    # selector.select(5000) between handshakes
READ_SIZE = 4 * 1024 * 1024


def _current_task() -> asyncio.Task | None:
    """The running task, None when called from outside the loop (a role change made synchronously)."""
    try:
        return asyncio.current_task()
    except RuntimeError:
        return None


class _Refused(Exception):
    """The handshake failed (no consistent point, or the cut was impossible): close, wait, retry."""


class AutoSwitchHAClient:
    def __init__(self, ha_service: "AutoSwitchHAService", slave_id: int):
        self.ha_service = ha_service
        self.node = ha_service.node
        self.store = ha_service.store
        self.config = ha_service.config
        self.epoch_cache = ha_service.epoch_cache
        self.broker_id = slave_id
        self.protocol = ClientProtocol(self.node.now_ms())
        self.flow_monitor = FlowMonitor(self.config, self.node.now_ms)
        self.master_address: str | None = None
        self.master_ha_address: str | None = None
        self.last_truncate_decision = None  # the last doTruncate decision (for the labs)
        self._reader: asyncio.StreamReader | None = None
        self._writer: Any = None
        self._task: asyncio.Task | None = None
        self._timers: dict[str, Any] = {}
        self._close_reason: str | None = None
        self._wait_after_close_ms = RETRY_WAIT_MS
        self._wake: asyncio.Future | None = None

    # -- what the service and the broker use -------------------------------------------------
    @property
    def current_state(self) -> HAConnectionState:
        return self.protocol.state

    def update_master_address(self, new_addr: str | None) -> None:
        if new_addr != self.master_address:
            log.info("update master address, OLD: %s NEW: %s", self.master_address, new_addr)
            self.master_address = new_addr

    def update_ha_master_address(self, new_addr: str | None) -> None:
        """Takes effect at the next connect, which it hastens (RocketMQ's wakeup)."""
        if new_addr != self.master_ha_address:
            log.info("update master ha address, OLD: %s NEW: %s", self.master_ha_address, new_addr)
            self.master_ha_address = new_addr
            self._wakeup()

    def get_master_address(self) -> str | None:
        return self.master_address

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
        self._task = self.node.spawn(self.run(), name=MACHINE)

    def shutdown(self) -> None:
        if self.protocol.state is HAConnectionState.SHUTDOWN:
            return
        if self.protocol.state in (HAConnectionState.HANDSHAKE, HAConnectionState.TRANSFER):
            self.close_master("local: shutdown", wait_ms=0)
        old, new = self.protocol.shutdown()
        self._trace_state(old, new, "shutdown")
        if self._task is not None and self._task is not _current_task():
            self._task.cancel()

    def suspend(self) -> None:
        """Stop replicating and idle in SUSPEND (closing the connection first)."""
        if self.protocol.state in (HAConnectionState.HANDSHAKE, HAConnectionState.TRANSFER):
            self.close_master("local: suspend", wait_ms=0)
        old, new = self.protocol.suspend()
        self._trace_state(old, new, "suspend")

    def resume(self) -> None:
        old, new = self.protocol.resume()
        self._trace_state(old, new, "resume")
        self._wakeup()

    def on_crash(self) -> None:
        self._reader = self._writer = None
        self._timers.clear()

    # -- the service loop --------------------------------------------------------------------
    async def _sleep(self, ms: float) -> None:
        """waitForRunning: a sleep that update_ha_master_address / resume cut short."""
        fut = asyncio.get_running_loop().create_future()
        self._wake = fut
        timer = self.node.call_later(ms, lambda: fut.done() or fut.set_result(None))
        try:
            await fut
        finally:
            timer.cancel()
            self._wake = None

    def _wakeup(self) -> None:
        if self._wake is not None and not self._wake.done():
            self._wake.set_result(None)

    async def run(self) -> None:
        while self.protocol.state is not HAConnectionState.SHUTDOWN:
            state = self.protocol.state
            if state is HAConnectionState.READY:
                truncate_offset = self.ha_service.truncate_invalid_msg()
                if truncate_offset >= 0:
                    self.epoch_cache.truncate_suffix_by_offset(truncate_offset)
                if not await self.connect_master():
                    if self.master_ha_address is not None:
                        log.warning("AutoSwitchHAClient connect to master %s failed", self.master_ha_address)
                    await self._sleep(RETRY_WAIT_MS)
                continue
            if state is HAConnectionState.SUSPEND:
                await self._sleep(RETRY_WAIT_MS)
                continue
            await self._serve_connection()
            if self.protocol.state is HAConnectionState.READY and self._wait_after_close_ms:
                await self._sleep(self._wait_after_close_ms)

    async def connect_master(self) -> bool:
        addr = self.master_ha_address
        if not addr:
            return False
        try:
            host, port = string_to_address(addr)
            reader, writer = await self.node.connect(host, port, timeout_ms=CONNECT_TIMEOUT_MS)
        except (ConnectionError, TimeoutError, OSError, ValueError) as e:
            log.info("AutoSwitchHAClient: connect to master %s: %s", addr, e)
            return False
        if self.protocol.state is not HAConnectionState.READY:
            writer.close()
            return False
        self._reader, self._writer = reader, writer
        self._close_reason = None
        self._wait_after_close_ms = RETRY_WAIT_MS
        log.info("AutoSwitchHAClient connect to master %s", addr)
        old, new = self.protocol.connected(self.node.now_ms(), self.store.get_max_phy_offset())
        self._trace_state(old, new, f"connected to {addr}")
        return True

    def close_master(self, reason: str, wait_ms: float = RETRY_WAIT_MS) -> None:
        """closeMaster (wait_ms=0) or closeMasterAndWait."""
        if self.protocol.state not in (HAConnectionState.HANDSHAKE, HAConnectionState.TRANSFER) \
                or self._close_reason is not None:
            return
        self._close_reason = reason
        self._wait_after_close_ms = wait_ms
        for timer in self._timers.values():
            timer.cancel()
        self._timers.clear()
        if not self.ha_service.crashed:
            log.info("AutoSwitchHAClient close connection with master %s: %s", self.master_ha_address, reason)
            self.node.trace("net.close", peer=self.master_ha_address or "?", reason=reason)
        try:
            if self._writer is not None:
                self._writer.close()
        except (ConnectionError, OSError):
            pass
        self._reader = self._writer = None
        old, new = self.protocol.closed()
        self._trace_state(old, new, reason)

    async def _serve_connection(self) -> None:
        reader, peer = self._reader, self.master_ha_address or "?"
        self._send_handshake()
        self._arm("report", self.config.haSendHeartbeatInterval, self.protocol.last_write_timestamp,
                  self._on_report_timer)
        self._arm("housekeeping", self.config.haHousekeepingInterval, self.protocol.last_read_timestamp,
                  self._on_housekeeping_timer)
        reason, wait_ms = "remote", RETRY_WAIT_MS
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
                    log.error("AutoSwitchHAClient, processReadResult error: %s", e)
                    reason = str(e)
                    break
                except _Refused as e:
                    log.error("AutoSwitchHAClient truncate log failed in handshake state: %s", e)
                    reason, wait_ms = str(e), TRUNCATE_FAIL_WAIT_MS + RETRY_WAIT_MS
                    break
                if self._writer is not None:
                    await self._writer.drain()
        except (ConnectionError, OSError) as e:
            reason = f"reset: {e}" if str(e) else "reset"
        except asyncio.CancelledError:
            reason = "local"
            raise
        finally:
            self.close_master(reason, wait_ms)

    def _dispatch_read_request(self, peer: str) -> None:
        store, node = self.store, self.node
        while (frame := self.protocol.next_frame()) is not None:
            if isinstance(frame, MasterHandshake):
                node.trace("frame.recv", proto="ha", peer=peer, size=frame.wire_size, name="handshake",
                           offset=frame.max_phy_offset, epoch=frame.last_epoch, entries=len(frame.entries))
                self._handshake(frame)
                continue
            node.trace("frame.recv", proto="ha", peer=peer, size=frame.wire_size, name=frame.name,
                       offset=frame.offset, body_size=len(frame.body), epoch=frame.epoch,
                       epoch_start_offset=frame.epoch_start_offset, confirm_offset=frame.confirm_offset)
            new_epoch = self.protocol.check_transfer(frame, store.get_max_phy_offset())
            if new_epoch is not None:
                self.ha_service.append_epoch_entry(new_epoch)  # a rejection (not newer) is ignored
            if frame.body:
                if not store.append_to_commit_log(frame.offset, frame.body):
                    raise HAProtocolError(f"append of {len(frame.body)} bytes at offset {frame.offset} failed")
                node.trace("offset", which="written", value=store.get_max_phy_offset())
            self.ha_service.set_confirm_offset(
                self.protocol.slave_confirm_offset(frame.confirm_offset, store.get_max_phy_offset()))
            self._report_max_offset()

    def _handshake(self, frame: MasterHandshake) -> None:
        """doTruncate and its effects on the store and the epoch file (reference §2.4)."""
        store = self.store
        decision = do_truncate(self.epoch_cache.get_all_entries(), store.get_max_phy_offset(), frame.entries,
                               frame.max_phy_offset)
        self.last_truncate_decision = decision
        self.node.trace("log", level="INFO" if decision.ok else "ERROR", message=f"doTruncate: {decision.reason}",
                        logger="rmqlab.ha")
        if not decision.ok:
            raise _Refused(decision.reason)
        if decision.truncate_offset is not None:
            if not self.ha_service.truncate_files(decision.truncate_offset):
                raise _Refused(f"cannot truncate the commitlog to {decision.truncate_offset}: no message starts there")
            self.epoch_cache.truncate_suffix_by_offset(decision.truncate_offset)
            self.node.trace("offset", which="written", value=store.get_max_phy_offset())
        old, new = self.protocol.truncated(decision)
        self._trace_state(old, new, decision.reason)
        timer = self._timers.pop("handshake", None)
        if timer is not None:
            timer.cancel()
        self._report_max_offset()

    # -- frames out, timers ------------------------------------------------------------------
    def _send_handshake(self) -> None:
        if self._writer is None or self.protocol.state is not HAConnectionState.HANDSHAKE:
            return
        cfg = self.config
        frame = self.protocol.handshake(cfg.syncFromLastFile, cfg.asyncLearner, self.broker_id, self.node.now_ms())
        self._writer.write(frame)
        self.node.trace("frame.send", proto="ha", peer=self.master_ha_address or "?", size=SLAVE_HANDSHAKE_SIZE,
                        name="handshake", slave_broker_id=self.broker_id, is_sync_from_last_file=cfg.syncFromLastFile,
                        is_async_learner=cfg.asyncLearner)
        self._timers["handshake"] = self.node.call_later(HANDSHAKE_RESEND_MS, self._on_handshake_timer)

    def _on_handshake_timer(self) -> None:
        self._timers.pop("handshake", None)
        if self._close_reason is None:
            self._send_handshake()

    def _send_ack(self, frame: bytes) -> None:
        self._writer.write(frame)
        self.node.trace("frame.send", proto="ha", peer=self.master_ha_address or "?", size=SLAVE_TRANSFER_SIZE,
                        name="ack", offset=self.protocol.current_reported_offset)

    def _report_max_offset(self) -> None:
        frame = self.protocol.report_plus(self.store.get_max_phy_offset(), self.node.now_ms())
        if frame is not None:
            self._send_ack(frame)

    def _arm(self, name: str, interval: int, since: int, callback) -> None:
        delay = max(0, since + interval + 1 - self.node.now_ms())
        self._timers[name] = self.node.call_later(delay, callback)

    def _on_report_timer(self) -> None:
        self._timers.pop("report", None)
        if self._close_reason is not None or self._writer is None:
            return
        now = self.node.now_ms()
        # Only in TRANSFER: while handshaking the slave sends handshakes, not acks.
        if self.protocol.state is HAConnectionState.TRANSFER and \
                self.protocol.is_time_to_report(now, self.config.haSendHeartbeatInterval):
            log.info("Slave report current offset %d", self.protocol.current_reported_offset)
            self._send_ack(self.protocol.report(now))
        transfer = self.protocol.state is HAConnectionState.TRANSFER
        since = self.protocol.last_write_timestamp if transfer else now
        self._arm("report", self.config.haSendHeartbeatInterval, since, self._on_report_timer)

    def _on_housekeeping_timer(self) -> None:
        self._timers.pop("housekeeping", None)
        if self._close_reason is not None:
            return
        now = self.node.now_ms()
        # Deviation: RocketMQ checks housekeeping after TRANSFER iterations only; here a handshake
        # that is never answered is given up after haHousekeepingInterval too.
        if self.protocol.housekeeping_expired(now, self.config.haHousekeepingInterval):
            idle = now - self.protocol.last_read_timestamp
            log.warning("AutoSwitchHAClient, housekeeping, found this connection[%s] expired, %d",
                        self.master_ha_address, idle)
            self.close_master(f"housekeeping: nothing read for {idle} ms", wait_ms=0)
        else:
            self._arm("housekeeping", self.config.haHousekeepingInterval, self.protocol.last_read_timestamp,
                      self._on_housekeeping_timer)

    def _trace_state(self, old: HAConnectionState | None, new: HAConnectionState, reason: str) -> None:
        if not self.ha_service.crashed:
            self.node.trace("state", machine=MACHINE, from_=old.name if old else None, to=new.name, reason=reason)
