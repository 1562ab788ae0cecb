"""The grading policy and the instructor-facing output files: a gradebook CSV (student,
exercise, property, points, partial credit) that an LMS can import.

The rule, in one sentence (POLICY): credit counts only what your function gets right beyond the
best do-nothing function (a constant answer, or one of its arguments handed back), and every
invariant and `recovers` is worth its points times that agreement credit, so a function that keeps
the cluster from moving earns nothing for the messages it therefore never loses.

"Beyond" (`beyond_do_nothing`): for each do-nothing function, the share of the items it gets wrong
that your function gets right; the credit is the least of these shares. So every do-nothing
function scores 0 (on the items it gets wrong it is wrong), a function right everywhere scores 1,
and a partial rule earns what it adds. With counts only (no per-item vector in the tally), the
lower bound (right - best do-nothing's right) / (items - best do-nothing's right) stands in
(`above_baseline`).

Per exercise, a submission is graded on properties, each worth PROPERTIES[property].max_points:
- `public-examples`: the exercise's public checks (the ones the student can run), sandboxed;
  credit = beyond the do-nothing functions on those examples.
- `agrees-with-rocketmq`: the hook calls of the reference runs (every hidden workload and seed
  where the exercise is consulted) answered like RocketMQ's rule; credit = beyond the do-nothing
  functions on those calls. When the hidden calls cannot tell a function from a do-nothing one (a
  do-nothing function answers all of them right), the public examples' credit stands in: they are
  the only evidence left.
- the outcome invariants of rmqlab.workload.outcome (`no-acknowledged-loss`, `single-master`,
  `elected-in-sync-state-set`, `truncation-at-consistent-point`, `replicas-identical`) and `recovers`
  (converged, and recovery no slower than the reference's by more than RECOVERY_SLACK): judged on the
  outcome of the run with the student's function, on each (workload, seed) where the reference run
  holds the property (a property the reference itself breaks there — an unclean election losing
  data on purpose — is not the student's to hold); credit = (the fraction of those (workload, seed)
  where it holds) × the agreement credit above.
points = max_points × credit. A (workload, seed) where the student's function raised, timed out,
crashed, answered a wrong type or broke the sandbox counts as failed for every property (and its
calls as disagreeing).

Why scale the invariants: they are safety properties, and a function that answers nothing useful
holds most of them by keeping the system still — a constant truncation point never cuts a log
wrongly, an election that never elects never elects two masters. The agreement credit measures
how far the function's answers drove the run the way RocketMQ's do; RocketMQ-equivalent functions
(every call answered like RocketMQ's rule) keep credit 1.

The do-nothing family (`do_nothing_right`): every constant (only those that are some item's answer
can be right anywhere), and each argument handed back as is, wrapped in a list, or its first or
last element or that element's first (`do_nothing_answers`: the first or last candidate, the old or
preferred master, the unchanged SyncStateSet, the local or master log end).
"""

from __future__ import annotations

import csv
import functools
import os
from collections.abc import Iterable
from dataclasses import dataclass, replace
from typing import Any

INVARIANTS = ("no-acknowledged-loss", "single-master", "elected-in-sync-state-set",
              "truncation-at-consistent-point", "replicas-identical")
RECOVERY_SLACK_MS = 1000.0      # absolute slack on the reference's recovery time …
RECOVERY_SLACK_FRACTION = 0.25  # … plus this fraction of it
OUTCOME_PROPERTIES = (*INVARIANTS, "recovers")

POLICY = ("Credit counts only what your function gets right beyond the best do-nothing function (a constant "
          "answer, or one of its arguments handed back), and every invariant and recovery is worth its points "
          "times that agreement credit, so keeping the cluster from moving earns nothing.")


@dataclass(frozen=True)
class Property:
    name: str
    max_points: float
    meaning: str
    hint: str


PROPERTIES: dict[str, Property] = {p.name: p for p in (
    Property("public-examples", 2.0,
             "Your function passes the exercise's public examples (the check cell in the lab), counted beyond "
             "those a do-nothing function (a constant, or an argument handed back) passes too.",
             "Run the check cell in the lab notebook: each failing example names the case and gives a hint."),
    Property("agrees-with-rocketmq", 3.0,
             "On the calls the simulator made during the hidden workloads, your function answers what RocketMQ's "
             "rule answers, counted beyond the calls a do-nothing function answers right too (when those are all "
             "of them, your public-examples credit stands in). This credit also scales every invariant below.",
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


# The outcome properties say so on the page: their points move with the agreement credit.
PROPERTIES = {n: replace(p, meaning=p.meaning + " Worth its points times your agreement credit.")
              if n in OUTCOME_PROPERTIES else p for n, p in PROPERTIES.items()}


# -- the do-nothing baseline ---------------------------------------------------------------------------

def _key(value: Any) -> str:
    from rmqlab.trace.event import canonical_json
    return canonical_json(value)


def do_nothing_answers(args: list) -> list[Any]:
    """The answers of the non-constant do-nothing functions on one call's JSON arguments, one per
    function, in a fixed order: each argument as is, wrapped in a list, its first and its last
    element, and those elements' first element (the first or last candidate's id); None where the
    element does not exist (what such a function answers there)."""
    out: list[Any] = []
    for a in args:
        first = a[0] if isinstance(a, list) and a else None
        last = a[-1] if isinstance(a, list) and a else None
        out += [a, [a], first, last, first[0] if isinstance(first, list) and first else None,
                last[0] if isinstance(last, list) and last else None]
    return out


def _normalized(normalize, v: Any) -> str | None:
    try:
        return _key(normalize(v))
    except Exception:  # noqa: BLE001 — a do-nothing function answering the wrong type: no agreement
        return None


def do_nothing_right(exercise: str, items: Iterable[dict] | Iterable[tuple[list, Any]]) -> list[list[bool]]:
    """Per do-nothing function (module docstring), per item: does it answer like RocketMQ's rule?
    One function for all items, as a student's is: each constant that is some item's answer (other
    constants are right nowhere), and each argument handed back (`do_nothing_answers`). `items`:
    call-log entries {"args": [...], "answer": <normalized>} (several logs chained), or (args,
    expected) pairs (the public examples)."""
    from rmqlab.lab.exercises import EXERCISES
    normalize = EXERCISES[exercise].normalize_answer
    want: list[str | None] = []
    echoes: list[list[str | None]] = []
    for c in items:
        args, expected = (c["args"], c["answer"]) if isinstance(c, dict) else c
        want.append(_normalized(normalize, expected))
        echoes.append([_normalized(normalize, v) for v in do_nothing_answers(list(args))])
    vectors = {tuple(w == k for w in want) for k in set(want) if k is not None}
    width = max((len(e) for e in echoes), default=0)
    for j in range(width):
        vectors.add(tuple(j < len(e) and e[j] is not None and e[j] == w for e, w in zip(echoes, want)))
    return [list(v) for v in sorted(vectors, reverse=True) if any(v)]


def beyond_do_nothing(right: list[bool], do_nothing: list[list[bool]]) -> float | None:
    """The credit for answering the items `right` when the do-nothing functions answer them
    `do_nothing` (one vector each): the share you get right of the items a do-nothing function
    gets wrong, for the one that leaves you least — so every do-nothing function scores 0, and all
    right scores 1. None when some do-nothing function is right on every item: these items cannot
    tell a function from it, even one that is right on all of them."""
    if not right:
        return 0.0
    shares = []
    for d in do_nothing:
        wrong = [i for i, ok in enumerate(d) if not ok]
        if not wrong:
            return None
        shares.append(sum(1 for i in wrong if right[i]) / len(wrong))
    return min(shares, default=sum(right) / len(right))


def above_baseline(got: float, total: float, baseline: float) -> float | None:
    """`beyond_do_nothing` from counts alone (`got` right of `total`; the best do-nothing function
    right on `baseline`): its lower bound (got - baseline) / (total - baseline), as if every item
    you got right were one the do-nothing function gets right too."""
    if total <= 0:
        return 0.0
    if baseline >= total:
        return None
    return max(0.0, (got - baseline) / (total - baseline))


@functools.cache
def public_do_nothing(exercise: str) -> tuple[tuple[bool, ...], ...]:
    """do_nothing_right on the exercise's public examples."""
    from rmqlab.lab.exercises import EXERCISES
    items = [(list(e.args), e.expected) for e in EXERCISES[exercise].public_examples]
    return tuple(tuple(v) for v in do_nothing_right(exercise, items))


def _credit(tally: list, do_nothing) -> float | None:
    """One property's tally [passed, total] or [passed, total, right per item] → beyond_do_nothing
    (exact with a complete per-item vector, its lower bound from counts without one)."""
    passed, total = tally[0], tally[1]
    right = tally[2] if len(tally) > 2 and tally[2] is not None else None
    dn = [list(v) for v in do_nothing]
    if right is not None and len(right) == total and None not in right and all(len(v) == total for v in dn):
        return beyond_do_nothing([bool(x) for x in right], dn)
    return above_baseline(passed, total, max((sum(v) for v in dn if len(v) == total), default=0))


def credits(exercise: str, props: dict[str, list], hidden_calls: list[dict] | None = None) -> dict[str, float]:
    """The policy (module docstring) on one (submission, exercise)'s tallies {property: [passed,
    total] or [passed, total, right per item]} → {property: credit in [0, 1]}. `hidden_calls`: the
    reference call-log entries the `agrees-with-rocketmq` tally counts, chained in its order; None
    when the caller has none: then the agreement credit is at most the public examples' credit."""
    out: dict[str, float] = {}
    pub = props.get("public-examples")
    if pub is not None:
        c = _credit(pub, public_do_nothing(exercise))
        if c is None:   # a do-nothing function passes every example (none does today)
            c = 1.0 if pub[1] and pub[0] >= pub[1] else 0.0
        out["public-examples"] = c
    agreement = out.get("public-examples", 0.0)
    agr = props.get("agrees-with-rocketmq")
    if agr is not None:
        c = _credit(agr, do_nothing_right(exercise, hidden_calls) if hidden_calls else [])
        # No hidden call tells this function from a do-nothing one: the public examples are the
        # evidence left.
        agreement = out.get("public-examples", 0.0) if c is None else c
        if hidden_calls is None:
            # Without the calls, a do-nothing function that happens to answer them all (the local
            # log end when nothing needs cutting) would look perfect: the public examples, where the
            # do-nothing functions are known, bound the credit.
            agreement = min(agreement, out.get("public-examples", 0.0))
        out["agrees-with-rocketmq"] = agreement
    for prop, tally in props.items():
        if prop not in out:
            share = tally[0] / tally[1] if tally[1] else 0.0
            out[prop] = share * agreement if prop in OUTCOME_PROPERTIES else share
    return out


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


def gradebook_rows(tallies: dict, findings: list[dict], hidden_calls: dict[str, list[dict]] | None = None) -> list[dict]:
    """`tallies`: {(student, notebook, exercise): {property: [passed, total] or [passed, total, right
    per item]}} → one row per student × exercise × property (a student with several notebooks for one
    exercise keeps the best). `hidden_calls`: {exercise: its reference call-log entries, chained in
    the order its agreement tallies count them} (see `credits`). `passed`/`total` stay the raw
    counts; `partial_credit` and `points` follow the policy."""
    hidden_calls = hidden_calls or {}
    best: dict[tuple[str, str], tuple[float, str, dict, dict]] = {}
    for (student, notebook, exercise), props in tallies.items():
        credit = credits(exercise, props, hidden_calls.get(exercise))
        score = sum(PROPERTIES[p].max_points * credit[p] for p in props)
        cur = best.get((student, exercise))
        if cur is None or score > cur[0]:
            best[(student, exercise)] = (score, notebook, props, credit)
    rows = []
    for (student, exercise), (_, notebook, props, credit) in sorted(best.items()):
        kinds = sorted({f["kind"] for f in findings if f["student"] == student and f["notebook"] == notebook
                        and f.get("exercise") in (None, "", exercise)})
        for prop in sorted(props, key=lambda p: list(PROPERTIES).index(p)):
            passed, total = props[prop][:2]
            rows.append({"student": student, "exercise": exercise, "property": prop,
                         "points": round(PROPERTIES[prop].max_points * credit[prop], 4),
                         "max_points": PROPERTIES[prop].max_points, "partial_credit": round(credit[prop], 6),
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


def student_visible(rows: list[dict], columns: dict[str, str], flt) -> list[dict]:
    """`rows` with the text `columns` ({column: "text" | "json"}) through the feedback filter
    (rmqlab.grading.feedback.OutputFilter.clean): findings' details, results' details, counterexamples
    and the gradebook's finding column hold what a student printed, raised or returned."""
    out = []
    for r in rows:
        r = dict(r)
        for col, kind in columns.items():
            if r.get(col) is not None:
                r[col] = flt.clean_json(r[col]) if kind == "json" else flt.clean(r[col])
        out.append(r)
    return out


def write_all(out_dir: str, *, gradebook: list[dict], results: list[dict], counterexamples: list[dict],
              findings: list[dict], hidden=None) -> None:
    """Every file but the feedback pages and run.json. `hidden`: the grading run's hidden names and
    paths (as for rmqlab.grading.feedback.student_page), or an OutputFilter; without it, paths and
    sizes are still filtered."""
    from rmqlab.grading.feedback import output_filter
    flt = output_filter(hidden, budget=False)
    gradebook = student_visible(gradebook, {"finding": "text"}, flt)
    results = student_visible(results, {"detail": "text"}, flt)
    counterexamples = student_visible(counterexamples, {"args": "json", "expected": "json", "got": "json"}, flt)
    findings = student_visible(findings, {"notebook": "text", "detail": "text"}, flt)
    os.makedirs(out_dir, exist_ok=True)
    write_csv(os.path.join(out_dir, "gradebook.csv"), GRADEBOOK_COLUMNS, gradebook)
    write_csv(os.path.join(out_dir, "totals.csv"), TOTALS_COLUMNS, totals(gradebook))
    write_results(os.path.join(out_dir, "results.parquet"), results)
    write_counterexamples(os.path.join(out_dir, "counterexamples.parquet"), counterexamples)
    write_csv(os.path.join(out_dir, "findings.csv"), FINDINGS_COLUMNS, findings)
