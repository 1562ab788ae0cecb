"""Headers of the queries RIP-32 lets a slave acting as master answer, and of the broker's config
requests: SEARCH_OFFSET_BY_TIMESTAMP (29), GET_EARLIEST_MSG_STORETIME (32), GET_BROKER_CONFIG (26).
(GET_MAX_OFFSET and GET_MIN_OFFSET are in ``consumer_offset``; UPDATE_BROKER_CONFIG has no header,
its body is the properties text.)

RocketMQ: ``remoting/.../protocol/header/SearchOffset{Request,Response}Header.java``,
``GetEarliestMsgStoretime{Request,Response}Header.java``, ``GetBrokerConfigResponseHeader.java``.
"""

from __future__ import annotations

from dataclasses import dataclass

from rmqlab.common.boundary_type import BoundaryType
from rmqlab.remoting.protocol.header.command_custom_header import (
    INTEGER, LONG, STRING, CommandCustomHeader, header_field)


@dataclass
class SearchOffsetRequestHeader(CommandCustomHeader):
    topic: str = header_field("topic", STRING, not_null=True)
    queue_id: int = header_field("queueId", INTEGER, not_null=True)
    timestamp: int = header_field("timestamp", LONG, not_null=True)
    # The enum's Java toString() ("LOWER"/"UPPER"); absent means LOWER (getBoundaryType).
    boundary_type: str | None = header_field("boundaryType", STRING)

    def get_boundary_type(self) -> BoundaryType:
        return BoundaryType.get_type(self.boundary_type)


@dataclass
class SearchOffsetResponseHeader(CommandCustomHeader):
    offset: int | None = header_field("offset", LONG, not_null=True)


@dataclass
class GetEarliestMsgStoretimeRequestHeader(CommandCustomHeader):
    topic: str = header_field("topic", STRING, not_null=True)
    queue_id: int = header_field("queueId", INTEGER, not_null=True)


@dataclass
class GetEarliestMsgStoretimeResponseHeader(CommandCustomHeader):
    timestamp: int | None = header_field("timestamp", LONG, not_null=True)


@dataclass
class GetBrokerConfigResponseHeader(CommandCustomHeader):
    # The broker Configuration's DataVersion, as JSON.
    version: str | None = header_field("version", STRING, not_null=True)
