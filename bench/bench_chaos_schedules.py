"""The chaos test's schedules (tests/test_controller_chaos.py: 14 s of faults, 6 s quiet, unclean
election off), timed: wall and CPU seconds per schedule, with their trace hashes.

    .venv/bin/python bench/bench_chaos_schedules.py [--seeds 0-19] [--workers 2]

Seeds run as the test runs them: a pool of `--workers` forked processes (at most the CPUs this
process may use). Printed: each seed's wall and CPU seconds and trace hash (so two versions of the
simulator can be compared: same hashes, same runs), then the total wall time and the CPU seconds
per schedule.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import logging
import multiprocessing
import resource
import statistics
import time

from rmqlab.checker import check_all, run_chaos
from rmqlab.common.cpu_quota import available_processors
from rmqlab.trace import trace_hash

SCHEDULE = {"fault_window_ms": 14_000, "quiet_ms": 6_000}
CLEAN = {"enableElectUncleanMaster": False}


def _one(seed: int) -> tuple[int, float, float, str, bool]:
    logging.disable(logging.CRITICAL)
    wall, cpu = time.monotonic(), time.process_time()
    run = run_chaos(seed, schedule_options=SCHEDULE, controller_overrides=CLEAN)
    try:
        valid = all(r.valid for r in check_all(run).values())
    finally:
        run.cleanup()
    return seed, time.monotonic() - wall, time.process_time() - cpu, trace_hash(run.events), valid


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seeds", default="0-19", help="a range a-b (inclusive) or a comma-separated list")
    ap.add_argument("--workers", type=int, default=2)
    a = ap.parse_args()
    seeds = (list(range(int(a.seeds.split("-")[0]), int(a.seeds.split("-")[1]) + 1)) if "-" in a.seeds
             else [int(s) for s in a.seeds.split(",")])
    workers = min(a.workers, available_processors())
    t0 = time.monotonic()
    with concurrent.futures.ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("fork")) as pool:
        results = list(pool.map(_one, seeds))
    wall = time.monotonic() - t0
    for seed, w, c, h, valid in results:
        print(f"seed {seed:3d}: {w:6.2f} s wall {c:6.2f} s CPU {h[:16]}{'' if valid else ' INVALID'}")
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    print(f"{len(seeds)} schedules, {workers} workers: {wall:.1f} s wall; per schedule: median "
          f"{statistics.median(r[1] for r in results):.2f} s wall, {statistics.median(r[2] for r in results):.2f} s CPU; "
          f"workers' CPU {children.ru_utime + children.ru_stime:.1f} s")


if __name__ == "__main__":
    main()
