"""CONTROLLER_ELECT_MASTER (1002) headers (``header/controller/ElectMaster*Header.java``).

Three callers, three factories (``ReplicasInfoManager.electMaster``; the election triggers of
"一文详解 RocketMQ 如何利用 Raft 进行高可用保障"):

* a broker that found no master (``of_broker_trigger``): its own id; on a never-elected set it
  becomes the first master;
* the controller, when a master's heartbeat lapsed (``of_controller_trigger``): brokerId -1 and
  clusterName "", so a failed election still records "no master" (CONTROLLER_MASTER_NOT_AVAILABLE);
* an operator (``mqadmin electMaster``, ``of_admin_trigger``): designateElect, the id to elect.
"""

from __future__ import annotations

from dataclasses import dataclass

from rmqlab.remoting.protocol.header.command_custom_header import (BOOLEAN, INTEGER, LONG, STRING,
                                                                   CommandCustomHeader, header_field)


@dataclass
class ElectMasterRequestHeader(CommandCustomHeader):
    cluster_name: str = header_field("clusterName", STRING, not_null=True, default="")
    broker_name: str = header_field("brokerName", STRING, not_null=True, default="")
    # Broker trigger: the id to elect if this is the set's first election. Admin trigger: the
    # designated ("assigned") id. Controller trigger: -1.
    broker_id: int | None = header_field("brokerId", LONG, not_null=True, default=-1)
    designate_elect: bool = header_field("designateElect", BOOLEAN, not_null=True, default=False)
    invoke_time: int | None = header_field("invokeTime", LONG)

    @classmethod
    def of_broker_trigger(cls, cluster_name: str, broker_name: str, broker_id: int) -> ElectMasterRequestHeader:
        """``ofBrokerTrigger``: a broker asks for an election, offering itself for the first one."""
        return cls(cluster_name, broker_name, broker_id, False)

    @classmethod
    def of_controller_trigger(cls, broker_name: str) -> ElectMasterRequestHeader:
        """``ofControllerTrigger``: the controller re-elects after the master went inactive."""
        return cls("", broker_name, -1, False)

    @classmethod
    def of_admin_trigger(cls, cluster_name: str, broker_name: str, broker_id: int) -> ElectMasterRequestHeader:
        """``ofAdminTrigger``: an operator designates ``broker_id``."""
        return cls(cluster_name, broker_name, broker_id, True)


@dataclass
class ElectMasterResponseHeader(CommandCustomHeader):
    master_broker_id: int | None = header_field("masterBrokerId", LONG)
    master_address: str | None = header_field("masterAddress", STRING)
    master_epoch: int | None = header_field("masterEpoch", INTEGER)
    sync_state_set_epoch: int | None = header_field("syncStateSetEpoch", INTEGER)
