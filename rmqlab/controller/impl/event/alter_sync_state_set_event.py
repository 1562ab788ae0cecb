"""AlterSyncStateSetEvent (id 1): replace a set's SyncStateSet (``impl/event/AlterSyncStateSetEvent.java``).

Applied: if the broker set exists, syncStateSet := new set and syncStateSetEpoch += 1
(``ReplicasInfoManager.applyEvent``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from rmqlab.common.config_manager import check_str
from rmqlab.controller.impl.event.event_message import EventMessage
from rmqlab.controller.impl.event.event_type import EventType
from rmqlab.remoting.protocol.body.sync_state_set import java_long_set_order, read_long_set


@dataclass(frozen=True)
class AlterSyncStateSetEvent(EventMessage):
    EVENT_TYPE = EventType.ALTER_SYNC_STATE_SET_EVENT

    broker_name: str
    new_sync_state_set: frozenset[int]

    def __post_init__(self) -> None:
        object.__setattr__(self, "new_sync_state_set", frozenset(self.new_sync_state_set))

    def _properties(self) -> dict[str, Any]:
        return {"brokerName": self.broker_name, "newSyncStateSet": java_long_set_order(self.new_sync_state_set)}

    @classmethod
    def from_json_dict(cls, obj: dict[str, Any]) -> AlterSyncStateSetEvent:
        return cls(check_str(obj.get("brokerName"), "AlterSyncStateSetEvent.brokerName"),
                   read_long_set(obj.get("newSyncStateSet"), "AlterSyncStateSetEvent.newSyncStateSet"))
