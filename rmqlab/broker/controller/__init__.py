"""The broker's side of controller mode (RIP-44), mirroring RocketMQ's
``broker/src/main/java/org/apache/rocketmq/broker/controller/``:

* ``replicas_manager``: ReplicasManager — registration with the controller, role changes,
  SyncStateSet reports, heartbeats, polling;
* ``broker_metadata``: BrokerMetadata / TempBrokerMetadata, the identity files that keep the
  controller-assigned broker id across restarts (RocketMQ keeps them in its store module).
"""

from rmqlab.broker.controller.broker_metadata import BrokerMetadata, TempBrokerMetadata
from rmqlab.broker.controller.replicas_manager import RegisterState, ReplicasManager, State

__all__ = ["BrokerMetadata", "TempBrokerMetadata", "ReplicasManager", "RegisterState", "State"]
