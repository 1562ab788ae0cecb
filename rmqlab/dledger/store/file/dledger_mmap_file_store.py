"""DLedgerMmapFileStore (io.openmessaging.storage.dledger.store.file.DLedgerMmapFileStore, 0.3.1.2).

Theory of operation
-------------------
A member's Raft log on disk, in two MmapFileLists:

  data   <dataStorePath> (default <root>/data)   entries, 48-byte header + body, back to back;
                                                 an entry that does not fit with 8 bytes to spare
                                                 goes to the next file after a blank (int -1,
                                                 int remaining, zeros)
  index  <root>/index                            one 32-byte unit per entry at index x 32:
                                                 magic, pos, size, index, term
  <root>/checkpoint                              properties: endIndex=, committedIndex=
                                                 (<root> = <storeBaseDir>/dledger-<selfId>)

An entry's `pos` is its absolute offset in the data files, and since every replica writes the same
entries in the same order, the same bytes sit at the same offset on every replica: that is why a
follower's append must land exactly at the leader's pos, and why RocketMQ's DLedgerCommitLog can use
the data offset as the commitlog offset (an append hook writes PHYSICALOFFSET = pos + 48 into the
message before it is written).

  ledger_begin_index  first entry still on disk (the first data file's first entry)
  ledger_end_index    last entry written (-1: empty); ledger_end_term its term
  committed_index     last entry a quorum holds (the leader's QuorumAckChecker, or the follower
                      adopting the leader's commitIndex, moves it); committed_pos = its pos + size,
                      the end of what a reader (the broker's dispatcher) may see

updateCommittedIndex(term, i), first match: i = -1, an empty log, term < currTerm or i unchanged →
ignored; i < committed or i < begin → ignored (logged); i > end → clamped to end; then committed
:= i, committed_pos := pos + size of entry i.

Writing: append_as_leader (index end+1, term = currTerm, magic 1, pos from preAppend, append hooks,
data, index); append_as_follower (exactly index end+1, the member's term and leader, pos as sent);
truncate (a follower's log made to end at the leader's entry i: kept if equal, else cut at its pos
and the leader's written; the index cut at i x 32; end := i).

Recovery (startup after any exit): from the third-last data file, walk back to a file whose first
entry agrees with its index unit; scan forward checking pos, bodySize + 48 == size, magic,
contiguous index, non-decreasing term, size > 44; rewrite index units that disagree; stop at the
first bad or zero-size entry and cut data and index there. A cut more than a file before the last
file would drop whole files of the log: DLedger logs and exits, here DLedgerRecoveryError names the
file and offset. Then committed_index comes back from the checkpoint, clamped to the recovered end
(logged as an error when that drops entries the checkpoint called committed: a machine crash can
take entries a quorum had acknowledged from its page cache). What these checks cannot see is a
tear inside a body: 0.3.1.2 never fills bodyCrc, so an entry whose header reached the disk whole
is kept however little of its body did. The leader's COMPARE (DLedgerEntry.equals compares the
body) replaces it only if it compares at that index, and often it does not: a follower that
acknowledged the entry from its page cache is counted at it, so after its restart the leader
pushes the next index, which the follower appends after the torn entry, and a COMPARE starts at
the follower's end (log matching: equal index and term mean equal entries). The torn copy is
then committed on that member, and kept if it leads (tests/test_chaos_findings.py).

Flushing: DLedger's FlushDataService thread flushes data and index every flushFileInterval (10 ms)
and writes the checkpoint when more than checkPointInterval (3 s) passed since the last one. Here
the node's timer is armed only while there is something to do — a write not yet flushed (10 ms
later) or a checkpoint whose content changed (at the first tick 3 s after the last one) — so an
idle member's clock is not woken 100 times a second. Without a node (unit tests) nothing runs in
the background: call flush() / persist_check_point().

Deviations, each for a reason given where it is made: truncation zeroes what it cuts
(DefaultMmapFile); a follower's append is checked against its position before it is written;
shutdown() unmaps the files; kill() is a process crash (no flush, no checkpoint); no space cleaning
(CleanSpaceService): `is_disk_full` stays False unless set.
"""

from __future__ import annotations

import logging
import os
import struct
from collections.abc import Callable
from typing import TYPE_CHECKING

from rmqlab.dledger.dledger_config import DLedgerConfig
from rmqlab.dledger.entry import dledger_entry_coder as coder
from rmqlab.dledger.entry.dledger_entry import BODY_OFFSET, HEADER_SIZE, DLedgerEntry
from rmqlab.dledger.member_state import MemberState
from rmqlab.dledger.utils.io_utils import file_to_string, string_to_file, string_to_properties
from rmqlab.dledger.protocol.dledger_response_code import DLedgerException, DLedgerResponseCode, check
from rmqlab.dledger.store.dledger_store import DLedgerStore
from rmqlab.dledger.store.file.mmap_file_list import BLANK_MAGIC_CODE, MmapFileList
from rmqlab.runtime.page_cache import PageCache

if TYPE_CHECKING:
    from rmqlab.runtime.node import Node, Timer

log = logging.getLogger("rmqlab.dledger")

CHECK_POINT_FILE = "checkpoint"
END_INDEX_KEY = "endIndex"
COMMITTED_INDEX_KEY = "committedIndex"
MAGIC_1 = 1
CURRENT_MAGIC = MAGIC_1
INDEX_UNIT_SIZE = coder.INDEX_UNIT_SIZE
_MAGIC_SIZE = struct.Struct(">ii")

# AppendHook.doHook(entry, buffer, bodyOffset): `buffer` is the encoded entry (writable, from 0),
# `body_offset` = BODY_OFFSET. It may patch the body before the bytes are written (RocketMQ's
# DLedgerCommitLog writes the message's PHYSICALOFFSET). As in DLedger, entry.body is not updated.
AppendHook = Callable[[DLedgerEntry, memoryview, int], None]


class DLedgerRecoveryError(DLedgerException):
    """Recovery would cut more than a file before the last data file (DLedger exits)."""

    def __init__(self, message: str):
        super().__init__(DLedgerResponseCode.DISK_ERROR, message)


class _BadEntry(Exception):
    """A recovery check failed (DLedger's PreConditions.check inside the scan's try block)."""


class DLedgerMmapFileStore(DLedgerStore):
    def __init__(self, dledger_config: DLedgerConfig, member_state: MemberState, node: Node | None = None,
                 page_cache: PageCache | None = None):
        """`node`: whose timers run the flush service (None: flush on demand). `page_cache`: the
        machine-crash ledger to write through; None opens one at the member's root (pass the
        broker store's own when it shares a root, so that one ledger describes the directory)."""
        self.dledger_config = dledger_config
        self.member_state = member_state
        self.node = node
        if page_cache is None:
            page_cache = PageCache(dledger_config.get_default_path())
        self.page_cache = page_cache
        self.append_hooks: list[AppendHook] = []
        self.ledger_begin_index = -1
        self.ledger_end_index = -1
        self.committed_index = -1
        self.committed_pos = -1
        self.ledger_end_term = 0  # Java's uninitialised long: an empty store answers 0 until its first entry
        self.data_file_list = MmapFileList(dledger_config.get_data_store_path(),
                                           dledger_config.mapped_file_size_for_entry_data, page_cache)
        self.index_file_list = MmapFileList(dledger_config.get_index_store_path(),
                                            dledger_config.mapped_file_size_for_entry_index, page_cache)
        self.is_disk_full = False  # set by DLedger's CleanSpaceService, which rmqlab does not run yet
        self.has_loaded = False
        self.has_recovered = False
        self.last_check_point_time_ms = node.now_ms() if node is not None else 0
        self._persisted_check_point: tuple[int, int] | None = None
        self._flush_timer: Timer | None = None
        self._flush_due_ms = 0.0
        self._running = False
        self._closed = False

    # -- lifecycle ---------------------------------------------------------------------------
    def startup(self) -> None:
        self.load()
        self.recover()
        self._running = True
        self._wakeup()

    def shutdown(self) -> None:
        """Flush data and index (one file each, as DLedger), write the checkpoint, stop; then
        unmap (DLedger leaves the files mapped until the JVM exits)."""
        if self._closed:
            return
        self.data_file_list.flush(0)
        self.index_file_list.flush(0)
        self.persist_check_point()
        self._stop()

    def kill(self) -> None:
        """A process crash: nothing more is flushed or checkpointed; written bytes stay in the page cache."""
        self._stop()

    def _stop(self) -> None:
        self._running = False
        self._closed = True
        if self._flush_timer is not None:
            self._flush_timer.cancel()
            self._flush_timer = None
        self.data_file_list.shutdown()
        self.index_file_list.shutdown()

    def get_write_pos(self) -> int:
        return self.data_file_list.get_max_wrote_position()

    def get_flush_pos(self) -> int:
        return self.data_file_list.flushed_where

    def flush(self) -> None:
        self.data_file_list.flush(0)
        self.index_file_list.flush(0)

    def load(self) -> None:
        if self.has_loaded:
            return
        self.has_loaded = True
        for file_list in (self.data_file_list, self.index_file_list):
            if not file_list.load():
                # DLedger: "Load file failed, this usually indicates fatal error" and System.exit(-1).
                raise DLedgerException(DLedgerResponseCode.DISK_ERROR,
                                       f"{file_list.bad_file}: {os.path.getsize(file_list.bad_file)} bytes, not the "
                                       f"configured {file_list.mapped_file_size} (mappedFileSizeForEntryData / "
                                       "mappedFileSizeForEntryIndex): delete old files before changing the size")

    # -- recovery ----------------------------------------------------------------------------
    def recover(self) -> None:
        if self.has_recovered:
            return
        self.has_recovered = True
        check(self.data_file_list.check_self(), DLedgerResponseCode.DISK_ERROR, "check data file order failed before recovery")
        check(self.index_file_list.check_self(), DLedgerResponseCode.DISK_ERROR, "check index file order failed before recovery")
        mapped_files = self.data_file_list.get_mapped_files()
        if not mapped_files:
            self.index_file_list.update_where_position(0)
            self.index_file_list.truncate_offset(0)
            return
        last_mapped_file = mapped_files[-1]
        index = max(0, len(mapped_files) - 3)
        first_entry_index = -1
        for i in range(index, -1, -1):
            index = i
            mf = mapped_files[index]
            try:
                first_entry_index = self._pre_check_first_entry(mf)
                break
            except _BadEntry as e:
                log.warning("Pre check data and index failed %s: %s", mf.file_name, e)

        mf = mapped_files[index]
        log.info("Begin to recover data from entryIndex=%d fileIndex=%d fileSize=%d fileName=%s",
                 first_entry_index, index, len(mapped_files), mf.file_name)
        last_entry_index = -1
        last_entry_term = -1
        process_offset = mf.file_from_offset
        need_write_index = False
        cut_reason: str | None = None
        rel = 0
        view = mf.slice_byte_buffer()
        try:
            while True:
                absolute_pos = mf.file_from_offset + rel
                if rel + 8 > mf.file_size:  # Java: BufferUnderflowException, caught: the scan ends
                    cut_reason = f"no room for a header at {rel}"
                    break
                magic, size = _MAGIC_SIZE.unpack_from(view, rel)
                if magic == BLANK_MAGIC_CODE:
                    process_offset = mf.file_from_offset + mf.file_size
                    index += 1
                    if index >= len(mapped_files):
                        log.info("Recover data file over, the last file %s", mf.file_name)
                        break
                    view.release()
                    mf = mapped_files[index]
                    view = mf.slice_byte_buffer()
                    rel = 0
                    process_offset = mf.file_from_offset
                    log.info("Trying to recover data file %s", mf.file_name)
                    continue
                if size == 0:
                    if magic != 0:
                        # A magic with no size: a header torn right after its first field.
                        log.warning("DLedger recovery: %s position %d: torn header (magic=%d, size 0), cut here",
                                    mf.file_name, rel, magic)
                    log.info("Recover data file to the end of %s", mf.file_name)
                    break
                try:
                    entry_index, entry_term = self._check_entry(view, mf, rel, absolute_pos, magic, size,
                                                                last_entry_index, last_entry_term)
                except _BadEntry as e:
                    cut_reason = str(e)
                    log.warning("DLedger recovery: %s position %d (offset %d): %s; the log is cut here",
                                mf.file_name, rel, absolute_pos, e)
                    break
                if not need_write_index:
                    try:
                        self._compare_index_unit(absolute_pos, magic, size, entry_index, entry_term)
                    except _BadEntry as e:
                        log.warning("Compare data to index failed %s: %s; index rewritten from entry %d on",
                                    mf.file_name, e, entry_index)
                        truncate_index_offset = entry_index * INDEX_UNIT_SIZE
                        self.index_file_list.truncate_offset(truncate_index_offset)
                        if self.index_file_list.get_max_wrote_position() != truncate_index_offset:
                            log.warning("[Recovery] rebuild for index wrotePos=%d not equal to truncatePos=%d",
                                        self.index_file_list.get_max_wrote_position(), truncate_index_offset)
                            check(self.index_file_list.rebuild_with_pos(truncate_index_offset),
                                  DLedgerResponseCode.DISK_ERROR, f"rebuild index truncatePos={truncate_index_offset}")
                        need_write_index = True
                if need_write_index:
                    unit = coder.encode_index(absolute_pos, size, magic, entry_index, entry_term)
                    index_pos = self.index_file_list.append(unit, use_blank=False)
                    if index_pos != entry_index * INDEX_UNIT_SIZE:
                        raise DLedgerException(DLedgerResponseCode.DISK_ERROR, f"Write index failed index={entry_index}")
                last_entry_index = entry_index
                last_entry_term = entry_term
                process_offset += size
                rel += size
        finally:
            view.release()
        log.info("Recover data to the end entryIndex=%d processOffset=%d lastFileOffset=%d cha=%d",
                 last_entry_index, process_offset, last_mapped_file.file_from_offset,
                 process_offset - last_mapped_file.file_from_offset)
        if last_mapped_file.file_from_offset - process_offset > last_mapped_file.file_size:
            # DLedger: "[MONITOR]The processOffset is too small, you should check it manually before
            # truncating the data from {}" and System.exit(-1). The data files are untouched (only
            # index units that disagreed with them were rewritten).
            holder = self.data_file_list.find_mapped_file_by_offset(process_offset)
            where = holder.file_name if holder is not None else self.data_file_list.store_path
            raise DLedgerRecoveryError(
                f"{where}: recovery stopped at offset {process_offset} (position "
                f"{process_offset % self.data_file_list.mapped_file_size}), more than a file before the last data "
                f"file {last_mapped_file.file_name}: {cut_reason or 'no valid entry'}. Cutting there would drop "
                "whole files of the log; check the files manually before removing anything")

        self.ledger_end_index = last_entry_index
        self.ledger_end_term = last_entry_term
        if last_entry_index != -1:
            entry = self.get(last_entry_index)
            check(entry.index == last_entry_index, DLedgerResponseCode.DISK_ERROR,
                  f"recheck index {entry.index} != {last_entry_index}")
            self.revise_ledger_begin_index()
        self.data_file_list.update_where_position(process_offset)
        self.data_file_list.truncate_offset(process_offset)
        index_process_offset = (last_entry_index + 1) * INDEX_UNIT_SIZE
        self.index_file_list.update_where_position(index_process_offset)
        self.index_file_list.truncate_offset(index_process_offset)
        self.update_ledger_end_index_and_term()
        check(self.data_file_list.check_self(), DLedgerResponseCode.DISK_ERROR, "check data file order failed after recovery")
        check(self.index_file_list.check_self(), DLedgerResponseCode.DISK_ERROR, "check index file order failed after recovery")
        properties = self.load_check_point()
        if properties is None:
            return
        checkpoint_end = properties.get(END_INDEX_KEY, "").strip()
        if cut_reason is not None and checkpoint_end.lstrip("-").isdigit() and int(checkpoint_end) > last_entry_index:
            log.warning("DLedger recovery cut the log at index %d; the checkpoint had written up to %s",
                        last_entry_index, checkpoint_end)
        committed_index_str = properties.get(COMMITTED_INDEX_KEY, "").strip()
        if not committed_index_str:
            return
        log.info("Recover to get committed index=%s from checkpoint", committed_index_str)
        committed = int(committed_index_str)
        if committed > self.ledger_end_index:
            log.error("DLedger recovery: the checkpoint says entries up to %d were committed, the log now ends at "
                      "%d: %d committed entries are gone from this member (unflushed at a machine crash, or cut)",
                      committed, self.ledger_end_index, committed - self.ledger_end_index)
        self.update_committed_index(self.member_state.curr_term, committed)

    def _pre_check_first_entry(self, mf) -> int:
        """The first loop of recover: does the file's first entry agree with its index unit?"""
        with mf.slice_byte_buffer() as view:
            magic, size, entry_index, entry_term, pos, _ch, _cc, _bc, body_size = coder.decode_header(view, 0)
        if magic == BLANK_MAGIC_CODE or not MAGIC_1 <= magic <= CURRENT_MAGIC:
            raise _BadEntry(f"unknown magic={magic}")
        if size <= HEADER_SIZE:
            raise _BadEntry(f"Size {size} should > {HEADER_SIZE}")
        if pos != mf.file_from_offset:
            raise _BadEntry(f"pos {pos} != {mf.file_from_offset}")
        if body_size + BODY_OFFSET != size:
            raise _BadEntry(f"size {size} != {body_size} + {BODY_OFFSET}")
        self._compare_index_unit(mf.file_from_offset, magic, size, entry_index, entry_term)
        return entry_index

    @staticmethod
    def _check_entry(view, mf, rel: int, absolute_pos: int, magic: int, size: int,
                     last_entry_index: int, last_entry_term: int) -> tuple[int, int]:
        """The scan's checks on one entry, in DLedger's order; (index, term) when it is good."""
        if rel + BODY_OFFSET > mf.file_size:
            raise _BadEntry(f"a header at {rel} runs past the file end")
        _m, _s, entry_index, entry_term, pos, _ch, _cc, _bc, body_size = coder.decode_header(view, rel)
        if pos != absolute_pos:
            raise _BadEntry(f"pos {pos} != {absolute_pos}")
        if body_size + BODY_OFFSET != size:
            raise _BadEntry(f"size {size} != {body_size} + {BODY_OFFSET}")
        if rel + size > mf.file_size:
            raise _BadEntry(f"size {size} runs past the file end")  # Java: position() throws
        if not MAGIC_1 <= magic <= CURRENT_MAGIC:
            raise _BadEntry(f"pos={absolute_pos} size={size} magic={magic} index={entry_index} term={entry_term} "
                            f"currMagic={CURRENT_MAGIC}")
        if last_entry_index != -1 and entry_index != last_entry_index + 1:
            raise _BadEntry(f"pos={absolute_pos} size={size} magic={magic} index={entry_index} term={entry_term} "
                            f"lastEntryIndex={last_entry_index}")
        if entry_term < last_entry_term:
            raise _BadEntry(f"pos={absolute_pos} size={size} magic={magic} index={entry_index} term={entry_term} "
                            f"lastEntryTerm={last_entry_term}")
        if size <= HEADER_SIZE:
            raise _BadEntry(f"size {size} should > {HEADER_SIZE}")
        return entry_index, entry_term

    def _compare_index_unit(self, absolute_pos: int, magic: int, size: int, entry_index: int, entry_term: int) -> None:
        sbr = self.index_file_list.get_data(entry_index * INDEX_UNIT_SIZE, INDEX_UNIT_SIZE) if entry_index >= 0 else None
        if sbr is None:
            raise _BadEntry(f"index={entry_index} pos={entry_index * INDEX_UNIT_SIZE}")
        magic_i, pos_i, size_i, index_i, term_i = coder.decode_index(sbr.byte_buffer)
        if magic != magic_i:
            raise _BadEntry(f"magic {magic} != {magic_i}")
        if size != size_i:
            raise _BadEntry(f"size {size} != {size_i}")
        if entry_index != index_i:
            raise _BadEntry(f"index {entry_index} != {index_i}")
        if entry_term != term_i:
            raise _BadEntry(f"term {entry_term} != {term_i}")
        if absolute_pos != pos_i:
            raise _BadEntry(f"pos {absolute_pos} != {pos_i}")

    def revise_ledger_begin_index(self) -> None:
        """reviseLedgerBeginIndex: the first data file's first live entry is the ledger's begin; the
        index list is re-based there (its files wholly before begin x 32 go)."""
        first = self.data_file_list.get_first_mapped_file()
        sbr = first.select_mapped_buffer(first.start_position, BODY_OFFSET)
        check(sbr is not None, DLedgerResponseCode.DISK_ERROR, f"{first.file_name}: no entry at {first.start_position}")
        self.ledger_begin_index = coder.decode_header(sbr.byte_buffer)[2]
        self.index_file_list.reset_offset(self.ledger_begin_index * INDEX_UNIT_SIZE)

    # -- appending ---------------------------------------------------------------------------
    def append_as_leader(self, entry: DLedgerEntry) -> DLedgerEntry:
        ms = self.member_state
        if not ms.is_leader():
            raise DLedgerException(DLedgerResponseCode.NOT_LEADER, f"{ms.self_id} is {ms.role.name}")
        if self.is_disk_full:
            raise DLedgerException(DLedgerResponseCode.DISK_FULL, "disk full")
        data = coder.encode(entry)
        entry_size = len(data)
        if ms.transferee is not None:
            raise DLedgerException(DLedgerResponseCode.LEADER_TRANSFERRING, f"transferring to {ms.transferee}")
        next_index = self.ledger_end_index + 1
        entry.index = next_index
        entry.term = ms.curr_term
        entry.magic = CURRENT_MAGIC
        coder.set_index_term(data, next_index, ms.curr_term, CURRENT_MAGIC)
        pre_pos = self.data_file_list.pre_append(entry_size)
        entry.pos = pre_pos
        if pre_pos == -1:
            raise DLedgerException(DLedgerResponseCode.DISK_ERROR, "preAppend failed")
        coder.set_pos(data, pre_pos)
        for hook in self.append_hooks:
            with memoryview(data) as buffer:
                hook(entry, buffer, BODY_OFFSET)
        data_pos = self.data_file_list.append(data)
        if data_pos == -1:
            raise DLedgerException(DLedgerResponseCode.DISK_ERROR, "append failed")
        if data_pos != pre_pos:
            raise DLedgerException(DLedgerResponseCode.DISK_ERROR, f"{data_pos} != {pre_pos}")
        unit = coder.encode_index(data_pos, entry_size, CURRENT_MAGIC, next_index, ms.curr_term)
        index_pos = self.index_file_list.append(unit, use_blank=False)
        if index_pos != entry.index * INDEX_UNIT_SIZE:
            raise DLedgerException(DLedgerResponseCode.DISK_ERROR,
                                   f"index written at {index_pos}, not {entry.index * INDEX_UNIT_SIZE}")
        self.ledger_end_index += 1
        self.ledger_end_term = ms.curr_term
        if self.ledger_begin_index == -1:
            self.ledger_begin_index = self.ledger_end_index
        self.update_ledger_end_index_and_term()
        self._wakeup()
        return entry

    def append_as_follower(self, entry: DLedgerEntry, leader_term: int, leader_id: str) -> DLedgerEntry:
        ms = self.member_state
        if not ms.is_follower():
            raise DLedgerException(DLedgerResponseCode.NOT_FOLLOWER, f"role={ms.role.name}")
        if self.is_disk_full:
            raise DLedgerException(DLedgerResponseCode.DISK_FULL, "disk full")
        data = coder.encode(entry)
        entry_size = len(data)
        if self.ledger_end_index + 1 != entry.index:
            raise DLedgerException(DLedgerResponseCode.INCONSISTENT_INDEX,
                                   f"{entry.index} != {self.ledger_end_index + 1}")
        if leader_term != ms.curr_term:
            raise DLedgerException(DLedgerResponseCode.INCONSISTENT_TERM, f"{leader_term} != {ms.curr_term}")
        if leader_id != ms.leader_id:
            raise DLedgerException(DLedgerResponseCode.INCONSISTENT_LEADER, f"{leader_id} != {ms.leader_id}")
        # Deviation: DLedger appends, then compares the position (a mismatch leaves the bytes
        # written past the ledger end); checking the position first leaves nothing behind.
        pre_pos = self.data_file_list.pre_append(entry_size)
        if pre_pos != entry.pos:
            raise DLedgerException(DLedgerResponseCode.DISK_ERROR, f"{pre_pos} != {entry.pos}")
        data_pos = self.data_file_list.append(data)
        if data_pos != entry.pos:
            raise DLedgerException(DLedgerResponseCode.DISK_ERROR, f"{data_pos} != {entry.pos}")
        unit = coder.encode_index(data_pos, entry_size, entry.magic, entry.index, entry.term)
        index_pos = self.index_file_list.append(unit, use_blank=False)
        if index_pos != entry.index * INDEX_UNIT_SIZE:
            raise DLedgerException(DLedgerResponseCode.DISK_ERROR,
                                   f"index written at {index_pos}, not {entry.index * INDEX_UNIT_SIZE}")
        self.ledger_end_term = entry.term
        self.ledger_end_index = entry.index
        if self.ledger_begin_index == -1:
            self.ledger_begin_index = self.ledger_end_index
        self.update_ledger_end_index_and_term()
        self._wakeup()
        return entry

    def truncate(self, entry: DLedgerEntry, leader_term: int, leader_id: str) -> int:
        """Make the log end at the leader's `entry`; returns its index (the new ledger end)."""
        ms = self.member_state
        if not ms.is_follower():
            raise DLedgerException(DLedgerResponseCode.NOT_FOLLOWER, f"role={ms.role.name}")
        data = coder.encode(entry)
        entry_size = len(data)
        if leader_term != ms.curr_term:
            raise DLedgerException(DLedgerResponseCode.INCONSISTENT_TERM, f"term {leader_term} != {ms.curr_term}")
        if leader_id != ms.leader_id:
            raise DLedgerException(DLedgerResponseCode.INCONSISTENT_LEADER, f"leaderId {leader_id} != {ms.leader_id}")
        try:
            existed_entry = entry == self.get(entry.index)
        except Exception:  # Java catches Throwable: an index outside the log is "not there"
            existed_entry = False
        truncate_pos = entry.pos + entry.size if existed_entry else entry.pos
        if truncate_pos != self.data_file_list.get_max_wrote_position():
            log.warning("[TRUNCATE]leaderId=%s index=%d truncatePos=%d != maxPos=%d, this is usually happened on "
                        "the old leader", leader_id, entry.index, truncate_pos, self.data_file_list.get_max_wrote_position())
        self.data_file_list.truncate_offset(truncate_pos)
        if self.data_file_list.get_max_wrote_position() != truncate_pos:
            log.warning("[TRUNCATE] rebuild for data wrotePos: %d != truncatePos: %d",
                        self.data_file_list.get_max_wrote_position(), truncate_pos)
            if not self.data_file_list.rebuild_with_pos(truncate_pos):
                raise DLedgerException(DLedgerResponseCode.DISK_ERROR, f"rebuild data truncatePos={truncate_pos}")
        self._revise_flushed_where(self.data_file_list, truncate_pos)
        if not existed_entry:
            data_pos = self.data_file_list.append(data)
            if data_pos != entry.pos:
                raise DLedgerException(DLedgerResponseCode.DISK_ERROR, f" {data_pos} != {entry.pos}")
        truncate_index_offset = entry.index * INDEX_UNIT_SIZE
        self.index_file_list.truncate_offset(truncate_index_offset)
        if self.index_file_list.get_max_wrote_position() != truncate_index_offset:
            log.warning("[TRUNCATE] rebuild for index wrotePos: %d != truncatePos: %d",
                        self.index_file_list.get_max_wrote_position(), truncate_index_offset)
            if not self.index_file_list.rebuild_with_pos(truncate_index_offset):
                raise DLedgerException(DLedgerResponseCode.DISK_ERROR,
                                       f"rebuild index truncatePos={truncate_index_offset}")
        self._revise_flushed_where(self.index_file_list, truncate_index_offset)
        unit = coder.encode_index(entry.pos, entry_size, entry.magic, entry.index, entry.term)
        index_pos = self.index_file_list.append(unit, use_blank=False)
        if index_pos != entry.index * INDEX_UNIT_SIZE:
            raise DLedgerException(DLedgerResponseCode.DISK_ERROR,
                                   f"index written at {index_pos}, not {entry.index * INDEX_UNIT_SIZE}")
        self.ledger_end_term = entry.term
        self.ledger_end_index = entry.index
        self.revise_ledger_begin_index()
        self.update_ledger_end_index_and_term()
        self._wakeup()
        return entry.index

    @staticmethod
    def _revise_flushed_where(file_list: MmapFileList, continued_begin_offset: int) -> None:
        """reviseDataFileListFlushedWhere / reviseIndexFileListFlushedWhere (calculateWherePosition)."""
        flushed = file_list.flushed_where
        if flushed == 0:
            offset = 0
        elif not file_list.get_mapped_files():
            offset = continued_begin_offset
        elif flushed < file_list.get_first_mapped_file().file_from_offset:
            offset = file_list.get_first_mapped_file().file_from_offset
        elif flushed > continued_begin_offset:
            offset = continued_begin_offset
        else:
            offset = flushed
        log.info("Revise %s flushedWhere from %d to %d", file_list.store_path, flushed, offset)
        file_list.update_where_position(offset)

    # -- reading -----------------------------------------------------------------------------
    def _index_check(self, index: int) -> None:
        if index < 0:
            raise DLedgerException(DLedgerResponseCode.INDEX_OUT_OF_RANGE, f"{index} should gt 0")
        if index < self.ledger_begin_index:
            raise DLedgerException(DLedgerResponseCode.INDEX_LESS_THAN_LOCAL_BEGIN,
                                   f"{index} should be gt {self.ledger_begin_index}, ledgerBeginIndex may be revised")
        if index > self.ledger_end_index:
            raise DLedgerException(DLedgerResponseCode.INDEX_OUT_OF_RANGE,
                                   f"{index} should between {self.ledger_begin_index}-{self.ledger_end_index}")

    def get_entry_pos_and_size(self, index: int) -> tuple[int, int]:
        self._index_check(index)
        sbr = self.index_file_list.get_data(index * INDEX_UNIT_SIZE, INDEX_UNIT_SIZE)
        if sbr is None:
            raise DLedgerException(DLedgerResponseCode.DISK_ERROR, f"Get null index for {index}")
        _magic, pos, size, _index, _term = coder.decode_index(sbr.byte_buffer)
        return pos, size

    def get(self, index: int) -> DLedgerEntry:
        pos, size = self.get_entry_pos_and_size(index)
        sbr = self.data_file_list.get_data(pos, size)
        if sbr is None:
            raise DLedgerException(DLedgerResponseCode.DISK_ERROR, f"Get null data for {index}")
        entry = coder.decode(sbr.byte_buffer)
        if pos != entry.pos:
            raise DLedgerException(DLedgerResponseCode.DISK_ERROR, f"{pos} != {entry.pos}")
        return entry

    def get_ledger_end_index(self) -> int:
        return self.ledger_end_index

    def get_ledger_begin_index(self) -> int:
        return self.ledger_begin_index

    def get_ledger_end_term(self) -> int:
        return self.ledger_end_term

    def get_committed_index(self) -> int:
        return self.committed_index

    def get_committed_pos(self) -> int:
        return self.committed_pos

    def update_committed_index(self, term: int, new_committed_index: int) -> None:
        if (new_committed_index == -1 or self.ledger_end_index == -1 or term < self.member_state.curr_term
                or new_committed_index == self.committed_index):
            return
        if new_committed_index < self.committed_index or new_committed_index < self.ledger_begin_index:
            log.warning("[MONITOR]Skip update committed index for new=%d < old=%d or new=%d < beginIndex=%d",
                        new_committed_index, self.committed_index, new_committed_index, self.ledger_begin_index)
            return
        # If the node fell behind too much, the committed index can be beyond its end.
        new_committed_index = min(new_committed_index, self.ledger_end_index)
        pos, size = self.get_entry_pos_and_size(new_committed_index)
        self.committed_index = new_committed_index
        self.committed_pos = pos + size
        self._wakeup()

    # -- what DLedgerCommitLog uses ----------------------------------------------------------
    def add_append_hook(self, hook: AppendHook) -> None:
        if hook not in self.append_hooks:
            self.append_hooks.append(hook)

    def get_member_state(self) -> MemberState:
        return self.member_state

    def get_data_file_list(self) -> MmapFileList:
        return self.data_file_list

    def get_index_file_list(self) -> MmapFileList:
        return self.index_file_list

    # -- checkpoint --------------------------------------------------------------------------
    def _check_point_path(self) -> str:
        return os.path.join(self.dledger_config.get_default_path(), CHECK_POINT_FILE)

    def persist_check_point(self) -> None:
        """persistCheckPoint: `endIndex=…` and `committedIndex=…` (the order Java's Hashtable-backed
        Properties iterates them in), written as IOUtils.string2File does: the new content to
        `checkpoint.tmp`, the old one to `checkpoint.bak`, then renamed into place. DLedger does
        not fsync it; the machine-crash model keeps such small renamed files (see page_cache)."""
        try:
            values = (self.get_ledger_end_index(), self.get_committed_index())
            string_to_file(f"{END_INDEX_KEY}={values[0]}\n{COMMITTED_INDEX_KEY}={values[1]}\n",
                           self._check_point_path())
            self._persisted_check_point = values
        except OSError:
            log.exception("Persist checkpoint failed")

    def load_check_point(self) -> dict[str, str] | None:
        """loadCheckPoint: the properties, or None when there is no checkpoint."""
        try:
            text = file_to_string(self._check_point_path())
        except OSError:
            log.exception("Load checkpoint failed")
            return None
        return None if text is None else string_to_properties(text)

    # -- the flush service -------------------------------------------------------------------
    def _wakeup(self) -> None:
        """Something may need flushing or checkpointing: arm the flush service's next tick."""
        if self.node is None or not self._running:
            return
        cfg = self.dledger_config
        now = self.node.now_ms()
        if self._has_unflushed():
            due = now + cfg.flush_file_interval
        elif self._check_point_changed():
            # FlushDataService checkpoints when more than checkPointInterval passed, at a 10 ms tick.
            due = max(now + cfg.flush_file_interval, self.last_check_point_time_ms + cfg.check_point_interval + 1)
        else:
            return
        if self._flush_timer is not None:
            if self._flush_due_ms <= due:
                return
            self._flush_timer.cancel()
        self._flush_due_ms = due
        self._flush_timer = self.node.call_later(due - now, self._on_flush_tick)

    def _has_unflushed(self) -> bool:
        return (self.data_file_list.flushed_where < self.data_file_list.get_max_wrote_position()
                or self.index_file_list.flushed_where < self.index_file_list.get_max_wrote_position())

    def _check_point_changed(self) -> bool:
        return self._persisted_check_point != (self.ledger_end_index, self.committed_index)

    def _on_flush_tick(self) -> None:
        """FlushDataService.doWork: flush data and index; the checkpoint when it is due."""
        self._flush_timer = None
        if not self._running:
            return
        try:
            self.data_file_list.flush(0)
            self.index_file_list.flush(0)
            now = self.node.now_ms()
            if now - self.last_check_point_time_ms > self.dledger_config.check_point_interval and self._check_point_changed():
                self.persist_check_point()
                self.last_check_point_time_ms = now
        except Exception:  # DLedger's thread logs and goes on
            log.exception("Error in DLedgerFlushDataService")
        self._wakeup()
