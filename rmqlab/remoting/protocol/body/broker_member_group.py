"""BrokerMemberGroup: every registered member of one broker group (GET_BROKER_MEMBER_GROUP, 901).

RocketMQ's ``remoting/.../protocol/body/BrokerMemberGroup.java`` and
``GetBrokerMemberGroupResponseBody.java``: RIP-32 brokers poll it to learn their
peers. The name server answers every member it has, without the acting-master rewrite::

    {"brokerMemberGroup":{"brokerAddrs":{0:"127.0.0.1:10911",1:"127.0.0.1:10921"},
        "brokerName":"broker-a","cluster":"DefaultCluster"}}
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from rmqlab.common.config_manager import check_object, check_str
from rmqlab.remoting.protocol import remoting_serializable
from rmqlab.remoting.protocol.route.topic_route_data import BrokerData


@dataclass
class BrokerMemberGroup:
    """cluster, brokerName and brokerId -> address of each member (``BrokerMemberGroup``)."""

    cluster: str | None
    broker_name: str | None
    broker_addrs: dict[int, str] = field(default_factory=dict)

    def minimum_broker_id(self) -> int:
        """``minimumBrokerId``: the smallest id, 0 for an empty group."""
        return min(self.broker_addrs) if self.broker_addrs else 0

    def to_json_dict(self) -> dict[str, Any]:
        return {"brokerAddrs": dict(self.broker_addrs), "brokerName": self.broker_name, "cluster": self.cluster}

    @classmethod
    def from_json_dict(cls, data: Any, where: str = "brokerMemberGroup") -> BrokerMemberGroup:
        obj = check_object(data, where)
        # BrokerData's reader checks the id keys and addresses the same way.
        addrs = BrokerData.from_json_dict({"cluster": "", "brokerName": "", "brokerAddrs": obj.get("brokerAddrs")},
                                          where).broker_addrs
        cluster, name = obj.get("cluster"), obj.get("brokerName")
        return cls(None if cluster is None else check_str(cluster, f"{where}.cluster"),
                   None if name is None else check_str(name, f"{where}.brokerName"), addrs)


@dataclass
class GetBrokerMemberGroupResponseBody:
    """The GET_BROKER_MEMBER_GROUP response body (``GetBrokerMemberGroupResponseBody``)."""

    broker_member_group: BrokerMemberGroup | None = None

    def to_json_dict(self) -> dict[str, Any]:
        group = self.broker_member_group
        return {"brokerMemberGroup": None if group is None else group.to_json_dict()}

    def encode(self) -> bytes:
        return remoting_serializable.encode(self.to_json_dict())

    @classmethod
    def decode(cls, body: bytes | None) -> GetBrokerMemberGroupResponseBody:
        obj = check_object(remoting_serializable.decode_json(body, "GetBrokerMemberGroupResponseBody"),
                           "GetBrokerMemberGroupResponseBody")
        group = obj.get("brokerMemberGroup")
        return cls(None if group is None else BrokerMemberGroup.from_json_dict(group))
