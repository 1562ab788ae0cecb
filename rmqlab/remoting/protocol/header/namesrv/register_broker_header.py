"""REGISTER_BROKER (103) request and response headers.

RocketMQ's ``remoting/.../protocol/header/namesrv/RegisterBrokerRequestHeader.java`` and
``RegisterBrokerResponseHeader.java``. What a Java broker sends (``BrokerOuterAPI.registerBrokerAll``):
brokerAddr, brokerId, brokerName, clusterName, haServerAddr, enableActingMaster, compressed (always
"false", see RegisterBrokerBody's quirk), bodyCrc32 (``UtilAll.crc32`` of the body), and
heartbeatTimeoutMillis only when slave-acting-master is enabled. A zone name, when the broker has
one, travels as the extra extFields entry ``__ZONE_NAME`` (``MixAll.ZONE_NAME``), outside the header
class.
"""

from __future__ import annotations

from dataclasses import dataclass

from rmqlab.remoting.protocol.header.command_custom_header import (BOOLEAN, INTEGER, LONG, STRING,
                                                                   CommandCustomHeader, header_field)

ZONE_NAME = "__ZONE_NAME"  # MixAll.ZONE_NAME


@dataclass
class RegisterBrokerRequestHeader(CommandCustomHeader):
    broker_name: str = header_field("brokerName", STRING, not_null=True)
    broker_addr: str = header_field("brokerAddr", STRING, not_null=True)
    cluster_name: str = header_field("clusterName", STRING, not_null=True)
    # Where slaves connect for replication (brokerIP2:haListenPort).
    ha_server_addr: str = header_field("haServerAddr", STRING, not_null=True)
    broker_id: int = header_field("brokerId", LONG, not_null=True)
    # The live-table timeout for this broker; absent: the name server's 120 s.
    heartbeat_timeout_millis: int | None = header_field("heartbeatTimeoutMillis", LONG)
    # Absent marks a broker older than RIP-32 (it then never counts as a "prime slave").
    enable_acting_master: bool | None = header_field("enableActingMaster", BOOLEAN)
    compressed: bool = header_field("compressed", BOOLEAN, default=False)
    # 0 means "not computed": the name server then skips the check.
    body_crc32: int = header_field("bodyCrc32", INTEGER, default=0)


@dataclass
class RegisterBrokerResponseHeader(CommandCustomHeader):
    """For a slave: the master's HA address and broker address (absent when no master is
    registered and live). A classic slave replicates from ``ha_server_addr``."""

    ha_server_addr: str | None = header_field("haServerAddr", STRING)
    master_addr: str | None = header_field("masterAddr", STRING)
