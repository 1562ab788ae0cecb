"""BrokerHeartbeatManager: what the controller knows of replica liveness (``BrokerHeartbeatManager.java``).

The interface the controller manager, the election policy and the request processor use; the
implementation is ``impl.heartbeat.default_broker_heartbeat_manager.DefaultBrokerHeartbeatManager``.
RocketMQ's jRaft controller has a second one (heartbeats as Raft events), which
rmqlab does not implement.
"""

from __future__ import annotations

import abc
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from rmqlab.controller.helper.broker_lifecycle_listener import BrokerLifecycleListener
    from rmqlab.controller.impl.heartbeat.broker_live_info import BrokerLiveInfo

# How long a heartbeat counts when the broker sent no timeout (10 s).
DEFAULT_BROKER_CHANNEL_EXPIRED_TIME = 1000 * 10


class BrokerHeartbeatManager(abc.ABC):
    @abc.abstractmethod
    def on_broker_heartbeat(self, cluster_name: str | None, broker_name: str | None, broker_addr: str | None,
                            broker_id: int | None, timeout_millis: int | None, channel: Any, epoch: int | None,
                            max_offset: int | None, confirm_offset: int | None,
                            election_priority: int | None) -> None:
        """``onBrokerHeartbeat``."""

    @abc.abstractmethod
    def register_broker_lifecycle_listener(self, listener: BrokerLifecycleListener) -> None:
        """``registerBrokerLifecycleListener``."""

    @abc.abstractmethod
    def on_broker_channel_close(self, channel: Any) -> None:
        """``onBrokerChannelClose``."""

    @abc.abstractmethod
    def get_broker_live_info(self, cluster_name: str | None, broker_name: str | None,
                             broker_id: int | None) -> BrokerLiveInfo | None:
        """``getBrokerLiveInfo``."""

    @abc.abstractmethod
    def is_broker_active(self, cluster_name: str | None, broker_name: str | None, broker_id: int | None) -> bool:
        """``isBrokerActive``."""

    @abc.abstractmethod
    def get_active_brokers_num(self) -> dict[str, dict[str, int]]:
        """``getActiveBrokersNum``: cluster -> broker set -> number of active replicas."""
