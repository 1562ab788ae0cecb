"""The dispatcher of DLedger CommitLog mode: ReputMessageService.doReput as RocketMQ runs it on a
DLedgerCommitLog, where each message sits inside a DLedger entry.

RocketMQ's doReput moves by the DispatchRequest's bufferSize when it has one (DLedgerCommitLog's
checkMessageAndReturnSize sets it to msgSize + 48, the entry's size); the consume-queue unit still
gets the message's own offset (PHYSICALOFFSET = pos + 48) and size. The end it dispatches to is
the commitlog's max offset, which DLedgerCommitLog makes DLedger's committedPos.
"""

from __future__ import annotations

import logging

from rmqlab.common.message.message_sys_flag import MessageSysFlag
from rmqlab.store.reput_message_service import ReputMessageService

log = logging.getLogger("rmqlab.store")


class DLedgerReputMessageService(ReputMessageService):
    def do_reput(self, max_messages: int | None = None) -> int:
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
            if req.success and req.msg_size > 0:
                size = req.buffer_size
                if self.reput_from_offset + size > end:
                    break  # not committed yet
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
            else:
                if self._stopped_at != self.reput_from_offset:
                    self._stopped_at = self.reput_from_offset
                    log.error("[BUG] dispatch stopped: invalid entry at commitlog offset %d", self.reput_from_offset)
                break
        return n
