"""BROKER_HEARTBEAT (904) request header (``BrokerHeartbeatRequestHeader.java``).

One class serves two receivers: the name server reads clusterName and brokerAddr (it refreshes the
broker's live entry); the controller (RIP-44, ``DefaultBrokerHeartbeatManager``) reads the rest.
"""

from __future__ import annotations

from dataclasses import dataclass

from rmqlab.remoting.protocol.header.command_custom_header import (INTEGER, LONG, STRING, CommandCustomHeader,
                                                                   header_field)


@dataclass
class BrokerHeartbeatRequestHeader(CommandCustomHeader):
    cluster_name: str = header_field("clusterName", STRING, not_null=True)
    broker_addr: str = header_field("brokerAddr", STRING, not_null=True)
    broker_name: str = header_field("brokerName", STRING, not_null=True)
    broker_id: int | None = header_field("brokerId", LONG)
    epoch: int | None = header_field("epoch", INTEGER)
    max_offset: int | None = header_field("maxOffset", LONG)
    confirm_offset: int | None = header_field("confirmOffset", LONG)
    heartbeat_timeout_mills: int | None = header_field("heartbeatTimeoutMills", LONG)  # sic: "Mills"
    election_priority: int | None = header_field("electionPriority", INTEGER)
