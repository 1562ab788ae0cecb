"""DLedgerCommitLog: the CommitLog of DLedger CommitLog mode (RocketMQ 4.5+).

Mirrors org.apache.rocketmq.store.dledger.DLedgerCommitLog (apache/rocketmq,
store/src/main/java/org/apache/rocketmq/store/dledger/DLedgerCommitLog.java) on rmqlab's DLedger
(rmqlab.dledger: DLedgerServer, DLedgerMmapFileStore).

Theory of operation
-------------------
Every message is encoded in the ordinary commitlog format (MessageExtEncoder) and becomes the body
of one DLedger entry, so the DLedger data files are the commitlog and their offsets are the
commitlog offsets:

    entry at pos:   | DLedger header, 48 bytes | message (TOTALSIZE, MAGIC, ..., PHYSICALOFFSET, ...) |
                    pos                         pos + 48 = the message's commitlog offset

* the append hook writes PHYSICALOFFSET = pos + 48 into the message once DLedger has chosen pos
  (the entry's bytes are patched before they are written, so every replica holds the same bytes);
* the queue offset is assigned before the append (RocketMQ: inside the put lock; here a put runs
  to the append without yielding), and the AppendMessageResult's wroteOffset (hence the msgId) is
  pos + 48; a consume-queue unit holds pos + 48 and the message's size;
* a put answers when DLedger's AppendFuture does: once a quorum holds the entry (PUT_OK), or with
  the failure mapped as RocketMQ maps it (``put_message_status_of``); an append DLedger refuses at
  once (not the leader, transferring, pending full: pos -1) answers OS_PAGE_CACHE_BUSY at once;
* ``get_max_offset`` (and the confirm offset) is DLedger's committedPos: the dispatcher
  (ReputMessageService) stops there, so consume queues, hence consumers, see only committed
  messages; the store wakes the dispatcher whenever the commit index moves (a leader's quorum, a
  follower adopting the leader's commit index);
* reads (``get_message``) go to the DLedger data files by commitlog offset;
* recovery: DLedger recovers its log (DLedgerMmapFileStore.recover); after a clean exit the
  consume queues are cut to DLedger's written end; after a crash they keep what the checkpoint
  vouches for and the messages from the recovery's start file on are dispatched again.

There is no HA service in this mode: DLedger replicates (``append_data`` refuses).

Deviations from RocketMQ, each for a reason:
* An old commitlog (a master-slave store being converted, RocketMQ's "mixed mode" with
  dividedCommitlogOffset) is refused with an error: rmqlab does not convert stores in place.
* Abnormal recovery dispatches again only what is committed (RocketMQ dispatches every written
  entry): an uncommitted entry may be truncated by the next leader, and a consume-queue unit
  pointing at it would then point at some other message's bytes.
* Batches (asyncPutMessages) are not implemented: rmqlab's broker stores batches one by one.
"""

from __future__ import annotations

import logging
import struct
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from rmqlab.common.future import CompletableFuture
from rmqlab.common.message.message import MessageExtBrokerInner, MessageFormatError
from rmqlab.common.message.message_sys_flag import MessageSysFlag
from rmqlab.common.message.message_version import BLANK_MAGIC_CODE, MESSAGE_MAGIC_CODE, MESSAGE_MAGIC_CODE_V2
from rmqlab.dledger.dledger_config import DLedgerConfig
from rmqlab.dledger.dledger_server import DLedgerServer
from rmqlab.dledger.entry.dledger_entry import BODY_OFFSET, DLedgerEntry
from rmqlab.dledger.member_state import MemberState
from rmqlab.dledger.protocol.dledger_protocol_bodies import AppendEntryRequest, AppendEntryResponse
from rmqlab.dledger.protocol.dledger_response_code import DLedgerResponseCode
from rmqlab.dledger.store.file.dledger_mmap_file_store import DLedgerMmapFileStore
from rmqlab.dledger.store.file.mmap_file_list import BLANK_MAGIC_CODE as DLEDGER_BLANK_MAGIC_CODE
from rmqlab.runtime.page_cache import PageCache
from rmqlab.store.commit_log import CommitLog, RecoveryScan
from rmqlab.store.dispatch_request import DispatchRequest, check_message_and_return_size
from rmqlab.store.put_message_result import (AppendMessageResult, AppendMessageStatus, PutMessageResult,
                                             PutMessageStatus)

if TYPE_CHECKING:
    from rmqlab.dledger.dledger_entry_pusher import AppendFuture
    from rmqlab.runtime.node import Node

log = logging.getLogger("rmqlab.store")

# MessageDecoder.PHY_POS_POSITION: TOTALSIZE, MAGICCODE, BODYCRC, QUEUEID, FLAG, QUEUEOFFSET before it.
PHY_POS_POSITION = 4 + 4 + 4 + 4 + 4 + 8
_LONG = struct.Struct(">q")
_INT2 = struct.Struct(">ii")


def dledger_config_of(msc: Any) -> DLedgerConfig:
    """DLedgerCommitLog's constructor: the member's DLedgerConfig from the MessageStoreConfig.

    storeType is FILE (the mapped-file store); the data files are the commitlog, so they have its
    file size; retention maps to DLedger's own cleaning (fileReservedHours is fileReservedTime + 1,
    as RocketMQ sets it). preferredLeaderId becomes preferredLeaderIds."""
    return DLedgerConfig(
        group=msc.dLegerGroup, self_id=msc.dLegerSelfId, peers=msc.dLegerPeers,
        store_base_dir=msc.storePathRootDir, data_store_path=msc.storePathDLedgerCommitLog,
        mapped_file_size_for_entry_data=msc.mappedFileSizeCommitLog, delete_when=msc.deleteWhen,
        file_reserved_hours=msc.fileReservedTime + 1, preferred_leader_ids=msc.preferredLeaderId,
        is_enable_batch_push=msc.enableBatchPush,
        disk_space_ratio_to_check_expired=msc.diskMaxUsedSpaceRatio / 100)


def broker_id_of(self_id: str) -> int:
    """``Integer.parseInt(selfId.substring(1)) + 1``: the brokerId of this member as a slave."""
    return int(self_id[1:]) + 1


def put_message_status_of(code: int) -> PutMessageStatus:
    """asyncPutMessage's mapping of the AppendFuture's DLedgerResponseCode. Quirk kept: NOT_LEADER,
    DISK_FULL and LEADER_PENDING_FULL normally fail at once (pos -1) and never get here."""
    return {
        DLedgerResponseCode.SUCCESS: PutMessageStatus.PUT_OK,
        DLedgerResponseCode.INCONSISTENT_LEADER: PutMessageStatus.SERVICE_NOT_AVAILABLE,
        DLedgerResponseCode.NOT_LEADER: PutMessageStatus.SERVICE_NOT_AVAILABLE,
        DLedgerResponseCode.LEADER_NOT_READY: PutMessageStatus.SERVICE_NOT_AVAILABLE,
        DLedgerResponseCode.DISK_FULL: PutMessageStatus.SERVICE_NOT_AVAILABLE,
        # "Do not return flush_slave_timeout to the client, for the client will ignore it."
        DLedgerResponseCode.WAIT_QUORUM_ACK_TIMEOUT: PutMessageStatus.IN_SYNC_REPLICAS_NOT_ENOUGH,
        DLedgerResponseCode.LEADER_PENDING_FULL: PutMessageStatus.OS_PAGE_CACHE_BUSY,
    }.get(DLedgerResponseCode.value_of(code), PutMessageStatus.UNKNOWN_ERROR)


class DLedgerCommitLogStore(DLedgerMmapFileStore):
    """The mapped-file store, telling the commitlog when its commit index moves: RocketMQ's
    ReputMessageService polls every millisecond and sees it; rmqlab's dispatcher runs when woken."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.committed_listeners: list[Callable[[], None]] = []

    @property
    def closed(self) -> bool:
        """Shut down or killed: its files are unmapped."""
        return self._closed

    def shutdown(self) -> None:
        """DLedgerServer.shutdown: flush data and index and write the checkpoint, as DLedger does,
        but leave the files mapped: the message store's dispatcher reads them until the store is
        released (DLedgerCommitLog.close)."""
        if self._closed:
            return
        self.flush()
        self.persist_check_point()

    def update_committed_index(self, term: int, new_committed_index: int) -> None:
        before = self.committed_pos
        super().update_committed_index(term, new_committed_index)
        if self.committed_pos != before:
            for listener in self.committed_listeners:
                listener()


class DLedgerCommitLog(CommitLog):
    def __init__(self, msc: Any, node: Node, *, clock: Callable[[], int], store_host: tuple[str, int],
                 page_cache: PageCache | None):
        # The old commitlog (RocketMQ's mixed mode) is kept only to refuse it (see the docstring).
        super().__init__(msc.get_store_path_commit_log(), msc.mappedFileSizeCommitLog, clock=clock,
                         store_host=store_host, flush_disk_type=getattr(msc.flushDiskType, "name", msc.flushDiskType),
                         sync_flush_timeout=msc.syncFlushTimeout, max_message_size=msc.maxMessageSize,
                         flush_least_pages=msc.flushCommitLogLeastPages,
                         flush_thorough_interval=msc.flushCommitLogThoroughInterval,
                         check_crc_on_recover=msc.checkCRCOnRecover, page_cache=page_cache, store_config=msc)
        self.dledger_config = dledger_config_of(msc)
        self.id = broker_id_of(self.dledger_config.self_id)
        self.node = node
        self.msc = msc
        # The DLedger term in which DLedgerRoleChangeHandler last made this broker master (-1: never);
        # read only with rmqlabDLedgerPutOnlyAsMaster.
        self.master_term = -1

        def store_factory(config: DLedgerConfig, member_state: MemberState) -> DLedgerCommitLogStore:
            return DLedgerCommitLogStore(config, member_state, node, page_cache)

        self.dledger_server = DLedgerServer(self.dledger_config, node, store_factory)
        self.dledger_file_store: DLedgerCommitLogStore = self.dledger_server.get_dledger_store()
        self.dledger_file_store.add_append_hook(self._append_hook)
        self.dledger_file_list = self.dledger_file_store.get_data_file_list()
        self.commit_listeners = self.dledger_file_store.committed_listeners

    @staticmethod
    def _append_hook(entry: DLedgerEntry, buffer: memoryview, body_offset: int) -> None:
        """The message's PHYSICALOFFSET is its commitlog offset: the entry's pos + 48."""
        assert body_offset == BODY_OFFSET
        _LONG.pack_into(buffer, body_offset + PHY_POS_POSITION, entry.pos + body_offset)

    # -- lifecycle ---------------------------------------------------------------------------
    def load(self) -> None:
        """The old commitlog and DLedger's log (load + recover: DLedgerCommitLog does this in its
        recoverNormally/recoverAbnormally; both recover the same way, so here it is done once)."""
        super().load()
        if self.mapped_file_queue.mapped_files:
            raise RuntimeError(
                f"{self.store_config.get_store_path_commit_log()}: an existing commitlog with enableDLegerCommitLog = "
                f"true: rmqlab does not convert a master-slave store to DLedger in place (RocketMQ's mixed mode); "
                f"start the DLedger group on empty stores")
        self.dledger_file_store.load()
        self.dledger_file_store.recover()

    async def start(self) -> None:
        """DLedgerCommitLog.start: the DLedger server (RPC, elector, pusher, flush service)."""
        await self.dledger_server.startup()

    async def shutdown(self) -> None:
        """DLedgerCommitLog.shutdown: the server stops; its store flushes and checkpoints."""
        await self.dledger_server.shutdown()

    # flush(least) is CommitLog's, on the old commitlog's files, as RocketMQ's FlushRealTimeService
    # flushes CommitLog.mappedFileQueue: DLedger's own FlushDataService flushes its files (10 ms).

    def flush_all(self) -> None:
        """A clean store shutdown: DLedger's data and index flushed, its checkpoint written."""
        if not self.dledger_file_store.closed:
            self.dledger_file_store.flush()
            self.dledger_file_store.persist_check_point()

    def flushed_where(self) -> int:
        return self.dledger_file_list.flushed_where

    def close(self) -> None:
        """The store is released: whatever did not go through shutdown() is a crash (nothing more
        is flushed); the node cancelled the server's tasks."""
        self.dledger_server.on_crash()
        if not self.dledger_file_store.closed:
            self.dledger_file_store.kill()
        super().close()

    # -- what the store reads ----------------------------------------------------------------
    def get_min_offset(self) -> int:
        for mf in self.dledger_file_list.get_mapped_files():
            return mf.file_from_offset + mf.start_position
        return 0

    def get_max_offset(self) -> int:
        """committedPos: nothing beyond it is dispatched (getMaxOffset; also getConfirmOffset)."""
        if self.dledger_file_store.get_committed_pos() > 0:
            return self.dledger_file_store.get_committed_pos()
        if self.dledger_file_list.get_min_offset() > 0:
            return self.dledger_file_list.get_min_offset()
        return 0

    def get_confirm_offset(self) -> int:
        return self.get_max_offset()

    def get_message(self, offset: int, size: int) -> bytes:
        mf = self.dledger_file_list.find_mapped_file_by_offset(offset, offset == 0)
        if mf is None:
            return b""
        data = mf.get_data(offset % self.mapped_file_size, size)
        return b"" if data is None else bytes(data)

    def get_data(self, offset: int, max_size: int | None = None) -> bytes:
        """getData: what is committed from `offset` to the end of its file (truncate at committedPos)."""
        committed = self.dledger_file_store.get_committed_pos()
        if offset >= committed:
            return b""
        mf = self.dledger_file_list.find_mapped_file_by_offset(offset, offset == 0)
        if mf is None:
            return b""
        sbr = mf.select_mapped_buffer(offset % self.mapped_file_size)
        if sbr is None:
            return b""
        data = bytes(sbr.byte_buffer[:max(0, committed - offset)])
        return data if max_size is None else data[:max_size]

    def append_data(self, start_offset: int, data: bytes) -> bool:
        log.error("appendData is not supported in DLedger CommitLog mode: DLedger replicates")
        return False

    def check_message_at(self, offset: int, check_crc: bool = False) -> DispatchRequest | None:
        """checkMessageAndReturnSize on the entry at `offset` (None past the written end). A
        DLedger blank (int -1) ends the file (size 0); a message is parsed at +48 and its
        `buffer_size` (msgSize + 48) is how far the dispatcher moves."""
        mf = self.dledger_file_list.find_mapped_file_by_offset(offset, offset == 0)
        if mf is None:
            return None
        rel = offset - mf.file_from_offset
        view = mf.view()
        try:
            return self._check_entry(view, rel, check_crc, read_body=False)
        finally:
            view.release()

    def _check_entry(self, view: memoryview, rel: int, check_crc: bool, read_body: bool) -> DispatchRequest:
        if rel + 8 > len(view):
            return DispatchRequest.of_size(-1, False)
        magic, magic_old = _INT2.unpack_from(view, rel)
        if magic_old in (BLANK_MAGIC_CODE, MESSAGE_MAGIC_CODE, MESSAGE_MAGIC_CODE_V2):
            # An old-format record: only in a mixed store, which rmqlab refuses at load.
            return DispatchRequest.of_size(-1, False)
        if magic == DLEDGER_BLANK_MAGIC_CODE:
            return DispatchRequest.of_size(0, True)
        req = check_message_and_return_size(view, rel + BODY_OFFSET, check_crc=check_crc, read_body=read_body,
                                            delay_level_table=self.delay_level_table)
        if req.msg_size > 0:
            req.buffer_size = req.msg_size + BODY_OFFSET  # the dispatcher steps over the whole entry
        return req

    # -- appending ---------------------------------------------------------------------------
    def async_put_message(self, msg: MessageExtBrokerInner) -> CompletableFuture[PutMessageResult]:
        """asyncPutMessage: encode, assign the queue offset, hand the bytes to DLedger
        (handleAppend), answer when the AppendFuture completes."""
        msg.store_timestamp = self.clock()
        msg.store_host = self.store_host
        key = f"{msg.topic}-{msg.queue_id}"
        dispatched = MessageSysFlag.get_transaction_value(msg.sys_flag) in (
            MessageSysFlag.TRANSACTION_NOT_TYPE, MessageSysFlag.TRANSACTION_COMMIT_TYPE)
        queue_offset = self.topic_queue_table.get(key, 0) if dispatched else 0
        try:
            # PHYSICALOFFSET is written by the append hook once DLedger has chosen the position.
            data = self.encoder.encode(msg, queue_offset=queue_offset, physical_offset=0)
        except MessageFormatError as e:
            log.warning("put rejected: %s", e)
            status = AppendMessageStatus.PROPERTIES_SIZE_EXCEEDED \
                if getattr(e, "put_status", "") == "PROPERTIES_SIZE_EXCEEDED" else AppendMessageStatus.MESSAGE_SIZE_EXCEEDED
            return CompletableFuture.completed(PutMessageResult(PutMessageStatus.MESSAGE_ILLEGAL,
                                                                AppendMessageResult(status)))
        ms = self.dledger_server.get_member_state()
        if self.msc.rmqlabDLedgerPutOnlyAsMaster and self.master_term != ms.curr_term:
            # The rmqlab-only guard (MessageStoreConfig): not master in this term yet, so the queue
            # offsets may be stale. Answered as RocketMQ answers a put DLedger refuses at once.
            return CompletableFuture.completed(PutMessageResult(PutMessageStatus.OS_PAGE_CACHE_BUSY,
                                                                AppendMessageResult(AppendMessageStatus.UNKNOWN_ERROR)))
        request = AppendEntryRequest(group=self.dledger_config.group, remote_id=ms.self_id, body=data)
        dledger_future: AppendFuture = self.dledger_server.append_future(request)
        if dledger_future.pos == -1:
            return CompletableFuture.completed(PutMessageResult(PutMessageStatus.OS_PAGE_CACHE_BUSY,
                                                                AppendMessageResult(AppendMessageStatus.UNKNOWN_ERROR)))
        wrote_offset = dledger_future.pos + BODY_OFFSET
        result = AppendMessageResult(AppendMessageStatus.PUT_OK, wrote_offset=wrote_offset, wrote_bytes=len(data),
                                     store_timestamp=msg.store_timestamp, logics_offset=queue_offset,
                                     store_host=self.store_host)
        if dispatched:
            self.topic_queue_table[key] = queue_offset + 1  # increaseOffset
        out: CompletableFuture[PutMessageResult] = CompletableFuture()

        def answer(f: AppendFuture) -> None:
            if f.cancelled():  # the node stopped: nobody is waiting any more
                return
            response: AppendEntryResponse = f.result()
            out.complete(PutMessageResult(put_message_status_of(response.code), result))

        if dledger_future.done():
            answer(dledger_future)
        else:
            dledger_future.add_done_callback(answer)
        return out

    # -- recovery ----------------------------------------------------------------------------
    def recover_normally(self) -> RecoveryScan:
        """dledgerRecoverNormally: DLedger recovered its log (load); the consume queues are then
        cut to its written end (the store does that with the scan's process offset)."""
        end = self.dledger_file_list.get_max_wrote_position()
        start = self.get_min_offset()
        return RecoveryScan("normal", start, end, self.dledger_file_store.get_ledger_end_index()
                            - self.dledger_file_store.get_ledger_begin_index() + 1
                            if self.dledger_file_store.get_ledger_end_index() >= 0 else 0, 0,
                            "DLedger recovered its log")

    def abnormal_recovery_start(self, min_timestamp: int) -> int:
        """isMmapFileMatchedRecover: the last data file whose first message was stored no later than
        the checkpoint's min timestamp, else the first."""
        files = self.dledger_file_list.get_mapped_files()
        for i in range(len(files) - 1, -1, -1):
            view = files[i].view()
            try:
                req = self._check_entry(view, files[i].start_position, False, read_body=False)
            finally:
                view.release()
            if req.success and req.msg_size > 0 and 0 < req.store_timestamp <= min_timestamp:
                return i
        return 0

    def file_start_offset(self, index: int) -> int:
        files = self.dledger_file_list.get_mapped_files()
        return files[index].file_from_offset + files[index].start_position if files else 0

    def recover_abnormally(self, index: int, dispatch: Callable[[DispatchRequest], None]) -> RecoveryScan:
        """dledgerRecoverAbnormally: dispatch again from data file `index` on, up to committedPos
        (see the module docstring); the consume queues are then cut to DLedger's written end."""
        files = self.dledger_file_list.get_mapped_files()
        end = self.dledger_file_list.get_max_wrote_position()
        if not files:
            return RecoveryScan("abnormal", 0, end, 0, 0, "empty DLedger log")
        committed = self.dledger_file_store.get_committed_pos()
        start = self.file_start_offset(index)
        count = 0
        reason = "end of the committed entries"
        for mf in files[index:]:
            view = mf.view()
            pos = mf.start_position
            try:
                while mf.file_from_offset + pos < committed:
                    req = self._check_entry(view, pos, self.check_crc_on_recover, read_body=True)
                    if req.success and req.msg_size > 0:
                        dispatch(req)
                        count += 1
                        pos += req.buffer_size
                    elif req.success:
                        break  # a DLedger blank: the next file
                    else:
                        reason = f"invalid message in the entry at {mf.file_from_offset + pos}"
                        log.error("DLedger commitlog recovery: %s", reason)
                        break
            finally:
                view.release()
            if reason != "end of the committed entries" or mf.file_from_offset + pos >= committed:
                break
        log.info("DLedger commitlog abnormal recovery: %d messages dispatched again from %d", count, start)
        return RecoveryScan("abnormal", start, end, count, 0, reason)

