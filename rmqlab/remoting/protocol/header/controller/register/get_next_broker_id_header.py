"""CONTROLLER_GET_NEXT_BROKER_ID (1012) headers (``header/controller/register/GetNextBrokerId*Header.java``).

Step 1 of a new broker's registration (``ReplicasManager.getNextBrokerId``): which controller id to try.
"""

from __future__ import annotations

from dataclasses import dataclass

from rmqlab.remoting.protocol.header.command_custom_header import LONG, STRING, CommandCustomHeader, header_field


@dataclass
class GetNextBrokerIdRequestHeader(CommandCustomHeader):
    cluster_name: str | None = header_field("clusterName", STRING)
    broker_name: str | None = header_field("brokerName", STRING)


@dataclass
class GetNextBrokerIdResponseHeader(CommandCustomHeader):
    cluster_name: str | None = header_field("clusterName", STRING)
    broker_name: str | None = header_field("brokerName", STRING)
    next_broker_id: int | None = header_field("nextBrokerId", LONG)
