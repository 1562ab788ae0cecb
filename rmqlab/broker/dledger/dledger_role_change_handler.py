"""DLedgerRoleChangeHandler: in DLedger CommitLog mode the broker's role follows its DLedger role.

Mirrors org.apache.rocketmq.broker.dledger.DLedgerRoleChangeHandler (apache/rocketmq,
broker/src/main/java/org/apache/rocketmq/broker/dledger/DLedgerRoleChangeHandler.java). The elector
calls ``handle(term, role)`` synchronously at each role change; the work runs later, one change
at a time in arrival order (RocketMQ's single-thread executor; here a chain of node tasks):

    DLedger role   broker action
    CANDIDATE      changeToSlave(id), unless the broker is already SLAVE
    FOLLOWER       changeToSlave(id)
    LEADER         every 100 ms, until ledgerEndIndex == committedIndex and the dispatcher has
                   caught up (or the log is empty); give up if no longer leader; then
                   recoverTopicQueueTable and changeToMaster(SYNC_MASTER)

* changeToSlave(id): brokerId := id (the selfId's number + 1: n0 -> 1), role SLAVE, the special
  services off, slave synchronisation every 3 s (syncAll at most every 10 s), registerBrokerAll;
* changeToMaster: slave synchronisation cancelled, the special services on, brokerId := 0, role
  SYNC_MASTER, registerBrokerAll.

The broker does not register with the name servers at start in this mode (BrokerController.start):
the first role change registers it, so the route names the group's leader as master (id 0) and
the others as slaves. Why the leader waits: it may hold entries of an earlier term that it has
not committed yet, and its consume queues (hence the queue offsets it assigns next) must cover
every committed message before it takes writes as master.

Each broker role it takes is a `role` event (component "broker", with the DLedger term as
`epoch`: a master of a higher term supersedes one of a lower term, as a controller-mode master
of a higher epoch does), as other modes trace their roles.
"""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING

from rmqlab.config.broker import MASTER_ID, BrokerRole
from rmqlab.dledger.member_state import Role

if TYPE_CHECKING:
    from rmqlab.broker.broker_controller import BrokerController
    from rmqlab.runtime.node import Timer
    from rmqlab.store.default_message_store import DefaultMessageStore

log = logging.getLogger("rmqlab.broker")

LEADER_CATCH_UP_POLL_MS = 100        # Thread.sleep(100) while the new leader catches up
SLAVE_SYNC_PERIOD_MS = 3_000         # handleSlaveSynchronize: scheduleAtFixedRate(..., 3 s, 3 s)
SLAVE_SYNC_ALL_INTERVAL_MS = 10_000  # syncAll when more than 10 s passed since the last one


class DLedgerRoleChangeHandler:
    def __init__(self, broker: BrokerController, message_store: DefaultMessageStore):
        self.broker = broker
        self.message_store = message_store
        self.dledger_commit_log = message_store.commit_log
        self.dledger_server = self.dledger_commit_log.dledger_server
        self.node = broker.node
        self._tail: asyncio.Task | None = None  # the last change queued (the executor's queue)
        self._slave_sync_timer: Timer | None = None
        self.last_sync_time_ms = self.node.now_ms()
        self._last_role: str | None = None
        self._stopped = False

    # -- RoleChangeHandler -----------------------------------------------------------------------
    def handle(self, term: int, role: Role) -> None:
        if self._stopped:
            return
        previous = self._tail

        async def run() -> None:
            if previous is not None and not previous.done():
                await asyncio.wait([previous])
            await self._handle(term, role)

        self._tail = self.node.spawn(run(), name="DLegerRoleChangeHandler")

    def startup(self) -> None:
        pass

    def shutdown(self) -> None:
        """executorService.shutdown: no new change starts; the slave sync stops."""
        self._stopped = True
        self._cancel_slave_sync()

    async def _handle(self, term: int, role: Role) -> None:
        start = self.node.now_ms()
        msc = self.broker.message_store_config
        succ = True
        log.info("Begin handling broker role change term=%d role=%s currStoreRole=%s", term, role.name,
                 msc.brokerRole.name)
        try:
            if role is Role.CANDIDATE:
                if msc.brokerRole is not BrokerRole.SLAVE:
                    await self.change_to_slave(self.dledger_commit_log.id, term)
            elif role is Role.FOLLOWER:
                await self.change_to_slave(self.dledger_commit_log.id, term)
            elif role is Role.LEADER:
                store = self.dledger_server.get_dledger_store()
                while True:
                    if self._stopped or not self.dledger_server.get_member_state().is_leader():
                        succ = False
                        break
                    if store.get_ledger_end_index() == -1:
                        break
                    if (store.get_ledger_end_index() == store.get_committed_index()
                            and self.message_store.dispatch_behind_bytes() == 0):
                        break
                    await self.node.sleep(LEADER_CATCH_UP_POLL_MS)
                if succ:
                    self.message_store.recover_topic_queue_table()
                    self.dledger_commit_log.master_term = term
                    await self.change_to_master(BrokerRole.SYNC_MASTER, term)
            log.info("Finish handling broker role change succ=%s term=%d role=%s currStoreRole=%s cost=%d", succ,
                     term, role.name, msc.brokerRole.name, self.node.now_ms() - start)
        except Exception:
            log.exception("[MONITOR]Failed handling broker role change term=%d role=%s currStoreRole=%s", term,
                          role.name, msc.brokerRole.name)

    # -- the broker's role -------------------------------------------------------------------------
    async def change_to_slave(self, broker_id: int, term: int) -> None:
        broker = self.broker
        log.info("Begin to change to slave brokerName=%s brokerId=%d", broker.broker_config.brokerName, broker_id)
        broker.broker_config.brokerId = 1 if broker_id == MASTER_ID else broker_id
        broker.message_store_config.brokerRole = BrokerRole.SLAVE
        self._trace_role(BrokerRole.SLAVE, term)
        broker.change_special_service_status(False)
        self._handle_slave_synchronize(BrokerRole.SLAVE)
        await self._register()
        log.info("Finish to change to slave brokerName=%s brokerId=%d", broker.broker_config.brokerName, broker_id)

    async def change_to_master(self, role: BrokerRole, term: int) -> None:
        if role is BrokerRole.SLAVE:
            return
        broker = self.broker
        log.info("Begin to change to master brokerName=%s", broker.broker_config.brokerName)
        self._handle_slave_synchronize(role)
        broker.change_special_service_status(True)
        broker.broker_config.brokerId = MASTER_ID
        broker.message_store_config.brokerRole = role
        self._trace_role(role, term)
        await self._register()
        log.info("Finish to change to master brokerName=%s", broker.broker_config.brokerName)

    async def _register(self) -> None:
        """registerBrokerAll(true, true, forceRegister); RocketMQ ignores any failure here (the
        periodic registration retries)."""
        try:
            await self.broker.register_broker_all(True, True, self.broker.broker_config.forceRegister)
        except Exception:
            log.warning("registerBrokerAll after a role change failed", exc_info=True)

    def _trace_role(self, role: BrokerRole, term: int) -> None:
        if role.value == self._last_role:
            return
        self.node.trace("role", **{"from": self._last_role, "to": role.value, "component": "broker", "epoch": term,
                                   "term": term})
        self._last_role = role.value

    # -- slave synchronisation ---------------------------------------------------------------------
    def _handle_slave_synchronize(self, role: BrokerRole) -> None:
        self._cancel_slave_sync()
        self.broker.slave_synchronize.set_master_addr(None)
        if role is BrokerRole.SLAVE:
            self._slave_sync_timer = self.node.call_later(SLAVE_SYNC_PERIOD_MS, self._slave_sync_tick)

    def _cancel_slave_sync(self) -> None:
        if self._slave_sync_timer is not None:
            self._slave_sync_timer.cancel()
            self._slave_sync_timer = None

    def _slave_sync_tick(self) -> None:
        self._slave_sync_timer = self.node.call_later(SLAVE_SYNC_PERIOD_MS, self._slave_sync_tick)
        if self.node.now_ms() - self.last_sync_time_ms > SLAVE_SYNC_ALL_INTERVAL_MS:
            self.last_sync_time_ms = self.node.now_ms()
            self.node.spawn(self._sync_all(), name="SlaveSynchronize")

    async def _sync_all(self) -> None:
        try:
            await self.broker.slave_synchronize.sync_all()
        except Exception:
            log.error("ScheduledTask SlaveSynchronize syncAll error.", exc_info=True)
