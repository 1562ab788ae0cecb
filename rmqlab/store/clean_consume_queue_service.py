"""CleanConsumeQueueService: consume-queue expiry (ConsumeQueueStore.CleanConsumeQueueService,
RocketMQ store/src/main/java/org/apache/rocketmq/store/queue/ConsumeQueueStore.java).

Every cleanResourceInterval (first after 60 s), once the commitlog's min offset has grown, each
consume queue deletes its files whose last unit points below it and moves its min offset to its
first unit at or above it (ConsumeQueue.deleteExpiredFile, correctMinOffset), sleeping
deleteConsumeQueueFilesInterval after a queue that deleted files. rmqlab has no IndexService, so
there is no index file to delete. RocketMQ runs CorrectLogicOffsetService first; it skips
ordinary (SimpleCQ) queues, the only kind rmqlab has, so it is not modelled.
"""

from __future__ import annotations

import logging

log = logging.getLogger("rmqlab.store")


class CleanConsumeQueueService:
    def __init__(self, store):
        self.store = store
        self.last_physical_min_offset = 0

    def run(self):
        """None when the commitlog's min offset did not grow (nothing to do), else a coroutine."""
        min_offset = self.store.commit_log.get_min_offset()
        if min_offset <= self.last_physical_min_offset:
            return None
        self.last_physical_min_offset = min_offset

        async def delete() -> None:
            try:
                await self.delete_expired_files(min_offset)
            except Exception:
                log.exception("CleanConsumeQueueService service has exception.")
        return delete()

    async def delete_expired_files(self, min_offset: int) -> None:
        interval = self.store.config.deleteConsumeQueueFilesInterval
        for cq in self.store.consume_queues():
            if cq.delete_expired_file(min_offset) > 0 and interval > 0 and self.store.sleep is not None:
                await self.store.sleep(interval)
