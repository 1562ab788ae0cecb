"""CompletableFuture: a single-threaded future with callbacks.

The store and the HA services complete work later (a SYNC_FLUSH put waits for the group commit, a
SYNC_MASTER put for the slave's ack). Java uses CompletableFuture; this is the same idea without
threads or an event loop, so the same component code runs on the simulator and on asyncio (the
runtime adapts it). Callbacks run synchronously in the thread that completes the future.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Generic, TypeVar

T = TypeVar("T")
_PENDING = object()


class CompletableFuture(Generic[T]):
    __slots__ = ("_result", "_callbacks")

    def __init__(self) -> None:
        self._result = _PENDING
        self._callbacks: list[Callable[[T], None]] = []

    @classmethod
    def completed(cls, value: T) -> CompletableFuture[T]:
        f = cls()
        f.complete(value)
        return f

    def done(self) -> bool:
        return self._result is not _PENDING

    def complete(self, value: T) -> bool:
        """Set the result once; later calls are ignored (returns False), like Java's complete()."""
        if self._result is not _PENDING:
            return False
        self._result = value
        callbacks, self._callbacks = self._callbacks, []
        for cb in callbacks:
            cb(value)
        return True

    def result(self) -> T:
        if self._result is _PENDING:
            raise RuntimeError("future is not complete yet")
        return self._result  # type: ignore[return-value]

    def then_accept(self, callback: Callable[[T], None]) -> CompletableFuture[T]:
        if self._result is _PENDING:
            self._callbacks.append(callback)
        else:
            callback(self._result)  # type: ignore[arg-type]
        return self
