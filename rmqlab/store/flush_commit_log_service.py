"""Disk flush services of the CommitLog: FlushRealTimeService (ASYNC_FLUSH) and GroupCommitService (SYNC_FLUSH).

Mirrors CommitLog.FlushRealTimeService / GroupCommitService (`store/.../CommitLog.java`).
RocketMQ runs each in its own thread; here each is a step function (`do_flush`, `do_commit`) that a
runtime calls on its timer or wake-up, so the simulator can freeze, delay or step them and the
"written but not yet flushed" window is visible and controllable.

* ASYNC_FLUSH: a put returns PUT_OK at once; `do_flush` (every flushIntervalCommitLog, 500 ms)
  msyncs when at least flushCommitLogLeastPages (4) dirty pages accumulated, or everything once per
  flushCommitLogThoroughInterval (10 s).
* SYNC_FLUSH: a put queues a GroupCommitRequest(nextOffset, deadline) and its result waits. One
  `do_commit` flushes once for all queued requests — the group commit — and completes each with
  PUT_OK, or FLUSH_DISK_TIMEOUT if its syncFlushTimeout deadline passed first.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from rmqlab.common.future import CompletableFuture
from rmqlab.store.put_message_result import PutMessageStatus


@dataclass
class GroupCommitRequest:
    next_offset: int
    deadline: int  # clock ms
    future: CompletableFuture[PutMessageStatus] = field(default_factory=CompletableFuture)


class FlushRealTimeService:
    def __init__(self, commit_log, clock: Callable[[], int], *, flush_least_pages: int, thorough_interval: int):
        self.commit_log = commit_log
        self.clock = clock
        self.flush_least_pages = flush_least_pages
        self.thorough_interval = thorough_interval
        self.last_flush_timestamp = 0
        self.flush_count = 0  # number of msync rounds that flushed something (observable in labs)

    def do_flush(self) -> None:
        least = self.flush_least_pages
        now = self.clock()
        if now >= self.last_flush_timestamp + self.thorough_interval:
            self.last_flush_timestamp = now
            least = 0
        if self.commit_log.flush(least):
            self.flush_count += 1


class GroupCommitService:
    def __init__(self, commit_log, clock: Callable[[], int]):
        self.commit_log = commit_log
        self.clock = clock
        self.requests: list[GroupCommitRequest] = []
        self.flush_count = 0

    def put_request(self, request: GroupCommitRequest) -> None:
        self.requests.append(request)

    def do_commit(self) -> None:
        """Serve every queued request with (at most) one flush round: the group commit."""
        if not self.requests:
            return
        batch, self.requests = self.requests, []
        now = self.clock()
        if self.commit_log.flushed_where() < max(r.next_offset for r in batch):
            # RocketMQ retries the flush up to twice per request; with no concurrent writer one
            # flush_all covers every request of the batch.
            self.commit_log.flush_all()
            self.flush_count += 1
        flushed = self.commit_log.flushed_where()
        for r in batch:
            if flushed >= r.next_offset:
                r.future.complete(PutMessageStatus.PUT_OK)
            elif now > r.deadline:
                r.future.complete(PutMessageStatus.FLUSH_DISK_TIMEOUT)
            else:
                self.requests.append(r)

    def expire(self) -> None:
        """Time out requests whose deadline passed while no commit ran (a frozen flush thread)."""
        now = self.clock()
        keep = []
        for r in self.requests:
            if now > r.deadline:
                r.future.complete(PutMessageStatus.FLUSH_DISK_TIMEOUT)
            else:
                keep.append(r)
        self.requests = keep
