"""The store after a crash at any instant: deterministic crash points (rmqlab.store.crash_points).

A crash point is "after the n-th file operation of the store" (create, write — possibly torn —,
msync, truncate, delete, the abort file), in the workload or in the recovery after a crash. A
process crash keeps every written byte (the page cache survives); a machine crash keeps what was
flushed plus a seeded torn prefix of the rest (page_cache.crash_machine). After any crash the store
must load; every acknowledged message (SYNC_FLUSH), every written one (ASYNC_FLUSH, process crash)
or every flushed one (ASYNC_FLUSH, machine crash) is served intact through its consume queue, with
contiguous queue offsets from 0, and nothing that was not written is served.
"""

from __future__ import annotations

import logging
import os
import pathlib
import shutil
import tempfile

import pytest

from rmqlab.common.manual_clock import ManualClock
from rmqlab.store import DefaultMessageStore
from rmqlab.store.consume_queue import CQ_STORE_UNIT_SIZE, encode_cq_unit
from rmqlab.store.crash_points import CrashPoints, SimulatedCrash, armed
from rmqlab.store.get_message_result import GetMessageStatus
from rmqlab.store.mapped_file import StoreFileError
from tests.store_helpers import (CRASH_MODES, SMALL_COMMITLOG, crash_point_campaign, crash_point_dir, make_message,
                                 open_store, read_queue, store_config)

CQ_UNITS = 10


def _sync():
    return type(store_config("/nonexistent").flushDiskType)["SYNC_FLUSH"]


def _put(store, clock, n, start=0, **kw):
    keys = []
    for i in range(start, start + n):
        clock.advance(1)
        assert store.put_message(make_message(clock, i, body_size=100, **kw)).is_ok()
        keys.append(f"key-{i}")
    return keys


# -- the campaign ----------------------------------------------------------------------------

@pytest.mark.parametrize("sync,crash", CRASH_MODES, ids=[f"{'sync' if s else 'async'}-{c}" for s, c in CRASH_MODES])
def test_crash_point_campaign(sync, crash):
    """13 seeds x 4 crash points per mode: 208 crash points in all, a third crashed again in recovery."""
    logging.getLogger("rmqlab.store").setLevel(logging.CRITICAL)  # recovery logs every cut
    try:
        runs = list(crash_point_campaign(range(13), points_per_workload=4, modes=[(sync, crash)],
                                         base_dir=crash_point_dir()))
    finally:
        logging.getLogger("rmqlab.store").setLevel(logging.NOTSET)
    assert len(runs) == 52 and all(r.crashed for r in runs)
    assert sum(1 for r in runs if r.recovery_crash_at) >= 8


# -- a crash while a file is being created ---------------------------------------------------

def test_a_crash_while_creating_a_file_never_stops_the_broker(tmp_path):
    """Every crash point of a store's first writes — including those inside the creation of the
    first commitlog and consume-queue files — leaves a store that loads and serves what was
    written."""
    clock = ManualClock()
    cfg = dict(mappedFileSizeConsumeQueue=CQ_STORE_UNIT_SIZE * CQ_UNITS)
    total = None
    k = 1
    while total is None or k <= total:
        root = tmp_path / f"k{k}"
        store = DefaultMessageStore(store_config(root, **cfg), clock=clock)
        cp = CrashPoints(k)
        keys = []
        try:
            with armed(cp):
                store.load()
                for i in range(3):
                    keys += _put(store, clock, 1, start=i)
                    store.reput_message_service.do_reput()
        except SimulatedCrash:
            pass
        else:
            total = cp.count
        store.kill()
        store, _ = open_store(root, clock, **cfg)  # StoreFileError before: a 0-byte file
        served = [m.keys for m in read_queue(store, "TopicTest", 0)]
        assert served == [f"key-{i}" for i in range(len(served))] and len(served) >= len(keys)
        store.shutdown()
        assert not [n for _, _, names in os.walk(root) for n in names if n.endswith(".tmp")]
        k += 1
    assert total >= 10


@pytest.mark.parametrize("directory", ["commitlog", "consumequeue/TopicTest/0"])
def test_a_zero_byte_last_file_is_deleted_on_load(tmp_path, caplog, directory):
    """MappedFileQueue.doLoad (RocketMQ 5): a 0-byte last file is deleted with a warning."""
    clock = ManualClock()
    store, _ = open_store(tmp_path, clock)
    keys = _put(store, clock, 3)
    store.reput_message_service.do_reput()
    store.kill()
    size = SMALL_COMMITLOG if directory == "commitlog" else store_config(tmp_path).get_mapped_file_size_consume_queue()
    empty = tmp_path / directory / f"{size:020d}"
    empty.write_bytes(b"")
    with caplog.at_level(logging.WARNING, logger="rmqlab.store"):
        store, _ = open_store(tmp_path, clock)
    assert not empty.exists()
    assert any("size is 0, auto delete" in r.getMessage() for r in caplog.records)
    assert [m.keys for m in read_queue(store, "TopicTest", 0)] == keys
    store.shutdown()


@pytest.mark.parametrize("content", [b"", b"\0" * 100], ids=["empty-not-last", "short-last"])
def test_any_other_wrong_size_still_stops_the_load(tmp_path, content):
    """doLoad refuses a file whose length does not match the configured size unless it is an
    empty last file ("please check it manually"): that is not what a crash leaves."""
    clock = ManualClock()
    store, _ = open_store(tmp_path, clock)
    _put(store, clock, 3)
    store.shutdown()
    log_dir = tmp_path / "commitlog"
    if content:
        (log_dir / f"{SMALL_COMMITLOG:020d}").write_bytes(content)
    else:
        (log_dir / f"{SMALL_COMMITLOG:020d}").write_bytes(b"")
        (log_dir / f"{2 * SMALL_COMMITLOG:020d}").write_bytes(b"\0" * SMALL_COMMITLOG)
    with pytest.raises(StoreFileError, match="differs from the configured mapped file size"):
        open_store(tmp_path, clock)


# -- consume queues a machine crash zeroed ---------------------------------------------------

def _many_unflushed_cq_files(root, clock, n=95):
    """SYNC_FLUSH, 10-unit consume-queue files, dispatched but never flushed: n acknowledged."""
    cfg = dict(flushDiskType=_sync(), mappedFileSizeConsumeQueue=CQ_STORE_UNIT_SIZE * CQ_UNITS)
    store, _ = open_store(root, clock, **cfg)
    keys = _put(store, clock, n)
    store.reput_message_service.do_reput()
    assert len(os.listdir(root / "consumequeue" / "TopicTest" / "0")) == n // CQ_UNITS + 1
    return store, keys, cfg


def test_machine_crash_zeroing_every_consume_queue_file_loses_no_acknowledged_message(tmp_path, caplog):
    """Before: ConsumeQueue.recover scanned the last three (zeroed) files, kept the zeroed ones before
    them as full, and the re-dispatch wrote unit 0 into a later slot ("[BUG] logic queue order")
    or left zeroed units that were served as empty messages."""
    clock = ManualClock()
    store, keys, cfg = _many_unflushed_cq_files(tmp_path, clock)
    store.kill()
    lost = DefaultMessageStore.crash_machine(str(tmp_path))
    assert not any(v for k, v in lost.items() if k.startswith("commitlog"))  # every message was flushed
    assert any(v for k, v in lost.items() if k.startswith("consumequeue"))
    with caplog.at_level(logging.WARNING, logger="rmqlab.store"):
        store, _ = open_store(tmp_path, clock, **cfg)
    assert not [r for r in caplog.records if "[BUG]" in r.getMessage()]
    assert [m.keys for m in read_queue(store, "TopicTest", 0)] == keys
    assert store.get_max_offset_in_queue("TopicTest", 0) == len(keys)
    assert _put(store, clock, 1, start=len(keys))  # the next message gets the next queue offset
    store.reput_message_service.do_reput()
    assert [m.keys for m in read_queue(store, "TopicTest", 0)][-2:] == keys[-1:] + [f"key-{len(keys)}"]
    store.shutdown()


def test_crash_at_every_point_of_a_recovery_that_cuts_many_files(tmp_path_factory):
    """Recovery of the store above destroys most consume-queue files; a crash after each of its file
    operations, then a second recovery, still serves everything. Before, destroying first to last
    left a gap ("gap before this file") and the store no longer loaded."""
    base = crash_point_dir()
    tmp_path = tmp_path_factory.mktemp("recovery") if base is None else pathlib.Path(tempfile.mkdtemp(dir=base))
    try:
        _crash_at_every_point_of_a_recovery(tmp_path)
    finally:
        shutil.rmtree(tmp_path, ignore_errors=True)


def _crash_at_every_point_of_a_recovery(tmp_path):
    clock = ManualClock()
    crashed = tmp_path / "crashed"
    store, keys, cfg = _many_unflushed_cq_files(crashed, clock, n=55)
    store.kill()
    DefaultMessageStore.crash_machine(str(crashed))
    points = 0
    for k in range(1, 1000):
        root = tmp_path / f"k{k}"
        shutil.copytree(crashed, root)
        shutil.rmtree(root.parent / f"k{k - 1}", ignore_errors=True)
        store = DefaultMessageStore(store_config(root, **cfg), clock=clock)
        try:
            with armed(CrashPoints(k, seed=k)):
                store.load()
        except SimulatedCrash:
            points += 1
        else:
            store.shutdown()
            break
        store.kill()
        DefaultMessageStore.crash_machine(str(root)) if k % 2 else None
        store, _ = open_store(root, clock, **cfg)
        assert [m.keys for m in read_queue(store, "TopicTest", 0)] == keys, k
        store.shutdown()
    assert points >= 10


# -- zeroed units are never kept or served ---------------------------------------------------

def test_truncate_dirty_logic_files_drops_zeroed_units(tmp_path):
    clock = ManualClock()
    store, _ = open_store(tmp_path, clock)
    _put(store, clock, 3)
    store.reput_message_service.do_reput()
    cq = store.find_consume_queue("TopicTest", 0)
    mf = cq.mapped_file_queue.get_last_mapped_file()
    mf.append(bytes(2 * CQ_STORE_UNIT_SIZE))  # two units a crash zeroed
    end = store.get_max_phy_offset()
    cq.truncate_dirty_logic_files(end)  # before: the walk stopped at the zeroed unit (0 + 0 <= end)
    assert cq.get_max_offset_in_queue() == 3 and cq.max_physic_offset == end
    store.shutdown()


def test_get_message_never_serves_a_zeroed_unit(tmp_path):
    clock = ManualClock()
    store, _ = open_store(tmp_path, clock)
    _put(store, clock, 2)
    store.reput_message_service.do_reput()
    mf = store.find_consume_queue("TopicTest", 0).mapped_file_queue.get_last_mapped_file()
    mf.append(encode_cq_unit(0, 0, 0))
    r = store.get_message("g", "TopicTest", 0, 2, 32)
    assert r.status is GetMessageStatus.OFFSET_FOUND_NULL and not r.message_buffers  # before: FOUND, b""
    r = store.get_message("g", "TopicTest", 0, 0, 32)
    assert r.queue_offsets == [0, 1]
    store.kill()


def test_a_short_checkpoint_file_reads_as_no_checkpoint(tmp_path, caplog):
    """A crash between creating and sizing `checkpoint` leaves it empty; like RocketMQ's mapping,
    which grows the file, it reads as zeros (recover from the first file) instead of stopping the
    store (before: ValueError on every start)."""
    clock = ManualClock()
    store, _ = open_store(tmp_path, clock)
    keys = _put(store, clock, 30)
    store.reput_message_service.do_reput()
    store.kill()
    (tmp_path / "checkpoint").write_bytes(b"")
    with caplog.at_level(logging.WARNING, logger="rmqlab.store"):
        store, report = open_store(tmp_path, clock)
    assert report.recovery.mode == "abnormal" and report.recovery.start_offset == 0
    assert any("checkpoint file is 0 bytes" in r.getMessage() for r in caplog.records)
    assert [m.keys for m in read_queue(store, "TopicTest", 0)] == keys
    store.shutdown()
