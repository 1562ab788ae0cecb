"""EpochEntryCache: a broker's epoch file, answered to GET_BROKER_EPOCH_CACHE (1007).

RocketMQ's ``remoting/.../protocol/body/EpochEntryCache.java`` (what
``mqadmin getBrokerEpoch`` prints): the request goes to a broker, not to the controller; the broker answers
its identity, every EpochEntry of its epoch file and its commitlog max offset. fastjson default
dialect::

    {"brokerId":1,"brokerName":"broker-a","clusterName":"DefaultCluster",
     "epochList":[{"endOffset":9223372036854775807,"epoch":1,"startOffset":0}],"maxOffset":1024}
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from rmqlab.common.checkpoint_file import LONG_MAX
from rmqlab.common.config_manager import check_int, check_long, check_object, check_str
from rmqlab.remoting.protocol import remoting_serializable
from rmqlab.remoting.protocol.epoch_entry import EpochEntry


def _epoch_entry(data: Any, where: str) -> EpochEntry:
    obj = check_object(data, where)
    end = obj.get("endOffset")
    # EpochEntry's endOffset field is initialised to Long.MAX_VALUE; epoch and startOffset to 0.
    return EpochEntry(check_int(obj.get("epoch", 0), f"{where}.epoch"),
                      check_long(obj.get("startOffset", 0), f"{where}.startOffset"),
                      LONG_MAX if end is None else check_long(end, f"{where}.endOffset"))


@dataclass
class EpochEntryCache:
    """``clusterName``, ``brokerName``, ``brokerId`` (the controller id), ``epochList``, ``maxOffset``."""

    cluster_name: str | None
    broker_name: str | None
    broker_id: int
    epoch_list: list[EpochEntry] = field(default_factory=list)
    max_offset: int = 0

    def to_json_dict(self) -> dict[str, Any]:
        return {"brokerId": self.broker_id, "brokerName": self.broker_name, "clusterName": self.cluster_name,
                "epochList": [e.to_dict() for e in self.epoch_list], "maxOffset": self.max_offset}

    def encode(self) -> bytes:
        return remoting_serializable.encode(self.to_json_dict())

    @classmethod
    def from_json_dict(cls, data: Any, where: str = "EpochEntryCache") -> EpochEntryCache:
        obj = check_object(data, where)
        entries = obj.get("epochList")
        if entries is not None and not isinstance(entries, list):
            raise ValueError(f"{where}.epochList: expected an array")
        cluster, name = obj.get("clusterName"), obj.get("brokerName")
        return cls(None if cluster is None else check_str(cluster, f"{where}.clusterName"),
                   None if name is None else check_str(name, f"{where}.brokerName"),
                   check_long(obj.get("brokerId", 0), f"{where}.brokerId"),
                   [_epoch_entry(e, f"{where}.epochList[{i}]") for i, e in enumerate(entries or [])],
                   check_long(obj.get("maxOffset", 0), f"{where}.maxOffset"))

    @classmethod
    def decode(cls, body: bytes | None) -> EpochEntryCache:
        return cls.from_json_dict(remoting_serializable.decode_json(body, "EpochEntryCache"))
