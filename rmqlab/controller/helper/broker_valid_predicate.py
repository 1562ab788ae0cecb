"""BrokerValidPredicate: may this replica take part? (``helper/BrokerValidPredicate.java``).

Java's one-method interface ``check(clusterName, brokerName, brokerId)`` is a plain callable here.
The controller passes ``DefaultBrokerHeartbeatManager.is_broker_active`` (``DefaultElectPolicy``'s
first filter): a replica is valid while its heartbeat is current.
"""

from __future__ import annotations

from typing import Protocol


class BrokerValidPredicate(Protocol):
    def __call__(self, cluster_name: str | None, broker_name: str, broker_id: int | None) -> bool: ...
