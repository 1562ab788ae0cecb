"""EpochFileCache: which master epoch wrote which commitlog range.

Mirrors `store/.../ha/autoswitch/EpochFileCache.java`; its entries are EpochEntry
(rmqlab.remoting.protocol.epoch_entry, RocketMQ's `remoting/.../protocol/EpochEntry.java`).
In controller mode every broker keeps, per master epoch, the commitlog offset at which that epoch
started; a slave compares its cache with the master's in the handshake to find the last offset
both agree on (`find_consistent_point`) and truncates everything after it
(`AutoSwitchHAClient.doTruncate`).

The cache is persisted to `<storePathRootDir>/epochFileCheckpoint` in RocketMQ's exact format
(`rmqlab.common.checkpoint_file`, RocketMQ's `CheckpointFile`). endOffset is not stored: on load
each entry's end is the next entry's start and the last one is open (LONG_MAX).

Decisions on RocketMQ's quirks (each is also commented where it is implemented):
* Stale endOffset after a suffix truncation (`doTruncateSuffix`): FIXED - the new last
  entry is reopened (endOffset LONG_MAX), which is what the Java code intends and what a
  restart would produce; the protocol never relies on the stale value.
* An emptied cache is never written (`CheckpointFile.write`): FIXED - the files are removed, so
  truncating to nothing survives a restart; RocketMQ reads the result the same way.
* Both the file and its `.bak` unusable: RocketMQ starts with an empty cache; rmqlab raises
  CheckpointFileCorruptError (see CheckpointFile.read for why).
"""

from __future__ import annotations

import logging
import os
import threading
from bisect import bisect_left
from collections.abc import Iterable

from rmqlab.common.checkpoint_file import LONG_MAX, CheckpointFile, parse_java_integer
from rmqlab.remoting.protocol.epoch_entry import EpochEntry

log = logging.getLogger("rmqlab.store")


class EpochEntrySerializer:
    """EpochFileCache.EpochEntrySerializer: one `epoch-startOffset` line per entry."""

    def to_line(self, entry: EpochEntry) -> str:
        return f"{entry.epoch}-{entry.start_offset}"

    def from_line(self, line: str) -> EpochEntry | None:
        """The entry, None for a line that does not split into exactly two parts (skipped, as in
        RocketMQ), ValueError when a part is not a number (RocketMQ: NumberFormatException)."""
        parts = line.split("-")
        # Java's String.split drops trailing empty strings ("1-100-" gives ["1", "100"]); mirrored
        # so that exactly the lines RocketMQ accepts are accepted.
        while parts and parts[-1] == "":
            parts.pop()
        if len(parts) != 2:
            return None
        return EpochEntry(parse_java_integer(parts[0], 32), parse_java_integer(parts[1], 64))


def _check_ascending(entries: list[EpochEntry]) -> None:
    """ValueError unless epochs and start offsets both strictly increase.

    Deviation: RocketMQ loads any order (its TreeMap re-sorts by epoch while the end offsets
    follow list order), which can produce overlapping or backward ranges. Every list RocketMQ
    itself writes or sends is strictly increasing - append_entry enforces it - so rejecting
    anything else only rejects damage.
    """
    for number, (prev, cur) in enumerate(zip(entries, entries[1:]), start=2):
        if cur.epoch <= prev.epoch or cur.start_offset <= prev.start_offset:
            raise ValueError(
                f"entry #{number} (epoch {cur.epoch}, start {cur.start_offset}) does not follow entry "
                f"#{number - 1} (epoch {prev.epoch}, start {prev.start_offset}): epochs and start "
                f"offsets must strictly increase")


class EpochFileCache:
    """Epoch -> EpochEntry map, optionally persisted to a checkpoint file.

    Without a path the cache lives only in memory (the scratch caches of the handshake). With a
    path it is loaded on construction and the file is rewritten on every mutation. Returned
    entries are always copies.
    """

    def __init__(self, path: str | os.PathLike[str] | None = None):
        # RocketMQ keeps a TreeMap<Integer, EpochEntry>. Entries here always strictly increase in
        # both epoch and start offset (append_entry enforces it, loads are validated), so a
        # sorted list gives the same iteration order, and bisect the same lookups.
        self._entries: list[EpochEntry] = []
        # RocketMQ uses a ReentrantReadWriteLock; under the GIL a plain re-entrant lock costs
        # nothing noticeable and keeps every mutation and its file write atomic.
        self._lock = threading.RLock()
        self._checkpoint: CheckpointFile[EpochEntry] | None = None
        if path is not None:
            self._checkpoint = CheckpointFile(path, EpochEntrySerializer(), validator=_check_ascending, logger=log)
            # Deviation: RocketMQ's constructor does not read the file; AutoSwitchHAService calls
            # initCacheFromFile() right after constructing. Loading here removes a step that is
            # easy to forget.
            self.init_cache_from_file()

    @property
    def file_path(self) -> str | None:
        return None if self._checkpoint is None else self._checkpoint.file_path

    def __repr__(self) -> str:
        return f"EpochFileCache(path={self.file_path!r}, entries={self.get_all_entries()!r})"

    # ------------------------------------------------------------------ loading

    def init_cache_from_file(self) -> None:
        """Replace the cache with the file's entries, falling back to `.bak` (`initCacheFromFile`).

        Ends are recomputed (each = next start, last = LONG_MAX). Raises CheckpointFileCorruptError
        when neither file can supply the entries, leaving the cache unchanged - RocketMQ returns
        false there and the broker carries on with an empty cache (see CheckpointFile.read).
        ValueError for a cache without a path.
        """
        if self._checkpoint is None:
            raise ValueError("init_cache_from_file: this EpochFileCache has no file path")
        with self._lock:
            self._init_entries(self._checkpoint.read())

    def init_cache_from_entries(self, entries: Iterable[EpochEntry]) -> None:
        """Replace the cache with copies of `entries` and rewrite the file (`initCacheFromEntries`).

        Each entry's end becomes the next entry's start; the last keeps the end it carries.
        ValueError unless epochs and starts strictly increase (a deviation, see
        `_check_ascending`). Deviation: RocketMQ stores the caller's objects, so mutating them
        later changes the cache; copies are stored here.
        """
        copies = []
        for entry in entries:
            if not isinstance(entry, EpochEntry):
                raise TypeError(f"init_cache_from_entries expects EpochEntry items, got {entry!r}")
            copies.append(entry.copy())
        try:
            _check_ascending(copies)
        except ValueError as exc:
            raise ValueError(f"init_cache_from_entries: {exc}") from None
        with self._lock:
            self._init_entries(copies)
            self._flush()

    def _init_entries(self, entries: list[EpochEntry]) -> None:
        for prev, cur in zip(entries, entries[1:]):
            prev.end_offset = cur.start_offset
        self._entries = entries

    # ------------------------------------------------------------------ mutations

    def append_entry(self, entry: EpochEntry) -> bool:
        """Append a new epoch (`appendEntry`).

        Rejected - False, nothing changes - unless both epoch and start offset are strictly
        greater than the last entry's. On success the previous last entry ends at the new start,
        a copy of `entry` is stored and the file is rewritten.
        """
        if not isinstance(entry, EpochEntry):
            raise TypeError(f"append_entry expects an EpochEntry, got {entry!r}")
        with self._lock:
            if self._entries:
                last = self._entries[-1]
                if last.epoch >= entry.epoch or last.start_offset >= entry.start_offset:
                    log.error("append rejected: %s does not have a greater epoch and start offset than "
                              "the last entry %s", entry, last)
                    return False
                last.end_offset = entry.start_offset
            self._entries.append(entry.copy())
            self._flush()
            return True

    def set_last_epoch_entry_end_offset(self, end_offset: int) -> None:
        """Set the last entry's end to `end_offset` if last.start_offset <= end_offset, else do
        nothing (`setLastEpochEntryEndOffset`). Memory only: the file does not store end offsets."""
        if not isinstance(end_offset, int) or isinstance(end_offset, bool) or end_offset > LONG_MAX:
            raise ValueError(f"set_last_epoch_entry_end_offset: {end_offset!r} is not a 64-bit offset")
        with self._lock:
            if self._entries and self._entries[-1].start_offset <= end_offset:
                self._entries[-1].end_offset = end_offset

    def truncate_suffix_by_epoch(self, truncate_epoch: int) -> None:
        """Remove entries with epoch >= truncate_epoch; the new last entry is reopened
        (`truncateSuffixByEpoch`).

        Quirk "stale endOffset after suffix truncation": FIXED, see `_do_truncate_suffix`.
        """
        self._do_truncate_suffix(lambda entry: entry.epoch >= truncate_epoch)

    def truncate_suffix_by_offset(self, truncate_offset: int) -> None:
        """Remove entries with start_offset >= truncate_offset; the new last entry is reopened
        (`truncateSuffixByOffset`).

        Quirk "stale endOffset after suffix truncation": FIXED, see `_do_truncate_suffix`.
        Truncating everything removes the file (FIXED, see CheckpointFile.write).
        """
        self._do_truncate_suffix(lambda entry: entry.start_offset >= truncate_offset)

    def _do_truncate_suffix(self, remove) -> None:
        with self._lock:
            self._entries = [entry for entry in self._entries if not remove(entry)]
            if self._entries:
                # Quirk fixed: RocketMQ's doTruncateSuffix calls setEndOffset(Long.MAX_VALUE) on
                # the copy lastEntry() returns, so the stored entry keeps the start of the first
                # removed entry as its end until the next append or restart, and offsets past it
                # belong to no epoch. The protocol never relies on that stale value (the handshake
                # recomputes ends in scratch caches), a restart reopens the entry anyway, and a
                # learner comparing with the Java code sees what it clearly intends. The file is
                # unaffected because it does not store end offsets.
                self._entries[-1].end_offset = LONG_MAX
            self._flush()

    def truncate_prefix_by_offset(self, truncate_offset: int) -> None:
        """Remove entries with end_offset <= truncate_offset and rewrite the file
        (`truncatePrefixByOffset`).

        Called after expired commitlog files are deleted, with minPhyOffset - 1. The open last
        entry survives any offset below LONG_MAX; the first survivor keeps its start offset (as
        in RocketMQ, it is not moved up to the new minimum).
        """
        with self._lock:
            self._entries = [entry for entry in self._entries if not entry.end_offset <= truncate_offset]
            self._flush()

    def _flush(self) -> None:
        if self._checkpoint is None:
            return
        try:
            self._checkpoint.write(self._entries)
        except OSError as exc:
            # Mirrors RocketMQ, which logs and carries on: the mutation has happened in memory and
            # every write rewrites the whole file, so the next successful write heals the file.
            # Failing here would abort a role change half-way.
            log.error("could not write epoch checkpoint %s (%s); it is behind the in-memory cache "
                      "until the next successful write", self._checkpoint.file_path, exc)

    # ------------------------------------------------------------------ lookups

    def get_entry_size(self) -> int:
        """Number of entries."""
        with self._lock:
            return len(self._entries)

    def first_entry(self) -> EpochEntry | None:
        """Copy of the lowest-epoch entry, None when empty."""
        with self._lock:
            return self._entries[0].copy() if self._entries else None

    def last_entry(self) -> EpochEntry | None:
        """Copy of the highest-epoch entry, None when empty."""
        with self._lock:
            return self._entries[-1].copy() if self._entries else None

    def last_epoch(self) -> int:
        """The highest epoch, -1 when empty."""
        with self._lock:
            return self._entries[-1].epoch if self._entries else -1

    def get_entry(self, epoch: int) -> EpochEntry | None:
        """Copy of the entry for `epoch`, None if absent."""
        with self._lock:
            i = bisect_left(self._entries, epoch, key=lambda e: e.epoch)
            if i < len(self._entries) and self._entries[i].epoch == epoch:
                return self._entries[i].copy()
            return None

    def next_entry(self, epoch: int) -> EpochEntry | None:
        """Copy of the first entry with epoch >= epoch + 1 (TreeMap.ceilingEntry), None if none.

        (Java's epoch + 1 wraps to Integer.MIN_VALUE for epoch = Integer.MAX_VALUE and returns the
        first entry; Python ints do not wrap, so that unreachable case returns None here.)
        """
        with self._lock:
            i = bisect_left(self._entries, epoch + 1, key=lambda e: e.epoch)
            return self._entries[i].copy() if i < len(self._entries) else None

    def get_all_entries(self) -> list[EpochEntry]:
        """Copies of all entries, ascending epoch."""
        with self._lock:
            return [entry.copy() for entry in self._entries]

    def find_epoch_entry_by_offset(self, offset: int) -> EpochEntry | None:
        """Copy of the first entry (ascending epoch) with start_offset <= offset < end_offset,
        None if none."""
        with self._lock:
            for entry in self._entries:
                if entry.start_offset <= offset < entry.end_offset:
                    return entry.copy()
            return None

    def find_consistent_point(self, compare_cache: EpochFileCache) -> int:
        """The offset up to which this cache and `compare_cache` agree, -1 if none
        (`findConsistentPoint`).

        Walk the local entries from the highest epoch down; the first epoch that `compare_cache`
        also has with the same start offset is the consistent epoch, and the result is the smaller
        of the two end offsets for it. Epochs only `compare_cache` has are never looked at.
        """
        # Snapshot, then query compare_cache outside our lock: holding both caches' locks could
        # deadlock two threads comparing in opposite directions (RocketMQ holds its read lock).
        local_descending = self.get_all_entries()[::-1]
        for local in local_descending:
            other = compare_cache.get_entry(local.epoch)
            if other is not None and other.start_offset == local.start_offset:
                return min(local.end_offset, other.end_offset)
        return -1
