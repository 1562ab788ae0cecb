"""How long one commitlog-expiry pass takes: N files older than fileReservedTime, deleted at deleteWhen.

    PYTHONPATH=. .venv/bin/python bench/bench_store_aging.py [--files 10 100] [--file-mib 1 16]

For each (files, file size): a store on a manual clock is filled with N+1 commitlog files of 4 KB
messages (dispatched, flushed), the clock moves two hours on, and one CleanCommitLogService pass
(deleteFileBatchMax = N, fileReservedTime = 1 h, deleteWhen = the current hour) deletes every file
but the last; then one CleanConsumeQueueService pass. Wall time of each pass, measured with
perf_counter around the pass. The store has no node, so RocketMQ's deleteCommitLogFilesInterval
(100 ms between two deletions, on the node's clock) is not part of the time: on a broker it adds
(N - 1) x 100 ms of node time (virtual on the simulator) to the pass.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from rmqlab.common.manual_clock import ManualClock  # noqa: E402
from tests.store_helpers import drive, make_message, open_store  # noqa: E402

HOUR = 3600_000


def measure(files: int, file_mib: int) -> tuple[int, float, float]:
    size = file_mib << 20
    with tempfile.TemporaryDirectory(prefix="rmqlab-bench-aging-") as root:
        clock = ManualClock()
        store, _ = open_store(root, clock, mappedFileSizeCommitLog=size, mappedFileSizeConsumeQueue=20 * 300000,
                              rmqlabDiskCapacityBytes=1 << 50, fileReservedTime=1, deleteFileBatchMax=files)
        i = 0
        while len(store.commit_log.mapped_file_queue.mapped_files) <= files:
            store.put_message(make_message(clock, i, body_size=4000))
            i += 1
        store.reput_message_service.do_reput()
        store.commit_log.flush_all()
        store.flush_consume_queue_service.do_flush(thorough=True)
        clock.advance(2 * HOUR)
        store.config.deleteWhen = f"{time.localtime(clock() / 1000).tm_hour:02d}"
        before = len(store.commit_log.mapped_file_queue.mapped_files)
        t0 = time.perf_counter()
        drive(store.clean_commit_log_service.run())
        t1 = time.perf_counter()
        drive(store.clean_consume_queue_service.run())
        t2 = time.perf_counter()
        deleted = before - len(store.commit_log.mapped_file_queue.mapped_files)
        store.shutdown()
        return deleted, t1 - t0, t2 - t1


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--files", type=int, nargs="+", default=[10, 100])
    parser.add_argument("--file-mib", type=int, nargs="+", default=[1, 16])
    args = parser.parse_args()
    for mib in args.file_mib:
        for n in args.files:
            deleted, cl, cq = measure(n, mib)
            print(f"{deleted:4d} files of {mib:3d} MiB: commitlog pass {cl * 1000:8.1f} ms "
                  f"({cl * 1000 / max(deleted, 1):5.1f} ms a file), consume-queue pass {cq * 1000:6.1f} ms")


if __name__ == "__main__":
    main()
