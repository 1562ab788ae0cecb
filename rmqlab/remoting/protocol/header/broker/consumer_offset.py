"""Headers of the offset requests: QUERY_CONSUMER_OFFSET (14), UPDATE_CONSUMER_OFFSET (15),
GET_MAX_OFFSET (30) and GET_MIN_OFFSET (31).

RocketMQ: ``remoting/.../protocol/header/QueryConsumerOffset{Request,Response}Header.java``,
``UpdateConsumerOffset{Request,Response}Header.java``, ``GetMaxOffset{Request,Response}Header.java``,
``GetMinOffset{Request,Response}Header.java``.
"""

from __future__ import annotations

from dataclasses import dataclass

from rmqlab.remoting.protocol.header.command_custom_header import (
    BOOLEAN, INTEGER, LONG, STRING, CommandCustomHeader, header_field)


@dataclass
class QueryConsumerOffsetRequestHeader(CommandCustomHeader):
    consumer_group: str = header_field("consumerGroup", STRING, not_null=True)
    topic: str = header_field("topic", STRING, not_null=True)
    queue_id: int = header_field("queueId", INTEGER, not_null=True)
    # 5.x: false asks for QUERY_NOT_FOUND instead of the "offset 0 for a fresh queue" answer.
    set_zero_if_not_found: bool | None = header_field("setZeroIfNotFound", BOOLEAN)


@dataclass
class QueryConsumerOffsetResponseHeader(CommandCustomHeader):
    offset: int | None = header_field("offset", LONG, not_null=True)


@dataclass
class UpdateConsumerOffsetRequestHeader(CommandCustomHeader):
    consumer_group: str = header_field("consumerGroup", STRING, not_null=True)
    topic: str = header_field("topic", STRING, not_null=True)
    queue_id: int = header_field("queueId", INTEGER, not_null=True)
    commit_offset: int = header_field("commitOffset", LONG, not_null=True)


@dataclass
class UpdateConsumerOffsetResponseHeader(CommandCustomHeader):
    pass


@dataclass
class GetMaxOffsetRequestHeader(CommandCustomHeader):
    topic: str = header_field("topic", STRING, not_null=True)
    queue_id: int = header_field("queueId", INTEGER, not_null=True)
    # Declared by RocketMQ 5 (default true) but not read by AdminBrokerProcessor.getMaxOffset.
    committed: bool | None = header_field("committed", BOOLEAN, default=True)


@dataclass
class GetMaxOffsetResponseHeader(CommandCustomHeader):
    offset: int | None = header_field("offset", LONG, not_null=True)


@dataclass
class GetMinOffsetRequestHeader(CommandCustomHeader):
    topic: str = header_field("topic", STRING, not_null=True)
    queue_id: int = header_field("queueId", INTEGER, not_null=True)


@dataclass
class GetMinOffsetResponseHeader(CommandCustomHeader):
    offset: int | None = header_field("offset", LONG, not_null=True)
