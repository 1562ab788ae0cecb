"""MappedFile: one fixed-size, memory-mapped file of a CommitLog or ConsumeQueue.

Mirrors org.apache.rocketmq.store.logfile.DefaultMappedFile: the file is named by
the 20-digit offset of its first byte, pre-allocated to its full size (sparse here), written through
an `mmap` (so a process crash keeps what was written: the OS page cache survives) and made durable
by `flush` (msync). `wrote_position` is how far data was appended; `flushed_position` how far it is
durable. rmqlab has no transient store pool, so RocketMQ's separate `committedPosition` equals
`wrote_position` and is not modelled.
"""

from __future__ import annotations

import errno
import logging
import mmap
import os

from rmqlab.runtime.page_cache import PageCache
from rmqlab.store import crash_points

log = logging.getLogger("rmqlab.store")

OS_PAGE_SIZE = mmap.PAGESIZE  # RocketMQ assumes 4 KiB too (MappedFile.OS_PAGE_SIZE)


def offset_to_file_name(offset: int) -> str:
    """UtilAll.offset2FileName: 20 digits, zero-padded."""
    return f"{offset:020d}"


_ZERO_CHUNK_SIZE = 1 << 20
_ZERO_CHUNK = bytes(_ZERO_CHUNK_SIZE)

class StoreFileError(Exception):
    """A store file that cannot be used as is (wrong size, bad name, unreadable)."""


def temp_file_name(file_name: str) -> str:
    """Where a mapped file is sized before it appears under its real name (hidden: `load` skips it)."""
    return os.path.join(os.path.dirname(file_name), "." + os.path.basename(file_name) + ".tmp")


def _create_sized(file_name: str, file_size: int) -> None:
    """Create `file_name` at its full size in one visible step: size a temporary file, then rename.

    Deviation from RocketMQ, whose DefaultMappedFile.init opens the file under its real name and
    maps it, so a crash in between leaves a 0-byte file that MappedFileQueue.doLoad deletes (only
    as the last file). Here a crash leaves at most a hidden temporary file, which `load` removes;
    no half-made file ever carries a real name. (The rename is not followed by a directory fsync:
    the machine-crash model keeps directory entries, see page_cache.)
    """
    os.makedirs(os.path.dirname(file_name) or ".", exist_ok=True)
    tmp = temp_file_name(file_name)
    fd = os.open(tmp, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        crash_points.point("create", tmp)
        os.ftruncate(fd, file_size)  # sparse pre-allocation, like a fresh RocketMQ file reads zeros
    finally:
        os.close(fd)
    crash_points.point("truncate", tmp)
    os.rename(tmp, file_name)


class MappedFile:
    def __init__(self, file_name: str, file_size: int, page_cache: PageCache | None = None):
        base = os.path.basename(file_name)
        if len(base) != 20 or not base.isdigit():
            raise StoreFileError(f"{file_name}: a mapped file is named by its 20-digit start offset")
        self.file_name = file_name
        self.file_size = file_size
        self.file_from_offset = int(base)
        self.page_cache = page_cache
        existed = os.path.exists(file_name)
        if existed and os.path.getsize(file_name) != file_size:
            raise StoreFileError(
                f"{file_name}: size {os.path.getsize(file_name)} differs from the configured mapped file "
                f"size {file_size} (was the store written with another mappedFileSize?)"
            )
        if not existed:
            _create_sized(file_name, file_size)
        fd = os.open(file_name, os.O_RDWR)
        try:
            self._mm = mmap.mmap(fd, file_size, access=mmap.ACCESS_WRITE)
        finally:
            os.close(fd)
        self.wrote_position = 0
        self.flushed_position = 0
        # The node's clock at the last append (CommitLog sets it): what fileReservedTime ages
        # against. Written to the file's mtime on flush and close, so a simulated store ages in
        # virtual time across restarts too; None: not written since it was mapped (the mtime).
        self.last_modified_ms: int | None = None
        self.available = True  # False once destroy began (ReferenceResource.available)
        if page_cache is not None and not existed:
            page_cache.track_append(file_name, 0)
        if not existed:
            crash_points.point("create", file_name)

    # -- writing ---------------------------------------------------------------------------
    def remaining(self) -> int:
        return self.file_size - self.wrote_position

    def is_full(self) -> bool:
        return self.wrote_position == self.file_size

    def append(self, data: bytes, *, advance_to: int | None = None) -> int:
        """Append `data` at wrote_position; returns the file-relative position written at.

        `advance_to` lets a blank end-of-file marker (8 real bytes) count the whole tail as written,
        as RocketMQ's END_OF_FILE result does.
        """
        pos = self.wrote_position
        end = pos + len(data)
        if end > self.file_size:
            raise StoreFileError(f"{self.file_name}: append of {len(data)} bytes at {pos} overflows the file")
        self._write(pos, data)
        self.wrote_position = advance_to if advance_to is not None else end
        return pos

    def write_at(self, pos: int, data: bytes) -> None:
        """Overwrite in place (ConsumeQueue pre-fill); does not move wrote_position."""
        self._write(pos, data)

    def _write(self, pos: int, data: bytes) -> None:
        cut = crash_points.write_point(self.file_name, len(data))
        if cut is not None:  # a crash test kills the process part-way through this copy
            self._mm[pos : pos + cut] = data[:cut]
            crash_points.crash(self.file_name)
        self._mm[pos : pos + len(data)] = data

    # -- reading ---------------------------------------------------------------------------
    def read(self, pos: int, size: int) -> bytes:
        """Bytes [pos, pos+size) within what was written (clamped)."""
        end = min(pos + size, self.wrote_position)
        return self._mm[pos:end] if end > pos else b""

    def view(self, pos: int = 0, end: int | None = None) -> memoryview:
        """Zero-copy view of [pos, end) of the mapping (end defaults to wrote_position)."""
        return memoryview(self._mm)[pos : self.wrote_position if end is None else end]

    # -- durability ------------------------------------------------------------------------
    def is_able_to_flush(self, flush_least_pages: int) -> bool:
        """DefaultMappedFile.isAbleToFlush."""
        if self.is_full():
            return self.wrote_position > self.flushed_position
        if flush_least_pages > 0:
            return (self.wrote_position // OS_PAGE_SIZE) - (self.flushed_position // OS_PAGE_SIZE) >= flush_least_pages
        return self.wrote_position > self.flushed_position

    def flush(self, flush_least_pages: int = 0) -> int:
        if self.is_able_to_flush(flush_least_pages):
            start = self.flushed_position - self.flushed_position % OS_PAGE_SIZE
            self._mm.flush(start, self.wrote_position - start)
            self.flushed_position = self.wrote_position
            if self.page_cache is not None:
                if self.is_full():
                    self.page_cache.untrack(self.file_name)  # wholly durable: nothing left to lose
                else:
                    self.page_cache.track_append(self.file_name, self.flushed_position)
            crash_points.point("flush", self.file_name)
            self._stamp_mtime()
        return self.flushed_position

    def get_last_modified_timestamp(self) -> int:
        """DefaultMappedFile.getLastModifiedTimestamp: the file's mtime, in epoch ms."""
        if self.last_modified_ms is not None:
            return self.last_modified_ms
        try:
            return os.stat(self.file_name).st_mtime_ns // 1_000_000
        except FileNotFoundError:
            return 0

    def _stamp_mtime(self) -> None:
        if self.last_modified_ms is not None and os.path.exists(self.file_name):
            ns = self.last_modified_ms * 1_000_000
            os.utime(self.file_name, ns=(ns, ns))

    def mark_durable(self) -> None:
        """Positions set by recovery: what is on disk at start is durable (see page_cache)."""
        self.flushed_position = self.wrote_position
        if self.page_cache is not None and not self.is_full():
            self.page_cache.track_append(self.file_name, self.wrote_position)

    def truncate_to(self, pos: int) -> None:
        """Cut the file at `pos`: zero every non-zero byte from there and move both positions back.

        Deviation from RocketMQ (truncateDirtyFiles only moves the positions): the cut bytes are
        zeroed and made durable, so a later recovery can never read a cut message that happens to
        sit right after newly written data.
        """
        for start, end in self._data_regions(pos):
            while start < end:
                stop = min(end, start - start % _ZERO_CHUNK_SIZE + _ZERO_CHUNK_SIZE)
                zeros = _ZERO_CHUNK[:stop - start] if stop - start < _ZERO_CHUNK_SIZE else _ZERO_CHUNK
                if self._mm[start:stop] != zeros:  # a bytes compare (memcmp)
                    self._mm[start:stop] = zeros
                    page = start - start % OS_PAGE_SIZE
                    self._mm.flush(page, stop - page)
                    crash_points.point("truncate", self.file_name)
                start = stop
        self.wrote_position = pos
        self.mark_durable()

    def _data_regions(self, pos: int) -> list[tuple[int, int]]:
        """The ranges from `pos` on that may hold non-zero bytes: the file's data regions
        (lseek SEEK_DATA / SEEK_HOLE). A mapped file is created sparse and written from its start,
        so past the last write there are only holes, and reading them would fault in every page.
        Where the file system cannot say, the whole rest of the file."""
        try:
            fd = os.open(self.file_name, os.O_RDONLY)
        except OSError:
            return [(pos, self.file_size)]
        regions: list[tuple[int, int]] = []
        try:
            start = pos
            while start < self.file_size:
                try:
                    data = os.lseek(fd, start, os.SEEK_DATA)
                except OSError as e:
                    if e.errno == errno.ENXIO:  # nothing but holes from `start` to the end
                        break
                    return [(pos, self.file_size)]
                hole = min(self.file_size, os.lseek(fd, data, os.SEEK_HOLE))
                regions.append((max(start, data), hole))
                start = hole
        finally:
            os.close(fd)
        return regions

    # -- lifecycle -------------------------------------------------------------------------
    def close(self) -> None:
        """Unmap without flushing: the kernel still owns the dirty pages (process-crash semantics)."""
        if not self._mm.closed:
            self._mm.close()
            self._stamp_mtime()

    def destroy(self, interval_forcibly: int = 0) -> bool:
        """Unmap and delete the file (DefaultMappedFile.destroy). rmqlab's readers hold no
        reference past a call, so `interval_forcibly` (how long RocketMQ waits for them) never
        comes into play; an OSError from the delete leaves the file unavailable, for
        MappedFileQueue.retry_delete_first_file."""
        self.available = False
        self.close()
        if self.page_cache is not None:
            self.page_cache.untrack(self.file_name)
        if os.path.exists(self.file_name):
            os.remove(self.file_name)
            crash_points.point("delete", self.file_name)
        return True

    def __repr__(self) -> str:
        return (f"MappedFile({os.path.basename(self.file_name)}, wrote={self.wrote_position}, "
                f"flushed={self.flushed_position}, size={self.file_size})")
