"""Client-management headers and bodies: GET_CONSUMER_LIST_BY_GROUP (38), UNREGISTER_CLIENT (35)
and NOTIFY_CONSUMER_IDS_CHANGED (40, broker -> consumer).

RocketMQ: ``remoting/.../protocol/header/GetConsumerListByGroup{Request,Response}Header.java``,
``body/GetConsumerListByGroupResponseBody.java``, ``header/UnregisterClient{Request,Response}Header.java``
and ``header/NotifyConsumerIdsChangedRequestHeader.java``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

from rmqlab.common.config_manager import to_fastjson
from rmqlab.remoting.protocol.header.command_custom_header import (
    STRING, CommandCustomHeader, header_field)


@dataclass
class GetConsumerListByGroupRequestHeader(CommandCustomHeader):
    consumer_group: str = header_field("consumerGroup", STRING, not_null=True)


@dataclass
class GetConsumerListByGroupResponseBody:
    """``{"consumerIdList":[clientID, ...]}`` (what the C++ client reads for rebalancing)."""

    consumer_id_list: list[str] = field(default_factory=list)

    def encode(self) -> bytes:
        return to_fastjson({"consumerIdList": list(self.consumer_id_list)}).encode("utf-8")

    @classmethod
    def decode(cls, body: bytes) -> GetConsumerListByGroupResponseBody:
        doc = json.loads(body.decode("utf-8"))
        ids = doc.get("consumerIdList") or []
        if not isinstance(ids, list) or not all(isinstance(i, str) for i in ids):
            raise ValueError(f"consumerIdList must be a list of strings, got {ids!r}")
        return cls(list(ids))


@dataclass
class UnregisterClientRequestHeader(CommandCustomHeader):
    client_id: str = header_field("clientID", STRING, not_null=True)
    producer_group: str | None = header_field("producerGroup", STRING)
    consumer_group: str | None = header_field("consumerGroup", STRING)


@dataclass
class NotifyConsumerIdsChangedRequestHeader(CommandCustomHeader):
    consumer_group: str = header_field("consumerGroup", STRING, not_null=True)
