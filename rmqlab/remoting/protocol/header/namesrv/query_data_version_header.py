"""QUERY_DATA_VERSION (322) request and response headers (``QueryDataVersionRequestHeader.java``,
``QueryDataVersionResponseHeader.java``).

A broker asks whether the name server's copy of its topic table is current: the request body is
the broker's DataVersion JSON, the response body the name server's stored one and ``changed`` says
whether they differ. With ``compatibleWithOldNameSrv`` (the default) brokers send it as their
heartbeat, since the name server refreshes the broker's live entry on it too
(``RouteInfoManager.queryBrokerTopicConfig``).
"""

from __future__ import annotations

from dataclasses import dataclass

from rmqlab.remoting.protocol.header.command_custom_header import BOOLEAN, LONG, STRING, CommandCustomHeader, header_field


@dataclass
class QueryDataVersionRequestHeader(CommandCustomHeader):
    broker_name: str = header_field("brokerName", STRING, not_null=True)
    broker_addr: str = header_field("brokerAddr", STRING, not_null=True)
    cluster_name: str = header_field("clusterName", STRING, not_null=True)
    broker_id: int = header_field("brokerId", LONG, not_null=True)


@dataclass
class QueryDataVersionResponseHeader(CommandCustomHeader):
    changed: bool = header_field("changed", BOOLEAN, not_null=True)
