"""MmapFileList (io.openmessaging.storage.dledger.store.file.MmapFileList, 0.3.1.2).

The ordered list of DefaultMmapFiles that make one logical log (DLedger's data, or its index).
Offsets are global (file start + position in file); only the last file is appended to.

Where it differs from RocketMQ's MappedFileQueue (rmqlab.store.mapped_file_queue):
* `append(data, use_blank)`: an entry never straddles two files. When `len + 8 > remaining`
  (MIN_BLANK_LEN = 8) the rest of the file is a blank — int BLANK_MAGIC_CODE (-1), int remaining,
  zeros — and the entry goes to the next file (the index list appends with use_blank=False: its
  file size is a multiple of the 32-byte unit). RocketMQ's CommitLog writes its own END_OF_FILE
  record (magic 0xBBCCDDEE) instead, not the queue.
* `load` maps every file with all positions at the file size; recovery then cuts the list with
  `truncate_offset`. A file of the wrong size stops the load (DLedger then exits).
* `truncate_offset(offset)` keeps files that end at or before `offset` as they are, moves the
  positions of the one holding it, removes those that start after it; `reset_offset(offset)` is
  its mirror image at the front (files that end at or before `offset` are removed, the one holding
  it gets `start_position`) — how the index list is re-based to ledgerBeginIndex x 32 when the data
  list lost its first files; `rebuild_with_pos(pos)` drops every file and starts an empty list at
  `pos` (a follower truncated beyond its own end).
* `flush` flushes one file per call, the one holding `flushed_where`, and returns — as DLedger
  does — True when nothing moved.

Deviation: files beyond a cut are deleted last first (DLedger: first to last), so a crash in the
middle leaves a list without a gap, which `check_self` would refuse.
"""

from __future__ import annotations

import logging
import os
import struct

from rmqlab.dledger.store.file.default_mmap_file import (DefaultMmapFile, DLedgerFileError,
                                                         SelectMmapBufferResult, offset_to_file_name)
from rmqlab.runtime.page_cache import PageCache

log = logging.getLogger("rmqlab.dledger")

MIN_BLANK_LEN = 8
BLANK_MAGIC_CODE = -1
_BLANK = struct.Struct(">ii")


class MmapFileList:
    def __init__(self, store_path: str, mapped_file_size: int, page_cache: PageCache | None = None):
        if mapped_file_size <= 0:
            raise DLedgerFileError(f"{store_path}: mapped file size must be positive, got {mapped_file_size}")
        self.store_path = store_path
        self.mapped_file_size = mapped_file_size
        self.page_cache = page_cache
        self.mapped_files: list[DefaultMmapFile] = []
        self.flushed_where = 0
        self.committed_where = 0
        self.bad_file: str | None = None  # the file that made `load` fail

    # -- shape -------------------------------------------------------------------------------
    def check_self(self) -> bool:
        """checkSelf: adjacent files are exactly one file size apart."""
        for pre, cur in zip(self.mapped_files, self.mapped_files[1:], strict=False):
            if cur.file_from_offset - pre.file_from_offset != self.mapped_file_size:
                log.error("[BUG]The mappedFile queue's data is damaged, the adjacent mappedFile's offset don't "
                          "match pre file %s, cur file %s", pre.file_name, cur.file_name)
                return False
        return True

    def get_mapped_files(self) -> list[DefaultMmapFile]:
        return self.mapped_files

    def get_mapped_file_size(self) -> int:
        return self.mapped_file_size

    def get_first_mapped_file(self) -> DefaultMmapFile | None:
        return self.mapped_files[0] if self.mapped_files else None

    def get_last_mapped_file(self, start_offset: int | None = None, need_create: bool = True) -> DefaultMmapFile | None:
        """getLastMappedFile() (start_offset None: the last file, never created) and
        getLastMappedFile(startOffset[, needCreate]): a new file when there is none or the last is full."""
        last = self.mapped_files[-1] if self.mapped_files else None
        if start_offset is None:
            return last
        create_offset = -1
        if last is None:
            create_offset = start_offset - start_offset % self.mapped_file_size
        elif last.is_full():
            create_offset = last.file_from_offset + self.mapped_file_size
        if create_offset != -1 and need_create:
            return self._try_create_mapped_file(create_offset)
        return last

    def _try_create_mapped_file(self, create_offset: int) -> DefaultMmapFile:
        mf = DefaultMmapFile(os.path.join(self.store_path, offset_to_file_name(create_offset)),
                             self.mapped_file_size, self.page_cache)
        if not self.mapped_files:
            mf.first_create_in_queue = True
        self.mapped_files.append(mf)
        return mf

    def find_mapped_file_by_offset(self, offset: int, return_first_on_not_found: bool = False) -> DefaultMmapFile | None:
        first, last = self.get_first_mapped_file(), self.get_last_mapped_file()
        if first is None or last is None:
            return None
        if offset < first.file_from_offset or offset >= last.file_from_offset + self.mapped_file_size:
            log.warning("Offset not matched. Request offset: %d, firstOffset: %d, lastOffset: %d, mappedFileSize: %d, "
                        "mappedFiles count: %d", offset, first.file_from_offset,
                        last.file_from_offset + self.mapped_file_size, self.mapped_file_size, len(self.mapped_files))
        else:
            index = offset // self.mapped_file_size - first.file_from_offset // self.mapped_file_size
            if 0 <= index < len(self.mapped_files):
                target = self.mapped_files[index]
                if target.file_from_offset <= offset < target.file_from_offset + self.mapped_file_size:
                    return target
            for mf in self.mapped_files:
                if mf.file_from_offset <= offset < mf.file_from_offset + self.mapped_file_size:
                    return mf
        return first if return_first_on_not_found else None

    # -- positions ---------------------------------------------------------------------------
    def get_min_offset(self) -> int:
        first = self.get_first_mapped_file()
        return first.file_from_offset + first.start_position if first is not None else 0

    def get_max_read_position(self) -> int:
        last = self.get_last_mapped_file()
        return last.file_from_offset + last.get_read_position() if last is not None else 0

    def get_max_wrote_position(self) -> int:
        last = self.get_last_mapped_file()
        return last.file_from_offset + last.wrote_position if last is not None else 0

    def remain_how_many_data_to_commit(self) -> int:
        return self.get_max_wrote_position() - self.committed_where

    def remain_how_many_data_to_flush(self) -> int:
        return self.get_max_read_position() - self.flushed_where

    def update_where_position(self, where_position: int) -> None:
        """updateWherePosition: flushed_where = committed_where = `where_position` (not beyond the end)."""
        if where_position > self.get_max_wrote_position():
            log.warning("[UpdateWherePosition] wherePosition %d > maxWrotePosition %d",
                        where_position, self.get_max_wrote_position())
            return
        self.flushed_where = where_position
        self.committed_where = where_position

    # -- appending ---------------------------------------------------------------------------
    def pre_append(self, length: int, use_blank: bool = True) -> int:
        """preAppend: where `length` bytes will go; writes the end-of-file blank and rolls to a new
        file first when they do not fit with MIN_BLANK_LEN to spare. -1 on failure."""
        mf = self.get_last_mapped_file()
        if mf is None or mf.is_full():
            mf = self.get_last_mapped_file(0)
        blank = MIN_BLANK_LEN if use_blank else 0
        remaining = mf.file_size - mf.wrote_position
        if length + blank > remaining:
            if blank < MIN_BLANK_LEN:
                log.error("Blank %d should ge %d", blank, MIN_BLANK_LEN)
                return -1
            # int -1, int remaining, then zeros to the file end. The zeros are already there (a new
            # file is sparse, a cut is zeroed), so only the 8 bytes are written.
            if not mf.append_message(_BLANK.pack(BLANK_MAGIC_CODE, remaining)):
                log.error("Append blank error for %s", self.store_path)
                return -1
            mf.wrote_position = mf.file_size
            mf = self.get_last_mapped_file(0)
        return mf.file_from_offset + mf.wrote_position

    def append(self, data, pos: int = 0, length: int | None = None, use_blank: bool = True) -> int:
        """append(data, pos, len, useBlank): the absolute offset written at, -1 on failure."""
        if length is None:
            length = len(data) - pos
        if self.pre_append(length, use_blank) == -1:
            return -1
        mf = self.get_last_mapped_file()
        curr_position = mf.file_from_offset + mf.wrote_position
        if not mf.append_message(data, pos, length):
            log.error("Append error for %s", self.store_path)
            return -1
        return curr_position

    # -- reading -----------------------------------------------------------------------------
    def get_data(self, offset: int, size: int | None = None) -> SelectMmapBufferResult | None:
        """getData(offset, size) / getData(offset): from the file holding `offset`, None if not written."""
        mf = self.find_mapped_file_by_offset(offset, offset == 0)
        if mf is None:
            return None
        return mf.select_mapped_buffer(offset % self.mapped_file_size, size)

    # -- durability --------------------------------------------------------------------------
    def flush(self, flush_least_pages: int = 0) -> bool:
        """flush: the file holding flushed_where only. Returns True when flushed_where did not move."""
        mf = self.find_mapped_file_by_offset(self.flushed_where, self.flushed_where == 0)
        if mf is None:
            return True
        where = mf.file_from_offset + mf.flush(flush_least_pages)
        result = where == self.flushed_where
        self.flushed_where = where
        return result

    def commit(self, commit_least_pages: int = 0) -> bool:
        mf = self.find_mapped_file_by_offset(self.committed_where, self.committed_where == 0)
        if mf is None:
            return True
        where = mf.file_from_offset + mf.commit(commit_least_pages)
        result = where == self.committed_where
        self.committed_where = where
        return result

    # -- loading, cutting --------------------------------------------------------------------
    def load(self) -> bool:
        """load/doLoad: map every file (ascending), positions at the file size. False when a file
        has another size (DLedger then exits: "delete old files before changing mapped file size")."""
        if not os.path.isdir(self.store_path):
            return True
        names = sorted(os.listdir(self.store_path))
        for name in names:
            path = os.path.join(self.store_path, name)
            if name.startswith(".") and name.endswith(".tmp"):
                os.remove(path)  # a file whose creation a crash interrupted (never had its real name)
                log.warning("%s: a file whose creation a crash interrupted, deleted", path)
                continue
            if not (len(name) == 20 and name.isdigit()):
                raise DLedgerFileError(f"{path}: unexpected file in a DLedger file directory (names are 20-digit offsets)")
            if os.path.getsize(path) != self.mapped_file_size:
                log.warning("%s\t%d length not matched message store config value, please check it manually. "
                            "You should delete old files before changing mapped file size", path, os.path.getsize(path))
                self.bad_file = path
                return False
            mf = DefaultMmapFile(path, self.mapped_file_size, self.page_cache)
            mf.wrote_position = mf.flushed_position = mf.committed_position = self.mapped_file_size
            self.mapped_files.append(mf)
            log.info("load %s OK", path)
        return True

    def truncate_offset(self, offset: int) -> None:
        """truncateOffset: the file holding `offset` is cut there; files starting after it are removed."""
        will_remove = []
        for mf in self.mapped_files:
            if mf.file_from_offset + self.mapped_file_size > offset:
                if offset >= mf.file_from_offset:
                    mf.truncate_to(offset % self.mapped_file_size)
                else:
                    will_remove.append(mf)
        self._remove(will_remove, reverse=True)

    def reset_offset(self, offset: int) -> None:
        """resetOffset: files ending at or before `offset` are removed; the one holding it starts there."""
        will_remove = []
        for mf in reversed(self.mapped_files):
            if mf.file_from_offset <= offset:
                if offset < mf.file_from_offset + self.mapped_file_size:
                    mf.start_position = offset % self.mapped_file_size
                else:
                    will_remove.append(mf)
        self._remove(will_remove, reverse=False)

    def rebuild_with_pos(self, pos: int) -> bool:
        """rebuildWithPos: drop every file, start the list with the file holding `pos`, cut there."""
        self.truncate_offset(-1)
        self.get_last_mapped_file(pos)
        self.truncate_offset(pos)
        self.reset_offset(pos)
        return pos == self.get_max_wrote_position() and pos == self.get_min_offset()

    def _remove(self, files: list[DefaultMmapFile], *, reverse: bool) -> None:
        for mf in sorted(files, key=lambda f: f.file_from_offset, reverse=reverse):
            mf.destroy()
            self.mapped_files.remove(mf)

    def delete_last_mapped_file(self) -> None:
        last = self.get_last_mapped_file()
        if last is not None:
            last.destroy()
            self.mapped_files.remove(last)
            log.info("on recover, destroy a logic mapped file %s", last.file_name)

    def shutdown(self) -> None:
        for mf in self.mapped_files:
            mf.shutdown()

    def destroy(self) -> None:
        for mf in self.mapped_files:
            mf.destroy()
        self.mapped_files.clear()
        self.flushed_where = 0
        if os.path.isdir(self.store_path) and not os.listdir(self.store_path):
            os.rmdir(self.store_path)
