"""MessageIdCodec (client-java's message/MessageIdCodec.java): the V1 message id a 5.x client gives
every message it sends, which the Proxy stores as the message's UNIQ_KEY.

    01 | MAC (6 bytes) | process id, lower 2 bytes | seconds since 2021-01-01 UTC, lower 4 bytes | sequence (4 bytes)

34 upper-case hex digits. Deviation, so the simulator stays deterministic: the MAC address and the
process id come from the node's seeded random, and the seconds from the node's clock.
"""

from __future__ import annotations

import datetime

VERSION_V1 = "01"
CUSTOM_EPOCH_MS = int(datetime.datetime(2021, 1, 1, tzinfo=datetime.UTC).timestamp() * 1000)


class MessageIdCodec:
    def __init__(self, node):
        mac = node.random.getrandbits(48)
        pid = node.random.getrandbits(16)
        self._prefix = f"{VERSION_V1}{mac:012X}{pid:04X}"
        self._now_ms = node.now_ms
        self._sequence = 0

    def next_message_id(self) -> str:
        seconds = ((self._now_ms() - CUSTOM_EPOCH_MS) // 1000) & 0xFFFFFFFF
        sequence = self._sequence & 0xFFFFFFFF
        self._sequence += 1
        return f"{self._prefix}{seconds:08X}{sequence:08X}"
