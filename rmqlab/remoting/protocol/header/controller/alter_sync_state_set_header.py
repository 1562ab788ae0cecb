"""CONTROLLER_ALTER_SYNC_STATE_SET (1001) headers (``header/controller/AlterSyncStateSet*Header.java``).

The master proposes a new SyncStateSet (body :class:`~rmqlab.remoting.protocol.body.sync_state_set.SyncStateSet`
with the set and the syncStateSetEpoch it is based on); the controller answers the new epoch
(``ReplicasInfoManager.alterSyncStateSet``, ``ReplicasManager.checkSyncStateSetAndDoReport``).
"""

from __future__ import annotations

from dataclasses import dataclass

from rmqlab.remoting.protocol.header.command_custom_header import (INTEGER, LONG, STRING, CommandCustomHeader,
                                                                   header_field)


@dataclass
class AlterSyncStateSetRequestHeader(CommandCustomHeader):
    broker_name: str | None = header_field("brokerName", STRING)
    master_broker_id: int | None = header_field("masterBrokerId", LONG)
    master_epoch: int | None = header_field("masterEpoch", INTEGER)
    # Java initialises it to System.currentTimeMillis() and always sends it; only the jRaft
    # controller reads it (liveness is judged at that time). None here means "not sent".
    invoke_time: int | None = header_field("invokeTime", LONG)


@dataclass
class AlterSyncStateSetResponseHeader(CommandCustomHeader):
    new_sync_state_set_epoch: int = header_field("newSyncStateSetEpoch", INTEGER, default=0)
