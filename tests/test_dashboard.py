"""The instructor dashboard's Spark aggregations (rmqlab.grading.dashboard) on a small gradebook
directory written here in the documented format (docs of `rmqlab grade`), with every count known."""

from __future__ import annotations

import csv
import json
import os

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from rmqlab.grading import dashboard

GRADEBOOK_HEADER = ["student", "exercise", "property", "points", "max_points", "partial_credit", "passed", "total",
                    "finding"]

# (student, exercise, workload, seed, property, holds, method, counterexample_id)
RESULTS = [
    # ann: correct everywhere
    ("ann", "truncation_point", "w-crash", 1, "truncation-at-consistent-point", True, "reference-equivalent", None),
    ("ann", "truncation_point", "w-crash", 1, "no-acknowledged-loss", True, "reference-equivalent", None),
    ("ann", "truncation_point", "w-kill", 2, "truncation-at-consistent-point", True, "reference-equivalent", None),
    ("ann", "truncation_point", "w-kill", 2, "no-acknowledged-loss", None, "reference-equivalent", None),
    # bob: truncates to the larger end offset: fails the truncation property on both workloads
    ("bob", "truncation_point", "w-crash", 1, "truncation-at-consistent-point", False, "replayed", "ce-larger"),
    ("bob", "truncation_point", "w-crash", 1, "no-acknowledged-loss", True, "replayed", None),
    ("bob", "truncation_point", "w-kill", 2, "truncation-at-consistent-point", False, "replayed", "ce-larger"),
    ("bob", "truncation_point", "w-kill", 2, "no-acknowledged-loss", None, "replayed", None),
    # cyd: the same mistake (same minimized call), on one workload
    ("cyd", "truncation_point", "w-crash", 1, "truncation-at-consistent-point", False, "replayed", "ce-larger"),
    ("cyd", "truncation_point", "w-crash", 1, "no-acknowledged-loss", False, "replayed", None),
    ("cyd", "truncation_point", "w-kill", 2, "truncation-at-consistent-point", True, "replayed", None),
    ("cyd", "truncation_point", "w-kill", 2, "no-acknowledged-loss", None, "replayed", None),
    # dan: raises on w-kill (the grader writes holds=false, method "error"), elect_master wrong on w-crash
    ("dan", "truncation_point", "w-crash", 1, "truncation-at-consistent-point", True, "reference-equivalent", None),
    ("dan", "truncation_point", "w-crash", 1, "no-acknowledged-loss", True, "reference-equivalent", None),
    ("dan", "truncation_point", "w-kill", 2, "truncation-at-consistent-point", False, "error", None),
    ("dan", "elect_master", "w-crash", 1, "elected-in-sync-state-set", False, "replayed", "ce-epoch"),
    ("dan", "elect_master", "w-crash", 1, "agrees-with-rocketmq", False, "replayed", "ce-epoch"),
]
COUNTEREXAMPLES = [
    ("ce-larger", "truncation_point", '{"args":[[[1,0]],800,[[1,0]],1000],"expected":800,"got":1000}',
     "[[[1, 0]], 800, [[1, 0]], 1000]", "800", "1000", "truncation-at-consistent-point"),
    ("ce-epoch", "elect_master", '{"args":[[[1,[2,10,0]],[2,[1,20,0]]],null,null],"expected":1,"got":2}',
     "[[[1, [2, 10, 0]], [2, [1, 20, 0]]], null, null]", "1", "2", "elected-in-sync-state-set"),
]
FINDINGS = [("dan", "dan.ipynb", "error", "ZeroDivisionError on w-kill"),
            ("eve", "eve.ipynb", "sandbox-violation", "open('/hidden/w.parquet')"),
            ("fay", "fay.ipynb", "sandbox-violation", "socket(AF_INET)"),
            ("fay", "fay.ipynb", "timeout", 'no answer within 1 s, "an endless loop?"\nTraceback (most recent call last):\n  ...')]
GRADEBOOK = [("ann", "truncation_point", "truncation-at-consistent-point", 10, 10, 1.0, 2, 2, ""),
             ("ann", "truncation_point", "no-acknowledged-loss", 5, 5, 1.0, 1, 1, ""),
             ("bob", "truncation_point", "truncation-at-consistent-point", 0, 10, 0.0, 0, 2, ""),
             ("bob", "truncation_point", "no-acknowledged-loss", 5, 5, 1.0, 1, 1, ""),
             ("cyd", "truncation_point", "truncation-at-consistent-point", 5, 10, 0.5, 1, 2, ""),
             ("cyd", "truncation_point", "no-acknowledged-loss", 0, 5, 0.0, 0, 1, ""),
             ("dan", "truncation_point", "truncation-at-consistent-point", 5, 10, 0.5, 1, 2, "error"),
             ("dan", "truncation_point", "no-acknowledged-loss", 5, 5, 1.0, 1, 1, ""),
             ("dan", "elect_master", "elected-in-sync-state-set", 0, 10, 0.0, 0, 1, "")]


def write_gradebook(path, results=RESULTS, gradebook=GRADEBOOK, findings=FINDINGS, run=None) -> str:
    os.makedirs(path, exist_ok=True)
    with open(os.path.join(path, "gradebook.csv"), "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(GRADEBOOK_HEADER)
        w.writerows(gradebook)
    with open(os.path.join(path, "findings.csv"), "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["student", "notebook", "kind", "detail"])
        w.writerows(findings)
    cols = list(zip(*results))
    pq.write_table(pa.table({
        "student": pa.array(cols[0], pa.string()), "notebook": pa.array([f"{s}.ipynb" for s in cols[0]], pa.string()),
        "exercise": pa.array(cols[1], pa.string()), "workload": pa.array(cols[2], pa.string()),
        "seed": pa.array(cols[3], pa.int64()), "property": pa.array(cols[4], pa.string()),
        "holds": pa.array(cols[5], pa.bool_()), "method": pa.array(cols[6], pa.string()),
        "counterexample_id": pa.array(cols[7], pa.string()), "detail": pa.array([""] * len(results), pa.string()),
    }), os.path.join(path, "results.parquet"))
    ce = list(zip(*COUNTEREXAMPLES))
    names = ["counterexample_id", "exercise", "signature", "args", "expected", "got", "property"]
    pq.write_table(pa.table({n: pa.array(c, pa.string()) for n, c in zip(names, ce)}),
                   os.path.join(path, "counterexamples.parquet"))
    with open(os.path.join(path, "run.json"), "w") as f:
        json.dump(run if run is not None else {"workloads": 2, "config": {"workloads": "/hidden/course-2026"}}, f)
    return str(path)


@pytest.fixture(scope="module")
def spark():
    # One session for the module: the first costs seconds, later ones a fraction of one.
    s = dashboard.spark_session("rmqlab-test-dashboard")
    yield s


@pytest.fixture(scope="module")
def gb(spark, tmp_path_factory):
    return dashboard.load_gradebook(spark, write_gradebook(tmp_path_factory.mktemp("grade")))


@pytest.mark.spark
def test_summary_counts_the_class(gb):
    s = gb.summary()
    assert (s["students"], s["exercises"], s["workloads"], s["seeds_per_workload"], s["result_rows"]) == (4, 2, 2, 1, 17)
    assert s["methods"] == {"error": 1, "reference-equivalent": 6, "replayed": 10}
    assert (s["gradebook_rows"], s["findings"], s["counterexamples"]) == (9, 4, 2)


@pytest.mark.spark
def test_failures_by_workload_counts_students_failing_and_graded(gb):
    rows = {(r["workload"], r["property"]): (r["failing"], r["errors"], r["students"])
            for r in dashboard.failures_by_workload(gb)}
    assert rows == {
        ("w-crash", "agrees-with-rocketmq"): (1, 0, 1),
        ("w-crash", "elected-in-sync-state-set"): (1, 0, 1),
        ("w-crash", "no-acknowledged-loss"): (1, 0, 4),          # cyd
        ("w-crash", "truncation-at-consistent-point"): (2, 0, 4),  # bob, cyd
        # dan's task ended in an error: counted apart; no-acknowledged-loss does not apply on w-kill
        ("w-kill", "truncation-at-consistent-point"): (1, 1, 4),   # bob; dan
    }
    fig = dashboard.failure_heatmap(dashboard.failures_by_workload(gb))
    heat = fig.data[0]
    assert list(heat.y) == ["w-crash", "w-kill"] and list(heat.x) == [
        "agrees-with-rocketmq", "elected-in-sync-state-set", "no-acknowledged-loss", "truncation-at-consistent-point",
        dashboard.ERROR_COLUMN]
    assert [list(r) for r in heat.z] == [[1, 1, 1, 2, 0], [None, None, None, 1, 1]]
    assert heat.text[1][3] == "1/4" and heat.text[1][0] == "" and heat.text[1][4] == "1/4"


@pytest.mark.spark
def test_points_per_exercise(gb):
    rows = dashboard.points_by_exercise(gb)
    assert [(r["exercise"], r["student"], r["points"], r["max_points"]) for r in rows] == [
        ("elect_master", "dan", 0.0, 10.0),
        ("truncation_point", "ann", 15.0, 15.0), ("truncation_point", "bob", 5.0, 15.0),
        ("truncation_point", "cyd", 5.0, 15.0), ("truncation_point", "dan", 10.0, 15.0)]
    summary = {r["exercise"]: r for r in dashboard.points_summary(gb)}
    t = summary["truncation_point"]
    assert (t["students"], t["max_points"], t["min"], t["median"], t["max"], t["full_marks"]) == (4, 15.0, 5.0, 5.0, 15.0, 1)
    assert t["mean"] == 8.75
    fig = dashboard.points_figure(rows)
    assert [tr.name for tr in fig.data] == ["elect_master", "truncation_point"]
    assert list(fig.data[1].y) == [15.0, 5.0, 5.0, 10.0]


@pytest.mark.spark
def test_common_counterexamples_are_counted_per_student_and_written_out(gb):
    rows = dashboard.common_counterexamples(gb)
    assert [(r["exercise"], r["students"], r["workloads"]) for r in rows] == [
        ("truncation_point", 2, 2), ("elect_master", 1, 1)]
    assert rows[0]["properties"] == ["truncation-at-consistent-point"]
    assert rows[1]["properties"] == ["agrees-with-rocketmq", "elected-in-sync-state-set"]
    # the call is readable: the registry's function and argument names, the JSON values
    assert rows[0]["call"] == ("truncation_point(local=[[1, 0]], local_max=800, master=[[1, 0]], master_max=1000)"
                               "  →  expected 800, got 1000")
    assert dashboard.common_counterexamples(gb, limit=1) == rows[:1]


def test_readable_call_of_an_unregistered_exercise():
    text = dashboard.readable_call("no_such_exercise", '{"a": [1, 2], "b": null}', "3", "4")
    assert text == "no_such_exercise(a=[1, 2], b=null)  →  expected 3, got 4"
    assert dashboard.readable_call("no_such_exercise", "[1, [2]]", "3", "4") == "no_such_exercise(1, [2])  →  expected 3, got 4"


@pytest.mark.spark
def test_findings_by_kind(gb):
    # a detail spanning lines, with quotes, is one field (the grader writes tracebacks there)
    details = [r["detail"] for r in gb.findings.orderBy("student", "kind").collect()]
    assert details[-1] == 'no answer within 1 s, "an endless loop?"\nTraceback (most recent call last):\n  ...'
    rows = dashboard.findings_by_kind(gb)
    assert [(r["kind"], r["students"], r["findings"], r["who"]) for r in rows] == [
        ("error", 1, 1, ["dan"]), ("sandbox-violation", 2, 2, ["eve", "fay"]), ("timeout", 1, 1, ["fay"])]
    assert list(dashboard.findings_figure(rows).data[0].y) == [1, 2, 1]


@pytest.mark.real
@pytest.mark.spark
def test_scenario_is_the_most_failed_case_with_its_replay_command(gb):
    s = dashboard.scenario(gb)
    # w-crash seed 1 truncation: bob and cyd (2); dan's error on w-kill is not a failure
    assert (s.workload, s.seed, s.exercise, s.property, s.students) == (
        "w-crash", 1, "truncation_point", "truncation-at-consistent-point", 2)
    assert s.replay_command == "rmqlab replay /hidden/course-2026/w-crash.parquet --seed 1"
    assert s.exercise_replay_command.startswith(s.replay_command + " --exercise truncation_point --solution ")
    assert s.papermill_parameters == {"seed": 1, "grading": False}
    assert s.lab == "04-log-truncation"  # the registry's lab for truncation_point
    assert s.papermill_command == ("papermill labs/04-log-truncation.ipynb workshop/04-log-truncation-seed1.ipynb "
                                   "-p seed 1 -p grading False")
    assert s.lab_url == "http://127.0.0.1:8888/lab/tree/04-log-truncation-seed1.ipynb"
    assert s.replay_command in s.markdown()
    other = dashboard.scenario(gb, exercise="elect_master", workloads_dir="/srv/w")
    assert (other.workload, other.property, other.replay_command) == (
        "w-crash", "elected-in-sync-state-set", "rmqlab replay /srv/w/w-crash.parquet --seed 1")
    # the scenario of a counterexample: where the students who share it failed
    sig = dashboard.common_counterexamples(gb)[1]["signature"]
    by_ce = dashboard.scenario(gb, signature=sig)
    # dan broke an invariant and disagreed with RocketMQ's rule: the invariant is the scenario
    assert (by_ce.workload, by_ce.exercise, by_ce.property, by_ce.students) == (
        "w-crash", "elect_master", "elected-in-sync-state-set", 1)
    with pytest.raises(ValueError, match="no failing result matches {'workload': 'w-none'}"):
        dashboard.scenario(gb, workload="w-none")


@pytest.mark.spark
def test_bad_gradebook_directories_are_named(spark, tmp_path):
    with pytest.raises(ValueError, match="no such directory"):
        dashboard.load_gradebook(spark, str(tmp_path / "absent"))
    path = write_gradebook(tmp_path / "g")
    os.remove(os.path.join(path, "findings.csv"))
    with pytest.raises(ValueError, match="findings.csv is missing"):
        dashboard.load_gradebook(spark, path)
    path = write_gradebook(tmp_path / "h")
    with open(os.path.join(path, "gradebook.csv"), "w") as f:
        f.write("student,points\nann,3\n")
    with pytest.raises(ValueError, match="gradebook.csv: header"):
        dashboard.load_gradebook(spark, path)
    path = write_gradebook(tmp_path / "i")
    pq.write_table(pa.table({"student": ["ann"]}), os.path.join(path, "results.parquet"))
    with pytest.raises(ValueError, match="results.parquet: missing column"):
        dashboard.load_gradebook(spark, path)


def test_table_is_plain_and_stable():
    text = dashboard.table([{"a": 1, "b": [1, 2]}, {"a": 22, "b": 0.5}])
    assert text.splitlines() == ["a   b", "--  ----", "1   1, 2", "22  0.5"]
    assert dashboard.table([]) == "(none)"


def test_committed_dashboard_notebook_is_in_its_committed_form():
    """Like the labs (tests/test_lab_infra.py, which globs labs/*.ipynb only): under 1 MiB, no widget
    state, a parameters cell with seed and grading, objectives, a link to a public source; and it
    reads the committed sample gradebook by default."""
    import nbformat

    from rmqlab.lab.notebooks import problems

    path = os.path.join(dashboard.REPO_ROOT, "labs", "instructor", "class-dashboard.ipynb")
    assert problems(path) == []
    params = next(c for c in nbformat.read(path, as_version=4).cells if "parameters" in c.metadata.get("tags", []))
    assert 'gradebook_dir = "datasets/sample-grading"' in params.source
    for name in dashboard.GRADEBOOK_FILES + ("run.json",):
        assert os.path.isfile(os.path.join(dashboard.repo_path("datasets/sample-grading"), name)), name


def test_the_dashboard_cites_each_property_where_the_source_states_it():
    """allAckInSyncStateSet's guarantee is stated where the parameter is defined: the controller-mode
    deployment guide's 「Broker 部署」 (and RIP-44's "A solution without losing messages") — not the
    design document's 「基本概念与流程」, which does not mention it."""
    import re

    import nbformat

    path = os.path.join(dashboard.REPO_ROOT, "labs", "instructor", "class-dashboard.ipynb")
    intro = re.sub(r"\s+", " ", nbformat.read(path, as_version=4).cells[0].source)
    cited = intro[intro.index("no acknowledged loss under `allAckInSyncStateSet`"):]
    cited = cited[:cited.index("; the classic")]
    assert "03autoswitchdeploy" in cited and "「Broker 部署」" in cited
    assert "基本概念与流程" not in cited
