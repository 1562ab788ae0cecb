"""What the grader's Spark tasks do, one function per stage (the stages are described in
rmqlab.grading.pipeline). Every function here runs in a Spark Python worker: it takes one task item
(plain JSON-able dict) and the job context `ctx` (the broadcast workload bytes and the limits) and
returns a plain dict. A student's code never runs in the worker, nor in a fork of it: each task
starts one rmqlab.lab.exercises.SandboxedFunction(jail=True) per (student, exercise, stage) — a fresh
interpreter exec'd under bubblewrap (rmqlab.lab.exercises.jail), which receives each call's arguments over
its pipe and nothing else. The reference's answers are computed here, in the worker, and compared
here; the hidden workloads, the submissions and the output directory are not in the sandbox's world.

Why "reference-equivalent" is sound (stage B): the simulator is deterministic — the same workload,
seed and answers give the same trace byte for byte — and an exercise function's answers
are the only thing it feeds into the run. Stage A records every call the reference implementation
answered, in order. If a student's function gives, on each of those calls' arguments, the same answer
as the reference (after the exercise's `normalize`), then a replay with the student's function
installed makes the very same first call, gets the same answer, and so by induction follows the same
path, makes the same calls and ends with the reference run's outcome. The replay is therefore not
needed: the outcome IS the reference outcome. The same argument groups students in stage C: two
functions that agree on every call of one full replay's call log have that replay's outcome.
The argument needs the function to be a function (same arguments, same answer); stage B asks twice,
in two fresh children, and stage D re-runs replays, to catch the ones that are not.
"""

from __future__ import annotations

import time
from typing import Any

from rmqlab.trace.event import canonical_json

EVAL_BUDGET_S = 30.0   # all calls of one stage-B/-C evaluation together (each call has its own limit too)
SLICE_BEFORE = 400     # trace events kept before the first violation for the feedback diagram
SLICE_AFTER = 40
_ADDRESS_KINDS = ("node.start", "net.connect", "net.accept")

def _exercises():
    from rmqlab.lab.exercises import EXERCISES
    return EXERCISES


def workload(ctx: dict, name: str):
    """The RecordedWorkload `name`, parsed from the broadcast bytes for this task only.

    The students' code runs in exec'd interpreters that never share this worker's memory; still,
    nothing of the hidden workloads is kept alive in the worker between tasks (no parsed cache, the
    broadcast's loaded value is dropped: pyspark re-reads it from its local file next time), so a
    worker holds one task's workload at a time. Parsing a workload takes milliseconds."""
    from rmqlab.workload import load_workload_bytes
    bc = ctx["workloads"]
    try:
        return load_workload_bytes(bc.value[name], name)
    finally:
        if getattr(bc, "_path", None) is not None:   # a worker's copy: it can be read again
            bc.__dict__.pop("_value", None)


def _sandbox(ctx: dict, source: str, function: str, exercise: str):
    """A SandboxedFunction for the student's source: a fresh runner exec'd under bubblewrap, started
    now (rmqlab.lab.exercises.jail.JailUnavailable if bwrap cannot be used: the driver checked first). Its
    only writable directory is the jail's own tmpfs; the grader's files are not in its world."""
    from rmqlab.lab.exercises import SandboxedFunction, StudentFunctionError
    fn = SandboxedFunction(source, function, time_limit_s=ctx["time_limit"], memory_limit_mb=ctx["memory_mb"],
                           jail=True,
                           arg_adapter=_exercises()[exercise].arg_adapter)
    try:
        fn.start()
    except StudentFunctionError:
        pass   # a source that does not load: the function is dead and raises this at its first call
    return fn


def key(value: Any) -> str:
    return canonical_json(value)


def unique_args(calls: list[dict]) -> tuple[list, list[int]]:
    """The distinct argument lists of a call log (first-seen order) and, per call, its index among them:
    the functions are graded as functions, so each distinct call is asked once per child."""
    index: dict[str, int] = {}
    uniq: list = []
    which: list[int] = []
    for c in calls:
        k = key(c["args"])
        if k not in index:
            index[k] = len(uniq)
            uniq.append(c["args"])
        which.append(index[k])
    return uniq, which


# -- stage A: reference runs -------------------------------------------------------------------------

def reference_run(ctx: dict, item: dict) -> dict:
    """Run workload `item["workload"]` at `item["seed"]` with every applicable exercise's REFERENCE
    function deciding at its decision points, recording each exercise's calls."""
    from rmqlab.lab.exercises.registry import combine
    from rmqlab.workload import outcome_json, run_workload
    started = time.monotonic()
    rec = workload(ctx, item["workload"])
    exercises = _exercises()
    calls = {name: [] for name in item["exercises"]}
    points = combine(*(exercises[name].decision_points(exercises[name].reference, calls=calls[name])
                       for name in item["exercises"]))
    try:
        run = run_workload(rec.workload, seed=item["seed"], decision_points=points)
    except Exception as e:  # noqa: BLE001 — a workload the simulator cannot run is the instructor's to fix
        return {**item, "error": f"{type(e).__name__}: {e}"[:1000], "wall_s": time.monotonic() - started}
    return {**item, "outcome": run.outcome, "outcome_json": outcome_json(run.outcome).decode(),
            "calls": calls, "virtual_ms": run.virtual_ms, "wall_s": time.monotonic() - started}


# -- stage B / C-check: a student's answers on a call log --------------------------------------------

def _answers(ctx: dict, item: dict, args_list: list) -> dict:
    """The student's normalized answers on `args_list`, from one fresh sandboxed child. Stops at the
    first error (the finding)."""
    from rmqlab.lab.exercises import StudentFunctionError
    ex = _exercises()[item["exercise"]]
    answers: list = []
    started = time.monotonic()
    fn = _sandbox(ctx, item["source"], item["function"], item["exercise"])
    try:
        for args in args_list:
            if time.monotonic() - started > ctx.get("eval_budget", EVAL_BUDGET_S):
                return {"answers": answers, "error": {"kind": "timeout", "detail":
                        f"{len(args_list)} calls took more than {ctx.get('eval_budget', EVAL_BUDGET_S):.0f} s"}}
            try:
                answers.append(ex.normalize(fn(*args)))
            except StudentFunctionError as e:
                return {"answers": answers, "error": _finding(e, args), "violations": list(fn.violations),
                        "output": fn.output}
        if fn.violations:
            return {"answers": answers, "violations": list(fn.violations), "output": fn.output,
                    "error": {"kind": "sandbox-violation", "detail": "; ".join(fn.violations)[:1000]}}
        return {"answers": answers, "output": fn.output}
    finally:
        fn.close()


def _finding(e, args) -> dict:
    kind = {"todo": "missing-function"}.get(e.status, e.status)
    if e.details.get("violations"):   # a refusal while its code loaded, even one the code caught
        kind = "sandbox-violation"
    what = "still the TODO stub (NotImplementedError)" if e.status == "todo" else e.message
    return {"kind": kind, "detail": f"{what} (on arguments {key(args)[:300]})"[:1000]}


def evaluate(ctx: dict, item: dict) -> dict:
    """Stage B, for one (submission, exercise) on every (workload, seed) whose reference run called it
    (`item["logs"]`: [{workload, seed, calls}]): the student's function on the distinct arguments of
    all those call logs, twice, in two fresh children. Per log: "equivalent" when every answer equals
    the reference's — then that run's outcome is the reference outcome (module docstring) —,
    "diverges" (with the first differing call), or "error".

    An error on some arguments ("error", "wrong-type": the function raised or answered garbage there)
    marks the logs holding those arguments; the others are asked again without them. A timeout, a
    crash or a sandbox violation marks every log: the function is not gradable."""
    started = time.monotonic()
    base = {k: item[k] for k in ("student", "notebook", "exercise")}
    results: list[dict] = []
    remaining = list(item["logs"])
    while remaining:
        keys_of = [{key(c["args"]) for c in log["calls"]} for log in remaining]
        uniq, _ = unique_args([c for log in remaining for c in log["calls"]])
        runs = []
        for _ in range(ctx.get("evaluations", 2)):
            r = _answers(ctx, item, uniq)
            runs.append(r)
            if "error" in r:
                break
        err_run = next((r for r in runs if "error" in r), None)
        if err_run is None:
            answered = dict(zip((key(a) for a in uniq), runs[0]["answers"]))
            nondet = _nondeterminism(uniq, runs)
            results += [_judge_log(base, log, answered, nondet) for log in remaining]
            break
        err = err_run["error"]
        done = len(err_run["answers"])
        bad = key(uniq[done]) if done < len(uniq) else None
        answered = dict(zip((key(a) for a in uniq[:done]), err_run["answers"]))
        local = err["kind"] in ("error", "wrong-type", "missing-function") and bad is not None
        left = []
        for log, keys in zip(remaining, keys_of):
            if not local or bad in keys:
                results.append({**base, "workload": log["workload"], "seed": log["seed"], "status": "error",
                                "error": err, "calls": len(log["calls"]),
                                "output": (err_run.get("output") or "")[-2000:]})
            elif keys <= answered.keys() and err_run is runs[0]:
                results.append(_judge_log(base, log, answered, None))
            else:
                left.append(log)
        remaining = left
    return {**base, "results": results, "wall_s": time.monotonic() - started}


def _nondeterminism(uniq: list, runs: list[dict]) -> str | None:
    if len(runs) < 2 or key(runs[0]["answers"]) == key(runs[1]["answers"]):
        return None
    i = next(j for j, (a, b) in enumerate(zip(runs[0]["answers"], runs[1]["answers"])) if key(a) != key(b))
    return (f"asked twice on the same arguments {key(uniq[i])[:300]}, it answered "
            f"{key(runs[0]['answers'][i])[:100]} then {key(runs[1]['answers'][i])[:100]}")


def _judge_log(base: dict, log: dict, answered: dict, nondeterministic: str | None) -> dict:
    """One (workload, seed): the student's answers (by argument key) against the reference's log."""
    calls = log["calls"]
    uniq, which = unique_args(calls)
    answers = [answered[key(a)] for a in uniq]
    agree = [key(answers[u]) == key(c["answer"]) for c, u in zip(calls, which)]
    out = {**base, "workload": log["workload"], "seed": log["seed"], "calls": len(calls),
           "distinct_calls": len(uniq), "agree": sum(agree), "agree_calls": agree, "answers": answers,
           "answers_key": key(answers)}
    if nondeterministic:
        out["nondeterministic"] = nondeterministic
    diff = next((i for i, ok in enumerate(agree) if not ok), None)
    out["status"] = "equivalent" if diff is None else "diverges"
    if diff is not None:
        out["first_diff"] = {"args": calls[diff]["args"], "expected": calls[diff]["answer"],
                             "got": answers[which[diff]], "index": diff}
    return out


def check_log(ctx: dict, item: dict) -> dict:
    """Stage C: does this student's function answer a replay's call log like that replay's function?
    (Then the replay's outcome is this student's too: module docstring.) One child."""
    uniq, which = unique_args(item["calls"])
    r = _answers(ctx, item, uniq)
    out = {k: item[k] for k in ("student", "notebook", "exercise", "workload", "seed")}
    if "error" in r:
        out.update(same=False, error=r["error"])
        return out
    expected = [c["answer"] for c in item["calls"]]
    out["same"] = all(key(r["answers"][u]) == key(e) for u, e in zip(which, expected))
    return out


# -- stage C / D: full replays ------------------------------------------------------------------------

def replay(ctx: dict, item: dict) -> dict:
    """A full replay of the workload with the student's function at the exercise's decision points
    (the other points keep RocketMQ's rule), through a SandboxedFunction: the simulator runs here, the student's
    function in its sandbox, asked one call at a time. Returns the outcome, the call log and the
    trace slice around the first violated invariant (for the feedback's diagram)."""
    from rmqlab.lab.exercises import StudentFunctionError
    from rmqlab.workload import outcome_json, run_workload
    started = time.monotonic()
    out = {k: item[k] for k in ("student", "notebook", "exercise", "workload", "seed")}
    ex = _exercises()[item["exercise"]]
    fn = _sandbox(ctx, item["source"], item["function"], item["exercise"])
    calls: list = []
    try:
        rec = workload(ctx, item["workload"])
        try:
            run = run_workload(rec.workload, seed=item["seed"],
                               decision_points=ex.decision_points(fn, calls=calls))
        except StudentFunctionError as e:
            out.update(status="error", error=_finding(e, []), wall_s=time.monotonic() - started)
            return out
        except Exception as e:  # noqa: BLE001
            problem = _call_failure(fn, calls)
            if problem is not None:
                out.update(status="error", error=problem, wall_s=time.monotonic() - started)
                return out
            # The reference run of this workload completed, so a run that cannot (the harness waits
            # for a master that never comes, ...) failed because of the student's answers: every
            # property fails there, without a finding (the function did answer).
            out.update(status="stuck", stuck=f"{type(e).__name__}: {e}"[:500], calls=calls,
                       wall_s=time.monotonic() - started)
            return out
        problem = _call_failure(fn, calls)
        if problem is not None:
            out.update(status="error", error=problem, wall_s=time.monotonic() - started)
            return out
    finally:
        fn.close()
    out.update(status="replayed", outcome=run.outcome, outcome_json=outcome_json(run.outcome).decode(),
               calls=calls, wall_s=time.monotonic() - started)
    if item.get("with_slice", True):
        out["trace_slice"] = trace_slice(run.events, run.outcome)
    return out


def _call_failure(fn, calls: list) -> dict | None:
    """The finding of a replay whose function failed: a sandbox violation (even one the student's
    code caught), or an "error" entry in the call log — the component may have absorbed the
    exception (a broker answers SYSTEM_ERROR), so the log, not the run, says so."""
    if fn.violations:
        return {"kind": "sandbox-violation", "detail": "; ".join(fn.violations)[:1000]}
    failed = next((c for c in calls if "error" in c), None)
    if failed is None:
        return None
    e = failed["error"]
    kind = {"todo": "missing-function"}.get(e.get("status"), e.get("status") or "error")
    return {"kind": kind, "detail": f"{e.get('message', '')} (on arguments {key(failed['args'])[:300]})"[:1000]}


def first_violation(outcome: dict) -> dict | None:
    """The earliest first violation (by trace seq) of the outcome's broken invariants. Some are
    judged on the end state and carry no seq (e.g. replicas-identical): they come last."""
    firsts = [inv["first"] for inv in (outcome.get("invariants") or {}).values()
              if inv.get("applies") and not inv.get("holds") and inv.get("first")]
    return min(firsts, key=lambda f: (f.get("seq") is None, f.get("seq") or 0)) if firsts else None


def trace_slice(events, outcome: dict) -> list[dict] | None:
    """The events around the first violated invariant (plus the address events the diagram needs to
    name peers), as trace records. None when every invariant holds."""
    first = first_violation(outcome)
    if first is None or not events:
        return None
    at = first.get("seq")
    if at is None:   # judged on the end state: the last events before its time (or the trace's end)
        t = first.get("time_ms")
        at = max((e.seq for e in events if t is None or e.time_ms <= t), default=events[-1].seq)
    lo, hi = at - SLICE_BEFORE, at + SLICE_AFTER
    return [e.to_record() for e in events if lo <= e.seq <= hi or e.kind in _ADDRESS_KINDS]


# -- public examples and counterexample minimization --------------------------------------------------

def public_examples(ctx: dict, item: dict) -> dict:
    """The exercise's public checks on the student's function, in the grading sandbox (Exercise.check's
    own children would fork this worker). One child serves the examples; after a timeout
    or a crash it is dead, so the next example gets a fresh one."""
    ex = _exercises()[item["exercise"]]
    out = {k: item[k] for k in ("student", "notebook", "exercise")}
    passed, failures, passed_examples = 0, [], []
    fn = None
    try:
        for example in ex.public_examples:
            if fn is None:
                fn = _sandbox(ctx, item["source"], item["function"], item["exercise"])
            result = ex.check(fn, [example]).results[0]
            passed_examples.append(bool(result.passed))
            if result.passed:
                passed += 1
            else:
                failures.append(result.message[:500])
            if result.status == "timeout":
                break   # an endless loop would cost the time limit per example: the rest count as failed
            if result.status == "crashed":
                fn.close()
                fn = None
    finally:
        if fn is not None:
            fn.close()
    passed_examples += [False] * (len(ex.public_examples) - len(passed_examples))
    out.update(passed=passed, total=len(ex.public_examples), first_failure=failures[0] if failures else "",
               passed_examples=passed_examples)
    return out


def minimize(ctx: dict, item: dict) -> dict:
    """Stage M (rmqlab.grading.minimize): shrink the first differing call while the student's answer
    still differs from the reference's."""
    from rmqlab.grading.minimize import minimize_call
    ex = _exercises()[item["exercise"]]
    fn = _sandbox(ctx, item["source"], item["function"], item["exercise"])
    try:
        args, expected, got, asked, reproduced = minimize_call(fn, ex, item["args"],
                                                               max_calls=ctx.get("minimize_calls", 200))
    finally:
        fn.close()
    out = {k: item[k] for k in ("student", "notebook", "exercise")}
    out.update(args=args, expected=expected, got=got, asked=asked, reproduced=reproduced)
    return out


STAGES = {"reference": reference_run, "evaluate": evaluate, "check": check_log, "replay": replay,
          "public": public_examples, "minimize": minimize}


def run_stage(ctx: dict, item: dict) -> dict:
    """The Spark entry point: `item["stage"]` picks the function. An unexpected exception (a bug, or a
    workload the simulator rejects) becomes a result with "crash", never a failed Spark job."""
    stage = item["stage"]
    try:
        return {"stage": stage, **STAGES[stage](ctx, item)}
    except Exception as e:  # noqa: BLE001
        import traceback
        keep = {k: item.get(k) for k in ("student", "notebook", "exercise", "workload", "seed")}
        return {"stage": stage, **keep, "status": "crash",
                "crash": f"{type(e).__name__}: {e}\n{traceback.format_exc()[-3000:]}"}
