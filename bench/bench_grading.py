"""Grading a class on this machine: 100 submissions × 20 workloads, end to end, with
`rmqlab grade --master local[2]`. Target: ≤ 10 minutes on 2 cores.

    .venv/bin/python bench/bench_grading.py [--students 100] [--workloads 20] [--keep DIR] [--out DIR]

datasets/sample-grading/ (the instructor dashboard's default input) is this benchmark's pipeline on
a class of 24 and 6 workloads, without the feedback pages (4.8 MB of plotly.js the dashboard does
not read):

    .venv/bin/python bench/bench_grading.py --students 24 --workloads 6 --out datasets/sample-grading \
        --json /tmp/sample-grading.json && rm -r datasets/sample-grading/feedback

The class (built with rmqlab.grading.samples, every submission distinct code):
- the students are spread round-robin over the four labs' exercises (lab 01 transfer_ok, lab 02
  elect_master, lab 03 sync_state_set, lab 04 truncation_point): each submits that lab's notebook
  with their function in the exercise cell, so 25 notebooks per lab;
- the mix (MIX): 55% correct, 25% subtly wrong, 5% each nondeterministic, raising, looping forever,
  hostile (half of them read the hidden workloads, half open a socket); each kind is dealt
  round-robin over the labs too, so every lab has some of each;
- distinct code: each student starts from one of the samples library's variants for their exercise
  and kind (several correct formulations, several different mistakes), then `vary` rewrites it the
  way students differ — local variables renamed, helpers renamed, the body moved into a helper, the
  docstring dropped, a comment added — deterministically per student. The benchmark checks that the
  100 sources are pairwise different and that each correct or wrong one still answers the public
  examples like the variant it came from.

The workloads: 20 from datasets/workloads, chosen round-robin over the exercises among those whose
mode runs the exercise's hook (Exercise.modes: the controller modes for truncation_point,
elect_master and sync_state_set, 2m-2s-sync for transfer_ok), hardest first (hooks_score: recorded
truncations that really cut, then acknowledged loss, then the number of faults).

Printed and written as JSON (--json, default bench/figures/grading/bench_grading.json): total wall
time; where it goes (run.json's phases: papermill extraction, Spark start, reference runs,
evaluations, full replays, determinism re-runs, writing); full replays vs. reference-equivalent
tasks; the median full-replay wall; the peak memory of the grader and every process it started
(Spark's JVM, its Python workers, the sandboxed kernels and function children), sampled every
200 ms, as summed PSS (what the tree occupies) and summed RSS (over-counts forked children).
"""

from __future__ import annotations

import argparse
import ast
import builtins
import json
import os
import random
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
sys.path.insert(0, os.path.join(ROOT, "bench"))

from bench_labs import _descendants, _rss_kib  # noqa: E402  the labs' bench's process-tree helpers

# (kind, share of the class in %): a realistic class, mostly right, some wrong, a few broken or hostile
MIX = (("correct", 55), ("wrong", 25), ("nondeterministic", 5), ("raising", 5), ("looping", 5), ("hostile", 5))
EXERCISE_ORDER = ("transfer_ok", "elect_master", "sync_state_set", "truncation_point")  # labs 01..04
# rmqlab.grading.pipeline's phases (run.json timings_s), in the order they run
PHASES = ("load", "extraction", "spark_start", "stage_a_reference_and_public", "stage_b_evaluate", "stage_c_replay",
          "stage_d_determinism_and_minimize", "write", "total")
DEFAULT_JSON = os.path.join(ROOT, "bench", "figures", "grading", "bench_grading.json")


# --- the class -----------------------------------------------------------------------------------

def deal(students: int) -> list[tuple[str, str]]:
    """(exercise, kind) per student: each kind's share dealt round-robin over the four exercises."""
    counts = [(kind, round(students * pct / 100)) for kind, pct in MIX]
    counts[0] = (counts[0][0], students - sum(c for _, c in counts[1:]))  # rounding goes to "correct"
    out, turn = [], 0
    for kind, count in counts:
        for _ in range(count):
            out.append((EXERCISE_ORDER[turn % len(EXERCISE_ORDER)], kind))
            turn += 1
    return out


# How students differ: the source rewrites of `vary`.
SYNONYMS = {
    "i": ["idx", "k", "j", "pos", "n"], "e": ["entry", "item", "ep", "x"], "epoch": ["ep", "term", "era"],
    "start": ["begin", "first", "lo", "s"], "end": ["stop", "last", "hi", "limit"], "result": ["out", "answer", "res"],
}
SUFFIXES = ["_", "2", "_v", "_x", "0", "_tmp", "_val", "_cur", "_here"]


class _Renamer(ast.NodeTransformer):
    def __init__(self, mapping):
        self.mapping = mapping

    def visit_Name(self, node):
        if node.id in self.mapping:
            node.id = self.mapping[node.id]
        return node

    def visit_arg(self, node):
        if node.arg in self.mapping:
            node.arg = self.mapping[node.arg]
        return node


def _locals_of(fn: ast.FunctionDef) -> set[str]:
    """Names a function binds itself (assignments, loop targets, comprehension variables, nested
    lambda/def arguments), minus its own parameters and anything declared global/nonlocal."""
    params = {a.arg for a in fn.args.args + fn.args.kwonlyargs + fn.args.posonlyargs}
    if fn.args.vararg:
        params.add(fn.args.vararg.arg)
    if fn.args.kwarg:
        params.add(fn.args.kwarg.arg)
    declared = set()
    bound = set()
    for node in ast.walk(fn):
        if isinstance(node, (ast.Global, ast.Nonlocal)):
            declared.update(node.names)
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            bound.add(node.id)
        elif isinstance(node, ast.Lambda):
            bound.update(a.arg for a in node.args.args)
    return bound - params - declared - set(dir(builtins))


def vary(source: str, function: str, k: int) -> str:
    """The same code written differently, deterministically for `k`: local variables renamed, maybe
    the body moved into a helper the exercise function calls, a different docstring and comment."""
    rng = random.Random(k)
    tree = ast.parse(source)
    taken = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)} | {
        a.arg for a in ast.walk(tree) if isinstance(a, ast.arg)} | {
        f.name for f in ast.walk(tree) if isinstance(f, (ast.FunctionDef, ast.ClassDef))}
    for fn in [n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef)]:
        mapping = {}
        for name in sorted(_locals_of(fn)):
            if rng.random() < 0.25:
                continue
            options = [s for s in SYNONYMS.get(name, []) if s not in taken]
            new = rng.choice(options) if options and rng.random() < 0.6 else name + rng.choice(SUFFIXES)
            if new in taken or new in dir(builtins):
                continue
            mapping[name] = new
            taken.add(new)
        _Renamer(mapping).visit(fn)
    helpers = [n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name != function]
    for h in helpers:
        if rng.random() < 0.5 and not h.name.startswith("_"):
            continue
        new = rng.choice(["_", "__", ""]) + h.name.lstrip("_") + rng.choice(["_of", "_helper", "_fn", "2", "_impl"])
        if new in taken:
            continue
        taken.add(new)
        old = h.name
        for node in ast.walk(tree):
            if isinstance(node, ast.Name) and node.id == old:
                node.id = new
        h.name = new
    main = next(n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == function)
    doc = ast.get_docstring(main)
    if doc is not None and rng.random() < 0.5:
        main.body = main.body[1:] or [ast.Pass()]
    if rng.random() < 0.3:
        # the body in a helper, the exercise function a one-line wrapper around it
        impl = rng.choice(["_solve", "_compute", "_answer", "_rule"]) + f"_{rng.randint(1, 99)}"
        if impl not in taken:
            params = [a.arg for a in main.args.args]
            helper = ast.FunctionDef(name=impl, args=main.args, body=main.body, decorator_list=[], returns=None,
                                     type_params=[])
            call = ast.Return(ast.Call(ast.Name(impl, ast.Load()), [ast.Name(p, ast.Load()) for p in params], []))
            main.body = [call]
            tree.body.insert(tree.body.index(main), helper)
    ast.fix_missing_locations(tree)
    header = rng.choice(["", "# my solution\n", "# exercise\n", f"# attempt {rng.randint(2, 9)}\n",
                         "# following the algorithm of section 2\n"])
    return header + ast.unparse(tree) + "\n"


def build_class(directory: str, students: int, minimal: bool = False) -> dict:
    """Write `students` notebooks into `directory` (DIR/<student>.ipynb); return the class's makeup.
    `minimal`: a two-cell notebook (parameters, the exercise) instead of the lab notebook."""
    import nbformat

    from rmqlab.grading.samples import VARIANTS, make_submission
    from rmqlab.lab.exercises import EXERCISES

    os.makedirs(directory, exist_ok=True)
    sources, makeup = {}, {}
    hostile_turn = 0
    turns: dict[tuple[str, str], int] = {}  # (exercise, kind) -> students so far: variants in turn
    for i, (exercise, kind) in enumerate(deal(students)):
        ex = EXERCISES[exercise]
        wanted = kind
        if kind == "hostile":  # half read the hidden workloads, half open a socket
            wanted, hostile_turn = ("reading", "socket")[hostile_turn % 2], hostile_turn + 1
        variants = sorted((name, v.source) for name, v in VARIANTS[exercise].items() if v.kind == wanted)
        if not variants:
            raise SystemExit(f"rmqlab.grading.samples has no {wanted!r} variant for {exercise}")
        turn = turns[(exercise, wanted)] = turns.get((exercise, wanted), -1) + 1
        base_name, base = variants[turn % len(variants)]
        source = vary(base, ex.function, k=i)
        if kind in ("correct", "wrong"):
            _same_answers(ex, base, source)
        student = f"student-{i + 1:03d}"
        if source in sources.values():
            raise SystemExit(f"{student}: the same source as another student (vary gave a copy)")
        sources[student] = source
        lab = None if minimal else os.path.join(ROOT, "labs", f"{ex.lab}.ipynb")
        nbformat.write(make_submission(lab, {exercise: source}), os.path.join(directory, f"{student}.ipynb"))
        makeup[student] = {"exercise": exercise, "lab": ex.lab, "kind": kind, "variant": base_name}
    return makeup


def _same_answers(ex, base: str, varied: str) -> None:
    """The rewrite changed nothing but the text: both answer the public examples alike (run here,
    in this process: only the correct and subtly wrong kinds, which neither loop nor misbehave)."""
    fns = []
    for src in (base, varied):
        ns: dict = {"__name__": "submission"}
        exec(compile(src, "<submission>", "exec"), ns)  # noqa: S102 - the benchmark's own sample code
        fns.append(ns[ex.function])
    for example in ex.public_examples:
        answers = []
        for fn in fns:
            args = json.loads(json.dumps(list(example.args)))  # a fresh copy each: a function may mutate it
            args = ex.arg_adapter(args) if ex.arg_adapter else args
            try:
                answers.append(("ok", fn(*args)))
            except Exception as e:  # a wrong variant may raise on some example; the same way both times
                answers.append(("raised", type(e).__name__))
        if answers[0] != answers[1]:
            raise SystemExit(f"vary changed what {ex.function} answers on {example.name}: {answers}\n{varied}")


# --- the workloads -------------------------------------------------------------------------------

def choose_workloads(directory: str, count: int) -> list[str]:
    """`count` workload files of datasets/workloads, round-robin over the exercises among those
    whose mode runs the exercise's hook, the ones that test the hooks hardest first (hooks_score);
    copied into `directory` (what --workloads points at)."""
    from rmqlab.lab.exercises import EXERCISES
    from rmqlab.workload import load_workload

    public = os.path.join(ROOT, "datasets", "workloads")
    files = sorted(f for f in os.listdir(public) if f.endswith(".parquet"))
    recorded = {f: load_workload(os.path.join(public, f)) for f in files}
    pools = []
    for name in EXERCISE_ORDER:
        modes = set(EXERCISES[name].modes)
        pool = [f for f in files if recorded[f].workload.mode in modes]
        pools.append(sorted(pool, key=lambda f: (tuple(-x for x in hooks_score(recorded[f])), f)))
    chosen: list[str] = []
    while len(chosen) < count and any(pools):
        for pool in pools:
            while pool and pool[0] in chosen:
                pool.pop(0)
            if pool and len(chosen) < count:
                chosen.append(pool.pop(0))
    if len(chosen) < count:
        raise SystemExit(f"only {len(chosen)} workloads in {public} run an exercise's hook; asked for {count}")
    os.makedirs(directory, exist_ok=True)
    for f in chosen:
        shutil.copy(os.path.join(public, f), os.path.join(directory, f))
    return chosen


def hooks_score(recorded) -> tuple:
    """How hard a recorded run tests the exercises, from its own trace and outcome: truncations
    that really cut (a returning replica's log was longer than the consistent point: a wrong
    truncation rule shows there), acknowledged messages lost (an unclean election), then the
    number of faults (each failover consults the election and SyncStateSet rules again)."""
    cuts = sum(1 for e in recorded.events if e.kind == "log" and e.fields.get("truncate_offset") is not None
               and e.fields.get("local_max_offset", 0) > e.fields["truncate_offset"])
    lost = (recorded.outcome or {}).get("lost") or 0
    faults = len(recorded.workload.to_dict().get("faults") or [])
    return (cuts, int(lost > 0), faults)


# --- grading -------------------------------------------------------------------------------------

def grade_command(submissions: str, workloads: str, out: str, master: str) -> list[str]:
    """`rmqlab grade ...` through this interpreter."""
    args = ["--submissions", submissions, "--workloads", workloads, "--out", out, "--master", master]
    return [sys.executable, "-m", "rmqlab.cli", "grade", *args]


class TreeSampler(threading.Thread):
    """Peaks of a process tree's memory, sampled every 200 ms: the summed RSS (as bench_labs
    reports it; it counts the pages forked children share with their parent once per child), and
    the summed PSS (/proc/<pid>/smaps_rollup: shared pages split between their users, so the sum
    is what the tree really occupies)."""

    def __init__(self, pid: int):
        super().__init__(daemon=True)
        self.pid, self.peak_rss_kib, self.peak_pss_kib, self.peak_processes = pid, 0, 0, 0
        self._done = threading.Event()

    @staticmethod
    def _pss_kib(pid: int) -> int:
        try:
            with open(f"/proc/{pid}/smaps_rollup") as f:
                for line in f:
                    if line.startswith("Pss:"):
                        return int(line.split()[1])
        except OSError:
            pass
        return 0

    def run(self) -> None:
        while not self._done.is_set():
            pids = _descendants(self.pid)
            self.peak_processes = max(self.peak_processes, len(pids))
            self.peak_rss_kib = max(self.peak_rss_kib, sum(_rss_kib(p) for p in pids))
            self.peak_pss_kib = max(self.peak_pss_kib, sum(self._pss_kib(p) for p in pids))
            self._done.wait(0.2)

    def stop(self) -> None:
        self._done.set()
        self.join()


def grade(cmd: list[str]) -> tuple[float, int, TreeSampler]:
    """Run the grader; (wall seconds, return code, the memory sampler of its process tree)."""
    start = time.monotonic()
    proc = subprocess.Popen(cmd, cwd=ROOT)
    sampler = TreeSampler(proc.pid)
    sampler.start()
    rc = proc.wait()
    wall = time.monotonic() - start
    sampler.stop()
    return wall, rc, sampler


def summarize(out: str, wall: float, mem: TreeSampler, makeup: dict, workloads: list[str], cmd: list[str]) -> dict:
    """The numbers: from the benchmark's own clock and sampler, and from run.json (rmqlab.grading.pipeline)."""
    import csv

    with open(os.path.join(out, "run.json"), encoding="utf-8") as f:
        run = json.load(f)
    kinds: dict[str, int] = {}
    per_exercise: dict[str, int] = {}
    for m in makeup.values():
        kinds[m["kind"]] = kinds.get(m["kind"], 0) + 1
        per_exercise[m["exercise"]] = per_exercise.get(m["exercise"], 0) + 1
    with open(os.path.join(out, "findings.csv"), encoding="utf-8", newline="") as f:
        findings: dict[str, int] = {}
        for row in csv.DictReader(f):
            findings[row["kind"]] = findings.get(row["kind"], 0) + 1
    replays = run.get("replay_wall_s") or []
    extraction = run.get("extraction_s_per_notebook") or []
    refs = run.get("reference_run_wall_s") or []
    return {
        "command": shlex.join(cmd),
        "cores": os.cpu_count(),
        "students": len(makeup), "class_mix": kinds, "students_per_exercise": per_exercise,
        "workloads": workloads,
        "wall_s": round(wall, 1),
        "phases_s": run.get("timings_s") or {},
        "tasks": run.get("tasks"), "reference_equivalent": run.get("reference_equivalent"),
        "diverging": run.get("diverging"), "full_replays": run.get("full_replays"),
        "replays_shared_by_dedupe": run.get("replays_shared_by_dedupe"),
        "determinism_reruns": run.get("determinism_reruns"),
        "median_full_replay_s": round(statistics.median(replays), 3) if replays else None,
        "median_reference_run_s": round(statistics.median(refs), 3) if refs else None,
        "median_extraction_s_per_notebook": round(statistics.median(extraction), 2) if extraction else None,
        "evaluate_wall_s_mean": run.get("evaluate_wall_s_mean"),
        "findings": findings,
        "peak_rss_mib": round(mem.peak_rss_kib / 1024), "peak_pss_mib": round(mem.peak_pss_kib / 1024),
        "peak_processes": mem.peak_processes, "load_average_at_end": [round(x, 2) for x in os.getloadavg()],
    }


def print_table(s: dict) -> None:
    print(f"\n{s['students']} submissions × {len(s['workloads'])} workloads on {s['cores']} cores")
    print(f"  class: {s['class_mix']}")
    print(f"  per exercise: {s['students_per_exercise']}")
    rows = [("total wall (benchmark clock)", f"{s['wall_s']:.1f} s", "target ≤ 600 s")]
    order = {p: i for i, p in enumerate(PHASES)}
    phases = sorted(s["phases_s"].items(), key=lambda kv: (order.get(kv[0], len(order)), kv[0]))
    rows += [(f"  {phase}", f"{secs:.1f} s", "") for phase, secs in phases if isinstance(secs, (int, float))]
    rows += [("tasks (notebook × exercise × workload × seed)", str(s["tasks"]), ""),
             ("  reference-equivalent", str(s["reference_equivalent"]), ""),
             ("  diverging", str(s["diverging"]), ""),
             ("full replays", str(s["full_replays"]), f"{s['replays_shared_by_dedupe']} shared by dedupe"),
             ("determinism re-runs", str(s["determinism_reruns"]), ""),
             ("median full replay", f"{s['median_full_replay_s']} s", ""),
             ("median reference run", f"{s['median_reference_run_s']} s", ""),
             ("median extraction per notebook", f"{s['median_extraction_s_per_notebook']} s", ""),
             ("mean stage-B evaluation", f"{s['evaluate_wall_s_mean']} s", ""),
             ("findings", json.dumps(s["findings"], sort_keys=True), ""),
             ("peak PSS, grader + children", f"{s['peak_pss_mib']} MiB", "shared pages counted once"),
             ("peak RSS sum, grader + children", f"{s['peak_rss_mib']} MiB",
              f"{s['peak_processes']} processes at most; forked pages counted per process"),
             ("load average at the end (1, 5, 15 min)", " ".join(map(str, s["load_average_at_end"])), "")]
    width = max(len(r[0]) for r in rows)
    for name, value, note in rows:
        print(f"  {name:<{width}}  {value:>10}  {note}".rstrip())
    print(f"  command: {s['command']}")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--students", type=int, default=100)
    ap.add_argument("--workloads", type=int, default=20)
    ap.add_argument("--master", default="local[2]")
    ap.add_argument("--minimal-notebooks", action="store_true",
                    help="submit two-cell notebooks instead of the lab notebooks (extraction without the labs' cost)")
    ap.add_argument("--keep", help="build the class, workloads and output in this directory and keep them")
    ap.add_argument("--out", help="the grader's output directory (default: out/ in the working directory)")
    ap.add_argument("--json", default=DEFAULT_JSON, help=f"where to write the numbers (default {DEFAULT_JSON})")
    args = ap.parse_args()
    if args.students < 1 or args.workloads < 1:
        ap.error("--students and --workloads must be ≥ 1")
    base = args.keep or tempfile.mkdtemp(prefix="rmqlab-bench-grading-")
    try:
        subs, wdir, out = (os.path.join(base, d) for d in ("submissions", "workloads", "out"))
        out = os.path.abspath(args.out) if args.out else out
        t0 = time.monotonic()
        makeup = build_class(subs, args.students, args.minimal_notebooks)
        workloads = choose_workloads(wdir, args.workloads)
        print(f"class and workloads ready in {time.monotonic() - t0:.1f} s: {base}", flush=True)
        cmd = grade_command(subs, wdir, out, args.master)
        print("$", shlex.join(cmd), flush=True)
        wall, rc, mem = grade(cmd)
        if rc != 0:
            raise SystemExit(f"rmqlab grade exited with {rc}")
        summary = summarize(out, wall, mem, makeup, workloads, cmd)
        summary["makeup"] = makeup
        summary["notebooks"] = "minimal" if args.minimal_notebooks else "labs"
        print_table(summary)
        os.makedirs(os.path.dirname(os.path.abspath(args.json)), exist_ok=True)
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump(summary, f, indent=1, sort_keys=True)
        print(f"written: {args.json}")
    finally:
        if not args.keep:
            shutil.rmtree(base, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
