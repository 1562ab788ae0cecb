"""Replaying the workload catalog on the simulator: wall time per workload, for one or more source
trees measured in the same invocation.

    .venv/bin/python bench/bench_replay_catalog.py [--trees OLD,NEW] [--rounds 3] [--only a,b] [--json FILE]

Each tree (a directory holding `rmqlab/`, `conf/` and `datasets/workloads/`; default: this
repository) runs in its own worker process (`python bench_replay_catalog.py --worker TREE`, with
only TREE on the import path). A worker replays one workload first to warm up (imports, caches;
not counted), then every simulated workload of TREE's datasets/workloads in name order, in
process, as `rmqlab replay` does (rmqlab.workload.runner.run_workload), and checks each outcome
against the one recorded in that tree's Parquet file. Rounds alternate the trees (round 1: OLD
then NEW, round 2: OLD then NEW, ...), so the machine's load falls on both alike.

Printed per workload: the median wall seconds of each tree, the virtual seconds, the trace events
and the ratio first tree / last tree; then the median of those ratios over the catalog, and per
tree the virtual seconds per wall second and trace events per wall second (summed over the
catalog). A workload whose outcome differs from its recording is marked DIFF and makes the exit
status 1.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def worker(tree: str, only: list[str]) -> None:
    """Runs inside the worker process: TREE's rmqlab, one JSON line per workload on stdout."""
    import gc
    import time

    from rmqlab.workload.parquet_format import load_workload
    from rmqlab.workload.runner import run_workload

    directory = os.path.join(tree, "datasets", "workloads")
    files = sorted(f for f in os.listdir(directory) if f.endswith(".parquet") and not f.endswith(".real.parquet"))
    if only:
        files = [f for f in files if f[:-len(".parquet")] in only]
    recorded = {f: load_workload(os.path.join(directory, f)) for f in files}
    run_workload(recorded[files[0]].workload)  # warm-up
    for f in files:
        rec = recorded[f]
        gc.collect()
        wall, cpu = time.perf_counter(), time.process_time()
        run = run_workload(rec.workload)
        wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
        print(json.dumps({"workload": rec.workload.name, "wall_s": wall, "cpu_s": cpu,
                          "virtual_s": run.virtual_ms / 1000.0, "events": len(run.events),
                          "same": run.outcome == rec.outcome}), flush=True)


def run_tree(tree: str, only: list[str]) -> dict[str, dict]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("RMQLAB_")}
    env["PYTHONPATH"] = tree
    argv = [sys.executable, os.path.abspath(__file__), "--worker", tree]
    if only:
        argv += ["--only", ",".join(only)]
    out = subprocess.run(argv, env=env, cwd=tree, check=True, capture_output=True, text=True).stdout
    rows = [json.loads(line) for line in out.splitlines() if line.startswith("{")]
    return {r["workload"]: r for r in rows}


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--trees", default=ROOT, help="comma-separated source trees (default: this repository)")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--only", default="", help="comma-separated workload names (default: the whole catalog)")
    p.add_argument("--json", help="write every measurement here")
    p.add_argument("--worker", help=argparse.SUPPRESS)
    args = p.parse_args()
    only = [w for w in args.only.split(",") if w]
    if args.worker:
        worker(args.worker, only)
        return 0
    trees = [os.path.abspath(t) for t in args.trees.split(",")]
    runs: dict[str, list[dict[str, dict]]] = {t: [] for t in trees}
    for r in range(args.rounds):
        for t in trees:
            runs[t].append(run_tree(t, only))
            print(f"round {r + 1}/{args.rounds} {t}: {sum(w['wall_s'] for w in runs[t][-1].values()):.1f} s",
                  file=sys.stderr, flush=True)
    names = sorted(set.intersection(*(set(rs[0]) for rs in runs.values())))
    med = {t: {n: statistics.median(r[n]["wall_s"] for r in rs) for n in names} for t, rs in runs.items()}
    first, last = trees[0], trees[-1]
    print(f"python {sys.version.split()[0]}, {len(names)} workloads x {args.rounds} rounds (median wall s per workload)")
    head = "".join(f"{os.path.basename(t) or t:>10}" for t in trees)
    print(f"{'workload':40}{head}{'virtual s':>10}{'events':>8}{'ratio':>8}")
    ratios, status = [], 0
    for n in names:
        ratio = med[first][n] / med[last][n]
        ratios.append(ratio)
        rows = [r[n] for rs in runs.values() for r in rs]
        same = all(row["same"] for row in rows)
        status |= not same
        cells = "".join(f"{med[t][n]:10.2f}" for t in trees)
        print(f"{n:40}{cells}{rows[-1]['virtual_s']:10.1f}{rows[-1]['events']:8d}{ratio:7.1f}x"
              f"{'' if same else '  DIFF'}")
    print(f"median ratio {os.path.basename(first)} / {os.path.basename(last)}: {statistics.median(ratios):.2f}x "
          f"(min {min(ratios):.2f}x, max {max(ratios):.2f}x)")
    for t in trees:
        wall = sum(med[t].values())
        virtual = sum(runs[t][-1][n]["virtual_s"] for n in names)
        events = sum(runs[t][-1][n]["events"] for n in names)
        print(f"{t}: catalog {wall:.1f} wall s, {virtual / wall:.1f} virtual s per wall s, "
              f"{events / wall:,.0f} trace events per wall s")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"trees": trees, "runs": runs}, f, indent=1)
    return status


if __name__ == "__main__":
    sys.exit(main())
