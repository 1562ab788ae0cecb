"""The grading policy (rmqlab.grading.gradebook) against functions that do nothing, and the filter
every student-visible text goes through (rmqlab.grading.feedback.OutputFilter).

Policy: the exercises' functions are asked the calls RocketMQ's rule answered in three reference
runs (a controller-mode crash, a 2m-2s-sync kill and an acting-master kill, recorded here as the
grader's stage A does), in process, like the grader's stage B; every outcome property is assumed to HOLD for every function
— the worst case for the policy, since a function that keeps the cluster still breaks no safety
invariant. Do-nothing functions must still score at most DO_NOTHING_MAX of 11; RocketMQ-equivalent
samples full marks; the subtly wrong samples in between.

Filter: crafted findings (hidden names in other cases, paths, copied bytes as raw text, bytes repr,
hex and base64, floods) through the filter, a feedback page and the CSV/Parquet writers; then a tiny
class graded end to end whose every output file is searched for the hidden directory's names.
"""

from __future__ import annotations

import base64
import csv
import json
import os
import random
import signal

import pyarrow.parquet as pq
import pytest

from rmqlab.grading import feedback as fb
from rmqlab.grading import gradebook as gb
from rmqlab.grading.samples import VARIANTS, make_submission
from rmqlab.grading.tasks import key
from rmqlab.lab.exercises import EXERCISES, combine

DO_NOTHING_MAX = 1.0
WORKLOADS = ("ctrl-standalone-crash-master", "sync-kill-master", "acting-kill-master")
MAX_POINTS = sum(p.max_points for p in gb.PROPERTIES.values())

# Do-nothing functions of every plausible kind, per exercise (a body after the signature).
_COMMON = {"None": "return None", "-1": "return -1", "0": "return 0", "-7": "return -7", "empty list": "return []",
           "True": "return True", "False": "return False", "raises": "raise NotImplementedError('later')",
           "sleeps": "import time\n    time.sleep(3600)"}
STUBS = {
    "truncation_point": {**_COMMON, "local end": "return local_max", "master end": "return master_max"},
    "elect_master": {**_COMMON, "first candidate": "return candidates[0][0] if candidates else None",
                     "last candidate": "return candidates[-1][0] if candidates else None",
                     "old master": "return old_master", "preferred": "return prefer_broker_id"},
    "sync_state_set": {**_COMMON, "unchanged": "return sync_state_set", "master only": "return [master_id]"},
    "transfer_ok": {**_COMMON, "acks wanted": "return ack_nums"},
    "acting_master": {**_COMMON, "smallest id": "return min(broker_ids) if broker_ids else None",
                      "first slave": "return 1"},
}
_SIGNATURE = {"truncation_point": "truncation_point(local, local_max, master, master_max)",
              "elect_master": "elect_master(candidates, old_master, prefer_broker_id)",
              "sync_state_set": "new_sync_state_set(sync_state_set, master_id, slaves, confirm_offset, "
                                "epoch_start_offset, now_ms, max_not_catchup_ms)",
              "transfer_ok": "transfer_ok(next_offset, ack_nums, slave_ack_offsets, push2slave_max_offset)",
              "acting_master": "acting_master(topic, broker_ids, enable_acting_master, perm)"}


def _stub_source(exercise: str, body: str) -> str:
    return f"def {_SIGNATURE[exercise]}:\n    {body}\n"


@pytest.fixture(scope="module")
def hidden_calls():
    """{exercise: the calls RocketMQ's rule answered in the reference runs, chained}."""
    from rmqlab.workload import run_workload
    from rmqlab.workload.catalog import CATALOG
    out: dict[str, list] = {}
    for name in WORKLOADS:
        w = CATALOG[name]
        names = [n for n, e in EXERCISES.items() if w.mode in e.modes]
        calls = {n: [] for n in names}
        run_workload(w, decision_points=combine(*(EXERCISES[n].decision_points(EXERCISES[n].reference, calls=calls[n])
                                                  for n in names)))
        for n in names:
            out.setdefault(n, []).extend(calls[n])
    assert all(out.get(n) for n in EXERCISES), {n: len(c) for n, c in out.items()}
    return out


class _TooSlow(Exception):
    pass


def _ask(fn, exercise: str, args: list):
    """One call as the grader makes it (JSON arguments through the exercise's adapter, the answer
    normalized), with a 0.1 s limit: past it the call is a timeout, as in the sandbox."""
    ex = EXERCISES[exercise]
    args = json.loads(json.dumps(list(args)))

    def too_slow(*_):
        raise _TooSlow()
    old = signal.signal(signal.SIGALRM, too_slow)
    signal.setitimer(signal.ITIMER_REAL, 0.1)
    try:
        return ex.normalize(fn(*(ex.arg_adapter(args) if ex.arg_adapter else args)))
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)


def _tally(exercise: str, source: str, calls: list, per_item: bool = True) -> dict:
    """What the pipeline tallies for one (submission, exercise): public examples, agreement on the
    hidden calls — a call that raises, times out or answers a wrong type fails every call, as a task
    that ends in an error does — and every outcome property (holding everywhere, see the module
    docstring, unless the function failed)."""
    ex = EXERCISES[exercise]
    g: dict = {}
    exec(compile(source, "<submission>", "exec"), g)
    fn = g[ex.function]
    pub = []
    for e in ex.public_examples:
        try:
            pub.append(_ask(fn, exercise, list(e.args)) == ex.normalize_answer(e.expected))
        except Exception:  # noqa: BLE001 — the student's error: a failed example
            pub.append(False)
        except _TooSlow:   # the grader stops at a timeout: the rest count as failed
            break
    pub += [False] * (len(ex.public_examples) - len(pub))
    right, failed = [], False
    for c in calls:
        try:
            right.append(key(_ask(fn, exercise, c["args"])) == key(c["answer"]))
        except (Exception, _TooSlow):  # noqa: BLE001
            failed = True
            break
    if failed:
        right = [False] * len(calls)
    tally = {"public-examples": [sum(pub), len(pub)] + ([pub] if per_item else []),
             "agrees-with-rocketmq": [sum(right), len(right)] + ([right] if per_item else [])}
    for prop in gb.OUTCOME_PROPERTIES:
        tally[prop] = [0 if failed else 1, 1]
    return tally


def _score(exercise: str, tally: dict, calls: list) -> float:
    rows = gb.gradebook_rows({("s", "nb", exercise): tally}, [], {exercise: calls})
    assert sum(r["max_points"] for r in rows) == MAX_POINTS
    return sum(r["points"] for r in rows)


@pytest.mark.parametrize("per_item", [True, False], ids=["per-item", "counts-only"])
@pytest.mark.parametrize("exercise", sorted(STUBS))
def test_do_nothing_functions_score_near_zero(hidden_calls, exercise, per_item):
    calls = hidden_calls[exercise]
    scores = {name: _score(exercise, _tally(exercise, _stub_source(exercise, body), calls, per_item), calls)
              for name, body in STUBS[exercise].items()}
    assert max(scores.values()) <= DO_NOTHING_MAX, scores


@pytest.mark.parametrize("exercise", sorted(STUBS))
def test_rocketmq_equivalent_samples_keep_full_marks(hidden_calls, exercise):
    calls = hidden_calls[exercise]
    for name, v in VARIANTS[exercise].items():
        if v.kind == "correct":
            for per_item in (True, False):
                assert _score(exercise, _tally(exercise, v.source, calls, per_item), calls) == MAX_POINTS, name


@pytest.mark.parametrize("exercise", sorted(STUBS))
def test_subtly_wrong_samples_score_between(hidden_calls, exercise):
    """Above every do-nothing function, below full marks."""
    calls = hidden_calls[exercise]
    floor = max(_score(exercise, _tally(exercise, _stub_source(exercise, body), calls), calls)
                for body in STUBS[exercise].values())
    for name, v in VARIANTS[exercise].items():
        if v.kind == "wrong":
            score = _score(exercise, _tally(exercise, v.source, calls), calls)
            assert floor < score < MAX_POINTS, (name, score, floor)


def test_every_do_nothing_function_scores_zero_beyond_itself():
    """beyond_do_nothing: a do-nothing function's own answers earn nothing, however many are right;
    a function that is right where it is wrong earns that share; all right is 1."""
    dn = [[True, True, True, False, False], [False, False, True, True, False]]
    assert gb.beyond_do_nothing(dn[0], dn) == 0.0
    assert gb.beyond_do_nothing(dn[1], dn) == 0.0
    assert gb.beyond_do_nothing([True, True, True, True, False], dn) == pytest.approx(1 / 2)
    assert gb.beyond_do_nothing([True] * 5, dn) == 1.0
    # nothing tells a function from a do-nothing one, even one right on every item
    assert gb.beyond_do_nothing([True, False], [[True, True]]) is None
    assert gb.beyond_do_nothing([True, True], [[True, True]]) is None
    assert gb.above_baseline(3, 5, 3) == 0.0 and gb.above_baseline(4, 5, 3) == 0.5


def test_the_rule_is_stated_where_students_read_it():
    assert "do-nothing" in gb.POLICY and "agreement" in gb.POLICY
    assert gb.POLICY.count(". ") == 0   # one sentence
    assert "do-nothing" in gb.PROPERTIES["agrees-with-rocketmq"].meaning
    assert all("agreement credit" in gb.PROPERTIES[p].meaning for p in gb.OUTCOME_PROPERTIES)
    page = fb.student_page("s", [], [], [])
    assert gb.POLICY.replace("'", "&#x27;") in page


# -- the filter ---------------------------------------------------------------------------------------

SECRET_ASCII = b'{"name": "Secret-Failover-Drill", "faults": [["kill", "broker-n0", 2000]], "seed": 4242}'


@pytest.fixture()
def hidden_dir(tmp_path):
    d = tmp_path / "hidden-course-set"
    d.mkdir()
    rnd = random.Random(7)
    (d / "secret-failover-drill.parquet").write_bytes(b"PAR1" + rnd.randbytes(3000) + SECRET_ASCII
                                                      + bytes(64) + rnd.randbytes(1000) + b"PAR1")
    (d / "exam-b.parquet").write_bytes(b"PAR1" + rnd.randbytes(2000) + b"PAR1")
    return d


def _secrets(d) -> list[str]:
    out = [str(d), os.path.realpath(d), d.name]
    for f in d.iterdir():
        out += [f.name, f.stem, str(f)]
    return out


def test_filter_removes_hidden_names_paths_and_bytes(hidden_dir, tmp_path):
    data = (hidden_dir / "secret-failover-drill.parquet").read_bytes()
    scratch = tmp_path / "scratch-7"
    flt = fb.OutputFilter([str(hidden_dir), "Secret Failover drill: the master is killed"], [str(scratch)])
    leaks = {
        "names": f"found {hidden_dir}/SECRET-FAILOVER-DRILL.parquet and exam-b next to secret-failover-drill",
        "path": "Traceback: File \"/usr/lib/python3.11/json/decoder.py\", line 3; also /etc/passwd and ~/x",
        "raw": "got " + data[3010:3060].decode("latin-1"),
        "repr": "read " + repr(data[100:140]),
        "hex": "hex " + data[500:540].hex(),
        "base64": "b64 " + base64.b64encode(data[901:941]).decode(),
        "urlsafe-base64": "b64 " + base64.urlsafe_b64encode(data[1203:1251]).decode(),
    }
    for what, text in leaks.items():
        out = flt.clean(text)
        for secret in _secrets(hidden_dir):
            assert secret.lower() not in out.lower(), (what, secret, out)
        for n in (32, 40):
            for at in range(0, len(out.encode()) - n + 1):
                assert out.encode()[at:at + n] not in data, (what, out)
    assert flt.clean(leaks["names"]).count("hidden workload") == 3
    assert flt.clean(leaks["path"]).count("<path>") == 2
    for what in ("raw", "repr", "hex", "base64", "urlsafe-base64"):
        assert flt.clean(leaks[what]).endswith(fb.REMOVED), what
    # what is not a leak stays: a short run of the same bytes, fractions, URLs, the scratch dir
    assert flt.clean("x" + data[3010:3030].decode("latin-1")) == "x" + data[3010:3030].decode("latin-1")
    assert flt.clean("5/6 calls, see https://rocketmq.apache.org/docs/x") == "5/6 calls, see https://rocketmq.apache.org/docs/x"
    assert flt.clean(f"wrote {scratch}/out.txt") == "wrote <scratch>/out.txt"
    assert flt.clean(repr(bytes(64))) == repr(bytes(64))   # zero padding says nothing about a file


def test_filter_caps_fields_and_pages(hidden_dir):
    flt = fb.output_filter([str(hidden_dir)])
    big = flt.clean("y" * 1_000_000)
    assert big.endswith(fb.TRUNCATED) and len(big) <= fb.FIELD_CAP + len(fb.TRUNCATED) + 1
    outs = [flt.clean("z" * 1500) for _ in range(fb.PAGE_CAP // 1500 + 5)]
    assert outs[-1] == fb.TRUNCATED and sum(map(len, outs)) <= fb.PAGE_CAP + 2 * len(fb.TRUNCATED) + 2
    assert fb.output_filter([str(hidden_dir)]).clean("fresh page") == "fresh page"


def _crafted(hidden_dir) -> tuple[list[dict], str]:
    data = (hidden_dir / "secret-failover-drill.parquet").read_bytes()
    detail = (f"ValueError: {hidden_dir / 'secret-failover-drill.parquet'} {data[3000:3100]!r} "
              f"{data[10:90].hex()} in /root/.cache/x; stem Secret-Failover-Drill " + "flood " * 5000)
    return [{"student": "mallory", "notebook": "mallory.ipynb", "kind": "error", "detail": detail,
             "exercise": "truncation_point"}], detail


def test_feedback_page_and_files_go_through_the_filter(hidden_dir, tmp_path):
    findings, detail = _crafted(hidden_dir)
    hidden = [str(hidden_dir), *(str(f) for f in hidden_dir.iterdir())]
    rows = [{"student": "mallory", "exercise": "truncation_point", "property": "agrees-with-rocketmq",
             "points": 0.0, "max_points": 3.0, "partial_credit": 0.0, "passed": 0, "total": 2,
             "finding": "error " + detail}]
    ex = {"exercise": "truncation_point", "rows": rows, "failures": {"agrees-with-rocketmq": [detail] * 3},
          "counterexample": {"args": [[[1, 0]], 100, [[1, 0]], detail], "expected": 100, "got": detail},
          "diagram": None}
    page = fb.student_page("mallory", [ex], findings, hidden)
    gb.write_all(str(tmp_path / "out"), gradebook=rows, findings=findings, hidden=hidden,
                 results=[{"student": "mallory", "notebook": "m", "exercise": "truncation_point", "workload": "w",
                           "seed": 1, "property": "recovers", "holds": False, "method": "error", "detail": detail}],
                 counterexamples=[{"counterexample_id": "c1", "exercise": "truncation_point", "signature": "s",
                                   "args": json.dumps([detail]), "expected": "100", "got": json.dumps(detail),
                                   "property": "agrees-with-rocketmq"}])
    out = tmp_path / "out"
    texts = {"page": page, **{p.name: p.read_text() for p in out.glob("*.csv")}}
    for name in ("results.parquet", "counterexamples.parquet"):
        texts[name] = json.dumps(pq.read_table(out / name).to_pylist())
    for name, text in texts.items():
        for secret in _secrets(hidden_dir) + ["/root/.cache"]:
            assert secret.lower() not in text.lower(), (name, secret)
        assert "3f" * 4 not in text and "flood " * 1000 not in text, name
        if name != "totals.csv":
            assert fb.TRUNCATED in text or fb.REMOVED in text, name
    assert len(page) < fb.PAGE_CAP + 20_000
    ce = pq.read_table(out / "counterexamples.parquet").to_pylist()[0]
    assert isinstance(json.loads(ce["args"]), str) and json.loads(ce["expected"]) == 100   # still JSON


# -- a class graded end to end ------------------------------------------------------------------------

@pytest.mark.spark
def test_no_output_file_names_the_hidden_directory(tmp_path):
    """Four tiny submissions (RocketMQ's rule, a constant, "never cut", and one that raises with the hidden
    workload's name — it is a catalog name, so a student can guess it — the hidden directory's path
    and its working directory) graded with local Spark: no file a student sees (the feedback pages,
    the gradebook and totals CSVs, the counterexamples) names the hidden directory, its files or
    their stems. The instructor's files name the workloads on purpose (results.parquet's `workload`
    column, run.json); findings.csv and results.parquet's details are filtered too."""
    pytest.importorskip("pyspark")
    import nbformat

    from rmqlab.grading.pipeline import GradeConfig, grade
    from rmqlab.spark.session import get_spark, stop_spark
    from rmqlab.workload import RecordedWorkload, save_workload
    from rmqlab.workload.catalog import CATALOG
    name = "ctrl-standalone-crash-master"
    hidden = tmp_path / "hidden-final-exam"
    hidden.mkdir()
    save_workload(str(hidden / f"{name}.parquet"), RecordedWorkload(CATALOG[name], [], None, {"test": True}))
    subs = tmp_path / "subs"
    subs.mkdir()
    ex = "truncation_point"
    # the name as the catalog spells it and upper-cased, the directory's path and name, the cwd
    leak = _stub_source(ex, f"raise ValueError({name!r} + ' ' + {name.upper()!r} + ' ' + {str(hidden)!r} + ' ' + "
                            f"{hidden.name!r} + ' ' + __import__('os').getcwd())")
    for student, src in [("alice", VARIANTS[ex]["correct"].source), ("stub", _stub_source(ex, "return -7")),
                         ("echo", _stub_source(ex, "return local_max")), ("mallory", leak)]:
        nbformat.write(make_submission(None, {ex: src}), str(subs / f"{student}.ipynb"))
    out = tmp_path / "out"
    try:
        grade(GradeConfig(submissions=str(subs), workloads=str(hidden), out=str(out), notebook_time_limit=30,
                          progress=False), spark=get_spark("local[2]"))
    finally:
        stop_spark()
    secrets = _secrets(hidden) + [os.getcwd()]
    pages = list((out / "feedback").glob("*.html"))
    assert len(pages) == 4
    checked = {p.name: p.read_text() for p in [*pages, out / "gradebook.csv", out / "totals.csv"]}
    checked["counterexamples.parquet"] = json.dumps(pq.read_table(out / "counterexamples.parquet").to_pylist())
    checked["findings.csv"] = (out / "findings.csv").read_text()
    checked["results.parquet details"] = json.dumps(pq.read_table(out / "results.parquet").column("detail").to_pylist())
    for fname, text in checked.items():
        for secret in secrets:
            assert secret.lower() not in text.lower(), (fname, secret)
    assert "hidden workload" in (out / "feedback" / "mallory.html").read_text()
    with open(out / "totals.csv") as f:
        points = {r["student"]: float(r["points"]) for r in csv.DictReader(f)}
    # the hidden workload never needs a cut: "never cut" answers every hidden call right, yet does nothing
    assert points["alice"] == MAX_POINTS and points["mallory"] == 0.0
    assert points["stub"] <= DO_NOTHING_MAX and points["echo"] <= DO_NOTHING_MAX, points
