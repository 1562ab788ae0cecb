"""`rmqlab record` and `rmqlab replay`.

    rmqlab record --preset NAME --out FILE.parquet [--runtime sim|real] [--seed N]
    rmqlab record --spec spec.json --out FILE.parquet [--runtime sim|real] [--seed N]
    rmqlab record --all --out-dir datasets/workloads [--runtime sim|real] [--sim-only]
    rmqlab replay WORKLOAD.parquet [--seed N] [--json] [--exercise NAME --solution FILE.py]

`record` runs a workload (a preset of rmqlab.workload.catalog, or a spec written by hand: the JSON
of Workload.to_dict()) and writes its Parquet file (schema in datasets/README.md). `--all`
regenerates the catalog, each workload on its own recorded_runtime unless --runtime says otherwise
(`--sim-only` skips the real-process ones). `replay` re-runs a file's workload on the simulator and
prints its outcome (a summary, or with --json the canonical JSON); with --exercise and --solution,
the student's function (a Python file defining it) decides at the exercise's decision points
(rmqlab.lab.exercises), in bubblewrap's sandbox (rmqlab.lab.exercises.jail) when it can run here,
otherwise in a forked child with only the courtesy audit hook, labelled "NOT SANDBOXED" on stderr.

rmqlab/cli.py adds the two subcommands with `add_record_arguments` / `add_replay_arguments` and
calls `run(args)`; `python -m rmqlab.workload.cli record|replay ...` works too.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time


def add_record_arguments(p: argparse.ArgumentParser) -> None:
    what = p.add_mutually_exclusive_group(required=True)
    what.add_argument("--preset", help="a workload of the catalog (rmqlab.workload.catalog), e.g. ctrl-embedded-kill-master")
    what.add_argument("--spec", help="a workload spec file (the JSON of Workload.to_dict())")
    what.add_argument("--all", action="store_true", help="every workload of the catalog (with --out-dir)")
    what.add_argument("--list", action="store_true", help="list the catalog's workloads and exit")
    p.add_argument("--out", help="the Parquet file to write (--preset, --spec)")
    p.add_argument("--out-dir", help="the directory to write <name>.parquet files into (--all)")
    p.add_argument("--runtime", choices=("sim", "real"), help="where to run: the simulator or real OS processes "
                   "(default: the workload's recorded_runtime; sim for --spec)")
    p.add_argument("--seed", type=int, help="the seed (default: the workload's)")
    p.add_argument("--sim-only", action="store_true", help="--all: skip the workloads recorded from real processes")
    p.set_defaults(workload_command="record")


def add_replay_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("workload", help="a recorded workload (.parquet)")
    p.add_argument("--seed", type=int, help="the seed (default: the workload's)")
    p.add_argument("--json", action="store_true", help="print the outcome as canonical JSON")
    p.add_argument("--exercise", help="an exercise of rmqlab.lab.exercises whose function --solution replaces")
    p.add_argument("--solution", help="a Python file defining the exercise's function")
    p.set_defaults(workload_command="replay")


def add_arguments(p: argparse.ArgumentParser, command: str = "replay") -> None:
    """The arguments of `command` ("record" or "replay")."""
    if command == "record":
        add_record_arguments(p)
    elif command == "replay":
        add_replay_arguments(p)
    else:
        raise ValueError(f"unknown command {command!r}: expected record or replay")


def run(args: argparse.Namespace) -> int:
    try:
        if args.workload_command == "record":
            return run_record(args)
        return run_replay(args)
    except (ValueError, OSError) as e:
        print(f"rmqlab {args.workload_command}: {e}", file=sys.stderr)
        return 2


# --- record ------------------------------------------------------------------------------------------------
def run_record(args: argparse.Namespace) -> int:
    from rmqlab.workload import Workload
    from rmqlab.workload.catalog import CATALOG

    if args.list:
        for name, w in CATALOG.items():
            print(f"{name:40} {w.mode:22} {w.proxy or '':8} {','.join(w.fault_kinds):24} {w.recorded_runtime}")
        return 0
    if args.all:
        if not args.out_dir or args.out:
            raise ValueError("--all writes one file per workload: give --out-dir (not --out)")
        os.makedirs(args.out_dir, exist_ok=True)
        for name, w in CATALOG.items():
            runtime = args.runtime or w.recorded_runtime
            if args.sim_only and runtime == "real":
                continue
            _record_one(w, runtime, args.seed, os.path.join(args.out_dir, f"{name}.parquet"))
        return 0
    if not args.out or args.out_dir:
        raise ValueError("--preset / --spec write one file: give --out (not --out-dir)")
    if args.preset:
        if args.preset not in CATALOG:
            raise ValueError(f"unknown preset {args.preset!r}; `rmqlab record --list` lists them")
        w = CATALOG[args.preset]
    else:
        with open(args.spec, encoding="utf-8") as f:
            try:
                data = json.load(f)
            except ValueError as e:
                raise ValueError(f"{args.spec}: not JSON ({e})") from None
        try:
            w = Workload.from_dict(data)
        except ValueError as e:
            raise ValueError(f"{args.spec}: {e}") from None
    runtime = args.runtime or (w.recorded_runtime if args.preset else "sim")
    _record_one(w, runtime, args.seed, args.out)
    return 0


def _record_one(w, runtime: str, seed: int | None, out: str) -> None:
    from rmqlab.workload import record, save_workload

    begin = time.monotonic()
    recorded = record(w, runtime=runtime, seed=seed)
    save_workload(out, recorded)
    o = recorded.outcome
    print(f"{out}: {w.name} on {runtime}, {len(recorded.events)} events, {os.path.getsize(out) / 1024:.0f} KiB, "
          f"{time.monotonic() - begin:.1f} s; acknowledged {o['acknowledged']}, lost {o['lost']}, "
          f"broken: {', '.join(n for n, i in o['invariants'].items() if i['applies'] and not i['holds']) or 'none'}",
          flush=True)


# --- replay ------------------------------------------------------------------------------------------------
def run_replay(args: argparse.Namespace) -> int:
    from rmqlab.workload import load_workload, outcome_json, run_workload, summary

    recorded = load_workload(args.workload)
    if bool(args.exercise) != bool(args.solution):
        raise ValueError("--exercise and --solution go together")
    points, calls, fn = None, [], None
    if args.exercise:
        try:
            from rmqlab.lab.exercises import EXERCISES, SandboxedFunction
        except ImportError as e:
            raise ValueError(f"--exercise needs rmqlab.lab.exercises, which is not available: {e}") from None
        if args.exercise not in EXERCISES:
            raise ValueError(f"unknown exercise {args.exercise!r}; known: {', '.join(sorted(EXERCISES))}")
        exercise = EXERCISES[args.exercise]
        with open(args.solution, encoding="utf-8") as f:
            source = f.read()
        from rmqlab.lab.exercises import jail
        sandboxed = jail.available()
        if not sandboxed:
            # A practice replay may run without the OS sandbox; grading never does (rmqlab grade refuses).
            print(f"rmqlab replay: NOT SANDBOXED (practice only): {jail.INSTALL_HINT}", file=sys.stderr)
        fn = SandboxedFunction(source, exercise.function, jail=sandboxed)
        points = exercise.decision_points(fn, calls)
    try:
        try:
            run = run_workload(recorded.workload, seed=args.seed, decision_points=points)
        except Exception as e:
            if type(e).__name__ != "StudentFunctionError":
                raise
            print(f"rmqlab replay: the solution's {args.exercise} failed ({getattr(e, 'status', 'error')}): "
                  f"{getattr(e, 'message', e)}", file=sys.stderr)
            return 1
    finally:
        if fn is not None:
            fn.close()
    if args.json:
        sys.stdout.buffer.write(outcome_json(run.outcome) + b"\n")
        sys.stdout.flush()
        return 0
    print(summary(run.outcome))
    if args.exercise:
        print(f"  {args.exercise}: the solution was called {len(calls)} time(s)")
        differ = disagreements(exercise, calls)
        if differ:
            call_args, rocketmq, yours = differ[0]
            print(f"  answered differently from RocketMQ's rule: {len(differ)} of those calls; the first: "
                  f"{exercise.describe(call_args)} -> RocketMQ {rocketmq!r}, yours {yours!r}")
        elif calls:
            print("  every call was answered as RocketMQ's rule answers it")
    same_inputs = recorded.outcome is not None and recorded.meta.get("runtime", "sim") == "sim" \
        and recorded.outcome.get("seed") == run.seed and points is None
    if same_inputs:
        match = outcome_json(recorded.outcome) == outcome_json(run.outcome)
        print(f"  the replay {'matches' if match else 'DIFFERS FROM'} the recorded outcome byte for byte")
    print(f"  replayed in {run.wall_s:.2f} s ({run.virtual_ms / 1000:.1f} virtual s)")
    return 0


def disagreements(exercise, calls: list[dict]) -> list[tuple[list, object, object]]:
    """(args, RocketMQ's answer, the solution's) for each call of a run that the solution answered
    differently from the exercise's reference rule (what grading's "agrees with RocketMQ" checks,
    here on the calls of the solution's own run). Calls that failed are not compared."""
    out = []
    for c in calls:
        if "answer" not in c:
            continue
        rocketmq = exercise.normalize(exercise.reference(*json.loads(json.dumps(c["args"]))))
        if rocketmq != c["answer"]:
            out.append((c["args"], rocketmq, c["answer"]))
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m rmqlab.workload.cli")
    sub = parser.add_subparsers(dest="command", required=True)
    add_record_arguments(sub.add_parser("record", help="record a workload to a Parquet file"))
    add_replay_arguments(sub.add_parser("replay", help="replay a recorded workload on the simulator"))
    return run(parser.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
