"""DLedgerConfig (io.openmessaging.storage.dledger.DLedgerConfig, 0.3.1.2): one member's settings.

Defaults are DLedger's. In DLedger CommitLog mode the broker builds this from its store config
(DLedgerCommitLog's constructor in RocketMQ's store/.../dledger/DLedgerCommitLog.java):
dLegerGroup → group, dLegerPeers → peers, dLegerSelfId → self_id, storePathRootDir →
store_base_dir, and so on.
"""

from __future__ import annotations

import dataclasses
import os


@dataclasses.dataclass
class DLedgerConfig:
    group: str = "default"
    self_id: str = "n0"
    peers: str = "n0-localhost:20911"  # "id-host:port;…"; the id is the text before the first '-'
    store_base_dir: str = os.path.join(os.sep, "tmp", "dledgerstore")
    data_store_path: str | None = None  # None: <store_base_dir>/dledger-<self_id>/data
    max_pending_requests_num: int = 10000
    max_wait_ack_time_ms: int = 2500
    max_push_time_out_ms: int = 1000
    heart_beat_time_interval_ms: int = 2000
    max_heart_beat_leak: int = 3
    min_vote_interval_ms: int = 300
    max_vote_interval_ms: int = 1000
    min_take_leadership_vote_interval_ms: int = 30
    max_take_leadership_vote_interval_ms: int = 100
    file_reserved_hours: int = 72
    delete_when: str = "04"
    disk_space_ratio_to_check_expired: float = 0.70
    disk_space_ratio_to_force_clean: float = 0.85
    enable_disk_force_clean: bool = True
    flush_file_interval: int = 10
    check_point_interval: int = 3000
    mapped_file_size_for_entry_data: int = 1024 * 1024 * 1024
    mapped_file_size_for_entry_index: int = 32 * 5 * 1024 * 1024
    preferred_leader_ids: str | None = None  # ';'-separated
    max_leadership_transfer_wait_index: int = 1000
    leadership_transfer_wait_timeout: int = 1000
    is_enable_batch_push: bool = False
    max_batch_push_size: int = 4 * 1024

    def get_default_path(self) -> str:
        """The member's root: <storeBaseDir>/dledger-<selfId> (holds currterm, checkpoint, data, index)."""
        return os.path.join(self.store_base_dir, "dledger-" + self.self_id)

    def get_data_store_path(self) -> str:
        return self.data_store_path or os.path.join(self.get_default_path(), "data")

    def get_index_store_path(self) -> str:
        return os.path.join(self.get_default_path(), "index")

    def get_disk_full_ratio(self) -> float:
        return min(self.disk_space_ratio_to_force_clean + 0.05, 0.95)
