"""MappedFileQueue: the ordered list of MappedFiles that make up one logical log.

Mirrors org.apache.rocketmq.store.MappedFileQueue: offsets are global (file start offset + position
in file), the last file is the only one being appended to, a full file rolls over to a new one named
by the next offset, and truncation (`truncate_dirty_files`) deletes whole files beyond the cut.
"""

from __future__ import annotations

import bisect
import logging
import os
from collections.abc import Awaitable, Callable

from rmqlab.runtime.page_cache import PageCache
from rmqlab.store import crash_points
from rmqlab.store.mapped_file import MappedFile, StoreFileError, offset_to_file_name

log = logging.getLogger("rmqlab.store")


class MappedFileQueue:
    def __init__(self, store_path: str, mapped_file_size: int, page_cache: PageCache | None = None):
        if mapped_file_size <= 0:
            raise StoreFileError(f"{store_path}: mapped file size must be positive, got {mapped_file_size}")
        self.store_path = store_path
        self.mapped_file_size = mapped_file_size
        self.page_cache = page_cache
        self.mapped_files: list[MappedFile] = []
        self.flushed_where = 0

    # -- loading ---------------------------------------------------------------------------
    def load(self) -> None:
        """Map every existing file; positions stay 0 until recovery sets them (MappedFileQueue.doLoad).

        As in RocketMQ 5 (doLoad), a 0-byte *last* file is deleted with a warning — it holds no
        data, it is what a crash between creating and sizing a file leaves — and any other file
        whose size differs from the mapped file size stops the load. rmqlab sizes a new file
        under a hidden temporary name (mapped_file._create_sized); a leftover one is deleted too.
        """
        if not os.path.isdir(self.store_path):
            return
        names = sorted(os.listdir(self.store_path))
        for name in [n for n in names if n.startswith(".") and n.endswith(".tmp")]:
            path = os.path.join(self.store_path, name)
            os.remove(path)
            log.warning("%s: a file whose creation a crash interrupted, deleted", path)
            crash_points.point("delete", path)
        names = [n for n in names if not n.startswith(".")]
        for i, name in enumerate(names):
            path = os.path.join(self.store_path, name)
            if not (len(name) == 20 and name.isdigit()):
                raise StoreFileError(f"{path}: unexpected file in a mapped file directory (names are 20-digit offsets)")
            if i == len(names) - 1 and os.path.getsize(path) == 0:
                os.remove(path)
                log.warning("%s size is 0, auto delete", path)
                crash_points.point("delete", path)
                continue
            if int(name) % self.mapped_file_size:
                raise StoreFileError(f"{path}: start offset is not a multiple of the mapped file size {self.mapped_file_size}")
            if self.mapped_files and int(name) != self.mapped_files[-1].file_from_offset + self.mapped_file_size:
                raise StoreFileError(f"{path}: gap before this file (previous file starts at {self.mapped_files[-1].file_from_offset})")
            self.mapped_files.append(MappedFile(path, self.mapped_file_size, None))
        # Tracking starts after load: existing content counts as durable (see page_cache).
        for mf in self.mapped_files:
            mf.page_cache = self.page_cache

    # -- lookup ----------------------------------------------------------------------------
    def get_first_mapped_file(self) -> MappedFile | None:
        return self.mapped_files[0] if self.mapped_files else None

    def get_last_mapped_file(self, start_offset: int = 0, need_create: bool = False) -> MappedFile | None:
        last = self.mapped_files[-1] if self.mapped_files else None
        if not need_create or (last is not None and not last.is_full()):
            return last
        create_offset = (start_offset - start_offset % self.mapped_file_size) if last is None \
            else last.file_from_offset + self.mapped_file_size
        return self.create_mapped_file(create_offset)

    def create_mapped_file(self, create_offset: int) -> MappedFile:
        path = os.path.join(self.store_path, offset_to_file_name(create_offset))
        mf = MappedFile(path, self.mapped_file_size, self.page_cache)
        self.mapped_files.append(mf)
        return mf

    def find_mapped_file_by_offset(self, offset: int) -> MappedFile | None:
        if not self.mapped_files:
            return None
        starts = [mf.file_from_offset for mf in self.mapped_files]
        i = bisect.bisect_right(starts, offset) - 1
        if i < 0:
            return None
        mf = self.mapped_files[i]
        return mf if offset < mf.file_from_offset + self.mapped_file_size else None

    def get_min_offset(self) -> int:
        """-1 when there is no file (RocketMQ's convention)."""
        return self.mapped_files[0].file_from_offset if self.mapped_files else -1

    def get_max_offset(self) -> int:
        last = self.get_last_mapped_file()
        return last.file_from_offset + last.wrote_position if last else 0

    # -- durability ------------------------------------------------------------------------
    def flush(self, flush_least_pages: int = 0) -> bool:
        """Flush the file holding flushed_where; True if anything was flushed (RocketMQ returns the inverse)."""
        mf = self.find_mapped_file_by_offset(self.flushed_where)
        if mf is None:  # nothing written yet, or flushed to the very end of the last file
            return False
        before = self.flushed_where
        self.flushed_where = mf.file_from_offset + mf.flush(flush_least_pages)
        return self.flushed_where != before

    def flush_all(self) -> None:
        while self.flush(0):
            pass

    # -- recovery / truncation -------------------------------------------------------------
    def set_positions(self, offset: int) -> None:
        """Recovery result: every byte below `offset` is valid; files beyond it are destroyed."""
        self.truncate_dirty_files(offset)
        self.flushed_where = offset

    def truncate_dirty_files(self, offset: int) -> None:
        """MappedFileQueue.truncateDirtyFiles: cut the log at `offset`.

        Deviation from RocketMQ, which destroys the files beyond the cut first to last: here the
        last goes first, so a crash part-way through leaves a contiguous run of files (`load`
        refuses a gap) whose surplus the next recovery cuts again.
        """
        keep = [mf for mf in self.mapped_files if mf.file_from_offset <= offset]
        for mf in reversed(self.mapped_files[len(keep):]):
            log.info("truncate: destroy %s beyond offset %d", mf.file_name, offset)
            mf.destroy()
        self.mapped_files = keep
        for mf in keep:
            if mf.file_from_offset + self.mapped_file_size <= offset:
                mf.wrote_position = self.mapped_file_size
                mf.mark_durable()
            else:
                mf.truncate_to(offset - mf.file_from_offset)
        self.flushed_where = min(self.flushed_where, offset) if self.flushed_where else offset

    # -- expiry (CleanCommitLogService, CleanConsumeQueueService) ---------------------------
    async def delete_expired_file_by_time(self, expired_time: int, delete_files_interval: int,
                                          interval_forcibly: int, clean_immediately: bool,
                                          delete_file_batch_max: int, *, now_ms: int,
                                          sleep: Callable[[int], Awaitable[None]] | None = None) -> int:
        """MappedFileQueue.deleteExpiredFileByTime: oldest first, never the last file, delete a
        file last modified `expired_time` ms or more before `now_ms` (any file if
        `clean_immediately`); stop at the first younger file (no hole in the middle), after
        `delete_file_batch_max` files, or when a destroy fails. RocketMQ's thread sleeps
        `delete_files_interval` ms between two deletions; here `sleep` (the node's) does, so the
        node goes on meanwhile."""
        mfs = list(self.mapped_files)
        delete_count = 0
        files: list[MappedFile] = []
        for i, mf in enumerate(mfs[:-1]):
            if not (now_ms >= mf.get_last_modified_timestamp() + expired_time or clean_immediately):
                break  # avoid deleting files in the middle
            if not self._destroy(mf, interval_forcibly):
                break
            files.append(mf)
            delete_count += 1
            if len(files) >= delete_file_batch_max:
                break
            if sleep is not None and delete_files_interval > 0 and i + 1 < len(mfs) - 1:
                await sleep(delete_files_interval)
        self.delete_expired_file(files)
        return delete_count

    def delete_expired_file_by_offset(self, offset: int, unit_size: int) -> int:
        """MappedFileQueue.deleteExpiredFileByOffset (consume queues): delete files, oldest first
        and never the last, whose last unit points below commitlog offset `offset`, or that a
        failed destroy left unavailable."""
        files: list[MappedFile] = []
        for mf in list(self.mapped_files)[:-1]:
            if mf.available:
                unit = mf.read(self.mapped_file_size - unit_size, 8)
                if len(unit) != 8:
                    break  # "this being not executed forever": only a full file gets here
                destroy = int.from_bytes(unit, "big", signed=True) < offset
                if destroy:
                    log.info("physic min offset %d, logics in current mappedFile max offset %d, delete it",
                             offset, int.from_bytes(unit, "big", signed=True))
            else:
                log.warning("Found a hanged consume queue file, attempting to delete it.")
                destroy = True
            if destroy and self._destroy(mf, 1000 * 60):
                files.append(mf)
            else:
                break
        self.delete_expired_file(files)
        return len(files)

    def retry_delete_first_file(self, interval_forcibly: int) -> bool:
        """MappedFileQueue.retryDeleteFirstFile: a first file whose destroy failed, once more."""
        mf = self.get_first_mapped_file()
        if mf is None or mf.available:
            return False
        log.warning("the mappedFile was destroyed once, but still alive, %s", mf.file_name)
        result = self._destroy(mf, interval_forcibly)
        if result:
            log.info("the mappedFile re delete OK, %s", mf.file_name)
            self.delete_expired_file([mf])
        else:
            log.warning("the mappedFile re delete failed, %s", mf.file_name)
        return result

    @staticmethod
    def _destroy(mf: MappedFile, interval_forcibly: int) -> bool:
        try:
            return mf.destroy(interval_forcibly)
        except OSError as e:
            log.warning("%s: destroy failed (%s), the file stays, unavailable", mf.file_name, e)
            return False

    def delete_expired_file(self, files: list[MappedFile]) -> None:
        """MappedFileQueue.deleteExpiredFile: drop destroyed files from the list."""
        gone = {id(mf) for mf in files}
        self.mapped_files = [mf for mf in self.mapped_files if id(mf) not in gone]

    def close(self) -> None:
        for mf in self.mapped_files:
            mf.close()
