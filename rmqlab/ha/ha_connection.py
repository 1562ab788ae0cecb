"""HAConnection: what the master's end of a slave's HA connection does in both HA modes.

Mirrors org.apache.rocketmq.store.ha.HAConnection, the interface DefaultHAConnection and
AutoSwitchHAConnection implement, and the two threads each runs, here two tasks on the master's
Node:

* ReadSocketService reads what the slave sends and hands it to the connection (process_read);
  nothing read for haHousekeepingInterval closes the connection.
* the write side (each mode's WriteSocketService) streams the commitlog; whichever way its loop
  ends, the connection closes.

Either side ending ends the connection: state SHUTDOWN, the socket closed, removed from the
service. Frames and state changes are traced by each mode; here the `state` events of machine
MACHINE and net.close with the reason.
"""

from __future__ import annotations

import abc

import asyncio
import logging
from typing import Any

from rmqlab.ha.flow_monitor import FlowMonitor
from rmqlab.ha.ha_connection_state import HAConnectionState
from rmqlab.ha.ha_protocol import HAProtocolError
from rmqlab.remoting.remoting_helper import peer_address

log = logging.getLogger("rmqlab.ha")

READ_MAX_BUFFER_SIZE = 1024 * 1024  # ReadSocketService.READ_MAX_BUFFER_SIZE
IDLE_WAIT_MS = 100                  # allWaitForRunning(100) with nothing to send


def reset_reason(e: BaseException) -> str:
    """The close reason for a socket error."""
    return f"reset: {e}" if str(e) else "reset"


def current_task() -> asyncio.Task | None:
    """The running task, None when called from outside the loop (e.g. a synchronous role change)."""
    try:
        return asyncio.current_task()
    except RuntimeError:
        return None


class HAConnection(abc.ABC):
    """The master's end of one slave: `protocol` is the mode's ConnectionProtocol; subclasses
    decode what the slave sends (process_read) and write the stream (_write_loop)."""

    MACHINE = "HAConnection"  # the `state` events' machine

    def __init__(self, ha_service: Any, reader: asyncio.StreamReader, writer: Any, protocol: Any):
        self.ha_service = ha_service
        self.node = ha_service.node
        self.reader = reader
        self.writer = writer
        self.client_address = peer_address(writer.get_extra_info("peername"))
        self.protocol = protocol
        self.flow_monitor = FlowMonitor(ha_service.config, self.node.now_ms)
        self.read_socket_service = ReadSocketService(self)
        self.close_reason: str | None = None
        self._read_task: asyncio.Task | None = None
        self._write_task: asyncio.Task | None = None
        ha_service.connection_count += 1

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
        """Serve the connection: the accept handler's task becomes the ReadSocketService, a second
        task writes."""
        self._trace_state(None, self.protocol.state, "accepted")
        self._read_task = asyncio.current_task()
        self._write_task = self.node.spawn(self._serve_write(), name=f"ha-write {self.client_address}")
        await self.read_socket_service.run()

    def shutdown(self) -> None:
        """HAConnection.shutdown (the service destroys its connections)."""
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
            self._log_closed(reason)
        try:
            self.writer.close()
        except (ConnectionError, OSError):
            pass  # already gone
        current = current_task()
        for task in (self._read_task, self._write_task):
            if task is not None and task is not current and not task.done():
                task.cancel()
        ha.wait_notify_object.remove_from_waiting_thread_table(self)
        ha.remove_connection(self)
        ha.connection_count -= 1

    def _log_closed(self, reason: str) -> None:
        log.info("%s: HA connection with slave %s closed: %s", self.node.name, self.client_address, reason)

    def _trace_state(self, old: HAConnectionState | None, new: HAConnectionState, reason: str) -> None:
        self.node.trace("state", machine=self.MACHINE, from_=old.name if old else None, to=new.name, reason=reason,
                        peer=self.client_address)

    # -- what each mode does -----------------------------------------------------------------
    @abc.abstractmethod
    def process_read(self, data: bytes) -> None:
        """Decode and act on bytes the slave sent; HAProtocolError closes the connection."""

    @abc.abstractmethod
    async def _write_loop(self) -> str:
        """Write until the connection is closed or the socket is; returns the close reason."""

    async def _serve_write(self) -> None:
        """WriteSocketService.run: the loop, then the close, whichever way the loop ended."""
        reason = "local"
        try:
            reason = await self._write_loop()
        except (ConnectionError, OSError) as e:
            reason = reset_reason(e)
        except asyncio.CancelledError:
            reason = "local"
            raise
        finally:
            self.close(reason)


class ReadSocketService:
    """HAConnection.ReadSocketService: read what the slave sends, and housekeeping."""

    def __init__(self, conn: HAConnection):
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
        conn = self.conn
        reason = "remote"
        self._arm_housekeeping()
        try:
            while conn.close_reason is None:
                try:
                    data = await conn.reader.read(READ_MAX_BUFFER_SIZE)
                except (ConnectionError, OSError) as e:
                    reason = reset_reason(e)
                    break
                if not data:
                    break  # EOF: the slave closed
                self.last_read_timestamp = self.node.now_ms()
                try:
                    conn.process_read(data)
                except HAProtocolError as e:
                    log.warning("%s: closing the HA connection with %s: %s", self.node.name, conn.client_address, e)
                    reason = str(e)
                    break
        except asyncio.CancelledError:
            reason = "local"
            raise
        finally:
            conn.close(reason)
