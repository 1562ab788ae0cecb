"""Crash-point campaign: the store crashed after its n-th file operation, thousands of times.

    PYTHONPATH=. .venv/bin/python bench/bench_store_crash_points.py [--seeds 0:320] [--points 4]

For each seed and each mode (SYNC_FLUSH / ASYNC_FLUSH x process / machine crash): one uncrashed
run of the seed's workload (about 200 steps of puts to three queues, dispatch, commitlog and
consume-queue flushes on a manual clock; 16 KiB commitlog files, 10- or 50-unit consume-queue
files) counts its file operations N; then `--points` crash points are drawn from 1..N, a third of
them crashed again during the recovery (process or machine). Every crash point is checked as in
tests/test_store_crash_points.py: the store loads, every acknowledged (SYNC_FLUSH), written
(ASYNC_FLUSH, process crash) or flushed (ASYNC_FLUSH, machine crash) message is served intact
with contiguous queue offsets, nothing that was not written is served, and a new put gets the
next queue offset. Runs on /dev/shm when it exists (the crash model is the store's PageCache, not
the disk). Prints crash points, failures by kind, and crash points per second.
"""

from __future__ import annotations

import argparse
import collections
import logging
import os
import re
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from tests.store_helpers import CRASH_MODES, crash_point_campaign, crash_point_dir  # noqa: E402


def _kind(failure) -> str:
    """The failure without its run, temporary directory and numbers: failures grouped by kind."""
    text = str(failure).split("): ", 1)[-1]
    text = re.sub(r"\S*/s/", "", text)
    text = re.sub(r"(TopicA|TopicB)", "Topic", text)
    return re.sub(r"\d+", "N", text)[:110]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", default="0:320", help="a range a:b of workload seeds")
    ap.add_argument("--points", type=int, default=4, help="crash points per workload and mode")
    args = ap.parse_args()
    a, b = (int(x) for x in args.seeds.split(":"))
    logging.getLogger("rmqlab.store").setLevel(logging.CRITICAL)  # recovery logs every cut it makes
    failures: list = []
    per_mode: collections.Counter = collections.Counter()
    again = 0
    start = time.perf_counter()
    for run in crash_point_campaign(range(a, b), points_per_workload=args.points, base_dir=crash_point_dir(),
                                    failures=failures):
        per_mode[f"{'SYNC' if run.sync else 'ASYNC'}_FLUSH/{run.crash}"] += 1
        again += bool(run.recovery_crash_at)
    elapsed = time.perf_counter() - start
    total = sum(per_mode.values())
    print(f"python {sys.version.split()[0]}, seeds {a}:{b}, {args.points} crash points per workload and mode, "
          f"dir {crash_point_dir() or 'default tmp'}")
    for mode, n in sorted(per_mode.items()):
        print(f"  {mode:<22} {n:6d} crash points")
    print(f"crash points: {total} ({again} also crashed during recovery), failures: {len(failures)}")
    print(f"time: {elapsed:.1f} s, {total / elapsed:.1f} crash points/s "
          f"(plus one uncrashed run per workload and mode: {len(CRASH_MODES) * (b - a)})")
    kinds = collections.Counter(_kind(f) for f in failures)
    for kind, n in kinds.most_common():
        print(f"  FAIL x{n}: {kind}")
    for f in failures[:5]:
        print(f"  e.g. {f}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
