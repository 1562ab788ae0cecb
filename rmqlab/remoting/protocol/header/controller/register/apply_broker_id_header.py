"""CONTROLLER_APPLY_BROKER_ID (1013) headers (``header/controller/register/ApplyBrokerId*Header.java``).

Step 2 of a new broker's registration (``ReplicasManager.applyBrokerId``): claim ``appliedBrokerId`` with
``registerCheckCode`` = ``brokerAddress;currentTimeMillis`` (the code also lets a broker that
crashed after claiming re-claim the same id).
"""

from __future__ import annotations

from dataclasses import dataclass

from rmqlab.remoting.protocol.header.command_custom_header import LONG, STRING, CommandCustomHeader, header_field


@dataclass
class ApplyBrokerIdRequestHeader(CommandCustomHeader):
    cluster_name: str | None = header_field("clusterName", STRING)
    broker_name: str | None = header_field("brokerName", STRING)
    applied_broker_id: int | None = header_field("appliedBrokerId", LONG)
    register_check_code: str | None = header_field("registerCheckCode", STRING)


@dataclass
class ApplyBrokerIdResponseHeader(CommandCustomHeader):
    cluster_name: str | None = header_field("clusterName", STRING)
    broker_name: str | None = header_field("brokerName", STRING)
