"""Lab 04's exercise: where a returning slave cuts its log (the controller design document 「截断算法」 /
"Truncation algorithm"; RocketMQ's `EpochFileCache.findConsistentPoint` and `AutoSwitchHAClient.doTruncate`).

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
hidden set of the grading pipeline is). `check(student_fn, examples)` runs the function on each
example in a sandboxed forked child (sandbox.py) with a time limit, so a student's exception, wrong
return type, endless loop, sys.exit or memory bomb becomes a line in the report, never a hung or
dead kernel. Linux and macOS only (os.fork).

The registry's `EXERCISE` takes the same function on JSON arguments (epoch files as
[[epoch, start], ...]; the notebook's function sees EpochStart tuples) as the decision point
``find_consistent_point`` (rmqlab.common.decision_points): `EXERCISE.decision_points(fn)` makes the
slave's handshake (AutoSwitchHAClient -> do_truncate in rmqlab.ha.autoswitch.auto_switch_ha_protocol)
ask the function where it cuts, and only when do_truncate asks: an empty or data-less local epoch
file is decided before, as in RocketMQ.
"""

from __future__ import annotations

import json
import numbers
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

from rmqlab.common.checkpoint_file import LONG_MAX
from rmqlab.lab.exercises.registry import BUDGET_S, TIME_LIMIT_S, CheckReport, ExampleResult, Exercise
from rmqlab.lab.exercises.registry import Example as GenericExample
from rmqlab.lab.exercises.sandbox import OUTPUT_LIMIT

__all__ = ["EpochStart", "Example", "PUBLIC_EXAMPLES", "load_examples", "check", "reference", "EXERCISE",
           "CheckReport", "ExampleResult", "TIME_LIMIT_S", "BUDGET_S", "OUTPUT_LIMIT"]


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


_SEED = "controller design document (docs/en/controller/design.md) 「截断算法」 / \"Truncation algorithm\""
_REF = "RocketMQ's EpochFileCacheTest (store/src/test/java/org/apache/rocketmq/store/ha/autoswitch)"
# RIP-44's six "truncation example analysis" cases come without their diagrams (the images were
# never committed), so the cases below that follow them are rebuilt from the prose.
PUBLIC_EXAMPLES: tuple[Example, ...] = (
    _ex("in step", [(1, 0)], 1000, [(1, 0)], 1000, 1000,
        "Same epoch, same start, same end: nothing to cut, the point is the end of the shared epoch.", _SEED),
    _ex("slave behind", [(1, 0)], 600, [(1, 0), (2, 1000)], 1500, 600,
        "The slave's epoch 1 ends at its own log end (600); the master's at 1000. Take the smaller end.", _SEED),
    _ex("old master with an unreplicated tail", [(1, 0)], 1000, [(1, 0), (2, 900)], 1200, 900,
        "The design document's truncation case (1): the new master started epoch 2 at 900, so epoch 1 ends at "
        "900 on the master; the returning old master cuts its 900-1000 (never committed).", _SEED),
    _ex("old master lost its unflushed tail", [(1, 0)], 900, [(1, 0), (2, 1000)], 1300, 900,
        "The design document's truncation case (2): the old master's machine crash lost 900-1000 (ASYNC_FLUSH); "
        "min(900, 1000) = 900, it cuts nothing and copies the rest from the new master.", _SEED),
    _ex("successive failovers, nothing to cut", [(1, 0), (2, 800)], 1200, [(1, 0), (2, 800), (3, 1200)], 1500,
        1200, "The design document's truncation case (3): walk the local epochs from the newest; epoch 2 matches "
        "and both sides end it at 1200.", _SEED),
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
def reference(local, local_max, master, master_max) -> int:
    """RocketMQ's rule (EpochFileCache.findConsistentPoint on the scratch caches
    AutoSwitchHAClient.doTruncate builds): each epoch covers [start, next start), the last one [start, log end) — or
    is left open (LONG_MAX) when the log ends before it starts (setLastEpochEntryEndOffset); walk
    the local epochs from the newest; the first one the master holds with the same start offset
    gives min(local end, master end); none: -1."""
    def ends(entries, log_end):
        out = {}
        for i, (epoch, start) in enumerate(entries):
            if i + 1 < len(entries):
                out[epoch] = (start, entries[i + 1][1])
            else:
                out[epoch] = (start, log_end if start <= log_end else LONG_MAX)
        return out

    mine, theirs = ends(local, local_max), ends(master, master_max)
    for epoch in sorted(mine, reverse=True):
        if epoch in theirs and theirs[epoch][0] == mine[epoch][0]:
            return min(mine[epoch][1], theirs[epoch][1])
    return -1


def _normalize(answer: Any) -> int:
    if isinstance(answer, bool) or not isinstance(answer, numbers.Integral):
        raise ValueError("the truncation point must be an int (-1: no consistent point)")
    return int(answer)


def _describe(args) -> str:
    local, local_max, master, master_max = args
    return f"local {_entries(local)} max {local_max}, master {_entries(master)} max {master_max}"


def _as_epoch_starts(args: list) -> list:
    """What the notebook's function sees: the epoch files as lists of EpochStart."""
    local, local_max, master, master_max = args
    return [[EpochStart(*e) for e in local], local_max, [EpochStart(*e) for e in master], master_max]


def _generic(ex: Example) -> GenericExample:
    return GenericExample(ex.name, ([list(e) for e in ex.local], ex.local_max, [list(e) for e in ex.master],
                                    ex.master_max), ex.expected, ex.hint, ex.source)


def _strategies(ask) -> dict:
    """The decision point find_consistent_point: the epoch files do_truncate was given, as JSON, to
    `ask`. The checkers' own do_truncate (rmqlab.checker.checkers, which judges the cut
    afterwards) is given no point: it stays RocketMQ's."""

    def find_consistent_point(local_entries, local_max_offset, master_entries, master_max_offset) -> int:
        return ask([[e.epoch, e.start_offset] for e in local_entries], local_max_offset,
                   [[e.epoch, e.start_offset] for e in master_entries], master_max_offset)

    return {"find_consistent_point": find_consistent_point}


EXERCISE = Exercise(
    name="truncation_point", function="truncation_point", lab="04-log-truncation",
    modes=("controller-standalone", "controller-embedded"),
    reference=reference, public_examples=tuple(_generic(ex) for ex in PUBLIC_EXAMPLES),
    normalize_answer=_normalize, strategies=_strategies, describe=_describe, answer_kind="an int",
    arg_names=("local", "local_max", "master", "master_max"), points=("find_consistent_point",),
    reference_workload="ctrl-embedded-partition-master",
    summary="where a returning slave cuts its log (findConsistentPoint)", arg_adapter=_as_epoch_starts)


def check(student_fn: Callable[..., Any], examples: Sequence[Example] = PUBLIC_EXAMPLES, *,
          time_limit_s: float = TIME_LIMIT_S, budget_s: float = BUDGET_S) -> CheckReport:
    """Run `student_fn(local, local_max, master, master_max)` on every example, each in its own
    sandboxed child with `time_limit_s`; after `budget_s` in all, the rest are skipped."""
    return EXERCISE.check(student_fn, [_generic(ex) for ex in examples], time_limit_s=time_limit_s,
                          budget_s=budget_s)
