"""The grading pipeline's stages (rmqlab.grading.pipeline), each on its own with a fake collector:
no Spark, no sandbox, no notebook. A collector takes a job's items and returns one result per item,
as rmqlab.grading.tasks.run_stage would ({"stage": ..., **result}); the fakes here answer from
tables, so each test states what the workers said and checks what the driver makes of it.
(The whole pipeline, with Spark and the sandbox: tests/test_grading.py.)"""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from rmqlab.grading import pipeline as pl
from rmqlab.grading.pipeline import ExerciseKey, Method, RunKey, TaskKey, TaskStatus

EX = "elect"   # an exercise name; the stages never look it up except through the `exercises` given


class FakeCollector:
    """Answers each item with `handlers[item["stage"]](item)`; records every job."""

    def __init__(self, **handlers):
        self.handlers = handlers
        self.jobs: list[tuple[str, list[dict]]] = []

    def __call__(self, items: list[dict], desc: str) -> list[dict]:
        self.jobs.append((desc, items))
        return [{"stage": i["stage"], **self.handlers[i["stage"]](i)} for i in items]

    def items(self, stage: str) -> list[dict]:
        return [i for _, items in self.jobs for i in items if i["stage"] == stage]


def sub(student: str, name: str = "lab.ipynb", exercises=(EX,)):
    return SimpleNamespace(student=student, name=name, exercises=list(exercises))


def extraction(*exercises: str):
    return SimpleNamespace(functions={n: {"source": f"def f(): return {n!r}", "function": "f"} for n in exercises},
                           findings=[], seconds=0.0)


def workload(name: str, mode: str = "controller", seed: int = 7, index: int = 1):
    return pl.LoadedWorkload(name, f"/hidden/{name}.parquet", b"", mode, seed, "", index)


def key_fields(i: dict) -> tuple:
    return tuple(i[f] for f in ("student", "notebook", "exercise", "workload", "seed"))


# -- keys and statuses ------------------------------------------------------------------------------

def test_task_keys_sort_and_hash_as_the_tuples_they_name():
    k = TaskKey("s", "nb", EX, "wl", 3)
    assert k == ("s", "nb", EX, "wl", 3) and hash(k) == hash(("s", "nb", EX, "wl", 3))
    assert k.exercise_key == ExerciseKey("s", "nb", EX) and k.run == RunKey("wl", 3)
    assert TaskKey.of({**k._asdict(), "status": "diverges"}) == k
    assert sorted([TaskKey("b", "n", EX, "w", 1), TaskKey("a", "n", EX, "w", 2)])[0].student == "a"


def test_statuses_are_the_strings_the_tasks_write():
    # StrEnum: a task result's plain "status" string compares equal to its member
    assert {s.value for s in TaskStatus} == {"equivalent", "diverges", "error", "crash", "replayed", "stuck"}
    assert "stuck" in pl.RAN and "error" not in pl.RAN
    assert [m.value for m in Method] == ["replayed", "reference-equivalent", "error"]


# -- stage A + P ------------------------------------------------------------------------------------

def test_reference_runs_only_where_an_exercise_applies_and_failed_runs_are_workload_errors():
    exercises = {EX: SimpleNamespace(modes=("controller",))}
    wls = [workload("ok"), workload("broken"), workload("classic", mode="classic")]
    seeds_of = {w.name: [w.seed, w.seed + 1] for w in wls}
    graded = [(sub("ann"), extraction(EX), EX)]

    def reference(i):
        if i["workload"] == "broken" and i["seed"] == 8:
            return {"workload": i["workload"], "seed": i["seed"], "error": "ValueError: no"}
        return {"workload": i["workload"], "seed": i["seed"], "outcome": {}, "calls": {EX: []}}

    run = FakeCollector(reference=reference, public=lambda i: {k: i[k] for k in ("student", "notebook", "exercise")}
                        | {"passed": 1, "total": 1})
    refs, errors, public = pl.reference_and_public(run, wls, seeds_of, [EX], graded, exercises)
    assert [(i["workload"], i["seed"]) for i in run.items("reference")] == [("ok", 7), ("ok", 8), ("broken", 7),
                                                                            ("broken", 8)]
    assert sorted(refs) == [RunKey("broken", 7), RunKey("ok", 7), RunKey("ok", 8)]
    assert errors == {"broken@8": "ValueError: no"}
    assert public == {ExerciseKey("ann", "lab.ipynb", EX): {"stage": "public", "student": "ann",
                                                            "notebook": "lab.ipynb", "exercise": EX,
                                                            "passed": 1, "total": 1}}
    assert len(run.jobs) == 1   # one Spark job for both


# -- stage B ----------------------------------------------------------------------------------------

def test_evaluate_sends_the_consulted_logs_and_a_crash_stands_for_each_of_its_runs():
    refs = {RunKey("w2", 1): {"calls": {EX: [{"args": [1], "answer": 1}]}},
            RunKey("w1", 1): {"calls": {EX: [{"args": [2], "answer": 2}]}},
            RunKey("w3", 1): {"calls": {EX: []}}}          # did not consult the exercise
    graded = [(sub("ann"), extraction(EX), EX), (sub("bob"), extraction(EX), EX)]

    def evaluate(i):
        base = {k: i[k] for k in ("student", "notebook", "exercise")}
        if i["student"] == "bob":
            return {**base, "status": "crash", "crash": "Boom"}
        return {**base, "results": [{**base, "workload": log["workload"], "seed": log["seed"],
                                     "status": "equivalent"} for log in i["logs"]]}

    run = FakeCollector(evaluate=evaluate)
    ev, evals = pl.evaluate(run, graded, refs)
    assert [log["workload"] for log in run.items("evaluate")[0]["logs"]] == ["w1", "w2"]
    assert len(evals) == 2
    assert sorted(ev) == [TaskKey("ann", "lab.ipynb", EX, "w1", 1), TaskKey("ann", "lab.ipynb", EX, "w2", 1),
                          TaskKey("bob", "lab.ipynb", EX, "w1", 1), TaskKey("bob", "lab.ipynb", EX, "w2", 1)]
    crashed = ev[TaskKey("bob", "lab.ipynb", EX, "w2", 1)]
    assert crashed["status"] == TaskStatus.CRASH and (crashed["workload"], crashed["seed"]) == ("w2", 1)


# -- stage C ----------------------------------------------------------------------------------------

def diverging(*students: str, answers_key: str = "[1]", workload_name: str = "w", status: str = "diverges"):
    return {TaskKey(s, "lab.ipynb", EX, workload_name, 1): {"status": status, "answers_key": answers_key}
            for s in students}


def src_of(*students: str):
    return {ExerciseKey(s, "lab.ipynb", EX): {"source": "...", "function": "f"} for s in students}


def replayer(status_of=lambda i: "replayed"):
    def replay(i):
        return {**{f: i[f] for f in ("student", "notebook", "exercise", "workload", "seed")},
                "status": status_of(i), "calls": [{"args": [i["student"]], "answer": 0}], "outcome": {"x": 1},
                "outcome_json": "{}", "wall_s": 0.1}
    return replay


def test_replay_groups_equal_answers_and_shares_the_representatives_replay_when_the_check_agrees():
    ev = {**diverging("ann", "bob", "cat"), **diverging("dan", answers_key="[2]"),
          **diverging("eve", status="equivalent")}

    def check(i):
        return {**{f: i[f] for f in ("student", "notebook", "exercise", "workload", "seed")},
                "same": i["student"] == "bob"}

    run = FakeCollector(replay=replayer(), check=check)
    replays, shared_from, full_replays = pl.replay(run, ev, src_of("ann", "bob", "cat", "dan", "eve"), False)
    assert [d for d, _ in run.jobs] == ["full replays", "dedupe: check against a replay", "full replays (own)"]
    assert [i["student"] for i in run.jobs[0][1]] == ["ann", "dan"]     # one per group; eve is equivalent
    assert [i["student"] for i in run.items("check")] == ["bob", "cat"]
    assert run.items("check")[0]["rep"] == list(TaskKey("ann", "lab.ipynb", EX, "w", 1))
    assert [i["student"] for i in run.jobs[2][1]] == ["cat"]           # answered ann's log differently
    ann, bob = TaskKey("ann", "lab.ipynb", EX, "w", 1), TaskKey("bob", "lab.ipynb", EX, "w", 1)
    assert shared_from == {bob: ann}
    assert replays[bob]["shared_with"] == ann and replays[bob]["student"] == "ann"
    assert full_replays == 3 and set(replays) == {ann, bob, TaskKey("cat", "lab.ipynb", EX, "w", 1),
                                                  TaskKey("dan", "lab.ipynb", EX, "w", 1)}


def test_replay_gives_the_members_their_own_replay_when_the_representatives_failed():
    ev = diverging("ann", "bob")
    run = FakeCollector(replay=replayer(lambda i: "error" if i["student"] == "ann" else "replayed"))
    replays, shared_from, full_replays = pl.replay(run, ev, src_of("ann", "bob"), False)
    assert [d for d, _ in run.jobs] == ["full replays", "full replays (own)"] and not run.items("check")
    assert shared_from == {} and full_replays == 2


def test_full_replay_replays_every_task_without_dedupe():
    ev = {**diverging("ann", "bob"), **diverging("cat", status="equivalent"), **diverging("dan", status="error")}
    run = FakeCollector(replay=replayer())
    replays, shared_from, full_replays = pl.replay(run, ev, src_of("ann", "bob", "cat", "dan"), True)
    assert [i["student"] for i in run.items("replay")] == ["ann", "bob", "cat"] and full_replays == 3


# -- stage D + M ------------------------------------------------------------------------------------

def test_determinism_samples_one_own_replay_per_submission_and_minimizes_each_first_difference():
    keys = [TaskKey(s, "lab.ipynb", EX, w, 1) for s in ("ann", "bob") for w in ("w1", "w2", "w3")]
    replays = {k: {"status": "replayed"} for k in keys}
    replays[keys[0]] = {"status": "replayed", "shared_with": keys[3]}   # shared: never re-run
    replays[keys[1]] = {"status": "error"}                            # failed: nothing to re-run
    ev = {keys[2]: {"status": "diverges", "first_diff": {"args": [3]}},
          keys[4]: {"status": "diverges", "first_diff": {"args": [5]}},
          keys[5]: {"status": "diverges", "first_diff": {"args": [6]}}}
    run = FakeCollector(replay=lambda i: {**i, "status": "replayed"},
                        minimize=lambda i: {**i, "reproduced": True})
    reruns, minimized, failing_first = pl.determinism_and_minimize(run, replays, ev, src_of("ann", "bob"), 0.0, 0)
    rerun_keys = [TaskKey.of(r) for r in reruns]
    assert len(rerun_keys) == 2 and {k.student for k in rerun_keys} == {"ann", "bob"}
    assert rerun_keys[0] == keys[2] and rerun_keys[1] in keys[3:]
    assert all(not i["with_slice"] and i["rerun"] for i in run.items("replay"))
    assert failing_first == {ExerciseKey("ann", "lab.ipynb", EX): {"args": [3]},
                             ExerciseKey("bob", "lab.ipynb", EX): {"args": [5]}}   # bob's first run, not w3
    assert set(minimized) == set(failing_first) and len(run.jobs) == 1
    _, _, _ = pl.determinism_and_minimize(run, replays, ev, src_of("ann", "bob"), 1.0, 0)
    assert len(run.jobs[-1][1]) == 4 + 2   # every own replay (4), the two minimizations


# -- findings ---------------------------------------------------------------------------------------

def test_task_findings_from_errors_crashes_and_reruns_one_per_kind():
    a1, a2 = TaskKey("ann", "lab.ipynb", EX, "w1", 1), TaskKey("ann", "lab.ipynb", EX, "w2", 1)
    b1 = TaskKey("bob", "lab.ipynb", EX, "w1", 1)
    ev = {a1: {"status": "error", "error": {"kind": "timeout", "detail": "slow"}},
          a2: {"status": "error", "error": {"kind": "timeout", "detail": "slower"}},   # same kind: dropped
          b1: {"status": "diverges", "nondeterministic": "asked twice"}}
    replays = {b1: {"status": "replayed", "outcome": {"x": 1, "y": 2}, "outcome_json": "A"}}
    reruns = [{**b1._asdict(), "status": "replayed", "outcome": {"x": 1, "y": 3}, "outcome_json": "B"}]
    public = {ExerciseKey("cat", "lab.ipynb", EX): {"status": "crash", "crash": "Boom"}}
    got = [(f["student"], f["kind"], f["detail"]) for f in pl.task_findings(ev, replays, reruns, public)]
    assert got == [("ann", "timeout", f"{EX}: slow"), ("bob", "nondeterministic", f"{EX}: asked twice"),
                   ("cat", "crashed", f"{EX}: public examples: Boom")]
    reruns = [{**b1._asdict(), "status": "stuck", "stuck": "waited"}]
    got = pl.task_findings({}, replays, reruns, {})
    assert got[0]["detail"] == f"{EX}: the same replay ended as replayed once and stuck once"


# -- judging and counterexamples ---------------------------------------------------------------------

REF_OUTCOME = {"invariants": {"single-master": {"applies": True, "holds": True}}, "converged": False}
BROKEN = {"invariants": {"single-master": {"applies": True, "holds": False, "violations": 2,
                                           "first": {"message": "two masters"}}}, "converged": False}


def test_judge_tasks_reference_equivalent_replayed_and_failed_tasks():
    subs = [sub("ann"), sub("bob"), sub("cat")]
    wk = RunKey("w", 7)
    refs = {wk: {"outcome": REF_OUTCOME, "calls": {EX: [{"args": [1], "answer": 1}, {"args": [2], "answer": 2}]}}}
    k = {s: TaskKey(s, "lab.ipynb", EX, "w", 7) for s in ("ann", "bob", "cat")}
    ev = {k["ann"]: {"status": "equivalent", "agree": 2, "agree_calls": [True, True]},
          k["bob"]: {"status": "diverges", "agree": 1, "agree_calls": [True, False]},
          k["cat"]: {"status": "error", "error": {"kind": "error", "detail": "ZeroDivisionError"}}}
    replays = {k["bob"]: {"status": "replayed", "outcome": BROKEN}}
    minimized = {ExerciseKey("bob", "lab.ipynb", EX): {"args": [2], "expected": 2, "got": 0, "reproduced": True}}
    counterexamples = pl.counterexamples_of(minimized, {ExerciseKey("bob", "lab.ipynb", EX):
                                                        {"args": [2, 9], "expected": 2, "got": 0}})
    cid = counterexamples[ExerciseKey("bob", "lab.ipynb", EX)]["counterexample_id"]
    assert counterexamples[ExerciseKey("bob", "lab.ipynb", EX)]["args"] == "[2]"   # the minimized call
    j = pl.judge_tasks(subs, refs, {EX: [wk]}, ev, replays, {}, counterexamples,
                       {"w": workload("w", seed=7, index=3)}, [], {EX: 2})
    rows = {(r["student"], r["property"]): r for r in j.results}
    assert rows[("ann", "agrees-with-rocketmq")]["method"] == "reference-equivalent"
    assert rows[("ann", "single-master")]["holds"] is True
    assert rows[("bob", "single-master")] == {"student": "bob", "notebook": "lab.ipynb", "exercise": EX,
                                              "workload": "w", "seed": 7, "property": "single-master",
                                              "holds": False, "method": "replayed", "counterexample_id": cid,
                                              "detail": "2 violation(s); first: two masters"}
    assert rows[("cat", "single-master")]["method"] == "error" and not rows[("cat", "single-master")]["holds"]
    assert all(type(r["method"]) is str for r in j.results)   # plain strings in the output files
    bob = ExerciseKey("bob", "lab.ipynb", EX)
    assert j.tallies[bob] == {"public-examples": [0, 2], "agrees-with-rocketmq": [1, 2, [True, False]],
                              "single-master": [0, 1]}
    assert j.tallies[ExerciseKey("cat", "lab.ipynb", EX)]["agrees-with-rocketmq"] == [0, 2, [False, False]]
    assert j.failures[bob]["single-master"] == ["hidden workload #3, seed #1: 2 violation(s); first: two masters"]
    assert j.ce_props[cid] == {"agrees-with-rocketmq", "single-master"}
    assert [r["property"] for r in pl.counterexample_rows(counterexamples, j.ce_props)] == \
        ["agrees-with-rocketmq", "single-master"]


def test_a_not_reproduced_minimization_keeps_the_first_differing_call():
    key3 = ExerciseKey("bob", "lab.ipynb", EX)
    ces = pl.counterexamples_of({key3: {"args": [2], "expected": 2, "got": 0, "reproduced": False}},
                                {key3: {"args": [2, 9], "expected": 2, "got": 0}})
    assert ces[key3]["args"] == "[2,9]" and ces[key3]["_args"] == [2, 9]
    assert pl.counterexample_rows(ces, {})[0]["property"] == "agrees-with-rocketmq"


def test_private_dirs_must_stay_out_of_the_sandbox_binds(tmp_path):
    cfg = pl.GradeConfig(submissions=str(tmp_path / "subs"), workloads=str(tmp_path / "wl"), out=str(tmp_path / "o"))
    pl.check_private_dirs(cfg, str(tmp_path / "o"), ["/usr/lib/python3"])
    with pytest.raises(ValueError, match="which the grading sandbox lets students' code read"):
        pl.check_private_dirs(cfg, str(tmp_path / "o"), [str(tmp_path)])
