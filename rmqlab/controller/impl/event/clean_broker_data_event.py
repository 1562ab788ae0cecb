"""CleanBrokerDataEvent (id 5): forget replicas or a whole broker set (``impl/event/CleanBrokerDataEvent.java``).

Applied (``ReplicasInfoManager.applyEvent``): no ids (null or empty): both tables drop the set.
Otherwise each id leaves the replica table and the SyncStateSet, and a table left empty drops the
set, so a set can vanish while replicas remain (the master id, if cleaned, stays recorded as master,
as in RocketMQ).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from rmqlab.common.config_manager import check_str
from rmqlab.controller.impl.event.event_message import EventMessage
from rmqlab.controller.impl.event.event_type import EventType
from rmqlab.remoting.protocol.body.sync_state_set import java_long_set_order, read_long_set


@dataclass(frozen=True)
class CleanBrokerDataEvent(EventMessage):
    EVENT_TYPE = EventType.CLEAN_BROKER_DATA_EVENT

    broker_name: str
    broker_id_set_to_clean: frozenset[int] | None = None

    def __post_init__(self) -> None:
        if self.broker_id_set_to_clean is not None:
            object.__setattr__(self, "broker_id_set_to_clean", frozenset(self.broker_id_set_to_clean))

    def _properties(self) -> dict[str, Any]:
        ids = self.broker_id_set_to_clean
        return {"brokerIdSetToClean": None if ids is None else java_long_set_order(ids),
                "brokerName": self.broker_name}

    @classmethod
    def from_json_dict(cls, obj: dict[str, Any]) -> CleanBrokerDataEvent:
        ids = obj.get("brokerIdSetToClean")
        return cls(check_str(obj.get("brokerName"), "CleanBrokerDataEvent.brokerName"),
                   None if ids is None else read_long_set(ids, "CleanBrokerDataEvent.brokerIdSetToClean"))
