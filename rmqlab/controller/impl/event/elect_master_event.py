"""ElectMasterEvent (id 3): the outcome of an election (``impl/event/ElectMasterEvent.java``).

Applied (``ReplicasInfoManager.applyEvent``): elected: master := id, masterEpoch += 1, syncStateSet := {id},
syncStateSetEpoch += 1. Not elected (a controller-triggered election found no candidate):
master := null, masterEpoch += 1, the set kept.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from rmqlab.common.config_manager import check_bool, check_long, check_str
from rmqlab.controller.impl.event.event_message import EventMessage
from rmqlab.controller.impl.event.event_type import EventType


@dataclass(frozen=True)
class ElectMasterEvent(EventMessage):
    EVENT_TYPE = EventType.ELECT_MASTER_EVENT

    broker_name: str
    new_master_broker_id: int | None = None
    new_master_elected: bool = True

    def __post_init__(self) -> None:
        if self.new_master_elected and self.new_master_broker_id is None:
            raise ValueError(f"ElectMasterEvent for {self.broker_name}: an elected master needs a broker id")

    @classmethod
    def not_elected(cls, broker_name: str) -> ElectMasterEvent:
        """``new ElectMasterEvent(false, brokerName)``: the master is gone and nobody replaces it."""
        return cls(broker_name, None, False)

    def _properties(self) -> dict[str, Any]:
        return {"brokerName": self.broker_name, "newMasterBrokerId": self.new_master_broker_id,
                "newMasterElected": self.new_master_elected}

    @classmethod
    def from_json_dict(cls, obj: dict[str, Any]) -> ElectMasterEvent:
        master = obj.get("newMasterBrokerId")
        return cls(check_str(obj.get("brokerName"), "ElectMasterEvent.brokerName"),
                   None if master is None else check_long(master, "ElectMasterEvent.newMasterBrokerId"),
                   check_bool(obj.get("newMasterElected"), "ElectMasterEvent.newMasterElected"))
