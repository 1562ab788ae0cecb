"""HAClient: what the slave's end of HA does in both HA modes.

Mirrors org.apache.rocketmq.store.ha.HAClient, the interface DefaultHAClient and AutoSwitchHAClient
implement, one task on the slave's Node:

* READY: with the master's HA address known, connect (5 s timeout, RemotingHelper.connect); else, or
  on failure, wait 5 s and try again.
* connected (the mode's CONNECTED_STATES): read what the master sends, let the mode dispatch it
  (_dispatch_read_request), and report the local max offset whenever the log grew and every
  haSendHeartbeatInterval. A protocol error or a lost connection closes the connection and waits
  (closeMasterAndWait); nothing read for haHousekeepingInterval closes it and reconnects at once.
* SUSPEND (controller mode only): idle.

Traced as frame.send (the reports), net.close, and `state` events of machine MACHINE; each mode
traces what it reads.
"""

from __future__ import annotations

import abc

import asyncio
import logging
from typing import Any

from rmqlab.ha.flow_monitor import FlowMonitor
from rmqlab.ha.ha_connection import current_task, reset_reason
from rmqlab.ha.ha_connection_state import HAConnectionState
from rmqlab.ha.ha_protocol import HAProtocolError
from rmqlab.remoting.remoting_helper import string_to_address

log = logging.getLogger("rmqlab.ha")

CONNECT_TIMEOUT_MS = 5000  # RemotingHelper.connect(remote)
RETRY_WAIT_MS = 5000       # waitForRunning(1000 * 5) after a failed connect or a closed connection
READ_SIZE = 4 * 1024 * 1024


class HAClient(abc.ABC):
    """The slave's end: `protocol` is the mode's ClientProtocol (a ReportingClientProtocol)."""

    MACHINE = "HAClient"        # the `state` events' machine and the task's name
    LOG_NAME = "HAClient"       # how the log lines name this client
    REPORT_FRAME = "report"     # the report frame's name in frame.send
    CONNECTED_STATES: tuple[HAConnectionState, ...] = (HAConnectionState.TRANSFER,)
    # DefaultHAClient tries any address it was given (a malformed one fails to connect, logged);
    # AutoSwitchHAClient takes an empty one for none (StringUtils.isNotEmpty).
    EMPTY_ADDRESS_IS_NONE = False

    def __init__(self, ha_service: Any, protocol: Any):
        self.ha_service = ha_service
        self.node = ha_service.node
        self.store = ha_service.store
        self.config = ha_service.config
        self.protocol = protocol
        self.flow_monitor = FlowMonitor(self.config, self.node.now_ms)
        self.master_ha_address: str | None = None
        self._reader: asyncio.StreamReader | None = None
        self._writer: Any = None
        self._task: asyncio.Task | None = None
        self._timers: dict[str, Any] = {}  # report, housekeeping (and the mode's own) Node timers
        self._close_reason: str | None = None
        self._wait_after_close_ms: float = RETRY_WAIT_MS

    # -- what the service and the broker use -------------------------------------------------
    @property
    def current_state(self) -> HAConnectionState:
        return self.protocol.state

    def update_ha_master_address(self, new_addr: str | None) -> None:
        """Takes effect at the next connect (which a mode's _wakeup hastens, RocketMQ's wakeup in
        AutoSwitchHAClient); a live connection keeps its master (as in RocketMQ)."""
        if new_addr != self.master_ha_address:
            log.info("update master ha address, OLD: %s NEW: %s", self.master_ha_address, new_addr)
            self.master_ha_address = new_addr
            self._wakeup()

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
        self._task = self.node.spawn(self.run(), name=self.MACHINE)

    def shutdown(self) -> None:
        if self.protocol.state is HAConnectionState.SHUTDOWN:
            return
        if self.protocol.state in self.CONNECTED_STATES:
            self._close_master("local: shutdown", 0)
        old, new = self.protocol.shutdown()
        self._trace_state(old, new, "shutdown")
        if self._task is not None and self._task is not current_task():
            self._task.cancel()

    def on_crash(self) -> None:
        """Process crash: the node already cancelled the task and its timers; forget the socket."""
        self._reader = self._writer = None
        self._timers.clear()

    # -- the service loop --------------------------------------------------------------------
    async def _sleep(self, ms: float) -> None:
        """waitForRunning (a mode may let something cut it short, with _wakeup)."""
        await self.node.sleep(ms)

    def _wakeup(self) -> None:
        pass

    def _on_ready(self) -> None:
        """What a mode does in READY before each connect."""

    def _on_connected(self) -> None:
        """What a mode sends first on a new connection."""

    async def run(self) -> None:
        while self.protocol.state is not HAConnectionState.SHUTDOWN:
            state = self.protocol.state
            if state is HAConnectionState.READY:
                self._on_ready()
                if not await self.connect_master():
                    # Nothing to report before the master's address is known (the slave learns it
                    # from its name server registration); RocketMQ's connectMaster is silent then too.
                    if self.master_ha_address is not None:
                        log.warning("%s connect to master %s failed", self.LOG_NAME, self.master_ha_address)
                    await self._sleep(RETRY_WAIT_MS)
                continue
            if state is HAConnectionState.SUSPEND:
                await self._sleep(RETRY_WAIT_MS)
                continue
            await self._serve_connection()
            if self.protocol.state is HAConnectionState.READY and self._wait_after_close_ms:
                await self._sleep(self._wait_after_close_ms)  # closeMasterAndWait

    async def connect_master(self) -> bool:
        addr = self.master_ha_address
        if addr is None or (self.EMPTY_ADDRESS_IS_NONE and not addr):
            return False
        try:
            host, port = string_to_address(addr)
            reader, writer = await self.node.connect(host, port, timeout_ms=CONNECT_TIMEOUT_MS)
        except (ConnectionError, TimeoutError, OSError, ValueError) as e:
            log.info("%s: connect to master %s: %s", self.LOG_NAME, addr, e)
            return False
        if self.protocol.state is not HAConnectionState.READY:  # shut down meanwhile
            writer.close()
            return False
        self._reader, self._writer = reader, writer
        self._close_reason = None
        self._wait_after_close_ms = RETRY_WAIT_MS
        log.info("%s connect to master %s", self.LOG_NAME, addr)
        old, new = self.protocol.connected(self.node.now_ms(), self.store.get_max_phy_offset())
        self._trace_state(old, new, f"connected to {addr}")
        return True

    def _close_master(self, reason: str, wait_ms: float) -> None:
        """closeMaster (wait_ms=0) or the close half of closeMasterAndWait."""
        if self.protocol.state not in self.CONNECTED_STATES or self._close_reason is not None:
            return
        self._close_reason = reason
        self._wait_after_close_ms = wait_ms
        for timer in self._timers.values():
            timer.cancel()
        self._timers.clear()
        if not self.ha_service.crashed:
            log.info("%s close connection with master %s: %s", self.LOG_NAME, self.master_ha_address, reason)
            self.node.trace("net.close", peer=self.master_ha_address or "?", reason=reason)
        try:
            if self._writer is not None:  # None after a crash: the network already closed it
                self._writer.close()      # the read in _serve_connection then sees EOF
        except (ConnectionError, OSError):
            pass
        self._reader = self._writer = None
        old, new = self.protocol.closed()
        self._trace_state(old, new, reason)

    async def _serve_connection(self) -> None:
        reader, peer = self._reader, self.master_ha_address or "?"
        self._on_connected()
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
                    reason = reset_reason(e)
                    break
                if not data or self._close_reason is not None:
                    break
                self.flow_monitor.add_byte_count_transferred(len(data))
                self.protocol.feed(data, self.node.now_ms())
                try:
                    self._dispatch_read_request(peer)
                except HAProtocolError as e:
                    reason, wait_ms = self._on_dispatch_error(e)
                    break
                if self._writer is not None:
                    await self._writer.drain()
        except (ConnectionError, OSError) as e:
            reason = reset_reason(e)
        except asyncio.CancelledError:
            reason = "local"
            raise
        finally:
            self._close_master(reason, wait_ms)

    # -- what each mode does with what it reads ----------------------------------------------
    @abc.abstractmethod
    def _dispatch_read_request(self, peer: str) -> None:
        """Apply every complete frame read; HAProtocolError closes the connection."""

    @abc.abstractmethod
    def _on_dispatch_error(self, e: HAProtocolError) -> tuple[str, float]:
        """Log a dispatch failure; returns the close reason and the wait before reconnecting."""

    def _append(self, offset: int, body: bytes) -> None:
        """Append a batch to the local commitlog; it must continue the log."""
        if not self.store.append_to_commit_log(offset, body):
            raise HAProtocolError(f"append of {len(body)} bytes at offset {offset} failed")
        self.node.trace("offset", which="written", value=self.store.get_max_phy_offset())

    # -- reports and housekeeping (Node timers) ---------------------------------------------
    def _send_report(self, frame: bytes) -> None:
        self._writer.write(frame)
        self.node.trace("frame.send", proto="ha", peer=self.master_ha_address or "?", size=len(frame),
                        name=self.REPORT_FRAME, offset=self.protocol.current_reported_offset, hex=frame.hex())

    def _report_max_offset(self) -> None:
        """reportSlaveMaxOffsetPlus: report when the local log grew."""
        frame = self.protocol.report_plus(self.store.get_max_phy_offset(), self.node.now_ms())
        if frame is not None:
            self._send_report(frame)

    def _send_periodic_report(self, now: int) -> None:
        self._send_report(self.protocol.report(now))

    def _arm(self, name: str, interval: int, since: int, callback) -> None:
        delay = max(0, since + interval + 1 - self.node.now_ms())
        self._timers[name] = self.node.call_later(delay, callback)

    def _on_report_timer(self) -> None:
        self._timers.pop("report", None)
        if self._close_reason is not None or self._writer is None:
            return
        now = self.node.now_ms()
        # Only in TRANSFER: a controller-mode slave still handshaking sends handshakes, not acks.
        transfer = self.protocol.state is HAConnectionState.TRANSFER
        if transfer and self.protocol.is_time_to_report(now, self.config.haSendHeartbeatInterval):
            self._send_periodic_report(now)
        since = self.protocol.last_write_timestamp if transfer else now
        self._arm("report", self.config.haSendHeartbeatInterval, since, self._on_report_timer)

    def _on_housekeeping_timer(self) -> None:
        self._timers.pop("housekeeping", None)
        if self._close_reason is not None:
            return
        now = self.node.now_ms()
        # Deviation (controller mode): RocketMQ checks housekeeping after TRANSFER iterations only;
        # here a handshake that is never answered is given up after haHousekeepingInterval too.
        if self.protocol.housekeeping_expired(now, self.config.haHousekeepingInterval):
            idle = now - self.protocol.last_read_timestamp
            log.warning("%s, housekeeping, found this connection[%s] expired, %d", self.LOG_NAME,
                        self.master_ha_address, idle)
            self._close_master(f"housekeeping: nothing read for {idle} ms", 0)
        else:
            self._arm("housekeeping", self.config.haHousekeepingInterval, self.protocol.last_read_timestamp,
                      self._on_housekeeping_timer)

    def _trace_state(self, old: HAConnectionState | None, new: HAConnectionState, reason: str) -> None:
        if not self.ha_service.crashed:
            self.node.trace("state", machine=self.MACHINE, from_=old.name if old else None, to=new.name, reason=reason)
