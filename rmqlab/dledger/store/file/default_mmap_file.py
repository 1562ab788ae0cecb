"""DefaultMmapFile (io.openmessaging.storage.dledger.store.file.DefaultMmapFile, 0.3.1.2).

One fixed-size, memory-mapped file of DLedger's data or index list, named by the 20-digit offset of
its first byte. DLedger carries its own copy of RocketMQ's MappedFile rather than depending on
RocketMQ's store (the dependency runs the other way: RocketMQ's DLedgerCommitLog uses DLedger), and
so does rmqlab: rmqlab.dledger sits beside rmqlab.store in the storage layer and may not import it
(tests/test_layers.py). What the two share is the machine's page cache (rmqlab.runtime.page_cache):
written bytes survive a process crash (a real `mmap`), a machine crash keeps only what was flushed.

Positions, as DLedger has them: `wrote_position` (appended up to), `flushed_position` (msync'd up to
— but truncateOffset sets it too, see below), `committed_position` (DLedger has no transient store
pool, `commit` just copies wrote_position), and `start_position`, DLedger's addition: where the
first live entry of the first file starts after the index list was re-based (resetOffset).

Deviations, on purpose:
* `truncate_to` (DLedger: setWrotePosition/setCommittedPosition/setFlushedPosition) also zeroes the
  bytes from the cut on. DLedger leaves them, so a restart before they are overwritten can read the
  cut entries back as valid (contiguous index, non-decreasing term): a truncated follower would
  recover entries its leader told it to drop. rmqlab's MappedFile does the same (its truncate_to).
* A new file is sized under a hidden temporary name and renamed into place, so a crash never
  leaves a short file under a real name (DLedger's load would then refuse to start).
* There is no reference counting (ReferenceResource: hold/release): one thread uses a file; reads
  return copies (`select_mapped_buffer`), so a file can always be unmapped.
"""

from __future__ import annotations

import dataclasses
import errno
import logging
import mmap
import os

from rmqlab.runtime.page_cache import PageCache

log = logging.getLogger("rmqlab.dledger")

OS_PAGE_SIZE = 1024 * 4  # DefaultMmapFile.OS_PAGE_SIZE

_ZERO_CHUNK = bytes(1 << 20)


class DLedgerFileError(Exception):
    """A data or index file that cannot be used as is (bad name, wrong size)."""


def offset_to_file_name(offset: int) -> str:
    """DLedgerUtils.offset2FileName: 20 digits, zero-padded."""
    return f"{offset:020d}"


@dataclasses.dataclass
class SelectMmapBufferResult:
    """SelectMmapBufferResult: bytes read from a file, and the absolute offset they start at.

    `byte_buffer` is a copy (see the module docstring); `size` may be shortened by a reader (RocketMQ's
    DLedgerCommitLog.truncate cuts a read at the committed position)."""

    start_offset: int
    byte_buffer: bytes
    size: int

    def release(self) -> None:
        """SelectMmapBufferResult.release: nothing is held here (no reference counting)."""


class DefaultMmapFile:
    def __init__(self, file_name: str, file_size: int, page_cache: PageCache | None = None):
        base = os.path.basename(file_name)
        if len(base) != 20 or not base.isdigit():
            raise DLedgerFileError(f"{file_name}: a DLedger file is named by its 20-digit start offset")
        self.file_name = file_name
        self.file_size = file_size
        self.file_from_offset = int(base)
        self.page_cache = page_cache
        existed = os.path.exists(file_name)
        if existed and os.path.getsize(file_name) != file_size:
            raise DLedgerFileError(f"{file_name}: {os.path.getsize(file_name)} bytes, not the configured {file_size}")
        if not existed:
            _create_sized(file_name, file_size)
        fd = os.open(file_name, os.O_RDWR)
        try:
            self._mm = mmap.mmap(fd, file_size, access=mmap.ACCESS_WRITE)
        finally:
            os.close(fd)
        self.start_position = 0
        self.wrote_position = 0
        self.committed_position = 0
        self.flushed_position = 0
        self.first_create_in_queue = False
        # The page-cache model: bytes of this file from `_durable` on are lost by a machine crash.
        # A file that existed when the store opened counts as durable (see page_cache).
        self._durable = 0 if not existed else file_size
        self._dirty_from = file_size  # lowest byte written since the last msync
        if page_cache is not None and not existed:
            page_cache.track_append(file_name, 0)

    # -- writing -----------------------------------------------------------------------------
    def append_message(self, data, offset: int = 0, length: int | None = None) -> bool:
        """appendMessage(data, offset, length): False when it does not fit."""
        if length is None:
            length = len(data) - offset
        pos = self.wrote_position
        if pos + length > self.file_size:
            return False
        self._mm[pos:pos + length] = data[offset:offset + length]
        self._dirty_from = min(self._dirty_from, pos)
        self.wrote_position = pos + length
        return True

    def is_full(self) -> bool:
        return self.wrote_position == self.file_size

    def get_read_position(self) -> int:
        """getReadPosition: what was written is readable (no transient store pool)."""
        return self.wrote_position

    def commit(self, commit_least_pages: int = 0) -> int:
        self.committed_position = self.wrote_position
        return self.committed_position

    # -- durability --------------------------------------------------------------------------
    def is_able_to_flush(self, flush_least_pages: int) -> bool:
        write_pos = self.get_read_position()
        if self.is_full():
            return write_pos > self.flushed_position
        if flush_least_pages > 0:
            return (write_pos // OS_PAGE_SIZE) - (self.flushed_position // OS_PAGE_SIZE) >= flush_least_pages
        return write_pos > self.flushed_position

    def flush(self, flush_least_pages: int = 0) -> int:
        """flush: msync (DLedger forces the whole mapping; only the dirty range can hold news)."""
        if self.is_able_to_flush(flush_least_pages):
            value = self.get_read_position()
            start = min(self._dirty_from, self.flushed_position, value)
            start -= start % mmap.PAGESIZE
            if value > start:
                self._mm.flush(start, value - start)
            self._dirty_from = self.file_size
            self.flushed_position = value
            self._set_durable(value)
        return self.flushed_position

    def _set_durable(self, durable: int) -> None:
        self._durable = durable
        if self.page_cache is None:
            return
        if durable >= self.file_size:
            self.page_cache.untrack(self.file_name)  # wholly durable: nothing left to lose
        else:
            self.page_cache.track_append(self.file_name, durable)

    def truncate_to(self, pos: int) -> None:
        """MmapFileList.truncateOffset on the file holding the cut: all positions to `pos`, and (an
        rmqlab deviation, see the module docstring) the bytes from `pos` on zeroed and msync'd."""
        for start, end in self._data_regions(pos):
            while start < end:
                stop = min(end, start + len(_ZERO_CHUNK))
                if self._mm[start:stop] != _ZERO_CHUNK[:stop - start]:
                    self._mm[start:stop] = _ZERO_CHUNK[:stop - start]
                    page = start - start % mmap.PAGESIZE
                    self._mm.flush(page, stop - page)
                start = stop
        self.wrote_position = pos
        self.committed_position = pos
        self.flushed_position = pos
        # What lay before the cut and was not flushed stays as durable as it was.
        self._set_durable(min(self._durable, pos))

    def _data_regions(self, pos: int) -> list[tuple[int, int]]:
        """The ranges from `pos` that may hold non-zero bytes (SEEK_DATA / SEEK_HOLE): a file is
        created sparse, so reading its holes would only fault pages in. Unknown: the whole rest."""
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
                    if e.errno == errno.ENXIO:
                        break
                    return [(pos, self.file_size)]
                hole = min(self.file_size, os.lseek(fd, data, os.SEEK_HOLE))
                regions.append((max(start, data), hole))
                start = hole
        finally:
            os.close(fd)
        return regions

    # -- reading -----------------------------------------------------------------------------
    def select_mapped_buffer(self, pos: int, size: int | None = None) -> SelectMmapBufferResult | None:
        """selectMappedBuffer(pos, size), or (size None) selectMappedBuffer(pos): up to the read
        position. None when the range is not wholly written, as in DLedger."""
        read_position = self.get_read_position()
        if size is None:
            if not 0 <= pos < read_position:
                return None
            size = read_position - pos
        elif pos + size > read_position or pos < 0:
            log.warning("selectMappedBuffer request pos invalid, request pos=%d size=%d fileFromOffset=%d readPos=%d",
                        pos, size, self.file_from_offset, read_position)
            return None
        return SelectMmapBufferResult(self.file_from_offset + pos, self._mm[pos:pos + size], size)

    def get_data(self, pos: int, size: int) -> bytes | None:
        """getData(pos, size, ByteBuffer): the bytes, or None when not wholly written."""
        if pos < 0 or pos + size > self.get_read_position():
            return None
        return self._mm[pos:pos + size]

    def view(self, pos: int = 0, end: int | None = None) -> memoryview:
        """Zero-copy view of [pos, end) (end: the read position), for a reader that scans many
        entries (select_mapped_buffer copies). Release it before the file is closed."""
        return memoryview(self._mm)[pos:self.get_read_position() if end is None else end]

    def slice_byte_buffer(self) -> memoryview:
        """sliceByteBuffer: the whole mapping (recovery reads headers from it). Release the view
        (`with` or .release()) before the file is closed."""
        return memoryview(self._mm)

    def get_last_modified_timestamp(self) -> int:
        return int(os.path.getmtime(self.file_name) * 1000)

    # -- lifecycle ---------------------------------------------------------------------------
    def shutdown(self) -> None:
        """Unmap without flushing: the kernel still owns the dirty pages (a process exit)."""
        if not self._mm.closed:
            self._mm.close()

    def destroy(self) -> bool:
        self.shutdown()
        if self.page_cache is not None:
            self.page_cache.untrack(self.file_name)
        if os.path.exists(self.file_name):
            os.remove(self.file_name)
        log.info("delete file %s W:%d M:%d", self.file_name, self.wrote_position, self.flushed_position)
        return True

    def __repr__(self) -> str:
        return (f"DefaultMmapFile({os.path.basename(self.file_name)}, start={self.start_position}, "
                f"wrote={self.wrote_position}, flushed={self.flushed_position}, size={self.file_size})")


def _create_sized(file_name: str, file_size: int) -> None:
    """Create `file_name` at its full size in one visible step (a hidden temporary, then rename)."""
    os.makedirs(os.path.dirname(file_name) or ".", exist_ok=True)
    tmp = os.path.join(os.path.dirname(file_name), "." + os.path.basename(file_name) + ".tmp")
    fd = os.open(tmp, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        os.ftruncate(fd, file_size)  # sparse: a fresh mapped file reads zeros
    finally:
        os.close(fd)
    os.rename(tmp, file_name)
