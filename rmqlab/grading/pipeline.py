"""`rmqlab grade`: the grading pipeline.

    grade(GradeConfig(submissions=DIR, workloads=DIR, out=DIR, master="local[2]", seeds=1)) -> summary dict

Students' code runs only inside the OS sandbox of rmqlab.lab.exercises.jail (bubblewrap): the
notebooks' kernels and every student function, each in a fresh exec'd interpreter. grade() checks
first that bwrap works here and otherwise REFUSES to run (rmqlab.lab.exercises.jail.JailUnavailable, whose
message says how to install it): hidden workloads are never run against unsandboxed code.

Phases (run.json times each):
1. Extraction (rmqlab.grading.extract), before Spark starts (the two would compete for the 2 cores):
   papermill runs every notebook, in a child of a forkserver, in a kernel jailed by bwrap, and
   returns each exercise function as standalone source.
2. Spark (rmqlab.spark.session; the workload files are broadcast as bytes, so workers need no
   shared filesystem). Each stage is one Spark job of independent tasks (rmqlab.grading.tasks), run
   by a function here that plans its items and reads its results; it takes the job runner as a
   `Collector` argument, so a test can hand it a fake one (tests/test_grading_stages.py). Results
   are keyed by `TaskKey` (student, notebook, exercise, workload, seed), `ExerciseKey` and `RunKey`;
   their statuses are `TaskStatus`.
   A. reference runs, per (workload, seed): every applicable exercise installed with its REFERENCE
      function → the reference outcome and each exercise's call log. In the same job, P: each
      submission's public examples. (`reference_and_public`)
   B. per (submission × exercise × workload × seed) where the reference consulted the exercise: the
      student's function on the reference call log's arguments, in two fresh jailed interpreters (the
      reference's answers stay in the Spark worker, which compares).
      Same answers everywhere ⇒ the replay would follow the reference's path, so its outcome IS
      the reference outcome ("reference-equivalent"; the argument is in rmqlab.grading.tasks'
      docstring; `full_replay=True` replays anyway). Errors end the task with a finding. (`evaluate`)
   C. full replays of the tasks that diverge, deduplicated: tasks of one (workload, seed, exercise)
      with equal answer vectors form a group; one representative is replayed, the others are asked
      the representative's replay call log and share its outcome when they answer it the same way;
      the rest get their own replay. (`replay`)
   D. determinism: a sample of the full replays (DETERMINISM_FRACTION, at least one per submission
      that had one) is replayed again; a different outcome, or different answers in B's two
      evaluations, is a `nondeterministic` finding. In the same job, M: a minimized counterexample
      per failing (submission, exercise) (rmqlab.grading.minimize). (`determinism_and_minimize`)
3. Output (rmqlab.grading.gradebook, rmqlab.grading.feedback): gradebook.csv, results.parquet,
   counterexamples.parquet, findings.csv, feedback/<student>.html, run.json (`task_findings`,
   `counterexamples_of`, `judge_tasks`, `counterexample_rows`, `write_feedback`).
"""

from __future__ import annotations

import json
import os
import platform
import random
import sys
import time
from collections import defaultdict
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from enum import StrEnum
from typing import NamedTuple

from rmqlab.grading import extract as ext
from rmqlab.grading import feedback as fb
from rmqlab.grading import gradebook as gb
from rmqlab.grading.minimize import counterexample_id, signature
from rmqlab.trace.event import canonical_json

DETERMINISM_FRACTION = 0.1


@dataclass
class GradeConfig:
    submissions: str
    workloads: str
    out: str
    master: str = "local[2]"
    seeds: int = 1
    full_replay: bool = False
    time_limit: float = 1.0             # per call of a student's function (seconds)
    notebook_time_limit: float = 120.0  # per notebook cell during extraction (seconds)
    memory_mb: int = 512                # per sandboxed child / kernel
    workers: int = 2                    # notebooks extracted at a time
    progress: bool = True
    determinism_fraction: float = DETERMINISM_FRACTION
    sample_seed: int = 0
    keep_scratch: bool = False
    eval_budget: float = 30.0           # all calls of one evaluation together (seconds)
    extra_deny: tuple[str, ...] = field(default_factory=tuple)   # more private dirs (none may be in a bind)


@dataclass
class LoadedWorkload:
    name: str
    path: str
    data: bytes
    mode: str
    seed: int
    description: str
    index: int          # "hidden workload #index" in feedback


def load_workloads(directory: str) -> list[LoadedWorkload]:
    """Every `.parquet` file of `directory` (sorted), validated with rmqlab.workload.load_workload_bytes;
    a bad file is a ValueError naming it."""
    from rmqlab.workload import load_workload_bytes
    if not os.path.isdir(directory):
        raise ValueError(f"--workloads {directory!r} is not a directory")
    files = sorted(f for f in os.listdir(directory) if f.endswith(".parquet"))
    if not files:
        raise ValueError(f"--workloads {directory!r} holds no .parquet workload files")
    out: list[LoadedWorkload] = []
    seen: dict[str, str] = {}
    for i, f in enumerate(files, 1):
        path = os.path.join(directory, f)
        with open(path, "rb") as fh:
            data = fh.read()
        try:
            rec = load_workload_bytes(data, f)
        except Exception as e:
            raise ValueError(f"workload file {path}: {e}") from e
        name = rec.workload.name
        if name in seen:
            raise ValueError(f"workload file {path}: its name {name!r} is also the name of {seen[name]}")
        seen[name] = path
        out.append(LoadedWorkload(name, path, data, rec.workload.mode, int(rec.workload.seed),
                                  rec.workload.description or "", i))
    return out


def collect(sc, items: list[dict], ctx: dict, desc: str, progress: bool) -> list[dict]:
    """Run `items` as one Spark job (one task per item) through tasks.run_stage."""
    from rmqlab.spark.jobs import run_job
    return run_job(sc, items, ("rmqlab.grading.tasks", "run_stage"), ctx, desc, progress)


class Timer:
    def __init__(self):
        self.phases: dict[str, float] = {}

    def __call__(self, name: str):
        timer = self

        class _T:
            def __enter__(self):
                self.t = time.monotonic()

            def __exit__(self, *exc):
                timer.phases[name] = round(timer.phases.get(name, 0.0) + time.monotonic() - self.t, 3)
        return _T()


# -- names of what the stages exchange --------------------------------------------------------------

class RunKey(NamedTuple):
    """One reference run: a hidden workload at one seed."""
    workload: str
    seed: int


class ExerciseKey(NamedTuple):
    """One exercise of one submission (a student's notebook)."""
    student: str
    notebook: str
    exercise: str


class TaskKey(NamedTuple):
    """One graded task: an exercise of a submission on one reference run. A tuple, so keys sort and
    hash as the (student, notebook, exercise, workload, seed) tuples they name."""
    student: str
    notebook: str
    exercise: str
    workload: str
    seed: int

    @classmethod
    def of(cls, r: dict) -> TaskKey:
        """The key of a task item or result (the dicts rmqlab.grading.tasks takes and returns)."""
        return cls(r["student"], r["notebook"], r["exercise"], r["workload"], r["seed"])

    @property
    def exercise_key(self) -> ExerciseKey:
        return ExerciseKey(self.student, self.notebook, self.exercise)

    @property
    def run(self) -> RunKey:
        return RunKey(self.workload, self.seed)


class Stage(StrEnum):
    """The task kinds of the Spark jobs (the keys of rmqlab.grading.tasks.STAGES)."""
    REFERENCE = "reference"
    PUBLIC = "public"
    EVALUATE = "evaluate"
    CHECK = "check"
    REPLAY = "replay"
    MINIMIZE = "minimize"


class TaskStatus(StrEnum):
    """A task result's "status" (set by rmqlab.grading.tasks). Stage B: equivalent, diverges, error;
    stages C/D: replayed, stuck (the run could not complete), error; any task: crash (the grader's own
    failure, rmqlab.grading.tasks.run_stage)."""
    EQUIVALENT = "equivalent"
    DIVERGES = "diverges"
    ERROR = "error"
    CRASH = "crash"
    REPLAYED = "replayed"
    STUCK = "stuck"


# A replay that ran its course: its outcome (or its getting stuck) is a result, not a failure.
RAN = (TaskStatus.REPLAYED, TaskStatus.STUCK)


class Method(StrEnum):
    """How a result row was judged (the `method` column of results.parquet)."""
    REPLAYED = "replayed"
    REFERENCE_EQUIVALENT = "reference-equivalent"
    ERROR = "error"


AGREES = "agrees-with-rocketmq"   # the property every task has: its answers against RocketMQ's rule

# A stage's way to run its items as one Spark job: (items, description) -> results, in item order.
Collector = Callable[[list[dict], str], list[dict]]


def grade(cfg: GradeConfig, spark=None) -> dict:
    """Grade every submission of cfg.submissions on every workload of cfg.workloads; write cfg.out.
    Returns the run summary (also written as run.json). Raises rmqlab.lab.exercises.jail.JailUnavailable
    (nothing run, nothing written) when the sandbox cannot be used here."""
    from rmqlab.lab.exercises import jail
    from rmqlab.lab.exercises import EXERCISES
    jail.require()   # before anything of a submission or a hidden workload is touched
    timer = Timer()
    started = time.monotonic()
    if cfg.seeds < 1:
        raise ValueError(f"--seeds must be at least 1, not {cfg.seeds}")
    out_dir = os.path.realpath(cfg.out)
    os.makedirs(out_dir, exist_ok=True)
    with timer("load"):
        workloads = load_workloads(cfg.workloads)
        subs = ext.find_submissions(cfg.submissions, known=set(EXERCISES))
    check_private_dirs(cfg, out_dir, jail.read_only_paths())
    hidden = hidden_strings(workloads, cfg.workloads)

    # 1. extraction
    with timer("extraction"):
        extractions = extract_functions(cfg, subs, EXERCISES)
    findings = [{"student": sub.student, "notebook": sub.name, **f}
                for sub, x in zip(subs, extractions) for f in x.findings]

    # 2. Spark
    from rmqlab.spark.session import get_spark, ship_package
    with timer("spark_start"):
        spark = spark or get_spark(cfg.master, app_name="rmqlab-grade")
        sc = spark.sparkContext
        ship_package(sc, cfg.master)
        bc = sc.broadcast({w.name: w.data for w in workloads})
    ctx = {"workloads": bc, "time_limit": cfg.time_limit, "memory_mb": cfg.memory_mb,
           "eval_budget": cfg.eval_budget, "evaluations": 2}

    def run(items: list[dict], desc: str) -> list[dict]:
        return collect(sc, items, ctx, desc, cfg.progress)

    graded = [(sub, x, ex_name) for sub, x in zip(subs, extractions) for ex_name in sub.exercises
              if ex_name in x.functions]
    wanted = sorted({ex_name for sub in subs for ex_name in sub.exercises})
    seeds_of = {w.name: [w.seed + i for i in range(cfg.seeds)] for w in workloads}
    src_of = {ExerciseKey(sub.student, sub.name, n): _fn(x, n) for sub, x, n in graded}
    with timer("stage_a_reference_and_public"):
        refs, workload_errors, public = reference_and_public(run, workloads, seeds_of, wanted, graded, EXERCISES)
    with timer("stage_b_evaluate"):
        ev, evals = evaluate(run, graded, refs)
    with timer("stage_c_replay"):
        replays, shared_from, full_replays = replay(run, ev, src_of, cfg.full_replay)
    with timer("stage_d_determinism_and_minimize"):
        reruns, minimized, failing_first = determinism_and_minimize(
            run, replays, ev, src_of, cfg.determinism_fraction, cfg.sample_seed)
    findings += task_findings(ev, replays, reruns, public)

    # 3. results, tallies, counterexamples, output
    counterexamples = counterexamples_of(minimized, failing_first)
    ex_refs = {n: sorted(k for k, r in refs.items() if r["calls"].get(n)) for n in wanted}
    judged = judge_tasks(subs, refs, ex_refs, ev, replays, public, counterexamples,
                         {w.name: w for w in workloads}, hidden,
                         {n: len(e.public_examples) for n, e in EXERCISES.items()})
    ce_rows = counterexample_rows(counterexamples, judged.ce_props)
    book = gb.gradebook_rows(judged.tallies, findings, {n: [c for wk in ex_refs[n] for c in refs[wk]["calls"][n]]
                                                        for n in wanted})
    with timer("write"):
        gb.write_all(out_dir, gradebook=book, results=judged.results, counterexamples=ce_rows, findings=findings,
                     hidden=hidden)
        write_feedback(out_dir, subs, book, findings, counterexamples, judged, hidden)
    replay_walls = [r["wall_s"] for r in replays.values() if "wall_s" in r and "shared_with" not in r]
    summary = {
        "master": cfg.master, "seeds": cfg.seeds, "full_replay": cfg.full_replay,
        "submissions": len({s.student for s in subs}), "notebooks": len(subs), "workloads": len(workloads),
        "reference_runs": len(refs), "workload_errors": workload_errors,
        "tasks": len(ev),
        "reference_equivalent": sum(1 for r in ev.values() if r.get("status") == TaskStatus.EQUIVALENT),
        "diverging": sum(1 for r in ev.values() if r.get("status") == TaskStatus.DIVERGES),
        "full_replays": full_replays, "replays_shared_by_dedupe": len(shared_from),
        "determinism_reruns": len(reruns), "counterexamples": len(ce_rows),
        "findings": len(findings), "timings_s": {**timer.phases, "total": round(time.monotonic() - started, 3)},
        "extraction_s_per_notebook": [x.seconds for x in extractions],
        "reference_run_wall_s": [round(r["wall_s"], 3) for r in refs.values()],
        "replay_wall_s": [round(w, 3) for w in replay_walls],
        "evaluate_tasks": len(evals),
        "evaluate_wall_s_mean": round(sum(r.get("wall_s", 0) for r in evals) / len(evals), 4) if evals else None,
        "versions": _versions(), "config": {k: v for k, v in asdict(cfg).items() if k != "extra_deny"},
    }
    with open(os.path.join(out_dir, "run.json"), "w") as f:
        json.dump(summary, f, indent=1, sort_keys=True)
    return summary


# -- before Spark ------------------------------------------------------------------------------------

def check_private_dirs(cfg: GradeConfig, out_dir: str, read_only_paths) -> None:
    """The sandbox shows its read-only binds to students' code: nothing secret (workloads,
    submissions, output, cfg.extra_deny) may be in one. A ValueError names the first that is."""
    private = tuple(os.path.realpath(d) for d in (cfg.workloads, cfg.submissions, out_dir, *cfg.extra_deny))
    for d in private:
        inside = [b for b in read_only_paths if d == b or d.startswith(b.rstrip("/") + "/")]
        if inside:
            raise ValueError(f"{d} is inside {inside[0]}, which the grading sandbox lets students' code read; "
                             "keep workloads, submissions and the output directory elsewhere")


def hidden_strings(workloads: list[LoadedWorkload], directory: str) -> list[str]:
    """What feedback must never show of the hidden workloads (names, descriptions, paths), longest
    first so a longer one is replaced before a part of it."""
    return sorted({s for w in workloads for s in (w.name, w.description, w.path, os.path.basename(w.path),
                                                   os.path.realpath(w.path), os.path.realpath(directory))
                   if s}, key=len, reverse=True)


def extract_functions(cfg: GradeConfig, subs: list, exercises: dict) -> list:
    """Phase 1: every notebook run by papermill in the sandbox (rmqlab.grading.extract), one
    Extraction per submission, in order."""
    import shutil
    import tempfile

    import tqdm as _tqdm_mod
    _tqdm_mod.tqdm.monitor_interval = 0   # no monitor thread: nothing to wake every 10 s
    bar = _tqdm_mod.tqdm(total=len(subs), desc="notebooks", file=sys.stderr, disable=not cfg.progress, unit="nb")
    # The scratch dirs stay out of the private ones (the output dir is one): see check_private_dirs.
    scratch_root = tempfile.mkdtemp(prefix="rmqlab-grade-")
    extractions = ext.extract_all(subs, {n: e.function for n, e in exercises.items()},
                                  scratch_root=scratch_root,
                                  time_limit=cfg.notebook_time_limit, memory_mb=max(cfg.memory_mb, 1024),
                                  workers=cfg.workers, progress=bar, keep_scratch=cfg.keep_scratch)
    bar.close()
    if not cfg.keep_scratch:
        shutil.rmtree(scratch_root, ignore_errors=True)
    return extractions


# -- the Spark stages (the driver's side; the workers' side is rmqlab.grading.tasks) -----------------

def reference_and_public(run: Collector, workloads: list[LoadedWorkload], seeds_of: dict[str, list[int]],
                         wanted: list[str], graded: list, exercises: dict
                         ) -> tuple[dict[RunKey, dict], dict[str, str], dict[ExerciseKey, dict]]:
    """Stages A + P, one job: a reference run per (workload, seed) that some wanted exercise applies
    to, and each graded function's public examples. Returns the completed reference runs, the
    runs that failed ("workload@seed" -> why) and the public examples' results."""
    items = [{"stage": Stage.REFERENCE.value, "workload": w.name, "seed": s,
              "exercises": [n for n in wanted if w.mode in exercises[n].modes]}
             for w in workloads for s in seeds_of[w.name]]
    items = [i for i in items if i["exercises"]]
    items += [{"stage": Stage.PUBLIC.value, "student": sub.student, "notebook": sub.name, "exercise": n,
               **_fn(x, n)} for sub, x, n in graded]
    res = run(items, "reference runs + public examples")
    refs = {RunKey(r["workload"], r["seed"]): r for r in res if r["stage"] == Stage.REFERENCE}
    workload_errors = {f"{k.workload}@{k.seed}": (r.get("error") or r.get("crash")) for k, r in refs.items()
                       if "outcome" not in r}
    refs = {k: r for k, r in refs.items() if "outcome" in r}
    public = {ExerciseKey(r["student"], r["notebook"], r["exercise"]): r for r in res if r["stage"] == Stage.PUBLIC}
    return refs, workload_errors, public


def evaluate(run: Collector, graded: list, refs: dict[RunKey, dict]) -> tuple[dict[TaskKey, dict], list[dict]]:
    """Stage B: each graded function on the call logs of the reference runs that consulted its
    exercise. Returns one result per task (a crash of the whole (submission, exercise) task stands
    for each of its runs) and the job's raw results (for the run summary)."""
    items = []
    for sub, x, n in graded:
        logs = [{"workload": wl, "seed": seed, "calls": ref["calls"][n]}
                for (wl, seed), ref in sorted(refs.items()) if ref["calls"].get(n)]
        if logs:
            items.append({"stage": Stage.EVALUATE.value, "student": sub.student, "notebook": sub.name,
                          "exercise": n, "logs": logs, **_fn(x, n)})
    evals = run(items, "evaluate on reference calls")
    ev: dict[TaskKey, dict] = {}
    for r in evals:
        if r.get("status") == TaskStatus.CRASH:   # the whole (submission, exercise) task
            for wk in (wk for wk, ref in refs.items() if ref["calls"].get(r["exercise"])):
                ev[TaskKey(r["student"], r["notebook"], r["exercise"], *wk)] = \
                    {**r, "workload": wk.workload, "seed": wk.seed}
            continue
        for one in r["results"]:
            ev[TaskKey.of(one)] = one
    return ev, evals


def replay(run: Collector, ev: dict[TaskKey, dict], src_of: dict[ExerciseKey, dict], full_replay: bool
           ) -> tuple[dict[TaskKey, dict], dict[TaskKey, TaskKey], int]:
    """Stage C: full replays of the diverging tasks (of all, with `full_replay`), deduplicated: tasks
    of one (workload, seed, exercise) with equal answers form a group whose first member is
    replayed; the others share its replay when they answer its call log the same way (a "check"
    task), else get their own. Returns each replayed task's result (a shared one carries
    "shared_with": its representative), who shares whose replay, and how many replays ran."""
    replays: dict[TaskKey, dict] = {}      # task key -> replay result (own or shared)
    shared_from: dict[TaskKey, TaskKey] = {}
    to_replay = [k for k, r in ev.items() if r.get("status") == TaskStatus.DIVERGES
                 or (full_replay and r.get("status") == TaskStatus.EQUIVALENT)]
    full_replays = 0
    if full_replay:
        reps, members = to_replay, {}
    else:
        groups: dict[tuple, list[TaskKey]] = defaultdict(list)
        for k in to_replay:
            groups[(k.workload, k.seed, k.exercise, ev[k]["answers_key"])].append(k)
        reps = [g[0] for g in groups.values()]
        members = {g[0]: g[1:] for g in groups.values() if len(g) > 1}
    res = run([_replay_item(k, src_of) for k in reps], "full replays")
    full_replays += len(res)
    for r in res:
        replays[TaskKey.of(r)] = r
    checks = []
    for rep, others in members.items():
        rr = replays.get(rep)
        for k in others:
            if rr is not None and rr.get("status") in RAN:
                checks.append({"stage": Stage.CHECK.value, **k._asdict(), "calls": rr["calls"],
                               **src_of[k.exercise_key], "rep": list(rep)})
    own = []
    if checks:
        res = run(checks, "dedupe: check against a replay")
        for r, item in zip(res, checks):
            k = TaskKey.of(r)
            if r.get("same"):
                shared_from[k] = TaskKey(*item["rep"])
            else:
                own.append(k)
    own += [k for rep, others in members.items() for k in others
            if (replays.get(rep) or {}).get("status") not in RAN]
    if own:
        res = run([_replay_item(k, src_of) for k in own], "full replays (own)")
        full_replays += len(res)
        for r in res:
            replays[TaskKey.of(r)] = r
    for k, rep in shared_from.items():
        replays[k] = {**replays[rep], "shared_with": rep}
    return replays, shared_from, full_replays


def determinism_and_minimize(run: Collector, replays: dict[TaskKey, dict], ev: dict[TaskKey, dict],
                             src_of: dict[ExerciseKey, dict], fraction: float, sample_seed: int
                             ) -> tuple[list[dict], dict[ExerciseKey, dict], dict[ExerciseKey, dict]]:
    """Stages D + M, one job: a sample of the replays that ran on their own (at least one per
    submission, `fraction` of them in all, drawn with `sample_seed`) runs again, and the first
    differing call of each diverging (submission, exercise) is minimized. Returns the re-runs,
    the minimized calls and the first differing calls they started from."""
    rng = random.Random(sample_seed)
    own_keys = sorted(k for k, r in replays.items() if r.get("status") in RAN and "shared_with" not in r)
    sample = set()
    by_sub: dict[tuple, list] = defaultdict(list)
    for k in own_keys:
        by_sub[(k.student, k.notebook)].append(k)
    for ks in by_sub.values():
        sample.add(rng.choice(ks))
    extra = [k for k in own_keys if k not in sample]
    rng.shuffle(extra)
    sample.update(extra[:max(0, int(round(fraction * len(own_keys))) - len(sample))])
    items = [{**_replay_item(k, src_of), "with_slice": False, "rerun": True} for k in sorted(sample)]
    failing_first = _first_diffs(ev)
    items += [{"stage": Stage.MINIMIZE.value, **k._asdict(), **src_of[k], "args": d["args"]}
              for k, d in sorted(failing_first.items())]
    res = run(items, "determinism re-runs + counterexamples")
    reruns = [r for r in res if r["stage"] == Stage.REPLAY]
    minimized = {ExerciseKey(r["student"], r["notebook"], r["exercise"]): r for r in res
                 if r["stage"] == Stage.MINIMIZE}
    return reruns, minimized, failing_first


# -- after Spark -------------------------------------------------------------------------------------

def task_findings(ev: dict[TaskKey, dict], replays: dict[TaskKey, dict], reruns: list[dict],
                  public: dict[ExerciseKey, dict]) -> list[dict]:
    """The findings.csv rows the Spark tasks give: errors and crashes of evaluations and replays,
    nondeterminism (two evaluations, or a replay and its re-run, that differ), crashed public
    examples. One per (student, notebook, kind, exercise): the first."""
    findings: list[dict] = []
    seen_f: set = set()

    def finding(k: ExerciseKey | TaskKey, kind: str, detail: str) -> None:
        key = (k.student, k.notebook, kind, k.exercise)
        if key in seen_f:
            return
        seen_f.add(key)
        findings.append({"student": k.student, "notebook": k.notebook, "kind": kind, "detail": detail[:1000],
                         "exercise": k.exercise})

    for k, r in sorted(ev.items()):
        if r.get("status") == TaskStatus.ERROR:
            finding(k, r["error"]["kind"], f"{k.exercise}: {r['error']['detail']}")
        elif r.get("status") == TaskStatus.CRASH:
            finding(k, "crashed", f"{k.exercise}: the grader could not evaluate it: {r['crash'][:300]}")
        if r.get("nondeterministic"):
            finding(k, "nondeterministic", f"{k.exercise}: {r['nondeterministic']}")
    for k, r in sorted(replays.items()):
        if r.get("status") == TaskStatus.ERROR:
            finding(k, r["error"]["kind"], f"{k.exercise}: during a replay: {r['error']['detail']}")
        elif r.get("status") == TaskStatus.CRASH:
            finding(k, "crashed", f"{k.exercise}: the replay crashed: {r['crash'][:300]}")
    for r in reruns:
        k = TaskKey.of(r)
        first = replays.get(k) or {}
        if r.get("status") == TaskStatus.REPLAYED and first.get("status") == TaskStatus.REPLAYED:
            if r["outcome_json"] != first["outcome_json"]:
                diff = sorted(kk for kk in set(r["outcome"]) | set(first["outcome"])
                              if canonical_json(r["outcome"].get(kk)) != canonical_json(first["outcome"].get(kk)))
                finding(k, "nondeterministic",
                        f"{k.exercise}: the same replay twice gave different outcomes (differs in: {', '.join(diff)})")
        elif r.get("status") == TaskStatus.STUCK and first.get("status") == TaskStatus.STUCK:
            if r.get("stuck") != first.get("stuck"):
                finding(k, "nondeterministic",
                        f"{k.exercise}: the same replay twice got stuck differently ({first['stuck'][:150]} / "
                        f"{r['stuck'][:150]})")
        elif r.get("status") != first.get("status"):
            finding(k, "nondeterministic",
                    f"{k.exercise}: the same replay ended as {first.get('status')} once and {r.get('status')} once")
    for k, r in public.items():
        if r.get("status") == TaskStatus.CRASH:
            finding(k, "crashed", f"{k.exercise}: public examples: {r['crash'][:300]}")
    return findings


def counterexamples_of(minimized: dict[ExerciseKey, dict], failing_first: dict[ExerciseKey, dict]
                       ) -> dict[ExerciseKey, dict]:
    """One counterexample per minimized (submission, exercise): the minimized call, or, when it was
    not reproduced (nondeterministic code) or the task crashed, the first differing call itself.
    Keys starting with "_" keep the values for the feedback; the others are counterexamples.parquet's."""
    counterexamples: dict[ExerciseKey, dict] = {}
    for k, m in minimized.items():
        d = failing_first[k]
        src = m if m.get("reproduced") else d
        args, expected, got = src["args"], src["expected"], src["got"]
        sig = signature(args, expected, got)
        cid = counterexample_id(k.exercise, sig)
        counterexamples[k] = {"counterexample_id": cid, "exercise": k.exercise, "signature": sig,
                              "args": canonical_json(args), "expected": canonical_json(expected),
                              "got": canonical_json(got), "_args": args, "_expected": expected, "_got": got}
    return counterexamples


@dataclass
class Judged:
    """What judging the tasks gives: results.parquet's rows; the gradebook's tallies
    ({ExerciseKey: {property: [passed, total(, per-item right)]}}); per ExerciseKey and property the
    feedback's failure lines; the properties each counterexample breaks; and per ExerciseKey the
    trace slice, title and seq of the feedback's diagram."""
    results: list[dict] = field(default_factory=list)
    tallies: dict[ExerciseKey, dict] = field(default_factory=dict)
    failures: dict[ExerciseKey, dict] = field(default_factory=lambda: defaultdict(lambda: defaultdict(list)))
    ce_props: dict[str, set] = field(default_factory=lambda: defaultdict(set))
    diagrams: dict[ExerciseKey, tuple] = field(default_factory=dict)


def judge_tasks(subs: list, refs: dict[RunKey, dict], ex_refs: dict[str, list[RunKey]], ev: dict[TaskKey, dict],
                replays: dict[TaskKey, dict], public: dict[ExerciseKey, dict],
                counterexamples: dict[ExerciseKey, dict], by_wl: dict[str, LoadedWorkload], hidden: list[str],
                n_public: dict[str, int]) -> Judged:
    """Every exercise of every submission: its public examples, then per reference run that
    consulted it, agreement with RocketMQ's rule and each outcome property the reference run holds,
    judged on the replay's outcome or, for a reference-equivalent task, the reference's."""
    j = Judged()
    for sub in subs:
        for n in sub.exercises:
            key3 = ExerciseKey(sub.student, sub.name, n)
            t = j.tallies.setdefault(key3, {})
            pub = public.get(key3)
            t["public-examples"] = [int(pub.get("passed", 0)), int(pub.get("total", n_public[n]) or n_public[n]),
                                    pub.get("passed_examples")] if pub else [0, n_public[n]]
            if pub and pub.get("first_failure"):
                j.failures[key3]["public-examples"].append(pub["first_failure"])
            for wk in ex_refs[n]:
                _judge_task(j, TaskKey(*key3, *wk), refs[wk], by_wl[wk.workload], ev, replays,
                            counterexamples, hidden)
    return j


def _judge_task(j: Judged, k: TaskKey, ref: dict, w: LoadedWorkload, ev: dict[TaskKey, dict],
                replays: dict[TaskKey, dict], counterexamples: dict[ExerciseKey, dict], hidden: list[str]) -> None:
    """One task's rows, tallies, failure lines and diagram (see judge_tasks)."""
    key3, n, t = k.exercise_key, k.exercise, j.tallies[k.exercise_key]
    where = f"hidden workload #{w.index}, seed #{k.seed - w.seed + 1}"
    props = gb.applicable_properties(ref["outcome"])
    calls = len(ref["calls"][n])
    e = ev.get(k)
    rp = replays.get(k)
    row = {"student": k.student, "notebook": k.notebook, "exercise": n, "workload": k.workload, "seed": k.seed}
    failed = e is None or e.get("status") in (TaskStatus.ERROR, TaskStatus.CRASH) or \
        (rp is not None and rp.get("status") not in RAN)
    if failed:
        why = (e or {}).get("error", {}).get("detail") if e else "the function was not extracted"
        if e is not None and e.get("status") == TaskStatus.CRASH:
            why = "the grader crashed on this task"
        if rp is not None and rp.get("status") == TaskStatus.ERROR:
            why = rp["error"]["detail"]
        tt = t.setdefault(AGREES, [0, 0, []])
        tt[1] += calls
        tt[2] += [False] * calls
        j.results.append({**row, "property": AGREES, "holds": False, "method": Method.ERROR.value,
                          "counterexample_id": None, "detail": str(why)[:500]})
        for p in props:
            t.setdefault(p, [0, 0])[1] += 1
            j.results.append({**row, "property": p, "holds": False, "method": Method.ERROR.value,
                              "counterexample_id": None, "detail": str(why)[:500]})
            j.failures[key3][p].append(f"{where}: your function failed ({str(why)[:200]})")
        return
    agree = e["agree"]
    tt = t.setdefault(AGREES, [0, 0, []])
    tt[0] += agree
    tt[1] += calls
    tt[2] += e.get("agree_calls") or [None] * calls
    cid = counterexamples[key3]["counterexample_id"] if key3 in counterexamples else None
    method = (Method.REPLAYED if rp is not None else Method.REFERENCE_EQUIVALENT).value
    j.results.append({**row, "property": AGREES, "holds": agree == calls, "method": method,
                      "counterexample_id": cid if agree < calls else None,
                      "detail": f"{agree}/{calls} calls answered like RocketMQ's rule"})
    if agree < calls:
        j.failures[key3][AGREES].append(f"{where}: {calls - agree} of {calls} calls answered differently")
        if cid:
            j.ce_props[cid].add(AGREES)
    outcome = rp.get("outcome") if rp is not None else ref["outcome"]
    relabel = _relabeller(rp, hidden)
    for p in props:
        if outcome is None:   # stuck: the run could not complete
            holds, detail = False, f"the run with your function could not complete: {rp['stuck']}"
        else:
            holds, detail = gb.judge(outcome, ref["outcome"], p)
        tt = t.setdefault(p, [0, 0])
        tt[0] += int(holds)
        tt[1] += 1
        j.results.append({**row, "property": p, "holds": holds, "method": method,
                          "counterexample_id": None if holds else cid, "detail": detail})
        if not holds:
            j.failures[key3][p].append(f"{where}: {relabel(detail)}")
            if cid:
                j.ce_props[cid].add(p)
            if key3 not in j.diagrams and rp and rp.get("trace_slice"):
                from rmqlab.grading.tasks import first_violation
                fv = first_violation(outcome) or {}
                j.diagrams[key3] = (rp["trace_slice"], f"{where}: just before the first violation", fv.get("seq"))


def counterexample_rows(counterexamples: dict[ExerciseKey, dict], ce_props: dict[str, set]) -> list[dict]:
    """counterexamples.parquet: one row per counterexample and property it breaks (agreement when
    no outcome property)."""
    ce_rows = []
    seen_ce: set = set()
    for c in counterexamples.values():
        for p in sorted(ce_props.get(c["counterexample_id"]) or {AGREES}):
            if (c["counterexample_id"], p) not in seen_ce:
                seen_ce.add((c["counterexample_id"], p))
                ce_rows.append({**{kk: v for kk, v in c.items() if not kk.startswith("_")}, "property": p})
    return ce_rows


def write_feedback(out_dir: str, subs: list, book: list[dict], findings: list[dict],
                   counterexamples: dict[ExerciseKey, dict], judged: Judged, hidden: list[str]) -> None:
    """feedback/<student>.html: per exercise its gradebook rows, failure lines, counterexample and
    diagram, and the student's findings."""
    feedback_dir = os.path.join(out_dir, "feedback")
    os.makedirs(feedback_dir, exist_ok=True)
    fb.ensure_plotlyjs(feedback_dir)
    students = sorted({s.student for s in subs})
    for student in students:
        exs = []
        for sub in [s for s in subs if s.student == student]:
            for n in sub.exercises:
                key3 = ExerciseKey(student, sub.name, n)
                rows = [r for r in book if r["student"] == student and r["exercise"] == n]
                if not rows or any(r is None for r in rows):
                    continue
                ce = counterexamples.get(key3)
                diagram = None
                if key3 in judged.diagrams:
                    recs, title, seq = judged.diagrams[key3]
                    diagram = fb.lamport_html(recs, hidden, title, seq, exercise=n)
                exs.append({"exercise": n if len(subs) == len(students) else f"{n} ({sub.name})",
                            "rows": rows, "failures": judged.failures.get(key3, {}),
                            "counterexample": {"args": ce["_args"], "expected": ce["_expected"],
                                               "got": ce["_got"]} if ce else None,
                            "diagram": diagram, "diagram_title": judged.diagrams.get(key3, (None, ""))[1]})
        page = fb.student_page(student, exs, [f for f in findings if f["student"] == student], hidden)
        fb.write_page(feedback_dir, student, page)


def _relabeller(rp: dict | None, hidden: list[str]):
    """Feedback text with the replay's node names replaced as in its diagram (no workload names)."""
    if rp is None or not rp.get("trace_slice"):
        return fb.Relabeller({}, {}, hidden).text
    from rmqlab.trace.event import TraceEvent
    from rmqlab.viz.lamport import address_book
    recs = rp["trace_slice"]
    return fb.Relabeller(fb.node_labels(recs), address_book([TraceEvent.from_record(r) for r in recs]), hidden).text


def _fn(x, n: str) -> dict:
    f = x.functions[n]
    return {"source": f["source"], "function": f["function"]}


def _replay_item(k: TaskKey, src_of: dict[ExerciseKey, dict]) -> dict:
    return {"stage": Stage.REPLAY.value, **k._asdict(), **src_of[k.exercise_key]}


def _first_diffs(ev: dict[TaskKey, dict]) -> dict[ExerciseKey, dict]:
    """Per (student, notebook, exercise): the first differing call of the first (workload, seed) where
    the student's answers differ from the reference's."""
    out: dict[ExerciseKey, dict] = {}
    for k in sorted(ev):
        r = ev[k]
        if r.get("status") == TaskStatus.DIVERGES and k.exercise_key not in out:
            out[k.exercise_key] = r["first_diff"]
    return out


def _versions() -> dict:
    from importlib.metadata import PackageNotFoundError, version
    v = {"python": platform.python_version()}
    for pkg in ("rmqlab", "pyspark", "papermill", "nbclient", "pyarrow", "plotly"):
        try:
            v[pkg] = version(pkg)
        except PackageNotFoundError:
            v[pkg] = None
    return v
