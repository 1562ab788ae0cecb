"""`rmqlab grade`: the grading pipeline.

    grade(GradeConfig(submissions=DIR, workloads=DIR, out=DIR, master="local[2]", seeds=1)) -> summary dict

Students' code runs only inside the OS sandbox of rmqlab.grading.jail (bubblewrap): the
notebooks' kernels and every student function, each in a fresh exec'd interpreter. grade() checks
first that bwrap works here and otherwise REFUSES to run (rmqlab.grading.jail.JailUnavailable, whose
message says how to install it): hidden workloads are never run against unsandboxed code.

Phases (run.json times each):
1. Extraction (rmqlab.grading.extract), before Spark starts (the two would compete for the 2 cores):
   papermill runs every notebook, in a child of a forkserver, in a kernel jailed by bwrap, and
   returns each exercise function as standalone source.
2. Spark (rmqlab.grading.spark_session; the workload files are broadcast as bytes, so workers need no
   shared filesystem). Each stage is one Spark job of independent tasks (rmqlab.grading.tasks):
   A. reference runs, per (workload, seed): every applicable exercise installed with its REFERENCE
      function → the reference outcome and each exercise's call log. In the same job, P: each
      submission's public examples.
   B. per (submission × exercise × workload × seed) where the reference consulted the exercise: the
      student's function on the reference call log's arguments, in two fresh jailed interpreters (the
      reference's answers stay in the Spark worker, which compares).
      Same answers everywhere ⇒ the replay would follow the reference's path, so its outcome IS
      the reference outcome ("reference-equivalent"; the argument is in rmqlab.grading.tasks'
      docstring; `full_replay=True` replays anyway). Errors end the task with a finding.
   C. full replays of the tasks that diverge, deduplicated: tasks of one (workload, seed, exercise)
      with equal answer vectors form a group; one representative is replayed, the others are asked
      the representative's replay call log and share its outcome when they answer it the same way;
      the rest get their own replay.
   D. determinism: a sample of the full replays (DETERMINISM_FRACTION, at least one per submission
      that had one) is replayed again; a different outcome, or different answers in B's two
      evaluations, is a `nondeterministic` finding. In the same job, M: a minimized counterexample
      per failing (submission, exercise) (rmqlab.grading.minimize).
3. Output (rmqlab.grading.gradebook, rmqlab.grading.feedback): gradebook.csv, results.parquet,
   counterexamples.parquet, findings.csv, feedback/<student>.html, run.json.
"""

from __future__ import annotations

import functools
import json
import os
import platform
import random
import sys
import threading
import time
import uuid
from collections import defaultdict
from dataclasses import asdict, dataclass, field

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
    """Run `items` as one Spark job (one task per item) through tasks.run_stage, with a tqdm bar on
    stderr driven by Spark's status tracker (completed tasks of the job's stages)."""
    if not items:
        return []
    from tqdm import tqdm

    from rmqlab.grading.spark_session import boot_task
    task = functools.partial(boot_task("rmqlab.grading.tasks", "run_stage"), ctx)
    rdd = sc.parallelize(items, len(items)).map(task)
    group = f"rmqlab-{desc}-{uuid.uuid4().hex[:8]}"
    box: dict = {}

    def work():
        try:
            sc.setJobGroup(group, desc)
            box["value"] = rdd.collect()
        except BaseException as e:  # noqa: BLE001 — re-raised in the caller's thread
            box["error"] = e

    t = threading.Thread(target=work, name=f"rmqlab-{desc}", daemon=True)
    t.start()
    bar = tqdm(total=len(items), desc=desc, file=sys.stderr, disable=not progress, leave=progress, unit="task")
    tracker = sc.statusTracker()
    while t.is_alive():
        t.join(0.25)
        done = 0
        for jid in tracker.getJobIdsForGroup(group) or []:
            job = tracker.getJobInfo(jid)
            for sid in (job.stageIds if job else []):
                info = tracker.getStageInfo(sid)
                if info is not None:
                    done += info.numCompletedTasks
        if done > bar.n:
            bar.update(min(done, len(items)) - bar.n)
    bar.update(len(items) - bar.n)
    bar.close()
    if "error" in box:
        raise box["error"]
    return box["value"]


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


def grade(cfg: GradeConfig, spark=None) -> dict:
    """Grade every submission of cfg.submissions on every workload of cfg.workloads; write cfg.out.
    Returns the run summary (also written as run.json). Raises rmqlab.grading.jail.JailUnavailable
    (nothing run, nothing written) when the sandbox cannot be used here."""
    from rmqlab.grading import jail
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
    by_wl = {w.name: w for w in workloads}
    private = tuple(os.path.realpath(d) for d in (cfg.workloads, cfg.submissions, out_dir, *cfg.extra_deny))
    for d in private:   # the sandbox shows its read-only binds to students' code: nothing secret may be in one
        inside = [b for b in jail.read_only_paths() if d == b or d.startswith(b.rstrip("/") + "/")]
        if inside:
            raise ValueError(f"{d} is inside {inside[0]}, which the grading sandbox lets students' code read; "
                             "keep workloads, submissions and the output directory elsewhere")
    hidden = sorted({s for w in workloads for s in (w.name, w.description, w.path, os.path.basename(w.path),
                                                     os.path.realpath(w.path), os.path.realpath(cfg.workloads))
                     if s}, key=len, reverse=True)

    # 1. extraction
    import tqdm as _tqdm_mod
    _tqdm_mod.tqdm.monitor_interval = 0   # no monitor thread: nothing to wake every 10 s
    with timer("extraction"):
        bar = _tqdm_mod.tqdm(total=len(subs), desc="notebooks", file=sys.stderr, disable=not cfg.progress,
                             unit="nb")
        # The scratch dirs stay out of the private ones (the output dir is one): see the check above.
        import tempfile
        scratch_root = tempfile.mkdtemp(prefix="rmqlab-grade-")
        extractions = ext.extract_all(subs, {n: e.function for n, e in EXERCISES.items()},
                                      scratch_root=scratch_root,
                                      time_limit=cfg.notebook_time_limit, memory_mb=max(cfg.memory_mb, 1024),
                                      workers=cfg.workers, progress=bar, keep_scratch=cfg.keep_scratch)
        bar.close()
        if not cfg.keep_scratch:
            import shutil
            shutil.rmtree(scratch_root, ignore_errors=True)
    findings: list[dict] = []
    for sub, x in zip(subs, extractions):
        for f in x.findings:
            findings.append({"student": sub.student, "notebook": sub.name, **f})

    # 2. Spark
    from rmqlab.grading.spark_session import get_spark, ship_package
    with timer("spark_start"):
        spark = spark or get_spark(cfg.master)
        sc = spark.sparkContext
        ship_package(sc, cfg.master)
        bc = sc.broadcast({w.name: w.data for w in workloads})
    ctx = {"workloads": bc, "time_limit": cfg.time_limit, "memory_mb": cfg.memory_mb,
           "eval_budget": cfg.eval_budget, "evaluations": 2}
    graded = [(sub, x, ex_name) for sub, x in zip(subs, extractions) for ex_name in sub.exercises
              if ex_name in x.functions]
    wanted = sorted({ex_name for sub in subs for ex_name in sub.exercises})
    seeds_of = {w.name: [w.seed + i for i in range(cfg.seeds)] for w in workloads}

    # A + P
    items = [{"stage": "reference", "workload": w.name, "seed": s,
              "exercises": [n for n in wanted if w.mode in EXERCISES[n].modes]}
             for w in workloads for s in seeds_of[w.name]]
    items = [i for i in items if i["exercises"]]
    items += [{"stage": "public", "student": sub.student, "notebook": sub.name, "exercise": n,
               **_fn(x, n)} for sub, x, n in graded]
    with timer("stage_a_reference_and_public"):
        res = collect(sc, items, ctx, "reference runs + public examples", cfg.progress)
    refs = {(r["workload"], r["seed"]): r for r in res if r["stage"] == "reference"}
    workload_errors = {f"{k[0]}@{k[1]}": (r.get("error") or r.get("crash")) for k, r in refs.items()
                       if "outcome" not in r}
    refs = {k: r for k, r in refs.items() if "outcome" in r}
    public = {(r["student"], r["notebook"], r["exercise"]): r for r in res if r["stage"] == "public"}

    # B
    items = []
    for sub, x, n in graded:
        logs = [{"workload": wl, "seed": seed, "calls": ref["calls"][n]}
                for (wl, seed), ref in sorted(refs.items()) if ref["calls"].get(n)]
        if logs:
            items.append({"stage": "evaluate", "student": sub.student, "notebook": sub.name, "exercise": n,
                          "logs": logs, **_fn(x, n)})
    with timer("stage_b_evaluate"):
        evals = collect(sc, items, ctx, "evaluate on reference calls", cfg.progress)
    ev = {}
    for r in evals:
        if r.get("status") == "crash":   # the whole (submission, exercise) task
            for wk in (wk for wk, ref in refs.items() if ref["calls"].get(r["exercise"])):
                ev[(r["student"], r["notebook"], r["exercise"]) + wk] = {**r, "workload": wk[0], "seed": wk[1]}
            continue
        for one in r["results"]:
            ev[_tkey(one)] = one
    src_of = {(sub.student, sub.name, n): _fn(x, n) for sub, x, n in graded}

    # C
    replays: dict[tuple, dict] = {}      # task key -> replay result (own or shared)
    shared_from: dict[tuple, tuple] = {}
    to_replay = [k for k, r in ev.items() if r.get("status") == "diverges"
                 or (cfg.full_replay and r.get("status") == "equivalent")]
    full_replays = 0
    with timer("stage_c_replay"):
        if cfg.full_replay:
            reps, members = to_replay, {}
        else:
            groups: dict[tuple, list[tuple]] = defaultdict(list)
            for k in to_replay:
                groups[(k[3], k[4], k[2], ev[k]["answers_key"])].append(k)
            reps = [g[0] for g in groups.values()]
            members = {g[0]: g[1:] for g in groups.values() if len(g) > 1}
        res = collect(sc, [_replay_item(k, src_of) for k in reps], ctx, "full replays", cfg.progress)
        full_replays += len(res)
        for r in res:
            replays[_tkey(r)] = r
        checks = []
        for rep, others in members.items():
            rr = replays.get(rep)
            for k in others:
                if rr is not None and rr.get("status") in ("replayed", "stuck"):
                    checks.append({"stage": "check", **_key_dict(k), "calls": rr["calls"], **src_of[k[:3]],
                                   "rep": list(rep)})
        own = []
        if checks:
            res = collect(sc, checks, ctx, "dedupe: check against a replay", cfg.progress)
            for r, item in zip(res, checks):
                k = _tkey(r)
                if r.get("same"):
                    shared_from[k] = tuple(item["rep"])
                else:
                    own.append(k)
        own += [k for rep, others in members.items() for k in others
                if (replays.get(rep) or {}).get("status") not in ("replayed", "stuck")]
        if own:
            res = collect(sc, [_replay_item(k, src_of) for k in own], ctx, "full replays (own)", cfg.progress)
            full_replays += len(res)
            for r in res:
                replays[_tkey(r)] = r
        for k, rep in shared_from.items():
            replays[k] = {**replays[rep], "shared_with": rep}

    # D + M
    rng = random.Random(cfg.sample_seed)
    own_keys = sorted(k for k, r in replays.items() if r.get("status") in ("replayed", "stuck")
                      and "shared_with" not in r)
    sample = set()
    by_sub: dict[tuple, list] = defaultdict(list)
    for k in own_keys:
        by_sub[k[:2]].append(k)
    for ks in by_sub.values():
        sample.add(rng.choice(ks))
    extra = [k for k in own_keys if k not in sample]
    rng.shuffle(extra)
    sample.update(extra[:max(0, int(round(cfg.determinism_fraction * len(own_keys))) - len(sample))])
    items = [{**_replay_item(k, src_of), "with_slice": False, "rerun": True} for k in sorted(sample)]
    failing_first = _first_diffs(ev)
    items += [{"stage": "minimize", "student": k[0], "notebook": k[1], "exercise": k[2], **src_of[k],
               "args": d["args"]} for k, d in sorted(failing_first.items())]
    with timer("stage_d_determinism_and_minimize"):
        res = collect(sc, items, ctx, "determinism re-runs + counterexamples", cfg.progress)
    reruns = [r for r in res if r["stage"] == "replay"]
    minimized = {(r["student"], r["notebook"], r["exercise"]): r for r in res if r["stage"] == "minimize"}

    # findings from the tasks
    seen_f: set = set()

    def finding(student, notebook, kind, detail, exercise=""):
        k = (student, notebook, kind, exercise)
        if k in seen_f:
            return
        seen_f.add(k)
        findings.append({"student": student, "notebook": notebook, "kind": kind, "detail": detail[:1000],
                         "exercise": exercise})

    for k, r in sorted(ev.items()):
        if r.get("status") == "error":
            finding(k[0], k[1], r["error"]["kind"], f"{k[2]}: {r['error']['detail']}", k[2])
        elif r.get("status") == "crash":
            finding(k[0], k[1], "crashed", f"{k[2]}: the grader could not evaluate it: {r['crash'][:300]}", k[2])
        if r.get("nondeterministic"):
            finding(k[0], k[1], "nondeterministic", f"{k[2]}: {r['nondeterministic']}", k[2])
    for k, r in sorted(replays.items()):
        if r.get("status") == "error":
            finding(k[0], k[1], r["error"]["kind"], f"{k[2]}: during a replay: {r['error']['detail']}", k[2])
        elif r.get("status") == "crash":
            finding(k[0], k[1], "crashed", f"{k[2]}: the replay crashed: {r['crash'][:300]}", k[2])
    for r in reruns:
        k = _tkey(r)
        first = replays.get(k) or {}
        if r.get("status") == "replayed" and first.get("status") == "replayed":
            if r["outcome_json"] != first["outcome_json"]:
                diff = sorted(kk for kk in set(r["outcome"]) | set(first["outcome"])
                              if canonical_json(r["outcome"].get(kk)) != canonical_json(first["outcome"].get(kk)))
                finding(k[0], k[1], "nondeterministic",
                        f"{k[2]}: the same replay twice gave different outcomes (differs in: {', '.join(diff)})", k[2])
        elif r.get("status") == "stuck" and first.get("status") == "stuck":
            if r.get("stuck") != first.get("stuck"):
                finding(k[0], k[1], "nondeterministic",
                        f"{k[2]}: the same replay twice got stuck differently ({first['stuck'][:150]} / "
                        f"{r['stuck'][:150]})", k[2])
        elif r.get("status") != first.get("status"):
            finding(k[0], k[1], "nondeterministic",
                    f"{k[2]}: the same replay ended as {first.get('status')} once and {r.get('status')} once", k[2])
    for k, r in public.items():
        if r.get("status") == "crash":
            finding(k[0], k[1], "crashed", f"{k[2]}: public examples: {r['crash'][:300]}", k[2])

    # results, tallies, counterexamples
    counterexamples: dict[tuple, dict] = {}
    ce_of: dict[tuple, str] = {}
    for k, m in minimized.items():
        d = failing_first[k]
        # not reproduced (nondeterministic code) or the task crashed: the first differing call itself
        src = m if m.get("reproduced") else d
        args, expected, got = src["args"], src["expected"], src["got"]
        sig = signature(args, expected, got)
        cid = counterexample_id(k[2], sig)
        ce_of[k] = cid
        counterexamples[k] = {"counterexample_id": cid, "exercise": k[2], "signature": sig,
                              "args": canonical_json(args), "expected": canonical_json(expected),
                              "got": canonical_json(got), "_args": args, "_expected": expected, "_got": got}
    results: list[dict] = []
    tallies: dict[tuple, dict] = {}
    failures: dict[tuple, dict] = defaultdict(lambda: defaultdict(list))
    ce_props: dict[str, set] = defaultdict(set)
    diagrams: dict[tuple, tuple] = {}
    ex_refs = {n: sorted(k for k, r in refs.items() if r["calls"].get(n)) for n in wanted}
    for sub, x in zip(subs, extractions):
        for n in sub.exercises:
            key3 = (sub.student, sub.name, n)
            t = tallies.setdefault(key3, {})
            pub = public.get(key3)
            n_pub = len(EXERCISES[n].public_examples)
            t["public-examples"] = [int(pub.get("passed", 0)), int(pub.get("total", n_pub) or n_pub),
                                    pub.get("passed_examples")] if pub else [0, n_pub]
            if pub and pub.get("first_failure"):
                failures[key3]["public-examples"].append(pub["first_failure"])
            for wk in ex_refs[n]:
                ref = refs[wk]
                w = by_wl[wk[0]]
                where = f"hidden workload #{w.index}, seed #{wk[1] - w.seed + 1}"
                props = gb.applicable_properties(ref["outcome"])
                calls = len(ref["calls"][n])
                k5 = key3 + wk
                e = ev.get(k5)
                rp = replays.get(k5)
                row = {"student": sub.student, "notebook": sub.name, "exercise": n, "workload": wk[0], "seed": wk[1]}
                status = "error" if e is None or e.get("status") in ("error", "crash") else \
                    ("error" if rp is not None and rp.get("status") not in ("replayed", "stuck") else None)
                if status == "error":
                    why = (e or {}).get("error", {}).get("detail") if e else "the function was not extracted"
                    if e is not None and e.get("status") == "crash":
                        why = "the grader crashed on this task"
                    if rp is not None and rp.get("status") == "error":
                        why = rp["error"]["detail"]
                    agree = 0
                    tt = t.setdefault("agrees-with-rocketmq", [0, 0, []])
                    tt[1] += calls
                    tt[2] += [False] * calls
                    results.append({**row, "property": "agrees-with-rocketmq", "holds": False, "method": "error",
                                    "counterexample_id": None, "detail": str(why)[:500]})
                    for p in props:
                        t.setdefault(p, [0, 0])[1] += 1
                        results.append({**row, "property": p, "holds": False, "method": "error",
                                        "counterexample_id": None, "detail": str(why)[:500]})
                        failures[key3][p].append(f"{where}: your function failed ({str(why)[:200]})")
                    continue
                agree = e["agree"]
                tt = t.setdefault("agrees-with-rocketmq", [0, 0, []])
                tt[0] += agree
                tt[1] += calls
                tt[2] += e.get("agree_calls") or [None] * calls
                cid = ce_of.get(key3)
                results.append({**row, "property": "agrees-with-rocketmq", "holds": agree == calls,
                                "method": "replayed" if rp is not None else "reference-equivalent",
                                "counterexample_id": cid if agree < calls else None,
                                "detail": f"{agree}/{calls} calls answered like RocketMQ's rule"})
                if agree < calls:
                    failures[key3]["agrees-with-rocketmq"].append(
                        f"{where}: {calls - agree} of {calls} calls answered differently")
                    if cid:
                        ce_props[cid].add("agrees-with-rocketmq")
                outcome = rp.get("outcome") if rp is not None else ref["outcome"]
                method = "replayed" if rp is not None else "reference-equivalent"
                relabel = _relabeller(rp, hidden)
                for p in props:
                    if outcome is None:   # stuck: the run could not complete
                        holds, detail = False, f"the run with your function could not complete: {rp['stuck']}"
                    else:
                        holds, detail = gb.judge(outcome, ref["outcome"], p)
                    tt = t.setdefault(p, [0, 0])
                    tt[0] += int(holds)
                    tt[1] += 1
                    results.append({**row, "property": p, "holds": holds, "method": method,
                                    "counterexample_id": None if holds else cid, "detail": detail})
                    if not holds:
                        failures[key3][p].append(f"{where}: {relabel(detail)}")
                        if cid:
                            ce_props[cid].add(p)
                        if key3 not in diagrams and rp and rp.get("trace_slice"):
                            from rmqlab.grading.tasks import first_violation
                            fv = first_violation(outcome) or {}
                            diagrams[key3] = (rp["trace_slice"], f"{where}: just before the first violation",
                                              fv.get("seq"))
    ce_rows = []
    seen_ce: set = set()
    for k, c in counterexamples.items():
        for p in sorted(ce_props.get(c["counterexample_id"]) or {"agrees-with-rocketmq"}):
            if (c["counterexample_id"], p) not in seen_ce:
                seen_ce.add((c["counterexample_id"], p))
                ce_rows.append({**{kk: v for kk, v in c.items() if not kk.startswith("_")}, "property": p})
    book = gb.gradebook_rows(tallies, findings, {n: [c for wk in ex_refs[n] for c in refs[wk]["calls"][n]]
                                                 for n in wanted})
    with timer("write"):
        gb.write_all(out_dir, gradebook=book, results=results, counterexamples=ce_rows, findings=findings,
                     hidden=hidden)
        feedback_dir = os.path.join(out_dir, "feedback")
        os.makedirs(feedback_dir, exist_ok=True)
        fb.ensure_plotlyjs(feedback_dir)
        students = sorted({s.student for s in subs})
        for student in students:
            exs = []
            for sub in [s for s in subs if s.student == student]:
                for n in sub.exercises:
                    key3 = (student, sub.name, n)
                    rows = [r for r in book if r["student"] == student and r["exercise"] == n]
                    if not rows or any(r is None for r in rows):
                        continue
                    ce = counterexamples.get(key3)
                    diagram = None
                    if key3 in diagrams:
                        recs, title, seq = diagrams[key3]
                        diagram = fb.lamport_html(recs, hidden, title, seq, exercise=n)
                    exs.append({"exercise": n if len(subs) == len(students) else f"{n} ({sub.name})",
                                "rows": rows, "failures": failures.get(key3, {}),
                                "counterexample": {"args": ce["_args"], "expected": ce["_expected"],
                                                   "got": ce["_got"]} if ce else None,
                                "diagram": diagram, "diagram_title": diagrams.get(key3, (None, ""))[1]})
            page = fb.student_page(student, exs, [f for f in findings if f["student"] == student], hidden)
            fb.write_page(feedback_dir, student, page)
    replay_walls = [r["wall_s"] for r in replays.values() if "wall_s" in r and "shared_with" not in r]
    summary = {
        "master": cfg.master, "seeds": cfg.seeds, "full_replay": cfg.full_replay,
        "submissions": len({s.student for s in subs}), "notebooks": len(subs), "workloads": len(workloads),
        "reference_runs": len(refs), "workload_errors": workload_errors,
        "tasks": len(ev), "reference_equivalent": sum(1 for r in ev.values() if r.get("status") == "equivalent"),
        "diverging": sum(1 for r in ev.values() if r.get("status") == "diverges"),
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


def _tkey(r: dict) -> tuple:
    return (r["student"], r["notebook"], r["exercise"], r["workload"], r["seed"])


def _key_dict(k: tuple) -> dict:
    return dict(zip(("student", "notebook", "exercise", "workload", "seed"), k))


def _replay_item(k: tuple, src_of: dict) -> dict:
    return {"stage": "replay", **_key_dict(k), **src_of[k[:3]]}


def _first_diffs(ev: dict) -> dict:
    """Per (student, notebook, exercise): the first differing call of the first (workload, seed) where
    the student's answers differ from the reference's."""
    out: dict = {}
    for k in sorted(ev):
        r = ev[k]
        if r.get("status") == "diverges" and k[:3] not in out:
            out[k[:3]] = r["first_diff"]
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
