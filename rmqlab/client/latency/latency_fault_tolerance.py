"""LatencyFaultTolerance: which brokers a producer avoids for now
(``client/latency/LatencyFaultToleranceImpl.java``).

A FaultItem per broker name records the latency of its last send and until when it is not
available (``startTimestamp``); MQFaultStrategy decides the duration from the latency. An item
whose time has passed is available again. The ``reachable`` flag is set false only while the
service detector runs (``startDetectorEnable``), which probes isolated brokers every 3 s and
clears the flag when one answers; rmqlab does not implement the detector (RocketMQ's default is
off), so brokers stay reachable and only the timed isolation applies.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass


@dataclass
class FaultItem:
    name: str
    current_latency: int = 0
    start_timestamp: int = 0  # not available before this time (ms)
    reachable: bool = True

    def update_not_available_duration(self, now_ms: int, not_available_duration: int) -> None:
        # Only ever extends the isolation: a short one does not cut a longer one short.
        if not_available_duration > 0 and now_ms + not_available_duration > self.start_timestamp:
            self.start_timestamp = now_ms + not_available_duration

    def is_available(self, now_ms: int) -> bool:
        return now_ms >= self.start_timestamp


class LatencyFaultTolerance:
    def __init__(self, clock: Callable[[], int]):
        self._clock = clock
        self.fault_item_table: dict[str, FaultItem] = {}

    def update_fault_item(self, name: str, current_latency: int, not_available_duration: int,
                          reachable: bool) -> None:
        """``updateFaultItem``: record a send's latency and isolate the broker for the duration."""
        item = self.fault_item_table.get(name)
        if item is None:
            item = self.fault_item_table[name] = FaultItem(name)
        item.current_latency = current_latency
        item.update_not_available_duration(self._clock(), not_available_duration)
        item.reachable = reachable

    def is_available(self, name: str) -> bool:
        item = self.fault_item_table.get(name)
        return item is None or item.is_available(self._clock())

    def is_reachable(self, name: str) -> bool:
        item = self.fault_item_table.get(name)
        return item is None or item.reachable

    def remove(self, name: str) -> None:
        self.fault_item_table.pop(name, None)
