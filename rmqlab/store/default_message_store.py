"""DefaultMessageStore: the broker's storage engine (CommitLog + ConsumeQueues + services + recovery).

Mirrors org.apache.rocketmq.store.DefaultMessageStore. Files under `storePathRootDir`:
`commitlog/`, `consumequeue/<topic>/<queueId>/`, `checkpoint`, `abort` (present while running: its
presence at start means the last exit was not clean), `lock`, and `config/` (written by the broker's
metadata managers). rmqlab adds `.rmqlab-durability.json`, the crash-model ledger (page_cache).

No threads: RocketMQ's service threads are step functions listed by `periodic_services()`, which a
runtime (simulator or asyncio) runs at their configured intervals, and the dispatcher, which runs
when woken (`ReputMessageService.start`). The lifecycle ends one of three
ways: `shutdown()` (clean: flush everything, remove `abort`), `kill()` (process crash: the page cache
survives), or `kill()` followed by `crash_machine()` (power loss: unflushed bytes are gone).

Classic HA (`store/.../ha/DefaultHAService.java`): a broker's DefaultHAService attaches itself
(`set_ha_service`); a SYNC_MASTER put then also waits for its slaves' acknowledgements (CommitLog),
a SLAVE refuses puts and takes replicated bytes through `append_to_commit_log`, which its own
dispatcher turns into consume queues.

Expiry (`clean_services()`, scheduled by the broker): CleanCommitLogService deletes commitlog
files by age at deleteWhen, by disk usage, or on an operator's request, and marks the store
DISK_FULL (puts refused) over diskSpaceWarningLevelRatio; CleanConsumeQueueService then drops the
consume-queue files below the commitlog's new min offset. Disk usage is the file system's, or a
virtual disk's on the simulator (rmqlab.store.disk_space). A read over deleted commitlog files
skips to the next file, as RocketMQ's getMessage does.

DLedger CommitLog mode (`enableDLegerCommitLog`): the commitlog is a DLedgerCommitLog
(rmqlab.store.dledger) on the broker's node; its files are under `dledger-<selfId>/`, its max offset
is DLedger's committed position, so the dispatcher (woken when the commit index moves) builds
consume queues only from committed messages; no HA service attaches.
"""

from __future__ import annotations

import fcntl
import logging
import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from rmqlab.common.future import CompletableFuture
from rmqlab.common.message.message import MessageExtBrokerInner
from rmqlab.common.message.message_sys_flag import MessageSysFlag
from rmqlab.runtime.page_cache import PageCache, crash_machine
from rmqlab.store import crash_points
from rmqlab.store.clean_commit_log_service import CleanCommitLogService
from rmqlab.store.clean_consume_queue_service import CleanConsumeQueueService
from rmqlab.store.commit_log import CommitLog, RecoveryScan
from rmqlab.store.consume_queue import ConsumeQueue
from rmqlab.store.dispatch_request import DispatchRequest
from rmqlab.store.disk_space import VirtualDisk, get_disk_partition_space_used_percent
from rmqlab.store.dledger.dledger_commit_log import DLedgerCommitLog
from rmqlab.store.flush_consume_queue_service import FlushConsumeQueueService
from rmqlab.store.get_message_result import GetMessageResult, GetMessageStatus
from rmqlab.store.put_message_result import PutMessageResult, PutMessageStatus
from rmqlab.store.reput_message_service import ReputMessageService
from rmqlab.store.running_flags import RunningFlags
from rmqlab.store.store_checkpoint import StoreCheckpoint

log = logging.getLogger("rmqlab.store")


class StoreInUseError(Exception):
    """Another store instance (process) holds this store directory."""


@dataclass
class StoreLoadReport:
    """What `load()` found and did; the demo and the labs print it."""

    last_exit_ok: bool
    recovery: RecoveryScan
    # "topic-qid" -> units lost: found on disk, not backed by the recovered commitlog
    consume_queue_truncations: dict[str, int] = field(default_factory=dict)
    redispatched: int = 0
    reput_from_offset: int = 0
    checkpoint: dict[str, int] = field(default_factory=dict)


class DefaultMessageStore:
    def __init__(self, message_store_config, *, clock: Callable[[], int],
                 store_host: tuple[str, int] = ("127.0.0.1", 10911), node=None):
        """`node`: the runtime node DLedger CommitLog mode runs its DLedger server on (required
        with enableDLegerCommitLog; RocketMQ's store starts its own threads)."""
        cfg = message_store_config
        self.config = cfg
        self.clock = clock
        self.root = cfg.storePathRootDir
        os.makedirs(self.root, exist_ok=True)
        self._lock_fd = self._lock_store_dir()
        self.page_cache = PageCache(self.root)
        if getattr(cfg, "enableDLegerCommitLog", False):
            # DLedger CommitLog mode (rmqlab.store.dledger): the commitlog is a DLedger log.
            if node is None:
                raise ValueError("enableDLegerCommitLog = true: the store needs the node its DLedger server runs on")
            self.commit_log = DLedgerCommitLog(cfg, node, clock=clock, store_host=store_host,
                                               page_cache=self.page_cache)
        else:
            self.commit_log = CommitLog(
                cfg.get_store_path_commit_log(), cfg.mappedFileSizeCommitLog, clock=clock, store_host=store_host,
                flush_disk_type=_enum_name(cfg.flushDiskType), sync_flush_timeout=cfg.syncFlushTimeout,
                max_message_size=cfg.maxMessageSize, flush_least_pages=cfg.flushCommitLogLeastPages,
                flush_thorough_interval=cfg.flushCommitLogThoroughInterval,
                check_crc_on_recover=cfg.checkCRCOnRecover, page_cache=self.page_cache, store_config=cfg)
        self.consume_queue_dir = cfg.get_store_path_consume_queue()
        self.consume_queue_table: dict[tuple[str, int], ConsumeQueue] = {}
        self.store_checkpoint = StoreCheckpoint(cfg.get_store_checkpoint(), self.page_cache)
        if self.is_dledger():
            self.reput_message_service = ReputMessageService(self.commit_log, self._dispatch)
            self.reput_message_service.skip_unreadable = True  # doReput: isEnableDLegerCommitLog()
            # What the dispatcher may read grows when the commit index moves, not when a put returns.
            self.commit_log.commit_listeners.append(self.reput_message_service.wakeup)
        else:
            self.reput_message_service = ReputMessageService(self.commit_log, self._dispatch)
        self.flush_consume_queue_service = FlushConsumeQueueService(
            self, clock, flush_least_pages=cfg.flushConsumeQueueLeastPages,
            thorough_interval=cfg.flushConsumeQueueThoroughInterval)
        self.abort_file = cfg.get_abort_file()
        self.running = False
        self.ha_service = None  # set by the broker's HA service (set_ha_service)
        self.load_report: StoreLoadReport | None = None  # what the last load() found
        self.running_flags = RunningFlags()
        # The node's machine: a simulated one has a virtual disk and reads hours in UTC (Node.simulated).
        self.simulated = bool(getattr(node, "simulated", False))
        self.disk: VirtualDisk | None = None
        if cfg.rmqlabDiskCapacityBytes > 0 or self.simulated:
            self.disk = VirtualDisk(cfg.rmqlabDiskCapacityBytes, [self.root, cfg.get_store_path_commit_log()])
        # What the clean services sleep on between two deletions (None: they do not sleep).
        self.sleep = node.sleep if node is not None else None
        self.clean_commit_log_service = CleanCommitLogService(self)
        self.clean_consume_queue_service = CleanConsumeQueueService(self)
        # The broker's enableControllerMode (set_controller_mode, before load): RocketMQ's store
        # reads it from the BrokerConfig it holds.
        self.enable_controller_mode = False

    def is_dledger(self) -> bool:
        """DLedger CommitLog mode (enableDLegerCommitLog)."""
        return getattr(self.commit_log, "dledger_server", None) is not None

    def set_ha_service(self, ha_service) -> None:
        """The HA service replicating this store (RocketMQ's store creates its own; here the
        broker builds it on its Node and it attaches itself)."""
        self.ha_service = ha_service
        self.commit_log.ha_service = ha_service

    def set_controller_mode(self, enabled: bool) -> None:
        """Controller mode: recovery dispatches only what the stored confirm offset covers, and so
        does the dispatcher until the AutoSwitchHAService attaches (set before ``load``)."""
        self.enable_controller_mode = enabled

    def set_slave_acting_master(self, enabled: bool) -> None:
        """The broker's enableSlaveActingMaster, which changes how many acks a SYNC_MASTER put
        waits for (``CommitLog.async_put_message``). RocketMQ's store reads it from the BrokerConfig
        it holds; rmqlab's store has none."""
        self.commit_log.enable_slave_acting_master = enabled

    def set_alive_replica_num_in_group(self, alive_replica_nums: int) -> None:
        """``setAliveReplicaNumInGroup``: what the broker's member-group sync counted."""
        self.commit_log.alive_replica_num_in_group = alive_replica_nums

    def get_alive_replica_num_in_group(self) -> int:
        return self.commit_log.alive_replica_num_in_group

    @property
    def flush_commit_log_service(self):
        """FlushRealTimeService (ASYNC_FLUSH) or GroupCommitService (SYNC_FLUSH)."""
        return self.commit_log.flush_service

    def _lock_store_dir(self) -> int:
        path = self.config.get_lock_file()
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            raise StoreInUseError(f"{self.root}: the store is in use by another broker (lock file {path} is held)") from None
        return fd

    # -- start-up and recovery -------------------------------------------------------------
    def load(self) -> StoreLoadReport:
        """Load and recover the store (DefaultMessageStore.load + recover), then mark it running."""
        last_exit_ok = not os.path.exists(self.abort_file)
        self.commit_log.load()
        self._load_consume_queues()
        for cq in self.consume_queues():
            cq.recover()
        redispatched = 0
        # Controller mode: the broker is fenced while it loads, so CommitLog.getConfirmOffset is
        # the checkpoint's confirmPhyOffset, and recoverAbnormally dispatches only the messages
        # it covers: a replica never serves what its group may still cut away.
        confirm = self.store_checkpoint.confirm_phy_offset if self.enable_controller_mode else None
        last_confirm_valid = -1  # lastConfirmValidMsgPhyOffset

        def redispatch(req: DispatchRequest) -> None:
            nonlocal redispatched, last_confirm_valid
            if confirm is not None:
                if req.commit_log_offset + req.msg_size > confirm:
                    return
                last_confirm_valid = req.commit_log_offset + req.msg_size
            redispatched += 1
            self._dispatch(req)

        recovered_units = {(cq.topic, cq.queue_id): cq.get_max_offset_in_queue() for cq in self.consume_queues()}

        def truncate_consume_queues(phy_offset: int) -> None:
            for cq in self.consume_queues():
                cq.truncate_dirty_logic_files(phy_offset)

        if last_exit_ok:
            scan = self.commit_log.recover_normally()
        else:
            index = self.commit_log.abnormal_recovery_start(self.store_checkpoint.get_min_timestamp())
            # Deviation from RocketMQ (which keeps every unit that ConsumeQueue.recover found valid
            # in the last three files, and every unit before them): each queue keeps only the
            # units the checkpoint vouches for — those of messages before the scan start — and
            # the re-dispatch below rebuilds the rest. A machine crash can zero a whole unflushed
            # file further back than `recover` looks, or tear a unit (lose the low byte of its
            # size) so that it still looks valid.
            start = self.commit_log.file_start_offset(index)
            last_confirm_valid = start
            for cq in self.consume_queues():
                cq.truncate_to_durable_prefix(start)
            scan = self.commit_log.recover_abnormally(index, redispatch)
        if any(cq.max_physic_offset > scan.process_offset for cq in self.consume_queues()):
            truncate_consume_queues(scan.process_offset)  # units past the cut (truncateDirtyLogicFiles)
        truncations = {f"{topic}-{qid}": units - self.get_max_offset_in_queue(topic, qid)
                       for (topic, qid), units in recovered_units.items()
                       if self.get_max_offset_in_queue(topic, qid) < units}
        self._recover_topic_queue_table()
        self.reput_message_service.reput_from_offset = self._reput_start_offset()
        if confirm is not None:
            # CommitLog.recoverNormally / recoverAbnormally in controller mode: the confirm offset
            # within [minPhyOffset, what recovery kept (abnormal: the last confirmed message's end)].
            end = scan.process_offset if last_exit_ok else last_confirm_valid
            if confirm < self.commit_log.get_min_offset():
                confirm = self.commit_log.get_min_offset()
            elif confirm > end:
                confirm = end
            self.store_checkpoint.confirm_phy_offset = confirm
            # start(): reputFromOffset = getConfirmOffset() (rmqlab never skips an undispatched
            # message below it: the lower of the two), and dispatch stops there until the HA
            # service takes over the limit.
            self.reput_message_service.reput_from_offset = min(self.reput_message_service.reput_from_offset,
                                                               max(confirm, 0))
            self.reput_message_service.dispatch_limit = lambda: self.store_checkpoint.confirm_phy_offset
        if not os.path.exists(self.abort_file):
            with open(self.abort_file, "w"):
                pass
            crash_points.point("create", self.abort_file)
        self.running = True
        self.load_report = StoreLoadReport(last_exit_ok, scan, truncations, redispatched,
                                           self.reput_message_service.reput_from_offset,
                                           self.store_checkpoint.as_dict())
        return self.load_report

    def _load_consume_queues(self) -> None:
        if not os.path.isdir(self.consume_queue_dir):
            return
        for topic in sorted(os.listdir(self.consume_queue_dir)):
            topic_dir = os.path.join(self.consume_queue_dir, topic)
            if not os.path.isdir(topic_dir):
                continue
            for qid in sorted(os.listdir(topic_dir)):
                if not qid.isdigit():
                    log.warning("%s: not a queue id directory, ignored", os.path.join(topic_dir, qid))
                    continue
                cq = self.find_consume_queue(topic, int(qid))
                cq.load()

    def recover_topic_queue_table(self) -> None:
        """recoverTopicQueueTable: each queue's next offset from its consume queue (a new DLedger
        leader does this before it takes writes as master)."""
        self._recover_topic_queue_table()

    def _recover_topic_queue_table(self) -> None:
        # ConsumeQueueStore.recoverOffsetTable: each queue's min offset also skips the units whose
        # commitlog range expired (a no-op while the commitlog starts at 0).
        min_phy_offset = self.commit_log.get_min_offset()
        for cq in self.consume_queues():
            cq.correct_min_offset(min_phy_offset)
        self.commit_log.topic_queue_table = {
            f"{cq.topic}-{cq.queue_id}": cq.get_max_offset_in_queue() for cq in self.consume_queues()}

    def _reput_start_offset(self) -> int:
        """Where the dispatcher resumes: the furthest commitlog position any consume queue covers."""
        start = self.commit_log.get_min_offset()
        for cq in self.consume_queues():
            start = max(start, cq.max_physic_offset)
        return max(0, start)

    # -- the consume queues ----------------------------------------------------------------
    def find_consume_queue(self, topic: str, queue_id: int) -> ConsumeQueue:
        key = (topic, queue_id)
        cq = self.consume_queue_table.get(key)
        if cq is None:
            cq = ConsumeQueue(topic, queue_id, self.consume_queue_dir,
                              self.config.get_mapped_file_size_consume_queue(), self.page_cache)
            self.consume_queue_table[key] = cq
        return cq

    def consume_queues(self) -> list[ConsumeQueue]:
        return [self.consume_queue_table[k] for k in sorted(self.consume_queue_table)]

    def _dispatch(self, req: DispatchRequest) -> None:
        """CommitLogDispatcherBuildConsumeQueue: only NOT and COMMIT messages get a unit (a
        transaction's PREPARED and ROLLBACK records stay in the commit log only), whichever path
        dispatches them: the reput service or recovery."""
        if MessageSysFlag.get_transaction_value(req.sys_flag) not in (MessageSysFlag.TRANSACTION_NOT_TYPE,
                                                                     MessageSysFlag.TRANSACTION_COMMIT_TYPE):
            return
        cq = self.find_consume_queue(req.topic, req.queue_id)
        cq.put_message_position_info(req.commit_log_offset, req.msg_size, req.tags_code, req.consume_queue_offset)

    # -- writing ---------------------------------------------------------------------------
    def async_put_message(self, msg: MessageExtBrokerInner) -> CompletableFuture[PutMessageResult]:
        if not self.running:
            raise RuntimeError(f"{self.root}: store is not running (load() it first)")
        if _enum_name(self.config.brokerRole) == "SLAVE":
            # A slave's commitlog is written by replication only. RocketMQ 5 refuses here in the
            # broker (HookUtils.checkBeforePutMessage; 4.x: DefaultMessageStore.checkStoreStatus);
            # the store does it so that every writer gets the same answer.
            log.debug("message store is in slave mode, so putMessage is forbidden")
            return CompletableFuture.completed(PutMessageResult(PutMessageStatus.SERVICE_NOT_AVAILABLE))
        if not self.running_flags.is_writeable():
            # The disk is full (CleanCommitLogService): HookUtils.checkBeforePutMessage's answer.
            log.warning("message store is not writeable, so putMessage is forbidden %d", self.running_flags.flag_bits)
            return CompletableFuture.completed(PutMessageResult(PutMessageStatus.SERVICE_NOT_AVAILABLE))
        result = self.commit_log.async_put_message(msg)
        self.reput_message_service.wakeup()
        return result

    def put_message(self, msg: MessageExtBrokerInner) -> PutMessageResult:
        """Put and wait, as a broker thread does: under SYNC_FLUSH the group commit runs now.

        A put waiting for a slave's acknowledgement (SYNC_MASTER) completes only as the runtime
        runs; use async_put_message there."""
        future = self.async_put_message(msg)
        if not future.done():
            self.flush_commit_log_service.do_commit()
        if not future.done():
            raise RuntimeError("the put waits for a slave's acknowledgement: use async_put_message on a runtime")
        return future.result()

    def append_to_commit_log(self, start_offset: int, data: bytes) -> bool:
        """A slave applies replicated bytes (DefaultMessageStore.appendToCommitLog)."""
        if not self.running:
            log.warning("message store has shutdown, so appendToCommitLog is forbidden")
            return False
        appended = self.commit_log.append_data(start_offset, data)
        if appended:
            self.reput_message_service.wakeup()
        return appended

    # -- reading ---------------------------------------------------------------------------
    def get_max_offset_in_queue(self, topic: str, queue_id: int) -> int:
        cq = self.consume_queue_table.get((topic, queue_id))
        return cq.get_max_offset_in_queue() if cq else 0

    def get_min_offset_in_queue(self, topic: str, queue_id: int) -> int:
        cq = self.consume_queue_table.get((topic, queue_id))
        return cq.get_min_offset_in_queue() if cq else 0

    def get_max_phy_offset(self) -> int:
        return self.commit_log.get_max_offset()

    def get_min_phy_offset(self) -> int:
        return self.commit_log.get_min_offset()

    def get_message(self, group: str, topic: str, queue_id: int, offset: int, max_msg_nums: int,
                    message_filter: Callable[[int], bool] | None = None) -> GetMessageResult:
        """Read up to `max_msg_nums` messages from a queue (DefaultMessageStore.getMessage).

        `message_filter(tags_code)` drops units whose tag does not match (MessageFilter's
        consume-queue check). `group` is kept for RocketMQ's signature and for logging.
        """
        cq = self.consume_queue_table.get((topic, queue_id))
        if cq is None:
            return GetMessageResult(GetMessageStatus.NO_MATCHED_LOGIC_QUEUE, next_begin_offset=0)
        min_off, max_off = cq.get_min_offset_in_queue(), cq.get_max_offset_in_queue()
        result = GetMessageResult(GetMessageStatus.NO_MATCHED_MESSAGE, offset, min_off, max_off)
        if max_off == 0:
            result.status, result.next_begin_offset = GetMessageStatus.NO_MESSAGE_IN_QUEUE, 0
        elif offset < min_off:
            result.status, result.next_begin_offset = GetMessageStatus.OFFSET_TOO_SMALL, min_off
        elif offset == max_off:
            result.status, result.next_begin_offset = GetMessageStatus.OFFSET_OVERFLOW_ONE, offset
        elif offset > max_off:
            result.status, result.next_begin_offset = GetMessageStatus.OFFSET_OVERFLOW_BADLY, max_off
        else:
            next_offset = offset
            next_phy_file_start: int | None = None  # RocketMQ's Long.MIN_VALUE: none
            units = cq.get_units(offset, max(max_msg_nums, 1) * 2)
            for phy, size, tags_code in units:
                next_offset += 1
                if message_filter is not None and not message_filter(tags_code):
                    continue
                if size <= 0 or phy < 0:
                    # A zeroed or torn unit (recovery should make this impossible): serving it
                    # would hand out an empty "message".
                    log.error("[BUG] %s-%d unit %d is not a message position (offset %d, size %d)",
                              topic, queue_id, next_offset - 1, phy, size)
                    if not result.message_buffers:
                        result.status = GetMessageStatus.OFFSET_FOUND_NULL
                    break
                if next_phy_file_start is not None and phy < next_phy_file_start:
                    continue  # in a commitlog file found deleted: skip to the next file
                data = self.commit_log.get_message(phy, size)
                if len(data) != size:
                    # The commitlog range expired (or is being deleted): as RocketMQ, skip the
                    # units up to the next commitlog file and go on with the later messages.
                    if not result.message_buffers:
                        result.status = GetMessageStatus.MESSAGE_WAS_REMOVING
                    next_phy_file_start = self.commit_log.roll_next_file(phy)
                    continue
                if int.from_bytes(data[:4], "big") != size:
                    # Never serve bytes the unit does not describe (recovery should make this impossible).
                    log.error("[BUG] %s-%d unit %d says %d bytes at %d, the commitlog record there is %d bytes",
                              topic, queue_id, next_offset - 1, size, phy, int.from_bytes(data[:4], "big"))
                    if not result.message_buffers:
                        result.status = GetMessageStatus.OFFSET_FOUND_NULL
                    break
                result.message_buffers.append(data)
                result.queue_offsets.append(next_offset - 1)
                next_phy_file_start = None
                if len(result.message_buffers) >= max_msg_nums:
                    break
            if result.message_buffers:
                result.status = GetMessageStatus.FOUND
            result.next_begin_offset = next_offset
        return result

    # -- services --------------------------------------------------------------------------
    def periodic_services(self) -> list[tuple[str, int, Callable[[], None]]]:
        """(name, interval ms, step) for each service thread RocketMQ would run."""
        cfg = self.config
        flush = self.flush_commit_log_service
        services = [("FlushConsumeQueueService", cfg.flushIntervalConsumeQueue, self.flush_consume_queue_service.do_flush)]
        if self.commit_log.sync_flush:
            services.insert(0, ("GroupCommitService", 10, lambda: (flush.do_commit(), flush.expire())))
        else:
            services.insert(0, ("FlushRealTimeService", cfg.flushIntervalCommitLog, flush.do_flush))
        return services

    def clean_services(self) -> list[tuple[str, int, int, Callable[[], object]]]:
        """(name, initial delay ms, period ms, step) of the expiry services, which RocketMQ
        schedules from the store's start: 60 s, then every cleanResourceInterval. A step returns
        None or a coroutine to run as a node task. None in DLedger mode: DLedger deletes its own
        files (its CleanSpaceService, which rmqlab does not model)."""
        if self.is_dledger():
            return []
        interval = self.config.cleanResourceInterval
        return [("CleanCommitLogService", 60 * 1000, interval, self.clean_commit_log_service.run),
                ("CleanConsumeQueueService", 60 * 1000, interval, self.clean_consume_queue_service.run)]

    def execute_delete_files_manually(self) -> None:
        """The admin command deleteExpiredCommitLog: the next 20 passes run whatever the hour."""
        self.clean_commit_log_service.execute_delete_files_manually()

    def is_time_to_delete(self) -> bool:
        """isTimeToDelete (UtilAll.isItTimeToDo): the hour of the store's clock is in deleteWhen.
        Java reads the hour in the JVM's time zone; a simulated machine's is UTC, so that a run
        does not depend on the host's."""
        seconds = self.clock() / 1000
        hour = (time.gmtime(seconds) if self.simulated else time.localtime(seconds)).tm_hour
        if any(int(w) == hour for w in self.config.deleteWhen.split(";")):
            log.info("it's time to reclaim disk space, %s", self.config.deleteWhen)
            return True
        return False

    def get_disk_space_used_percent(self, path: str) -> float:
        """UtilAll.getDiskPartitionSpaceUsedPercent of `path`: on the virtual disk when there is one."""
        if self.disk is not None:
            return self.disk.get_disk_partition_space_used_percent(path)
        return get_disk_partition_space_used_percent(path)

    def dispatch_behind_bytes(self) -> int:
        return self.reput_message_service.dispatch_behind_bytes()

    # -- shutdown paths --------------------------------------------------------------------
    def shutdown(self) -> None:
        """Clean shutdown: dispatch and flush everything, flush the checkpoint, remove `abort`."""
        if self.running:
            self.reput_message_service.do_reput()
            if self.commit_log.sync_flush:
                self.flush_commit_log_service.do_commit()
            self.commit_log.flush_all()
            self.flush_consume_queue_service.do_flush(thorough=True)
            if os.path.exists(self.abort_file):
                os.remove(self.abort_file)
                crash_points.point("delete", self.abort_file)
        self._release()

    def kill(self) -> None:
        """Process crash: drop everything in memory; written bytes stay in the OS page cache."""
        self._release()

    def _release(self) -> None:
        self.running = False
        self.reput_message_service.shutdown()
        self.commit_log.close()
        for cq in self.consume_queues():
            cq.close()
        self.store_checkpoint.close()
        if self._lock_fd is not None:
            os.close(self._lock_fd)  # closing the descriptor drops the flock
            self._lock_fd = None

    @staticmethod
    def crash_machine(store_path_root_dir: str, torn_bytes=None) -> dict[str, int]:
        """Power loss for a store whose process is gone (see page_cache.crash_machine)."""
        return crash_machine(store_path_root_dir, torn_bytes)


def _enum_name(value) -> str:
    return getattr(value, "name", value)
