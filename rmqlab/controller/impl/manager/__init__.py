"""The controller's metadata (``org.apache.rocketmq.controller.impl.manager``)."""

from rmqlab.controller.impl.manager.broker_replica_info import FIRST_BROKER_CONTROLLER_ID, BrokerReplicaInfo
from rmqlab.controller.impl.manager.replicas_info_manager import ReplicasInfoManager
from rmqlab.controller.impl.manager.sync_state_info import SyncStateInfo

__all__ = ["FIRST_BROKER_CONTROLLER_ID", "BrokerReplicaInfo", "ReplicasInfoManager", "SyncStateInfo"]
