"""ClusterInfo: the GET_BROKER_CLUSTER_INFO (106) body, what ``mqadmin clusterList`` prints.

RocketMQ's ``remoting/.../protocol/body/ClusterInfo.java``: the name server's broker table and
cluster table as they stand, fastjson default dialect::

    {"brokerAddrTable":{"broker-a":{"brokerAddrs":{0:"127.0.0.1:10911",1:"127.0.0.1:10921"},
        "brokerName":"broker-a","cluster":"DefaultCluster","enableActingMaster":false}},
     "clusterAddrTable":{"DefaultCluster":["broker-a"]}}

Maps and sets come in the order the name server's tables iterate (see RouteInfoManager).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from rmqlab.common.config_manager import check_object, check_str
from rmqlab.remoting.protocol import remoting_serializable
from rmqlab.remoting.protocol.route.topic_route_data import BrokerData


@dataclass
class ClusterInfo:
    """brokerName -> BrokerData, and clusterName -> its broker names (``ClusterInfo``)."""

    broker_addr_table: dict[str, BrokerData] = field(default_factory=dict)
    cluster_addr_table: dict[str, list[str]] = field(default_factory=dict)

    def retrieve_all_addr_by_cluster(self, cluster: str) -> list[str]:
        """``retrieveAllAddrByCluster``: every member address of every group of ``cluster``."""
        addrs: list[str] = []
        for broker_name in self.cluster_addr_table.get(cluster, []):
            broker_data = self.broker_addr_table.get(broker_name)
            if broker_data is not None:
                addrs.extend(broker_data.broker_addrs.values())
        return addrs

    def retrieve_all_cluster_names(self) -> list[str]:
        """``retrieveAllClusterNames``."""
        return list(self.cluster_addr_table)

    def to_json_dict(self) -> dict[str, Any]:
        return {
            "brokerAddrTable": {name: bd.to_json_dict() for name, bd in self.broker_addr_table.items()},
            "clusterAddrTable": {name: list(brokers) for name, brokers in self.cluster_addr_table.items()},
        }

    def encode(self) -> bytes:
        return remoting_serializable.encode(self.to_json_dict())

    @classmethod
    def from_json_dict(cls, data: Any, where: str = "ClusterInfo") -> ClusterInfo:
        obj = check_object(data, where)
        brokers = {name: BrokerData.from_json_dict(bd, f"{where}.brokerAddrTable.{name}")
                   for name, bd in check_object(obj.get("brokerAddrTable") or {}, f"{where}.brokerAddrTable").items()}
        clusters: dict[str, list[str]] = {}
        for name, members in check_object(obj.get("clusterAddrTable") or {}, f"{where}.clusterAddrTable").items():
            if not isinstance(members, list):
                raise ValueError(f"{where}.clusterAddrTable.{name}: expected an array")
            clusters[name] = [check_str(m, f"{where}.clusterAddrTable.{name}[]") for m in members]
        return cls(brokers, clusters)

    @classmethod
    def decode(cls, body: bytes | None) -> ClusterInfo:
        return cls.from_json_dict(remoting_serializable.decode_json(body, "ClusterInfo"))
