"""ManualClock: a clock that only moves when told to (epoch milliseconds).

Components take a `clock` callable instead of reading the wall clock, so a test, the demo or the
simulator decides what time it is. This is the smallest such clock; the simulator's virtual clock
(which also runs timers) is built on the same contract.
"""

from __future__ import annotations


class ManualClock:
    def __init__(self, start_ms: int = 1_700_000_000_000):
        self.now_ms = start_ms

    def __call__(self) -> int:
        return self.now_ms

    def advance(self, ms: int) -> int:
        if ms < 0:
            raise ValueError(f"time cannot go backwards ({ms} ms)")
        self.now_ms += ms
        return self.now_ms
