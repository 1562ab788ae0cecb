"""EventSerializer: one event as bytes for a Raft log entry (``impl/event/EventSerializer.java``).

Layout: a big-endian short, the event type id (1, 2, 3, 5 or 6), then the event's JSON exactly as
RocketMQ's FastJsonSerializer writes it, e.g. for an election::

    00 03 {"brokerName":"broker-a","eventType":"ELECT_MASTER_EVENT","newMasterBrokerId":1,"newMasterElected":true}

The form is deterministic (properties alphabetical, id sets in Java HashSet order), so
``serialize(deserialize(b)) == b`` for everything ``serialize`` writes, and every replica that
applies the same bytes reaches the same state.

Deviation: RocketMQ's deserializer answers null for a short buffer or an unknown id (the state
machine then skips the entry silently). Here both raise ValueError naming the problem: a log entry
the state machine cannot read is corruption, and skipping it would make replicas diverge unseen.
"""

from __future__ import annotations

import struct

from rmqlab.controller.impl.event.alter_sync_state_set_event import AlterSyncStateSetEvent
from rmqlab.controller.impl.event.apply_broker_id_event import ApplyBrokerIdEvent
from rmqlab.controller.impl.event.clean_broker_data_event import CleanBrokerDataEvent
from rmqlab.controller.impl.event.elect_master_event import ElectMasterEvent
from rmqlab.controller.impl.event.event_message import EventMessage
from rmqlab.controller.impl.event.event_type import EventType
from rmqlab.controller.impl.event.update_broker_address_event import UpdateBrokerAddressEvent
from rmqlab.common.config_manager import check_object
from rmqlab.remoting.protocol import remoting_serializable

EVENT_CLASSES: dict[EventType, type[EventMessage]] = {
    EventType.ALTER_SYNC_STATE_SET_EVENT: AlterSyncStateSetEvent,
    EventType.APPLY_BROKER_ID_EVENT: ApplyBrokerIdEvent,
    EventType.ELECT_MASTER_EVENT: ElectMasterEvent,
    EventType.CLEAN_BROKER_DATA_EVENT: CleanBrokerDataEvent,
    EventType.UPDATE_BROKER_ADDRESS: UpdateBrokerAddressEvent,
}

_SHORT = struct.Struct(">h")


def event_from_json(event_type: EventType, data: bytes) -> EventMessage:
    """The event of type ``event_type`` from its JSON bytes (ValueError naming what is wrong)."""
    cls = EVENT_CLASSES.get(event_type)
    if cls is None:
        raise ValueError(f"controller event: {event_type.event_name} carries no data and is never serialised")
    obj = check_object(remoting_serializable.decode_json(data, event_type.event_name), event_type.event_name)
    written = obj.get("eventType")
    if written is not None and written != event_type.name:
        raise ValueError(f"{event_type.event_name}: the JSON says eventType {written!r}, the type id says "
                         f"{event_type.name}")
    return cls.from_json_dict(obj)


def event_type_from_id(event_id: int) -> EventType:
    event_type = EventType.from_id(event_id)
    if event_type is None:
        raise ValueError(f"controller event: unknown event type id {event_id}")
    return event_type


class EventSerializer:
    """``serialize(event) -> bytes`` and ``deserialize(bytes) -> event``."""

    @staticmethod
    def serialize(event: EventMessage) -> bytes:
        if not isinstance(event, EventMessage):
            raise TypeError(f"EventSerializer.serialize: expected an EventMessage, got {type(event).__name__}")
        return _SHORT.pack(event.event_type.id) + event.to_json_bytes()

    @staticmethod
    def deserialize(data: bytes | bytearray | memoryview) -> EventMessage:
        data = bytes(data)
        if len(data) < 3:
            raise ValueError(f"controller event: {len(data)} bytes is too short (a 2-byte type id and a JSON body)")
        (event_id,) = _SHORT.unpack_from(data, 0)
        return event_from_json(event_type_from_id(event_id), data[2:])
