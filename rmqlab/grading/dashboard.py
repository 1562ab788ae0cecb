"""The instructor's class dashboard: Spark aggregations over a `rmqlab grade` output
directory and the plotly figures labs/instructor/class-dashboard.ipynb draws from them.

Input: the files `rmqlab grade --out DIR` writes (columns as rmqlab.grading documents them):
`gradebook.csv`, `results.parquet`, `counterexamples.parquet`, `findings.csv` and `run.json`. Every
aggregation runs in Spark — the same code serves a class of 30 on a laptop and a course of thousands
on a cluster — and only the small aggregated rows are collected to the driver. Every result is
sorted on all its columns, so the same gradebook gives the same tables and figures, cell for cell
(nbval compares them).

What a "failing student" is, everywhere below: a student with at least one result row for that
(workload, property) whose `holds` is false because of their answers (a replay broke the invariant,
or the answers disagreed with RocketMQ's rule). A task that ended in an error (`method = "error"`:
an exception, a timeout, a sandbox violation) gets no points, but it is not a wrong answer: it is
counted apart (`errors`) and shows up under findings. Rows where the property does not apply
(`holds` null) count neither way.
"""

from __future__ import annotations

import json
import os
import shlex
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

GRADEBOOK_FILES = ("gradebook.csv", "results.parquet", "counterexamples.parquet", "findings.csv")
REPO_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
LABS_URL = "http://127.0.0.1:8888/lab/tree/"  # `rmqlab lab`'s default address; its --dir is the root

# The Spark schemas of the two CSV files (as rmqlab.grading's writer writes them). Given explicitly so a
# gradebook with no findings (an empty findings.csv) still has typed columns, and a wrong file fails.
GRADEBOOK_SCHEMA = ("student STRING, exercise STRING, property STRING, points DOUBLE, max_points DOUBLE, "
                    "partial_credit DOUBLE, passed INT, total INT, finding STRING")
FINDINGS_SCHEMA = "student STRING, notebook STRING, kind STRING, detail STRING"
RESULTS_COLUMNS = ("student", "notebook", "exercise", "workload", "seed", "property", "holds", "method",
                   "counterexample_id", "detail")
COUNTEREXAMPLE_COLUMNS = ("counterexample_id", "exercise", "signature", "args", "expected", "got", "property")


def spark_session(app_name: str = "rmqlab-dashboard"):
    """The kernel's SparkSession: the grader's factory (rmqlab.spark.session.get_spark:
    local[2], 512m driver, loopback, UI off, log level ERROR, PYSPARK_PYTHON = this interpreter).
    One session per kernel: JVM settings are fixed when the first one starts (observed with pyspark
    4.3: after stop(), a new session with spark.driver.memory=1g reports 1g but keeps a 512 MB heap)."""
    from rmqlab.spark.session import get_spark

    return get_spark("local[2]", app_name=app_name)


def stop_spark() -> None:
    """spark.stop() through the factory, so a later spark_session() in this kernel starts afresh."""
    from rmqlab.spark.session import stop_spark as stop

    stop()


@dataclass
class Gradebook:
    """One `rmqlab grade` output directory as Spark DataFrames, plus its run.json."""

    path: str
    gradebook: Any          # DataFrame: gradebook.csv
    results: Any            # DataFrame: results.parquet
    counterexamples: Any    # DataFrame: counterexamples.parquet
    findings: Any           # DataFrame: findings.csv
    run: dict

    def summary(self) -> dict[str, Any]:
        """Students, exercises, workloads, seeds per workload, result rows by method, and the other
        files' sizes: what the dashboard is about."""
        from pyspark.sql import functions as F

        r = self.results.agg(F.countDistinct("student").alias("students"),
                             F.countDistinct("exercise").alias("exercises"),
                             F.countDistinct("workload").alias("workloads"),
                             F.count(F.lit(1)).alias("result_rows")).first()
        seeds = (self.results.groupBy("workload").agg(F.countDistinct("seed").alias("n"))
                 .agg(F.max("n").alias("n")).first()["n"])
        methods = {row["method"]: row["n"] for row in
                   self.results.groupBy("method").agg(F.count(F.lit(1)).alias("n")).collect()}
        return {"students": r["students"], "exercises": r["exercises"], "workloads": r["workloads"],
                "seeds_per_workload": seeds or 0, "result_rows": r["result_rows"],
                "methods": dict(sorted(methods.items())),
                "gradebook_rows": self.gradebook.count(), "findings": self.findings.count(),
                "counterexamples": self.counterexamples.count()}


def repo_path(path: str) -> str:
    """`path` as given if absolute, else relative to the checkout's root (the notebooks' parameters
    name datasets/... that way, whatever directory the kernel runs in)."""
    return path if os.path.isabs(path) else os.path.join(REPO_ROOT, path)


def load_gradebook(spark, path: str) -> Gradebook:
    """Read a `rmqlab grade --out` directory (a relative `path` is relative to the checkout's root).
    A missing directory or file, or a file without the documented columns, raises ValueError
    naming it."""
    path = repo_path(path)
    if not os.path.isdir(path):
        raise ValueError(f"gradebook_dir {path!r}: no such directory (point it at a `rmqlab grade --out` directory)")
    for name in GRADEBOOK_FILES:
        if not os.path.isfile(os.path.join(path, name)):
            raise ValueError(f"gradebook_dir {path!r}: {name} is missing (is this a `rmqlab grade --out` directory?)")
    run_path = os.path.join(path, "run.json")
    run: dict = {}
    if os.path.isfile(run_path):
        with open(run_path, encoding="utf-8") as f:
            try:
                run = json.load(f)
            except json.JSONDecodeError as e:
                raise ValueError(f"{run_path}: not JSON ({e})") from None
    # RFC 4180, as Python's csv module writes it: quoted fields may span lines (a traceback in a
    # finding's detail) and a quote inside one is doubled (Spark's default escape is a backslash).
    csv = (spark.read.option("header", "true").option("mode", "FAILFAST").option("multiLine", "true")
           .option("quote", '"').option("escape", '"'))
    gradebook = csv.schema(GRADEBOOK_SCHEMA).csv(os.path.join(path, "gradebook.csv"))
    findings = csv.schema(FINDINGS_SCHEMA).csv(os.path.join(path, "findings.csv"))
    _check_header(os.path.join(path, "gradebook.csv"), GRADEBOOK_SCHEMA)
    _check_header(os.path.join(path, "findings.csv"), FINDINGS_SCHEMA)
    results = spark.read.parquet(os.path.join(path, "results.parquet"))
    counterexamples = spark.read.parquet(os.path.join(path, "counterexamples.parquet"))
    for name, df, columns in (("results.parquet", results, RESULTS_COLUMNS),
                              ("counterexamples.parquet", counterexamples, COUNTEREXAMPLE_COLUMNS)):
        missing = [c for c in columns if c not in df.columns]
        if missing:
            raise ValueError(f"{os.path.join(path, name)}: missing column(s) {', '.join(missing)}")
    return Gradebook(path, gradebook, results, counterexamples, findings, run)


def _check_header(path: str, schema: str) -> None:
    # Spark's CSV reader with a schema takes columns by position: check the header names them right.
    with open(path, encoding="utf-8") as f:
        header = f.readline().strip()
    want = [part.split()[0] for part in schema.split(",")]
    got = [h.strip() for h in header.split(",")] if header else []
    if got != want:
        raise ValueError(f"{path}: header {got} is not the documented {want}")


def _failing(results):
    """Result rows where the property did not hold because of the student's answers (a replay broke
    it, or the answers disagreed with RocketMQ's): not the tasks that ended in an error."""
    from pyspark.sql import functions as F

    return results.where((F.col("holds") == F.lit(False)) & (F.col("method") != F.lit("error")))


# (a) which property fails on which workload, for how many students

def failures_by_workload(gb: Gradebook) -> list[dict[str, Any]]:
    """One row per (workload, property) that was graded: `students` graded on it, `failing` (the
    property did not hold on some seed: see _failing), `errors` (the task ended in an error there:
    an exception, a timeout, a sandbox violation — no points, but not a wrong answer). Sorted by
    workload, property."""
    from pyspark.sql import functions as F

    r = gb.results
    rows = (r.where(F.col("holds").isNotNull() | (F.col("method") == "error"))
            .groupBy("workload", "property")
            .agg(F.countDistinct("student").alias("students"),
                 F.countDistinct(F.when((F.col("holds") == F.lit(False)) & (F.col("method") != "error"),
                                        F.col("student"))).alias("failing"),
                 F.countDistinct(F.when(F.col("method") == "error", F.col("student"))).alias("errors"))
            .orderBy("workload", "property").collect())
    return [r.asDict() for r in rows]


ERROR_COLUMN = "(task ended in an error)"


def failure_heatmap(rows: Sequence[dict[str, Any]], title: str = "Students failing, per workload and property"):
    """Heatmap: workloads (rows) × properties (columns), colour and text = students failing over
    students graded; a property not graded on a workload is blank. A last column counts the
    students whose task ended in an error on that workload."""
    import plotly.graph_objects as go

    workloads = sorted({r["workload"] for r in rows})
    properties = sorted({r["property"] for r in rows})
    cell = {(r["workload"], r["property"]): r for r in rows}
    z = [[cell[(w, p)]["failing"] if (w, p) in cell else None for p in properties] for w in workloads]
    text = [[f"{cell[(w, p)]['failing']}/{cell[(w, p)]['students']}" if (w, p) in cell else "" for p in properties]
            for w in workloads]
    if any(r["errors"] for r in rows):
        for i, w in enumerate(workloads):
            mine = [r for r in rows if r["workload"] == w]
            errors = max(r["errors"] for r in mine)
            z[i].append(errors)
            text[i].append(f"{errors}/{max(r['students'] for r in mine)}")
        properties = properties + [ERROR_COLUMN]
    fig = go.Figure(go.Heatmap(z=z, x=properties, y=workloads, text=text, texttemplate="%{text}",
                               colorscale="Reds", zmin=0, colorbar={"title": "students"},
                               hovertemplate="%{y}<br>%{x}: %{text} students<extra></extra>"))
    fig.update_layout(title=title, height=max(300, 28 * len(workloads) + 220), margin={"l": 10},
                      xaxis={"side": "top", "tickangle": -30}, yaxis={"autorange": "reversed"})
    return fig


# (b) points per exercise

def points_by_exercise(gb: Gradebook) -> list[dict[str, Any]]:
    """Per (exercise, student): points and max points summed over the exercise's properties; sorted."""
    from pyspark.sql import functions as F

    rows = (gb.gradebook.groupBy("exercise", "student")
            .agg(F.round(F.sum("points"), 6).alias("points"), F.round(F.sum("max_points"), 6).alias("max_points"))
            .orderBy("exercise", "student").collect())
    return [r.asDict() for r in rows]


def points_summary(gb: Gradebook) -> list[dict[str, Any]]:
    """Per exercise: students, max points, min / median / mean / max of the students' points, and how
    many got full marks."""
    from pyspark.sql import functions as F

    per_student = (gb.gradebook.groupBy("exercise", "student")
                   .agg(F.sum("points").alias("points"), F.sum("max_points").alias("max_points")))
    rows = (per_student.groupBy("exercise")
            .agg(F.count(F.lit(1)).alias("students"), F.max("max_points").alias("max_points"),
                 F.min("points").alias("min"), F.percentile_approx("points", 0.5, 10_000).alias("median"),
                 F.round(F.avg("points"), 2).alias("mean"), F.max("points").alias("max"),
                 F.sum(F.when(F.col("points") >= F.col("max_points") - 1e-9, 1).otherwise(0)).alias("full_marks"))
            .orderBy("exercise").collect())
    return [r.asDict() for r in rows]


def points_figure(rows: Sequence[dict[str, Any]], title: str = "Points per exercise (one dot per student)"):
    """Box plot per exercise of the students' points (rows from points_by_exercise), every student shown."""
    import plotly.graph_objects as go

    fig = go.Figure()
    for exercise in sorted({r["exercise"] for r in rows}):
        mine = [r for r in rows if r["exercise"] == exercise]
        fig.add_trace(go.Box(y=[r["points"] for r in mine], name=exercise, boxpoints="all", jitter=0.4,
                             pointpos=0, text=[r["student"] for r in mine],
                             hovertemplate="%{text}: %{y} points<extra></extra>"))
    fig.update_layout(title=title, yaxis={"title": "points", "rangemode": "tozero"}, showlegend=False, height=380)
    return fig


# (c) the most common minimized counterexamples

def common_counterexamples(gb: Gradebook, limit: int = 10) -> list[dict[str, Any]]:
    """The minimized counterexamples shared by the most students: signature, exercise, students (how
    many), workloads (on which they showed), properties (that failed where they showed), the call
    written out (`call`). Most students first, then signature."""
    from pyspark.sql import functions as F

    used = (gb.results.where(F.col("counterexample_id").isNotNull())
            .select("counterexample_id", "student", "workload",
                    F.when(F.col("holds") == F.lit(False), F.col("property")).alias("failed")))
    ce = gb.counterexamples.select("counterexample_id", "exercise", "signature", "args", "expected", "got")
    rows = (ce.join(used, "counterexample_id")
            .groupBy("signature", "exercise")
            .agg(F.countDistinct("student").alias("students"), F.countDistinct("workload").alias("workloads"),
                 F.array_sort(F.collect_set("failed")).alias("properties"),
                 F.first("args").alias("args"), F.first("expected").alias("expected"), F.first("got").alias("got"))
            .orderBy(F.desc("students"), "signature").limit(limit).collect())
    out = []
    for r in rows:
        d = r.asDict()
        d["properties"] = list(d["properties"])
        d["call"] = readable_call(d["exercise"], d["args"], d["expected"], d["got"])
        out.append(d)
    return out


def readable_call(exercise: str, args: str, expected: str, got: str) -> str:
    """`fn(name=value, ...)  →  expected X, got Y`: the function and argument names from the exercise
    registry (positional JSON arguments when the exercise is not registered), values as JSON."""
    function, names = exercise, ()
    try:
        from rmqlab.lab.exercises import EXERCISES

        function, names = EXERCISES[exercise].function, tuple(EXERCISES[exercise].arg_names)
    except (ImportError, KeyError, AttributeError):
        pass
    parsed = json.loads(args) if args else []

    def show(v):
        return json.dumps(v, separators=(", ", ": "))

    if isinstance(parsed, dict):
        inner = ", ".join(f"{k}={show(v)}" for k, v in parsed.items())
    else:
        values = parsed if isinstance(parsed, list) else [parsed]
        if len(names) == len(values):
            inner = ", ".join(f"{n}={show(v)}" for n, v in zip(names, values))
        else:
            inner = ", ".join(show(v) for v in values)
    return f"{function}({inner})  →  expected {expected}, got {got}"


# (d) findings by kind

def findings_by_kind(gb: Gradebook) -> list[dict[str, Any]]:
    """Per finding kind (nondeterministic, timeout, sandbox-violation, ...): students, notebooks,
    the students (sorted). Sorted by kind."""
    from pyspark.sql import functions as F

    rows = (gb.findings.groupBy("kind")
            .agg(F.countDistinct("student").alias("students"), F.count(F.lit(1)).alias("findings"),
                 F.array_sort(F.collect_set("student")).alias("who"))
            .orderBy("kind").collect())
    return [{**r.asDict(), "who": list(r["who"])} for r in rows]


def findings_figure(rows: Sequence[dict[str, Any]], title: str = "Findings by kind (students)"):
    import plotly.graph_objects as go

    fig = go.Figure(go.Bar(x=[r["kind"] for r in rows], y=[r["students"] for r in rows],
                           text=[r["students"] for r in rows], textposition="auto",
                           hovertext=[", ".join(r["who"]) for r in rows]))
    fig.update_layout(title=title, yaxis={"title": "students", "rangemode": "tozero"}, height=320)
    return fig


# (e) run this scenario

@dataclass(frozen=True)
class Scenario:
    """What a workshop needs to re-run one graded case: the replay command and the matching lab."""

    workload: str
    seed: int
    exercise: str
    property: str
    students: int
    lab: str | None                  # labs/<lab>.ipynb, from the exercise registry
    replay_command: str              # `rmqlab replay <workload file> --seed N`
    exercise_replay_command: str     # the same with a solution file swapped in for the exercise
    papermill_parameters: dict
    papermill_command: str | None
    lab_url: str | None

    def markdown(self) -> str:
        """The commands as markdown, to run from the checkout's root."""
        lines = [f"**Workload `{self.workload}`, seed {self.seed}**: `{self.property}` failed for "
                 f"{self.students} student(s) on `{self.exercise}`.", "",
                 "From the checkout's root, replay it (the outcome: the Jepsen view and the invariants):", "",
                 f"    {self.replay_command}", "",
                 "and the same with a solution file in place of the exercise function:", "",
                 f"    {self.exercise_replay_command}", ""]
        if self.lab:
            lines += [f"The matching lab is [{self.lab}](../{self.lab}.ipynb); its parameters for the workshop: "
                      f"`{json.dumps(self.papermill_parameters)}`. Run a copy with them and open it:", "",
                      "    mkdir -p workshop", f"    {self.papermill_command}", "    rmqlab lab --dir workshop", "",
                      f"then {self.lab_url}"]
        return "\n".join(lines) + "\n"


def scenario(gb: Gradebook, workload: str | None = None, exercise: str | None = None,
             property: str | None = None, signature: str | None = None,
             workloads_dir: str | None = None) -> Scenario:
    """The scenario behind the (workload, seed, exercise, property) that most students failed (a
    broken invariant before `agrees-with-rocketmq` among equals), narrowed to what is given (`signature`: the failures that showed that minimized counterexample,
    see common_counterexamples). `workloads_dir` (default: the one run.json names, else
    datasets/workloads) is where the replay command looks for `<workload>.parquet`. A filter that
    matches no failure raises ValueError naming it."""
    from pyspark.sql import functions as F

    failing = _failing(gb.results)
    if signature is not None:
        ids = gb.counterexamples.where(F.col("signature") == signature).select("counterexample_id")
        failing = failing.join(ids, "counterexample_id")
    for name, value in (("workload", workload), ("exercise", exercise), ("property", property)):
        if value is not None:
            failing = failing.where(F.col(name) == value)
    top = (failing.groupBy("workload", "seed", "exercise", "property")
           .agg(F.countDistinct("student").alias("students"))
           # a broken invariant before a mere disagreement with RocketMQ's rule: it is what a class can watch
           .orderBy(F.desc("students"), (F.col("property") == "agrees-with-rocketmq").cast("int"), "workload", "seed",
                    "exercise", "property").first())
    if top is None:
        given = {k: v for k, v in (("workload", workload), ("exercise", exercise), ("property", property),
                                   ("signature", signature)) if v}
        raise ValueError(f"no failing result matches {given or 'the gradebook'} in {gb.path}")
    wfile = _workload_file(top["workload"], workloads_dir, gb.run)
    replay = f"rmqlab replay {shlex.quote(_shown(wfile))} --seed {int(top['seed'])}"
    lab = _lab_of(top["exercise"])
    params = {"seed": int(top["seed"]), "grading": False}
    pm = lab_url = None
    if lab:
        # The copy goes to a workshop/ folder of its own, served by `rmqlab lab --dir workshop`: a
        # stray notebook in labs/ would be taken for a lab (the labs' checks glob labs/*.ipynb).
        copy = f"{lab}-seed{params['seed']}.ipynb"
        pm = (f"papermill {_shown(os.path.join(REPO_ROOT, 'labs', lab + '.ipynb'))} workshop/{copy} "
              f"-p seed {params['seed']} -p grading False")
        lab_url = LABS_URL + copy
    return Scenario(top["workload"], int(top["seed"]), top["exercise"], top["property"], int(top["students"]), lab,
                    replay, f"{replay} --exercise {shlex.quote(top['exercise'])} --solution solution.py", params, pm,
                    lab_url)


def _workload_file(workload: str, workloads_dir: str | None, run: dict) -> str:
    """Where `<workload>.parquet` is: in `workloads_dir` if given; else in the directory run.json
    names if it is there (a grading run's hidden workloads); else in datasets/workloads (the public
    ones, also when the graded copy was a temporary directory)."""
    if workloads_dir:
        return os.path.join(repo_path(workloads_dir), f"{workload}.parquet")
    public = os.path.join(REPO_ROOT, "datasets", "workloads", f"{workload}.parquet")
    graded = _run_workloads_dir(run)
    if graded and (os.path.isfile(os.path.join(graded, f"{workload}.parquet")) or not os.path.isfile(public)):
        return os.path.join(graded, f"{workload}.parquet")
    return public


def _shown(path: str) -> str:
    """A path as the commands show it: relative to the checkout's root (where the commands are
    run from) when it is inside it, else absolute."""
    rel = os.path.relpath(os.path.abspath(path), REPO_ROOT)
    return shlex.quote(rel if not rel.startswith("..") else os.path.abspath(path))


def _run_workloads_dir(run: dict) -> str | None:
    """The --workloads directory of the grading run (run.json's `config`)."""
    value = (run.get("config") or {}).get("workloads")
    return value if isinstance(value, str) else None


def _lab_of(exercise: str) -> str | None:
    try:
        from rmqlab.lab.exercises import EXERCISES
    except ImportError:
        return None
    ex = EXERCISES.get(exercise)
    return getattr(ex, "lab", None)


def table(rows: Sequence[dict[str, Any]], columns: Sequence[str] | None = None, max_width: int = 60) -> str:
    """A plain-text table of `rows` (stable: nbval compares it): one line per row, columns padded."""
    if not rows:
        return "(none)"
    columns = list(columns or rows[0].keys())

    def fmt(v):
        if isinstance(v, float):
            v = f"{v:g}"
        elif isinstance(v, (list, tuple)):
            v = ", ".join(map(str, v))
        s = str(v)
        return s if len(s) <= max_width else s[:max_width - 1] + "…"

    cells = [[fmt(r.get(c)) for c in columns] for r in rows]
    widths = [max(len(c), *(len(row[i]) for row in cells)) for i, c in enumerate(columns)]
    lines = ["  ".join(c.ljust(w) for c, w in zip(columns, widths)).rstrip(),
             "  ".join("-" * w for w in widths)]
    lines += ["  ".join(v.ljust(w) for v, w in zip(row, widths)).rstrip() for row in cells]
    return "\n".join(lines)
