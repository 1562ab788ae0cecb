"""NOTIFY_BROKER_ROLE_CHANGED (1008) request header (``header/NotifyBrokerRoleChangedRequestHeader.java``).

RocketMQ keeps this class one package up, in ``protocol/header``; it lives here with the other
controller headers because only the controller sends it. The controller pushes an election's
result to every live member of the set (oneway; body SyncStateSet;
``ControllerManager.notifyBrokerRoleChanged``); the broker acts on it only if masterEpoch is newer than its own (``ReplicasManager.changeBrokerRole``).
"""

from __future__ import annotations

from dataclasses import dataclass

from rmqlab.remoting.protocol.header.command_custom_header import (INTEGER, LONG, STRING, CommandCustomHeader,
                                                                   header_field)


@dataclass
class NotifyBrokerRoleChangedRequestHeader(CommandCustomHeader):
    master_address: str | None = header_field("masterAddress", STRING)
    master_epoch: int | None = header_field("masterEpoch", INTEGER)
    sync_state_set_epoch: int | None = header_field("syncStateSetEpoch", INTEGER)
    master_broker_id: int | None = header_field("masterBrokerId", LONG)
