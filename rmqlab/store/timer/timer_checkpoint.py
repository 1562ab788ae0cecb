"""TimerCheckpoint: ``<root>/config/timercheck``, one OS page of big-endian longs.

Mirrors ``store/src/main/java/org/apache/rocketmq/store/timer/TimerCheckpoint.java`` (file name
from ``BrokerPathConfigHelper.getTimerCheckPath``). Layout as in RocketMQ: byte 0
lastReadTimeMs, 8 lastTimerLogFlushPos, 16 lastTimerQueueOffset, 24 masterTimerQueueOffset, then
the data version (32 stateVersion, 40 timestamp, 48 counter).

What rmqlab's TimerMessageStore keeps in them (see ``timer_message_store``): lastReadTimeMs = R,
lastTimerQueueOffset = the oldest undelivered unit of ``rmq_sys_wheel_timer`` (C),
masterTimerQueueOffset = how far the queue has been read (E); lastTimerLogFlushPos is always 0
(rmqlab has no timer log).

As in RocketMQ the setters only change fields in memory; ``write`` puts them into the
memory-mapped page (a process crash keeps it), ``flush`` also forces it and records the page as
durable in the store's PageCache ledger (what a machine crash restores).
"""

from __future__ import annotations

import mmap
import os
import struct
from dataclasses import dataclass, field

from rmqlab.common.data_version import DataVersion
from rmqlab.runtime.page_cache import PageCache

_LONGS = struct.Struct(">7q")
FILE_SIZE = mmap.PAGESIZE  # DefaultMappedFile.OS_PAGE_SIZE


_HEAD = struct.Struct(">4q")  # a checkpoint written before data versions existed


@dataclass
class DecodedTimerCheckpoint:
    """``TimerCheckpoint.decode(ByteBuffer)``: another broker's checkpoint as GET_TIMER_CHECK_POINT
    (60) answers it (pre-online compares its data version with the local one)."""
    last_read_time_ms: int = 0
    last_timer_log_flush_pos: int = 0
    last_timer_queue_offset: int = 0
    master_timer_queue_offset: int = 0
    data_version: DataVersion = field(default_factory=DataVersion)

    @classmethod
    def decode(cls, data: bytes) -> DecodedTimerCheckpoint:
        """The four offsets, then the data version when anything follows them; 32 or at least 56
        bytes, anything else raises ``ValueError`` (RocketMQ's BufferUnderflowException)."""
        if len(data) == _HEAD.size:
            return cls(*_HEAD.unpack_from(data, 0))
        if len(data) < _LONGS.size:
            raise ValueError(f"timer checkpoint: {len(data)} bytes, expected {_HEAD.size} or {_LONGS.size}")
        fields = _LONGS.unpack_from(data, 0)
        return cls(*fields[:4], data_version=DataVersion(*fields[4:]))


class TimerCheckpoint:
    def __init__(self, path: str, page_cache: PageCache | None = None):
        self.path = path
        self.page_cache = page_cache
        self.last_read_time_ms = 0
        self.last_timer_log_flush_pos = 0
        self.last_timer_queue_offset = 0
        self.master_timer_queue_offset = 0
        self.data_version = DataVersion()
        os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
        existed = os.path.exists(path)
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            if os.fstat(fd).st_size < FILE_SIZE:
                os.ftruncate(fd, FILE_SIZE)  # FileChannel.map(READ_WRITE, 0, page) grows it too
            self._mm = mmap.mmap(fd, FILE_SIZE, access=mmap.ACCESS_WRITE)
        finally:
            os.close(fd)
        if existed:
            (self.last_read_time_ms, self.last_timer_log_flush_pos, self.last_timer_queue_offset,
             self.master_timer_queue_offset, state_version, timestamp, counter) = _LONGS.unpack_from(self._mm, 0)
            self.data_version = DataVersion(state_version, timestamp, counter)
        if page_cache is not None:
            page_cache.track_snapshot(path, self._mm[:])

    def encode(self) -> bytes:
        """``TimerCheckpoint.encode``: the 56 bytes of the fields."""
        dv = self.data_version
        return _LONGS.pack(self.last_read_time_ms, self.last_timer_log_flush_pos, self.last_timer_queue_offset,
                           self.master_timer_queue_offset, dv.state_version, dv.timestamp, dv.counter)

    def write(self) -> None:
        """The fields into the mapped page, not forced (a process crash keeps them)."""
        if not self._mm.closed:
            self._mm[0:_LONGS.size] = self.encode()

    def flush(self) -> None:
        """``flush``: write and force; the page is now what a machine crash restores."""
        if self._mm.closed:
            return
        self.write()
        self._mm.flush()
        if self.page_cache is not None:
            self.page_cache.track_snapshot(self.path, self._mm[:])

    def as_dict(self) -> dict[str, int]:
        return {"lastReadTimeMs": self.last_read_time_ms, "lastTimerLogFlushPos": self.last_timer_log_flush_pos,
                "lastTimerQueueOffset": self.last_timer_queue_offset,
                "masterTimerQueueOffset": self.master_timer_queue_offset}

    def close(self) -> None:
        if not self._mm.closed:
            self._mm.close()
