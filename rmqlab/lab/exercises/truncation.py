"""Lab 04's exercise: where a returning slave cuts its log (seed 000 「截断算法」, seed 002 "Truncation
algorithm", reference §1.3 findConsistentPoint and §2.4 doTruncate).

The student writes

    def truncation_point(local, local_max, master, master_max) -> int

`local` and `master` are the two epoch files, each a list of `EpochStart(epoch, start_offset)` in
ascending epoch order (the slave's own file, and the entries the master sent in its handshake);
`local_max` and `master_max` are the ends of the two logs (maxPhyOffset; the master's travels in
the same handshake frame). An epoch's entries cover [start_offset, the next entry's start_offset),
the last one [start_offset, max). The function returns the offset the slave truncates to, or -1
when the two files share no epoch with the same start offset (the slave then refuses to
replicate). That is RocketMQ's EpochFileCache.findConsistentPoint on the two scratch caches
AutoSwitchHAClient.doTruncate builds, the same as rmqlab.store.epoch_file_cache.

The examples are data (`Example`, `PUBLIC_EXAMPLES`; `load_examples` reads more from JSON, as the
hidden set of the grading pipeline will be). `check(student_fn, examples)` runs the function on
each example in a forked child process with a time limit, so a student's exception, wrong return
type, endless loop, sys.exit or memory bomb becomes a line in the report, never a hung or dead
kernel. Linux and macOS only (os.fork).
"""

from __future__ import annotations

import io
import json
import numbers
import os
import select
import signal
import sys
import time
import traceback
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

TIME_LIMIT_S = 1.0    # per example; a correct solution takes microseconds
BUDGET_S = 10.0       # all examples together, so an endless loop costs seconds, not minutes
MEMORY_HEADROOM = 512 * 1024 * 1024  # what a child may allocate beyond the kernel it was forked from
OUTPUT_LIMIT = 2_000  # characters of a child's printed output kept in the report


class EpochStart(NamedTuple):
    """One line of an epoch file: the epoch and the commit-log offset where it starts."""

    epoch: int
    start_offset: int


@dataclass(frozen=True)
class Example:
    """One case: both epoch files and log ends, the expected truncation point, and for a public
    example a hint (shown when it fails) and where the case comes from."""

    name: str
    local: tuple[EpochStart, ...]
    local_max: int
    master: tuple[EpochStart, ...]
    master_max: int
    expected: int
    hint: str = ""
    source: str = ""

    def describe(self) -> str:
        return (f"local {_entries(self.local)} max {self.local_max}, "
                f"master {_entries(self.master)} max {self.master_max}")

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "local": [list(e) for e in self.local], "local_max": self.local_max,
                "master": [list(e) for e in self.master], "master_max": self.master_max,
                "expected": self.expected, "hint": self.hint, "source": self.source}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Example:
        return cls(d["name"], tuple(EpochStart(*e) for e in d["local"]), d["local_max"],
                   tuple(EpochStart(*e) for e in d["master"]), d["master_max"], d["expected"],
                   d.get("hint", ""), d.get("source", ""))


def _entries(entries: Iterable[EpochStart]) -> str:
    return "[" + ", ".join(f"({e}, {s})" for e, s in entries) + "]"


def _ex(name: str, local: list[tuple[int, int]], local_max: int, master: list[tuple[int, int]], master_max: int,
        expected: int, hint: str, source: str) -> Example:
    return Example(name, tuple(EpochStart(*e) for e in local), local_max, tuple(EpochStart(*e) for e in master),
                   master_max, expected, hint, source)


_SEED = "seed 000 「截断算法」 / seed 002 \"Truncation algorithm\""
_REF = "reference §1.3 (RocketMQ's EpochFileCacheTest)"
# Seed 000's six "truncation example analysis" cases come without their diagrams (reference §1.7:
# the images were never committed), so the cases below that follow them are rebuilt from the prose.
PUBLIC_EXAMPLES: tuple[Example, ...] = (
    _ex("in step", [(1, 0)], 1000, [(1, 0)], 1000, 1000,
        "Same epoch, same start, same end: nothing to cut, the point is the end of the shared epoch.", _SEED),
    _ex("slave behind", [(1, 0)], 600, [(1, 0), (2, 1000)], 1500, 600,
        "The slave's epoch 1 ends at its own log end (600); the master's at 1000. Take the smaller end.", _SEED),
    _ex("old master with an unreplicated tail", [(1, 0)], 1000, [(1, 0), (2, 900)], 1200, 900,
        "Seed case (1): the new master started epoch 2 at 900, so epoch 1 ends at 900 on the master; "
        "the returning old master cuts its 900-1000 (never committed).", _SEED),
    _ex("old master lost its unflushed tail", [(1, 0)], 900, [(1, 0), (2, 1000)], 1300, 900,
        "Seed case (2): the old master's machine crash lost 900-1000 (ASYNC_FLUSH); min(900, 1000) = 900, "
        "it cuts nothing and copies the rest from the new master.", _SEED),
    _ex("successive failovers, nothing to cut", [(1, 0), (2, 800)], 1200, [(1, 0), (2, 800), (3, 1200)], 1500,
        1200, "Seed case (3): walk the local epochs from the newest; epoch 2 matches and both sides end it at 1200.",
        _SEED),
    _ex("successive failovers, old master of epoch 2 returns", [(1, 0), (2, 800)], 1300,
        [(1, 0), (2, 800), (3, 1200)], 1500, 1200,
        "Epoch 2 matches (same start 800); the master ends it at 1200 where epoch 3 begins.", _SEED),
    _ex("slave wrote under an epoch the master never saw", [(1, 0), (2, 500)], 900, [(1, 0), (3, 500)], 700, 500,
        "Local epoch 2 is not in the master's file: skip it and try epoch 1, which both end at 500 "
        "(an unclean election: tests/test_controller_modes.py f3).", _SEED),
    _ex("unseen epoch, the new master's epoch starts earlier", [(1, 0), (2, 500)], 900, [(1, 0), (3, 400)], 800,
        400, "Epoch 1 is the consistent epoch; the master ends it at 400, before the slave's 500.", _SEED),
    _ex("same epoch number, different start", [(1, 100), (2, 300), (3, 500)], 800,
        [(1, 100), (2, 300), (3, 450)], 800, 450,
        "An epoch counts only if number AND start offset match: epoch 3 starts at 500 here, 450 there, "
        "so epoch 2 is the consistent one, ending at min(500, 450).", _REF),
    _ex("last epoch shared, master shorter", [(1, 100), (2, 300), (3, 500)], 700,
        [(1, 100), (2, 300), (3, 500)], 600, 600, "Epoch 3 matches; its ends are the two log ends.", _REF),
    _ex("no epoch in common", [(1, 100), (2, 300), (3, 500)], 700, [(1, 200), (2, 500)], 900, -1,
        "No epoch has the same start on both sides: return -1 (the slave refuses to replicate).", _REF),
    _ex("a newer local epoch the master lacks", [(1, 100), (2, 300), (3, 500), (4, 800)], 1000,
        [(1, 100), (2, 300), (3, 500)], 700, 700,
        "Local epoch 4 is unknown to the master: skip it; epoch 3 ends at 800 here, at 700 (its log end) there.",
        _REF),
    _ex("empty local epoch file", [], 0, [(1, 0)], 500, -1,
        "No local epoch, nothing can match: -1 (doTruncate treats an empty file as a new replica before it "
        "ever asks for the point).", _REF),
    _ex("master's oldest epochs expired", [(1, 0), (2, 500)], 600, [(2, 500), (3, 900)], 1000, 600,
        "The master deleted epoch 1 with its expired files; epoch 2 still matches.", _SEED),
    _ex("unclean master holding none of the slave's epochs", [(1, 0), (2, 500)], 900, [(3, 0)], 300, -1,
        "The master only has epoch 3: nothing matches, -1.", _SEED),
    _ex("slave ahead in the same epoch", [(1, 0)], 1000, [(1, 0)], 900, 900,
        "Both sides are in epoch 1; the master's log ends first.", _SEED),
    _ex("epoch numbers with gaps", [(1, 0), (3, 400)], 600, [(1, 0), (3, 400), (5, 600)], 800, 600,
        "Epochs are not consecutive (elections in which nobody wrote); compare by number, not position.", _SEED),
)


def load_examples(path: str) -> tuple[Example, ...]:
    """Examples from a JSON file: a list of `Example.to_dict()` objects."""
    with open(path, encoding="utf-8") as f:
        return tuple(Example.from_dict(d) for d in json.load(f))


# --- running a student's function -------------------------------------------------------------
@dataclass(frozen=True)
class ExampleResult:
    """What one example gave. status: pass, fail (a wrong int), wrong-type, error (it raised),
    timeout, crashed (the child died without answering), todo (NotImplementedError), skipped
    (the time budget ran out)."""

    name: str
    status: str
    expected: int
    got: int | None
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


def check(student_fn: Callable[..., Any], examples: Sequence[Example] = PUBLIC_EXAMPLES, *,
          time_limit_s: float = TIME_LIMIT_S, budget_s: float = BUDGET_S) -> CheckReport:
    """Run `student_fn(local, local_max, master, master_max)` on every example, each in its own
    forked child with `time_limit_s`; after `budget_s` in all, the rest are skipped."""
    if not hasattr(os, "fork"):
        raise RuntimeError("check() runs student code in a forked child process: it needs Linux or macOS")
    name = getattr(student_fn, "__name__", None)
    name = name if isinstance(name, str) else "the function"
    results = []
    deadline = time.monotonic() + budget_s
    for ex in examples:
        left = deadline - time.monotonic()
        if left <= 0:
            results.append(ExampleResult(ex.name, "skipped", ex.expected, None,
                                         f"not run: the {budget_s:g} s budget for all examples ran out"))
            continue
        args = (list(ex.local), ex.local_max, list(ex.master), ex.master_max)
        answer = _run_isolated(student_fn, args, min(time_limit_s, left))
        results.append(_judge(ex, answer, min(time_limit_s, left)))
    return CheckReport(name, tuple(results))


def _judge(ex: Example, answer: dict[str, Any], limit_s: float) -> ExampleResult:
    status, output = answer["status"], answer.get("output", "")
    where = f"example '{ex.name}' ({ex.describe()})"
    hint = f" Hint: {ex.hint}" if ex.hint else ""
    if status == "ok":
        got = answer["value"]
        if got == ex.expected:
            return ExampleResult(ex.name, "pass", ex.expected, got, "", output)
        return ExampleResult(ex.name, "fail", ex.expected, got, f"{where}: expected {ex.expected}, got {got}.{hint}",
                             output)
    if status == "wrong-type":
        return ExampleResult(ex.name, "wrong-type", ex.expected, None,
                             f"{where}: returned {answer['repr']} (a {answer['type']}), expected an int "
                             f"({ex.expected})", output)
    if status == "todo":
        return ExampleResult(ex.name, "todo", ex.expected, None, f"{where}: NotImplementedError", output)
    if status == "error":
        return ExampleResult(ex.name, "error", ex.expected, None, f"{where}: raised {answer['error']}\n"
                             f"{answer.get('traceback', '')}".rstrip(), output)
    if status == "timeout":
        return ExampleResult(ex.name, "timeout", ex.expected, None,
                             f"{where}: no answer within {limit_s:g} s (an endless loop?)", output)
    return ExampleResult(ex.name, "crashed", ex.expected, None,
                         f"{where}: the process running it died without answering ({answer.get('why')})", output)


def _run_isolated(fn: Callable[..., Any], args: tuple, limit_s: float) -> dict[str, Any]:
    """`fn(*args)` in a forked child: its verdict as a dict (status ok / wrong-type / todo / error /
    timeout / crashed). The child answers with one JSON line on a pipe and leaves with os._exit,
    so nothing of the parent (a Jupyter kernel's sockets, atexit hooks) runs twice."""
    for stream in (sys.stdout, sys.stderr):  # what the parent printed must not be buffered twice
        try:
            stream.flush()
        except Exception:
            pass
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child
        os.close(r)
        try:
            _child(fn, args, w)
        finally:
            os._exit(0)
    os.close(w)
    data = b""
    deadline = time.monotonic() + limit_s
    timed_out = False
    try:
        while not data.endswith(b"\n"):
            left = deadline - time.monotonic()
            if left <= 0:
                timed_out = True
                break
            ready, _, _ = select.select([r], [], [], left)
            if ready:
                chunk = os.read(r, 65536)
                if not chunk:
                    break
                data += chunk
    finally:
        os.close(r)
    if timed_out or not data.endswith(b"\n"):
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    _, status = os.waitpid(pid, 0)
    if timed_out:
        return {"status": "timeout"}
    try:
        return json.loads(data)
    except ValueError:
        if os.WIFSIGNALED(status):
            why = f"killed by signal {os.WTERMSIG(status)}"
        else:
            why = f"exit status {os.WEXITSTATUS(status)}"
        return {"status": "crashed", "why": why}


def _child(fn: Callable[..., Any], args: tuple, fd: int) -> None:
    captured = io.StringIO()
    sys.stdout = sys.stderr = captured  # a print must not reach the kernel's streams from here
    try:
        _limit_memory()
        value = fn(*args)
        if isinstance(value, bool) or not isinstance(value, numbers.Integral):
            out = {"status": "wrong-type", "type": type(value).__name__, "repr": _safe_repr(value)}
        else:
            out = {"status": "ok", "value": int(value)}
    except NotImplementedError:
        out = {"status": "todo"}
    except BaseException as e:  # SystemExit and KeyboardInterrupt too: they are the student's
        out = {"status": "error", "error": _safe_repr(e, describe_exception=True),
               "traceback": _student_traceback(e)}
    try:
        out["output"] = captured.getvalue()[:OUTPUT_LIMIT]
        line = json.dumps(out).encode() + b"\n"
    except BaseException:
        line = json.dumps({"status": "crashed", "why": "its answer could not be encoded"}).encode() + b"\n"
    while line:
        line = line[os.write(fd, line):]


def _limit_memory() -> None:
    try:
        import resource

        with open("/proc/self/statm") as f:
            size = int(f.read().split()[0]) * os.sysconf("SC_PAGE_SIZE")
        resource.setrlimit(resource.RLIMIT_AS, (size + MEMORY_HEADROOM, size + MEMORY_HEADROOM))
    except (ImportError, OSError, ValueError):
        pass  # no /proc (macOS): no memory limit, the time limit still holds


def _safe_repr(value: Any, describe_exception: bool = False) -> str:
    try:
        text = f"{type(value).__name__}: {value}" if describe_exception else repr(value)
    except BaseException:
        text = f"<a {type(value).__name__} that cannot be shown>"
    return text if len(text) <= 200 else text[:197] + "..."


def _student_traceback(e: BaseException) -> str:
    """The last frames of the traceback (the student's code), without this module's."""
    try:
        frames = [f for f in traceback.extract_tb(e.__traceback__) if f.filename != __file__]
        return "".join(traceback.format_list(frames[-3:]))
    except BaseException:
        return ""
