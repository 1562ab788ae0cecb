"""SyncStateInfo: a broker set's master, SyncStateSet and epochs (``impl/manager/SyncStateInfo.java``).

| field | initial | changed by |
|---|---|---|
| master_epoch | 0 | +1 on every ElectMasterEvent, elected or not |
| sync_state_set_epoch | 0 | +1 on every SyncStateSet replacement |
| sync_state_set | {} | AlterSyncStateSetEvent, an election ({master}), CleanBrokerDataEvent |
| master_broker_id | None | ElectMasterEvent |

``is_first_time_for_elect()`` ⇔ master_epoch == 0: the set never had an election, and the first
broker asking for one becomes master without any check (``ReplicasInfoManager.electMaster``).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from rmqlab.common.config_manager import check_int, check_long, check_object, check_str


class SyncStateInfo:
    def __init__(self, cluster_name: str | None, broker_name: str):
        self.cluster_name = cluster_name
        self.broker_name = broker_name
        self.master_epoch = 0
        self.sync_state_set_epoch = 0
        self.sync_state_set: frozenset[int] = frozenset()
        self.master_broker_id: int | None = None

    def update_master_info(self, master_broker_id: int | None) -> None:
        """``updateMasterInfo``: a new master (or none), and a new master epoch."""
        self.master_broker_id = master_broker_id
        self.master_epoch += 1

    def update_sync_state_set_info(self, new_sync_state_set: Iterable[int]) -> None:
        """``updateSyncStateSetInfo``: a new set, and a new set epoch."""
        self.sync_state_set = frozenset(new_sync_state_set)
        self.sync_state_set_epoch += 1

    def is_first_time_for_elect(self) -> bool:
        return self.master_epoch == 0

    def is_master_exist(self) -> bool:
        return self.master_broker_id is not None

    def remove_from_sync_state(self, broker_id: int) -> None:
        """``removeFromSyncState``: no new set epoch (only CleanBrokerDataEvent uses it)."""
        self.sync_state_set = self.sync_state_set - {broker_id}

    # -- snapshot --------------------------------------------------------------------------------
    def to_snapshot(self) -> dict[str, Any]:
        return {"brokerName": self.broker_name, "clusterName": self.cluster_name,
                "masterBrokerId": self.master_broker_id, "masterEpoch": self.master_epoch,
                "syncStateSet": sorted(self.sync_state_set), "syncStateSetEpoch": self.sync_state_set_epoch}

    @classmethod
    def from_snapshot(cls, data: Any, where: str) -> SyncStateInfo:
        obj = check_object(data, where)
        cluster, master = obj.get("clusterName"), obj.get("masterBrokerId")
        info = cls(None if cluster is None else check_str(cluster, f"{where}.clusterName"),
                   check_str(obj.get("brokerName"), f"{where}.brokerName"))
        info.master_epoch = check_int(obj.get("masterEpoch"), f"{where}.masterEpoch")
        info.sync_state_set_epoch = check_int(obj.get("syncStateSetEpoch"), f"{where}.syncStateSetEpoch")
        members = obj.get("syncStateSet")
        if not isinstance(members, list):
            raise ValueError(f"{where}.syncStateSet: expected an array of broker ids")
        info.sync_state_set = frozenset(check_long(m, f"{where}.syncStateSet[{i}]") for i, m in enumerate(members))
        info.master_broker_id = None if master is None else check_long(master, f"{where}.masterBrokerId")
        return info

    def __repr__(self) -> str:
        return (f"SyncStateInfo(cluster={self.cluster_name!r}, brokerName={self.broker_name!r}, "
                f"master={self.master_broker_id}, masterEpoch={self.master_epoch}, "
                f"syncStateSet={sorted(self.sync_state_set)}, syncStateSetEpoch={self.sync_state_set_epoch})")
