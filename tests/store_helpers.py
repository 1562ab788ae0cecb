"""Helpers shared by the store tests: a small-file store on a manual clock, and message factories."""

from __future__ import annotations

import os
import random
import tempfile

from rmqlab.common.manual_clock import ManualClock
from rmqlab.common.message.message import MessageExtBrokerInner
from rmqlab.config import MessageStoreConfig
from rmqlab.store import DefaultMessageStore

SMALL_COMMITLOG = 16 * 1024  # 4 OS pages: rolling happens every dozen or so 1 KiB messages
SMALL_CQ = 20 * 50


def store_config(root, **overrides) -> MessageStoreConfig:
    cfg = MessageStoreConfig(storePathRootDir=str(root), mappedFileSizeCommitLog=SMALL_COMMITLOG,
                             mappedFileSizeConsumeQueue=SMALL_CQ)
    for k, v in overrides.items():
        setattr(cfg, k, v)
    return cfg


def open_store(root, clock: ManualClock, **overrides) -> tuple[DefaultMessageStore, object]:
    store = DefaultMessageStore(store_config(root, **overrides), clock=clock)
    report = store.load()
    return store, report


def make_message(clock, i: int, *, topic: str = "TopicTest", queue_id: int = 0, body_size: int = 1000,
                 tags: str = "TagA") -> MessageExtBrokerInner:
    body = (f"message-{i:06d}-".encode() * (body_size // 15 + 1))[:body_size]
    m = MessageExtBrokerInner(topic=topic, body=body)
    m.tags = tags
    m.keys = f"key-{i}"
    m.put_property("UNIQ_KEY", f"UNIQ{i:08d}")
    m.queue_id = queue_id
    m.born_timestamp = clock()
    m.born_host = ("127.0.0.1", 50000)
    return m


def read_queue(store, topic: str, queue_id: int) -> list:
    """Every message readable from a queue, decoded (CRC-checked), in queue order."""
    out, offset = [], store.get_min_offset_in_queue(topic, queue_id)
    while True:
        r = store.get_message("g", topic, queue_id, offset, 32)
        if not r.message_buffers:
            return out
        out.extend(r.messages())
        offset = r.next_begin_offset


# -- crash-point campaigns (tests/test_store_crash_points.py, bench/bench_store_crash_points.py) --

def crash_point_config(seed: int) -> dict:
    """Store settings of one campaign seed: small files (16 KiB commitlog; consume-queue files of
    10 or 50 units, so that queues span many files) and flush intervals that either cross several
    checkpoints in a workload or (RocketMQ's defaults: 10 s / 60 s) none at all."""
    rng = random.Random(seed * 7919)
    return dict(mappedFileSizeConsumeQueue=20 * rng.choice([10, 50]),
                flushCommitLogThoroughInterval=rng.choice([1_000, 10_000]),
                flushConsumeQueueThoroughInterval=rng.choice([2_000, 60_000]),
                flushIntervalConsumeQueue=rng.choice([300, 1_000]))


class CrashPointFailure(AssertionError):
    pass


def _sync_flush():
    return type(MessageStoreConfig().flushDiskType)["SYNC_FLUSH"]


def _identity(m) -> tuple:
    return (m.topic, m.queue_id, m.body, m.properties, m.born_timestamp, m.born_host)


class CrashPointRun:
    """One crash point: a seeded workload on a small-file store, crashed after its n-th file
    operation (0: never), then optionally crashed again during the recovery, then verified.

    crash: "process" (the page cache survives) or "machine" (only flushed bytes survive, plus a
    seeded torn prefix of the unflushed ones).
    """

    QUEUES = [("TopicA", 0), ("TopicA", 1), ("TopicB", 0)]

    def __init__(self, root, *, seed: int, sync: bool, crash: str, steps: int = 200,
                 crash_at: int = 0, recovery_crash_at: int = 0, recovery_crash: str | None = None):
        self.root = str(root)
        self.seed, self.sync, self.crash, self.steps = seed, sync, crash, steps
        self.crash_at, self.recovery_crash_at = crash_at, recovery_crash_at
        self.recovery_crash = recovery_crash or crash
        self.overrides = crash_point_config(seed)
        if sync:
            self.overrides["flushDiskType"] = _sync_flush()
        self.written: dict[tuple, list[tuple]] = {q: [] for q in self.QUEUES}
        self.required: dict[tuple, int] = {q: 0 for q in self.QUEUES}  # must survive: the first n
        self.ops = 0  # file operations the workload performed (up to the crash)
        self.crashed = False

    def _torn(self, rng):
        return lambda rel, n: rng.choice([0, 0, n, rng.randrange(0, n + 1)])

    def _workload(self, store, clock, rng) -> None:
        ends: list[tuple[tuple, int, int]] = []  # (queue, index in written, commitlog end) of ASYNC puts
        # How often the flush services run against the puts: some seeds flush rarely, so that
        # consume queues run many files ahead of their last flush.
        cq_flush = rng.choice([0.13, 0.03, 0.01])
        for i in range(self.steps):
            clock.advance(rng.randrange(20, 120))
            r = rng.random()
            if r < 0.55:
                q = rng.choice(self.QUEUES)
                m = make_message(clock, i, topic=q[0], queue_id=q[1], body_size=rng.choice([20, 60, 200, 900, 1500]))
                self.written[q].append(_identity(m))  # in flight: may or may not survive
                result = store.put_message(m)
                assert result.is_ok(), result
                if self.sync or self.crash == "process":
                    self.required[q] = len(self.written[q])
                else:
                    ends.append((q, len(self.written[q]), result.append_message_result.next_offset))
            elif r < 0.75:
                store.reput_message_service.do_reput(rng.randrange(1, 8))
            elif r < 0.87:
                store.flush_commit_log_service.do_flush() if not self.sync else store.flush_commit_log_service.do_commit()
            elif r < 0.87 + cq_flush:
                store.flush_consume_queue_service.do_flush()
            if not self.sync and self.crash == "machine":
                flushed = store.commit_log.flushed_where()
                while ends and ends[0][2] <= flushed:
                    q, n, _ = ends.pop(0)
                    self.required[q] = max(self.required[q], n)
        if rng.random() < 0.5:
            # Half the workloads end with a clean shutdown, so crash points fall in it too, and a
            # crash after it leaves a store whose next start recovers normally.
            store.shutdown()

    def _after_crash(self, store, kind: str, rng) -> None:
        store.kill()
        if kind == "machine":
            DefaultMessageStore.crash_machine(self.root, self._torn(rng))

    def run(self) -> CrashPointRun:
        from rmqlab.store.crash_points import CrashPoints, SimulatedCrash, armed

        rng = random.Random(self.seed)
        clock = ManualClock()
        cfg = store_config(self.root, **self.overrides)
        store = DefaultMessageStore(cfg, clock=clock)
        cp = CrashPoints(self.crash_at or None, self.seed)
        try:
            with armed(cp):
                store.load()
                self._workload(store, clock, rng)
        except SimulatedCrash:
            self.crashed = True
        self.ops = cp.count
        if not self.crashed:
            return self  # the crash point is beyond this workload
        self._after_crash(store, self.crash, rng)
        if self.recovery_crash_at:
            store = DefaultMessageStore(store_config(self.root, **self.overrides), clock=clock)
            try:
                with armed(CrashPoints(self.recovery_crash_at, self.seed + 1)):
                    store.load()
                    clock.advance(1)
            except SimulatedCrash:
                pass
            except Exception as e:
                raise CrashPointFailure(f"{self}: the store does not load: {type(e).__name__}: {e}") from e
            self._after_crash(store, self.recovery_crash, rng)
        self.verify(clock)
        return self

    def verify(self, clock) -> None:
        try:
            store, report = open_store(self.root, clock, **self.overrides)
        except Exception as e:
            raise CrashPointFailure(f"{self}: the store does not load: {type(e).__name__}: {e}") from e
        try:
            for q in self.QUEUES:
                try:
                    served = [_identity(m) for m in read_queue(store, *q)]
                except Exception as e:  # e.g. an empty or torn "message" that does not decode
                    raise CrashPointFailure(f"{self}: {q} serves an undecodable message: {type(e).__name__}: {e}") from e
                written, need = self.written[q], self.required[q]
                lo, hi = store.get_min_offset_in_queue(*q), store.get_max_offset_in_queue(*q)
                if lo != 0:
                    raise CrashPointFailure(f"{self}: {q} min offset {lo}")
                if served != written[:len(served)]:
                    bad = next(i for i, (a, b) in enumerate(zip(served, written)) if a != b) \
                        if len(served) <= len(written) else len(written)
                    raise CrashPointFailure(f"{self}: {q} serves a message that was not written at offset {bad}")
                if len(served) < need:
                    raise CrashPointFailure(f"{self}: {q} serves {len(served)} messages, {need} must survive "
                                            f"(max offset {hi})")
                if hi != len(served):
                    raise CrashPointFailure(f"{self}: {q} max offset {hi} but {len(served)} readable")
            # The recovered store keeps working: a new message gets the next queue offset.
            clock.advance(1)
            q = self.QUEUES[0]
            result = store.put_message(make_message(clock, 10**6, topic=q[0], queue_id=q[1]))
            if not result.is_ok() or result.append_message_result.logics_offset != store.get_max_offset_in_queue(*q):
                raise CrashPointFailure(f"{self}: put after recovery: {result}")
        finally:
            store.shutdown()

    def __str__(self) -> str:
        return (f"CrashPointRun(seed={self.seed}, sync={self.sync}, crash={self.crash!r}, crash_at={self.crash_at}, "
                f"recovery_crash_at={self.recovery_crash_at}, recovery_crash={self.recovery_crash!r})")


CRASH_MODES = [(sync, crash) for sync in (True, False) for crash in ("process", "machine")]


def crash_point_dir() -> str | None:
    """A tmpfs for campaigns when the machine has one: msync and rename cost microseconds there,
    and the crash model does not depend on the real disk (page_cache)."""
    return "/dev/shm" if os.path.isdir("/dev/shm") and os.access("/dev/shm", os.W_OK) else None


def crash_point_campaign(seeds, *, points_per_workload: int, modes=CRASH_MODES, steps: int = 200,
                         base_dir: str | None = None, failures: list | None = None):
    """Yield a finished CrashPointRun per crash point. A bad one raises CrashPointFailure, or, with
    a `failures` list, is appended to it (and yielded too).

    For each seed and mode: one uncrashed run counts the workload's file operations N; then
    `points_per_workload` crash points are drawn (seeded) from 1..N, a third of them with a second
    crash during the recovery, process or machine.
    """
    for seed in seeds:
        for sync, crash in modes:
            with tempfile.TemporaryDirectory(dir=base_dir) as d:
                total = CrashPointRun(os.path.join(d, "s"), seed=seed, sync=sync, crash=crash, steps=steps).run().ops
            rng = random.Random(f"{seed}-{sync}-{crash}")
            for _ in range(points_per_workload):
                crash_at = rng.randrange(1, total + 1)
                again = rng.random() < 1 / 3
                with tempfile.TemporaryDirectory(dir=base_dir) as d:
                    run = CrashPointRun(os.path.join(d, "s"), seed=seed, sync=sync, crash=crash, steps=steps,
                                        crash_at=crash_at, recovery_crash_at=rng.randrange(1, 40) if again else 0,
                                        recovery_crash=rng.choice(["process", "machine"]))
                    try:
                        run.run()
                    except CrashPointFailure as e:
                        if failures is None:
                            raise
                        failures.append(e)
                    yield run


def drive(work) -> None:
    """Run a clean service's pass coroutine to its end (a store without a node never sleeps, so it
    never suspends)."""
    if work is None:
        return
    try:
        work.send(None)
    except StopIteration:
        return
    raise AssertionError("a pass of a store without a node suspended")
