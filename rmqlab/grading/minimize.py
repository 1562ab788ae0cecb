"""Counterexample minimization: the smallest failing input the feedback shows.

Starting from the first hook call where a student's answer differed from RocketMQ's, delta debugging
on the JSON arguments: drop elements of the argument lists (halves first, then one at a time) and
shrink the numbers order-preserving (`candidates`) while the student's answer still differs from
the reference's. A
candidate counts only if the reference answers it without error and the student answers it with a
valid value (an exception is another finding, not a smaller counterexample), and it keeps every list
that was sorted sorted (epoch files, offsets: a smaller case must still be a possible one; the
exercise's own `valid_args`, when it has one, has the last word). Student calls go through the
SandboxedFunction and are bounded (`max_calls`).

The signature of a counterexample is the canonical JSON of {args, expected, got}: the same minimized
case found for many students is one row of counterexamples.parquet (the instructor dashboard counts
them).
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from typing import Any

from rmqlab.trace.event import canonical_json


def signature(args: Any, expected: Any, got: Any) -> str:
    return canonical_json({"args": args, "expected": expected, "got": got})


def counterexample_id(exercise: str, sig: str) -> str:
    return exercise + "-" + hashlib.sha256(sig.encode()).hexdigest()[:12]


def _paths(value: Any, path: tuple = ()) -> Iterator[tuple]:
    yield path
    if isinstance(value, list):
        for i, v in enumerate(value):
            yield from _paths(v, path + (i,))
    elif isinstance(value, dict):
        for k in sorted(value):
            yield from _paths(value[k], path + (k,))


def _get(value: Any, path: tuple) -> Any:
    for p in path:
        value = value[p]
    return value


def _set(value: Any, path: tuple, new: Any) -> Any:
    if not path:
        return new
    head, rest = path[0], path[1:]
    if isinstance(value, list):
        copy = list(value)
    else:
        copy = dict(value)
    copy[head] = _set(value[head], rest, new)
    return copy


def _is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _sort_key(v: Any):
    if _is_int(v) or isinstance(v, float):
        return (v,)
    if isinstance(v, list) and v and all(_is_int(x) or isinstance(x, float) for x in v):
        return tuple(v)
    return None


def _order_key(v: Any):
    """What a list is sorted by: numbers, or the first element of records ([epoch, start], [id, ...])."""
    k = _sort_key(v)
    if k is None and isinstance(v, list) and v and (_is_int(v[0]) or isinstance(v[0], float)):
        k = (v[0],)
    return k


def _sorted_lists(value: Any) -> dict[tuple, bool]:
    """Paths of the lists whose elements are in order (numbers, number tuples, records by their first
    element) → whether strictly (ids, epochs: a smaller case must not invent duplicates)."""
    found = {}
    for path in _paths(value):
        v = _get(value, path)
        if isinstance(v, list) and len(v) >= 2:
            keys = [_order_key(x) for x in v]
            if all(k is not None for k in keys) and all(a <= b for a, b in zip(keys, keys[1:])):
                found[path] = all(a < b for a, b in zip(keys, keys[1:]))
    return found


def _still_sorted(candidate: Any, paths: dict[tuple, bool]) -> bool:
    for path, strict in paths.items():
        try:
            v = _get(candidate, path)
        except (IndexError, KeyError, TypeError):
            continue   # the list itself got shorter: a removed element takes its sub-list with it
        if isinstance(v, list):
            keys = [_order_key(x) for x in v]
            if any(k is None for k in keys):
                return False
            if any((a >= b) if strict else (a > b) for a, b in zip(keys, keys[1:])):
                return False
    return True


def _ints(value: Any) -> list[int]:
    return [v for v in (_get(value, p) for p in _paths(value)) if _is_int(v)]


def _replace_ints(value: Any, old: int, new: int) -> Any:
    if _is_int(value):
        return new if value == old else value
    if isinstance(value, list):
        return [_replace_ints(v, old, new) for v in value]
    if isinstance(value, dict):
        return {k: _replace_ints(v, old, new) for k, v in value.items()}
    return value


def candidates(args: Any) -> Iterator[Any]:
    """Smaller variants of `args`: elements removed from the argument lists themselves (big chunks,
    then single elements) — not from the lists inside them, which are records ([epoch, start],
    [broker_id, live], [slave_id, ack, last_caught_up]) of a fixed shape — then smaller numbers.

    Numbers shrink ORDER-PRESERVING: every occurrence of one value moves down to just above the
    next smaller value in the call (or 0), so every relation between the numbers — an epoch starts
    before the log ends, an ack is behind the confirm offset, two ids differ — is the same in the
    smaller case, and it reads like the original (offsets 0, 1, 2 instead of 11550, 11839, 57891).
    Negative numbers (-1: "none") are left alone."""
    for path in _paths(args):
        v = _get(args, path)
        if isinstance(v, list) and len(path) == 1:
            n = len(v)
            chunk = n // 2
            while chunk >= 1:
                for start in range(0, n, chunk):
                    yield _set(args, path, v[:start] + v[start + chunk:])
                chunk //= 2
    values = sorted(set(_ints(args)))
    for i, v in enumerate(values):
        if v <= 0:
            continue
        below = max((u for u in values[:i] if u >= 0), default=-1)
        if below + 1 < v:
            yield _replace_ints(args, v, below + 1)


def minimize_call(student, exercise, args: list, *, max_calls: int = 200) -> tuple[list, Any, Any, int, bool]:
    """(minimized args, reference answer, student answer, student calls made, reproduced). `student`
    is a callable (a SandboxedFunction); `exercise` an rmqlab.lab.exercises Exercise. `reproduced` is
    False when the student's function answers the original call right this time (nondeterministic
    code): nothing was minimized."""
    from rmqlab.lab.exercises import StudentFunctionError
    asked = 0
    sorted_paths = _sorted_lists(args)
    valid = getattr(exercise, "valid_args", None)

    def differs(candidate) -> tuple[bool, Any, Any]:
        nonlocal asked
        try:
            expected = exercise.normalize(exercise.reference(*candidate))
        except Exception:  # noqa: BLE001 — the reference rejects it: not a possible case
            return False, None, None
        asked += 1
        try:
            got = exercise.normalize(student(*candidate))
        except StudentFunctionError:
            return False, None, None
        return canonical_json(got) != canonical_json(expected), expected, got

    ok, expected, got = differs(args)
    if not ok:   # it does not reproduce (e.g. nondeterministic): the caller keeps the original call
        return args, expected, got, asked, False
    best = args
    progress = True
    while progress and asked < max_calls:
        progress = False
        for cand in candidates(best):
            if asked >= max_calls:
                break
            if not _still_sorted(cand, sorted_paths):
                continue
            if valid is not None:
                try:
                    if not valid(*cand):
                        continue
                except Exception:  # noqa: BLE001
                    continue
            ok, e, g = differs(cand)
            if ok:
                best, expected, got, progress = cand, e, g, True
                break
    return best, expected, got, asked, True
