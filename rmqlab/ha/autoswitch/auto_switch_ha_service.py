"""AutoSwitchHAService: controller-mode replication of the commitlog (docs/en/controller/design.md).

Mirrors org.apache.rocketmq.store.ha.autoswitch.AutoSwitchHAService, on a Node instead of threads.
Every broker runs one and listens on its HA port; what it does depends on the role the controller
gives it, through explicit calls (the broker's ReplicasManager makes them):

* ``change_to_master(epoch)``: drop connections and the client, cut a torn tail, append
  (epoch, maxPhyOffset) to the epoch file, wait until the consume queues are built; accepted
  slaves then handshake and replicate (AutoSwitchHAConnection). The master keeps the SyncStateSet:
  it proposes expansions (a slave's ack reached the confirm offset) and shrinks
  (``maybe_shrink_sync_state_set``, or a disconnect) to the listeners registered with
  ``register_sync_state_set_changed_listener`` — the ReplicasManager sends them to the controller
  as AlterSyncStateSet — and adopts the controller's answer through ``set_sync_state_set``.
* ``change_to_slave(master_addr, epoch, slave_id)``: start an AutoSwitchHAClient; it connects once
  ``update_ha_master_address`` gives it the master's HA address (the NameServer registration does
  in RocketMQ), handshakes, truncates and replicates. A slave serves no slaves and proposes no
  SyncStateSet change (deviation, see AutoSwitchAcceptSocketService._on_accept).

The confirm offset is kept here (RocketMQ keeps it in CommitLog; rmqlab's store
files are not this module's): the store's dispatcher is limited to it, and it is copied into the
store checkpoint's confirmPhyOffset. A SYNC_MASTER put uses controller mode's write-ack rule
(``decide_write_ack``, which CommitLog asks for) and waits in AutoSwitchGroupTransferService.

The role itself (brokerRole SYNC_MASTER / SLAVE in the MessageStoreConfig) is set by the caller,
as ReplicasManager does; this service reads it live. Not modelled: fencing (a broker not yet
registered with the controller), the transient store pool, stateMachineVersion.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from rmqlab.common.decision_points import DecisionPoints
from rmqlab.common.decision_points import of as decision_points_of
from rmqlab.ha.autoswitch.auto_switch_ha_client import AutoSwitchHAClient
from rmqlab.ha.autoswitch.auto_switch_ha_connection import AutoSwitchHAConnection
from rmqlab.ha.autoswitch.auto_switch_ha_protocol import (ALL_ACK_IN_SYNC_STATE_SET, SyncStateSetState,
                                                          SyncStateSetView, WriteAckDecision, all_ack_transfer_ok,
                                                          compute_confirm_offset, decide_write_ack,
                                                          expand_sync_state_set, reported_confirm_offset,
                                                          shrink_sync_state_set)
from rmqlab.ha.default_ha_service import AcceptSocketService
from rmqlab.ha.group_transfer_service import GroupCommitRequest, GroupTransferService
from rmqlab.ha.ha_service import HAService, role_name
from rmqlab.remoting.protocol.epoch_entry import EpochEntry
from rmqlab.remoting.remoting_helper import peer_address
from rmqlab.runtime.node import Node
from rmqlab.store import store_truncation
from rmqlab.store.epoch_file_cache import EpochFileCache

log = logging.getLogger("rmqlab.ha")

DISPATCH_POLL_MS = 100  # changeToMaster: Thread.sleep(100) until the consume queues are built


class AutoSwitchAcceptSocketService(AcceptSocketService):
    """AutoSwitchHAService.AutoSwitchAcceptSocketService: each slave gets an AutoSwitchHAConnection."""

    LOG_NAME = "AutoSwitchHAService"

    def create_connection(self, reader, writer) -> AutoSwitchHAConnection:
        return AutoSwitchHAConnection(self.ha_service, reader, writer)

    async def _on_accept(self, reader, writer) -> None:
        """Deviation: RocketMQ's accept service serves whoever connects, whatever the role. A slave
        still given the old master's HA address (the NameServer's id-0 registration of a crashed
        master lives until it expires) would then replicate from that old master once it restarts
        as a slave — and stay there, outside the new master's SyncStateSet, while the old master
        proposes it for a SyncStateSet it does not lead. Here only a master serves: anyone else
        closes the connection at once, and the slave retries with the address it learns next."""
        ha = self.ha_service
        if not ha.stopped and not ha.is_master():
            peer = peer_address(writer.get_extra_info("peername"))
            log.warning("%s refuses the HA connection from %s: this broker is not master", self.LOG_NAME, peer)
            ha.node.trace("net.close", peer=peer, reason="refused: not master")
            writer.close()
            return
        await super()._on_accept(reader, writer)


class AutoSwitchGroupTransferService(GroupTransferService):
    """GroupTransferService as it behaves for an AutoSwitchHAService: ackNums -1 waits for every
    member of the SyncStateSet (the union view while an alter is in flight)."""

    def _transfer_ok(self, req: GroupCommitRequest) -> bool:
        if req.ack_nums == ALL_ACK_IN_SYNC_STATE_SET:
            ha = self.ha_service
            return all_ack_transfer_ok(ha.get_sync_state_set(), ha.connection_acks(), req.next_offset)
        return super()._transfer_ok(req)


class AutoSwitchHAService(HAService):
    """See the module docstring. `config` is the broker's MessageStoreConfig (read live).
    Lifecycle (start, shutdown, on_crash), connections and acknowledgements are HAService's."""

    connection_list: list[AutoSwitchHAConnection]
    ha_client: AutoSwitchHAClient | None

    def __init__(self, node: Node, store, config, *, host: str = "0.0.0.0", port: int | None = None,
                 local_broker_id: int | None = None, broker_name: str | None = None,
                 decision_points: DecisionPoints | None = None):
        super().__init__(node, store, config)
        self.broker_name = broker_name or node.name
        self.epoch_cache = EpochFileCache(config.get_store_path_epoch_file())
        # The decision points this service's parts call (rmqlab.common.decision_points; None
        # fields: RocketMQ's rules): transfer_ok, the slave's find_consistent_point, and the
        # master's SyncStateSet shrink / expand.
        self.decision_points = decision_points_of(decision_points)
        self.shrink_sync_state_set = self.decision_points.sync_state_set_shrink or shrink_sync_state_set
        self.expand_sync_state_set = self.decision_points.sync_state_set_expand or expand_sync_state_set
        self.group_transfer_service = AutoSwitchGroupTransferService(
            self, transfer_ok=self.decision_points.transfer_ok)
        self.accept_socket_service = AutoSwitchAcceptSocketService(self, host,
                                                                   config.haListenPort if port is None else port)
        self.ha_client: AutoSwitchHAClient | None = None
        self.sync_state = SyncStateSetState(local_broker_id)
        self.sync_state_set_changed_listeners: list[Callable[[set[int]], Any]] = []
        # Master from the new epoch's entry on (change_to_master) until change_to_slave: only then
        # does this service serve slaves and propose SyncStateSet changes.
        self._is_master = False
        # The stored confirm offset: the checkpoint's, within what the recovered commitlog holds.
        checkpoint = store.store_checkpoint.confirm_phy_offset
        stored = min(checkpoint, store.get_max_phy_offset())
        self._confirm_offset = max(stored, store.get_min_phy_offset(), 0)
        if self._confirm_offset < checkpoint:
            # The recovered log is shorter than the confirm offset saved before a crash: the trace
            # says so, or a reader would take the old value as this replica's committed prefix.
            self.node.trace("offset", which="confirmed", value=self._confirm_offset)
        store.set_ha_service(self)
        store.reput_message_service.dispatch_limit = self.get_confirm_offset

    # -- role changes ------------------------------------------------------------------------
    async def change_to_master(self, master_epoch: int) -> bool:
        """changeToMaster. Returns False (nothing changes) for an epoch below the last one."""
        if self._is_stale_epoch(master_epoch, "master"):
            return False
        self._is_master = False  # the connections of an older epoch go without proposing shrinks
        self.destroy_connections()
        if self.ha_client is not None:
            self.ha_client.shutdown()
            self.ha_client = None
        truncate_offset = self.truncate_invalid_msg()
        self.set_confirm_offset(self.compute_confirm_offset())
        if truncate_offset >= 0:
            self.epoch_cache.truncate_suffix_by_offset(truncate_offset)
        self._append_new_epoch(master_epoch)
        self._is_master = True  # slaves may connect now: the handshake carries the new epoch
        waited = 0
        while self.store.dispatch_behind_bytes() > 0:
            # Kept from RocketMQ: no bound. With a SyncStateSet member still disconnected the
            # confirm offset is frozen (computeConfirmOffset) and this waits until the set changes.
            if waited and waited % 5000 == 0:
                log.warning("change to master: %d bytes still to dispatch", self.store.dispatch_behind_bytes())
            await self.node.sleep(DISPATCH_POLL_MS)
            waited += DISPATCH_POLL_MS
        store_truncation.recover_topic_queue_table(self.store)
        self.node.trace("role", from_=None, to="MASTER", component="ha", epoch=master_epoch)
        log.info("Change ha to master success, newMasterEpoch:%d, startOffset:%d", master_epoch,
                 self.epoch_cache.last_entry().start_offset)
        return True

    def change_to_master_when_last_role_is_master(self, master_epoch: int) -> bool:
        """Re-elected while master: only the new epoch entry."""
        if self._is_stale_epoch(master_epoch, "master"):
            return False
        self._append_new_epoch(master_epoch)
        return True

    def _is_stale_epoch(self, new_master_epoch: int, role: str) -> bool:
        """A role change for an epoch below the last one is refused (nothing changes)."""
        last_epoch = self.epoch_cache.last_epoch()
        if new_master_epoch < last_epoch:
            log.warning("newMasterEpoch %d < lastEpoch %d, fail to change to %s", new_master_epoch, last_epoch, role)
            return True
        return False

    def _append_new_epoch(self, master_epoch: int) -> None:
        max_phy_offset = self.store.get_max_phy_offset()
        if self.epoch_cache.last_epoch() >= master_epoch:
            self.epoch_cache.truncate_suffix_by_epoch(master_epoch)
        last = self.epoch_cache.last_entry()
        if last is not None and last.start_offset >= max_phy_offset:
            # Deviation: RocketMQ appends (epoch, maxPhyOffset) as it is, and appendEntry refuses a
            # start that is not above the last entry's. A broker whose last epoch holds none of its
            # bytes (a slave that recorded the epoch from a heartbeat, or a master that wrote
            # nothing) would then lead the new epoch under the old one's entry: its new data is
            # labelled with the old epoch, and a returning replica holding real data of that old
            # epoch finds it "consistent" and keeps it beside different bytes. An epoch without
            # data carries nothing, so it gives way to the new one.
            log.warning("Epoch entries %s hold no data (maxPhyOffset %d): replaced by epoch %d",
                        [e for e in self.epoch_cache.get_all_entries() if e.start_offset >= max_phy_offset],
                        max_phy_offset, master_epoch)
            self.epoch_cache.truncate_suffix_by_offset(max_phy_offset)
        start = max_phy_offset
        min_phy_offset = self.store.get_min_phy_offset()
        if last is None and 0 <= min_phy_offset < max_phy_offset and \
                self.config.rmqlabFirstEpochFromMinOffset:
            # The rmqlab-only fix (off by default, see MessageStoreConfig): RocketMQ starts the
            # first epoch at maxPhyOffset even when the broker already holds a log (a master–slave
            # group upgraded in place), which then lies outside every epoch.
            start = min_phy_offset
        self.append_epoch_entry(EpochEntry(master_epoch, start))

    def change_to_slave(self, new_master_addr: str | None, new_master_epoch: int, slave_id: int) -> bool:
        """changeToSlave: `slave_id` is this broker's controller-assigned id (sent in the handshake)."""
        if self._is_stale_epoch(new_master_epoch, "slave"):
            return False
        # A slave neither serves slaves nor proposes SyncStateSet changes: only the master reports
        # them (ReplicasManager.changeToSlave stops checkSyncStateSet). Cleared before the
        # connections go, so their removal does not propose shrinks to a controller whose master
        # is someone else.
        self._is_master = False
        self.destroy_connections()
        if self.ha_client is not None:
            self.ha_client.shutdown()  # reOpen: a fresh client on the same epoch file
        self.ha_client = AutoSwitchHAClient(self, slave_id)
        self.ha_client.update_master_address(new_master_addr)
        self.ha_client.update_ha_master_address(None)
        self.ha_client.start()
        self.node.trace("role", from_=None, to="SLAVE", component="ha", epoch=new_master_epoch)
        log.info("Change ha to slave success, newMasterAddress:%s, newMasterEpoch:%d", new_master_addr,
                 new_master_epoch)
        return True

    def change_to_slave_when_master_not_change(self, new_master_addr: str | None, new_master_epoch: int) -> bool:
        if self._is_stale_epoch(new_master_epoch, "slave"):
            return False
        return True

    def is_master(self) -> bool:
        """Whether this service is master (since change_to_master, until change_to_slave)."""
        return self._is_master

    def update_master_address(self, new_addr: str | None) -> None:
        """As in RocketMQ, a no-op here: the client learns the master's address in change_to_slave."""

    def set_local_broker_id(self, broker_id: int | None) -> None:
        self.sync_state.local_broker_id = broker_id

    def get_local_broker_id(self) -> int | None:
        return self.sync_state.local_broker_id

    # -- the epoch file ----------------------------------------------------------------------
    def append_epoch_entry(self, entry: EpochEntry) -> bool:
        """Append to the epoch file (rejections, e.g. a replayed header, are ignored as in RocketMQ)."""
        ok = self.epoch_cache.append_entry(entry)
        if ok and not self.crashed:
            self.node.trace("epoch", broker_set=self.broker_name, epoch=entry.epoch, start_offset=entry.start_offset)
        return ok

    def get_last_epoch(self) -> int:
        return self.epoch_cache.last_epoch()

    def get_epoch_entries(self) -> list[EpochEntry]:
        return self.epoch_cache.get_all_entries()

    def truncate_epoch_file_prefix(self, offset: int) -> None:
        self.epoch_cache.truncate_prefix_by_offset(offset)

    def truncate_epoch_file_suffix(self, offset: int) -> None:
        self.epoch_cache.truncate_suffix_by_offset(offset)

    # -- the store's tail --------------------------------------------------------------------
    def truncate_invalid_msg(self) -> int:
        """truncateInvalidMsg; -1 when nothing was examined."""
        offset = store_truncation.truncate_invalid_msg(self.store)
        if offset >= 0:
            self._clamp_confirm_offset(offset)
        return offset

    def truncate_files(self, offset: int) -> bool:
        """DefaultMessageStore.truncateFiles for the handshake; the confirm offset never exceeds the log."""
        if not store_truncation.truncate_files(self.store, offset):
            return False
        self._clamp_confirm_offset(offset)
        return True

    def _clamp_confirm_offset(self, offset: int) -> None:
        # CommitLog.truncateDirtyFiles: a confirm offset beyond the cut comes back to it.
        if self._confirm_offset > offset:
            self.set_confirm_offset(offset)

    # -- confirm offset ----------------------------------------------------------------------
    def connection_acks(self) -> list[tuple[int, int]]:
        return [(c.slave_id, c.slave_ack_offset) for c in self.connection_list]

    def compute_confirm_offset(self) -> int:
        return compute_confirm_offset(self.store.get_max_phy_offset(), self.get_sync_state_set(),
                                      self.sync_state.local_broker_id, self.connection_acks(), self._confirm_offset)

    def get_confirm_offset(self) -> int:
        """CommitLog.getConfirmOffset in controller mode: what is committed, for readers and slaves."""
        return reported_confirm_offset(role_name(self.config) == "SLAVE", len(self.sync_state.local),
                                       self.config.allAckInSyncStateSet, self.store.get_max_phy_offset(),
                                       self._confirm_offset)

    def get_confirm_offset_directly(self) -> int:
        return self._confirm_offset

    def set_confirm_offset(self, offset: int) -> None:
        if offset != self._confirm_offset:
            self._confirm_offset = offset
            if not self.crashed:
                self.node.trace("offset", which="confirmed", value=offset)
        if self.store.running:
            self.store.store_checkpoint.confirm_phy_offset = offset
        # Dispatch stops at the confirm offset: what it let through is dispatchable now (also
        # when only the role or the SyncStateSet changed what get_confirm_offset reports).
        self.store.reput_message_service.wakeup()

    def update_confirm_offset_when_slave_ack(self, slave_id: int) -> None:
        if slave_id in self.sync_state.local:
            self.set_confirm_offset(self.compute_confirm_offset())

    # -- SyncStateSet ------------------------------------------------------------------------
    def register_sync_state_set_changed_listener(self, listener: Callable[[set[int]], Any]) -> None:
        self.sync_state_set_changed_listeners.append(listener)

    def notify_sync_state_set_changed(self, new_set: set[int]) -> None:
        """Listeners run after the current step, like RocketMQ's single-thread executor."""
        log.info("Notify the syncStateSet has been changed into %s.", sorted(new_set))

        def run() -> None:
            for listener in self.sync_state_set_changed_listeners:
                listener(set(new_set))

        self.node.call_later(0, run)

    def get_sync_state_set(self) -> set[int]:
        return self.sync_state.get_sync_state_set()

    def get_local_sync_state_set(self) -> set[int]:
        return self.sync_state.get_local_sync_state_set()

    def is_synchronizing_sync_state_set(self) -> bool:
        return self.sync_state.is_synchronizing

    def set_sync_state_set(self, sync_state_set) -> None:
        """The controller confirmed this set (or the broker learned a newer one)."""
        self.sync_state.set_sync_state_set(sync_state_set)
        self.set_confirm_offset(self.compute_confirm_offset())
        self.group_transfer_service.notify_transfer_some()  # waiting writes may now be complete

    def in_sync_replicas_nums(self, master_put_where: int) -> int:
        return self.sync_state.in_sync_replicas_nums()

    def decide_write_ack(self, master_put_where: int, store_config: Any) -> WriteAckDecision:
        """Controller mode's write-ack rule for CommitLog.async_put_message,
        which asks the HA service it has: a classic DefaultHAService has no such rule."""
        return decide_write_ack(self.in_sync_replicas_nums(master_put_where), store_config.minInSyncReplicas,
                                store_config.inSyncReplicas, store_config.allAckInSyncStateSet)

    def update_connection_last_caught_up_time(self, slave_id: int, caught_up_ms: int) -> None:
        self.sync_state.update_connection_last_caught_up_time(slave_id, caught_up_ms)

    def sync_state_set_view(self, acks: dict[int, int] | None = None) -> SyncStateSetView:
        """What the SyncStateSet decisions see now (`acks`: acknowledgements newer than the
        connections' own, by slave id)."""
        leader = self.epoch_cache.last_entry()
        return self.sync_state.view(acks={**dict(self.connection_acks()), **(acks or {})},
                                    confirm_offset=self.get_confirm_offset(),
                                    epoch_start_offset=leader.start_offset if leader is not None else 0,
                                    now_ms=self.node.now_ms(), max_not_catchup_ms=self.config.haMaxTimeSlaveNotCatchup)

    def maybe_expand_in_sync_state_set(self, slave_id: int, slave_max_offset: int) -> None:
        leader = self.epoch_cache.last_entry()
        if leader is None or not self._is_master:  # only the master proposes
            return
        pending = self._pending_proposal()
        proposed = None
        if slave_id not in self.sync_state.local:
            view = self.sync_state_set_view({slave_id: slave_max_offset})
            if self.expand_sync_state_set(view, slave_id):  # the decision point sync_state_set_expand
                proposed = self.sync_state.expand(slave_id)
        if proposed is not None:
            log.info("The slave %d has caught up, slaveMaxOffset: %d, confirmOffset: %d, epoch: %d",
                     slave_id, slave_max_offset, self.get_confirm_offset(), leader.epoch)
            self._trace_proposal("expand", proposed, pending,
                                 f"The slave {slave_id} has caught up, slaveMaxOffset: {slave_max_offset}, "
                                 f"confirmOffset: {self.get_confirm_offset()}, epoch: {leader.epoch}")
            self.notify_sync_state_set_changed(proposed)

    def maybe_shrink_sync_state_set(self) -> set[int]:
        """Run by the broker every checkSyncStateSetPeriod; returns the set it wants."""
        pending, local = self._pending_proposal(), self.sync_state.get_local_sync_state_set()
        # The decision point sync_state_set_shrink; only its removals are taken (shrink_to).
        new_set = self.sync_state.shrink_to(self.shrink_sync_state_set(self.sync_state_set_view()))
        if new_set != local:
            self._trace_proposal("shrink", new_set, pending,
                                 f"Slaves {sorted(local - new_set)} have not caught up for "
                                 f"{self.config.haMaxTimeSlaveNotCatchup} ms (or never connected)")
        return new_set

    def _pending_proposal(self) -> set[int] | None:
        return set(self.sync_state.remote) if self.sync_state.is_synchronizing else None

    def _trace_proposal(self, change: str, proposed: set[int], pending: set[int] | None, why: str) -> None:
        """A SyncStateSet change the master proposes (the controller confirms it, or not, as an
        AlterSyncStateSetEvent), traced once: until the controller answers, an expand is proposed
        again on every ack and a shrink on every check."""
        if proposed != pending and not self.crashed:
            self.node.trace("log", level="INFO", logger="rmqlab.ha",
                            message=f"{why}: propose SyncStateSet {sorted(proposed)}")
            self.node.trace("ha.sync_state_set_change", change=change, sync_state_set=sorted(proposed),
                            reason=why, broker_id=self.sync_state.local_broker_id)

    # -- connections -------------------------------------------------------------------------
    def remove_connection(self, conn: AutoSwitchHAConnection) -> None:
        """removeConnection: a member that disconnects is proposed out of the SyncStateSet."""
        if not self.stopped and self._is_master:  # only the master proposes
            pending = self._pending_proposal()
            proposed = self.sync_state.on_connection_removed(conn.slave_id)
            if proposed is not None:
                self._trace_proposal("shrink", proposed, pending,
                                     f"The connection of slave {conn.slave_id} closed ({conn.close_reason})")
                self.notify_sync_state_set_changed(proposed)
        super().remove_connection(conn)

    # -- observation -------------------------------------------------------------------------
    def get_runtime_info(self, master_put_where: int) -> dict[str, Any]:
        """HARuntimeInfo as plain data; inSync is SyncStateSet membership in controller mode."""
        if role_name(self.config) == "SLAVE" and self.ha_client is not None:
            return self._ha_client_runtime_info()
        local = self.get_local_sync_state_set()
        connections = [{"addr": c.client_address, "slaveId": c.slave_id, "slaveAckOffset": c.slave_ack_offset,
                        "diff": master_put_where - c.slave_ack_offset, "inSync": c.slave_id in local,
                        "transferredByteInSecond": c.get_transferred_byte_in_second(),
                        "transferFromWhere": c.get_transfer_from_where()} for c in self.connection_list]
        return {"master": True, "masterCommitLogMaxOffset": master_put_where,
                "inSyncSlaveNums": len(local) - 1, "haConnectionInfo": connections}


__all__ = ["AutoSwitchHAService", "AutoSwitchAcceptSocketService", "AutoSwitchGroupTransferService"]
