"""The storage engine: append, dispatch, flush policies, crash model and recovery."""

from __future__ import annotations

import os

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from rmqlab.common.manual_clock import ManualClock
from rmqlab.config import MessageStoreConfig
from rmqlab.store import DefaultMessageStore
from rmqlab.store.consume_queue import decode_cq_unit, encode_cq_unit
from rmqlab.store.get_message_result import GetMessageStatus
from rmqlab.store.mapped_file import StoreFileError
from rmqlab.store.default_message_store import StoreInUseError
from rmqlab.store.message_ext_encoder import BLANK_MAGIC_CODE
from rmqlab.store.put_message_result import PutMessageStatus
from tests.store_helpers import SMALL_COMMITLOG, make_message, open_store, read_queue, store_config


def put_n(store, clock, n, start=0, **kw):
    results = []
    for i in range(start, start + n):
        clock.advance(1)
        results.append(store.put_message(make_message(clock, i, **kw)))
    return results


def test_put_is_invisible_until_dispatched(tmp_path):
    clock = ManualClock()
    store, _ = open_store(tmp_path, clock)
    r = put_n(store, clock, 3)
    assert [x.put_message_status for x in r] == [PutMessageStatus.PUT_OK] * 3
    assert [x.append_message_result.logics_offset for x in r] == [0, 1, 2]
    # In the commitlog, not yet in the consume queue: a consumer sees nothing.
    assert store.get_message("g", "TopicTest", 0, 0, 32).status is GetMessageStatus.NO_MATCHED_LOGIC_QUEUE
    assert store.dispatch_behind_bytes() == r[-1].append_message_result.next_offset
    store.reput_message_service.do_reput()
    got = read_queue(store, "TopicTest", 0)
    assert [m.keys for m in got] == ["key-0", "key-1", "key-2"]
    assert got[1].commit_log_offset == r[1].append_message_result.wrote_offset
    assert got[1].msg_id == r[1].append_message_result.msg_id
    store.shutdown()


def test_get_message_offset_statuses(tmp_path):
    clock = ManualClock()
    store, _ = open_store(tmp_path, clock)
    put_n(store, clock, 5)
    store.reput_message_service.do_reput()
    assert store.get_message("g", "TopicTest", 0, 5, 32).status is GetMessageStatus.OFFSET_OVERFLOW_ONE
    bad = store.get_message("g", "TopicTest", 0, 9, 32)
    assert bad.status is GetMessageStatus.OFFSET_OVERFLOW_BADLY and bad.next_begin_offset == 5
    r = store.get_message("g", "TopicTest", 0, 2, 2)
    assert r.status is GetMessageStatus.FOUND and r.queue_offsets == [2, 3] and r.next_begin_offset == 4
    # Tag filtering on the consume queue's tags code.
    none = store.get_message("g", "TopicTest", 0, 0, 32, message_filter=lambda code: False)
    assert none.status is GetMessageStatus.NO_MATCHED_MESSAGE and none.next_begin_offset == 5
    store.shutdown()


def test_commitlog_rolls_with_a_blank_record(tmp_path):
    clock = ManualClock()
    store, _ = open_store(tmp_path, clock)
    results = put_n(store, clock, 40)
    names = sorted(os.listdir(tmp_path / "commitlog"))
    assert names[0] == "0" * 20 and names[1] == f"{SMALL_COMMITLOG:020d}"
    assert all(len(n) == 20 for n in names) and len(names) >= 3
    first_in_second = next(r for r in results if r.append_message_result.wrote_offset >= SMALL_COMMITLOG)
    assert first_in_second.append_message_result.wrote_offset == SMALL_COMMITLOG
    # The last record of file 0 is a BLANK claiming the rest of the file.
    last_in_first = max((r for r in results if r.append_message_result.wrote_offset < SMALL_COMMITLOG),
                        key=lambda r: r.append_message_result.wrote_offset)
    end = last_in_first.append_message_result.next_offset
    raw = (tmp_path / "commitlog" / names[0]).read_bytes()
    assert int.from_bytes(raw[end:end + 4], "big") == SMALL_COMMITLOG - end
    assert int.from_bytes(raw[end + 4:end + 8], "big", signed=True) == BLANK_MAGIC_CODE
    store.reput_message_service.do_reput()
    assert len(read_queue(store, "TopicTest", 0)) == 40
    store.shutdown()


def test_clean_shutdown_recovers_normally(tmp_path):
    clock = ManualClock()
    store, _ = open_store(tmp_path, clock)
    put_n(store, clock, 30)
    store.shutdown()
    assert not (tmp_path / "abort").exists()
    store, report = open_store(tmp_path, clock)
    assert report.last_exit_ok and report.recovery.mode == "normal"
    assert report.recovery.discarded_bytes == 0
    assert len(read_queue(store, "TopicTest", 0)) == 30
    # New writes continue the queue.
    r = put_n(store, clock, 1, start=30)[0]
    assert r.append_message_result.logics_offset == 30
    store.shutdown()


def test_process_crash_loses_nothing_written(tmp_path):
    clock = ManualClock()
    store, _ = open_store(tmp_path, clock)
    put_n(store, clock, 25)  # ASYNC_FLUSH, nothing flushed, nothing dispatched
    store.kill()
    store, report = open_store(tmp_path, clock)
    assert not report.last_exit_ok and report.recovery.mode == "abnormal"
    assert report.redispatched == 25  # consume queue rebuilt from the commitlog
    assert [m.keys for m in read_queue(store, "TopicTest", 0)] == [f"key-{i}" for i in range(25)]
    store.shutdown()


def test_machine_crash_async_flush_loses_the_unflushed_tail(tmp_path):
    clock = ManualClock()
    store, _ = open_store(tmp_path, clock)
    put_n(store, clock, 10)
    store.commit_log.flush_all()
    flushed = store.commit_log.flushed_where()
    put_n(store, clock, 5, start=10)  # acknowledged (ASYNC_FLUSH), never flushed
    store.kill()
    lost = DefaultMessageStore.crash_machine(str(tmp_path))
    assert sum(lost.values()) > 0
    store, report = open_store(tmp_path, clock)
    assert report.recovery.process_offset == flushed
    assert [m.keys for m in read_queue(store, "TopicTest", 0)] == [f"key-{i}" for i in range(10)]
    # The queue offsets restart where the survivors end.
    assert put_n(store, clock, 1, start=99)[0].append_message_result.logics_offset == 10
    store.shutdown()


def test_sync_flush_group_commit_and_durability(tmp_path):
    clock = ManualClock()
    store, _ = open_store(tmp_path, clock, flushDiskType=_sync())
    futures = []
    for i in range(8):
        clock.advance(1)
        futures.append(store.async_put_message(make_message(clock, i)))
    assert not any(f.done() for f in futures)  # acknowledged only after the flush
    store.flush_commit_log_service.do_commit()
    assert store.flush_commit_log_service.flush_count == 1  # one flush served all eight: group commit
    assert all(f.result().put_message_status is PutMessageStatus.PUT_OK for f in futures)
    pending = store.async_put_message(make_message(clock, 8))  # never acknowledged
    store.kill()
    DefaultMessageStore.crash_machine(str(tmp_path))
    assert not pending.done()
    store, _ = open_store(tmp_path, clock, flushDiskType=_sync())
    assert [m.keys for m in read_queue(store, "TopicTest", 0)] == [f"key-{i}" for i in range(8)]
    store.shutdown()


def test_sync_flush_timeout(tmp_path):
    clock = ManualClock()
    store, _ = open_store(tmp_path, clock, flushDiskType=_sync(), syncFlushTimeout=5000)
    f = store.async_put_message(make_message(clock, 0))
    clock.advance(5001)  # the flush service was frozen past the deadline
    store.flush_commit_log_service.expire()
    assert f.result().put_message_status is PutMessageStatus.FLUSH_DISK_TIMEOUT
    assert f.result().is_ok()  # stored, only the wait failed (RocketMQ: FLUSH_DISK_TIMEOUT, code 10)
    store.shutdown()


def test_corrupt_body_is_cut_and_never_served(tmp_path):
    clock = ManualClock()
    store, _ = open_store(tmp_path, clock)
    results = put_n(store, clock, 6)
    store.shutdown()
    victim = results[3].append_message_result
    path = tmp_path / "commitlog" / ("0" * 20)
    data = bytearray(path.read_bytes())
    data[victim.wrote_offset + victim.wrote_bytes - 80] ^= 0xFF  # a body byte: only the CRC notices
    path.write_bytes(bytes(data))
    store, report = open_store(tmp_path, clock)
    assert report.recovery.process_offset == victim.wrote_offset
    assert "CRC" in report.recovery.stop_reason or "crc" in report.recovery.stop_reason
    assert [m.keys for m in read_queue(store, "TopicTest", 0)] == ["key-0", "key-1", "key-2"]
    store.shutdown()


def test_consume_queue_is_truncated_to_the_commitlog(tmp_path):
    clock = ManualClock()
    store, _ = open_store(tmp_path, clock)
    put_n(store, clock, 8)
    store.commit_log.flush_all()
    flushed = store.commit_log.flushed_where()
    put_n(store, clock, 4, start=8)
    store.reput_message_service.do_reput()
    store.flush_consume_queue_service.do_flush(thorough=True)  # the queue is durable past the commitlog
    store.kill()
    DefaultMessageStore.crash_machine(str(tmp_path))
    store, report = open_store(tmp_path, clock)
    assert report.recovery.process_offset == flushed
    assert report.consume_queue_truncations == {"TopicTest-0": 4}
    assert len(read_queue(store, "TopicTest", 0)) == 8
    store.shutdown()


def test_slave_style_append_reproduces_the_bytes(tmp_path):
    clock = ManualClock()
    master, _ = open_store(tmp_path / "m", clock)
    put_n(master, clock, 30)
    slave, _ = open_store(tmp_path / "s", clock)
    offset = 0
    while offset < master.get_max_phy_offset():
        data = master.commit_log.get_data(offset)[:4096]  # HA-sized batches, never spanning files
        assert slave.append_to_commit_log(offset, data)
        offset += len(data)
    slave.reput_message_service.do_reput()
    assert [m.keys for m in read_queue(slave, "TopicTest", 0)] == [f"key-{i}" for i in range(30)]
    for name in os.listdir(tmp_path / "m" / "commitlog"):
        assert (tmp_path / "m" / "commitlog" / name).read_bytes() == (tmp_path / "s" / "commitlog" / name).read_bytes()
    assert not slave.append_to_commit_log(0, b"x")  # not at the end: refused
    master.shutdown()
    slave.shutdown()


def test_store_directory_is_locked(tmp_path):
    clock = ManualClock()
    store, _ = open_store(tmp_path, clock)
    with pytest.raises(StoreInUseError, match="in use"):
        DefaultMessageStore(store_config(tmp_path), clock=clock)
    store.shutdown()


def test_wrong_mapped_file_size_is_a_clear_error(tmp_path):
    clock = ManualClock()
    store, _ = open_store(tmp_path, clock)
    put_n(store, clock, 2)
    store.shutdown()
    with pytest.raises(StoreFileError, match="differs from the configured mapped file size"):
        open_store(tmp_path, clock, mappedFileSizeCommitLog=SMALL_COMMITLOG * 2)


@given(st.integers(-2**63, 2**63 - 1), st.integers(-2**31, 2**31 - 1), st.integers(-2**63, 2**63 - 1))
def test_consume_queue_unit_round_trip(offset, size, tags_code):
    unit = encode_cq_unit(offset, size, tags_code)
    assert len(unit) == 20
    assert decode_cq_unit(unit) == (offset, size, tags_code)
    assert unit == offset.to_bytes(8, "big", signed=True) + size.to_bytes(4, "big", signed=True) + \
        tags_code.to_bytes(8, "big", signed=True)


def _sync():
    return type(MessageStoreConfig().flushDiskType)["SYNC_FLUSH"]


# -- crash points, property-based ------------------------------------------------------------

OPS = st.lists(st.one_of(
    st.tuples(st.just("put"), st.integers(0, 2), st.integers(0, 3000)),
    st.tuples(st.just("flush"), st.just(0), st.just(0)),
    st.tuples(st.just("commit"), st.just(0), st.just(0)),
    st.tuples(st.just("reput"), st.just(0), st.just(0)),
    st.tuples(st.just("cqflush"), st.just(0), st.just(0)),
), min_size=1, max_size=60)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(ops=OPS, sync=st.booleans(), crash=st.sampled_from(["process", "machine", "torn"]),
       torn=st.one_of(st.floats(0, 1), st.integers(1, 40)))
# Found by hypothesis: the torn write-back kept a consume-queue unit whose size lost its low byte.
@example(ops=[("put", 1, 0), ("put", 1, 0), ("put", 1, 114), ("put", 0, 0), ("reput", 0, 0)],
         sync=False, crash="torn", torn=0.859375)
# A torn write that loses only the final "\x02" of the properties (no body CRC covers it).
@example(ops=[("put", 0, 0)], sync=False, crash="torn", torn=1)
def test_recovery_at_random_crash_points(tmp_path_factory, ops, sync, crash, torn):
    root = tmp_path_factory.mktemp("crash")
    clock = ManualClock()
    overrides = {"flushDiskType": _sync()} if sync else {}
    store, _ = open_store(root, clock, **overrides)
    written: dict[int, list[tuple]] = {0: [], 1: [], 2: []}
    acked: dict[int, list[tuple]] = {0: [], 1: [], 2: []}
    futures = []
    for i, (op, qid, size) in enumerate(ops):
        clock.advance(7)
        if op == "put":
            m = make_message(clock, i, queue_id=qid, body_size=size)
            f = store.async_put_message(m)
            written[qid].append(_identity(m))
            futures.append((qid, _identity(m), f))
        elif op == "flush":
            store.commit_log.flush(4)
        elif op == "commit" and sync:
            store.flush_commit_log_service.do_commit()
        elif op == "reput":
            store.reput_message_service.do_reput()
        elif op == "cqflush":
            store.flush_consume_queue_service.do_flush()
    for qid, key, f in futures:
        if f.done() and f.result().put_message_status is PutMessageStatus.PUT_OK:
            acked[qid].append(key)
    store.kill()
    if crash != "process":
        # A float keeps that fraction of the unflushed bytes; an int k keeps all but the last k,
        # which tears the very end of a message (its properties).
        def torn_bytes(rel, n):
            return int(n * torn) if isinstance(torn, float) else max(0, n - torn)
        DefaultMessageStore.crash_machine(str(root), torn_bytes if crash == "torn" else None)
    store, _ = open_store(root, clock, **overrides)
    for qid in range(3):
        survivors = [_identity(m) for m in read_queue(store, "TopicTest", qid)]  # decode() checks every CRC
        # Whatever survives is a prefix of what was written, in order, with no gap, no partial or
        # corrupt message (every field that is not covered by the body CRC is compared too).
        assert survivors == written[qid][:len(survivors)]
        if crash == "process":
            assert survivors == written[qid]
        if sync:
            assert survivors[:len(acked[qid])] == acked[qid]
    # The recovered store keeps working.
    clock.advance(1)
    assert store.put_message(make_message(clock, 10_000)).is_ok()
    store.shutdown()


def _identity(m) -> tuple:
    return (m.topic, m.queue_id, m.body, m.properties, m.born_timestamp, m.born_host)


@pytest.mark.parametrize("where", ["tmp", "shm"])
def test_truncate_to_zeroes_every_byte_past_the_cut_also_beyond_a_hole(tmp_path, where):
    # A file written at its start and, by an older incarnation, far past a hole: the cut must
    # zero both (the data regions are found with SEEK_DATA, the rest of the file is holes).
    import shutil
    import tempfile

    from rmqlab.store.mapped_file import MappedFile

    if where == "shm" and not os.path.isdir("/dev/shm"):
        pytest.skip("no /dev/shm here")
    base = tempfile.mkdtemp(dir="/dev/shm") if where == "shm" else str(tmp_path)
    name = os.path.join(base, "0" * 20)
    size = 4 << 20
    try:
        fd = os.open(name, os.O_RDWR | os.O_CREAT, 0o644)
        os.ftruncate(fd, size)
        os.pwrite(fd, b"\x03" * 777, 3 << 20)  # a stale tail beyond a hole
        os.close(fd)
        f = MappedFile(name, size)
        f.append(b"\x01" * 5000)
        f.append(b"\x02" * 3000)
        f.truncate_to(5000)
        f.close()
        with open(name, "rb") as fh:
            data = fh.read()
        assert data[:5000] == b"\x01" * 5000
        assert data[5000:].count(0) == size - 5000
    finally:
        if where == "shm":
            shutil.rmtree(base, ignore_errors=True)
