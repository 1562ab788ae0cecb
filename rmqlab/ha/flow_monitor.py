"""FlowMonitor: bytes transferred per second on an HA connection, and the optional rate limit.

Mirrors org.apache.rocketmq.store.ha.FlowMonitor (MessageStoreConfig: haFlowControlEnable,
default false; maxHaTransferByteInSecond, 100 MiB). RocketMQ runs a thread that closes a
one-second window every second; here the window is derived from the node's clock when asked,
which gives the same numbers without a timer per connection.
"""

from __future__ import annotations

from collections.abc import Callable

INT32_MAX = 2**31 - 1


class FlowMonitor:
    WINDOW_MS = 1000

    def __init__(self, message_store_config, clock_ms: Callable[[], int]):
        self.config = message_store_config
        self.clock_ms = clock_ms
        self._window = clock_ms() // self.WINDOW_MS
        self._transferred = 0            # in the current window (transferredByte)
        self._transferred_in_second = 0  # in the last closed window (transferredByteInSecond)

    def _roll(self) -> None:
        window = self.clock_ms() // self.WINDOW_MS
        if window != self._window:
            # calculateSpeed; a window with no call in between counted nothing.
            self._transferred_in_second = self._transferred if window == self._window + 1 else 0
            self._transferred = 0
            self._window = window

    def add_byte_count_transferred(self, count: int) -> None:
        self._roll()
        self._transferred += count

    def get_transferred_byte_in_second(self) -> int:
        self._roll()
        return self._transferred_in_second

    def is_flow_control_enable(self) -> bool:
        return self.config.haFlowControlEnable

    def max_transfer_byte_in_second(self) -> int:
        return self.config.maxHaTransferByteInSecond

    def can_transfer_max_byte_num(self) -> int:
        if not self.is_flow_control_enable():
            return INT32_MAX
        self._roll()
        return min(max(self.max_transfer_byte_in_second() - self._transferred, 0), INT32_MAX)

    def ms_until_next_window(self) -> int:
        return self.WINDOW_MS - self.clock_ms() % self.WINDOW_MS
