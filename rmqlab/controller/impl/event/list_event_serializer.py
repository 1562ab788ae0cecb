"""ListEventSerializer: the events of one request as one log entry (``impl/event/ListEventSerializer.java``).

RocketMQ's jRaft controller appends a request's events as a single Raft entry, so they are
committed and applied together; the DLedger controller does the same with a batch. Layout, repeated
per event: big-endian short type id, big-endian int length, that many bytes of the event's JSON
(as :class:`~rmqlab.controller.impl.event.event_serializer.EventSerializer` writes it).

Deviation: RocketMQ logs and skips an undecodable element, and ignores a buffer of 6 bytes or less;
here an empty buffer is an empty list and anything malformed raises ValueError (see EventSerializer).
"""

from __future__ import annotations

import struct
from collections.abc import Iterable

from rmqlab.controller.impl.event.event_message import EventMessage
from rmqlab.controller.impl.event.event_serializer import event_from_json, event_type_from_id

_HEAD = struct.Struct(">hi")


class ListEventSerializer:
    @staticmethod
    def serialize(events: Iterable[EventMessage]) -> bytes:
        out = bytearray()
        for event in events:
            if not isinstance(event, EventMessage):
                raise TypeError(f"ListEventSerializer.serialize: expected EventMessages, got {type(event).__name__}")
            data = event.to_json_bytes()
            out += _HEAD.pack(event.event_type.id, len(data))
            out += data
        return bytes(out)

    @staticmethod
    def deserialize(data: bytes | bytearray | memoryview) -> list[EventMessage]:
        data = bytes(data)
        events: list[EventMessage] = []
        index = 0
        while index < len(data):
            if len(data) - index < _HEAD.size:
                raise ValueError(f"controller event list: {len(data) - index} stray bytes at offset {index}")
            event_id, length = _HEAD.unpack_from(data, index)
            index += _HEAD.size
            if length <= 0 or index + length > len(data):
                raise ValueError(f"controller event list: event #{len(events)} at offset {index - _HEAD.size} "
                                 f"declares {length} bytes, {len(data) - index} remain")
            events.append(event_from_json(event_type_from_id(event_id), data[index:index + length]))
            index += length
        return events
