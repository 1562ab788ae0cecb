"""pysyncobj's time source, bound to the node that is running it.

Every Raft timer in `pysyncobj.syncobj` — the election deadline, the heartbeat period, the leader's
fallback timeout, the one-second journal timer — reads the module-global name `monotonicTime`,
looked up at call time. This module replaces that one name, once, when it is imported, with
`monotonic_time`, which reads the clock of the node bound to the calling thread:

* in the simulator every entry into pysyncobj (a tick, a message, a connection event, a write) runs
  inside `bound(node)`, so pysyncobj sees that node's clock — virtual time, standing still while the
  nemesis pauses the node's clock, continuing from there when it resumes;
* anywhere else — the real runtime's autoTick thread, or a thread that never bound a node —
  nothing is bound and the call falls through to pysyncobj's own monotonic clock.

The binding is per thread, so a simulation in a notebook's main thread and a real SyncObj ticking
in its own thread can share the process without seeing each other's time (pysyncobj itself
has one process-wide clock; the binding makes the mix harmless rather than wrong).

The other modules of pysyncobj that read the clock (transport, tcp_connection, dns_resolver) keep
their own copies of the name; only the TCP transport uses them, and it runs on the real clock.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

import pysyncobj.syncobj as _syncobj

_local = threading.local()


def monotonic_time() -> float:
    """Seconds on the clock of the node bound to this thread, else pysyncobj's real clock."""
    clock = getattr(_local, "clock", None)
    return clock() if clock is not None else _REAL_MONOTONIC()


# Keep the library's own clock even if this module is imported twice (importlib.reload): the
# installed function remembers what it replaced.
_REAL_MONOTONIC: Callable[[], float] = getattr(_syncobj.monotonicTime, "rmqlab_replaced", _syncobj.monotonicTime)
monotonic_time.rmqlab_replaced = _REAL_MONOTONIC  # type: ignore[attr-defined]
_syncobj.monotonicTime = monotonic_time


class bound:
    """`with bound(clock):` — pysyncobj calls made inside read `clock()` (seconds).

    Re-entrant: the previous binding is restored on exit. A plain class rather than a
    contextlib generator because it wraps every tick and every message of a simulation.
    """

    __slots__ = ("_clock", "_previous")

    def __init__(self, clock: Callable[[], float]):
        self._clock = clock
        self._previous: Callable[[], float] | None = None

    def __enter__(self) -> None:
        self._previous = getattr(_local, "clock", None)
        _local.clock = self._clock

    def __exit__(self, *exc: object) -> None:
        _local.clock = self._previous
