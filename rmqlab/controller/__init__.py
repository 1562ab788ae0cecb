"""The RIP-44 controller core: replicated broker-set metadata, elections, broker liveness.

Mirrors RocketMQ's ``controller`` module: ``impl.manager.ReplicasInfoManager``
(the state machine: requests compute a ControllerResult with events, ``apply_event`` applies
them), ``impl.event`` (the events and their log encoding), ``elect`` (ElectPolicy,
DefaultElectPolicy), ``impl.heartbeat`` (DefaultBrokerHeartbeatManager) and ``helper`` (the
callables that connect them) form the in-memory core, with no network and no Raft.

On top of it: ``impl.controller_state_machine`` (the core as a pysyncobj state machine),
``impl.raft_controller.RaftController`` (RocketMQ's DLedgerController, on pysyncobj),
``processor.ControllerRequestProcessor`` (requests 1001-1013 and 904) and
``controller_manager.ControllerManager`` (the controller node: standalone, or embedded in a
NameServer). Import those from their modules.
"""

from rmqlab.controller.broker_heartbeat_manager import DEFAULT_BROKER_CHANNEL_EXPIRED_TIME, BrokerHeartbeatManager
from rmqlab.controller.elect import DefaultElectPolicy, ElectPolicy
from rmqlab.controller.impl.event import (AlterSyncStateSetEvent, ApplyBrokerIdEvent, CleanBrokerDataEvent,
                                          ControllerResult, ElectMasterEvent, EventMessage, EventSerializer,
                                          EventType, ListEventSerializer, UpdateBrokerAddressEvent)
from rmqlab.controller.impl.heartbeat import BrokerIdentityInfo, BrokerLiveInfo, DefaultBrokerHeartbeatManager
from rmqlab.controller.impl.manager import (FIRST_BROKER_CONTROLLER_ID, BrokerReplicaInfo, ReplicasInfoManager,
                                            SyncStateInfo)

__all__ = [
    "DEFAULT_BROKER_CHANNEL_EXPIRED_TIME", "BrokerHeartbeatManager", "DefaultElectPolicy", "ElectPolicy",
    "AlterSyncStateSetEvent", "ApplyBrokerIdEvent", "CleanBrokerDataEvent", "ControllerResult", "ElectMasterEvent",
    "EventMessage", "EventSerializer", "EventType", "ListEventSerializer", "UpdateBrokerAddressEvent",
    "BrokerIdentityInfo", "BrokerLiveInfo", "DefaultBrokerHeartbeatManager", "FIRST_BROKER_CONTROLLER_ID",
    "BrokerReplicaInfo", "ReplicasInfoManager", "SyncStateInfo",
]
