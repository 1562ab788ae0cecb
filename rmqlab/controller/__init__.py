"""The RIP-44 controller core: replicated broker-set metadata, elections, broker liveness.

Mirrors RocketMQ's ``controller`` module (reference §4): ``impl.manager.ReplicasInfoManager``
(the state machine: requests compute a ControllerResult with events, ``apply_event`` applies
them), ``impl.event`` (the events and their log encoding), ``elect`` (ElectPolicy,
DefaultElectPolicy), ``impl.heartbeat`` (DefaultBrokerHeartbeatManager) and ``helper`` (the
callables that connect them). No network and no Raft here: the Raft layer and the request
processor are built on this API.
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
