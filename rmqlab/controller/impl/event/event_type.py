"""EventType: the kinds of controller events and their wire ids (``impl/event/EventType.java``)."""

from __future__ import annotations

from enum import Enum


class EventType(Enum):
    """Each member's value is ``(name, id)``; ``id`` is the short written before the event's JSON."""

    ALTER_SYNC_STATE_SET_EVENT = ("AlterSyncStateSetEvent", 1)
    APPLY_BROKER_ID_EVENT = ("ApplyBrokerIdEvent", 2)
    ELECT_MASTER_EVENT = ("ElectMasterEvent", 3)
    # A read request sent through the log when isProcessReadEvent is on; it has no payload and
    # changes nothing, so it is never serialised (as in RocketMQ's EventSerializer).
    READ_EVENT = ("ReadEvent", 4)
    CLEAN_BROKER_DATA_EVENT = ("CleanBrokerDataEvent", 5)
    UPDATE_BROKER_ADDRESS = ("UpdateBrokerAddressEvent", 6)

    @property
    def event_name(self) -> str:
        """``getName``: the event class's simple name."""
        return self.value[0]

    @property
    def id(self) -> int:
        """``getId``."""
        return self.value[1]

    @classmethod
    def from_id(cls, event_id: int) -> EventType | None:
        """``EventType.from(short)``: None for an unknown id."""
        for member in cls:
            if member.id == event_id:
                return member
        return None
