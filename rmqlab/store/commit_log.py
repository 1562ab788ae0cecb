"""CommitLog: every message of every topic, appended in arrival order.

Mirrors org.apache.rocketmq.store.CommitLog: `async_put_message` assigns the queue offset and the
store timestamp, encodes the message (MessageExtEncoder), appends it to the last MappedFile —
writing a BLANK filler and rolling to a new file when it does not fit — and then handles the disk
flush and, on a SYNC_MASTER, the replica acknowledgements (`_handle_disk_flush_and_ha`, Java's
`handleDiskFlushAndHA`). Recovery (`recover_normally`, `recover_abnormally`) re-validates the log
after a restart and cuts it at the first message that is torn or corrupt. For HA, `get_data` feeds
the master's transfer batches and `append_data` applies them on a slave.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from rmqlab.common.future import CompletableFuture
from rmqlab.common.message.message import MessageExtBrokerInner, MessageFormatError
from rmqlab.common.message.message_decoder import decode
from rmqlab.common.message.message_sys_flag import MessageSysFlag
from rmqlab.runtime.page_cache import PageCache
from rmqlab.store.dispatch_request import DispatchRequest, check_message_and_return_size
from rmqlab.store.flush_commit_log_service import FlushRealTimeService, GroupCommitService
from rmqlab.store.flush_commit_log_service import GroupCommitRequest as _FlushGroupCommitRequest
from rmqlab.store.mapped_file_queue import MappedFileQueue
from rmqlab.store.message_ext_encoder import END_FILE_MIN_BLANK_LENGTH, MessageExtEncoder, encode_blank
from rmqlab.store.put_message_result import (AppendMessageResult, AppendMessageStatus, PutMessageResult,
                                             PutMessageStatus)

log = logging.getLogger("rmqlab.store")


@dataclass
class GroupCommitRequest(_FlushGroupCommitRequest):
    """CommitLog.GroupCommitRequest: one class for both waits, as in RocketMQ. The disk flush
    (GroupCommitService) reads next_offset and deadline; the replica wait (the HA service's
    GroupTransferService) also ack_nums: how many replicas, the master included, must hold every
    byte below next_offset."""

    ack_nums: int = 1


@dataclass
class RecoveryScan:
    """What a recovery scan found: shown by the demo and the labs."""

    mode: str                  # "normal" or "abnormal"
    start_offset: int          # where the scan began
    process_offset: int        # end of the last valid message: the log is cut here
    messages: int              # valid messages scanned
    discarded_bytes: int       # non-zero bytes after the cut (a torn or corrupt tail)
    stop_reason: str           # why the scan stopped


class CommitLog:
    def __init__(self, store_path: str, mapped_file_size: int, *, clock: Callable[[], int],
                 store_host: tuple[str, int], flush_disk_type: str, sync_flush_timeout: int,
                 max_message_size: int, flush_least_pages: int, flush_thorough_interval: int,
                 check_crc_on_recover: bool = True, page_cache: PageCache | None = None,
                 store_config: Any = None):
        self.mapped_file_queue = MappedFileQueue(store_path, mapped_file_size, page_cache)
        self.mapped_file_size = mapped_file_size
        self.clock = clock
        self.store_host = store_host
        self.sync_flush = flush_disk_type == "SYNC_FLUSH"
        self.sync_flush_timeout = sync_flush_timeout
        self.check_crc_on_recover = check_crc_on_recover
        self.encoder = MessageExtEncoder(max_message_size)
        # "topic-queueId" -> next queue offset (RocketMQ 5 keeps it in QueueOffsetOperator).
        self.topic_queue_table: dict[str, int] = {}
        self.flush_service: FlushRealTimeService | GroupCommitService
        if self.sync_flush:
            self.flush_service = GroupCommitService(self, clock)
        else:
            self.flush_service = FlushRealTimeService(self, clock, flush_least_pages=flush_least_pages,
                                                      thorough_interval=flush_thorough_interval)
        self.last_flushed_store_timestamp = 0  # feeds StoreCheckpoint.physicMsgTimestamp
        # HA: brokerRole, inSyncReplicas and slaveTimeout are read live from the MessageStoreConfig
        # (None: a bare commitlog, never SYNC_MASTER); the HA service attaches itself
        # (DefaultMessageStore.set_ha_service).
        self.store_config = store_config
        # Slave acting master (RIP-32; DefaultMessageStore.set_slave_acting_master): a SYNC_MASTER
        # waits for at most as many replicas as the group has alive (the broker's member-group sync
        # counts them), so a group that lost its slaves keeps taking writes.
        self.enable_slave_acting_master = False
        self.alive_replica_num_in_group = 1
        # The broker's messageDelayLevel: a SCHEDULE_TOPIC_XXXX unit's tags code is its deliver time,
        # computed from this table when the record is dispatched (None: RocketMQ's default levels).
        self.delay_level_table = store_config.get_delay_level_table() if store_config is not None else None
        self.ha_service = None
        self._store_timestamps: dict[int, int] = {}  # file start offset -> last store timestamp written

    def load(self) -> None:
        self.mapped_file_queue.load()

    # -- appending -------------------------------------------------------------------------
    def async_put_message(self, msg: MessageExtBrokerInner) -> CompletableFuture[PutMessageResult]:
        """Append `msg`; the future completes when the flush policy is satisfied.

        A SYNC_MASTER message waits for `needAckNums` replicas (`CommitLog.asyncPutMessage`). The
        classic rule: inSyncReplicas. Controller mode, which the AutoSwitchHAService brings
        (``decide_write_ack``): refused before anything is written when fewer than
        minInSyncReplicas replicas are in sync, else inSyncReplicas or, with allAckInSyncStateSet,
        every SyncStateSet member. Slave acting master (RIP-32): ``calcNeedAckNums`` of the replicas
        that are both alive in the group and in sync; refused (IN_SYNC_REPLICAS_NOT_ENOUGH) before
        anything is written when that asks for more than there are.
        """
        need_handle_ha = self._need_handle_ha(msg)
        need_ack_nums = 1
        if need_handle_ha:
            need_ack_nums = self.store_config.inSyncReplicas
            decide = getattr(self.ha_service, "decide_write_ack", None)
            if decide is not None:
                decision = decide(self.get_max_offset(), self.store_config)
                if decision.refuse is not None:
                    return CompletableFuture.completed(PutMessageResult(decision.refuse))
                need_ack_nums = decision.need_ack_nums
            elif self.enable_slave_acting_master:
                in_sync_replicas = min(self.alive_replica_num_in_group,
                                       self.ha_service.in_sync_replicas_nums(self.get_max_offset()))
                need_ack_nums = self.calc_need_ack_nums(in_sync_replicas)
                if need_ack_nums > in_sync_replicas:
                    # RocketMQ: "Tell the producer, don't have enough slaves to handle the send request"
                    return CompletableFuture.completed(PutMessageResult(PutMessageStatus.IN_SYNC_REPLICAS_NOT_ENOUGH))
        msg.store_timestamp = self.clock()
        msg.store_host = self.store_host
        key = f"{msg.topic}-{msg.queue_id}"
        # assignOffset / increaseOffset: a PREPARED or ROLLBACK message gets no consume-queue unit
        # (the dispatcher skips it), so it takes queue offset 0 and does not advance its queue.
        dispatched = MessageSysFlag.get_transaction_value(msg.sys_flag) in (
            MessageSysFlag.TRANSACTION_NOT_TYPE, MessageSysFlag.TRANSACTION_COMMIT_TYPE)
        queue_offset = self.topic_queue_table.get(key, 0) if dispatched else 0
        result = self._append(msg, queue_offset)
        if result.status is not AppendMessageStatus.PUT_OK:
            status = {AppendMessageStatus.MESSAGE_SIZE_EXCEEDED: PutMessageStatus.MESSAGE_ILLEGAL,
                      AppendMessageStatus.PROPERTIES_SIZE_EXCEEDED: PutMessageStatus.PROPERTIES_SIZE_EXCEEDED,
                      }.get(result.status, PutMessageStatus.UNKNOWN_ERROR)
            return CompletableFuture.completed(PutMessageResult(status, result))
        if dispatched:
            self.topic_queue_table[key] = queue_offset + 1
        if not need_handle_ha and not self.sync_flush:  # the common case: nothing to wait for
            return CompletableFuture.completed(PutMessageResult(PutMessageStatus.PUT_OK, result))
        return self._handle_disk_flush_and_ha(result, msg, need_ack_nums, need_handle_ha)

    def calc_need_ack_nums(self, in_sync_replicas: int) -> int:
        """``calcNeedAckNums``: inSyncReplicas; with enableAutoInSyncReplicas, no more than the
        replicas in sync but at least minInSyncReplicas."""
        cfg = self.store_config
        need_ack_nums = cfg.inSyncReplicas
        if cfg.enableAutoInSyncReplicas:
            need_ack_nums = max(min(need_ack_nums, in_sync_replicas), cfg.minInSyncReplicas)
        return need_ack_nums

    def _append(self, msg: MessageExtBrokerInner, queue_offset: int) -> AppendMessageResult:
        mfq = self.mapped_file_queue
        mf = mfq.get_last_mapped_file(0, need_create=True)
        physical = mf.file_from_offset + mf.wrote_position
        try:
            data = self.encoder.encode(msg, queue_offset=queue_offset, physical_offset=physical)
        except MessageFormatError as e:
            status = AppendMessageStatus.PROPERTIES_SIZE_EXCEEDED \
                if getattr(e, "put_status", "") == "PROPERTIES_SIZE_EXCEEDED" else AppendMessageStatus.MESSAGE_SIZE_EXCEEDED
            log.warning("put rejected: %s", e)
            return AppendMessageResult(status)
        if len(data) + END_FILE_MIN_BLANK_LENGTH > mf.remaining():
            # END_OF_FILE: a BLANK record claims the rest of this file; retry in a new one.
            mf.append(encode_blank(mf.remaining()), advance_to=self.mapped_file_size)
            mf.last_modified_ms = msg.store_timestamp
            mf = mfq.get_last_mapped_file(0, need_create=True)
            physical = mf.file_from_offset
            data = self.encoder.encode(msg, queue_offset=queue_offset, physical_offset=physical)
        mf.append(data)
        mf.last_modified_ms = msg.store_timestamp
        self._store_timestamps[mf.file_from_offset] = msg.store_timestamp
        return AppendMessageResult(AppendMessageStatus.PUT_OK, wrote_offset=physical, wrote_bytes=len(data),
                                   store_timestamp=msg.store_timestamp, logics_offset=queue_offset,
                                   store_host=self.store_host)

    def _need_handle_ha(self, msg: MessageExtBrokerInner) -> bool:
        """needHandleHA: only a SYNC_MASTER waits for replicas, and only for a message that asks
        to wait for the store (PROPERTY_WAIT_STORE_MSG_OK; duplicationEnable is not modelled)."""
        cfg = self.store_config
        return (cfg is not None and getattr(cfg.brokerRole, "name", cfg.brokerRole) == "SYNC_MASTER"
                and msg.wait_store_msg_ok)

    def _handle_disk_flush_and_ha(self, result: AppendMessageResult, msg: MessageExtBrokerInner,
                                  need_ack_nums: int, need_handle_ha: bool) -> CompletableFuture[PutMessageResult]:
        """handleDiskFlushAndHA: both waits start now and run side by side; the put's status is
        PUT_OK, overwritten by a failed flush status, then by a failed replica status."""
        flush = self._handle_disk_flush(result, msg)
        replica = self._handle_ha(result, need_ack_nums) if need_handle_ha else None
        if flush.done() and (replica is None or replica.done()):  # the usual case: nothing to wait for
            return CompletableFuture.completed(self._combine(result, flush, replica))
        out: CompletableFuture[PutMessageResult] = CompletableFuture()

        def combine(_status: PutMessageStatus) -> None:
            if flush.done() and (replica is None or replica.done()):
                out.complete(self._combine(result, flush, replica))

        flush.then_accept(combine)
        if replica is not None:
            replica.then_accept(combine)
        return out

    @staticmethod
    def _combine(result: AppendMessageResult, flush: CompletableFuture[PutMessageStatus],
                 replica: CompletableFuture[PutMessageStatus] | None) -> PutMessageResult:
        status = PutMessageStatus.PUT_OK
        if flush.result() is not PutMessageStatus.PUT_OK:
            status = flush.result()
        if replica is not None and replica.result() is not PutMessageStatus.PUT_OK:
            status = replica.result()
        return PutMessageResult(status, result)

    def _handle_disk_flush(self, result: AppendMessageResult, msg: MessageExtBrokerInner) -> CompletableFuture[PutMessageStatus]:
        if self.sync_flush and msg.wait_store_msg_ok:
            request = GroupCommitRequest(result.next_offset, self.clock() + self.sync_flush_timeout)
            self.flush_service.put_request(request)
            return request.future
        return CompletableFuture.completed(PutMessageStatus.PUT_OK)

    def _handle_ha(self, result: AppendMessageResult, need_ack_nums: int) -> CompletableFuture[PutMessageStatus]:
        """handleHA. RIP-34: with needAckNums 0 or 1 — inSyncReplicas' default — a SYNC_MASTER
        does not wait for any slave."""
        if 0 <= need_ack_nums <= 1:
            return CompletableFuture.completed(PutMessageStatus.PUT_OK)
        if self.ha_service is None:
            # Deviation: RocketMQ always has an HA service, and with no slave a request waits
            # slaveTimeout and fails; a store without one (no runtime to wait on) fails it now.
            log.warning("SYNC_MASTER put needs %d acks but no HA service is attached", need_ack_nums)
            return CompletableFuture.completed(PutMessageStatus.FLUSH_SLAVE_TIMEOUT)
        request = GroupCommitRequest(result.next_offset, self.clock() + self.store_config.slaveTimeout,
                                     ack_nums=need_ack_nums)
        self.ha_service.put_request(request)
        self.ha_service.get_wait_notify_object().wakeup_all()  # the WriteSocketServices send it now
        return request.future

    def append_data(self, start_offset: int, data: bytes) -> bool:
        """Append raw commitlog bytes at `start_offset` (a slave applying an HA batch: appendData).

        The bytes may span a file end only through a BLANK record, which the master wrote too, so
        they are split exactly where the master's files split. An empty commitlog accepts any file
        start: a brand-new slave begins at the master's last file
        (`DefaultHAConnection.WriteSocketService`).
        """
        mfq = self.mapped_file_queue
        if not mfq.mapped_files and start_offset % self.mapped_file_size == 0:
            if data:
                # The first file starts here, and nothing before it needs flushing (RocketMQ's
                # findMappedFileByOffset(flushedWhere=0) falls back to the first file instead).
                mfq.get_last_mapped_file(start_offset, need_create=True)
                mfq.flushed_where = start_offset
        elif start_offset != self.get_max_offset():
            log.error("append_data at %d but the commitlog ends at %d", start_offset, self.get_max_offset())
            return False
        view = memoryview(data)
        while view:
            mf = mfq.get_last_mapped_file(start_offset, need_create=True)
            n = min(len(view), mf.remaining())
            mf.append(bytes(view[:n]))
            mf.last_modified_ms = self.clock()
            view = view[n:]
        return True

    # -- flushing --------------------------------------------------------------------------
    def forget_files_after(self, offset: int) -> None:
        """After a truncation to `offset`: the files that started beyond it are gone, and with them
        the store time the flush services remember for each file (checkpointed on flush)."""
        self._store_timestamps = {k: v for k, v in self._store_timestamps.items() if k <= offset}

    def flush(self, flush_least_pages: int = 0) -> bool:
        mfq = self.mapped_file_queue
        mf = mfq.find_mapped_file_by_offset(mfq.flushed_where)
        flushed = mfq.flush(flush_least_pages)
        if flushed and mf is not None:
            ts = self._store_timestamps.get(mf.file_from_offset, 0)
            if ts > 0:
                self.last_flushed_store_timestamp = ts
        return flushed

    def flush_all(self) -> None:
        while self.flush(0):
            pass

    def flushed_where(self) -> int:
        return self.mapped_file_queue.flushed_where

    # -- reading ---------------------------------------------------------------------------
    def get_min_offset(self) -> int:
        """CommitLog.getMinOffset: the first file's start, or the next file's while the first is
        being destroyed; -1 without files."""
        first = self.mapped_file_queue.get_first_mapped_file()
        if first is None:
            return -1
        return first.file_from_offset if first.available else self.roll_next_file(first.file_from_offset)

    # -- expiry ----------------------------------------------------------------------------
    async def delete_expired_file(self, expired_time: int, delete_files_interval: int, interval_forcibly: int,
                                  clean_immediately: bool, delete_file_batch_max: int,
                                  sleep: Callable[[int], Awaitable[None]] | None = None) -> int:
        """CommitLog.deleteExpiredFile: files older than `expired_time` ms by this log's clock."""
        count = await self.mapped_file_queue.delete_expired_file_by_time(
            expired_time, delete_files_interval, interval_forcibly, clean_immediately, delete_file_batch_max,
            now_ms=self.clock(), sleep=sleep)
        if count:
            first = self.get_min_offset()
            self._store_timestamps = {k: v for k, v in self._store_timestamps.items() if k >= first}
        return count

    def retry_delete_first_file(self, interval_forcibly: int) -> bool:
        return self.mapped_file_queue.retry_delete_first_file(interval_forcibly)

    def get_max_offset(self) -> int:
        return self.mapped_file_queue.get_max_offset()

    def get_message(self, offset: int, size: int) -> bytes:
        mf = self.mapped_file_queue.find_mapped_file_by_offset(offset)
        if mf is None:
            return b""
        return mf.read(offset - mf.file_from_offset, size)

    def get_data(self, offset: int, max_size: int | None = None) -> bytes:
        """What is written from `offset` to the end of its file, at most `max_size` bytes
        (getCommitLogData, for HA transfer batches; never spans files)."""
        mf = self.mapped_file_queue.find_mapped_file_by_offset(offset)
        if mf is None:
            return b""
        return mf.read(offset - mf.file_from_offset, self.mapped_file_size if max_size is None else max_size)

    def check_message_at(self, offset: int, check_crc: bool = False) -> DispatchRequest | None:
        """Parse the record at `offset` (None past the end); used by the dispatcher."""
        mf = self.mapped_file_queue.find_mapped_file_by_offset(offset)
        if mf is None:
            return None
        view = mf.view()
        try:
            return check_message_and_return_size(view, offset - mf.file_from_offset, check_crc=check_crc, read_body=False,
                                                  delay_level_table=self.delay_level_table)
        finally:
            view.release()

    def roll_next_file(self, offset: int) -> int:
        return offset + self.mapped_file_size - offset % self.mapped_file_size

    # -- recovery --------------------------------------------------------------------------
    def recover_normally(self) -> RecoveryScan:
        """After a clean shutdown: check from the third-last file (CommitLog.recoverNormally)."""
        files = self.mapped_file_queue.mapped_files
        return self._scan("normal", max(0, len(files) - 3), None)

    def abnormal_recovery_start(self, min_timestamp: int) -> int:
        """Index of the file abnormal recovery starts from: the last file whose first message is not
        newer than the checkpoint's min timestamp (isMappedFileMatchedRecover), else the first."""
        files = self.mapped_file_queue.mapped_files
        for i in range(len(files) - 1, -1, -1):
            view = files[i].view(0, self.mapped_file_size)
            try:
                req = check_message_and_return_size(view, 0, check_crc=False, read_body=False,
                                                    delay_level_table=self.delay_level_table)
            finally:
                view.release()
            if req.success and req.msg_size > 0 and 0 < req.store_timestamp <= min_timestamp:
                return i
        return 0

    def file_start_offset(self, index: int) -> int:
        files = self.mapped_file_queue.mapped_files
        return files[index].file_from_offset if files else 0

    def recover_abnormally(self, index: int, dispatch: Callable[[DispatchRequest], None]) -> RecoveryScan:
        """After a crash: scan from file `index` (see abnormal_recovery_start) and re-dispatch every
        valid message to the consume queues, whose durable state may lag the commitlog's."""
        return self._scan("abnormal", index, dispatch)

    def _scan(self, mode: str, index: int, dispatch: Callable[[DispatchRequest], None] | None) -> RecoveryScan:
        files = self.mapped_file_queue.mapped_files
        if not files:
            return RecoveryScan(mode, 0, 0, 0, 0, "empty commitlog")
        start = files[index].file_from_offset
        process_offset = start
        count = 0
        reason = "end of the last file"
        discarded = 0
        for mf in files[index:]:
            view = mf.view(0, self.mapped_file_size)
            pos = 0
            try:
                while pos < self.mapped_file_size:
                    req = check_message_and_return_size(view, pos, check_crc=self.check_crc_on_recover, read_body=True,
                                                        delay_level_table=self.delay_level_table)
                    if req.success and req.msg_size > 0:
                        if dispatch is not None:
                            dispatch(req)
                        pos += req.msg_size
                        count += 1
                        self._store_timestamps[mf.file_from_offset] = req.store_timestamp
                    elif req.success:  # BLANK: the rest of this file is filler
                        pos = self.mapped_file_size
                    else:
                        tail = bytes(view[pos:]).rstrip(b"\0")
                        if tail:
                            discarded = len(tail)
                            reason = f"invalid record at offset {mf.file_from_offset + pos}: {self._why_invalid(view, pos)}"
                        else:
                            reason = f"end of data at offset {mf.file_from_offset + pos}"
                        break
            finally:
                view.release()
            process_offset = mf.file_from_offset + pos
            if pos < self.mapped_file_size:
                break
        for later in files[files.index(mf) + 1:]:
            v = later.view(0, self.mapped_file_size)
            discarded += len(bytes(v).rstrip(b"\0"))
            v.release()
        self.mapped_file_queue.set_positions(process_offset)
        self._store_timestamps = {k: v for k, v in self._store_timestamps.items() if k < process_offset}
        log.info("commitlog %s recovery: %d messages, cut at %d (%s), %d bytes discarded",
                 mode, count, process_offset, reason, discarded)
        return RecoveryScan(mode, start, process_offset, count, discarded, reason)

    @staticmethod
    def _why_invalid(view: memoryview, pos: int) -> str:
        try:
            decode(bytes(view[pos:]), 0, read_body=True, check_crc=True)
        except MessageFormatError as e:
            return str(e)
        # decode accepts what the recovery check refused only for a torn topic/properties tail.
        return "the end of the topic or properties is zeroed (a torn write)"

    def close(self) -> None:
        self.mapped_file_queue.close()
