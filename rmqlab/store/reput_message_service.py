"""ReputMessageService: the dispatcher that turns CommitLog records into ConsumeQueue units.

Mirrors DefaultMessageStore.ReputMessageService. It trails the commitlog asynchronously from
`reput_from_offset`: each valid record is handed to the dispatchers (the consume-queue builder;
IndexFile is optional and not built), a BLANK jumps to the next file. Until a message has been
dispatched it is in the commitlog but invisible to consumers — `dispatch_behind_bytes` measures
that gap.

When it runs: RocketMQ's thread sleeps 1 ms and calls doReput, forever, so a record is
dispatched within about a millisecond of becoming dispatchable. Here the runtime's timer is armed
only when something may have become dispatchable — the commitlog grew (`DefaultMessageStore`
calls `wakeup` after a put or a replicated append) or, in controller mode, the confirm offset that
limits dispatch moved (AutoSwitchHAService calls it) — and `do_reput` runs 1 ms later: the same
dispatch order, at a time within the 1 ms RocketMQ's poll allows, without a timer firing 1,000
times a virtual second on an idle broker. Without `start` (a store driven by hand, as in tests and
the storage walkthrough) nothing is scheduled: the caller calls `do_reput`.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from rmqlab.common.message.message_sys_flag import MessageSysFlag
from rmqlab.runtime.node import Timer
from rmqlab.store.dispatch_request import DispatchRequest

log = logging.getLogger("rmqlab.store")

REPUT_INTERVAL_MS = 1  # ReputMessageService.run: TimeUnit.MILLISECONDS.sleep(1) between doReput calls


class ReputMessageService:
    def __init__(self, commit_log, dispatch: Callable[[DispatchRequest], None]):
        self.commit_log = commit_log
        self.dispatch = dispatch
        self.reput_from_offset = 0
        self.last_dispatched_store_timestamp = 0
        # Called after each dispatched message (long polling wakes pull requests here).
        self.message_arriving_listeners: list[Callable[[DispatchRequest], None]] = []
        # Dispatch stops here when set (controller mode dispatches only up to the confirm offset).
        self.dispatch_limit: Callable[[], int] | None = None
        self._stopped_at: int | None = None  # where an invalid record stopped dispatch (logged once)
        # doReput's "isEnableDLegerCommitLog() || brokerId == MASTER_ID": an unreadable record
        # (size -1) is stepped over, to the end of what getData returned, instead of waited on.
        # The store sets it in DLedger CommitLog mode. Deviation: a classic master waits as a slave
        # does (the store does not know its brokerId); its recovery cuts such a record first.
        self.skip_unreadable = False
        self._call_later: Callable[[float, Callable[[], None]], Timer] | None = None
        self._wake: Timer | None = None

    # -- running on a runtime ----------------------------------------------------------------
    def start(self, call_later: Callable[[float, Callable[[], None]], Timer]) -> None:
        """Dispatch on the runtime's timers (`call_later(ms, fn)`, a node's): from now on every
        `wakeup` dispatches 1 ms later; a first pass for what recovery left undispatched."""
        self._call_later = call_later
        self.wakeup()

    def shutdown(self) -> None:
        self._call_later = None
        if self._wake is not None:
            self._wake.cancel()
            self._wake = None

    @property
    def running(self) -> bool:
        """Started on a runtime and not shut down."""
        return self._call_later is not None

    @property
    def wake_pending(self) -> bool:
        """A pass is scheduled (something became dispatchable less than 1 ms ago)."""
        return self._wake is not None

    def wakeup(self) -> None:
        """Something may have become dispatchable: a pass runs within REPUT_INTERVAL_MS."""
        if self._call_later is not None and self._wake is None:
            self._wake = self._call_later(REPUT_INTERVAL_MS, self._on_wake)

    def _on_wake(self) -> None:
        self._wake = None
        try:
            self.do_reput()
        except Exception:  # RocketMQ's run() catches and logs, and the thread goes on
            log.exception("ReputMessageService: dispatch failed")

    def dispatch_behind_bytes(self) -> int:
        return self._end() - self.reput_from_offset

    def _end(self) -> int:
        end = self.commit_log.get_max_offset()
        if self.dispatch_limit is not None:
            end = min(end, self.dispatch_limit())
        return end

    def do_reput(self, max_messages: int | None = None) -> int:
        """Dispatch what is available (at most `max_messages`); returns how many messages."""
        n = 0
        end = self._end()
        if self.reput_from_offset < self.commit_log.get_min_offset():
            log.warning("reput offset %d is below the commitlog min %d: skipping ahead",
                        self.reput_from_offset, self.commit_log.get_min_offset())
            self.reput_from_offset = self.commit_log.get_min_offset()
        while self.reput_from_offset < end and (max_messages is None or n < max_messages):
            req = self.commit_log.check_message_at(self.reput_from_offset)
            if req is None:
                break
            # doReput: the step is the request's bufferSize when it has one (a DLedger entry).
            size = req.buffer_size if req.buffer_size != -1 else req.msg_size
            if self.reput_from_offset + size > end:
                break  # only partly confirmed (DLedger: committed) or written yet
            if req.success and size > 0:
                tran = MessageSysFlag.get_transaction_value(req.sys_flag)
                if tran in (MessageSysFlag.TRANSACTION_NOT_TYPE, MessageSysFlag.TRANSACTION_COMMIT_TYPE):
                    self.dispatch(req)
                self.reput_from_offset += size
                self.last_dispatched_store_timestamp = req.store_timestamp
                n += 1
                for listener in self.message_arriving_listeners:
                    listener(req)
            elif req.success:
                self.reput_from_offset = self.commit_log.roll_next_file(self.reput_from_offset)
            elif size > 0:
                # A record whose fields do not add up to its TOTALSIZE (a body torn by a power
                # loss that DLedger's recovery kept): RocketMQ logs and steps over it, unread.
                # Deviation: RocketMQ then parses on from where the failed parse left its buffer
                # (mid-record) and usually skips the rest of that buffer as unreadable; here the
                # next record is read at its own offset.
                log.error("[BUG]read total count not equals msg total size. reputFromOffset=%d", self.reput_from_offset)
                self.reput_from_offset += size
            elif self.skip_unreadable:
                log.error("[BUG]dispatch message to consume queue error, COMMITLOG OFFSET: %d", self.reput_from_offset)
                self.reput_from_offset += max(1, len(self.commit_log.get_data(self.reput_from_offset)))
                self.wakeup()  # doNext = false: the next pass, 1 ms later, goes on from there
                break
            else:
                # A slave's RocketMQ dispatcher stays stopped (doNext = false, nothing skipped),
                # retried on every pass; say so once per offset, not on every pass.
                if self._stopped_at != self.reput_from_offset:
                    self._stopped_at = self.reput_from_offset
                    log.error("[BUG] dispatch stopped: invalid record at commitlog offset %d", self.reput_from_offset)
                break
        return n
