"""NOTIFY_MIN_BROKER_ID_CHANGE (905) request header (``header/NotifyMinBrokerIdChangeRequestHeader.java``,
outside ``header/namesrv`` in RocketMQ too).

The name server sends it, oneway, to the members of a broker group whose smallest broker id changed
(RIP-32, slave acting master); every field is nullable in RocketMQ.
"""

from __future__ import annotations

from dataclasses import dataclass

from rmqlab.remoting.protocol.header.command_custom_header import LONG, STRING, CommandCustomHeader, header_field


@dataclass
class NotifyMinBrokerIdChangeRequestHeader(CommandCustomHeader):
    min_broker_id: int | None = header_field("minBrokerId", LONG)
    broker_name: str | None = header_field("brokerName", STRING)
    min_broker_addr: str | None = header_field("minBrokerAddr", STRING)
    offline_broker_addr: str | None = header_field("offlineBrokerAddr", STRING)
    ha_broker_addr: str | None = header_field("haBrokerAddr", STRING)
