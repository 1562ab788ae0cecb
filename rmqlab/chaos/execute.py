"""Running a campaign's tasks (a case and a seed each, independent and seeded) in a pool of worker
processes on this machine, and summarising the rows they return. A Spark job runs the same tasks
with `rmqlab.chaos.runner.run_task` in mapPartitions.

    run_rows, fault_rows = run_tasks(campaign.select(None), seeds=range(3), workers=2)
    print(summary(run_rows, fault_rows))
"""

from __future__ import annotations

import concurrent.futures
import multiprocessing
import statistics
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from rmqlab.chaos.case import Case
from rmqlab.chaos.runner import run_task


def parse_seeds(text: str) -> list[int]:
    """"0-9" (inclusive), "1,4,7", "5" or a mix: "0-2,9"."""
    seeds: list[int] = []
    for part in text.split(","):
        part = part.strip()
        if not part:
            continue
        lo, dash, hi = part.partition("-")
        try:
            seeds += list(range(int(lo), int(hi) + 1)) if dash else [int(lo)]
        except ValueError:
            raise ValueError(f"seeds: expected e.g. 0-9 or 1,4,7, not {text!r}") from None
    if not seeds:
        raise ValueError(f"seeds: none in {text!r}")
    return seeds


def _task(args: tuple[dict[str, Any], int]):
    return run_task(*args)


def run_tasks(cases: Sequence[Case], seeds: Iterable[int], *, workers: int = 2,
              progress: Callable[[dict[str, Any]], None] | None = None) -> tuple[list[dict], list[dict]]:
    """Every case with every seed; `workers` processes (1: in this process). Returns the run rows
    (in task order) and the fault rows; `progress` gets each run row as it comes."""
    tasks = [(case.to_dict(), seed) for case in cases for seed in seeds]
    run_rows: list[dict] = []
    fault_rows: list[dict] = []

    def take(result) -> None:
        run_row, faults = result
        run_rows.append(run_row)
        fault_rows.extend(faults)
        if progress:
            progress(run_row)

    if workers <= 1:
        for t in tasks:
            take(_task(t))
    else:
        # fork: the workers inherit the imported modules (and PYTHONPATH) instead of importing again.
        with concurrent.futures.ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("fork")) as pool:
            for result in pool.map(_task, tasks):
                take(result)
    return run_rows, fault_rows


def _ms(v: float | None) -> str:
    return "-" if v is None else f"{v / 1000:.1f}"


def summary(run_rows: list[dict], fault_rows: list[dict]) -> str:
    """One line per case: runs, invalid runs, lost / unordered messages, injections, RTO to an
    acknowledged send (median and max, s; faults never recovered counted apart), wall s per injection."""
    header = f"{'case':<58} {'runs':>4} {'bad':>3} {'lost':>5} {'unord':>5} {'inj':>4} {'rto p50':>7} {'rto max':>7} {'norec':>5} {'s/inj':>6}"
    lines = [header, "-" * len(header)]
    by_case: dict[str, list[dict]] = {}
    for r in run_rows:
        by_case.setdefault(r["case"], []).append(r)
    faults: dict[str, list[dict]] = {}
    for f in fault_rows:
        faults.setdefault(f["case"], []).append(f)
    for name, runs in by_case.items():
        rtos = sorted(f["rto_send_ms"] for f in faults.get(name, []) if f["rto_send_ms"] is not None)
        norec = sum(1 for f in faults.get(name, []) if f["rto_send_ms"] is None)
        inj = sum(r["injections"] or 0 for r in runs)
        wall = sum(r["wall_s"] for r in runs)
        lines.append(f"{name:<58} {len(runs):>4} {sum(not r['valid'] for r in runs):>3} "
                     f"{sum(r['lost'] or 0 for r in runs):>5} {sum(r['unordered'] or 0 for r in runs):>5} {inj:>4} "
                     f"{_ms(statistics.median(rtos) if rtos else None):>7} {_ms(rtos[-1] if rtos else None):>7} "
                     f"{norec:>5} {(wall / inj if inj else float('nan')):>6.2f}")
    for r in run_rows:
        if not r["valid"]:
            lines.append(f"INVALID {r['case']} seed {r['seed']}: {r['error'] or r['first_violation']}\n  replay: {r['replay']}")
    return "\n".join(lines)
