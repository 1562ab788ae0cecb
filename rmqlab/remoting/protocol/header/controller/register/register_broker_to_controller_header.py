"""CONTROLLER_REGISTER_BROKER (1003) headers (``header/controller/register/RegisterBrokerToController*Header.java``).

Step 3 of a broker's registration, and every restart
(``ReplicasManager.registerBrokerToController``): the broker reports its id and current address; the answer names the master (only if one exists and is alive)
and the body is the SyncStateSet.
"""

from __future__ import annotations

from dataclasses import dataclass

from rmqlab.remoting.protocol.header.command_custom_header import (INTEGER, LONG, STRING, CommandCustomHeader,
                                                                   header_field)


@dataclass
class RegisterBrokerToControllerRequestHeader(CommandCustomHeader):
    cluster_name: str | None = header_field("clusterName", STRING)
    broker_name: str | None = header_field("brokerName", STRING)
    broker_id: int | None = header_field("brokerId", LONG)
    broker_address: str | None = header_field("brokerAddress", STRING)
    # Java's four-argument constructor sets it to System.currentTimeMillis(); only the jRaft
    # controller reads it. None here means "not sent".
    invoke_time: int | None = header_field("invokeTime", LONG)


@dataclass
class RegisterBrokerToControllerResponseHeader(CommandCustomHeader):
    cluster_name: str | None = header_field("clusterName", STRING)
    broker_name: str | None = header_field("brokerName", STRING)
    master_broker_id: int | None = header_field("masterBrokerId", LONG)
    master_address: str | None = header_field("masterAddress", STRING)
    master_epoch: int | None = header_field("masterEpoch", INTEGER)
    sync_state_set_epoch: int | None = header_field("syncStateSetEpoch", INTEGER)
