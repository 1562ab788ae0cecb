"""BrokerReplicasInfo: per broker set, its master, epochs and replicas in and out of sync (1006).

RocketMQ's ``remoting/.../protocol/body/BrokerReplicasInfo.java`` with its nested ``ReplicasInfo``
and ``ReplicaIdentity`` (``ReplicasInfoManager.getSyncStateData``): the CONTROLLER_GET_SYNC_STATE_DATA
answer, what ``mqadmin getSyncStateSet`` prints. fastjson default dialect::

    {"replicasInfoTable":{"broker-a":{"inSyncReplicas":[{"alive":true,"brokerAddress":"127.0.0.1:30911",
        "brokerId":1,"brokerName":"broker-a"}],"masterAddress":"127.0.0.1:30911","masterBrokerId":1,
        "masterEpoch":1,"notInSyncReplicas":[],"syncStateSetEpoch":1}}}

``replicasInfoTable`` is a ``HashMap<String, ...>`` (default capacity), listed in its iteration order.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from rmqlab.common.config_manager import check_bool, check_int, check_long, check_object, check_str
from rmqlab.remoting.protocol import remoting_serializable

_HASH_MAP_CAPACITY = 16  # new HashMap<>() in the BrokerReplicasInfo constructor


def _opt(value: Any, check, where: str) -> Any:
    return None if value is None else check(value, where)


@dataclass
class ReplicaIdentity:
    """``BrokerReplicasInfo.ReplicaIdentity``: one replica and whether its heartbeat is current."""

    broker_name: str | None
    broker_id: int | None
    broker_address: str | None
    alive: bool | None = False

    def to_json_dict(self) -> dict[str, Any]:
        return {"alive": self.alive, "brokerAddress": self.broker_address, "brokerId": self.broker_id,
                "brokerName": self.broker_name}

    @classmethod
    def from_json_dict(cls, data: Any, where: str) -> ReplicaIdentity:
        obj = check_object(data, where)
        return cls(_opt(obj.get("brokerName"), check_str, f"{where}.brokerName"),
                   _opt(obj.get("brokerId"), check_long, f"{where}.brokerId"),
                   _opt(obj.get("brokerAddress"), check_str, f"{where}.brokerAddress"),
                   _opt(obj.get("alive"), check_bool, f"{where}.alive"))


def _replica_list(value: Any, where: str) -> list[ReplicaIdentity]:
    if value is None:
        return []
    if not isinstance(value, list):
        raise ValueError(f"{where}: expected an array")
    return [ReplicaIdentity.from_json_dict(item, f"{where}[{i}]") for i, item in enumerate(value)]


@dataclass
class ReplicasInfo:
    """``BrokerReplicasInfo.ReplicasInfo``: one broker set as the controller sees it."""

    master_broker_id: int | None
    master_address: str | None
    master_epoch: int
    sync_state_set_epoch: int
    in_sync_replicas: list[ReplicaIdentity] = field(default_factory=list)
    not_in_sync_replicas: list[ReplicaIdentity] = field(default_factory=list)

    def is_exist_in_sync(self, broker_name: str, broker_id: int, broker_address: str) -> bool:
        """``isExistInSync`` (ReplicaIdentity equality ignores ``alive``)."""
        return any((r.broker_name, r.broker_id, r.broker_address) == (broker_name, broker_id, broker_address)
                   for r in self.in_sync_replicas)

    def is_exist_in_not_sync(self, broker_name: str, broker_id: int, broker_address: str) -> bool:
        """``isExistInNotSync``."""
        return any((r.broker_name, r.broker_id, r.broker_address) == (broker_name, broker_id, broker_address)
                   for r in self.not_in_sync_replicas)

    def is_exist_in_all_replicas(self, broker_name: str, broker_id: int, broker_address: str) -> bool:
        """``isExistInAllReplicas``."""
        return (self.is_exist_in_sync(broker_name, broker_id, broker_address)
                or self.is_exist_in_not_sync(broker_name, broker_id, broker_address))

    def to_json_dict(self) -> dict[str, Any]:
        return {"inSyncReplicas": [r.to_json_dict() for r in self.in_sync_replicas],
                "masterAddress": self.master_address, "masterBrokerId": self.master_broker_id,
                "masterEpoch": self.master_epoch,
                "notInSyncReplicas": [r.to_json_dict() for r in self.not_in_sync_replicas],
                "syncStateSetEpoch": self.sync_state_set_epoch}

    @classmethod
    def from_json_dict(cls, data: Any, where: str) -> ReplicasInfo:
        obj = check_object(data, where)
        master_epoch, ss_epoch = obj.get("masterEpoch"), obj.get("syncStateSetEpoch")
        return cls(_opt(obj.get("masterBrokerId"), check_long, f"{where}.masterBrokerId"),
                   _opt(obj.get("masterAddress"), check_str, f"{where}.masterAddress"),
                   0 if master_epoch is None else check_int(master_epoch, f"{where}.masterEpoch"),
                   0 if ss_epoch is None else check_int(ss_epoch, f"{where}.syncStateSetEpoch"),
                   _replica_list(obj.get("inSyncReplicas"), f"{where}.inSyncReplicas"),
                   _replica_list(obj.get("notInSyncReplicas"), f"{where}.notInSyncReplicas"))


@dataclass
class BrokerReplicasInfo:
    """``replicasInfoTable``: brokerName -> ReplicasInfo, in the order the sets were added."""

    replicas_info_table: dict[str, ReplicasInfo] = field(default_factory=dict)

    def add_replica_info(self, broker_name: str, replicas_info: ReplicasInfo) -> None:
        """``addReplicaInfo``."""
        self.replicas_info_table[broker_name] = replicas_info

    def to_json_dict(self) -> dict[str, Any]:
        order = remoting_serializable.hash_map_order(self.replicas_info_table, _HASH_MAP_CAPACITY)
        return {"replicasInfoTable": {name: self.replicas_info_table[name].to_json_dict() for name in order}}

    def encode(self) -> bytes:
        return remoting_serializable.encode(self.to_json_dict())

    @classmethod
    def from_json_dict(cls, data: Any, where: str = "BrokerReplicasInfo") -> BrokerReplicasInfo:
        obj = check_object(data, where)
        table = check_object(obj.get("replicasInfoTable") or {}, f"{where}.replicasInfoTable")
        return cls({name: ReplicasInfo.from_json_dict(info, f"{where}.replicasInfoTable.{name}")
                    for name, info in table.items()})

    @classmethod
    def decode(cls, body: bytes | None) -> BrokerReplicasInfo:
        return cls.from_json_dict(remoting_serializable.decode_json(body, "BrokerReplicasInfo"))
