"""AutoSwitchHAClient: the slave's end of controller-mode HA.

Mirrors org.apache.rocketmq.store.ha.autoswitch.AutoSwitchHAClient, one task on the slave's Node;
the wire format and the decisions are in auto_switch_ha_protocol, the loop, connect, close, acks
and housekeeping are HAClient's (rmqlab.ha.ha_client):

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
from typing import TYPE_CHECKING

from rmqlab.ha.autoswitch.auto_switch_ha_protocol import (EPOCH_ENTRY_SIZE, MASTER_HANDSHAKE_HEADER_SIZE,
                                                          MASTER_TRANSFER_HEADER, SLAVE_HANDSHAKE_SIZE,
                                                          ClientProtocol, HAProtocolError, MasterHandshake,
                                                          do_truncate, encode_master_handshake)
from rmqlab.ha.ha_client import CONNECT_TIMEOUT_MS, READ_SIZE, RETRY_WAIT_MS, HAClient
from rmqlab.ha.ha_connection_state import HAConnectionState
from rmqlab.ha.ha_protocol import HEX_BODY_PREVIEW, HEX_EPOCH_ENTRIES, hex_preview
from rmqlab.ha.wait_notify_object import wait_at_most

if TYPE_CHECKING:
    from rmqlab.ha.autoswitch.auto_switch_ha_service import AutoSwitchHAService

log = logging.getLogger("rmqlab.ha")

MACHINE = "AutoSwitchHAClient"
TRUNCATE_FAIL_WAIT_MS = 2000  # waitForRunning(1000 * 2) after a failed doTruncate
HANDSHAKE_RESEND_MS = 5000    # selector.select(5000) between handshakes

__all__ = ["AutoSwitchHAClient", "MACHINE", "CONNECT_TIMEOUT_MS", "RETRY_WAIT_MS", "TRUNCATE_FAIL_WAIT_MS",
           "HANDSHAKE_RESEND_MS", "READ_SIZE"]


class _Refused(HAProtocolError):
    """The handshake failed (no consistent point, or the cut was impossible): close, wait, retry.
    (An HAProtocolError so that HAClient's read loop closes on it; _on_dispatch_error tells them apart.)"""


class AutoSwitchHAClient(HAClient):
    MACHINE = MACHINE
    LOG_NAME = MACHINE
    REPORT_FRAME = "ack"
    CONNECTED_STATES = (HAConnectionState.HANDSHAKE, HAConnectionState.TRANSFER)
    EMPTY_ADDRESS_IS_NONE = True

    def __init__(self, ha_service: AutoSwitchHAService, slave_id: int):
        super().__init__(ha_service, ClientProtocol(ha_service.node.now_ms()))
        self.epoch_cache = ha_service.epoch_cache
        self.broker_id = slave_id
        self.master_address: str | None = None
        self.last_truncate_decision = None  # the last doTruncate decision (for the labs)
        self._wake: asyncio.Future | None = None

    # -- what the service and the broker use (besides HAClient's) ---------------------------
    def update_master_address(self, new_addr: str | None) -> None:
        if new_addr != self.master_address:
            log.info("update master address, OLD: %s NEW: %s", self.master_address, new_addr)
            self.master_address = new_addr

    def get_master_address(self) -> str | None:
        return self.master_address

    def suspend(self) -> None:
        """Stop replicating and idle in SUSPEND (closing the connection first)."""
        if self.protocol.state in self.CONNECTED_STATES:
            self.close_master("local: suspend", wait_ms=0)
        old, new = self.protocol.suspend()
        self._trace_state(old, new, "suspend")

    def resume(self) -> None:
        old, new = self.protocol.resume()
        self._trace_state(old, new, "resume")
        self._wakeup()

    # -- the service loop --------------------------------------------------------------------
    async def _sleep(self, ms: float) -> None:
        """waitForRunning: a sleep that update_ha_master_address / resume cut short."""
        fut = asyncio.get_running_loop().create_future()
        self._wake = fut
        try:
            await wait_at_most(self.node, fut, ms)
        finally:
            self._wake = None

    def _wakeup(self) -> None:
        if self._wake is not None and not self._wake.done():
            self._wake.set_result(None)

    def _on_ready(self) -> None:
        truncate_offset = self.ha_service.truncate_invalid_msg()
        if truncate_offset >= 0:
            self.epoch_cache.truncate_suffix_by_offset(truncate_offset)

    def _on_connected(self) -> None:
        self._send_handshake()

    def close_master(self, reason: str, wait_ms: float = RETRY_WAIT_MS) -> None:
        """closeMaster (wait_ms=0) or closeMasterAndWait."""
        self._close_master(reason, wait_ms)

    def _on_dispatch_error(self, e: HAProtocolError) -> tuple[str, float]:
        if isinstance(e, _Refused):
            log.error("AutoSwitchHAClient truncate log failed in handshake state: %s", e)
            return str(e), TRUNCATE_FAIL_WAIT_MS + RETRY_WAIT_MS
        log.error("AutoSwitchHAClient, processReadResult error: %s", e)
        return str(e), RETRY_WAIT_MS

    def _dispatch_read_request(self, peer: str) -> None:
        store, node = self.store, self.node
        while (frame := self.protocol.next_frame()) is not None:
            # The decoders check every field, so re-encoding gives back the bytes read.
            if isinstance(frame, MasterHandshake):
                node.trace("frame.recv", proto="ha", peer=peer, size=frame.wire_size, name="handshake",
                           offset=frame.max_phy_offset, epoch=frame.last_epoch, entries=len(frame.entries),
                           epoch_entries=[[e.epoch, e.start_offset] for e in frame.entries],
                           hex=hex_preview(encode_master_handshake(frame.max_phy_offset, frame.last_epoch,
                                                                   frame.entries),
                                           MASTER_HANDSHAKE_HEADER_SIZE, EPOCH_ENTRY_SIZE * HEX_EPOCH_ENTRIES))
                self._handshake(frame)
                continue
            node.trace("frame.recv", proto="ha", peer=peer, size=frame.wire_size, name=frame.name,
                       offset=frame.offset, body_size=len(frame.body), epoch=frame.epoch,
                       epoch_start_offset=frame.epoch_start_offset, confirm_offset=frame.confirm_offset,
                       hex=(MASTER_TRANSFER_HEADER.codec.pack(HAConnectionState.TRANSFER.value, len(frame.body),
                                                              frame.offset, frame.epoch, frame.epoch_start_offset,
                                                              frame.confirm_offset)
                            + frame.body[:HEX_BODY_PREVIEW]).hex())
            new_epoch = self.protocol.check_transfer(frame, store.get_max_phy_offset())
            if new_epoch is not None:
                self.ha_service.append_epoch_entry(new_epoch)  # a rejection (not newer) is ignored
            if frame.body:
                self._append(frame.offset, frame.body)
            self.ha_service.set_confirm_offset(
                self.protocol.slave_confirm_offset(frame.confirm_offset, store.get_max_phy_offset()))
            self._report_max_offset()

    def _handshake(self, frame: MasterHandshake) -> None:
        """doTruncate and its effects on the store and the epoch file."""
        store = self.store
        local_max = store.get_max_phy_offset()
        decision = do_truncate(self.epoch_cache.get_all_entries(), local_max, frame.entries, frame.max_phy_offset,
                               consistent_point=self.ha_service.decision_points.find_consistent_point)
        self.last_truncate_decision = decision
        # The line for people; the decision as an ha.truncate event for readers (datasets/README.md).
        self.node.trace("log", level="INFO" if decision.ok else "ERROR", message=f"doTruncate: {decision.reason}",
                        logger="rmqlab.ha")
        self.node.trace("ha.truncate", ok=decision.ok, truncate_offset=decision.truncate_offset,
                        consistent_epoch=decision.consistent_epoch, local_max_offset=local_max,
                        master_max_offset=frame.max_phy_offset, reason=decision.reason)
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
                        is_async_learner=cfg.asyncLearner, hex=frame.hex())
        self._timers["handshake"] = self.node.call_later(HANDSHAKE_RESEND_MS, self._on_handshake_timer)

    def _on_handshake_timer(self) -> None:
        self._timers.pop("handshake", None)
        if self._close_reason is None:
            self._send_handshake()

    def _send_periodic_report(self, now: int) -> None:
        log.info("Slave report current offset %d", self.protocol.current_reported_offset)
        super()._send_periodic_report(now)
