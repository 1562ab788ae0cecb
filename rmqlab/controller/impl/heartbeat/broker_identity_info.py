"""BrokerIdentityInfo: the heartbeat table's key (``impl/heartbeat/BrokerIdentityInfo.java``)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class BrokerIdentityInfo:
    """(clusterName, brokerName, brokerId): a replica as the controller knows it (its controller id)."""

    cluster_name: str | None
    broker_name: str | None
    broker_id: int | None

    def is_empty(self) -> bool:
        """``isEmpty``: blank names and no id."""
        return not (self.cluster_name or "").strip() and not (self.broker_name or "").strip() and self.broker_id is None
