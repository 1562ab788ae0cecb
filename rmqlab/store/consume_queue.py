"""ConsumeQueue: the per (topic, queueId) index of 20-byte units into the CommitLog.

Mirrors org.apache.rocketmq.store.ConsumeQueue. A unit is
`commitLogOffset (long) + size (int) + tagsCode (long)`, big-endian. Unit i lives at logical byte
offset i*20; files hold `mappedFileSizeConsumeQueue` bytes (300000 units by default) and are named
by their first logical byte offset, under `<root>/consumequeue/<topic>/<queueId>/`.

Units are written only by the dispatcher (ReputMessageService), after the message is already in
the commitlog — so "stored but not yet dispatched" is a real state: a consumer cannot see the
message yet.
"""

from __future__ import annotations

import logging
import os
import struct

from rmqlab.common.java_compat import INT32_MAX
from rmqlab.runtime.page_cache import PageCache
from rmqlab.store.mapped_file_queue import MappedFileQueue

log = logging.getLogger("rmqlab.store")

CQ_STORE_UNIT_SIZE = 20
_UNIT = struct.Struct(">qiq")
_LONG = struct.Struct(">q")
# Units written before the first real one when a queue starts at a non-zero offset (fillPreBlank).
BLANK_UNIT = _UNIT.pack(0, INT32_MAX, 0)


def encode_cq_unit(commit_log_offset: int, size: int, tags_code: int) -> bytes:
    return _UNIT.pack(commit_log_offset, size, tags_code)


def decode_cq_unit(buf: bytes, pos: int = 0) -> tuple[int, int, int]:
    """(commitLogOffset, size, tagsCode)"""
    return _UNIT.unpack_from(buf, pos)


class ConsumeQueue:
    def __init__(self, topic: str, queue_id: int, store_path: str, mapped_file_size: int,
                 page_cache: PageCache | None = None):
        if mapped_file_size % CQ_STORE_UNIT_SIZE:
            raise ValueError(f"consume queue file size {mapped_file_size} is not a multiple of {CQ_STORE_UNIT_SIZE}"
                             " (MessageStoreConfig.get_mapped_file_size_consume_queue rounds it)")
        self.topic = topic
        self.queue_id = queue_id
        self.mapped_file_size = mapped_file_size
        self.queue_dir = os.path.join(store_path, topic, str(queue_id))
        self.mapped_file_queue = MappedFileQueue(self.queue_dir, self.mapped_file_size, page_cache)
        self.max_physic_offset = -1  # end (offset+size) of the last dispatched message
        self.min_logic_offset = 0    # logical byte offset of the first real unit

    def load(self) -> None:
        self.mapped_file_queue.load()

    # -- recovery --------------------------------------------------------------------------
    def recover(self) -> None:
        """ConsumeQueue.recover: keep the valid prefix (offset >= 0 and size > 0), drop the rest."""
        files = self.mapped_file_queue.mapped_files
        if not files:
            return
        index = max(0, len(files) - 3)
        process_offset = files[index].file_from_offset
        max_ext = -1
        for mf in files[index:]:
            view = mf.view(0, self.mapped_file_size)
            pos = 0
            while pos < self.mapped_file_size:
                offset, size, _tags = _UNIT.unpack_from(view, pos)
                if offset >= 0 and size > 0:
                    pos += CQ_STORE_UNIT_SIZE
                    if size != INT32_MAX:
                        max_ext = offset + size
                else:
                    break
            view.release()
            process_offset = mf.file_from_offset + pos
            if pos < self.mapped_file_size:
                break
        self.max_physic_offset = max_ext
        self.mapped_file_queue.set_positions(process_offset)
        self._correct_min_offset()

    def _correct_min_offset(self) -> None:
        first = self.mapped_file_queue.get_first_mapped_file()
        if first is None:
            self.min_logic_offset = 0
            return
        view = first.view()
        pos = 0
        while pos + CQ_STORE_UNIT_SIZE <= len(view) and view[pos:pos + CQ_STORE_UNIT_SIZE] == BLANK_UNIT:
            pos += CQ_STORE_UNIT_SIZE
        view.release()
        self.min_logic_offset = first.file_from_offset + pos

    # -- expiry (CleanConsumeQueueService) ---------------------------------------------------
    def delete_expired_file(self, offset: int) -> int:
        """ConsumeQueue.deleteExpiredFile: drop the files wholly below commitlog offset `offset`,
        then move the queue's min offset to its first unit at or above it."""
        count = self.mapped_file_queue.delete_expired_file_by_offset(offset, CQ_STORE_UNIT_SIZE)
        self.correct_min_offset(offset)
        return count

    def correct_min_offset(self, min_commit_log_offset: int) -> None:
        """ConsumeQueue.correctMinOffset: min_logic_offset := the first unit whose commitlog offset
        is >= `min_commit_log_offset` (searched in the first file from the previous min); the end of
        the queue when even the last unit points below it (no valid entry: min = max)."""
        mfq = self.mapped_file_queue
        if self.min_logic_offset >= mfq.get_max_offset():
            return  # contains no valid entries
        last = mfq.get_last_mapped_file()
        if last is None:
            return
        max_readable = last.wrote_position
        if max_readable >= CQ_STORE_UNIT_SIZE:
            if _LONG.unpack(last.read(max_readable - CQ_STORE_UNIT_SIZE, 8))[0] < min_commit_log_offset:
                # Keep the largest known consume offset: min points to a future slot.
                self.min_logic_offset = last.file_from_offset + max_readable
                log.info("ConsumeQueue[topic=%s, queue-id=%d] contains no valid entries. Min-offset is assigned as: %d.",
                         self.topic, self.queue_id, self.get_min_offset_in_queue())
                return
        first = mfq.get_first_mapped_file()
        intact = True  # assume the previous value is still valid
        start = self.min_logic_offset - first.file_from_offset
        if start < 0:
            intact, start = False, 0
        if start > first.wrote_position:
            log.error("[Bug][InconsistentState] ConsumeQueue file %s should have been deleted", first.file_name)
            return
        buf = first.read(start, first.wrote_position - start)
        if not buf:
            return
        if intact and _LONG.unpack_from(buf, 0)[0] >= min_commit_log_offset:
            return  # the previous min offset still points at or above the commitlog's min
        low, high = 0, len(buf) - CQ_STORE_UNIT_SIZE
        while high - low > CQ_STORE_UNIT_SIZE:
            mid = (low + high) // 2 // CQ_STORE_UNIT_SIZE * CQ_STORE_UNIT_SIZE
            offset_py = _LONG.unpack_from(buf, mid)[0]
            if offset_py > min_commit_log_offset:
                high = mid
            elif offset_py == min_commit_log_offset:
                low = high = mid
                break
            else:
                low = mid
        for i in range(low, high + 1, CQ_STORE_UNIT_SIZE):  # the last one or two entries
            if _LONG.unpack_from(buf, i)[0] >= min_commit_log_offset:
                self.min_logic_offset = first.file_from_offset + start + i
                log.info("Compute logical min offset: %d, topic: %s, queueId: %d",
                         self.get_min_offset_in_queue(), self.topic, self.queue_id)
                break

    def _unit_at(self, index: int) -> tuple[int, int, int] | None:
        pos = index * CQ_STORE_UNIT_SIZE
        mf = self.mapped_file_queue.find_mapped_file_by_offset(pos)
        if mf is None:
            return None
        data = mf.read(pos - mf.file_from_offset, CQ_STORE_UNIT_SIZE)
        return decode_cq_unit(data) if len(data) == CQ_STORE_UNIT_SIZE else None

    @staticmethod
    def _is_position(unit: tuple[int, int, int] | None) -> bool:
        """A unit that points at a message: not zeroed (a page a crash lost), not a BLANK_UNIT."""
        return unit is not None and unit[0] >= 0 and 0 < unit[1] < INT32_MAX

    @classmethod
    def _is_below(cls, unit: tuple[int, int, int] | None, phy_offset: int) -> bool:
        """A unit pointing at a message that ends at or below `phy_offset`."""
        return cls._is_position(unit) and unit[0] + unit[1] <= phy_offset

    def truncate_dirty_logic_files(self, phy_offset: int) -> None:
        """Drop every unit pointing at or beyond `phy_offset` (the commitlog was cut there).

        Walks back from the end; a zeroed unit (a page a machine crash lost) is dropped too,
        it does not stop the walk.
        """
        mfq = self.mapped_file_queue
        end = mfq.get_max_offset() // CQ_STORE_UNIT_SIZE
        new_end = end
        while new_end * CQ_STORE_UNIT_SIZE > self.min_logic_offset:
            unit = self._unit_at(new_end - 1)
            if self._is_below(unit, phy_offset):
                break
            new_end -= 1
        self._cut(new_end, end, f"commitlog cut at {phy_offset}")

    def truncate_to_durable_prefix(self, phy_offset: int) -> None:
        """After a crash: keep only the units of messages below `phy_offset`, the commitlog offset
        from which abnormal recovery re-dispatches (DefaultMessageStore.load).

        The checkpoint vouches that every unit of a message below it was flushed (the thorough
        consume-queue flush), so those units form a durable prefix of the queue; whatever follows
        (units the crash zeroed or tore, units of later messages) is dropped and rebuilt by the
        re-dispatch. The prefix ends at the first unit that is zeroed, torn or points at or
        beyond `phy_offset`; that predicate holds for the prefix only, so a binary search finds
        the end without reading every unit — and, unlike `recover`'s scan of the last three files,
        it also sees files that a crash zeroed further back.
        """
        lo = self.min_logic_offset // CQ_STORE_UNIT_SIZE
        end = self.get_max_offset_in_queue()
        hi = end
        while lo < hi:
            mid = (lo + hi) // 2
            if self._is_below(self._unit_at(mid), phy_offset):
                lo = mid + 1
            else:
                hi = mid
        self._cut(lo, end, f"abnormal recovery re-dispatches from commitlog offset {phy_offset}")

    def _cut(self, new_end: int, end: int, why: str) -> None:
        """Truncate the queue to `new_end` units and reset max_physic_offset to the last kept unit."""
        mfq = self.mapped_file_queue
        if new_end != end:
            log.info("%s-%d: truncate consume queue at unit %d of %d (%s)", self.topic, self.queue_id, new_end, end, why)
            mfq.truncate_dirty_files(new_end * CQ_STORE_UNIT_SIZE)
            if new_end * CQ_STORE_UNIT_SIZE <= self.min_logic_offset:
                self.min_logic_offset = new_end * CQ_STORE_UNIT_SIZE
        last = self._unit_at(new_end - 1) if new_end * CQ_STORE_UNIT_SIZE > self.min_logic_offset else None
        self.max_physic_offset = last[0] + last[1] if self._is_position(last) else -1

    # -- writing ---------------------------------------------------------------------------
    def put_message_position_info(self, offset: int, size: int, tags_code: int, cq_offset: int) -> bool:
        """ConsumeQueue.putMessagePositionInfo; False only if the unit could not be written."""
        if offset + size <= self.max_physic_offset:
            return True  # already built (e.g. redispatch after recovery)
        expect_logic_offset = cq_offset * CQ_STORE_UNIT_SIZE
        mfq = self.mapped_file_queue
        mf = mfq.get_last_mapped_file(expect_logic_offset, need_create=True)
        if mf.wrote_position == 0 and cq_offset != 0 and mf is mfq.mapped_files[0] and mfq.flushed_where == 0:
            # A queue that starts mid-way (e.g. a slave that began at the master's last file):
            # pad with blank units so unit i stays at byte i*20 (fillPreBlank).
            self.min_logic_offset = expect_logic_offset
            mfq.flushed_where = mf.file_from_offset
            pad = expect_logic_offset - mf.file_from_offset
            if pad:
                mf.append(BLANK_UNIT * (pad // CQ_STORE_UNIT_SIZE))
        current = mf.file_from_offset + mf.wrote_position
        if cq_offset != 0 and expect_logic_offset < current:
            log.warning("%s-%d: unit %d already built (current %d), skipped", self.topic, self.queue_id,
                        cq_offset, current // CQ_STORE_UNIT_SIZE)
            return True
        if expect_logic_offset != current:
            log.error("%s-%d: [BUG] logic queue order maybe wrong: expected unit %d, queue is at %d",
                      self.topic, self.queue_id, cq_offset, current // CQ_STORE_UNIT_SIZE)
        mf.append(_UNIT.pack(offset, size, tags_code))
        self.max_physic_offset = offset + size
        return True

    def flush(self, flush_least_pages: int = 0) -> bool:
        return self.mapped_file_queue.flush(flush_least_pages)

    # -- reading ---------------------------------------------------------------------------
    def get_max_offset_in_queue(self) -> int:
        """Number of the next unit to be written (the queue's max offset)."""
        return self.mapped_file_queue.get_max_offset() // CQ_STORE_UNIT_SIZE

    def get_min_offset_in_queue(self) -> int:
        return self.min_logic_offset // CQ_STORE_UNIT_SIZE

    def get_units(self, start_index: int, max_units: int) -> list[tuple[int, int, int]]:
        """Units [start_index, start_index+max_units) that exist, within one file (like getIndexBuffer)."""
        pos = start_index * CQ_STORE_UNIT_SIZE
        mf = self.mapped_file_queue.find_mapped_file_by_offset(pos)
        if mf is None:
            return []
        data = mf.read(pos - mf.file_from_offset, max_units * CQ_STORE_UNIT_SIZE)
        return [_UNIT.unpack_from(data, i) for i in range(0, len(data) - len(data) % CQ_STORE_UNIT_SIZE, CQ_STORE_UNIT_SIZE)]

    def close(self) -> None:
        self.mapped_file_queue.close()
