"""SyncStateSet: a broker set's in-sync replica ids and the epoch of that set (RIP-44).

RocketMQ's ``remoting/.../protocol/body/SyncStateSet.java``: the body of
CONTROLLER_ALTER_SYNC_STATE_SET (the master's proposal, and the controller's answer), of
CONTROLLER_REGISTER_BROKER and CONTROLLER_GET_REPLICA_INFO answers, and of
NOTIFY_BROKER_ROLE_CHANGED. fastjson default dialect, properties in alphabetical order::

    {"syncStateSet":[1,2],"syncStateSetEpoch":3}

The set is a Java ``HashSet<Long>``; its JSON lists the ids in that set's iteration order
(:func:`java_long_set_order`), which is ascending for the ids a broker set actually uses.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from rmqlab.common.config_manager import check_int, check_long, check_object
from rmqlab.remoting.protocol import remoting_serializable


def java_long_set_order(ids: Iterable[int]) -> list[int]:
    """The ids of ``new HashSet<Long>(ids)`` in Java's iteration order.

    Ids sharing a bucket keep ascending order here; Java keeps their insertion order, which only
    matters for ids at least the table size (16 for up to 12 ids) apart, never seen in a broker set.
    """
    ordered = sorted(set(ids))
    capacity = remoting_serializable.hash_set_copy_capacity(len(ordered))
    return remoting_serializable.long_hash_map_order(ordered, capacity)


def read_long_set(value: Any, where: str) -> frozenset[int]:
    """A JSON array of Java longs as a set (JSON null reads as empty, as fastjson leaves it unset)."""
    if value is None:
        return frozenset()
    if not isinstance(value, list):
        raise ValueError(f"{where}: expected an array of broker ids")
    return frozenset(check_long(item, f"{where}[{i}]") for i, item in enumerate(value))


@dataclass(frozen=True)
class SyncStateSet:
    """``SyncStateSet``: ``sync_state_set`` (broker ids) and ``sync_state_set_epoch`` (a Java int)."""

    sync_state_set: frozenset[int] = field(default_factory=frozenset)
    sync_state_set_epoch: int = 0

    def __post_init__(self) -> None:
        object.__setattr__(self, "sync_state_set", frozenset(self.sync_state_set))
        for broker_id in self.sync_state_set:
            check_long(broker_id, "SyncStateSet.syncStateSet[]")
        check_int(self.sync_state_set_epoch, "SyncStateSet.syncStateSetEpoch")

    def to_json_dict(self) -> dict[str, Any]:
        return {"syncStateSet": java_long_set_order(self.sync_state_set),
                "syncStateSetEpoch": self.sync_state_set_epoch}

    def encode(self) -> bytes:
        return remoting_serializable.encode(self.to_json_dict())

    @classmethod
    def from_json_dict(cls, data: Any, where: str = "SyncStateSet") -> SyncStateSet:
        obj = check_object(data, where)
        epoch = obj.get("syncStateSetEpoch")
        # A primitive int: fastjson leaves it 0 when the property is absent.
        return cls(read_long_set(obj.get("syncStateSet"), f"{where}.syncStateSet"),
                   0 if epoch is None else check_int(epoch, f"{where}.syncStateSetEpoch"))

    @classmethod
    def decode(cls, body: bytes | None) -> SyncStateSet:
        return cls.from_json_dict(remoting_serializable.decode_json(body, "SyncStateSet"))
