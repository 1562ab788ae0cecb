"""DefaultHAConnection: the master's end of one slave's HA connection.

Mirrors org.apache.rocketmq.store.ha.DefaultHAConnection and its two threads, here two tasks on
the master's Node:

* ReadSocketService (HAConnection's, rmqlab.ha.ha_connection) reads the slave's 8-byte reports (ConnectionProtocol decodes them): the first
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

from rmqlab.ha.default_ha_protocol import REPORT_HEADER_SIZE, ConnectionProtocol, encode_report
from rmqlab.ha.ha_connection import IDLE_WAIT_MS, READ_MAX_BUFFER_SIZE, HAConnection, ReadSocketService
from rmqlab.ha.ha_protocol import HEX_BODY_PREVIEW

if TYPE_CHECKING:
    from rmqlab.ha.default_ha_service import DefaultHAService

log = logging.getLogger("rmqlab.ha")

MACHINE = "DefaultHAConnection"

__all__ = ["DefaultHAConnection", "ReadSocketService", "WriteSocketService", "MACHINE", "READ_MAX_BUFFER_SIZE",
           "IDLE_WAIT_MS"]


class DefaultHAConnection(HAConnection):
    MACHINE = MACHINE

    def __init__(self, ha_service: DefaultHAService, reader: asyncio.StreamReader, writer: Any):
        super().__init__(ha_service, reader, writer, ConnectionProtocol())
        self.write_socket_service = WriteSocketService(self)
        self.first_report = asyncio.Event()

    def __repr__(self) -> str:
        return (f"DefaultHAConnection({self.client_address}, {self.current_state.name}, "
                f"ack={self.slave_ack_offset}, next={self.protocol.next_transfer_from_where})")

    def process_read(self, data: bytes) -> None:
        """The slave's 8-byte reports: the first is its request, each its ack."""
        ha = self.ha_service
        reports = self.protocol.feed_reports(data, ha.store.get_max_phy_offset(),
                                             reject_impossible=ha.config.rmqlabRejectImpossibleHaReport)
        for offset in reports:
            self.node.trace("frame.recv", proto="ha", peer=self.client_address, size=REPORT_HEADER_SIZE,
                            name="report", offset=offset, hex=encode_report(offset).hex())
        if reports:
            # WriteSocketService waits while slaveRequestOffset == -1 (a report of -1 is no request).
            if not self.first_report.is_set() and self.slave_request_offset != -1:
                log.info("slave[%s] request offset %d", self.client_address, self.slave_request_offset)
                self.first_report.set()
            ha.notify_transfer_some(self.slave_ack_offset)

    async def _write_loop(self) -> str:
        return await self.write_socket_service.run()


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
                        name=name, offset=offset, body_size=len(body), hex=(header + body[:HEX_BODY_PREVIEW]).hex())

    async def run(self) -> str:
        """The loop; returns why it stopped (the connection's write task then closes it)."""
        conn, ha = self.conn, self.conn.ha_service
        cfg, store = ha.config, ha.store
        while conn.close_reason is None:
            if not conn.first_report.is_set():
                await conn.first_report.wait()  # RocketMQ polls every 10 ms; the read side sets it
                continue
            if conn.protocol.next_transfer_from_where < 0:
                start = conn.protocol.transfer_start(store.get_max_phy_offset(), cfg.mappedFileSizeCommitLog)
                log.info("master transfer data from %d to slave[%s], and slave request %d",
                         start, conn.client_address, conn.slave_request_offset)
            if conn.writer.is_closing():
                return "reset"
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
        return "local"
