"""BrokerReplicaInfo: a broker set's registered replicas (``impl/manager/BrokerReplicaInfo.java``).

``broker_id_info``: controller id -> (address, registerCheckCode). ``next_assign_broker_id``
starts at 1 (``MixAll.FIRST_BROKER_CONTROLLER_ID``) and grows by one on **every** ``add_broker``,
whatever id was added (RocketMQ's ``BrokerReplicaInfo.addBroker``: it counts additions, not the
largest id).
"""

from __future__ import annotations

from typing import Any

from rmqlab.common.config_manager import check_long, check_object, check_str

FIRST_BROKER_CONTROLLER_ID = 1  # MixAll.FIRST_BROKER_CONTROLLER_ID


class BrokerReplicaInfo:
    def __init__(self, cluster_name: str | None, broker_name: str):
        self.cluster_name = cluster_name
        self.broker_name = broker_name
        self.next_assign_broker_id = FIRST_BROKER_CONTROLLER_ID
        self.broker_id_info: dict[int, tuple[str, str]] = {}

    def remove_broker_id(self, broker_id: int) -> None:
        self.broker_id_info.pop(broker_id, None)

    def add_broker(self, broker_id: int, ip_address: str, register_check_code: str) -> None:
        self.broker_id_info[broker_id] = (ip_address, register_check_code)
        self.next_assign_broker_id += 1

    def is_broker_exist(self, broker_id: int | None) -> bool:
        return broker_id in self.broker_id_info

    def get_all_broker(self) -> frozenset[int]:
        return frozenset(self.broker_id_info)

    def get_broker_id_table(self) -> dict[int, str]:
        """``getBrokerIdTable``: id -> address, ascending ids."""
        return {broker_id: self.broker_id_info[broker_id][0] for broker_id in sorted(self.broker_id_info)}

    def get_broker_address(self, broker_id: int | None) -> str | None:
        pair = self.broker_id_info.get(broker_id) if broker_id is not None else None
        return pair[0] if pair is not None else None

    def get_broker_register_check_code(self, broker_id: int | None) -> str | None:
        pair = self.broker_id_info.get(broker_id) if broker_id is not None else None
        return pair[1] if pair is not None else None

    def update_broker_address(self, broker_id: int | None, broker_address: str) -> None:
        """``updateBrokerAddress``: a new address, the same check code; unknown ids are ignored."""
        old = self.broker_id_info.get(broker_id) if broker_id is not None else None
        if old is not None:
            self.broker_id_info[broker_id] = (broker_address, old[1])

    # -- snapshot --------------------------------------------------------------------------------
    def to_snapshot(self) -> dict[str, Any]:
        return {"brokerIdInfo": {str(i): list(self.broker_id_info[i]) for i in sorted(self.broker_id_info)},
                "brokerName": self.broker_name, "clusterName": self.cluster_name,
                "nextAssignBrokerId": self.next_assign_broker_id}

    @classmethod
    def from_snapshot(cls, data: Any, where: str) -> BrokerReplicaInfo:
        obj = check_object(data, where)
        cluster = obj.get("clusterName")
        info = cls(None if cluster is None else check_str(cluster, f"{where}.clusterName"),
                   check_str(obj.get("brokerName"), f"{where}.brokerName"))
        info.next_assign_broker_id = check_long(obj.get("nextAssignBrokerId"), f"{where}.nextAssignBrokerId")
        for key, pair in check_object(obj.get("brokerIdInfo"), f"{where}.brokerIdInfo").items():
            broker_id = check_long(_long_key(key, where), f"{where}.brokerIdInfo.{key}")
            if not isinstance(pair, list) or len(pair) != 2:
                raise ValueError(f"{where}.brokerIdInfo.{key}: expected [address, registerCheckCode]")
            info.broker_id_info[broker_id] = (check_str(pair[0], f"{where}.brokerIdInfo.{key}[0]"),
                                              check_str(pair[1], f"{where}.brokerIdInfo.{key}[1]"))
        return info

    def __repr__(self) -> str:
        return (f"BrokerReplicaInfo(cluster={self.cluster_name!r}, brokerName={self.broker_name!r}, "
                f"nextAssignBrokerId={self.next_assign_broker_id}, brokerIdInfo={self.get_broker_id_table()})")


def _long_key(key: str, where: str) -> int:
    body = key[1:] if key[:1] == "-" else key
    if not body.isascii() or not body.isdigit():
        raise ValueError(f"{where}.brokerIdInfo: key {key!r} is not a broker id")
    return int(key)
