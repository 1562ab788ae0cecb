"""DefaultHAConnection: the master's end of one slave's HA connection (reference §3, seed 004).

Mirrors org.apache.rocketmq.store.ha.DefaultHAConnection and its two threads, here two tasks on
the master's Node:

* ReadSocketService reads the slave's 8-byte reports (ConnectionProtocol decodes them): the first
  one is the slave's request offset, every one its ack offset; each ack may complete waiting
  SYNC_MASTER puts (DefaultHAService.notify_transfer_some). Nothing read for
  haHousekeepingInterval closes the connection.
* WriteSocketService waits for the request, fixes the start offset (ConnectionProtocol), then
  streams the commitlog: batches of at most haTransferBatchSize that never cross a file
  (CommitLog.get_data), a heartbeat after haSendHeartbeatInterval without a write, and with
  nothing to send a wait of up to 100 ms that a SYNC_MASTER put cuts short (WaitNotifyObject).

Either side ending ends the connection: state SHUTDOWN, the socket closed, removed from the
service. Frames are traced as frame.send / frame.recv with proto "ha", the state changes as
`state` events of machine "DefaultHAConnection", the close as net.close with its reason.
"""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING, Any

from rmqlab.ha.default_ha_protocol import REPORT_HEADER_SIZE, ConnectionProtocol, HAProtocolError
from rmqlab.ha.flow_monitor import FlowMonitor
from rmqlab.ha.ha_connection_state import HAConnectionState
from rmqlab.remoting.remoting_helper import peer_address

if TYPE_CHECKING:
    from rmqlab.ha.default_ha_service import DefaultHAService

log = logging.getLogger("rmqlab.ha")

MACHINE = "DefaultHAConnection"
READ_MAX_BUFFER_SIZE = 1024 * 1024  # ReadSocketService.READ_MAX_BUFFER_SIZE
IDLE_WAIT_MS = 100                  # allWaitForRunning(100) with nothing to send


class DefaultHAConnection:
    def __init__(self, ha_service: "DefaultHAService", reader: asyncio.StreamReader, writer: Any):
        self.ha_service = ha_service
        self.node = ha_service.node
        self.reader = reader
        self.writer = writer
        self.client_address = peer_address(writer.get_extra_info("peername"))
        self.protocol = ConnectionProtocol()
        self.flow_monitor = FlowMonitor(ha_service.config, self.node.now_ms)
        self.read_socket_service = ReadSocketService(self)
        self.write_socket_service = WriteSocketService(self)
        self.first_report = asyncio.Event()
        self.close_reason: str | None = None
        self._write_task: asyncio.Task | None = None
        self._read_task: asyncio.Task | None = None
        ha_service.connection_count += 1

    def __repr__(self) -> str:
        return (f"DefaultHAConnection({self.client_address}, {self.current_state.name}, "
                f"ack={self.slave_ack_offset}, next={self.protocol.next_transfer_from_where})")

    # -- what the service and GroupTransferService read -------------------------------------
    @property
    def current_state(self) -> HAConnectionState:
        return self.protocol.state

    @property
    def slave_ack_offset(self) -> int:
        return self.protocol.slave_ack_offset

    @property
    def slave_request_offset(self) -> int:
        return self.protocol.slave_request_offset

    def get_transfer_from_where(self) -> int:
        return self.protocol.next_transfer_from_where

    def get_transferred_byte_in_second(self) -> int:
        return self.flow_monitor.get_transferred_byte_in_second()

    # -- lifecycle ---------------------------------------------------------------------------
    async def run(self) -> None:
        """Serve the connection: the accept handler's task becomes the ReadSocketService."""
        self._trace_state(None, HAConnectionState.TRANSFER, "accepted")
        self._read_task = asyncio.current_task()
        self._write_task = self.node.spawn(self.write_socket_service.run(), name=f"ha-write {self.client_address}")
        await self.read_socket_service.run()

    def shutdown(self) -> None:
        """DefaultHAConnection.shutdown (the service destroys its connections)."""
        self.close("local: shutdown", event="shutdown")

    def close(self, reason: str, event: str = "closed") -> None:
        """End the connection once, from whichever side noticed first."""
        if self.close_reason is not None:
            return
        self.close_reason = reason
        old, new = self.protocol.closed(event)
        self.read_socket_service.stop()
        ha = self.ha_service
        if not ha.crashed:  # a crashed process observes nothing
            self._trace_state(old, new, reason)
            self.node.trace("net.close", peer=self.client_address, reason=reason)
            log.info("%s: HA connection with slave %s closed: %s", self.node.name, self.client_address, reason)
        try:
            self.writer.close()
        except (ConnectionError, OSError):
            pass  # already gone
        current = asyncio.current_task()
        for task in (self._read_task, self._write_task):
            if task is not None and task is not current and not task.done():
                task.cancel()
        ha.wait_notify_object.remove_from_waiting_thread_table(self)
        ha.remove_connection(self)
        ha.connection_count -= 1

    def _trace_state(self, old: HAConnectionState | None, new: HAConnectionState, reason: str) -> None:
        self.node.trace("state", machine=MACHINE, from_=old.name if old else None, to=new.name, reason=reason,
                        peer=self.client_address)


class ReadSocketService:
    """DefaultHAConnection.ReadSocketService: the slave's reports, and housekeeping."""

    def __init__(self, conn: DefaultHAConnection):
        self.conn = conn
        self.node = conn.node
        self.last_read_timestamp = self.node.now_ms()
        self._housekeeping = None

    def stop(self) -> None:
        if self._housekeeping is not None:
            self._housekeeping.cancel()
            self._housekeeping = None

    def _arm_housekeeping(self) -> None:
        interval = self.conn.ha_service.config.haHousekeepingInterval
        delay = max(0, self.last_read_timestamp + interval + 1 - self.node.now_ms())
        self._housekeeping = self.node.call_later(delay, self._check_housekeeping)

    def _check_housekeeping(self) -> None:
        self._housekeeping = None
        if self.conn.close_reason is not None:
            return
        interval = self.conn.ha_service.config.haHousekeepingInterval
        idle = self.node.now_ms() - self.last_read_timestamp
        if idle > interval:
            log.warning("ha housekeeping, found this connection[%s] expired, %d", self.conn.client_address, idle)
            self.conn.close(f"housekeeping: nothing read for {idle} ms")
        else:
            self._arm_housekeeping()

    async def run(self) -> None:
        conn, ha = self.conn, self.conn.ha_service
        reason = "remote"
        self._arm_housekeeping()
        try:
            while conn.close_reason is None:
                try:
                    data = await conn.reader.read(READ_MAX_BUFFER_SIZE)
                except (ConnectionError, OSError) as e:
                    reason = f"reset: {e}" if str(e) else "reset"
                    break
                if not data:
                    break  # EOF: the slave closed
                self.last_read_timestamp = self.node.now_ms()
                try:
                    reports = conn.protocol.feed_reports(data, ha.store.get_max_phy_offset())
                except HAProtocolError as e:
                    log.warning("%s: closing the HA connection with %s: %s", self.node.name, conn.client_address, e)
                    reason = str(e)
                    break
                for offset in reports:
                    self.node.trace("frame.recv", proto="ha", peer=conn.client_address, size=REPORT_HEADER_SIZE,
                                    name="report", offset=offset)
                if reports:
                    if not conn.first_report.is_set():
                        log.info("slave[%s] request offset %d", conn.client_address, conn.slave_request_offset)
                        conn.first_report.set()
                    ha.notify_transfer_some(conn.slave_ack_offset)
        except asyncio.CancelledError:
            reason = "local"
            raise
        finally:
            conn.close(reason)


class WriteSocketService:
    """DefaultHAConnection.WriteSocketService: commitlog batches and heartbeats to the slave."""

    def __init__(self, conn: DefaultHAConnection):
        self.conn = conn
        self.node = conn.node
        self.last_write_timestamp = self.node.now_ms()

    def _send(self, header: bytes, body: bytes, name: str, offset: int) -> None:
        conn = self.conn
        conn.writer.write(header + body if body else header)
        self.last_write_timestamp = self.node.now_ms()
        # Quirk kept from RocketMQ's transferData: only header bytes are counted by the flow
        # monitor, so maxHaTransferByteInSecond barely limits anything.
        conn.flow_monitor.add_byte_count_transferred(len(header))
        self.node.trace("frame.send", proto="ha", peer=conn.client_address, size=len(header) + len(body),
                        name=name, offset=offset, body_size=len(body))

    async def run(self) -> None:
        conn, ha = self.conn, self.conn.ha_service
        cfg, store = ha.config, ha.store
        reason = "local"
        try:
            while conn.close_reason is None:
                if not conn.first_report.is_set():
                    await conn.first_report.wait()  # RocketMQ polls every 10 ms; the read side sets it
                    continue
                if conn.protocol.next_transfer_from_where < 0:
                    start = conn.protocol.transfer_start(store.get_max_phy_offset(), cfg.mappedFileSizeCommitLog)
                    log.info("master transfer data from %d to slave[%s], and slave request %d",
                             start, conn.client_address, conn.slave_request_offset)
                if conn.writer.is_closing():
                    reason = "reset"
                    break
                if self.node.now_ms() - self.last_write_timestamp > cfg.haSendHeartbeatInterval:
                    next_offset = conn.protocol.next_transfer_from_where
                    self._send(conn.protocol.heartbeat(), b"", "heartbeat", next_offset)
                    await conn.writer.drain()
                data = store.commit_log.get_data(conn.protocol.next_transfer_from_where, cfg.haTransferBatchSize)
                if not data:
                    await ha.wait_notify_object.all_wait_for_running(conn, IDLE_WAIT_MS)
                    continue
                size = min(len(data), cfg.haTransferBatchSize, conn.flow_monitor.can_transfer_max_byte_num())
                if size <= 0:
                    # Deviation: RocketMQ would send empty batches in a tight loop until the
                    # flow-control window reopens; wait for the next window instead.
                    await self.node.sleep(conn.flow_monitor.ms_until_next_window())
                    continue
                offset, header = conn.protocol.batch(size)
                self._send(header, data[:size], "transfer", offset)
                await conn.writer.drain()
        except (ConnectionError, OSError) as e:
            reason = f"reset: {e}" if str(e) else "reset"
        except asyncio.CancelledError:
            reason = "local"
            raise
        finally:
            conn.close(reason)

