"""GroupTransferService: a SYNC_MASTER put waits here until enough replicas hold it.

Mirrors org.apache.rocketmq.store.ha.GroupTransferService. CommitLog.handleHA queues a
GroupCommitRequest(nextOffset = end of the message, deadline = now + slaveTimeout, ackNums) when
the put needs more than one acknowledgement. A request completes with

* PUT_OK once it is transferred: for ackNums <= 1 (never -1) when push2SlaveMaxOffset >= nextOffset;
  otherwise when 1 (the master) + the number of connections whose slaveAckOffset >= nextOffset
  reaches ackNums — connections, not distinct slaves, exactly as RocketMQ counts them (its source
  marks this as a known imprecision; rmqlab keeps RocketMQ's count);
* FLUSH_SLAVE_TIMEOUT when its deadline passes first.

Requests are served in arrival order, one at a time: Java's thread examines the head until it is
transferred or expired, checking the deadline first, before it looks at the next one.

Deviation (mechanism only): RocketMQ's thread re-checks every 1 ms; here the check runs when a
request arrives, when a slave's ack arrives (`notify_transfer_some`) and on a Node timer at the
head request's deadline — the same outcomes without a busy loop.

ackNums == -1 (MixAll.ALL_ACK_IN_SYNC_STATE_SET) comes only from controller mode; for a classic
service it falls through to the counting rule, where any connection satisfies it (Java's
behaviour for a non-AutoSwitch service). The AutoSwitch service counts its SyncStateSet instead.
"""

from __future__ import annotations

import logging
from collections import deque
from typing import TYPE_CHECKING

from rmqlab.store.commit_log import GroupCommitRequest
from rmqlab.store.put_message_result import PutMessageStatus

if TYPE_CHECKING:
    from rmqlab.ha.default_ha_service import DefaultHAService

log = logging.getLogger("rmqlab.ha")

ALL_ACK_IN_SYNC_STATE_SET = -1  # MixAll.ALL_ACK_IN_SYNC_STATE_SET


class GroupTransferService:
    def __init__(self, ha_service: "DefaultHAService"):
        self.ha_service = ha_service
        self.node = ha_service.node
        self._requests: deque[GroupCommitRequest] = deque()
        self._timer = None
        self._timer_for: GroupCommitRequest | None = None
        self._stopped = False

    def put_request(self, request: GroupCommitRequest) -> None:
        if self._stopped:
            request.future.complete(PutMessageStatus.FLUSH_SLAVE_TIMEOUT)
            return
        self._requests.append(request)
        self.do_wait_transfer()

    def notify_transfer_some(self) -> None:
        """A slave acknowledged more: re-check the waiting requests."""
        self.do_wait_transfer()

    def pending(self) -> int:
        return len(self._requests)

    def _transfer_ok(self, req: GroupCommitRequest) -> bool:
        if req.ack_nums != ALL_ACK_IN_SYNC_STATE_SET and req.ack_nums <= 1:
            return self.ha_service.push2_slave_max_offset >= req.next_offset
        ack_nums = 1  # the master
        for conn in self.ha_service.connection_list:
            if conn.slave_ack_offset >= req.next_offset:
                ack_nums += 1
            if ack_nums >= req.ack_nums:
                return True
        return False

    def do_wait_transfer(self) -> None:
        now = self.node.now_ms()
        while self._requests:
            req = self._requests[0]
            if now >= req.deadline:
                log.warning("transfer message to slave timeout, offset : %d, request acks: %d",
                            req.next_offset, req.ack_nums)
                status = PutMessageStatus.FLUSH_SLAVE_TIMEOUT
            elif self._transfer_ok(req):
                status = PutMessageStatus.PUT_OK
            else:
                break
            self._requests.popleft()
            req.future.complete(status)
        self._arm_deadline_timer(now)

    def _arm_deadline_timer(self, now: int) -> None:
        head = self._requests[0] if self._requests else None
        if head is self._timer_for:
            return
        if self._timer is not None:
            self._timer.cancel()
        self._timer, self._timer_for = None, head
        if head is not None:
            self._timer = self.node.call_later(max(0, head.deadline - now), self._on_deadline)

    def _on_deadline(self) -> None:
        self._timer = self._timer_for = None
        self.do_wait_transfer()

    def shutdown(self) -> None:
        """Clean stop. Deviation: RocketMQ leaves the waiting puts without an answer; here they
        complete with FLUSH_SLAVE_TIMEOUT (stored, replication unconfirmed) so no caller waits forever."""
        self._stopped = True
        if self._timer is not None:
            self._timer.cancel()
        self._timer = self._timer_for = None
        while self._requests:
            self._requests.popleft().future.complete(PutMessageStatus.FLUSH_SLAVE_TIMEOUT)

    def on_crash(self) -> None:
        """Process crash: the waiting puts die with the process; nobody hears an answer."""
        self._stopped = True
        self._timer = self._timer_for = None
        self._requests.clear()
