"""`rmqlab grade` end to end with local Spark: sample submissions of every kind —
correct, subtly wrong, nondeterministic, raising, looping forever, reading the hidden workloads,
opening a socket — plus notebooks that fail, hang, flood output or lack the function, graded on a
hidden workload; the expected grades and findings are asserted. One Spark session for the module.
"""

from __future__ import annotations

import csv
import json
import os

import nbformat
import pyarrow.parquet as pq
import pytest

pytest.importorskip("pyspark")

from rmqlab.grading import extract as ext  # noqa: E402
from rmqlab.grading import feedback as fb  # noqa: E402
from rmqlab.grading import gradebook as gb  # noqa: E402
from rmqlab.grading.minimize import minimize_call  # noqa: E402
from rmqlab.grading.samples import VARIANTS, make_submission  # noqa: E402
from rmqlab.lab.exercises import EXERCISES  # noqa: E402

# The hidden workload: the master is cut off, a new master is elected, and the old one, ahead of
# it in epoch 1, comes back: its return handshake asks truncation_point, and the call that cuts
# is where "larger end" goes wrong.
WORKLOAD = "ctrl-embedded-partition-master"
EX = "truncation_point"
LAB04 = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "labs", "04-log-truncation.ipynb")


def _need_jail():
    """Students' code runs only under bubblewrap; without it grading refuses (test_grading_sandbox)."""
    from rmqlab.lab.exercises import jail
    if not jail.available():
        pytest.skip("bubblewrap cannot start a sandbox here")


def _nb(variant: str):
    return make_submission(None, {EX: VARIANTS[EX][variant].source})


@pytest.fixture(scope="module")
def spark():
    _need_jail()
    from rmqlab.spark.session import get_spark, stop_spark
    session = get_spark("local[2]")
    yield session
    stop_spark()


@pytest.fixture(scope="module")
def hidden(tmp_path_factory):
    from rmqlab.workload import RecordedWorkload, save_workload
    from rmqlab.workload.catalog import CATALOG
    d = tmp_path_factory.mktemp("hidden-workloads")
    # a spec-only file (no recorded trace): the grader re-runs the inputs
    save_workload(str(d / f"{WORKLOAD}.parquet"), RecordedWorkload(CATALOG[WORKLOAD], [], None, {"test": True}))
    return d


@pytest.fixture(scope="module")
def graded(spark, hidden, tmp_path_factory):
    subs = tmp_path_factory.mktemp("submissions")
    for student, variant in [("alice", "correct"), ("bob", "correct-2"), ("chen", "correct-3"),
                             ("carol", "larger-end"), ("carl", "larger-end"), ("dave", "nondeterministic"),
                             ("erin", "raising"), ("frank", "looping"), ("grace", "reading"),
                             ("heidi", "socket")]:
        nbformat.write(_nb(variant), str(subs / f"{student}.ipynb"))
    # a student folder with a notebook that floods its output before defining a correct function
    os.makedirs(subs / "flo")
    nb = _nb("correct")
    nb.cells.insert(1, nbformat.v4.new_code_cell("for i in range(3000):\n    print('x' * 5000)"))
    nbformat.write(nb, str(subs / "flo" / "lab04.ipynb"))
    nb = _nb("correct")   # hangs at the top level: the notebook's time limit
    nb.cells.insert(1, nbformat.v4.new_code_cell("while True:\n    pass"))
    nbformat.write(nb, str(subs / "hank.ipynb"))
    nb = _nb("correct")   # a cell that raises
    nb.cells.insert(1, nbformat.v4.new_code_cell("import no_such_module_rmqlab"))
    nbformat.write(nb, str(subs / "ines.ipynb"))
    # looks through its interpreter's memory for anything of the hidden workloads; answers wrong if it
    # finds something (the jailed interpreter is exec'd: it shares nothing with the Spark worker)
    snoop = VARIANTS[EX]["correct"].source.replace("def truncation_point(", "def _right(") + (
        "\n\nimport gc\n\n\ndef truncation_point(local, local_max, master, master_max):\n"
        "    seen = [o for o in gc.get_objects() if type(o).__name__ in ('RecordedWorkload', 'Workload', "
        "'TraceEvent', 'Simulation') or isinstance(o, bytes) and o[:4] == b'PAR1']\n"
        "    return -12345 if seen else _right(local, local_max, master, master_max)\n")
    nbformat.write(make_submission(None, {EX: snoop}), str(subs / "sam.ipynb"))
    nb = _nb("correct")   # the exercise cell defines something else
    nb.cells[-1].source = "def truncation_pt(a, b, c, d):\n    return -1\n"
    nbformat.write(nb, str(subs / "jack.ipynb"))

    from rmqlab.grading.pipeline import GradeConfig, grade
    out = tmp_path_factory.mktemp("out")
    summary = grade(GradeConfig(submissions=str(subs), workloads=str(hidden), out=str(out), notebook_time_limit=6,
                                progress=False), spark=spark)
    with open(out / "gradebook.csv") as f:
        book = list(csv.DictReader(f))
    with open(out / "findings.csv") as f:
        findings = list(csv.DictReader(f))
    return {"out": out, "summary": summary, "book": book, "findings": findings,
            "results": pq.read_table(out / "results.parquet").to_pylist(),
            "counterexamples": pq.read_table(out / "counterexamples.parquet").to_pylist()}


def _rows(g, student):
    return [r for r in g["book"] if r["student"] == student]


def _kinds(g, student):
    return {f["kind"] for f in g["findings"] if f["student"] == student}


@pytest.mark.real
@pytest.mark.spark
def test_correct_submissions_get_full_marks(graded):
    for student in ("alice", "bob", "chen", "flo", "sam"):
        rows = _rows(graded, student)
        props = {r["property"] for r in rows}
        assert {"public-examples", "agrees-with-rocketmq", "truncation-at-consistent-point", "recovers"} <= props
        assert all(float(r["points"]) == float(r["max_points"]) and r["passed"] == r["total"] for r in rows), rows
        assert not _kinds(graded, student)
    # their outcome is the reference's, without a replay
    methods = {r["method"] for r in graded["results"] if r["student"] == "alice"}
    assert methods == {"reference-equivalent"}


@pytest.mark.real
@pytest.mark.spark
def test_subtly_wrong_names_the_property_and_a_minimized_counterexample(graded):
    rows = {r["property"]: r for r in _rows(graded, "carol")}
    assert float(rows["truncation-at-consistent-point"]["partial_credit"]) == 0.0
    assert float(rows["agrees-with-rocketmq"]["partial_credit"]) < 1.0
    assert float(rows["public-examples"]["partial_credit"]) < 1.0
    bad = [r for r in graded["results"] if r["student"] == "carol" and r["holds"] is False]
    assert {r["method"] for r in bad} == {"replayed"}
    cid = {r["counterexample_id"] for r in bad if r["property"] == "truncation-at-consistent-point"}
    assert len(cid) == 1 and None not in cid
    ce = next(c for c in graded["counterexamples"] if c["counterexample_id"] in cid)
    args, expected, got = json.loads(ce["args"]), json.loads(ce["expected"]), json.loads(ce["got"])
    ex = EXERCISES[EX]
    assert ex.reference(*args) == expected and got != expected
    assert got > expected   # "takes the larger end"
    # carl's identical function shares carol's replay (dedupe) and gets the same grades
    assert graded["summary"]["replays_shared_by_dedupe"] >= 1
    assert [(r["property"], r["points"]) for r in _rows(graded, "carl")] == \
        [(r["property"], r["points"]) for r in _rows(graded, "carol")]
    page = (graded["out"] / "feedback" / "carol.html").read_text()
    assert "Violated: truncation-at-consistent-point" in page and "Smallest counterexample" in page
    assert "plotly.min.js" in page and (graded["out"] / "feedback" / "plotly.min.js").exists()


@pytest.mark.real
@pytest.mark.spark
def test_misbehaving_functions_become_findings_and_zero(graded):
    assert "nondeterministic" in _kinds(graded, "dave")
    for student, kind in [("erin", "error"), ("frank", "timeout"), ("grace", "sandbox-violation"),
                          ("heidi", "sandbox-violation")]:
        assert kind in _kinds(graded, student), (student, graded["findings"])
        rows = {r["property"]: r for r in _rows(graded, student)}
        assert float(rows["agrees-with-rocketmq"]["points"]) == 0.0
        assert float(rows["truncation-at-consistent-point"]["points"]) == 0.0
        assert kind in rows["agrees-with-rocketmq"]["finding"]
    grace = " ".join(f["detail"] for f in graded["findings"] if f["student"] == "grace")
    assert "parquet" in grace   # what it tried is named


@pytest.mark.real
@pytest.mark.spark
def test_notebooks_that_fail_hang_or_lack_the_function(graded):
    assert _kinds(graded, "hank") == {"timeout"}
    assert _kinds(graded, "ines") == {"notebook-failed"}
    assert "no_such_module_rmqlab" in next(f["detail"] for f in graded["findings"] if f["student"] == "ines")
    assert _kinds(graded, "jack") == {"missing-function"}
    for student in ("hank", "ines", "jack"):
        rows = _rows(graded, student)
        assert rows and all(float(r["points"]) == 0.0 for r in rows)


@pytest.mark.real
@pytest.mark.spark
def test_output_files_and_run_summary(graded):
    out, s = graded["out"], graded["summary"]
    assert list(graded["book"][0]) == list(gb.GRADEBOOK_COLUMNS)
    assert list(graded["findings"][0]) == list(gb.FINDINGS_COLUMNS)
    assert set(graded["results"][0]) == {"student", "notebook", "exercise", "workload", "seed", "property", "holds",
                                         "method", "counterexample_id", "detail"}
    run = json.loads((out / "run.json").read_text())
    assert run["reference_runs"] == 1 and run["workloads"] == 1 and run["notebooks"] == 15
    assert run["full_replays"] >= 2 and run["reference_equivalent"] >= 4 and run["determinism_reruns"] >= 1
    assert {"extraction", "spark_start", "stage_b_evaluate", "stage_c_replay"} <= set(run["timings_s"])
    assert s == run
    with open(out / "totals.csv") as f:
        totals = {r["student"]: float(r["points"]) for r in csv.DictReader(f)}
    assert totals["alice"] == sum(float(r["max_points"]) for r in _rows(graded, "alice")) > totals["carol"]


@pytest.mark.real
@pytest.mark.spark
def test_feedback_does_not_reveal_the_hidden_workload(graded, hidden):
    from rmqlab.workload.catalog import CATALOG
    w = CATALOG[WORKLOAD]
    secrets = [w.name, w.description, str(hidden), os.path.realpath(str(hidden))]
    pages = list((graded["out"] / "feedback").glob("*.html"))
    assert len(pages) == 15
    for page in pages:
        text = page.read_text()
        for secret in secrets:
            assert secret not in text, (page.name, secret)
        assert "broker-n0" not in text   # nodes are re-labelled
    assert "hidden workload #1" in (graded["out"] / "feedback" / "carol.html").read_text()


@pytest.mark.real
@pytest.mark.spark
def test_reference_equivalent_shortcut_equals_a_full_replay(spark, hidden):
    """The shortcut's claim, checked: a correct submission's full replay has the reference run's
    outcome byte for byte."""
    from rmqlab.grading.pipeline import collect
    data = (hidden / f"{WORKLOAD}.parquet").read_bytes()
    ctx = {"workloads": spark.sparkContext.broadcast({WORKLOAD: data}), "time_limit": 1.0, "memory_mb": 512}
    seed = 27
    res = collect(spark.sparkContext, [
        {"stage": "reference", "workload": WORKLOAD, "seed": seed, "exercises": [EX]},
        {"stage": "replay", "student": "s", "notebook": "n", "exercise": EX, "workload": WORKLOAD, "seed": seed,
         "source": VARIANTS[EX]["correct-2"].source, "function": EX}], ctx, "shortcut check", False)
    ref, rep = res
    assert ref["calls"][EX] and rep["status"] == "replayed", rep
    assert rep["outcome_json"] == ref["outcome_json"]
    assert [c["answer"] for c in rep["calls"]] == [c["answer"] for c in ref["calls"][EX]]


# --- pieces without Spark -------------------------------------------------------------------------

@pytest.mark.real
def test_extraction_carries_helpers_constants_and_imports(tmp_path):
    _need_jail()
    subs = tmp_path / "subs"
    subs.mkdir()
    # the real lab 04 notebook (its cells tagged rmqlab-grading-skip do not run), with a solution
    # that uses `import itertools as it`, a module constant and a nested helper
    nb = make_submission(LAB04, {EX: VARIANTS[EX]["correct-3"].source})
    assert nb.metadata["rmqlab"]["exercises"] == [EX]
    nb.cells.insert(1, nbformat.v4.new_code_cell("raise RuntimeError('skipped under grading')",
                                                 metadata={"tags": [ext.SKIP_TAG]}))
    nbformat.write(nb, str(subs / "zoe.ipynb"))
    [x] = ext.extract_all(ext.find_submissions(str(subs)), {EX: EX}, scratch_root=str(tmp_path / "scratch"),
                          time_limit=30)
    assert not x.findings, x.findings
    src = x.functions[EX]["source"]
    assert "import itertools as it" in src and "NO_POINT = -1" in src
    ns: dict = {}
    exec(src, ns)   # runs alone in a fresh namespace
    ex = EXERCISES[EX]
    for e in ex.public_examples:
        assert ns[EX](*ex.arg_adapter(json.loads(json.dumps(list(e.args))))) == e.expected


@pytest.mark.real
def test_the_notebook_kernel_is_sandboxed(tmp_path):
    _need_jail()
    secret = tmp_path / "hidden"
    secret.mkdir()
    (secret / "w.parquet").write_bytes(b"PAR1")
    subs = tmp_path / "subs"
    subs.mkdir()
    for name, code in [("reader", f"open({str(secret / 'w.parquet')!r}).read()"),
                       ("sneaky", f"try:\n    open({str(secret / 'w.parquet')!r})\nexcept OSError:\n    pass"),
                       ("socket", "import socket\nsocket.socket().connect(('127.0.0.1', 9))")]:
        nb = _nb("correct")
        nb.cells.insert(1, nbformat.v4.new_code_cell(code))
        nbformat.write(nb, str(subs / f"{name}.ipynb"))
    got = {x.student: x for x in ext.extract_all(ext.find_submissions(str(subs)), {EX: EX},
                                                  scratch_root=str(tmp_path / "scratch"),
                                                  time_limit=30)}
    assert [f["kind"] for f in got["reader"].findings] == ["notebook-failed"]
    detail = got["reader"].findings[0]["detail"]
    assert "PermissionError" in detail and "w.parquet" in detail
    assert [f["kind"] for f in got["socket"].findings] == ["notebook-failed"]
    # caught by the notebook: still a finding, and the function is still extracted
    assert [f["kind"] for f in got["sneaky"].findings] == ["sandbox-violation"] and EX in got["sneaky"].functions


def test_minimize_keeps_the_disagreement_and_shrinks():
    ex = EXERCISES[EX]
    ns: dict = {}
    exec(VARIANTS[EX]["larger-end"].source, ns)

    def student(*args):
        return ns[EX](*ex.arg_adapter(list(args)))

    args = [[[1, 0], [2, 500]], 900, [[1, 0], [2, 500], [3, 800]], 1200]
    small, expected, got, asked, reproduced = minimize_call(student, ex, args, max_calls=100)
    assert reproduced and asked <= 100
    assert expected == ex.reference(*small) and got == student(*small) and got != expected
    assert len(json.dumps(small)) < len(json.dumps(args))


def test_relabelled_events_hide_names_and_addresses():
    recs = [{"seq": 0, "time_ms": 5000.0, "node": "broker-n0", "kind": "node.start",
             "fields": {"addr": "127.0.0.1:30911"}},
            {"seq": 1, "time_ms": 5001.0, "node": "controller-n1", "kind": "frame.send",
             "fields": {"proto": "remoting", "peer": "127.0.0.1:30911", "code": 7, "topic": "secret-topic",
                        "reason": "broker-n0 is my-hidden-workload's master"}}]
    events, _ = fb.relabel_events(recs, ["my-hidden-workload"])
    text = json.dumps([e.to_record() for e in events])
    assert "broker-n0" not in text and "127.0.0.1" not in text and "secret-topic" not in text
    assert "my-hidden-workload" not in text and "replica A" in text and "controller 1" in text
    assert events[0].time_ms == 0.0


@pytest.mark.real
@pytest.mark.spark
def test_shipped_package_boots_a_worker_without_rmqlab(tmp_path):
    """What a cluster worker does (spark_session.ship_package/boot_task): rmqlab not installed, the
    archive unpacked in its working directory; the by-value task function finds it there, and
    rmqlab.cluster finds conf/ beside the package."""
    import site
    import subprocess
    import sys
    import tarfile

    from pyspark import cloudpickle

    from rmqlab.spark.session import ARCHIVE_NAME, boot_task, package_archive
    work = tmp_path / "work"
    (work / ARCHIVE_NAME).mkdir(parents=True)
    with tarfile.open(package_archive(str(tmp_path))) as t:
        t.extractall(work / ARCHIVE_NAME)
    (tmp_path / "task.pkl").write_bytes(cloudpickle.dumps(boot_task("rmqlab.grading.minimize", "signature")))
    sp = [p for p in site.getsitepackages() if p.endswith("site-packages")][0]
    code = (f"import sys; sys.path.append({sp!r}); import importlib.util, os, pickle\n"
            "assert importlib.util.find_spec('rmqlab') is None\n"
            "print(pickle.load(open('../task.pkl', 'rb'))([1], 2, 3))\n"
            "import rmqlab.cluster; print(os.path.isdir(rmqlab.cluster.CONF_DIR), rmqlab.__file__)\n")
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}   # a worker without rmqlab on its path
    r = subprocess.run([sys.executable, "-S", "-c", code], cwd=work, capture_output=True, text=True, timeout=60,
                       env=env)
    assert r.returncode == 0, r.stderr[-2000:]
    lines = r.stdout.splitlines()
    assert lines[0] == '{"args":[1],"expected":2,"got":3}'
    assert lines[1].startswith("True ") and str(work / ARCHIVE_NAME) in lines[1]


def test_bad_input_is_a_clear_error(tmp_path):
    from rmqlab.grading.pipeline import load_workloads
    with pytest.raises(ValueError, match="is not a directory"):
        load_workloads(str(tmp_path / "nowhere"))
    with pytest.raises(ValueError, match="no .parquet"):
        load_workloads(str(tmp_path))
    (tmp_path / "broken.parquet").write_bytes(b"not parquet")
    with pytest.raises(ValueError, match="broken.parquet"):
        load_workloads(str(tmp_path))


def test_judge_recovers_with_slack():
    ref = {"converged": True, "recovery_ms": 1000.0, "invariants": {}}
    assert gb.judge({"converged": True, "recovery_ms": 2000.0}, ref, "recovers")[0]
    assert not gb.judge({"converged": True, "recovery_ms": 9000.0}, ref, "recovers")[0]
    assert not gb.judge({"converged": False, "recovery_ms": None}, ref, "recovers")[0]
    assert gb.applicable_properties({"converged": False, "invariants": {
        "single-master": {"applies": True, "holds": True},
        "no-acknowledged-loss": {"applies": True, "holds": False}}}) == ["single-master"]
