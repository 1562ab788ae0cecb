"""The grading policy and the instructor-facing output files: a gradebook CSV (student,
exercise, property, points, partial credit) that an LMS can import.

Per exercise, a submission is graded on properties, each worth POINTS[property]:
- `public-examples`: the exercise's public checks (the ones the student can run), sandboxed;
  partial credit = examples passed / examples.
- `agrees-with-rocketmq`: the fraction of the hook calls of the reference runs (every hidden
  workload and seed where the exercise is consulted) answered like RocketMQ's rule.
- the outcome invariants of rmqlab.workload.outcome (`no-acknowledged-loss`, `single-master`,
  `elected-in-sync-state-set`, `truncation-at-consistent-point`, `replicas-identical`) and `recovers`
  (converged, and recovery no slower than the reference's by more than RECOVERY_SLACK): judged on the
  outcome of the run with the student's function, on each (workload, seed) where the reference run
  holds the property (a property the reference itself breaks there — an unclean election losing
  data on purpose — is not the student's to hold). Partial credit = the fraction of those
  (workload, seed) where it holds.
points = max_points × partial_credit. A (workload, seed) where the student's function raised, timed
out, crashed, answered a wrong type or broke the sandbox counts as failed for every property.
"""

from __future__ import annotations

import csv
import os
from dataclasses import dataclass

INVARIANTS = ("no-acknowledged-loss", "single-master", "elected-in-sync-state-set",
              "truncation-at-consistent-point", "replicas-identical")
RECOVERY_SLACK_MS = 1000.0      # absolute slack on the reference's recovery time …
RECOVERY_SLACK_FRACTION = 0.25  # … plus this fraction of it


@dataclass(frozen=True)
class Property:
    name: str
    max_points: float
    meaning: str
    hint: str


PROPERTIES: dict[str, Property] = {p.name: p for p in (
    Property("public-examples", 2.0, "Your function passes the exercise's public examples (the check cell in the lab).",
             "Run the check cell in the lab notebook: each failing example names the case and gives a hint."),
    Property("agrees-with-rocketmq", 3.0,
             "On the calls the simulator made during the hidden workloads, your function answers what RocketMQ's "
             "rule answers.",
             "Compare your answer with the expected one on the counterexample below; it is the smallest case we "
             "found where they differ."),
    Property("no-acknowledged-loss", 1.0,
             "Every message the cluster acknowledged to a producer is still readable at the end (allAck).",
             "A message is lost when a replica that did not hold it becomes master, or when a log is cut below "
             "an acknowledged offset."),
    Property("single-master", 1.0, "At most one master per broker set and epoch.",
             "Two masters in one epoch means two replicas both believe they were elected: check which one your "
             "rule picks and whether the epoch moves on."),
    Property("elected-in-sync-state-set", 1.0,
             "The elected master was in the SyncStateSet (unless unclean election is enabled).",
             "Only replicas that have every acknowledged message (the SyncStateSet) may be elected cleanly."),
    Property("truncation-at-consistent-point", 1.0,
             "A returning replica cuts its log exactly at the last offset it shares with the master.",
             "Find the newest epoch both files agree on (same epoch AND same start offset) and end it at the "
             "smaller of the two ends."),
    Property("replicas-identical", 1.0, "At the end, the replicas of a broker set hold the same log.",
             "Replicas diverge when one keeps a tail the master never had, or skips data it should copy."),
    Property("recovers", 1.0,
             "After the faults, the cluster converges (a master, replicas in sync) no slower than RocketMQ's rule "
             f"(slack {RECOVERY_SLACK_MS:.0f} ms + {RECOVERY_SLACK_FRACTION:.0%}).",
             "A rule that refuses too often (no candidate, never expands the SyncStateSet) keeps the broker set "
             "unavailable."),
)}


def applicable_properties(ref_outcome: dict) -> list[str]:
    """The outcome properties graded on a (workload, seed): those the reference run holds."""
    props = [name for name in INVARIANTS
             if (ref_outcome.get("invariants") or {}).get(name, {}).get("applies")
             and (ref_outcome.get("invariants") or {}).get(name, {}).get("holds")]
    if ref_outcome.get("converged"):
        props.append("recovers")
    return props


def judge(outcome: dict, ref_outcome: dict, prop: str) -> tuple[bool, str]:
    """Does `outcome` (the student's run) hold `prop`? (holds, detail)."""
    if prop == "recovers":
        if not outcome.get("converged"):
            return False, "the cluster did not converge"
        ref, got = ref_outcome.get("recovery_ms"), outcome.get("recovery_ms")
        if ref is None or got is None:
            return True, "converged"
        limit = ref + RECOVERY_SLACK_MS + RECOVERY_SLACK_FRACTION * ref
        if got > limit:
            return False, f"recovered in {got:.0f} ms, RocketMQ's rule in {ref:.0f} ms"
        return True, f"recovered in {got:.0f} ms (RocketMQ's rule: {ref:.0f} ms)"
    inv = (outcome.get("invariants") or {}).get(prop) or {}
    if inv.get("holds", False) or not inv.get("applies", True):
        return True, ""
    first = inv.get("first") or {}
    what = first.get("message") or first.get("what") or ""
    return False, f"{inv.get('violations', 1)} violation(s); first: {what}"[:500]


GRADEBOOK_COLUMNS = ("student", "exercise", "property", "points", "max_points", "partial_credit", "passed", "total",
                     "finding")
FINDINGS_COLUMNS = ("student", "notebook", "kind", "detail")


def gradebook_rows(tallies: dict, findings: list[dict]) -> list[dict]:
    """`tallies`: {(student, notebook, exercise): {property: [passed, total]}} → one row per student ×
    exercise × property (a student with several notebooks for one exercise keeps the best)."""
    best: dict[tuple[str, str], tuple[float, str, dict]] = {}
    for (student, notebook, exercise), props in tallies.items():
        score = sum(PROPERTIES[p].max_points * (pt[0] / pt[1] if pt[1] else 0.0) for p, pt in props.items())
        cur = best.get((student, exercise))
        if cur is None or score > cur[0]:
            best[(student, exercise)] = (score, notebook, props)
    rows = []
    for (student, exercise), (_, notebook, props) in sorted(best.items()):
        kinds = sorted({f["kind"] for f in findings if f["student"] == student and f["notebook"] == notebook
                        and f.get("exercise") in (None, "", exercise)})
        for prop in sorted(props, key=lambda p: list(PROPERTIES).index(p)):
            passed, total = props[prop]
            credit = passed / total if total else 0.0
            rows.append({"student": student, "exercise": exercise, "property": prop,
                         "points": round(PROPERTIES[prop].max_points * credit, 4),
                         "max_points": PROPERTIES[prop].max_points, "partial_credit": round(credit, 6),
                         "passed": passed, "total": total, "finding": ";".join(kinds)})
    return rows


def write_csv(path: str, columns, rows) -> None:
    with open(path, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(columns), extrasaction="ignore")
        w.writeheader()
        for r in rows:
            w.writerow(r)


def write_results(path: str, rows: list[dict]) -> None:
    """results.parquet: one row per (student, notebook, exercise, workload, seed, property)."""
    import pyarrow as pa
    import pyarrow.parquet as pq
    schema = pa.schema([("student", pa.string()), ("notebook", pa.string()), ("exercise", pa.string()),
                        ("workload", pa.string()), ("seed", pa.int64()), ("property", pa.string()),
                        ("holds", pa.bool_()), ("method", pa.string()), ("counterexample_id", pa.string()),
                        ("detail", pa.string())])
    cols = {f.name: [r.get(f.name) for r in rows] for f in schema}
    pq.write_table(pa.table(cols, schema=schema), path)


def write_counterexamples(path: str, rows: list[dict]) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq
    schema = pa.schema([(name, pa.string()) for name in
                        ("counterexample_id", "exercise", "signature", "args", "expected", "got", "property")])
    cols = {f.name: [r.get(f.name) for r in rows] for f in schema}
    pq.write_table(pa.table(cols, schema=schema), path)


TOTALS_COLUMNS = ("student", "points", "max_points")


def totals(gradebook: list[dict]) -> list[dict]:
    """One row per student (the sum over exercises and properties): the column an LMS grade import
    usually wants, next to the detailed gradebook.csv."""
    acc: dict[str, list[float]] = {}
    for r in gradebook:
        t = acc.setdefault(r["student"], [0.0, 0.0])
        t[0] += r["points"]
        t[1] += r["max_points"]
    return [{"student": s, "points": round(p, 4), "max_points": round(m, 4)} for s, (p, m) in sorted(acc.items())]


def write_all(out_dir: str, *, gradebook: list[dict], results: list[dict], counterexamples: list[dict],
              findings: list[dict]) -> None:
    os.makedirs(out_dir, exist_ok=True)
    write_csv(os.path.join(out_dir, "gradebook.csv"), GRADEBOOK_COLUMNS, gradebook)
    write_csv(os.path.join(out_dir, "totals.csv"), TOTALS_COLUMNS, totals(gradebook))
    write_results(os.path.join(out_dir, "results.parquet"), results)
    write_counterexamples(os.path.join(out_dir, "counterexamples.parquet"), counterexamples)
    write_csv(os.path.join(out_dir, "findings.csv"), FINDINGS_COLUMNS, findings)
