"""What a checker returns: valid or not, and each violation with where and when it first showed.

A checker (Jepsen's `checker/check`) reads a history — here the event trace, plus for the replica
checker the store files left after the run — and returns a `CheckResult`. A violation names the
trace position (`seq`, `time_ms`) and the node where it first happened, so a lab's invariant panel
can point at it on the timeline and the grading pipeline can quote it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class Violation:
    """One broken invariant. `seq`/`time_ms`: the trace event where it first showed (None when it
    is only visible in the files after the run); `node`: where; `details`: plain JSON values."""

    what: str            # short name: "lost", "unexpected", "commitlog-diverged", "two-masters", ...
    message: str
    node: str | None = None
    seq: int | None = None
    time_ms: float | None = None
    details: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {"what": self.what, "message": self.message, "node": self.node, "seq": self.seq,
                "time_ms": self.time_ms, "details": self.details}

    def __str__(self) -> str:
        where = f" at {self.node}" if self.node else ""
        when = f" (seq {self.seq}, {self.time_ms:.0f} ms)" if self.seq is not None and self.time_ms is not None else ""
        return f"{self.what}{where}{when}: {self.message}"


@dataclass(frozen=True)
class CheckResult:
    """A checker's verdict. `violations` are in the order they happened (by seq; file-only ones
    last); `stats` are the counts a panel shows (plain JSON values)."""

    checker: str
    valid: bool
    violations: tuple[Violation, ...] = ()
    stats: dict[str, Any] = field(default_factory=dict)

    @property
    def first(self) -> Violation | None:
        return self.violations[0] if self.violations else None

    def to_dict(self) -> dict[str, Any]:
        return {"checker": self.checker, "valid": self.valid, "stats": self.stats,
                "violations": [v.to_dict() for v in self.violations]}

    def __str__(self) -> str:
        head = f"{self.checker}: {'valid' if self.valid else 'INVALID'} {self.stats}"
        return head if self.valid else f"{head}\n  first: {self.first}" + (
            f" (+{len(self.violations) - 1} more)" if len(self.violations) > 1 else "")


def _order(v: Violation) -> tuple:
    return (v.seq is None, v.seq if v.seq is not None else 0)


def result(checker: str, violations: list[Violation], stats: dict[str, Any]) -> CheckResult:
    ordered = tuple(sorted(violations, key=_order))
    return CheckResult(checker, not ordered, ordered, stats)
