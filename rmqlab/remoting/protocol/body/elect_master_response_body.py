"""ElectMasterResponseBody: the body of a CONTROLLER_ELECT_MASTER (1002) answer (RIP-44).

RocketMQ's ``remoting/.../protocol/body/ElectMasterResponseBody.java``: on
SUCCESS the new master's broker set (every registered id and its address) and the new
SyncStateSet (the new master alone); on CONTROLLER_MASTER_STILL_EXIST the current SyncStateSet and
no member group. fastjson default dialect, a null member group left out::

    {"brokerMemberGroup":{"brokerAddrs":{1:"127.0.0.1:30911",2:"127.0.0.1:30921"},
        "brokerName":"broker-a","cluster":"DefaultCluster"},"syncStateSet":[2]}

The controller builds ``brokerAddrs`` as a fresh ``HashMap<Long, String>`` (default capacity), so
its ids come in that map's iteration order.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from rmqlab.common.config_manager import check_object
from rmqlab.remoting.protocol import remoting_serializable
from rmqlab.remoting.protocol.body.broker_member_group import BrokerMemberGroup
from rmqlab.remoting.protocol.body.sync_state_set import java_long_set_order, read_long_set

_HASH_MAP_CAPACITY = 16  # new HashMap<>() in ReplicasInfoManager.buildBrokerMemberGroup


@dataclass
class ElectMasterResponseBody:
    """``brokerMemberGroup`` (or None) and ``syncStateSet``."""

    broker_member_group: BrokerMemberGroup | None = None
    sync_state_set: frozenset[int] = field(default_factory=frozenset)

    def to_json_dict(self) -> dict[str, Any]:
        group = self.broker_member_group
        group_json = None
        if group is not None:
            order = remoting_serializable.long_hash_map_order(sorted(group.broker_addrs), _HASH_MAP_CAPACITY)
            group_json = {"brokerAddrs": {i: group.broker_addrs[i] for i in order}, "brokerName": group.broker_name,
                          "cluster": group.cluster}
        return {"brokerMemberGroup": group_json, "syncStateSet": java_long_set_order(self.sync_state_set)}

    def encode(self) -> bytes:
        return remoting_serializable.encode(self.to_json_dict())

    @classmethod
    def from_json_dict(cls, data: Any, where: str = "ElectMasterResponseBody") -> ElectMasterResponseBody:
        obj = check_object(data, where)
        group = obj.get("brokerMemberGroup")
        return cls(None if group is None else BrokerMemberGroup.from_json_dict(group, f"{where}.brokerMemberGroup"),
                   read_long_set(obj.get("syncStateSet"), f"{where}.syncStateSet"))

    @classmethod
    def decode(cls, body: bytes | None) -> ElectMasterResponseBody:
        return cls.from_json_dict(remoting_serializable.decode_json(body, "ElectMasterResponseBody"))
