"""BrokerStats: the counters ``mqadmin brokerStatus`` shows (GET_BROKER_RUNTIME_INFO).

A small stand-in for RocketMQ's ``BrokerStats`` / ``BrokerStatsManager`` /
``StoreStatsService`` counters: messages and bytes put, failed puts, messages handed out by pulls.
RocketMQ also samples them into per-minute TPS figures and keeps yesterday's/today's totals; rmqlab
keeps the totals since start only (``msgPutTotalTodayNow`` and ``msgGetTotalTodayNow`` report them).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class BrokerStats:
    put_times_total: int = 0
    put_size_total: int = 0
    put_failed_times: int = 0
    get_total: int = 0

    def on_put(self, wrote_bytes: int) -> None:
        self.put_times_total += 1
        self.put_size_total += wrote_bytes

    def on_put_failed(self) -> None:
        self.put_failed_times += 1

    def on_get(self, message_count: int) -> None:
        self.get_total += message_count
