"""ApplyBrokerIdEvent (id 2): a broker claimed a controller id (``impl/event/ApplyBrokerIdEvent.java``).

Applied (``ReplicasInfoManager.applyEvent``): if the set exists, the id is added unless already
present (then nothing changes, the check code included); otherwise both tables are created for the
set (an empty SyncStateInfo, masterEpoch 0) and the id is added. Every addition bumps
nextAssignBrokerId.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from rmqlab.common.config_manager import check_long, check_str
from rmqlab.controller.impl.event.event_message import EventMessage
from rmqlab.controller.impl.event.event_type import EventType


@dataclass(frozen=True)
class ApplyBrokerIdEvent(EventMessage):
    EVENT_TYPE = EventType.APPLY_BROKER_ID_EVENT

    cluster_name: str | None
    broker_name: str
    broker_address: str
    new_broker_id: int
    register_check_code: str

    def _properties(self) -> dict[str, Any]:
        return {"brokerAddress": self.broker_address, "brokerName": self.broker_name,
                "clusterName": self.cluster_name, "newBrokerId": self.new_broker_id,
                "registerCheckCode": self.register_check_code}

    @classmethod
    def from_json_dict(cls, obj: dict[str, Any]) -> ApplyBrokerIdEvent:
        cluster = obj.get("clusterName")
        return cls(None if cluster is None else check_str(cluster, "ApplyBrokerIdEvent.clusterName"),
                   check_str(obj.get("brokerName"), "ApplyBrokerIdEvent.brokerName"),
                   check_str(obj.get("brokerAddress"), "ApplyBrokerIdEvent.brokerAddress"),
                   check_long(obj.get("newBrokerId"), "ApplyBrokerIdEvent.newBrokerId"),
                   check_str(obj.get("registerCheckCode"), "ApplyBrokerIdEvent.registerCheckCode"))
