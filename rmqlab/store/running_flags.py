"""RunningFlags: the store's state bits (store/src/main/java/org/apache/rocketmq/store/RunningFlags.java).

rmqlab sets only DISK_FULL (CleanCommitLogService, when the disk passes
diskSpaceWarningLevelRatio); the other bits keep RocketMQ's values so that `flag_bits` reads the
same. A store that is not writeable refuses puts with SERVICE_NOT_AVAILABLE (RocketMQ 5:
HookUtils.checkBeforePutMessage; 4.x: DefaultMessageStore.checkStoreStatus); dispatch to the
consume queues goes on (isCQWriteable ignores DISK_FULL).
"""

from __future__ import annotations

NOT_READABLE_BIT = 1
NOT_WRITEABLE_BIT = 1 << 1
WRITE_LOGICS_QUEUE_ERROR_BIT = 1 << 2
WRITE_INDEX_FILE_ERROR_BIT = 1 << 3
DISK_FULL_BIT = 1 << 4
FENCED_BIT = 1 << 5
LOGIC_DISK_FULL_BIT = 1 << 6

_NOT_WRITEABLE_MASK = (NOT_WRITEABLE_BIT | WRITE_LOGICS_QUEUE_ERROR_BIT | DISK_FULL_BIT
                       | WRITE_INDEX_FILE_ERROR_BIT | FENCED_BIT | LOGIC_DISK_FULL_BIT)


class RunningFlags:
    def __init__(self) -> None:
        self.flag_bits = 0

    def is_writeable(self) -> bool:
        return (self.flag_bits & _NOT_WRITEABLE_MASK) == 0

    def is_disk_full(self) -> bool:
        return (self.flag_bits & DISK_FULL_BIT) == DISK_FULL_BIT

    def get_and_make_disk_full(self) -> bool:
        """Set DISK_FULL; True if it was clear (RocketMQ's "result" is the old state, inverted)."""
        result = not self.is_disk_full()
        self.flag_bits |= DISK_FULL_BIT
        return result

    def get_and_make_disk_ok(self) -> bool:
        """Clear DISK_FULL; True if it was already clear."""
        result = not self.is_disk_full()
        self.flag_bits &= ~DISK_FULL_BIT
        return result
