"""UNREGISTER_BROKER (104) request header (``UnRegisterBrokerRequestHeader.java``): what a broker
sends to every name server when it shuts down cleanly."""

from __future__ import annotations

from dataclasses import dataclass

from rmqlab.remoting.protocol.header.command_custom_header import LONG, STRING, CommandCustomHeader, header_field


@dataclass
class UnRegisterBrokerRequestHeader(CommandCustomHeader):
    broker_name: str = header_field("brokerName", STRING, not_null=True)
    broker_addr: str = header_field("brokerAddr", STRING, not_null=True)
    cluster_name: str = header_field("clusterName", STRING, not_null=True)
    broker_id: int = header_field("brokerId", LONG, not_null=True)
