"""Disk usage of a store's partition, as CleanCommitLogService reads it.

`get_disk_partition_space_used_percent` is RocketMQ's UtilAll.getDiskPartitionSpaceUsedPercent
(common/src/main/java/org/apache/rocketmq/common/UtilAll.java): used / (used + usable), rounded
up to a hundredth, -1 when the path does not exist; Java's File.getTotalSpace / getFreeSpace /
getUsableSpace are statvfs's f_blocks / f_bfree / f_bavail.

`VirtualDisk` is rmqlab's: the disk of a simulated machine, or of a store given
rmqlabDiskCapacityBytes. Its usage is the size of the files under the store's directories
(a mapped file counts at its full, pre-allocated size, as it does on a real disk once written)
over the capacity; capacity 0 is an unlimited disk (usage 0). It depends on nothing but the
store's own files, so a simulated run fills it, and frees it, the same way every time.
"""

from __future__ import annotations

import os


def get_disk_partition_space_used_percent(path: str) -> float:
    if not path or not os.path.exists(path):
        return -1
    try:
        st = os.statvfs(path)
    except OSError:
        return -1
    total = st.f_blocks * st.f_frsize
    if total <= 0:
        return -1
    used = total - st.f_bfree * st.f_frsize
    entire = used + st.f_bavail * st.f_frsize
    round_num = 1 if used * 100 % entire else 0
    return (used * 100 // entire + round_num) / 100.0


class VirtualDisk:
    def __init__(self, capacity_bytes: int, paths: list[str]):
        self.capacity_bytes = capacity_bytes
        # The directories on this disk, none inside another (each file counted once).
        roots = sorted({os.path.abspath(p) for p in paths})
        self.paths = [p for p in roots if not any(p.startswith(q + os.sep) for q in roots if q != p)]

    def used_bytes(self) -> int:
        used = 0
        for root in self.paths:
            for dirpath, _dirs, files in os.walk(root):
                for name in files:
                    try:
                        used += os.stat(os.path.join(dirpath, name)).st_size
                    except FileNotFoundError:
                        pass
        return used

    def get_disk_partition_space_used_percent(self, path: str) -> float:
        """Same rounding as RocketMQ's; `path` only has to exist (the whole disk is one partition)."""
        if not path or not os.path.exists(path):
            return -1
        if self.capacity_bytes <= 0:
            return 0.0
        used = min(self.used_bytes(), self.capacity_bytes)
        round_num = 1 if used * 100 % self.capacity_bytes else 0
        return (used * 100 // self.capacity_bytes + round_num) / 100.0
