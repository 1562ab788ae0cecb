"""ReplicasInfoManager: the controller's replicated metadata state machine (``impl/manager/ReplicasInfoManager.java``).

RIP-44 ("Controller API", "Consistent metadata", "Event").

Theory of operation
-------------------
The controller's memory is two tables keyed by broker set (brokerName): ``replica_info_table``
(:class:`BrokerReplicaInfo`: who is registered, with which address) and
``sync_state_set_info_table`` (:class:`SyncStateInfo`: the master, the SyncStateSet and their
epochs). A set "exists" only while it is in both.

Every controller request is handled in two separate steps:

1. **compute** – a request method (``alter_sync_state_set``, ``elect_master``, ``apply_broker_id``,
   ``register_broker``, ``get_next_broker_id``, ``get_replica_info``, ``get_sync_state_data``,
   ``clean_broker_data``) reads the tables, runs RocketMQ's checks in RocketMQ's order and returns
   a :class:`ControllerResult`: the response code, header, body and remark, plus the **events**
   that would bring the tables to the answered state. It never changes the tables. A rejection or a
   read has no events.
2. **apply** – ``apply_event(event)`` changes the tables, deterministically, from the event alone.

This split is what the Raft layer needs. Only the leader computes, one request at a time (RocketMQ
runs them on a single-threaded event queue, so each computation sees every earlier request
applied). The leader appends the result's events to the replicated log (serialised with
``EventSerializer`` / ``ListEventSerializer``), and once they are committed every replica, the
leader included, applies them in log order with ``apply_event``; only then does the leader send the
computed response. A follower never computes, it only applies, so all replicas hold the same tables
at the same log index. ``serialize`` / ``deserialize_from`` turn the whole state into bytes and back
for log compaction (pysyncobj's snapshots). Liveness (which replicas are alive, their epochs and
offsets) is not replicated state: it is passed in, as a predicate or an election policy built on
the heartbeat manager, and only the leader's view matters because only the leader computes.

No I/O, no clock, no threads: the same object runs in unit tests, on the simulator and in a real
controller process.

Deviations from RocketMQ (each also commented where it happens):

* Input RocketMQ would dereference as null (a missing brokerName, registerCheckCode, ...) raises
  RemotingCommandError naming the field (Java: NullPointerException, answered SYSTEM_ERROR) before
  anything is computed.
* CLEAN_BROKER_DATA with ``isCleanLivingBroker`` and a list of ids cleans those ids; Java ignores
  the list in that case and drops the whole broker set. A list with no ids in it (``";"``) counts as
  no list (Java drops the whole set without checking for a master).
* Applying an UpdateBrokerAddressEvent for a set that no longer exists does nothing (Java:
  NullPointerException in the state machine).
* ``serialize`` writes canonical JSON, not RocketMQ's Hessian blobs (which only its jRaft
  controller uses; the DLedger controller replays its log and has no snapshot).
* ``scan_need_reelect_broker_sets`` lists sets by name (Java: ConcurrentHashMap order).
* CONTROLLER_REGISTER_BROKER from the recorded master (a new incarnation of it, which may have lost
  its unflushed tail) does not confirm it in its old epoch: it records the master as gone
  (ElectMasterEvent not elected, a new masterEpoch) and names no master, so the broker's
  brokerElect runs a real election (chaos seed 173).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterable
from typing import Any

from rmqlab.common.config_manager import check_object
from rmqlab.common.java_compat import java_parse_int
from rmqlab.config.controller import ControllerConfig
from rmqlab.controller.elect.elect_policy import ElectPolicy
from rmqlab.controller.helper.broker_valid_predicate import BrokerValidPredicate
from rmqlab.controller.impl.event.alter_sync_state_set_event import AlterSyncStateSetEvent
from rmqlab.controller.impl.event.apply_broker_id_event import ApplyBrokerIdEvent
from rmqlab.controller.impl.event.clean_broker_data_event import CleanBrokerDataEvent
from rmqlab.controller.impl.event.controller_result import ControllerResult
from rmqlab.controller.impl.event.elect_master_event import ElectMasterEvent
from rmqlab.controller.impl.event.event_message import EventMessage
from rmqlab.controller.impl.event.update_broker_address_event import UpdateBrokerAddressEvent
from rmqlab.controller.impl.heartbeat.default_broker_heartbeat_manager import CONTROLLER_LOGGER_NAME
from rmqlab.controller.impl.manager.broker_replica_info import FIRST_BROKER_CONTROLLER_ID, BrokerReplicaInfo
from rmqlab.controller.impl.manager.sync_state_info import SyncStateInfo
from rmqlab.remoting.exceptions import RemotingCommandError
from rmqlab.remoting.protocol.body.broker_member_group import BrokerMemberGroup
from rmqlab.remoting.protocol.body.broker_replicas_info import BrokerReplicasInfo, ReplicaIdentity, ReplicasInfo
from rmqlab.remoting.protocol.body.elect_master_response_body import ElectMasterResponseBody
from rmqlab.remoting.protocol.body.sync_state_set import SyncStateSet
from rmqlab.remoting.protocol.header.controller import (AlterSyncStateSetRequestHeader,
                                                        AlterSyncStateSetResponseHeader,
                                                        ApplyBrokerIdRequestHeader, ApplyBrokerIdResponseHeader,
                                                        CleanControllerBrokerDataRequestHeader,
                                                        ElectMasterRequestHeader, ElectMasterResponseHeader,
                                                        GetNextBrokerIdRequestHeader, GetNextBrokerIdResponseHeader,
                                                        GetReplicaInfoRequestHeader, GetReplicaInfoResponseHeader,
                                                        RegisterBrokerToControllerRequestHeader,
                                                        RegisterBrokerToControllerResponseHeader)
from rmqlab.remoting.response_code import ResponseCode

SNAPSHOT_VERSION = 1


def _require(value: Any, request: str, field: str) -> Any:
    if value is None:
        # RocketMQ's text for a missing header field (see CommandCustomHeader).
        raise RemotingCommandError(f"{request}: the custom field <{field}> is null")
    return value


def _is_blank(text: str | None) -> bool:
    """``StringUtils.isBlank``: null, empty or whitespace only."""
    return text is None or not text.strip()


def _java_split(text: str, sep: str) -> list[str]:
    """``String.split(sep)`` for a one-character literal: trailing empty strings are dropped
    (so ``";"`` gives no parts at all), but ``""`` gives ``[""]``."""
    if text == "":
        return [""]
    parts = text.split(sep)
    while parts and parts[-1] == "":
        parts.pop()
    return parts


class ReplicasInfoManager:
    """The controller's metadata state machine (see the module docstring)."""

    def __init__(self, controller_config: ControllerConfig, *, logger: logging.Logger | None = None):
        self.controller_config = controller_config
        self.log = logger or logging.getLogger(CONTROLLER_LOGGER_NAME)
        self.replica_info_table: dict[str, BrokerReplicaInfo] = {}
        self.sync_state_set_info_table: dict[str, SyncStateInfo] = {}

    def is_contains_broker(self, broker_name: str | None) -> bool:
        """``isContainsBroker``: the set is in both tables (Java keeps this private)."""
        return broker_name in self.replica_info_table and broker_name in self.sync_state_set_info_table

    # =============================================================================================
    # Requests: compute a ControllerResult, never change the tables
    # =============================================================================================

    def alter_sync_state_set(self, request: AlterSyncStateSetRequestHeader, sync_state_set: SyncStateSet,
                             broker_alive_predicate: BrokerValidPredicate
                             ) -> ControllerResult[AlterSyncStateSetResponseHeader]:
        """CONTROLLER_ALTER_SYNC_STATE_SET (1001), checks in RocketMQ's order:
        unknown set; set unchanged; not the current master; stale masterEpoch; stale
        syncStateSetEpoch; a member unregistered, then not alive; the master missing from the set."""
        broker_name = _require(request.broker_name, "alterSyncStateSet", "brokerName")
        master_epoch = _require(request.master_epoch, "alterSyncStateSet", "masterEpoch")
        if sync_state_set is None:
            raise RemotingCommandError("alterSyncStateSet: the request has no SyncStateSet body")
        result = ControllerResult(AlterSyncStateSetResponseHeader())
        if not self.is_contains_broker(broker_name):
            result.set_code_and_remark(ResponseCode.CONTROLLER_ALTER_SYNC_STATE_SET_FAILED,
                                       "Broker metadata is not existed")
            return result
        new_set = sync_state_set.sync_state_set
        sync_state_info = self.sync_state_set_info_table[broker_name]
        replica_info = self.replica_info_table[broker_name]

        if sync_state_info.sync_state_set == new_set:
            err = "The newSyncStateSet is equal with oldSyncStateSet, no needed to update syncStateSet"
            self.log.warning("%s", err)
            result.set_code_and_remark(ResponseCode.CONTROLLER_ALTER_SYNC_STATE_SET_FAILED, err)
            return result
        # Only the current master may alter the set.
        if sync_state_info.master_broker_id is None or sync_state_info.master_broker_id != request.master_broker_id:
            err = (f"Rejecting alter syncStateSet request because the current leader is:"
                   f"{{{_java_str(sync_state_info.master_broker_id)}}}, not {{{_java_str(request.master_broker_id)}}}")
            self.log.error("%s", err)
            result.set_code_and_remark(ResponseCode.CONTROLLER_INVALID_MASTER, err)
            return result
        # A master of an older epoch is fenced (it may not know it was replaced).
        if master_epoch != sync_state_info.master_epoch:
            err = (f"Rejecting alter syncStateSet request because the current master epoch is:"
                   f"{{{sync_state_info.master_epoch}}}, not {{{master_epoch}}}")
            self.log.error("%s", err)
            result.set_code_and_remark(ResponseCode.CONTROLLER_FENCED_MASTER_EPOCH, err)
            return result
        # A proposal based on an older set is stale.
        if sync_state_set.sync_state_set_epoch != sync_state_info.sync_state_set_epoch:
            err = (f"Rejecting alter syncStateSet request because the current syncStateSet epoch is:"
                   f"{{{sync_state_info.sync_state_set_epoch}}}, not {{{sync_state_set.sync_state_set_epoch}}}")
            self.log.error("%s", err)
            result.set_code_and_remark(ResponseCode.CONTROLLER_FENCED_SYNC_STATE_SET_EPOCH, err)
            return result
        # Members in ascending id order (Java: HashSet order, the same for a set's small ids).
        for replica in sorted(new_set):
            if not replica_info.is_broker_exist(replica):
                err = f"Rejecting alter syncStateSet request because the replicas {{{replica}}} don't exist"
                self.log.error("%s", err)
                result.set_code_and_remark(ResponseCode.CONTROLLER_INVALID_REPLICAS, err)
                return result
            if not broker_alive_predicate(replica_info.cluster_name, replica_info.broker_name, replica):
                err = f"Rejecting alter syncStateSet request because the replicas {{{replica}}} don't alive"
                self.log.error("%s", err)
                result.set_code_and_remark(ResponseCode.CONTROLLER_BROKER_NOT_ALIVE, err)
                return result
        if sync_state_info.master_broker_id not in new_set:
            err = (f"Rejecting alter syncStateSet request because the newSyncStateSet don't contains origin leader "
                   f"{{{sync_state_info.master_broker_id}}}")
            self.log.error("%s", err)
            result.set_code_and_remark(ResponseCode.CONTROLLER_ALTER_SYNC_STATE_SET_FAILED, err)
            return result

        epoch = sync_state_info.sync_state_set_epoch + 1
        result.response.new_sync_state_set_epoch = epoch
        result.body = SyncStateSet(new_set, epoch).encode()
        result.add_event(AlterSyncStateSetEvent(broker_name, new_set))
        return result

    def elect_master(self, request: ElectMasterRequestHeader,
                     elect_policy: ElectPolicy) -> ControllerResult[ElectMasterResponseHeader]:
        """CONTROLLER_ELECT_MASTER (1002), RocketMQ's ``electMaster`` steps 1-7.

        The first election of a set (masterEpoch 0) takes the requesting broker's id without any
        check (RIP-44: "the first broker to ask becomes master"); later ones go through the policy,
        with every registered replica as a fallback pool only if enableElectUncleanMaster."""
        broker_name = _require(request.broker_name, "electMaster", "brokerName")
        broker_id = request.broker_id
        result = ControllerResult(ElectMasterResponseHeader())
        response = result.response
        if not self.is_contains_broker(broker_name):
            result.set_code_and_remark(ResponseCode.CONTROLLER_BROKER_NEED_TO_BE_REGISTERED,
                                       "Broker hasn't been registered")
            return result
        sync_state_info = self.sync_state_set_info_table[broker_name]
        replica_info = self.replica_info_table[broker_name]
        sync_state_set = sync_state_info.sync_state_set
        old_master = sync_state_info.master_broker_id
        all_replica_brokers = (replica_info.get_all_broker()
                               if self.controller_config.enableElectUncleanMaster else None)
        new_master: int | None = None
        if sync_state_info.is_first_time_for_elect():
            new_master = broker_id
        if new_master is None or new_master == -1:
            assigned_broker_id = broker_id if request.designate_elect else None
            new_master = elect_policy.elect(replica_info.cluster_name, replica_info.broker_name, sync_state_set,
                                            all_replica_brokers, old_master, assigned_broker_id)

        if new_master is not None and new_master == old_master:
            err = (f"The old master {old_master} is still alive, not need to elect new master for broker "
                   f"{replica_info.broker_name}")
            self.log.warning("%s", err)
            response.master_epoch = sync_state_info.master_epoch
            response.sync_state_set_epoch = sync_state_info.sync_state_set_epoch
            response.master_broker_id = old_master
            response.master_address = replica_info.get_broker_address(old_master)
            result.body = ElectMasterResponseBody(None, sync_state_set).encode()
            result.set_code_and_remark(ResponseCode.CONTROLLER_MASTER_STILL_EXIST, err)
            return result

        if new_master is not None:
            response.master_broker_id = new_master
            response.master_address = replica_info.get_broker_address(new_master)
            response.master_epoch = sync_state_info.master_epoch + 1
            response.sync_state_set_epoch = sync_state_info.sync_state_set_epoch + 1
            group = BrokerMemberGroup(replica_info.cluster_name, replica_info.broker_name,
                                      replica_info.get_broker_id_table())
            result.body = ElectMasterResponseBody(group, frozenset({new_master})).encode()
            result.add_event(ElectMasterEvent(broker_name, new_master))
            self.log.info("Elect new master %s for broker %s", new_master, broker_name)
            return result

        # Nobody qualifies. A controller-triggered election (brokerId -1) still records that the
        # master is gone, so brokers stop following it; a broker or admin request changes nothing.
        if broker_id is None or broker_id == -1:
            result.add_event(ElectMasterEvent.not_elected(broker_name))
            result.set_code_and_remark(ResponseCode.CONTROLLER_MASTER_NOT_AVAILABLE,
                                       "Old master has down and failed to elect a new broker master")
        else:
            result.set_code_and_remark(ResponseCode.CONTROLLER_ELECT_MASTER_FAILED, "Failed to elect a new master")
        self.log.warning("Failed to elect a new master for broker %s", broker_name)
        return result

    def get_next_broker_id(self, request: GetNextBrokerIdRequestHeader
                           ) -> ControllerResult[GetNextBrokerIdResponseHeader]:
        """CONTROLLER_GET_NEXT_BROKER_ID (1012): always SUCCESS; 1 for an unknown set, else
        nextAssignBrokerId. Looks at the replica table only, as RocketMQ does."""
        broker_name = _require(request.broker_name, "getNextBrokerId", "brokerName")
        result = ControllerResult(GetNextBrokerIdResponseHeader(request.cluster_name, broker_name))
        replica_info = self.replica_info_table.get(broker_name)
        result.response.next_broker_id = (FIRST_BROKER_CONTROLLER_ID if replica_info is None
                                          else replica_info.next_assign_broker_id)
        return result

    def apply_broker_id(self, request: ApplyBrokerIdRequestHeader) -> ControllerResult[ApplyBrokerIdResponseHeader]:
        """CONTROLLER_APPLY_BROKER_ID (1013): an unknown set accepts only id 1; a
        known set accepts an unused id, or one already owned by the same registerCheckCode (a
        broker retrying after a crash). The address is the check code's part before ";"."""
        broker_name = _require(request.broker_name, "applyBrokerId", "brokerName")
        broker_id = _require(request.applied_broker_id, "applyBrokerId", "appliedBrokerId")
        check_code = _require(request.register_check_code, "applyBrokerId", "registerCheckCode")
        cluster_name = request.cluster_name
        broker_address = check_code.split(";")[0]
        replica_info = self.replica_info_table.get(broker_name)
        result = ControllerResult(ApplyBrokerIdResponseHeader(cluster_name, broker_name))
        event = ApplyBrokerIdEvent(cluster_name, broker_name, broker_address, broker_id, check_code)
        if replica_info is None:
            if broker_id == FIRST_BROKER_CONTROLLER_ID:
                result.add_event(event)
            else:
                result.set_code_and_remark(ResponseCode.CONTROLLER_BROKER_ID_INVALID,
                                           f"Broker-set: {broker_name} hasn't been registered in controller, but "
                                           f"broker try to apply brokerId: {broker_id}")
            return result
        if (not replica_info.is_broker_exist(broker_id)
                or check_code == replica_info.get_broker_register_check_code(broker_id)):
            result.add_event(event)
            return result
        result.set_code_and_remark(ResponseCode.CONTROLLER_BROKER_ID_INVALID,
                                   f"Fail to apply brokerId: {broker_id} in broker-set: {broker_name}")
        return result

    def register_broker(self, request: RegisterBrokerToControllerRequestHeader,
                        alive_predicate: BrokerValidPredicate
                        ) -> ControllerResult[RegisterBrokerToControllerResponseHeader]:
        """CONTROLLER_REGISTER_BROKER (1003): the set and the id must be known; the
        answer names the master only if there is one and it is alive; an address change becomes an
        UpdateBrokerAddressEvent. Deviation: the recorded master registering again is taken as gone
        (ElectMasterEvent not elected) and the answer names no master (see below)."""
        broker_name = _require(request.broker_name, "registerBroker", "brokerName")
        broker_id = _require(request.broker_id, "registerBroker", "brokerId")
        broker_address = _require(request.broker_address, "registerBroker", "brokerAddress")
        cluster_name = request.cluster_name
        result = ControllerResult(RegisterBrokerToControllerResponseHeader(cluster_name, broker_name))
        response = result.response
        if not self.is_contains_broker(broker_name):
            result.set_code_and_remark(ResponseCode.CONTROLLER_BROKER_NEED_TO_BE_REGISTERED,
                                       f"Broker-set: {broker_name} hasn't been registered in controller")
            return result
        replica_info = self.replica_info_table[broker_name]
        sync_state_info = self.sync_state_set_info_table[broker_name]
        if not replica_info.is_broker_exist(broker_id):
            result.set_code_and_remark(ResponseCode.CONTROLLER_BROKER_NEED_TO_BE_REGISTERED,
                                       f"BrokerId: {broker_id} hasn't been registered in broker-set: {broker_name}")
            return result
        if sync_state_info.is_master_exist() and sync_state_info.master_broker_id == broker_id:
            # Deviation: RocketMQ confirms the recorded master here, in its old epoch, if it is
            # still alive. But a running master never registers again: this is a new incarnation of
            # it (restarted within the heartbeat timeout, so no controller noticed), and it may have
            # lost its unflushed commitlog tail. Led again in the same epoch, its new records would
            # sit beside the slaves' different bytes of that epoch, which the handshake takes as
            # consistent (acknowledged messages lost, replicas diverged). So the master is taken as
            # gone (ElectMasterEvent not elected: a new masterEpoch, SyncStateSet kept) and the
            # answer names none: the broker heartbeats and self-nominates (brokerElect), and the
            # election ranks it like any other member (no "keep the old master" preference) by the
            # epoch and maxOffset it now reports; if it wins it leads a new epoch.
            self.log.warning("The master %s of broker-set %s registers again (a new incarnation): it is taken as "
                             "gone and a new master must be elected", broker_id, broker_name)
            result.add_event(ElectMasterEvent.not_elected(broker_name))
        elif sync_state_info.is_master_exist() and alive_predicate(cluster_name, broker_name,
                                                                   sync_state_info.master_broker_id):
            response.master_broker_id = sync_state_info.master_broker_id
            response.master_address = replica_info.get_broker_address(sync_state_info.master_broker_id)
            response.master_epoch = sync_state_info.master_epoch
            response.sync_state_set_epoch = sync_state_info.sync_state_set_epoch
        result.body = SyncStateSet(sync_state_info.sync_state_set, sync_state_info.sync_state_set_epoch).encode()
        if broker_address != replica_info.get_broker_address(broker_id):
            result.add_event(UpdateBrokerAddressEvent(cluster_name, broker_name, broker_address, broker_id))
        return result

    def get_replica_info(self, request: GetReplicaInfoRequestHeader) -> ControllerResult[GetReplicaInfoResponseHeader]:
        """CONTROLLER_GET_REPLICA_INFO (1004): master, its address, masterEpoch; body SyncStateSet."""
        broker_name = _require(request.broker_name, "getReplicaInfo", "brokerName")
        result = ControllerResult(GetReplicaInfoResponseHeader())
        if self.is_contains_broker(broker_name):
            sync_state_info = self.sync_state_set_info_table[broker_name]
            replica_info = self.replica_info_table[broker_name]
            master = sync_state_info.master_broker_id
            result.response.master_broker_id = master
            result.response.master_address = replica_info.get_broker_address(master)
            result.response.master_epoch = sync_state_info.master_epoch
            result.body = SyncStateSet(sync_state_info.sync_state_set, sync_state_info.sync_state_set_epoch).encode()
            return result
        result.set_code_and_remark(ResponseCode.CONTROLLER_BROKER_METADATA_NOT_EXIST, "Broker metadata is not existed")
        return result

    def get_sync_state_data(self, broker_names: Iterable[str],
                            broker_alive_predicate: BrokerValidPredicate) -> ControllerResult[None]:
        """CONTROLLER_GET_SYNC_STATE_DATA (1006): body BrokerReplicasInfo for the known sets among
        ``broker_names`` (unknown ones are left out); always SUCCESS."""
        if broker_names is None or isinstance(broker_names, str):
            raise RemotingCommandError("getSyncStateData: expected a list of broker names")
        result: ControllerResult[None] = ControllerResult()
        replicas = BrokerReplicasInfo()
        for i, broker_name in enumerate(broker_names):
            _require(broker_name, "getSyncStateData", f"brokerNames[{i}]")
            if not self.is_contains_broker(broker_name):
                continue
            sync_state_info = self.sync_state_set_info_table[broker_name]
            replica_info = self.replica_info_table[broker_name]
            in_sync: list[ReplicaIdentity] = []
            not_in_sync: list[ReplicaIdentity] = []
            for broker_id, address in replica_info.get_broker_id_table().items():
                alive = bool(broker_alive_predicate(replica_info.cluster_name, broker_name, broker_id))
                replica = ReplicaIdentity(broker_name, broker_id, address, alive)
                (in_sync if broker_id in sync_state_info.sync_state_set else not_in_sync).append(replica)
            master = sync_state_info.master_broker_id
            replicas.add_replica_info(broker_name, ReplicasInfo(master, replica_info.get_broker_address(master),
                                                                sync_state_info.master_epoch,
                                                                sync_state_info.sync_state_set_epoch,
                                                                in_sync, not_in_sync))
        result.body = replicas.encode()
        return result

    def clean_broker_data(self, request: CleanControllerBrokerDataRequestHeader,
                          valid_predicate: BrokerValidPredicate) -> ControllerResult[None]:
        """CLEAN_BROKER_DATA (1011): unless isCleanLivingBroker, refuse to clean a
        whole set that has a master, malformed ids, or any listed id that is alive; then refuse an
        unknown set; else CleanBrokerDataEvent."""
        broker_name = _require(request.broker_name, "cleanBrokerData", "brokerName")
        cluster_name = request.cluster_name
        ids_text = request.broker_controller_ids_to_clean
        result: ControllerResult[None] = ControllerResult()
        broker_id_set: frozenset[int] | None = None
        if not _is_blank(ids_text):
            # Deviation: Java parses the ids only when not cleaning living brokers, so with
            # isCleanLivingBroker the list is ignored and the whole set is dropped. Here the listed
            # ids are what gets cleaned either way.
            try:
                broker_id_set = frozenset(java_parse_int(part, 64) for part in _java_split(ids_text, ";"))
            except ValueError as e:
                result.set_code_and_remark(ResponseCode.CONTROLLER_INVALID_CLEAN_BROKER_METADATA,
                                           f"Please set the option <brokerControllerIdsToClean> according to the "
                                           f"format, exception: {e}")
                return result
            # Deviation: ids like ";" parse to no ids at all; Java then skips every check and drops
            # the whole set, living master included. Here that is the same as giving no ids.
            broker_id_set = broker_id_set or None
        if not request.is_clean_living_broker:
            sync_state_info = self.sync_state_set_info_table.get(broker_name)
            # A master on record means at least one replica of the set may be alive.
            if broker_id_set is None and sync_state_info is not None and sync_state_info.master_broker_id is not None:
                result.set_code_and_remark(ResponseCode.CONTROLLER_INVALID_CLEAN_BROKER_METADATA,
                                           f"Broker {broker_name} is still alive, clean up failure")
                return result
            for broker_id in sorted(broker_id_set or ()):
                if valid_predicate(cluster_name, broker_name, broker_id):
                    result.set_code_and_remark(ResponseCode.CONTROLLER_INVALID_CLEAN_BROKER_METADATA,
                                               f"Broker [{broker_name},  {broker_id}] is still alive, clean up failure")
                    return result
        if self.is_contains_broker(broker_name):
            result.add_event(CleanBrokerDataEvent(broker_name, broker_id_set))
            return result
        result.set_code_and_remark(ResponseCode.CONTROLLER_INVALID_CLEAN_BROKER_METADATA,
                                   f"Broker {broker_name} is not existed,clean broker data failure.")
        return result

    def scan_need_reelect_broker_sets(self, valid_predicate: BrokerValidPredicate) -> list[str]:
        """``scanNeedReelectBrokerSets`` (the leader, every scanInactiveMasterInterval; trigger a.ii
        of "一文详解 RocketMQ 如何利用 Raft 进行高可用保障"): sets whose master is on record but not alive while
        some replica is alive."""
        need: list[str] = []
        for broker_name in sorted(self.sync_state_set_info_table):
            info = self.sync_state_set_info_table[broker_name]
            master = info.master_broker_id
            if master is None or valid_predicate(info.cluster_name, broker_name, master):
                continue
            replica_info = self.replica_info_table.get(broker_name)
            if replica_info is None:  # Java: NullPointerException (a set left without replicas)
                continue
            if any(valid_predicate(info.cluster_name, broker_name, b) for b in replica_info.get_broker_id_table()):
                need.append(broker_name)
        return need

    # =============================================================================================
    # Apply: the only way the tables change
    # =============================================================================================

    def apply_event(self, event: EventMessage) -> None:
        """``applyEvent``: change the tables as ``event`` says. Deterministic: the
        same events in the same order give the same state on every replica."""
        if isinstance(event, AlterSyncStateSetEvent):
            self._handle_alter_sync_state_set(event)
        elif isinstance(event, ApplyBrokerIdEvent):
            self._handle_apply_broker_id(event)
        elif isinstance(event, ElectMasterEvent):
            self._handle_elect_master(event)
        elif isinstance(event, CleanBrokerDataEvent):
            self._handle_clean_broker_data(event)
        elif isinstance(event, UpdateBrokerAddressEvent):
            self._handle_update_broker_address(event)
        else:
            raise TypeError(f"apply_event: not a controller event: {event!r}")

    def apply_events(self, events: Iterable[EventMessage]) -> None:
        """Apply a result's events in order (one log entry in the Raft layer)."""
        for event in events:
            self.apply_event(event)

    def _handle_alter_sync_state_set(self, event: AlterSyncStateSetEvent) -> None:
        if self.is_contains_broker(event.broker_name):
            self.sync_state_set_info_table[event.broker_name].update_sync_state_set_info(event.new_sync_state_set)

    def _handle_apply_broker_id(self, event: ApplyBrokerIdEvent) -> None:
        broker_name = event.broker_name
        if self.is_contains_broker(broker_name):
            replica_info = self.replica_info_table[broker_name]
            if not replica_info.is_broker_exist(event.new_broker_id):
                replica_info.add_broker(event.new_broker_id, event.broker_address, event.register_check_code)
            return
        # The set's first replica (or the set was half cleaned): fresh tables, as in RocketMQ.
        replica_info = BrokerReplicaInfo(event.cluster_name, broker_name)
        replica_info.add_broker(event.new_broker_id, event.broker_address, event.register_check_code)
        self.replica_info_table[broker_name] = replica_info
        self.sync_state_set_info_table[broker_name] = SyncStateInfo(event.cluster_name, broker_name)

    def _handle_update_broker_address(self, event: UpdateBrokerAddressEvent) -> None:
        replica_info = self.replica_info_table.get(event.broker_name)
        if replica_info is None:  # Deviation: Java throws NullPointerException here
            self.log.error("Receive an UpdateBrokerAddressEvent for the unknown broker set, event = %s", event)
            return
        replica_info.update_broker_address(event.broker_id, event.broker_address)

    def _handle_elect_master(self, event: ElectMasterEvent) -> None:
        broker_name = event.broker_name
        if not self.is_contains_broker(broker_name):
            self.log.error("Receive an ElectMasterEvent which contains the un-registered broker, event = %s", event)
            return
        info = self.sync_state_set_info_table[broker_name]
        if event.new_master_elected:
            info.update_master_info(event.new_master_broker_id)
            info.update_sync_state_set_info({event.new_master_broker_id})
        else:
            # The old master is gone and nobody replaced it: forget it, keep the set (its members
            # are still the only replicas known to hold every committed message).
            info.update_master_info(None)

    def _handle_clean_broker_data(self, event: CleanBrokerDataEvent) -> None:
        broker_name = event.broker_name
        ids = event.broker_id_set_to_clean
        if not ids:
            self.replica_info_table.pop(broker_name, None)
            self.sync_state_set_info_table.pop(broker_name, None)
            return
        if not self.is_contains_broker(broker_name):
            return
        replica_info = self.replica_info_table[broker_name]
        info = self.sync_state_set_info_table[broker_name]
        for broker_id in sorted(ids):
            replica_info.remove_broker_id(broker_id)
            info.remove_from_sync_state(broker_id)
        if not replica_info.broker_id_info:
            del self.replica_info_table[broker_name]
        if not info.sync_state_set:
            del self.sync_state_set_info_table[broker_name]

    # =============================================================================================
    # Snapshot
    # =============================================================================================

    def serialize(self) -> bytes:
        """The whole state as canonical JSON (keys sorted, ASCII only): equal states give equal
        bytes, and ``deserialize_from(serialize())`` restores a state that serialises identically."""
        doc = {
            "replicaInfoTable": {name: info.to_snapshot() for name, info in self.replica_info_table.items()},
            "syncStateSetInfoTable": {name: info.to_snapshot()
                                      for name, info in self.sync_state_set_info_table.items()},
            "version": SNAPSHOT_VERSION,
        }
        return json.dumps(doc, sort_keys=True, separators=(",", ":"), ensure_ascii=True).encode("ascii")

    def deserialize_from(self, data: bytes | bytearray | memoryview) -> None:
        """Replace the state with a snapshot's. On a malformed snapshot ValueError names the problem
        and the current state is kept (Java clears the tables first)."""
        try:
            doc = json.loads(bytes(data).decode("ascii"))
        except (UnicodeDecodeError, json.JSONDecodeError) as e:
            raise ValueError(f"controller snapshot: not the JSON serialize() writes ({e})") from None
        doc = check_object(doc, "controller snapshot")
        if doc.get("version") != SNAPSHOT_VERSION:
            raise ValueError(f"controller snapshot: version {doc.get('version')!r}, expected {SNAPSHOT_VERSION}")
        replica_table: dict[str, BrokerReplicaInfo] = {}
        for name, value in check_object(doc.get("replicaInfoTable"), "controller snapshot.replicaInfoTable").items():
            info = BrokerReplicaInfo.from_snapshot(value, f"controller snapshot.replicaInfoTable.{name}")
            if info.broker_name != name:
                raise ValueError(f"controller snapshot.replicaInfoTable.{name}: holds broker set {info.broker_name!r}")
            replica_table[name] = info
        sync_table: dict[str, SyncStateInfo] = {}
        for name, value in check_object(doc.get("syncStateSetInfoTable"),
                                        "controller snapshot.syncStateSetInfoTable").items():
            info = SyncStateInfo.from_snapshot(value, f"controller snapshot.syncStateSetInfoTable.{name}")
            if info.broker_name != name:
                raise ValueError(f"controller snapshot.syncStateSetInfoTable.{name}: holds broker set "
                                 f"{info.broker_name!r}")
            sync_table[name] = info
        self.replica_info_table = replica_table
        self.sync_state_set_info_table = sync_table


def _java_str(value: Any) -> str:
    """``String.valueOf`` for a boxed Long: ``null`` for None."""
    return "null" if value is None else str(value)
