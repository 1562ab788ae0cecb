"""ProcessQueue: the messages of one queue a push consumer has pulled and not yet finished
(``client/impl/consumer/ProcessQueue.java``).

Messages are kept by queue offset. The offset the consumer may commit after consuming some of them
is the smallest offset still held, or one past the largest ever held when none is left
(``removeMessage``): a message that is slow, or being retried locally, holds the committed offset
back, so a restart re-delivers it rather than skipping it. ``dropped`` is set when rebalancing
gives the queue to another consumer (or the pull offset turned illegal): its pulls stop and what
it still holds is not committed.
"""

from __future__ import annotations

from rmqlab.common.message.message import MessageExt


class ProcessQueue:
    # A queue not pulled for this long is considered stuck and is re-created by the next
    # rebalance (rocketmq.client.pull.pullMaxIdleTime).
    PULL_MAX_IDLE_TIME = 120_000

    def __init__(self, now_ms: int):
        self.msg_tree_map: dict[int, MessageExt] = {}
        self.queue_offset_max = 0
        self.msg_size = 0
        self.dropped = False
        self.last_pull_timestamp = now_ms
        self.last_consume_timestamp = now_ms

    @property
    def msg_count(self) -> int:
        return len(self.msg_tree_map)

    def is_pull_expired(self, now_ms: int) -> bool:
        return now_ms - self.last_pull_timestamp > self.PULL_MAX_IDLE_TIME

    def put_message(self, msgs: list[MessageExt]) -> None:
        for msg in msgs:
            if msg.queue_offset not in self.msg_tree_map:
                self.msg_tree_map[msg.queue_offset] = msg
                self.queue_offset_max = msg.queue_offset
                self.msg_size += len(msg.body or b"")

    def get_max_span(self) -> int:
        """Offsets between the first and last message held (flow control of concurrent consumption)."""
        if not self.msg_tree_map:
            return 0
        return max(self.msg_tree_map) - min(self.msg_tree_map)

    def contains_message(self, msg: MessageExt) -> bool:
        return msg.queue_offset in self.msg_tree_map

    def remove_message(self, msgs: list[MessageExt], now_ms: int) -> int:
        """Forget ``msgs``; the offset to commit now, or -1 when nothing was held."""
        self.last_consume_timestamp = now_ms
        if not self.msg_tree_map:
            return -1
        result = self.queue_offset_max + 1
        for msg in msgs:
            prev = self.msg_tree_map.pop(msg.queue_offset, None)
            if prev is not None:
                self.msg_size -= len(prev.body or b"")
        if self.msg_tree_map:
            result = min(self.msg_tree_map)
        return result
