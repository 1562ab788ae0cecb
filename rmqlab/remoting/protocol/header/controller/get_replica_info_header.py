"""CONTROLLER_GET_REPLICA_INFO (1004) headers (``header/controller/GetReplicaInfo*Header.java``).

A broker polls its set's master and epochs (``ReplicasInfoManager.getReplicaInfo``,
``ReplicasManager``); the body of the answer is the SyncStateSet.
"""

from __future__ import annotations

from dataclasses import dataclass

from rmqlab.remoting.protocol.header.command_custom_header import (INTEGER, LONG, STRING, CommandCustomHeader,
                                                                   header_field)


@dataclass
class GetReplicaInfoRequestHeader(CommandCustomHeader):
    broker_name: str | None = header_field("brokerName", STRING)


@dataclass
class GetReplicaInfoResponseHeader(CommandCustomHeader):
    master_broker_id: int | None = header_field("masterBrokerId", LONG)
    master_address: str | None = header_field("masterAddress", STRING)
    master_epoch: int | None = header_field("masterEpoch", INTEGER)
