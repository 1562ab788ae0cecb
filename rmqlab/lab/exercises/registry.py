"""The exercise registry: what an exercise is, how its public examples are checked, and
how a student's function decides in the simulator for grading.

    from rmqlab.lab.exercises import EXERCISES
    ex = EXERCISES["elect_master"]
    print(ex.check(elect_master))                 # public examples, each run in a sandboxed child
    run_workload(..., decision_points=ex.decision_points(sandboxed_fn, calls))   # the components ask it

Each exercise is one or more of the simulator's decision points (rmqlab.common.decision_points:
`points` names them): the components take a strategy there, with RocketMQ's rule as the default, and
`decision_points` gives them one that asks the exercise's function. Every exercise takes JSON
arguments and returns a JSON answer, so the same function runs in the notebook (a callable), in a
`SandboxedFunction` (grading) and as the reference. The strategy builds the arguments from the
component's own values (copies: a function cannot change the simulator's state), validates the
answer with `normalize` (a `StudentFunctionError` "wrong-type" when it is not the kind of answer the
exercise expects) and converts it back to what the component uses; an exception of the function
(or StudentFunctionError) propagates out of the simulator untouched.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from rmqlab.common.decision_points import POINTS, DecisionPoints
from rmqlab.lab.exercises.sandbox import OUTPUT_LIMIT, START_TIME_LIMIT_S, SandboxedFunction, StudentFunctionError
from rmqlab.lab.exercises.sandbox import safe_repr as _short

TIME_LIMIT_S = 1.0    # per example; a correct solution takes microseconds
BUDGET_S = 10.0       # all examples together, so an endless loop costs seconds, not minutes


@dataclass(frozen=True)
class Example:
    """One public (or hidden) case: the JSON arguments, the expected answer, a hint shown when it
    fails, and where the case comes from (a passage of RocketMQ's documentation or its tests)."""

    name: str
    args: tuple
    expected: Any
    hint: str = ""
    source: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "args": list(self.args), "expected": self.expected, "hint": self.hint,
                "source": self.source}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Example:
        if not isinstance(d, dict):
            raise ValueError(f"an example must be a JSON object, not {type(d).__name__}")
        for key in ("name", "args", "expected"):
            if key not in d:
                raise ValueError(f"example {d.get('name', '?')!r}: the field {key!r} is missing")
        if not isinstance(d["args"], list):
            raise ValueError(f"example {d['name']!r}: 'args' must be a list")
        return cls(d["name"], tuple(d["args"]), d["expected"], d.get("hint", ""), d.get("source", ""))


@dataclass(frozen=True)
class ExampleResult:
    """What one example gave. status: pass, fail (a wrong answer), wrong-type, error (it raised),
    timeout, crashed (the child died without answering), todo (NotImplementedError),
    sandbox-violation, skipped (the time budget ran out)."""

    name: str
    status: str
    expected: Any
    got: Any
    message: str
    output: str = ""

    @property
    def passed(self) -> bool:
        return self.status == "pass"

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "status": self.status, "expected": self.expected, "got": self.got,
                "message": self.message, "output": self.output}


@dataclass(frozen=True)
class CheckReport:
    function: str
    results: tuple[ExampleResult, ...]

    @property
    def passed(self) -> bool:
        return bool(self.results) and all(r.passed for r in self.results)

    @property
    def todo(self) -> bool:
        """The function is still the stub: it raised NotImplementedError."""
        return any(r.status == "todo" for r in self.results)

    @property
    def n_passed(self) -> int:
        return sum(r.passed for r in self.results)

    @property
    def first_failure(self) -> ExampleResult | None:
        return next((r for r in self.results if not r.passed), None)

    def to_dict(self) -> dict[str, Any]:
        return {"function": self.function, "passed": self.passed, "n_passed": self.n_passed,
                "total": len(self.results), "results": [r.to_dict() for r in self.results]}

    def __str__(self) -> str:
        if self.todo:
            return (f"{self.function} is still the TODO stub (it raises NotImplementedError): nothing checked "
                    f"yet. Write it, then run this cell again ({len(self.results)} examples wait).")
        lines = [f"{self.function}: {self.n_passed}/{len(self.results)} examples pass"]
        for r in self.results:
            lines.append(f"  {'ok  ' if r.passed else 'FAIL'} {r.name}" + ("" if r.passed else f": {r.message}"))
            if not r.passed and r.output:
                printed = r.output if len(r.output) <= 300 else r.output[:297] + "..."
                lines.append("       it printed: " + printed.rstrip("\n").replace("\n", "\n       "))
        return "\n".join(lines)


def _json_copy(value: Any) -> Any:
    return json.loads(json.dumps(value))


@dataclass(frozen=True)
class Exercise:
    """One exercise. `reference` is RocketMQ's rule on the JSON arguments; `normalize_answer`
    validates an answer (returns it canonical, raises ValueError saying what is wrong);
    `strategies(ask)` gives, for each of the exercise's decision `points` (DecisionPoints field
    names), the strategy the component calls there, which asks `ask(*json_args) -> normalized
    answer`; `reference_workload` is a catalog workload (rmqlab.workload.catalog) whose run reaches
    every one of them; `describe(args)` shows an example's arguments in words; `arg_adapter` turns
    the JSON arguments into what the lab's notebook shows (run in the sandboxed child, e.g. lists
    into named tuples); `answer_kind` says what the answer must be."""

    name: str
    function: str
    lab: str
    modes: tuple[str, ...]
    reference: Callable[..., Any]
    public_examples: tuple[Example, ...]
    normalize_answer: Callable[[Any], Any]
    strategies: Callable[[Callable[..., Any]], dict[str, Callable[..., Any]]]
    describe: Callable[[Sequence[Any]], str]
    answer_kind: str
    arg_names: tuple[str, ...]
    points: tuple[str, ...]
    reference_workload: str
    summary: str = ""
    arg_adapter: Callable[[list], list] | None = field(default=None, compare=False)

    def __post_init__(self) -> None:
        unknown = set(self.points) - set(POINTS)
        if not self.points or unknown:
            raise ValueError(f"exercise {self.name}: points must name decision points ({', '.join(POINTS)}), "
                             f"not {sorted(unknown) or 'nothing'}")

    # -- answers ---------------------------------------------------------------------------------
    def normalize(self, answer: Any) -> Any:
        """The answer in canonical form; StudentFunctionError("wrong-type") when it is not
        `answer_kind`."""
        try:
            return self.normalize_answer(answer)
        except (ValueError, TypeError) as e:
            raise StudentFunctionError("wrong-type", f"{self.function} returned {_short(answer)} "
                                       f"(a {type(answer).__name__}): {e}", type=type(answer).__name__,
                                       repr=_short(answer)) from None

    # -- public checks ---------------------------------------------------------------------------
    def check(self, fn: Callable[..., Any] | str | SandboxedFunction, examples: Sequence[Example] | None = None, *,
              time_limit_s: float = TIME_LIMIT_S, budget_s: float = BUDGET_S) -> CheckReport:
        """Run `fn` on every example (default: the public ones), each in its own sandboxed child
        with `time_limit_s` (a SandboxedFunction given is used as is, for every example); after
        `budget_s` of the function's running time in all, the rest are skipped. Every failure names
        its example."""
        examples = self.public_examples if examples is None else tuple(examples)
        name = getattr(fn, "__name__", None) if not isinstance(fn, str) else self.function
        name = name if isinstance(name, str) else "the function"
        results = []
        spent = [0.0]  # seconds the function ran (a child's start-up is not the student's time)
        for ex in examples:
            left = budget_s - spent[0]
            if left <= 0:
                results.append(ExampleResult(ex.name, "skipped", ex.expected, None,
                                             f"not run: the {budget_s:g} s budget for all examples ran out"))
                continue
            limit = min(time_limit_s, left)
            results.append(self._run_example(fn, ex, limit, spent, left))
        return CheckReport(name, tuple(results))

    def _run_example(self, fn, ex: Example, limit_s: float, spent: list[float], budget_left: float) -> ExampleResult:
        where = f"example '{ex.name}' ({self.describe(ex.args)})"
        hint = f" Hint: {ex.hint}" if ex.hint else ""
        sf = fn if isinstance(fn, SandboxedFunction) else None
        try:
            if sf is None:
                # Loading a submitted source is the student's time too (a loop at module level); a
                # callable's start is only the child's, which a busy machine may make slow.
                start_limit = max(limit_s, budget_left) if isinstance(fn, str) else START_TIME_LIMIT_S
                sf = SandboxedFunction(fn, self.function, time_limit_s=limit_s, arg_adapter=self.arg_adapter,
                                       output_limit=OUTPUT_LIMIT, start_time_limit_s=start_limit)
            try:
                began = time.monotonic()
                try:
                    sf.start()
                finally:
                    if isinstance(fn, str):
                        spent[0] += time.monotonic() - began
                began = time.monotonic()
                try:
                    raw = sf(*_json_copy(list(ex.args)))
                finally:
                    spent[0] += time.monotonic() - began
                got_type = getattr(sf, "last_type", None) or type(raw).__name__
                try:
                    got = self.normalize_answer(raw)
                except (ValueError, TypeError):
                    return ExampleResult(ex.name, "wrong-type", ex.expected, None,
                                         f"{where}: returned {_short(raw)} (a {got_type}), expected "
                                         f"{self.answer_kind} ({_show(ex.expected)})", sf.output)
            finally:
                if sf is not fn:
                    sf.close()
        except StudentFunctionError as e:
            return ExampleResult(ex.name, e.status, ex.expected, None, self._explain(e, where, ex, limit_s), e.output)
        if got == self.normalize_answer(ex.expected):
            return ExampleResult(ex.name, "pass", ex.expected, got, "", sf.output)
        return ExampleResult(ex.name, "fail", ex.expected, got,
                             f"{where}: expected {_show(ex.expected)}, got {_show(got)}.{hint}", sf.output)

    def _explain(self, e: StudentFunctionError, where: str, ex: Example, limit_s: float) -> str:
        d = e.details
        if e.status == "wrong-type":
            return f"{where}: returned {d.get('repr')} (a {d.get('type')}), expected {self.answer_kind} " \
                   f"({_show(ex.expected)})"
        if e.status == "todo":
            return f"{where}: NotImplementedError"
        if e.status == "error":
            return f"{where}: raised {d.get('error', e.message)}\n{d.get('traceback', '')}".rstrip()
        if e.status == "timeout":
            return f"{where}: no answer within {limit_s:g} s (an endless loop?)"
        if e.status == "sandbox-violation":
            return f"{where}: tried {'; '.join(d.get('violations', []))}, which is not allowed (no files outside " \
                   f"the scratch dir, no network, no processes)"
        return f"{where}: the process running it died without answering ({d.get('why', e.message)})"

    def sandbox(self, fn_or_source: Callable[..., Any] | str, **kwargs: Any) -> SandboxedFunction:
        """A SandboxedFunction serving this exercise's function (`self.function`, from a callable or
        a submission's source), with the exercise's `arg_adapter` so it sees the arguments as the
        lab's notebook shows them; kwargs go to SandboxedFunction (time_limit_s, deny_paths, ...)."""
        kwargs.setdefault("arg_adapter", self.arg_adapter)
        return SandboxedFunction(fn_or_source, self.function, **kwargs)

    # -- the simulator's decision points -----------------------------------------------------------
    def decision_points(self, fn: Callable[..., Any], calls: list | None = None) -> DecisionPoints:
        """The DecisionPoints (rmqlab.common.decision_points) under which the simulator's components
        ask `fn` (JSON args -> JSON answer: the reference, a SandboxedFunction, ...) at this
        exercise's points; pass it to run_workload / Cluster (decision_points=...). Each call
        appends {"args": [...], "answer": <normalized>} to `calls` (when given), or {"args": [...],
        "error": StudentFunctionError.to_dict()} when fn failed (raised, timed out, wrong type...):
        the exception is raised into the component, whose own error handling may absorb it (a
        broker turns it into a SYSTEM_ERROR answer), so check `calls` for "error" entries."""
        if not callable(fn):
            raise ValueError(f"{self.name}.decision_points: fn must be callable, not {type(fn).__name__}")

        def ask(*args: Any) -> Any:
            text = json.dumps(list(args))
            try:
                answer = self.normalize(fn(*json.loads(text)))
            except BaseException as e:
                # Recorded, then raised into the component: its own error handling may swallow it
                # (a broker answers a failed put with SYSTEM_ERROR), so `calls` is where a grader
                # finds out that the function failed.
                if calls is not None:
                    failure = e.to_dict() if isinstance(e, StudentFunctionError) else \
                        {"status": "error", "message": f"{type(e).__name__}: {e}", "output": ""}
                    calls.append({"args": json.loads(text), "error": failure})
                raise
            if calls is not None:
                calls.append({"args": json.loads(text), "answer": _json_copy(answer)})
            return answer

        strategies = self.strategies(ask)
        if set(strategies) != set(self.points):
            raise ValueError(f"exercise {self.name}: its strategies are for {sorted(strategies)}, its points "
                             f"{sorted(self.points)}")
        return DecisionPoints(**strategies)

    def examples_to_json(self, examples: Iterable[Example] | None = None) -> str:
        return json.dumps([ex.to_dict() for ex in (self.public_examples if examples is None else examples)])

    def load_examples(self, path: str) -> tuple[Example, ...]:
        """Examples from a JSON file: a list of `Example.to_dict()` objects (a hidden set)."""
        with open(path, encoding="utf-8") as f:
            data = json.load(f)
        if not isinstance(data, list):
            raise ValueError(f"{path}: expected a JSON list of examples")
        return tuple(Example.from_dict(d) for d in data)


def _show(value: Any) -> str:
    return "None" if value is None else json.dumps(value)


def combine(*points: DecisionPoints) -> DecisionPoints:
    """Several exercises' decision points in one run (each exercise has its own points)."""
    result = DecisionPoints()
    for p in points:
        result = result.merged(p)
    return result


__all__ = ["Example", "ExampleResult", "CheckReport", "Exercise", "TIME_LIMIT_S", "BUDGET_S", "combine"]
