"""`rmqlab grade`:

    rmqlab grade --submissions DIR --workloads DIR --out DIR [--master local[2]|spark://HOST:PORT]
                 [--seeds N] [--full-replay] [--time-limit S] [--notebook-time-limit S] [--memory-mb M]

Exit status 0 when the class was graded (whatever the grades and findings), 2 on bad input, 3 when
the grading sandbox (bubblewrap) cannot be used here: then nothing is run, and the message says how
to install it.
"""

from __future__ import annotations

import argparse
import json
import sys


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--submissions", required=True, metavar="DIR",
                   help="DIR/<student>.ipynb or DIR/<student>/*.ipynb")
    p.add_argument("--workloads", required=True, metavar="DIR", help="a directory of workload .parquet files")
    p.add_argument("--out", required=True, metavar="DIR", help="where gradebook.csv, feedback/ ... go")
    p.add_argument("--master", default="local[2]", help="Spark master (default local[2]; or spark://HOST:PORT)")
    p.add_argument("--seeds", type=int, default=1,
                   help="seeds per workload: the workload's own seed, then seed+1, ... (default 1)")
    p.add_argument("--full-replay", action="store_true",
                   help="replay every task in full (no reference-equivalent shortcut, no dedupe)")
    p.add_argument("--time-limit", type=float, default=1.0, metavar="S",
                   help="per call of a student's function, in seconds (default 1)")
    p.add_argument("--notebook-time-limit", type=float, default=120.0, metavar="S",
                   help="per notebook cell during extraction, in seconds (default 120)")
    p.add_argument("--memory-mb", type=int, default=512, metavar="M",
                   help="memory for each sandboxed interpreter running a student's function (default 512)")
    p.add_argument("--no-progress", action="store_true", help="no progress bars on stderr")


def run(args: argparse.Namespace) -> int:
    from rmqlab.lab.exercises.jail import JailUnavailable
    from rmqlab.grading.pipeline import GradeConfig, grade
    if args.time_limit <= 0 or args.notebook_time_limit <= 0:
        print("rmqlab grade: --time-limit and --notebook-time-limit must be positive", file=sys.stderr)
        return 2
    if args.memory_mb < 64:
        print("rmqlab grade: --memory-mb must be at least 64", file=sys.stderr)
        return 2
    cfg = GradeConfig(submissions=args.submissions, workloads=args.workloads, out=args.out, master=args.master,
                      seeds=args.seeds, full_replay=args.full_replay, time_limit=args.time_limit,
                      notebook_time_limit=args.notebook_time_limit, memory_mb=args.memory_mb,
                      progress=not args.no_progress)
    try:
        summary = grade(cfg)
    except JailUnavailable as e:
        print(f"rmqlab grade: refusing to run students' code on hidden workloads without the sandbox: {e}",
              file=sys.stderr)
        return 3
    except ValueError as e:
        print(f"rmqlab grade: {e}", file=sys.stderr)
        return 2
    for where, why in sorted(summary["workload_errors"].items()):
        print(f"rmqlab grade: warning: workload {where} could not be run with the reference functions and "
              f"was left out: {str(why).splitlines()[0] if why else ''}", file=sys.stderr)
    t = summary["timings_s"]
    print(f"graded {summary['notebooks']} notebooks of {summary['submissions']} students on "
          f"{summary['workloads']} workloads × {summary['seeds']} seeds in {t['total']:.1f} s: "
          f"{summary['tasks']} tasks, {summary['reference_equivalent']} reference-equivalent, "
          f"{summary['full_replays']} full replays, {summary['findings']} findings → {args.out}")
    print(json.dumps(t))
    return 0
