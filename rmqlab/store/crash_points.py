"""Deterministic crash points: stop the store after its n-th file operation.

A crash test needs to crash the store at *every* instant that matters, reproducibly. The store's
file operations call `point(...)` (or `write_point(...)` for a write): creating a file, writing
into a mapped file or the checkpoint, msync, truncating, deleting, creating or removing `abort`.
When a `CrashPoints` is armed (`with armed(CrashPoints(n, seed))`), the n-th such operation
raises `SimulatedCrash` — after the operation completed, or, for a write, after a seeded prefix of
its bytes reached the page cache (a process killed in the middle of a memory copy). The caller
then treats the store as killed (`DefaultMessageStore.kill()`), optionally followed by a machine
crash (`page_cache.crash_machine`), and restarts it; crash points can be armed during that
recovery too.

Not armed (always, outside crash tests), every call is one global read.
"""

from __future__ import annotations

import random
from collections.abc import Iterator
from contextlib import contextmanager


class SimulatedCrash(BaseException):
    """The process died here. A BaseException so that no `except Exception` in the store can
    swallow it."""


class CrashPoints:
    """Counts file operations; crashes at operation number `crash_at` (1-based; None: never)."""

    def __init__(self, crash_at: int | None = None, seed: int = 0):
        self.crash_at = crash_at
        self.rng = random.Random(seed)
        self.count = 0
        self.crashed_at: tuple[str, str] | None = None  # (operation, path) of the crash

    def _hit(self, op: str, path: str) -> bool:
        self.count += 1
        if self.count == self.crash_at:
            self.crashed_at = (op, path)
            return True
        return False

    def point(self, op: str, path: str) -> None:
        if self._hit(op, path):
            raise SimulatedCrash(f"crash after {op} {path} (operation {self.count})")

    def write_point(self, path: str, nbytes: int) -> int | None:
        """None, or how many of the `nbytes` about to be written land before the crash."""
        if self._hit("write", path):
            return self.rng.randrange(0, nbytes + 1) if nbytes else 0
        return None


_active: CrashPoints | None = None


def point(op: str, path: str) -> None:
    """A file operation just completed."""
    if _active is not None:
        _active.point(op, path)


def write_point(path: str, nbytes: int) -> int | None:
    """A write of `nbytes` is about to happen: None to go on, else write that many and `crash()`."""
    return None if _active is None else _active.write_point(path, nbytes)


def crash(path: str) -> None:
    raise SimulatedCrash(f"crash in the middle of a write to {path}")


@contextmanager
def armed(crash_points: CrashPoints) -> Iterator[CrashPoints]:
    global _active
    previous, _active = _active, crash_points
    try:
        yield crash_points
    finally:
        _active = previous
