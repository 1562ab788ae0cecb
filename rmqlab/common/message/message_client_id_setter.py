"""MessageClientIDSetter: the unique message id (UNIQ_KEY) a producer, or the broker, gives a message that has none.

RocketMQ ``common/src/main/java/org/apache/rocketmq/common/message/MessageClientIDSetter.java``.
Producers normally set UNIQ_KEY themselves; ``SendMessageProcessor.sendMessage`` creates one when it
is missing or empty. The id is 32 hex digits (IPv4): a fixed prefix of IP (4 bytes), process id
(short) and class-loader hash code (int), then the milliseconds since the start of the current
month (int) and a counter (short).

Deviations, so that the simulator stays deterministic: the process id and the class-loader hash
come from the node's seeded random (no process is asked), and the month starts in UTC (Java uses
the JVM's default time zone).
"""

from __future__ import annotations

import datetime
import ipaddress
import struct
from collections.abc import Callable
from typing import Any

from rmqlab.common.java_compat import bytes2string, to_int32


class MessageClientIDSetter:
    def __init__(self, ip: str, clock: Callable[[], int], rng: Any):
        """``rng`` is the node's seeded ``random.Random``."""
        address = ipaddress.ip_address(ip)
        self._fix = bytes2string(address.packed + struct.pack(">hi", to_int32(rng.getrandbits(16)) & 0x7FFF,
                                                              to_int32(rng.getrandbits(32))))
        self._clock = clock
        self._counter = 0
        self._start_time = 0
        self._next_start_time = 0
        self._set_start_time(clock())

    def _set_start_time(self, millis: int) -> None:
        now = datetime.datetime.fromtimestamp(millis / 1000, tz=datetime.UTC)
        start = now.replace(day=1, hour=0, minute=0, second=0, microsecond=0)
        nxt = (start.replace(year=start.year + 1, month=1) if start.month == 12
               else start.replace(month=start.month + 1))
        self._start_time = int(start.timestamp() * 1000)
        self._next_start_time = int(nxt.timestamp() * 1000)

    def create_uniq_id(self) -> str:
        """``createUniqID``."""
        current = self._clock()
        if current >= self._next_start_time:
            self._set_start_time(current)
        diff = to_int32(current - self._start_time)
        if -1_000_000 < diff < 0:  # "may cause by NTP"
            diff = 0
        counter = self._counter & 0xFFFF
        self._counter += 1
        return self._fix + f"{diff & 0xFFFFFFFF:08X}{counter:04X}"
