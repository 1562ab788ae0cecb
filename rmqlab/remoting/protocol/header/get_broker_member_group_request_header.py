"""GET_BROKER_MEMBER_GROUP (901) request header (``header/GetBrokerMemberGroupRequestHeader.java``,
outside ``header/namesrv`` in RocketMQ too)."""

from __future__ import annotations

from dataclasses import dataclass

from rmqlab.remoting.protocol.header.command_custom_header import STRING, CommandCustomHeader, header_field


@dataclass
class GetBrokerMemberGroupRequestHeader(CommandCustomHeader):
    cluster_name: str = header_field("clusterName", STRING, not_null=True)
    broker_name: str = header_field("brokerName", STRING, not_null=True)
