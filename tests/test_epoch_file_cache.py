"""EpochEntry, EpochFileCache and CheckpointFile (RocketMQ's EpochFileCache.java,
EpochEntry.java, CheckpointFile.java, and two of their quirks: a stale end after a suffix truncation,
an empty list never written)."""

from __future__ import annotations

import ast
import json
import logging
import os
import pathlib
import tempfile

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import rmqlab.common.checkpoint_file as checkpoint_file_module
from rmqlab.common.checkpoint_file import (
    CheckpointFile,
    CheckpointFileCorruptError,
    crc32,
    parse_java_integer,
)
from rmqlab.remoting.protocol.epoch_entry import EpochEntry
from rmqlab.store.epoch_file_cache import EpochEntrySerializer, EpochFileCache

LONG_MAX = 2**63 - 1
FILE_135 = b"3\n453994644\n1-100\n2-300\n3-500\n"  # a three-entry file as CheckpointFile writes it


def make_cache(pairs, path=None) -> EpochFileCache:
    cache = EpochFileCache(path)
    for epoch, start in pairs:
        assert cache.append_entry(EpochEntry(epoch, start))
    return cache


@pytest.fixture
def path(tmp_path) -> str:
    return str(tmp_path / "epochFileCheckpoint")


@pytest.fixture
def cache135(path) -> EpochFileCache:
    """The cache of RocketMQ's EpochFileCacheTest.setup: (1,100),(2,300),(3,500), file-backed."""
    return make_cache([(1, 100), (2, 300), (3, 500)], path)


def read(p: str) -> bytes:
    with open(p, "rb") as f:
        return f.read()


def write(p: str, data: bytes) -> None:
    with open(p, "wb") as f:
        f.write(data)


# ---------------------------------------------------------------- EpochEntry


def test_epoch_entry_default_end_and_equality_on_all_fields():
    assert EpochEntry(1, 100).end_offset == LONG_MAX
    assert EpochEntry(1, 100) == EpochEntry(1, 100, LONG_MAX)
    assert EpochEntry(1, 100, 5) != EpochEntry(1, 100, 6)
    assert EpochEntry(1, 100) != EpochEntry(2, 100)
    assert EpochEntry(1, 100) != EpochEntry(1, 101)


def test_epoch_entry_copy_is_independent():
    entry = EpochEntry(1, 100, 300)
    copy = entry.copy()
    copy.end_offset = 1
    assert entry == EpochEntry(1, 100, 300)


def test_epoch_entry_json_round_trip_uses_rocketmq_keys():
    entry = EpochEntry(3, 500, 700)
    text = entry.to_json()
    assert text == '{"endOffset":700,"epoch":3,"startOffset":500}'
    assert json.loads(text) == {"epoch": 3, "startOffset": 500, "endOffset": 700}
    assert EpochEntry.from_json(text) == entry
    assert EpochEntry.from_dict(entry.to_dict()) == entry
    # endOffset absent -> Java field default; unknown keys ignored like fastjson.
    assert EpochEntry.from_json('{"epoch":3,"startOffset":500,"x":1}') == EpochEntry(3, 500, LONG_MAX)


@pytest.mark.parametrize("text, fragment", [
    ('{"startOffset":5}', "'epoch'"),
    ('{"epoch":1}', "'startOffset'"),
    ('{"epoch":"1","startOffset":5}', "'epoch' must be an integer"),
    ('{"epoch":true,"startOffset":5}', "'epoch' must be an integer"),
    ('{"epoch":1,"startOffset":5,"endOffset":1.5}', "'endOffset' must be an integer"),
    ('{"epoch":1,"startOffset":-5}', "startOffset must be in"),
    ('{"epoch":2147483648,"startOffset":5}', "epoch must be in"),
    ("[1, 2]", "must be an object"),
    ("{not json", "malformed"),
])
def test_epoch_entry_from_json_rejects_bad_input(text, fragment):
    with pytest.raises(ValueError, match=fragment):
        EpochEntry.from_json(text)


def test_epoch_entry_rejects_values_the_file_format_cannot_hold():
    with pytest.raises(ValueError, match="epoch must be in"):
        EpochEntry(-1, 100)  # would be written as "-1-100", which no reader accepts
    with pytest.raises(ValueError, match="startOffset must be in"):
        EpochEntry(1, LONG_MAX + 1)
    with pytest.raises(TypeError, match="must be an int"):
        EpochEntry(1, "100")


# ---------------------------------------------------------------- appending and lookups


def test_append_sets_previous_end_and_stores_copy(cache135):
    assert cache135.get_all_entries() == [
        EpochEntry(1, 100, 300), EpochEntry(2, 300, 500), EpochEntry(3, 500, LONG_MAX)]
    entry = EpochEntry(4, 800)
    assert cache135.append_entry(entry)
    entry.start_offset = 1  # the cache stored a copy
    assert cache135.get_entry(3) == EpochEntry(3, 500, 800)
    assert cache135.get_entry(4) == EpochEntry(4, 800, LONG_MAX)
    assert cache135.get_entry_size() == 4


@pytest.mark.parametrize("epoch, start", [(3, 600), (2, 600), (4, 500), (4, 400), (3, 500)])
def test_append_rejects_unless_epoch_and_start_strictly_increase(cache135, path, epoch, start):
    before_entries, before_file = cache135.get_all_entries(), read(path)
    assert cache135.append_entry(EpochEntry(epoch, start)) is False
    assert cache135.get_all_entries() == before_entries
    assert read(path) == before_file


def test_append_to_empty_cache():
    cache = EpochFileCache()
    assert cache.append_entry(EpochEntry(5, 0))
    assert cache.get_all_entries() == [EpochEntry(5, 0, LONG_MAX)]
    with pytest.raises(TypeError):
        cache.append_entry((6, 10))


def test_empty_cache_lookups():
    cache = EpochFileCache()
    assert cache.last_epoch() == -1
    assert cache.first_entry() is None and cache.last_entry() is None
    assert cache.get_entry(1) is None and cache.next_entry(0) is None
    assert cache.find_epoch_entry_by_offset(0) is None
    assert cache.get_all_entries() == [] and cache.get_entry_size() == 0


def test_first_last_and_get_entry(cache135):
    assert cache135.first_entry() == EpochEntry(1, 100, 300)
    assert cache135.last_entry() == EpochEntry(3, 500, LONG_MAX)
    assert cache135.last_epoch() == 3
    assert cache135.get_entry(2) == EpochEntry(2, 300, 500)
    assert cache135.get_entry(4) is None and cache135.get_entry(0) is None


def test_returned_entries_are_copies(cache135):
    for returned in (cache135.first_entry(), cache135.last_entry(), cache135.get_entry(2),
                     cache135.next_entry(1), cache135.find_epoch_entry_by_offset(350),
                     *cache135.get_all_entries()):
        returned.end_offset = 1
        returned.start_offset = 0
    assert cache135.get_all_entries() == [
        EpochEntry(1, 100, 300), EpochEntry(2, 300, 500), EpochEntry(3, 500, LONG_MAX)]


def test_next_entry_is_ceiling_of_epoch_plus_one():
    cache = make_cache([(1, 100), (3, 300), (5, 500)])
    assert cache.next_entry(-7) == EpochEntry(1, 100, 300)
    assert cache.next_entry(0) == EpochEntry(1, 100, 300)
    assert cache.next_entry(1) == EpochEntry(3, 300, 500)
    assert cache.next_entry(2) == EpochEntry(3, 300, 500)
    assert cache.next_entry(3) == EpochEntry(5, 500, LONG_MAX)
    assert cache.next_entry(5) is None


def test_get_all_entries_ascending():
    cache = make_cache([(2, 10), (7, 20), (9, 30)])
    assert [e.epoch for e in cache.get_all_entries()] == [2, 7, 9]


@pytest.mark.parametrize("offset, epoch", [
    (99, None), (100, 1), (299, 1), (300, 2), (350, 2), (499, 2), (500, 3), (LONG_MAX - 1, 3), (LONG_MAX, None)])
def test_find_epoch_entry_by_offset_half_open_ranges(cache135, offset, epoch):
    found = cache135.find_epoch_entry_by_offset(offset)
    assert (found.epoch if found else None) == epoch


def test_set_last_epoch_entry_end_offset(cache135, path):
    before = read(path)
    cache135.set_last_epoch_entry_end_offset(499)  # below last start: ignored
    assert cache135.last_entry().end_offset == LONG_MAX
    cache135.set_last_epoch_entry_end_offset(500)  # equal to start: applied
    assert cache135.last_entry() == EpochEntry(3, 500, 500)
    cache135.set_last_epoch_entry_end_offset(700)
    assert cache135.last_entry() == EpochEntry(3, 500, 700)
    assert cache135.find_epoch_entry_by_offset(700) is None
    assert read(path) == before  # end offsets are not persisted
    empty = EpochFileCache()
    empty.set_last_epoch_entry_end_offset(10)
    assert empty.get_entry_size() == 0
    with pytest.raises(ValueError, match="not a 64-bit offset"):
        cache135.set_last_epoch_entry_end_offset(LONG_MAX + 1)


def test_init_cache_from_entries_recomputes_ends_keeps_last_and_rewrites_file(path):
    cache = make_cache([(9, 9000)], path)
    given_entries = [EpochEntry(1, 100, 1), EpochEntry(2, 300, 2), EpochEntry(3, 500, 650)]
    cache.init_cache_from_entries(given_entries)
    assert cache.get_all_entries() == [EpochEntry(1, 100, 300), EpochEntry(2, 300, 500), EpochEntry(3, 500, 650)]
    assert read(path) == FILE_135
    given_entries[2].end_offset = 1  # the cache stored copies
    assert cache.last_entry().end_offset == 650


@pytest.mark.parametrize("pairs", [[(2, 300), (1, 100)], [(1, 100), (2, 100)], [(1, 100), (1, 300)]])
def test_init_cache_from_entries_rejects_unordered_input(pairs):
    cache = make_cache([(9, 9000)])
    with pytest.raises(ValueError, match="must strictly increase"):
        cache.init_cache_from_entries([EpochEntry(e, s) for e, s in pairs])
    assert cache.get_all_entries() == [EpochEntry(9, 9000)]


def test_memory_only_cache_writes_nothing(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    cache = make_cache([(1, 100), (2, 300)])
    cache.truncate_suffix_by_epoch(2)
    cache.init_cache_from_entries([EpochEntry(4, 4)])
    assert cache.file_path is None
    assert os.listdir(tmp_path) == []
    with pytest.raises(ValueError, match="no file path"):
        cache.init_cache_from_file()


# ---------------------------------------------------------------- EpochFileCache.findConsistentPoint


def test_consistent_point_sample1_start_differs_in_top_epoch(cache135):
    compare = make_cache([(1, 100), (2, 300), (3, 450)])
    assert cache135.find_consistent_point(compare) == 450


def test_consistent_point_sample2_min_of_ends(cache135):
    compare = make_cache([(1, 100), (2, 300), (3, 500)])
    cache135.set_last_epoch_entry_end_offset(700)
    compare.set_last_epoch_entry_end_offset(600)
    assert cache135.find_consistent_point(compare) == 600


def test_consistent_point_sample3_no_common_epoch(cache135):
    compare = make_cache([(1, 200), (2, 500)])
    assert cache135.find_consistent_point(compare) == -1


def test_consistent_point_sample4_epoch_only_local_is_skipped(cache135):
    local = make_cache([(1, 100), (2, 300), (3, 500), (4, 800)])
    cache135.set_last_epoch_entry_end_offset(700)
    assert local.find_consistent_point(cache135) == 700


def test_consistent_point_epochs_only_in_compare_are_skipped():
    local = make_cache([(1, 100), (3, 500)])
    compare = make_cache([(1, 100), (2, 300), (3, 500)])
    local.set_last_epoch_entry_end_offset(900)
    compare.set_last_epoch_entry_end_offset(800)
    assert local.find_consistent_point(compare) == 800


def test_consistent_point_with_empty_caches(cache135):
    empty = EpochFileCache()
    assert empty.find_consistent_point(cache135) == -1
    assert cache135.find_consistent_point(empty) == -1
    assert empty.find_consistent_point(EpochFileCache()) == -1


# ---------------------------------------------------------------- truncatePrefixByOffset, truncateSuffixByOffset


def test_truncate_suffix_by_offset_removes_start_at_or_after(cache135, path):
    cache135.truncate_suffix_by_offset(300)
    assert [e.epoch for e in cache135.get_all_entries()] == [1]
    assert read(path) == b"1\n%d\n1-100\n" % crc32(b"1-100\n")


def test_truncate_suffix_by_offset_keeps_entries_starting_before(cache135):
    cache135.truncate_suffix_by_offset(301)
    assert cache135.get_all_entries() == [EpochEntry(1, 100, 300), EpochEntry(2, 300, LONG_MAX)]


def test_truncate_suffix_by_epoch_removes_epoch_at_or_above(cache135, path):
    cache135.truncate_suffix_by_epoch(3)
    assert cache135.get_all_entries() == [EpochEntry(1, 100, 300), EpochEntry(2, 300, LONG_MAX)]
    assert EpochFileCache(path).get_all_entries() == cache135.get_all_entries()
    cache135.truncate_suffix_by_epoch(7)  # nothing to remove
    assert cache135.get_entry_size() == 2


def test_quirk1_stale_end_after_suffix_truncation_is_fixed(cache135):
    """EpochFileCache.truncateSuffixByOffset: RocketMQ leaves getEntry(1) = (1,100,300) and finds no
    entry for 350."""
    cache135.truncate_suffix_by_offset(150)
    assert cache135.get_entry(1) == EpochEntry(1, 100, LONG_MAX)
    assert cache135.find_epoch_entry_by_offset(350) == EpochEntry(1, 100, LONG_MAX)
    assert cache135.get_entry(2) is None


def test_suffix_truncation_reopens_an_explicitly_closed_last_entry(cache135):
    cache135.set_last_epoch_entry_end_offset(700)
    cache135.truncate_suffix_by_offset(10_000)  # removes nothing; the last entry is reopened as on reload
    assert cache135.last_entry() == EpochEntry(3, 500, LONG_MAX)


@pytest.mark.parametrize("offset, epochs", [
    (0, [1, 2, 3]), (299, [1, 2, 3]), (300, [2, 3]), (499, [2, 3]), (500, [3]), (LONG_MAX - 1, [3])])
def test_truncate_prefix_by_offset_removes_entries_ending_at_or_before(cache135, path, offset, epochs):
    cache135.truncate_prefix_by_offset(offset)
    assert [e.epoch for e in cache135.get_all_entries()] == epochs
    # The first survivor keeps its start offset; the file follows.
    assert EpochFileCache(path).get_all_entries() == cache135.get_all_entries()


def test_truncate_prefix_can_remove_a_closed_last_entry(cache135):
    cache135.set_last_epoch_entry_end_offset(700)
    cache135.truncate_prefix_by_offset(700)
    assert cache135.get_entry_size() == 0


# ---------------------------------------------------------------- persistence (CheckpointFile)


def test_file_bytes_of_the_reference_examples(path):
    assert crc32(b"7-7000\n8-8000\n") == 773307083
    assert crc32(b"1-100\n2-300\n3-500\n") == 453994644
    make_cache([(7, 7000), (8, 8000)], path)
    assert read(path) == b"2\n773307083\n7-7000\n8-8000\n"
    other = path + "-2"
    make_cache([(1, 100), (2, 300), (3, 500)], other)
    assert read(other) == FILE_135


def test_round_trip_recomputes_end_offsets(cache135, path):
    cache135.set_last_epoch_entry_end_offset(900)  # memory only
    reopened = EpochFileCache(path)
    assert reopened.get_all_entries() == [
        EpochEntry(1, 100, 300), EpochEntry(2, 300, 500), EpochEntry(3, 500, LONG_MAX)]
    assert reopened.file_path == path
    # init_cache_from_file replaces whatever the cache held.
    cache135.append_entry(EpochEntry(4, 800))
    reopened.init_cache_from_file()
    assert reopened.get_all_entries() == cache135.get_all_entries()


def test_bak_holds_the_previous_content(cache135, path):
    assert read(path + ".bak") == b"2\n%d\n1-100\n2-300\n" % crc32(b"1-100\n2-300\n")
    cache135.append_entry(EpochEntry(4, 800))
    assert read(path + ".bak") == FILE_135


def test_first_write_creates_directories_and_no_bak(tmp_path):
    p = str(tmp_path / "store" / "root" / "epochFileCheckpoint")
    make_cache([(1, 0)], p)
    assert read(p) == b"1\n%d\n1-0\n" % crc32(b"1-0\n")
    assert not os.path.exists(p + ".bak")


def test_missing_files_give_an_empty_cache(path):
    assert EpochFileCache(path).get_entry_size() == 0
    assert not os.path.exists(path)


def test_writes_are_fsynced(path, monkeypatch):
    synced = []
    real_fsync = os.fsync

    def recording_fsync(fd):
        synced.append(os.fstat(fd).st_ino)
        real_fsync(fd)

    monkeypatch.setattr(checkpoint_file_module.os, "fsync", recording_fsync)
    cache = make_cache([(1, 100)], path)
    synced.clear()
    cache.append_entry(EpochEntry(2, 300))
    inodes = {os.stat(path).st_ino, os.stat(path + ".bak").st_ino, os.stat(os.path.dirname(path)).st_ino}
    assert inodes <= set(synced)


def test_flush_failure_is_logged_and_memory_state_kept(tmp_path, caplog):
    store = tmp_path / "store"
    p = str(store / "epochFileCheckpoint")
    cache = EpochFileCache(p)
    store.write_bytes(b"")  # the parent is now a regular file: every write fails
    with caplog.at_level(logging.ERROR, logger="rmqlab.store"):
        assert cache.append_entry(EpochEntry(1, 100)) is True  # as RocketMQ: logged, not raised
    assert cache.get_all_entries() == [EpochEntry(1, 100)]
    assert any(p in r.getMessage() and r.name == "rmqlab.store" for r in caplog.records)


# ---------------------------------------------------------------- the empty list (CheckpointFile.write)


def test_quirk2_truncating_to_nothing_survives_a_restart(cache135, path):
    """RocketMQ skips writing an empty list, so the old entries come back after a restart;
    rmqlab removes the file and its backup, which RocketMQ also reads as empty."""
    cache135.truncate_suffix_by_offset(100)
    assert cache135.get_entry_size() == 0
    assert not os.path.exists(path) and not os.path.exists(path + ".bak")
    assert EpochFileCache(path).get_entry_size() == 0
    assert cache135.append_entry(EpochEntry(4, 50))
    assert read(path) == b"1\n%d\n4-50\n" % crc32(b"4-50\n")
    assert not os.path.exists(path + ".bak")


def test_init_cache_from_empty_entries_removes_the_files(cache135, path):
    cache135.init_cache_from_entries([])
    assert not os.path.exists(path) and not os.path.exists(path + ".bak")
    assert EpochFileCache(path).get_entry_size() == 0


# ---------------------------------------------------------------- reading damaged files


CORRUPTIONS = {
    "crc": (b"3\n12345\n1-100\n2-300\n3-500\n", "CRC mismatch: line 2 says 12345, the entry lines give 453994644"),
    "count": (b"4\n453994644\n1-100\n2-300\n3-500\n", "line 1 says 4 entries but 3 were found"),
    "count-not-number": (b"three\n453994644\n1-100\n2-300\n3-500\n", "line 1 (entry count): 'three' is not"),
    "crc-not-number": (b"3\n45399464x\n1-100\n2-300\n3-500\n", "line 2 (CRC): '45399464x' is not"),
    "entry-not-number": (b"3\n0\n1-100\n2-3O0\n3-500\n", "line 4 '2-3O0': '3O0' is not a decimal integer"),
    "epoch-too-big": (b"1\n0\n2147483648-100\n", "does not fit in a 32-bit signed integer"),
    "skipped-line": (b"3\n0\n1-100\ngarbage\n3-500\n",
                     "line 1 says 3 entries but 2 were found (unrecognised line(s) 4 skipped)"),
    "torn-empty": (b"", "is empty (no entry-count line)"),
    "no-crc-line": (b"3\n", "has no line 2 (CRC)"),
    "not-utf8": (b"3\n0\n1-100\n\xff\n", "is not valid UTF-8 (byte 10)"),
    "unordered": (b"2\n0\n2-300\n1-100\n",
                  "entry #2 (epoch 1, start 100) does not follow entry #1 (epoch 2, start 300)"),
}


@pytest.mark.parametrize("name", sorted(CORRUPTIONS))
def test_corrupt_main_file_falls_back_to_bak_and_logs(cache135, path, caplog, name):
    data, reason = CORRUPTIONS[name]
    write(path, data)
    with caplog.at_level(logging.WARNING, logger="rmqlab.store"):
        reopened = EpochFileCache(path)
    assert reopened.get_all_entries() == [EpochEntry(1, 100, 300), EpochEntry(2, 300, LONG_MAX)]  # the .bak
    messages = [r.getMessage() for r in caplog.records if r.name == "rmqlab.store"]
    assert any(path in m and path + ".bak" in m and reason in m for m in messages), messages


@pytest.mark.parametrize("name", sorted(CORRUPTIONS))
def test_both_files_corrupt_raise_naming_both(cache135, path, name):
    data, reason = CORRUPTIONS[name]
    write(path, data)
    write(path + ".bak", b"2\n1\n1-100\n2-300\n")
    with pytest.raises(CheckpointFileCorruptError) as info:
        EpochFileCache(path)
    bak_reason = "CRC mismatch: line 2 says 1, the entry lines give"
    assert [p for p, _ in info.value.problems] == [path, path + ".bak"]
    assert reason in info.value.problems[0][1] and bak_reason in info.value.problems[1][1]
    assert path in str(info.value) and reason in str(info.value) and bak_reason in str(info.value)


def test_corrupt_main_without_bak_raises(path):
    write(path, CORRUPTIONS["crc"][0])
    with pytest.raises(CheckpointFileCorruptError, match=r"\.bak: missing"):
        EpochFileCache(path)


def test_corrupt_main_with_empty_bak_raises(path):
    write(path, CORRUPTIONS["crc"][0])
    write(path + ".bak", b"0\n0\n")
    with pytest.raises(CheckpointFileCorruptError, match=r"\.bak: holds no entries"):
        EpochFileCache(path)


def test_failed_init_cache_from_file_leaves_the_cache_unchanged(cache135, path):
    write(path, b"garbage")
    write(path + ".bak", b"garbage")
    with pytest.raises(CheckpointFileCorruptError):
        cache135.init_cache_from_file()
    assert cache135.get_entry_size() == 3


def test_missing_main_file_loads_bak_like_rocketmq(cache135, path, caplog):
    os.remove(path)
    with caplog.at_level(logging.WARNING, logger="rmqlab.store"):
        assert EpochFileCache(path).get_entry_size() == 2
    assert any("is missing" in r.getMessage() for r in caplog.records)


def test_main_file_with_no_entries_loads_bak_like_rocketmq(cache135, path):
    write(path, b"0\n0\n")
    assert EpochFileCache(path).get_entry_size() == 2


def test_missing_main_with_corrupt_bak_raises(path):
    write(path + ".bak", b"2\n1\n1-100\n2-300\n")
    with pytest.raises(CheckpointFileCorruptError, match="epochFileCheckpoint: missing"):
        EpochFileCache(path)


def test_write_after_recovery_keeps_the_good_bak(cache135, path):
    good_bak = read(path + ".bak")
    write(path, b"3\n45")  # torn
    cache = EpochFileCache(path)
    assert cache.append_entry(EpochEntry(5, 900))
    assert read(path + ".bak") == good_bak  # the torn bytes were not copied over it
    assert EpochFileCache(path).get_all_entries() == cache.get_all_entries()


def test_reader_mirrors_rocketmq_parsing_details(path):
    # CRC 0 disables the check; readLine accepts \r\n; "1-100-" splits into two parts in Java;
    # "+3" and leading zeros are valid Java integers.
    write(path, b"3\r\n0\r\n1-100-\r\n2-0300\r\n+3-500\r\n")
    assert EpochFileCache(path).get_all_entries() == [
        EpochEntry(1, 100, 300), EpochEntry(2, 300, 500), EpochEntry(3, 500, LONG_MAX)]
    # The CRC is over the lines re-joined with "\n", so a CRLF copy of a valid file still verifies.
    write(path, FILE_135.replace(b"\n", b"\r\n"))
    assert EpochFileCache(path).get_entry_size() == 3
    # A skipped line still counts towards the CRC.
    body = b"1-100\nnot an entry\n2-300\n"
    write(path, b"2\n%d\n" % crc32(body) + body)
    assert EpochFileCache(path).get_entry_size() == 2


def test_parse_java_integer():
    assert parse_java_integer("-2147483648", 32) == -(2**31)
    assert parse_java_integer("+007", 32) == 7
    assert parse_java_integer("0" * 40 + "9", 64) == 9
    for bad in (" 1", "1_000", "", "+", "0x10", "１"):
        with pytest.raises(ValueError, match="is not a decimal integer"):
            parse_java_integer(bad, 64)
    with pytest.raises(ValueError, match="64-bit"):
        parse_java_integer("9223372036854775808", 64)
    with pytest.raises(ValueError, match="64-bit"):
        parse_java_integer("9" * 5000, 64)


def test_serializer_lines():
    s = EpochEntrySerializer()
    assert s.to_line(EpochEntry(7, 7000)) == "7-7000"
    assert s.from_line("7-7000") == EpochEntry(7, 7000)
    for skipped in ("", "7", "-7-7000", "7--7000", "7-7000-1"):
        assert s.from_line(skipped) is None


def test_checkpoint_file_refuses_lines_it_could_not_read_back(tmp_path):
    class Bad:
        def to_line(self, entry):
            return entry

        def from_line(self, line):
            return line

    cp = CheckpointFile(tmp_path / "f", Bad())
    for line in ("", "a\nb"):
        with pytest.raises(ValueError, match="invalid line"):
            cp.write([line])
    assert not (tmp_path / "f").exists()
    cp.write(["x", "y"])
    assert cp.read() == ["x", "y"]


def test_module_imports_follow_house_rules():
    root = pathlib.Path(__file__).resolve().parents[1] / "rmqlab"
    for rel in ("store/epoch_file_cache.py", "common/checkpoint_file.py"):
        tree = ast.parse((root / rel).read_text())
        imported = {alias.name.split(".")[0] for node in ast.walk(tree) if isinstance(node, ast.Import)
                    for alias in node.names}
        imported |= {(node.module or "").split(".")[0] for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)}
        assert not imported & {"time", "random", "socket"}, rel


# ---------------------------------------------------------------- properties


appends = st.lists(st.tuples(st.integers(0, 40), st.integers(0, 4000)), max_size=25)


def check_invariants(cache: EpochFileCache, accepted: list[tuple[int, int]]) -> None:
    entries = cache.get_all_entries()
    assert [(e.epoch, e.start_offset) for e in entries] == accepted
    for prev, cur in zip(entries, entries[1:]):
        assert prev.epoch < cur.epoch and prev.start_offset < cur.start_offset
        assert prev.end_offset == cur.start_offset
    if entries:
        assert entries[-1].end_offset == LONG_MAX


@settings(max_examples=200, deadline=None)
@given(appends, st.lists(st.integers(0, 4500), max_size=20), st.integers(0, 4500))
def test_property_random_appends(pairs, probes, max_phy):
    cache = EpochFileCache()
    accepted: list[tuple[int, int]] = []
    for epoch, start in pairs:
        ok = not accepted or (epoch > accepted[-1][0] and start > accepted[-1][1])
        assert cache.append_entry(EpochEntry(epoch, start)) is ok
        if ok:
            accepted.append((epoch, start))
    check_invariants(cache, accepted)

    entries = cache.get_all_entries()
    for offset in probes + [s for _, s in accepted]:
        found = cache.find_epoch_entry_by_offset(offset)
        containing = [e for e in entries if e.start_offset <= offset < e.end_offset]
        assert len(containing) <= 1
        assert found == (containing[0] if containing else None)
        assert (found is None) == (not entries or offset < entries[0].start_offset)

    copy = EpochFileCache()
    copy.init_cache_from_entries(cache.get_all_entries())
    assert cache.find_consistent_point(copy) == (entries[-1].end_offset if entries else -1)
    # As in the handshake: both sides close their last entry at their max physical offset.
    if entries and max_phy >= entries[-1].start_offset:
        cache.set_last_epoch_entry_end_offset(max_phy)
        copy.set_last_epoch_entry_end_offset(max_phy)
        assert cache.find_consistent_point(copy) == max_phy


@settings(max_examples=40, deadline=None)
@given(appends, st.integers(0, 4500))
def test_property_persisted_appends_and_truncation_round_trip(pairs, truncate_at):
    with tempfile.TemporaryDirectory() as d:
        p = os.path.join(d, "epochFileCheckpoint")
        cache = EpochFileCache(p)
        for epoch, start in pairs:
            cache.append_entry(EpochEntry(epoch, start))
        assert EpochFileCache(p).get_all_entries() == cache.get_all_entries()
        cache.truncate_suffix_by_offset(truncate_at)
        kept = cache.get_all_entries()
        assert all(e.start_offset < truncate_at for e in kept)
        check_invariants(cache, [(e.epoch, e.start_offset) for e in kept])
        assert EpochFileCache(p).get_all_entries() == kept
