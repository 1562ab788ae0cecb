"""BrokerLiveInfoGetter: a replica's last heartbeat (``helper/BrokerLiveInfoGetter.java``).

Java's one-method interface ``get(clusterName, brokerName, brokerId)`` is a plain callable here;
the controller passes ``DefaultBrokerHeartbeatManager.get_broker_live_info``. The election policy
ranks candidates by what it returns (epoch, maxOffset, electionPriority; ``DefaultElectPolicy``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from rmqlab.controller.impl.heartbeat.broker_live_info import BrokerLiveInfo


class BrokerLiveInfoGetter(Protocol):
    def __call__(self, cluster_name: str | None, broker_name: str, broker_id: int | None) -> BrokerLiveInfo | None: ...
