"""UpdateBrokerAddressEvent (id 6): a registered broker came back on another address
(``impl/event/UpdateBrokerAddressEvent.java``).

Applied (``ReplicasInfoManager.applyEvent``): the id's address is replaced, its register check code kept.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from rmqlab.common.config_manager import check_long, check_str
from rmqlab.controller.impl.event.event_message import EventMessage
from rmqlab.controller.impl.event.event_type import EventType


@dataclass(frozen=True)
class UpdateBrokerAddressEvent(EventMessage):
    EVENT_TYPE = EventType.UPDATE_BROKER_ADDRESS

    cluster_name: str | None
    broker_name: str
    broker_address: str
    broker_id: int

    def _properties(self) -> dict[str, Any]:
        return {"brokerAddress": self.broker_address, "brokerId": self.broker_id, "brokerName": self.broker_name,
                "clusterName": self.cluster_name}

    @classmethod
    def from_json_dict(cls, obj: dict[str, Any]) -> UpdateBrokerAddressEvent:
        cluster = obj.get("clusterName")
        return cls(None if cluster is None else check_str(cluster, "UpdateBrokerAddressEvent.clusterName"),
                   check_str(obj.get("brokerName"), "UpdateBrokerAddressEvent.brokerName"),
                   check_str(obj.get("brokerAddress"), "UpdateBrokerAddressEvent.brokerAddress"),
                   check_long(obj.get("brokerId"), "UpdateBrokerAddressEvent.brokerId"))
