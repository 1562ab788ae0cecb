"""`rmqlab chaos`: list the campaigns and their cases, run one on the simulator.

    rmqlab chaos list [CAMPAIGN]
    rmqlab chaos run CAMPAIGN [--case NAME] [--seeds 0-9] [--workers 2] --out DIR

A campaign is a built-in name (conf/chaos/*.toml) or the path of a .toml file of the same shape.
`run` writes DIR/runs.parquet and DIR/faults.parquet (rmqlab.chaos.results) and prints a summary
table; it exits 1 when a run broke a safety checker (each such row carries its replay command).
"""

from __future__ import annotations

import argparse
import os
import time


def add_arguments(p: argparse.ArgumentParser) -> None:
    sub = p.add_subparsers(dest="chaos_command", required=True)
    ls = sub.add_parser("list", help="the built-in campaigns, or one campaign's cases")
    ls.add_argument("campaign", nargs="?", help="a campaign name or .toml file")
    run = sub.add_parser("run", help="run a campaign's cases on the simulator")
    run.add_argument("campaign", help="a campaign name (rmqlab chaos list) or .toml file")
    run.add_argument("--case", help="only the case of this name, or the cases whose name contains it")
    run.add_argument("--seeds", help="seeds, e.g. 0-9 or 1,4,7 (default: the campaign's)")
    run.add_argument("--workers", type=int, default=2, help="worker processes (default 2; 1: this process)")
    run.add_argument("--out", required=True, help="directory for runs.parquet and faults.parquet")
    for name, what in (("duration-ms", "each fault's duration"), ("interval-ms", "recovery time between faults"),
                       ("run-ms", "the fault loop's length")):
        run.add_argument(f"--{name}", type=float, help=f"{what}, for every case (default: the campaign's)")


def run(args: argparse.Namespace) -> int:
    from dataclasses import replace

    from rmqlab.chaos.campaign import builtin_campaigns, load_campaign
    from rmqlab.chaos.execute import parse_seeds, run_tasks, summary
    from rmqlab.chaos.results import write_results

    if args.chaos_command == "list":
        if not args.campaign:
            for name in builtin_campaigns():
                c = load_campaign(name)
                print(f"{name:<12} {len(c.cases):>4} cases x {len(c.seeds)} seeds, {c.injections():>6} injections: "
                      f"{c.description}")
            return 0
        c = load_campaign(args.campaign)
        for case in c.cases:
            print(f"{case.name:<58} {case.injections():>3} faults of {case.duration_ms / 1000:g} s every "
                  f"{(case.duration_ms + case.interval_ms) / 1000:g} s")
        for s in c.skipped:
            print(f"(skipped) {s}")
        return 0
    try:
        c = load_campaign(args.campaign)
        cases = c.select(args.case)
        seeds = parse_seeds(args.seeds) if args.seeds else list(c.seeds)
    except (KeyError, ValueError, FileNotFoundError) as e:
        print(f"rmqlab chaos: {e.args[0] if isinstance(e, KeyError) else e}")
        return 2
    changes = {k: getattr(args, k) for k in ("duration_ms", "interval_ms", "run_ms") if getattr(args, k) is not None}
    if changes:
        cases = [replace(case, **changes) for case in cases]
    print(f"{c.name}: {len(cases)} cases x {len(seeds)} seeds on {args.workers} workers")
    t0 = time.monotonic()
    run_rows, fault_rows = run_tasks(cases, seeds, workers=args.workers)
    wall = time.monotonic() - t0
    paths = write_results(args.out, run_rows, fault_rows)
    print(summary(run_rows, fault_rows))
    injections = sum(r["injections"] or 0 for r in run_rows)
    print(f"{len(run_rows)} runs, {injections} injections in {wall:.0f} s "
          f"({wall / injections if injections else float('nan'):.2f} s per injection); "
          f"{', '.join(os.path.relpath(p) for p in paths)}")
    return 0 if all(r["valid"] for r in run_rows) else 1
