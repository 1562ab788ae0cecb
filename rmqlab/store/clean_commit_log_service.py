"""CleanCommitLogService: commitlog expiry (DefaultMessageStore.CleanCommitLogService, RocketMQ
store/src/main/java/org/apache/rocketmq/store/DefaultMessageStore.java).

Every cleanResourceInterval (first after 60 s) a pass deletes expired commitlog files when one
of three things holds: the hour of the day is in deleteWhen (`04`), the disk is over one of its
thresholds (`is_space_to_delete`), or an operator asked (`execute_delete_files_manually`, the
admin command deleteExpiredCommitLog: the next 20 passes). A pass deletes, oldest first and never
the last file, the files last modified fileReservedTime hours (72) or more ago, and with
cleanFileForciblyEnable every file regardless of age while the disk is over
diskSpaceCleanForciblyRatio (85 %). Over diskSpaceWarningLevelRatio (90 %) the store is marked
DISK_FULL and refuses puts (RunningFlags) until a pass finds the disk below the thresholds again.

In controller mode a pass that deleted files trims the epoch file: entries that end at or below
the new min offset - 1 go (AutoSwitchHAService.truncateEpochFilePrefix), so a slave whose last
epoch lies wholly in deleted data finds no consistent point with this master.

rmqlab has no threads: `run()` returns None when the pass has nothing to delete, else a coroutine
the broker runs as a node task, which sleeps deleteCommitLogFilesInterval between two deletions
on the node's clock, as RocketMQ's thread does. Not modelled: several commitlog paths
(setFullStorePaths), replicasPerDiskPartition > 1, the rocketmq.broker.diskSpace* system
properties, and DLedger CommitLog mode (DLedger cleans its own files).
"""

from __future__ import annotations

import logging

log = logging.getLogger("rmqlab.store")

MAX_MANUAL_DELETE_FILE_TIMES = 20


class CleanCommitLogService:
    def __init__(self, store):
        self.store = store
        self.last_redelete_timestamp = 0
        self.manual_delete_file_several_times = 0
        self.clean_immediately = False

    def get_disk_space_warning_level_ratio(self) -> float:
        return min(0.90, max(0.35, self.store.config.diskSpaceWarningLevelRatio / 100.0))

    def get_disk_space_clean_forcibly_ratio(self) -> float:
        return min(0.85, max(0.30, self.store.config.diskSpaceCleanForciblyRatio / 100.0))

    def execute_delete_files_manually(self) -> None:
        self.manual_delete_file_several_times = MAX_MANUAL_DELETE_FILE_TIMES
        log.info("executeDeleteFilesManually was invoked")

    def run(self):
        """One pass: None if it deleted nothing (all of it ran now), else the coroutine that
        deletes (the decision and the threshold checks have run already)."""
        try:
            work = self.delete_expired_files()
        except Exception:
            log.exception("CleanCommitLogService service has exception.")
            return None
        if work is None:
            self.re_delete_hanged_file()
            return None

        async def finish() -> None:
            try:
                await work
                self.re_delete_hanged_file()
            except Exception:
                log.exception("CleanCommitLogService service has exception.")
        return finish()

    def delete_expired_files(self):
        """The decision of deleteExpiredFiles, now; the deletion as a coroutine (None: none)."""
        cfg = self.store.config
        is_time_up = self.store.is_time_to_delete()
        is_usage_exceeds_threshold = self.is_space_to_delete()
        is_manual_delete = self.manual_delete_file_several_times > 0
        if not (is_time_up or is_usage_exceeds_threshold or is_manual_delete):
            return None
        if is_manual_delete:
            self.manual_delete_file_several_times -= 1
        clean_at_once = cfg.cleanFileForciblyEnable and self.clean_immediately
        log.info("begin to delete before %d hours file. isTimeUp: %s isUsageExceedsThreshold: %s "
                 "manualDeleteFileSeveralTimes: %d cleanAtOnce: %s deleteFileBatchMax: %d", cfg.fileReservedTime,
                 is_time_up, is_usage_exceeds_threshold, self.manual_delete_file_several_times, clean_at_once,
                 cfg.deleteFileBatchMax)
        return self._delete(cfg.fileReservedTime * 60 * 60 * 1000, clean_at_once, is_usage_exceeds_threshold)

    async def _delete(self, file_reserved_time_ms: int, clean_at_once: bool, is_usage_exceeds_threshold: bool) -> int:
        cfg, store = self.store.config, self.store
        delete_count = await store.commit_log.delete_expired_file(
            file_reserved_time_ms, cfg.deleteCommitLogFilesInterval, cfg.destroyMapedFileIntervalForcibly,
            clean_at_once, cfg.deleteFileBatchMax, sleep=store.sleep)
        if delete_count > 0:
            # In controller mode the AutoSwitchHAService trims its epoch file. (RocketMQ also
            # checks brokerConfig.enableControllerMode; only that mode's HA service has the method.)
            truncate = getattr(store.ha_service, "truncate_epoch_file_prefix", None)
            if truncate is not None:
                truncate(store.get_min_phy_offset() - 1)
        elif is_usage_exceeds_threshold:
            log.warning("disk space will be full soon, but delete file failed.")
        return delete_count

    def re_delete_hanged_file(self) -> None:
        cfg = self.store.config
        now = self.store.clock()
        if now - self.last_redelete_timestamp > cfg.redeleteHangedFileInterval:
            self.last_redelete_timestamp = now
            self.store.commit_log.retry_delete_first_file(cfg.destroyMapedFileIntervalForcibly)

    def is_space_to_delete(self) -> bool:
        """isSpaceToDelete: the commitlog's and the consume queues' disk against the thresholds;
        sets clean_immediately and the DISK_FULL flag as RocketMQ does."""
        store, flags = self.store, self.store.running_flags
        self.clean_immediately = False
        physic_ratio = store.get_disk_space_used_percent(store.config.get_store_path_commit_log())
        if physic_ratio > self.get_disk_space_warning_level_ratio():
            if flags.get_and_make_disk_full():
                log.error("physic disk maybe full soon %.2f, so mark disk full", physic_ratio)
            self.clean_immediately = True
            return True
        if physic_ratio > self.get_disk_space_clean_forcibly_ratio():
            self.clean_immediately = True
            return True
        if not flags.get_and_make_disk_ok():
            log.info("physic disk space OK %.2f, so mark disk ok", physic_ratio)
        logics_ratio = store.get_disk_space_used_percent(store.config.get_store_path_consume_queue())
        if logics_ratio > self.get_disk_space_warning_level_ratio():
            if flags.get_and_make_disk_full():
                log.error("logics disk maybe full soon %.2f, so mark disk full", logics_ratio)
            self.clean_immediately = True
            return True
        if logics_ratio > self.get_disk_space_clean_forcibly_ratio():
            self.clean_immediately = True
            return True
        if not flags.get_and_make_disk_ok():
            log.info("logics disk space OK %.2f, so mark disk ok", logics_ratio)
        ratio = store.config.diskMaxUsedSpaceRatio / 100.0
        # replicasPerDiskPartition <= 1 (the only case rmqlab has): one commitlog per disk.
        if physic_ratio < 0 or physic_ratio > ratio:
            log.info("commitLog disk maybe full soon, so reclaim space, %.2f", physic_ratio)
            return True
        if logics_ratio < 0 or logics_ratio > ratio:
            log.info("consumeQueue disk maybe full soon, so reclaim space, %.2f", logics_ratio)
            return True
        return False
