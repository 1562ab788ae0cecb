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

The transferOK rule is the decision point ``transfer_ok`` (rmqlab.common.decision_points): the
service takes it as a strategy (`TransferOk`; default `transfer_ok`, RocketMQ's rule) on plain
values, so a caller (the labs' exercise) can hand it another. Java inlines it in doWaitTransfer.
"""

from __future__ import annotations

import logging
from collections import deque
from collections.abc import Sequence
from typing import TYPE_CHECKING, Protocol

from rmqlab.store.commit_log import GroupCommitRequest
from rmqlab.store.put_message_result import PutMessageStatus

if TYPE_CHECKING:
    from rmqlab.ha.default_ha_service import DefaultHAService

log = logging.getLogger("rmqlab.ha")

ALL_ACK_IN_SYNC_STATE_SET = -1  # MixAll.ALL_ACK_IN_SYNC_STATE_SET


class TransferOk(Protocol):
    """The decision point ``transfer_ok``: may the put ending at `next_offset` that needs
    `ack_nums` copies be answered now? `slave_ack_offsets`: each HA connection's slaveAckOffset;
    `push2_slave_max_offset`: the largest offset any slave acknowledged."""

    def __call__(self, next_offset: int, ack_nums: int, slave_ack_offsets: Sequence[int],
                 push2_slave_max_offset: int) -> bool: ...


def transfer_ok(next_offset: int, ack_nums: int, slave_ack_offsets: Sequence[int], push2_slave_max_offset: int) -> bool:
    """RocketMQ's transferOK (GroupTransferService.doWaitTransfer; module docstring)."""
    if ack_nums != ALL_ACK_IN_SYNC_STATE_SET and ack_nums <= 1:
        return push2_slave_max_offset >= next_offset
    acks = 1  # the master
    for ack in slave_ack_offsets:
        if ack >= next_offset:
            acks += 1
        if acks >= ack_nums:
            return True
    return False


class GroupTransferService:
    # RocketMQ's rule unless a caller gives another (a class attribute: the instance's wins).
    transfer_ok: TransferOk = staticmethod(transfer_ok)

    def __init__(self, ha_service: DefaultHAService, *, transfer_ok: TransferOk | None = None):
        self.ha_service = ha_service
        if transfer_ok is not None:
            self.transfer_ok = transfer_ok
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
        ha = self.ha_service
        return self.transfer_ok(req.next_offset, req.ack_nums, [c.slave_ack_offset for c in ha.connection_list],
                                ha.push2_slave_max_offset)

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
