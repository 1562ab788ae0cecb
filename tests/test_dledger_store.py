"""DLedger's on-disk store (rmqlab.dledger.store.file), against DLedger 0.3.1.2's
DLedgerEntryCoder, MmapFileList and DLedgerMmapFileStore (and its DLedgerMappedFileStoreTest).

Layouts are checked against bytes written out by hand in Java's field order, never against the
encoder's own output. Files are kept small (8 KiB + 8 data files hold seven 1072-byte entries, as
in DLedger's own tests) so that rolling, truncating into an earlier file and recovering across
files happen with a few dozen entries.
"""

from __future__ import annotations

import logging
import os
import struct

import pytest

from rmqlab.dledger.dledger_config import DLedgerConfig
from rmqlab.dledger.entry import dledger_entry_coder as coder
from rmqlab.dledger.entry.dledger_entry import DLedgerEntry
from rmqlab.dledger.member_state import MemberState
from rmqlab.dledger.protocol.dledger_response_code import DLedgerException, DLedgerResponseCode
from rmqlab.dledger.store.file.dledger_mmap_file_store import DLedgerMmapFileStore, DLedgerRecoveryError
from rmqlab.dledger.store.file.mmap_file_list import MmapFileList
from rmqlab.runtime.component import Component
from rmqlab.runtime.page_cache import crash_machine
from rmqlab.runtime.sim import Simulation
from tests.sim_helpers import track

PEERS = "n0-localhost:20911;n1-localhost:20912;n2-localhost:20913"
DATA_FILE = 8 * 1024 + 8  # DLedger's tests: 8 * 1024 + MIN_BLANK_LEN
INDEX_FILE = 8 * 32
BODY = 1024
ENTRY = BODY + 48  # 1072: seven to a data file, then a 696-byte blank


class ManualNode:
    """The two things the store uses from a Node (now_ms, call_later), on a clock the test moves."""

    def __init__(self):
        self.now = 1_700_000_000_000
        self.timers: list[_Timer] = []

    def now_ms(self) -> int:
        return self.now

    def call_later(self, delay_ms, callback, *args):
        timer = _Timer(self.now + delay_ms, callback, args)
        self.timers.append(timer)
        return timer

    def pending(self) -> list[float]:
        return sorted(t.deadline - self.now for t in self.timers if not t.cancelled)

    def advance(self, ms: float) -> None:
        end = self.now + ms
        while True:
            due = [t for t in self.timers if not t.cancelled and t.deadline <= end]
            if not due:
                break
            timer = min(due, key=lambda t: t.deadline)
            self.timers.remove(timer)
            self.now = max(self.now, int(timer.deadline))
            timer.callback(*timer.args)
        self.now = int(end)


class _Timer:
    def __init__(self, deadline, callback, args):
        self.deadline, self.callback, self.args, self.cancelled = deadline, callback, args, False

    def cancel(self) -> None:
        self.cancelled = True


@pytest.fixture
def stores():
    """Opens stores; kills (process crash) whatever a test left open."""
    opened: list[DLedgerMmapFileStore] = []

    def open_store(base, *, self_id="n0", role="leader", leader_id="n1", data_size=DATA_FILE,
                   index_size=INDEX_FILE, node=None, start=True) -> DLedgerMmapFileStore:
        cfg = DLedgerConfig(store_base_dir=str(base), self_id=self_id, peers=PEERS,
                            mapped_file_size_for_entry_data=data_size, mapped_file_size_for_entry_index=index_size)
        ms = MemberState(cfg)
        if role == "leader":
            ms.change_to_leader(ms.curr_term)
        elif role == "follower":
            ms.change_to_follower(ms.curr_term, leader_id)
        store = DLedgerMmapFileStore(cfg, ms, node)
        opened.append(store)
        if start:
            store.startup()
        return store

    yield open_store
    for store in opened:
        store.kill()


def body(i: int, size: int = BODY) -> bytes:
    return bytes([i % 251 + 1]) * size


def fill(store: DLedgerMmapFileStore, n: int, size: int = BODY) -> list[DLedgerEntry]:
    start = store.get_ledger_end_index() + 1
    return [store.append_as_leader(DLedgerEntry(body=body(start + i, size))) for i in range(n)]


def flush_all(store: DLedgerMmapFileStore) -> None:
    # DLedger's tests: while (getFlushPos() != getWritePos()) flush(); the index likewise.
    while (store.get_flush_pos() != store.get_write_pos()
           or store.index_file_list.flushed_where != store.index_file_list.get_max_wrote_position()):
        store.flush()


def root(store: DLedgerMmapFileStore) -> str:
    return store.dledger_config.get_default_path()


def data_file(store: DLedgerMmapFileStore, n: int) -> str:
    return store.get_data_file_list().get_mapped_files()[n].file_name


def poke(path: str, offset: int, data: bytes) -> None:
    with open(path, "r+b") as f:
        f.seek(offset)
        f.write(data)


# -- the byte layouts ---------------------------------------------------------------------------

ENTRY_BYTES = bytes.fromhex(
    "00000001"            # magic int
    "00000035"            # size int: 48 + 5
    "0000000000000005"    # index long
    "0000000000000003"    # term long
    "0000000000001234"    # pos long (POS_OFFSET 24)
    "00000000"            # channel int
    "00000000"            # chainCrc int
    "00000000"            # bodyCrc int
    "00000005"            # bodySize int
) + b"hello"              # body at BODY_OFFSET 48

INDEX_UNIT_BYTES = bytes.fromhex(
    "00000001"            # magic int
    "0000000000001234"    # pos long
    "00000035"            # size int
    "0000000000000005"    # index long
    "0000000000000003"    # term long
)


def test_entry_bytes_are_dledgers_header_then_the_body():
    entry = DLedgerEntry(index=5, term=3, pos=0x1234, body=b"hello")
    assert bytes(coder.encode(entry)) == ENTRY_BYTES
    assert entry.size == 53  # encode computes the size, as computeSizeInBytes does
    decoded = coder.decode(ENTRY_BYTES)
    assert (decoded.magic, decoded.size, decoded.index, decoded.term, decoded.pos, decoded.body) == (
        1, 53, 5, 3, 0x1234, b"hello")
    assert coder.decode(ENTRY_BYTES, read_body=False).body == b""


def test_set_pos_and_set_index_term_patch_the_header_where_java_does():
    buf = bytearray(ENTRY_BYTES)
    coder.set_index_term(buf, 0x0102030405060708, 0x1112131415161718, 1)
    coder.set_pos(buf, 0x2122232425262728)
    assert bytes(buf[:4]) == bytes.fromhex("00000001")
    assert bytes(buf[4:8]) == bytes.fromhex("00000035")  # size untouched
    assert bytes(buf[8:16]) == bytes.fromhex("0102030405060708")
    assert bytes(buf[16:24]) == bytes.fromhex("1112131415161718")
    assert bytes(buf[24:32]) == bytes.fromhex("2122232425262728")
    assert bytes(buf[32:]) == ENTRY_BYTES[32:]
    assert coder.get_pos(buf) == 0x2122232425262728


def test_index_unit_is_magic_pos_size_index_term():
    assert coder.encode_index(pos=0x1234, size=53, magic=1, index=5, term=3) == INDEX_UNIT_BYTES
    assert coder.decode_index(INDEX_UNIT_BYTES) == (1, 0x1234, 53, 5, 3)


def test_the_store_writes_those_bytes_at_pos_and_index_x_32(stores, tmp_path):
    store = stores(tmp_path)
    fill(store, 2, size=5)
    e = store.append_as_leader(DLedgerEntry(body=b"hello"))
    flush_all(store)
    assert (e.index, e.term, e.pos, e.size) == (2, 0, 2 * 53, 53)
    with open(data_file(store, 0), "rb") as f:
        raw = f.read()
    expected = bytearray(ENTRY_BYTES)
    struct.pack_into(">qqq", expected, 8, 2, 0, 106)  # index 2, term 0, pos 106
    assert raw[106:159] == bytes(expected)
    assert raw[159:200] == bytes(41)
    with open(store.get_index_file_list().get_mapped_files()[0].file_name, "rb") as f:
        index_raw = f.read()
    assert index_raw[64:96] == bytes.fromhex("00000001" "000000000000006a" "00000035" "0000000000000002"
                                             "0000000000000000")


# -- files --------------------------------------------------------------------------------------

def test_an_entry_that_does_not_fit_with_8_bytes_to_spare_goes_to_the_next_file_after_a_blank(stores, tmp_path):
    store = stores(tmp_path)
    entries = fill(store, 8)
    files = store.get_data_file_list().get_mapped_files()
    assert [os.path.basename(f.file_name) for f in files] == ["00000000000000000000", "00000000000000008200"]
    assert [e.pos for e in entries] == [i * ENTRY for i in range(7)] + [DATA_FILE]
    flush_all(store)
    with open(files[0].file_name, "rb") as f:
        raw = f.read()
    blank = raw[7 * ENTRY:]
    assert len(blank) == DATA_FILE - 7 * ENTRY == 696
    assert blank[:8] == bytes.fromhex("ffffffff" "000002b8")  # BLANK_MAGIC_CODE, remaining = 696
    assert blank[8:] == bytes(688)
    assert store.get(7).body == body(7)


def test_an_entry_that_leaves_exactly_8_bytes_stays_in_the_file(stores, tmp_path):
    store = stores(tmp_path)
    fill(store, 7)  # 696 bytes left
    e = store.append_as_leader(DLedgerEntry(body=bytes(696 - 8 - 48)))
    assert e.pos == 7 * ENTRY and len(store.get_data_file_list().get_mapped_files()) == 1
    nxt = store.append_as_leader(DLedgerEntry(body=b"x"))
    assert nxt.pos == DATA_FILE


def test_a_file_of_another_size_stops_the_load(stores, tmp_path):
    store = stores(tmp_path)
    fill(store, 3)
    store.shutdown()
    with pytest.raises(DLedgerException) as err:
        stores(tmp_path, data_size=DATA_FILE * 2)
    assert err.value.code is DLedgerResponseCode.DISK_ERROR
    assert f"{data_file(store, 0)}: {DATA_FILE} bytes, not the configured {2 * DATA_FILE}" in str(err.value)


def test_the_broker_reads_the_data_files_by_position(stores, tmp_path):
    store = stores(tmp_path)
    entries = fill(store, 9)
    files: MmapFileList = store.get_data_file_list()
    e = entries[8]
    assert files.find_mapped_file_by_offset(e.pos).file_from_offset == DATA_FILE
    sbr = files.get_data(e.pos, e.size)
    assert sbr.start_offset == e.pos and coder.decode(sbr.byte_buffer).body == body(8)
    assert files.get_data(e.pos + e.size, 1) is None  # not written yet
    with files.find_mapped_file_by_offset(e.pos).view(e.pos - DATA_FILE, e.pos - DATA_FILE + 48) as header:
        assert coder.decode_header(header)[2] == 8
    assert files.get_data(10 * DATA_FILE, 1) is None


# -- append and get -----------------------------------------------------------------------------

def test_append_as_leader_assigns_index_term_magic_pos(stores, tmp_path):
    store = stores(tmp_path)
    store.member_state.curr_term = 4
    entry = DLedgerEntry(magic=7, index=99, term=99, pos=99, body=b"abc")
    out = store.append_as_leader(entry)
    assert out is entry and (out.index, out.term, out.magic, out.pos) == (0, 4, 1, 0)
    assert (store.get_ledger_begin_index(), store.get_ledger_end_index(), store.get_ledger_end_term()) == (0, 0, 4)
    assert (store.member_state.ledger_end_index, store.member_state.ledger_end_term) == (0, 4)
    assert store.get(0) == out


def test_append_as_leader_refuses_as_dledger_does(stores, tmp_path):
    follower = stores(tmp_path / "f", role="follower")
    with pytest.raises(DLedgerException) as err:
        follower.append_as_leader(DLedgerEntry(body=b"x"))
    assert err.value.code is DLedgerResponseCode.NOT_LEADER
    leader = stores(tmp_path / "l")
    leader.member_state.set_transferee("n1")
    with pytest.raises(DLedgerException) as err:
        leader.append_as_leader(DLedgerEntry(body=b"x"))
    assert err.value.code is DLedgerResponseCode.LEADER_TRANSFERRING
    leader.member_state.set_transferee(None)
    leader.is_disk_full = True
    with pytest.raises(DLedgerException) as err:
        leader.append_as_leader(DLedgerEntry(body=b"x"))
    assert err.value.code is DLedgerResponseCode.DISK_FULL
    assert leader.get_ledger_end_index() == -1 and leader.get_write_pos() == 0


def test_append_hooks_patch_the_bytes_before_they_are_written(stores, tmp_path):
    # What RocketMQ's DLedgerCommitLog registers: the message's PHYSICALOFFSET := pos + 48.
    store = stores(tmp_path)
    phy_pos_position = 28  # MessageDecoder.PHY_POS_POSITION

    def hook(entry, buffer, body_offset):
        struct.pack_into(">q", buffer, body_offset + phy_pos_position, entry.pos + body_offset)

    store.add_append_hook(hook)
    store.add_append_hook(hook)  # added once only
    entries = fill(store, 9, size=64)
    for e in entries:
        stored = store.get(e.index)
        assert struct.unpack_from(">q", stored.body, phy_pos_position)[0] == e.pos + 48
        assert e.body == body(e.index, 64)  # as in DLedger, the caller's entry keeps its body


def test_get_outside_the_log(stores, tmp_path):
    store = stores(tmp_path)
    fill(store, 3)
    for index, code in [(-1, DLedgerResponseCode.INDEX_OUT_OF_RANGE), (3, DLedgerResponseCode.INDEX_OUT_OF_RANGE)]:
        with pytest.raises(DLedgerException) as err:
            store.get(index)
        assert err.value.code is code


def follower_entries(leader: DLedgerMmapFileStore, n: int) -> list[DLedgerEntry]:
    fill(leader, n)
    return [leader.get(i) for i in range(n)]


def test_append_as_follower_takes_exactly_the_next_index_of_its_terms_leader(stores, tmp_path):
    entries = follower_entries(stores(tmp_path / "leader"), 10)
    store = stores(tmp_path / "f", self_id="n1", role="follower", leader_id="n0")
    for e in entries[:9]:
        assert store.append_as_follower(e, 0, "n0").index == e.index
    assert store.get(8) == entries[8] and store.get_data_file_list().get_mapped_files()[1].file_from_offset == DATA_FILE
    cases = [
        (entries[8], 0, "n0", DLedgerResponseCode.INCONSISTENT_INDEX),
        (entries[9], 1, "n0", DLedgerResponseCode.INCONSISTENT_TERM),
        (entries[9], 0, "n2", DLedgerResponseCode.INCONSISTENT_LEADER),
    ]
    for entry, term, leader, code in cases:
        with pytest.raises(DLedgerException) as err:
            store.append_as_follower(entry, term, leader)
        assert err.value.code is code
    wrong_pos = DLedgerEntry(index=9, term=0, pos=entries[9].pos + 1, body=entries[9].body)
    with pytest.raises(DLedgerException) as err:
        store.append_as_follower(wrong_pos, 0, "n0")
    assert err.value.code is DLedgerResponseCode.DISK_ERROR
    assert store.get_write_pos() == entries[9].pos  # nothing was written past the end
    assert store.append_as_follower(entries[9], 0, "n0").index == 9
    store.member_state.change_to_candidate(0)
    with pytest.raises(DLedgerException) as err:
        store.append_as_follower(entries[9], 0, "n0")
    assert err.value.code is DLedgerResponseCode.NOT_FOLLOWER


# -- truncate -----------------------------------------------------------------------------------

def test_truncate_keeps_an_equal_entry_and_cuts_after_it(stores, tmp_path):
    leader_entries = follower_entries(stores(tmp_path / "leader"), 10)
    store = stores(tmp_path / "f", self_id="n1", role="follower", leader_id="n0")
    for e in leader_entries:
        store.append_as_follower(e, 0, "n0")
    assert len(store.get_data_file_list().get_mapped_files()) == 2
    second = store.get_data_file_list().get_mapped_files()[1].file_name
    assert store.truncate(leader_entries[5], 0, "n0") == 5
    assert (store.get_ledger_begin_index(), store.get_ledger_end_index()) == (0, 5)
    assert store.get_write_pos() == leader_entries[5].pos + leader_entries[5].size
    assert store.get_index_file_list().get_max_wrote_position() == 6 * 32
    assert not os.path.exists(second)  # the file past the cut is gone, not only forgotten
    assert store.get(5) == leader_entries[5]
    with pytest.raises(DLedgerException):
        store.get(6)


def test_truncate_replaces_an_unequal_entry_with_the_leaders(stores, tmp_path):
    store = stores(tmp_path / "old", self_id="n1", role="leader")
    fill(store, 4, size=16)  # this member's own entries 0..3 of term 0
    store.member_state.change_to_candidate(1)
    store.member_state.next_term()
    store.member_state.change_to_follower(1, "n0")
    leaders = stores(tmp_path / "leader")
    fill(leaders, 2, size=16)
    leaders.member_state.curr_term = 1
    leaders.member_state.change_to_leader(1)
    fill(leaders, 1, size=32)  # entry 2 of term 1: the old member's entry 2 is not this one
    new_two = leaders.get(2)
    assert store.get(2) != new_two
    assert store.truncate(new_two, 1, "n0") == 2
    assert store.get(2) == new_two and store.get_ledger_end_term() == 1
    assert store.get_write_pos() == new_two.pos + new_two.size
    assert store.get_data_file_list().get_data(new_two.pos + new_two.size, 1) is None  # entry 3 is gone
    assert store.member_state.ledger_end_index == 2


def test_truncate_into_an_earlier_file(stores, tmp_path):
    leader_entries = follower_entries(stores(tmp_path / "leader"), 20)
    store = stores(tmp_path / "f", self_id="n1", role="follower", leader_id="n0")
    for e in leader_entries:
        store.append_as_follower(e, 0, "n0")
    names = [f.file_name for f in store.get_data_file_list().get_mapped_files()]
    assert len(names) == 3
    assert store.truncate(leader_entries[3], 0, "n0") == 3
    assert [f.file_name for f in store.get_data_file_list().get_mapped_files()] == names[:1]
    assert not os.path.exists(names[1]) and not os.path.exists(names[2])
    assert len(store.get_index_file_list().get_mapped_files()) == 1
    # and the log goes on from there, at the leader's positions
    for e in leader_entries[4:]:
        store.append_as_follower(e, 0, "n0")
    assert [store.get(i) for i in range(20)] == leader_entries



def test_what_a_truncated_follower_writes_next_is_flushed(stores, tmp_path):
    # After the cut, flushed_where is moved back to it (reviseDataFileListFlushedWhere): left in
    # a file that no longer exists, no flush would ever reach the new entries.
    leader_entries = follower_entries(stores(tmp_path / "leader"), 20)
    store = stores(tmp_path / "f", self_id="n1", role="follower", leader_id="n0")
    for e in leader_entries:
        store.append_as_follower(e, 0, "n0")
    flush_all(store)
    assert store.get_flush_pos() > 2 * DATA_FILE
    store.truncate(leader_entries[3], 0, "n0")
    assert store.get_flush_pos() == leader_entries[3].pos + ENTRY
    for e in leader_entries[4:10]:
        store.append_as_follower(e, 0, "n0")
    for _ in range(4):
        store.flush()
    store.kill()
    crash_machine(root(store))
    again = stores(tmp_path / "f", self_id="n1", role="follower", leader_id="n0")
    assert again.get_ledger_end_index() == 9

def test_truncate_beyond_the_end_rebuilds_the_log_at_that_entry(stores, tmp_path):
    # DLedgerMappedFileStoreTest.testTruncate, "truncate to the end": the follower lacks the
    # entry's position, so both lists are rebuilt there and the ledger begins at it.
    leader_entries = follower_entries(stores(tmp_path / "leader"), 10)
    store = stores(tmp_path / "f", self_id="n1", role="follower", leader_id="n0")
    for e in leader_entries[:6]:
        store.append_as_follower(e, 0, "n0")
    assert store.truncate(leader_entries[9], 0, "n0") == 9
    assert (store.get_ledger_begin_index(), store.get_ledger_end_index()) == (9, 9)
    assert store.get(9) == leader_entries[9]
    assert store.get_data_file_list().get_min_offset() == leader_entries[9].pos
    with pytest.raises(DLedgerException) as err:
        store.get(8)
    assert err.value.code is DLedgerResponseCode.INDEX_LESS_THAN_LOCAL_BEGIN


def test_truncate_needs_the_followers_term_and_leader(stores, tmp_path):
    entries = follower_entries(stores(tmp_path / "leader"), 2)
    store = stores(tmp_path / "f", self_id="n1", role="follower", leader_id="n0")
    for args, code in [((1, "n0"), DLedgerResponseCode.INCONSISTENT_TERM),
                       ((0, "n2"), DLedgerResponseCode.INCONSISTENT_LEADER)]:
        with pytest.raises(DLedgerException) as err:
            store.truncate(entries[1], *args)
        assert err.value.code is code
    leader = stores(tmp_path / "l2")
    with pytest.raises(DLedgerException) as err:
        leader.truncate(entries[1], 0, "n0")
    assert err.value.code is DLedgerResponseCode.NOT_FOLLOWER


# -- committed index ----------------------------------------------------------------------------

def test_update_committed_index_rules(stores, tmp_path):
    store = stores(tmp_path)
    store.update_committed_index(0, 3)
    assert store.get_committed_index() == -1  # empty log: ignored
    entries = fill(store, 10)
    store.member_state.curr_term = 2
    store.update_committed_index(1, 4)
    assert store.get_committed_index() == -1  # term < currTerm: ignored
    store.update_committed_index(2, 4)
    assert (store.get_committed_index(), store.get_committed_pos()) == (4, entries[4].pos + ENTRY)
    store.update_committed_index(2, -1)
    store.update_committed_index(2, 3)  # smaller: ignored
    assert store.get_committed_index() == 4
    store.update_committed_index(3, 42)  # beyond the end: clamped (a later term is fine)
    assert (store.get_committed_index(), store.get_committed_pos()) == (9, store.get_write_pos())


def test_committed_index_below_the_ledger_begin_is_ignored(stores, tmp_path):
    leader_entries = follower_entries(stores(tmp_path / "leader"), 10)
    store = stores(tmp_path / "f", self_id="n1", role="follower", leader_id="n0")
    store.truncate(leader_entries[8], 0, "n0")  # the log begins at 8
    store.update_committed_index(0, 7)
    assert store.get_committed_index() == -1
    store.update_committed_index(0, 8)
    assert store.get_committed_pos() == leader_entries[8].pos + ENTRY


# -- checkpoint, restart ------------------------------------------------------------------------

def test_checkpoint_is_written_as_dledger_writes_it_and_read_at_restart(stores, tmp_path):
    store = stores(tmp_path)
    fill(store, 10)
    store.update_committed_index(0, 6)
    store.persist_check_point()
    path = os.path.join(root(store), "checkpoint")
    with open(path) as f:
        assert f.read() == "endIndex=9\ncommittedIndex=6\n"
    store.update_committed_index(0, 7)
    flush_all(store)
    store.shutdown()  # writes it again; the previous content goes to checkpoint.bak
    with open(path) as f:
        assert f.read() == "endIndex=9\ncommittedIndex=7\n"
    with open(path + ".bak") as f:
        assert f.read() == "endIndex=9\ncommittedIndex=6\n"
    again = stores(tmp_path)
    assert (again.get_ledger_begin_index(), again.get_ledger_end_index(), again.get_committed_index()) == (0, 9, 7)
    assert again.get_committed_pos() == 8 * ENTRY + (DATA_FILE - 7 * ENTRY)  # entry 7 is the first of file 2


def test_currterm_and_vote_survive_a_restart(stores, tmp_path):
    store = stores(tmp_path, role="candidate")
    ms = store.member_state
    ms.next_term()
    ms.next_term()
    ms.set_curr_vote_for("n2")
    ms.change_to_leader(2)
    fill(store, 3)
    store.update_committed_index(2, 2)
    store.shutdown()
    again = stores(tmp_path, role="candidate")
    assert (again.member_state.curr_term, again.member_state.curr_vote_for) == (2, "n2")
    assert (again.get_ledger_end_index(), again.get_ledger_end_term(), again.get_committed_index()) == (2, 2, 2)
    assert (again.member_state.ledger_end_index, again.member_state.ledger_end_term) == (2, 2)


def test_a_checkpoint_beyond_the_recovered_end_is_clamped_and_said(stores, tmp_path, caplog):
    store = stores(tmp_path)
    fill(store, 5)
    flush_all(store)
    store.update_committed_index(0, 4)
    store.shutdown()
    with open(os.path.join(root(store), "checkpoint"), "w") as f:
        f.write("endIndex=12\ncommittedIndex=12\n")
    with caplog.at_level(logging.ERROR, logger="rmqlab.dledger"):
        again = stores(tmp_path)
    assert again.get_committed_index() == 4
    assert "entries up to 12 were committed" in caplog.text and "ends at 4" in caplog.text


# -- recovery -----------------------------------------------------------------------------------

def test_a_process_crash_loses_nothing_written(stores, tmp_path):
    store = stores(tmp_path)
    fill(store, 20)
    store.update_committed_index(0, 11)
    store.persist_check_point()
    fill(store, 3)  # written, never flushed, not in the checkpoint
    store.kill()
    again = stores(tmp_path)
    assert (again.get_ledger_begin_index(), again.get_ledger_end_index(), again.get_committed_index()) == (0, 22, 11)
    assert [again.get(i).body for i in range(23)] == [body(i) for i in range(23)]
    assert again.append_as_leader(DLedgerEntry(body=b"next")).index == 23


def test_a_machine_crash_keeps_what_was_flushed(stores, tmp_path):
    store = stores(tmp_path)
    fill(store, 9)
    flush_all(store)
    fill(store, 4)  # entries 9..12 only in the page cache
    store.kill()
    lost = crash_machine(root(store))
    assert sum(lost.values()) > 0
    again = stores(tmp_path)
    assert again.get_ledger_end_index() == 8
    assert [again.get(i).body for i in range(9)] == [body(i) for i in range(9)]
    assert again.get_write_pos() == again.get(8).pos + ENTRY


def test_a_torn_tail_is_cut(stores, tmp_path, caplog):
    store = stores(tmp_path)
    fill(store, 9)
    flush_all(store)
    fill(store, 1)  # entry 9 at 8200 + 2 x 1072
    store.kill()
    # 30 of entry 9's bytes reach the disk: magic, size, index, term and half its pos.
    torn = crash_machine(root(store), torn_bytes=lambda rel, n: 30 if rel.startswith("data") else 0)
    assert torn
    with caplog.at_level(logging.WARNING, logger="rmqlab.dledger"):
        again = stores(tmp_path)
    assert again.get_ledger_end_index() == 8
    assert "00000000000000008200 position 2144" in caplog.text
    with open(data_file(again, 1), "rb") as f:
        f.seek(2144)
        assert f.read(48) == bytes(48)  # the torn header was cut, not left behind
    assert again.append_as_leader(DLedgerEntry(body=b"after")).pos == DATA_FILE + 2 * ENTRY



def test_a_tear_inside_a_body_is_not_seen_by_the_store_but_by_equals(stores, tmp_path):
    # DLedger 0.3.1.2 never fills bodyCrc: an entry whose header reached the disk whole passes
    # every recovery check, however little of its body did. What catches it is the leader's
    # COMPARE, whose DLedgerEntry.equals compares the body: the follower's entry is then replaced.
    store = stores(tmp_path)
    fill(store, 9)
    flush_all(store)
    written = fill(store, 1)[0]
    store.kill()
    crash_machine(root(store), torn_bytes=lambda rel, n: 48 + 100 if rel.startswith("data") else 0)
    again = stores(tmp_path)
    assert again.get_ledger_end_index() == 9
    kept = again.get(9)
    assert kept.body[:100] == written.body[:100] and kept.body[100:] == bytes(BODY - 100)
    assert kept != store_entry(written)

def test_recovery_rewrites_index_units_that_disagree_with_the_data(stores, tmp_path):
    store = stores(tmp_path)
    entries = fill(store, 6)
    flush_all(store)
    index_file = store.get_index_file_list().get_mapped_files()[0].file_name
    store.kill()
    poke(index_file, 3 * 32 + 31, b"\x07")  # unit 3's term
    poke(index_file, 5 * 32, bytes(32))     # unit 5 gone
    again = stores(tmp_path)
    with open(index_file, "rb") as f:
        raw = f.read()
    for e in entries:
        assert raw[e.index * 32:e.index * 32 + 32] == coder.encode_index(e.pos, ENTRY, 1, e.index, 0)
    assert again.get_ledger_end_index() == 5



def test_a_lost_index_is_rebuilt_from_the_data(stores, tmp_path):
    store = stores(tmp_path)
    entries = fill(store, 26)
    flush_all(store)
    store.shutdown()
    index_dir = os.path.join(root(store), "index")
    for name in os.listdir(index_dir):
        os.remove(os.path.join(index_dir, name))
    again = stores(tmp_path)
    assert (again.get_ledger_begin_index(), again.get_ledger_end_index()) == (0, 25)
    assert [again.get(i) for i in range(26)] == [store_entry(e) for e in entries]
    assert again.get_index_file_list().get_max_wrote_position() == 26 * 32


def store_entry(e: DLedgerEntry) -> DLedgerEntry:
    """What get() answers for an appended entry (the same fields; the body as written)."""
    return DLedgerEntry(magic=e.magic, size=e.size, index=e.index, term=e.term, pos=e.pos, body=e.body)

FIELDS = {
    # field: (byte offset in the header, new byte, the reason the log line gives)
    "magic": (3, b"\x02", "magic=2"),
    "size": (6, b"\x05", "size 1328 != 1024 + 48"),
    "index": (15, b"\x0c", "lastEntryIndex=8"),
    "term going back": (16, b"\x80", "lastEntryTerm=0"),
    "pos": (30, b"\x7f", "pos "),
}


@pytest.mark.parametrize("field", FIELDS)
def test_a_corrupted_header_in_the_last_file_is_cut_there(stores, tmp_path, caplog, field):
    store = stores(tmp_path)
    fill(store, 12)  # files 0 (entries 0..6) and 1 (7..11)
    flush_all(store)
    store.kill()
    offset, value, reason = FIELDS[field]
    victim = DATA_FILE + 2 * ENTRY  # entry 9
    poke(data_file(store, 1), 2 * ENTRY + offset, value)
    with caplog.at_level(logging.WARNING, logger="rmqlab.dledger"):
        again = stores(tmp_path)
    assert again.get_ledger_end_index() == 8
    assert [again.get(i).body for i in range(9)] == [body(i) for i in range(9)]
    line = next(r.getMessage() for r in caplog.records if "the log is cut here" in r.getMessage())
    assert f"{data_file(again, 1)} position {2 * ENTRY} (offset {victim})" in line and reason in line
    assert again.get_index_file_list().get_max_wrote_position() == 9 * 32
    assert again.append_as_leader(DLedgerEntry(body=b"x")).pos == victim


def test_a_corruption_more_than_a_file_before_the_last_stops_the_member(stores, tmp_path):
    store = stores(tmp_path)
    fill(store, 26)  # four files: entries 0..6, 7..13, 14..20, 21..25
    flush_all(store)
    store.kill()
    second = data_file(store, 1)
    poke(second, 3 * ENTRY + 15, b"\x63")  # entry 10's index
    with pytest.raises(DLedgerRecoveryError) as err:
        stores(tmp_path)
    assert err.value.code is DLedgerResponseCode.DISK_ERROR
    message = str(err.value)
    assert f"{second}: recovery stopped at offset {DATA_FILE + 3 * ENTRY}" in message
    assert "00000000000000024600" in message  # the last file
    assert all(os.path.getsize(os.path.join(root(store), "data", n)) == DATA_FILE
               for n in os.listdir(os.path.join(root(store), "data")))
    assert len(os.listdir(os.path.join(root(store), "data"))) == 4  # nothing was cut


def test_a_corruption_in_the_second_last_file_is_cut_as_dledger_does(stores, tmp_path):
    store = stores(tmp_path)
    fill(store, 26)
    flush_all(store)
    store.kill()
    poke(data_file(store, 2), 3 * ENTRY + 15, b"\x63")  # entry 17's index
    again = stores(tmp_path)
    assert again.get_ledger_end_index() == 16
    assert len(again.get_data_file_list().get_mapped_files()) == 3


def test_first_data_files_removed_by_hand_rebase_the_ledger_begin(stores, tmp_path):
    store = stores(tmp_path)
    fill(store, 26)
    flush_all(store)
    store.shutdown()
    data_dir = os.path.join(root(store), "data")
    for name in sorted(os.listdir(data_dir))[:2]:
        os.remove(os.path.join(data_dir, name))
    again = stores(tmp_path)
    assert (again.get_ledger_begin_index(), again.get_ledger_end_index()) == (14, 25)
    assert again.get(14).body == body(14)
    with pytest.raises(DLedgerException) as err:
        again.get(13)
    assert err.value.code is DLedgerResponseCode.INDEX_LESS_THAN_LOCAL_BEGIN
    # the index list was re-based: its files wholly before 14 x 32 are gone
    assert again.get_index_file_list().get_min_offset() == 14 * 32
    assert again.get_index_file_list().get_first_mapped_file().file_from_offset == 14 * 32 - 14 * 32 % INDEX_FILE


def test_an_empty_store_recovers_empty(stores, tmp_path):
    store = stores(tmp_path)
    assert (store.get_ledger_begin_index(), store.get_ledger_end_index(), store.get_committed_index()) == (-1, -1, -1)
    store.shutdown()
    again = stores(tmp_path)
    assert again.append_as_leader(DLedgerEntry(body=b"a")).index == 0


# -- the flush service --------------------------------------------------------------------------

def test_flush_runs_10_ms_after_a_write_and_the_checkpoint_after_3_s_then_nothing(stores, tmp_path):
    node = ManualNode()
    store = stores(tmp_path, node=node)
    assert node.pending() == [3001]  # the first checkpoint, as DLedger's thread writes one after 3 s
    node.advance(3001)
    assert node.pending() == []
    fill(store, 2)
    assert node.pending() == [10]
    node.advance(9)
    assert store.get_flush_pos() == 0
    node.advance(1)
    assert store.get_flush_pos() == store.get_write_pos() == 2 * ENTRY
    assert store.get_index_file_list().flushed_where == 64
    ledger = os.path.join(root(store), ".rmqlab-durability.json")
    with open(ledger) as f:
        assert '"append": 2144' in f.read()  # the page-cache model knows it is durable
    store.update_committed_index(0, 1)
    with open(os.path.join(root(store), "checkpoint")) as f:
        assert f.read() == "endIndex=-1\ncommittedIndex=-1\n"
    node.advance(2990)
    assert node.pending() == [1]  # 3 s after the last checkpoint, not before
    node.advance(1)
    with open(os.path.join(root(store), "checkpoint")) as f:
        assert f.read() == "endIndex=1\ncommittedIndex=1\n"
    assert node.pending() == []  # idle: no timer at all
    node.advance(60_000)
    assert node.pending() == []


def test_the_flush_service_rolls_across_files_one_tick_each(stores, tmp_path):
    node = ManualNode()
    store = stores(tmp_path, node=node)
    fill(store, 9)
    node.advance(10)
    assert store.get_flush_pos() == DATA_FILE  # DLedger flushes one file per tick
    node.advance(10)
    assert store.get_flush_pos() == store.get_write_pos()
    store.kill()
    assert all(t.cancelled for t in node.timers)


# -- on the simulator ---------------------------------------------------------------------------

class _Member(Component):
    """A one-member group's leader appending an entry every 5 ms (virtual) on a simulated node."""

    def __init__(self, appending: bool):
        self.appending = appending
        self.store: DLedgerMmapFileStore | None = None

    async def start(self, node):
        self.node = node
        cfg = DLedgerConfig(store_base_dir=node.store_dir, self_id="n0", peers="n0-localhost:20911",
                            mapped_file_size_for_entry_data=DATA_FILE, mapped_file_size_for_entry_index=INDEX_FILE)
        ms = MemberState(cfg)
        ms.change_to_leader(ms.curr_term)
        self.store = DLedgerMmapFileStore(cfg, ms, node)
        self.store.startup()
        if self.appending:
            node.call_later(5, self._append)

    def _append(self):
        self.store.append_as_leader(DLedgerEntry(body=body(self.store.get_ledger_end_index() + 1, 100)))
        self.node.call_later(5, self._append)

    async def shutdown(self):
        self.store.shutdown()

    def on_crash(self):
        self.store.kill()


def test_on_the_simulator_a_machine_crash_keeps_what_the_flush_service_flushed(tmp_path):
    appending = [True]
    sim = track(Simulation(seed=3, root_dir=str(tmp_path)))
    sim.add_node("n0", lambda: _Member(appending[0]))
    sim.start("n0")
    sim.run_for(203)
    store = sim.components["n0"].store
    written = store.get_ledger_end_index()
    flushed = [i for i in range(written + 1) if store.get(i).pos + 148 <= store.get_flush_pos()]
    assert written >= 39 and 0 < len(flushed) < written + 1  # the last appends are not flushed yet
    sim.nemesis.crash("n0")
    appending[0] = False
    sim.nemesis.restart("n0")
    sim.run_for(1)
    again = sim.components["n0"].store
    assert again.get_ledger_end_index() == flushed[-1]
    assert [again.get(i).body for i in flushed] == [body(i, 100) for i in flushed]
