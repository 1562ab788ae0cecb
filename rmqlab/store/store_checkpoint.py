"""StoreCheckpoint: `<root>/checkpoint`, one OS page of longs (``StoreCheckpoint.java``).

Byte 0 physicMsgTimestamp (store time of the last *flushed* commitlog message), 8
logicsMsgTimestamp (of the last flushed consume-queue unit), 16 indexMsgTimestamp, 24
masterFlushedOffset, 32 confirmPhyOffset. Abnormal recovery starts from the last commitlog file
whose first message is not newer than min(physic, logics) - 3 s: everything before is known durable.

Like RocketMQ the page is memory-mapped, so a process crash keeps the latest values; a machine
crash restores the content as of the last `flush` (tracked as a snapshot by the PageCache).
"""

from __future__ import annotations

import logging
import mmap
import os
import struct

from rmqlab.runtime.page_cache import PageCache
from rmqlab.store import crash_points

log = logging.getLogger("rmqlab.store")

_FIELDS = ("physic_msg_timestamp", "logics_msg_timestamp", "index_msg_timestamp",
           "master_flushed_offset", "confirm_phy_offset")
_LONG = struct.Struct(">q")
FILE_SIZE = mmap.PAGESIZE


class StoreCheckpoint:
    def __init__(self, path: str, page_cache: PageCache | None = None):
        self.path = path
        self.page_cache = page_cache
        os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
        existed = os.path.exists(path)
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            size = os.fstat(fd).st_size
            if size < FILE_SIZE:
                # As in RocketMQ, whose FileChannel.map(READ_WRITE, 0, OS_PAGE_SIZE) grows the file:
                # a short checkpoint (a crash between creating and sizing it) reads as zeros, which
                # only makes abnormal recovery start from the first commitlog file.
                if existed:
                    log.warning("%s: checkpoint file is %d bytes, extended to %d with zeros", path, size, FILE_SIZE)
                os.ftruncate(fd, FILE_SIZE)
            self._mm = mmap.mmap(fd, max(size, FILE_SIZE), access=mmap.ACCESS_WRITE)
        finally:
            os.close(fd)
        if page_cache is not None:
            page_cache.track_snapshot(path, self._mm[:])

    def _get(self, i: int) -> int:
        return _LONG.unpack_from(self._mm, i * 8)[0]

    def _set(self, i: int, value: int) -> None:
        if self._get(i) != value:
            _LONG.pack_into(self._mm, i * 8, value)  # an aligned 8-byte store: never torn
            crash_points.point("write", self.path)

    physic_msg_timestamp = property(lambda s: s._get(0), lambda s, v: s._set(0, v))
    logics_msg_timestamp = property(lambda s: s._get(1), lambda s, v: s._set(1, v))
    index_msg_timestamp = property(lambda s: s._get(2), lambda s, v: s._set(2, v))
    master_flushed_offset = property(lambda s: s._get(3), lambda s, v: s._set(3, v))
    confirm_phy_offset = property(lambda s: s._get(4), lambda s, v: s._set(4, v))

    def get_min_timestamp(self) -> int:
        """StoreCheckpoint.getMinTimestamp (index not used): min(physic, logics) - 3000, floored at 0."""
        return max(0, min(self.physic_msg_timestamp, self.logics_msg_timestamp) - 3000)

    def flush(self) -> None:
        self._mm.flush()
        if self.page_cache is not None:
            self.page_cache.track_snapshot(self.path, self._mm[:])
        crash_points.point("flush", self.path)

    def as_dict(self) -> dict[str, int]:
        return {name: self._get(i) for i, name in enumerate(_FIELDS)}

    def close(self) -> None:
        if not self._mm.closed:
            self._mm.close()
