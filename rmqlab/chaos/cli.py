"""`rmqlab chaos`: list the campaigns and their cases, run one on the simulator.

    rmqlab chaos list [CAMPAIGN]
    rmqlab chaos run CAMPAIGN [--case NAME] [--seeds 0-9] [--master local[2] | --workers N] --out DIR
    rmqlab chaos report DIR [--master local[1]] [--no-timeline]

A campaign is a built-in name (conf/chaos/*.toml) or the path of a .toml file of the same shape.
`run` runs each case and seed as one Spark task (`--master`, local[2] by default, or any
spark://host:port), or with `--workers N` in N processes of this machine without Spark; it writes
DIR/runs.parquet and DIR/faults.parquet (rmqlab.chaos.results), prints a summary table, and on Spark
also the report. It exits 1 when a run broke a safety checker (each such row carries its replay
command). `report` aggregates DIR's results with Spark SQL into DIR/report.html
(rmqlab.chaos.report); its timeline replays the worst run from its seed on this machine.
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
    where = run.add_mutually_exclusive_group()
    where.add_argument("--master", default="local[2]",
                       help="Spark master: local[N] (default local[2]) or spark://HOST:PORT; one task per case and seed")
    where.add_argument("--workers", type=int,
                       help="run in N processes of this machine instead of Spark (1: this process)")
    run.add_argument("--out", required=True, help="directory for runs.parquet and faults.parquet")
    run.add_argument("--no-report", action="store_true", help="on Spark, do not write DIR/report.html")
    rep = sub.add_parser("report", help="aggregate a campaign's results with Spark SQL into DIR/report.html")
    rep.add_argument("dir", help="the directory `rmqlab chaos run --out` wrote")
    rep.add_argument("--master", default="local[1]", help="Spark master for the queries (default local[1])")
    rep.add_argument("--no-timeline", action="store_true",
                     help="do not replay the worst run for its timeline (it takes as long as the run did)")
    for name, what in (("duration-ms", "each fault's duration"), ("interval-ms", "recovery time between faults"),
                       ("run-ms", "the fault loop's length")):
        run.add_argument(f"--{name}", type=float, help=f"{what}, for every case (default: the campaign's)")


def run(args: argparse.Namespace) -> int:
    from dataclasses import replace

    from rmqlab.chaos.campaign import builtin_campaigns, load_campaign
    from rmqlab.chaos.execute import parse_seeds, run_tasks, summary
    from rmqlab.chaos.results import write_results

    if args.chaos_command == "report":
        return report(args)
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
    on = f"{args.workers} processes" if args.workers else f"Spark ({args.master})"
    print(f"{c.name}: {len(cases)} cases x {len(seeds)} seeds on {on}")
    t0 = time.monotonic()
    spark = None
    if args.workers:
        run_rows, fault_rows = run_tasks(cases, seeds, workers=args.workers)
    else:
        from rmqlab.chaos.spark_runner import APP_NAME, run_on_spark
        from rmqlab.spark.session import get_spark

        spark = get_spark(args.master, app_name=APP_NAME)
        run_rows, fault_rows = run_on_spark(cases, seeds, master=args.master, spark=spark, progress=True)
    wall = time.monotonic() - t0
    paths = write_results(args.out, run_rows, fault_rows)
    print(summary(run_rows, fault_rows))
    injections = sum(r["injections"] or 0 for r in run_rows)
    print(f"{len(run_rows)} runs, {injections} injections in {wall:.0f} s "
          f"({wall / injections if injections else float('nan'):.2f} s per injection); "
          f"{', '.join(os.path.relpath(p) for p in paths)}")
    if spark is not None and not args.no_report:
        print(f"report: {os.path.relpath(_report(spark, args.out, timeline=False))}")
    return 0 if all(r["valid"] for r in run_rows) else 1


def _report(spark, out_dir: str, *, timeline: bool) -> str:
    from rmqlab.chaos.report import aggregate, worst_run_events, write_report
    from rmqlab.chaos.results import read_results

    tables = aggregate(spark, out_dir)
    _, fault_rows = read_results(out_dir)
    events = worst_run_events(tables) if timeline else None
    return write_report(out_dir, tables, fault_rows, worst_events=events)


def report(args: argparse.Namespace) -> int:
    from rmqlab.chaos.results import RUNS_FILE
    from rmqlab.spark.session import get_spark

    if not os.path.exists(os.path.join(args.dir, RUNS_FILE)):
        print(f"rmqlab chaos report: {args.dir} holds no {RUNS_FILE} (write one with `rmqlab chaos run --out`)")
        return 2
    spark = get_spark(args.master, app_name="rmqlab-chaos-report")
    print(f"report: {_report(spark, args.dir, timeline=not args.no_timeline)}")
    return 0
