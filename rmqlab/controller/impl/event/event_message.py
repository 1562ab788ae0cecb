"""EventMessage: what every controller event is (``impl/event/EventMessage.java``).

An event is an immutable fact computed by the leader (``ReplicasInfoManager``'s request methods),
replicated through the Raft log and applied in log order by every replica
(``ReplicasInfoManager.apply_event``). Its body is the JSON fastjson writes for the Java event:
bean properties in alphabetical order, ``eventType`` by enum name, nulls left out.
"""

from __future__ import annotations

import abc
from typing import Any, ClassVar

from rmqlab.controller.impl.event.event_type import EventType
from rmqlab.remoting.protocol import remoting_serializable


class EventMessage(abc.ABC):
    """Base of the event classes: ``event_type`` plus the JSON body both ways."""

    EVENT_TYPE: ClassVar[EventType]

    @property
    def event_type(self) -> EventType:
        """``getEventType``."""
        return self.EVENT_TYPE

    @abc.abstractmethod
    def _properties(self) -> dict[str, Any]:
        """The bean properties other than eventType, by their Java names."""

    def to_json_dict(self) -> dict[str, Any]:
        props = self._properties()
        props["eventType"] = self.EVENT_TYPE.name
        return {key: props[key] for key in sorted(props)}

    def to_json_bytes(self) -> bytes:
        """The event's JSON as fastjson writes it (``FastJsonSerializer.serialize``)."""
        return remoting_serializable.encode(self.to_json_dict())

    @classmethod
    @abc.abstractmethod
    def from_json_dict(cls, obj: dict[str, Any]) -> EventMessage:
        """The event from its JSON object (``eventType`` already checked by the caller)."""
