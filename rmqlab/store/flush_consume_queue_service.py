"""FlushConsumeQueueService: makes consume-queue units durable and advances the checkpoint.

Mirrors DefaultMessageStore.FlushConsumeQueueService: every flushIntervalConsumeQueue (1 s) flush
each queue with at least flushConsumeQueueLeastPages (2) dirty pages, everything once per
flushConsumeQueueThoroughInterval (60 s); then record in the StoreCheckpoint the store time of the
last dispatched message (logicsMsgTimestamp) and of the last flushed commitlog message
(physicMsgTimestamp), flushing the checkpoint on the thorough round. Abnormal recovery trusts what is older than both.
"""

from __future__ import annotations

from collections.abc import Callable


class FlushConsumeQueueService:
    def __init__(self, store, clock: Callable[[], int], *, flush_least_pages: int, thorough_interval: int):
        self.store = store
        self.clock = clock
        self.flush_least_pages = flush_least_pages
        self.thorough_interval = thorough_interval
        self.last_flush_timestamp = 0

    def do_flush(self, thorough: bool = False) -> None:
        least = self.flush_least_pages
        now = self.clock()
        if thorough or now >= self.last_flush_timestamp + self.thorough_interval:
            self.last_flush_timestamp = now
            least = 0
        # The timestamp is read before flushing: units dispatched meanwhile are not yet covered.
        logics_ts = self.store.reput_message_service.last_dispatched_store_timestamp
        for cq in self.store.consume_queues():
            if least == 0:
                cq.mapped_file_queue.flush_all()
            else:
                cq.flush(least)
        checkpoint = self.store.store_checkpoint
        physic_ts = self.store.commit_log.last_flushed_store_timestamp
        if physic_ts > 0:
            checkpoint.physic_msg_timestamp = physic_ts
        # Only a thorough round flushed *every* queue, so only then may logicsMsgTimestamp advance
        # and the checkpoint be flushed (as in RocketMQ).
        if least == 0:
            if logics_ts > 0:
                checkpoint.logics_msg_timestamp = logics_ts
            checkpoint.flush()
