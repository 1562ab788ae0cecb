"""DefaultHAClient: the slave's end of classic HA.

Mirrors org.apache.rocketmq.store.ha.DefaultHAClient, one task on the slave's Node (the loop,
connect, close, reports and housekeeping are HAClient's, rmqlab.ha.ha_client):

* READY: with a master HA address (haMasterAddress, or learned from the NameServer registration),
  connect (5 s timeout, RemotingHelper.connect); on success state TRANSFER, the report offset is
  the local max offset. Without an address or on failure, wait 5 s and try again.
* TRANSFER: report the local max offset whenever haSendHeartbeatInterval passed since the last
  report (also the very first time: until then the master sends nothing); decode TRANSFERs
  (ClientProtocol), append each body to the local commitlog — the slave's own dispatcher then
  builds its consume queues — and report the new max offset after every batch. A batch that does
  not continue the local log, a failed append or a lost connection closes the connection and waits
  5 s (closeMasterAndWait); nothing read for haHousekeepingInterval closes it and reconnects at once.
* ``wakeup`` (ServiceThread.wakeup, what ``DefaultMessageStore.wakeupHAClient`` calls) cuts the
  current 5 s wait short, or, when the client is not waiting, makes its next wait return at once
  (ServiceThread's ``hasNotified``). Only a slave acting master's ``onMasterOnline`` calls it; a new
  master address alone (``updateHaMasterAddress``) does not wake the client, as in RocketMQ.

Frames are traced as frame.send / frame.recv with proto "ha", the written offset as an `offset`
event, the state changes as `state` events of machine "DefaultHAClient", closes as net.close.
"""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING

from rmqlab.ha.default_ha_protocol import ClientProtocol, HAProtocolError, encode_transfer_header
from rmqlab.ha.ha_client import CONNECT_TIMEOUT_MS, READ_SIZE, RETRY_WAIT_MS, HAClient
from rmqlab.ha.ha_protocol import HEX_BODY_PREVIEW
from rmqlab.ha.wait_notify_object import wait_at_most

if TYPE_CHECKING:
    from rmqlab.ha.default_ha_service import DefaultHAService

log = logging.getLogger("rmqlab.ha")

MACHINE = "DefaultHAClient"

__all__ = ["DefaultHAClient", "MACHINE", "CONNECT_TIMEOUT_MS", "RETRY_WAIT_MS", "READ_SIZE"]


class DefaultHAClient(HAClient):
    MACHINE = MACHINE

    def __init__(self, ha_service: DefaultHAService):
        super().__init__(ha_service, ClientProtocol(ha_service.node.now_ms()))
        self._wake: asyncio.Future | None = None
        # ServiceThread.hasNotified: a wakeup no wait has consumed yet. (WaitNotifyObject.wakeupAll
        # reaches only waiters already in its table; ServiceThread.wakeup is kept even before the
        # first wait, hence a flag of its own here.)
        self._has_notified = False

    def wakeup(self) -> None:
        """``wakeup``: end the current wait now, else the next one (module docstring)."""
        if self._has_notified:
            return
        self._has_notified = True
        if self._wake is not None and not self._wake.done():
            self._wake.set_result(None)

    async def _sleep(self, ms: float) -> None:
        """``waitForRunning``: a wait that ``wakeup`` cuts short."""
        if self._has_notified:
            self._has_notified = False
            return
        fut = asyncio.get_running_loop().create_future()
        self._wake = fut
        try:
            await wait_at_most(self.node, fut, ms)
        finally:
            self._wake = None
            self._has_notified = False

    def close_master(self, reason: str, wait: bool = True) -> None:
        """closeMaster (wait=False) or the close half of closeMasterAndWait."""
        self._close_master(reason, RETRY_WAIT_MS if wait else 0)

    def _dispatch_read_request(self, peer: str) -> None:
        """Apply every complete TRANSFER; report after each batch that grew the log."""
        store, node = self.store, self.node
        while (frame := self.protocol.next_frame(store.get_max_phy_offset())) is not None:
            node.trace("frame.recv", proto="ha", peer=peer, size=frame.wire_size,
                       name="heartbeat" if frame.is_heartbeat else "transfer", offset=frame.offset,
                       body_size=len(frame.body),
                       hex=(encode_transfer_header(frame.offset, len(frame.body))
                            + frame.body[:HEX_BODY_PREVIEW]).hex())
            if frame.body:
                self._append(frame.offset, frame.body)
            self._report_max_offset()

    def _on_dispatch_error(self, e: HAProtocolError) -> tuple[str, float]:
        log.error("HAClient, dispatchReadRequest error: %s", e)
        return str(e), RETRY_WAIT_MS
