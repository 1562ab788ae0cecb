"""Broker configuration: BrokerIdentity, BrokerConfig, MessageStoreConfig and their enums.

Field names are RocketMQ's property keys, exactly as a broker.conf spells them, and defaults are
those of apache/rocketmq at commit 8fc57f1
(common/src/main/java/org/apache/rocketmq/common/BrokerConfig.java, BrokerIdentity.java,
store/src/main/java/org/apache/rocketmq/store/config/MessageStoreConfig.java). Only the settings
rmqlab implements are fields; the loader recognises RocketMQ's other keys and warns that they
have no effect here (see :mod:`rmqlab.config.rocketmq_keys`).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from enum import Enum

from rmqlab.common.java_compat import INT32_MAX
from rmqlab.config.addresses import check_addr_list, check_dleger_peers, split_addr_list
from rmqlab.config.fields import (
    bool_field,
    enum_field,
    int_field,
    long_field,
    path_field,
    str_field,
)
from rmqlab.common.delay_level import parse_delay_level

# ConsumeQueue entry size (offset 8 + size 4 + tags code 8): ConsumeQueue.CQ_STORE_UNIT_SIZE.
CQ_STORE_UNIT_SIZE = 20

MASTER_ID = 0  # MixAll.MASTER_ID


class BrokerRole(Enum):
    """store/.../config/BrokerRole.java."""

    ASYNC_MASTER = "ASYNC_MASTER"
    SYNC_MASTER = "SYNC_MASTER"
    SLAVE = "SLAVE"


class FlushDiskType(Enum):
    """store/.../config/FlushDiskType.java."""

    SYNC_FLUSH = "SYNC_FLUSH"
    ASYNC_FLUSH = "ASYNC_FLUSH"


def check_delay_levels(text: str) -> str | None:
    try:
        parse_delay_level(text)
    except ValueError as e:
        return f"space-separated delays such as '1s 5s 10s 30s 1m 2h' ({e})"
    return None


def _check_delete_when(text: str) -> str | None:
    # UtilAll.isItTimeToDo: hours of the day separated by ';', each compared with the current hour.
    for part in text.split(";"):
        if not (part.isascii() and part.isdigit() and 0 <= int(part) <= 23):
            return "hours of the day 0..23 separated by ';', e.g. 04 or 04;16"
    return None


@dataclass
class BrokerIdentity:
    """common/.../BrokerIdentity.java: which broker group and which member this broker is."""

    # RocketMQ defaults brokerName to the local host name (falling back to "DEFAULT_BROKER");
    # rmqlab uses the fallback so a configuration never depends on the machine it runs on.
    brokerName: str = str_field("DEFAULT_BROKER", nonempty=True)
    brokerClusterName: str = str_field("DefaultCluster", nonempty=True)
    # 0 is the master; slaves use > 0; in controller mode the controller assigns it (-1 = unset).
    brokerId: int = long_field(MASTER_ID)

    def get_canonical_name(self) -> str:
        """BrokerIdentity.getCanonicalName: ``<cluster>_<name>_<id>``."""
        return f"{self.brokerClusterName}_{self.brokerName}_{self.brokerId}"


@dataclass
class BrokerConfig(BrokerIdentity):
    """common/.../BrokerConfig.java: naming, registration, RIP-32 and
    controller-mode (RIP-44) settings of a broker."""

    # RocketMQ falls back to -Drocketmq.namesrv.addr or $NAMESRV_ADDR; rmqlab takes the address
    # from the file, -n or an override only, so a lab never depends on the shell it started in.
    namesrvAddr: str | None = str_field(None, check=check_addr_list)
    # RocketMQ picks the machine's first non-loopback address (NetworkUtil.getLocalAddress);
    # rmqlab's labs run every process on loopback, so the advertised addresses default to it.
    brokerIP1: str = str_field("127.0.0.1", nonempty=True)  # address clients and namesrv use
    brokerIP2: str = str_field("127.0.0.1", nonempty=True)  # address slaves replicate from (HA)
    # PermName: READ 4 | WRITE 2 | INHERIT 1 (valid perms 0..7), default READ|WRITE.
    brokerPermission: int = int_field(6, min=0, max=7)
    defaultTopicQueueNums: int = int_field(8, min=1)
    autoCreateTopicEnable: bool = bool_field(True)
    clusterTopicEnable: bool = bool_field(True)
    brokerTopicEnable: bool = bool_field(True)
    autoCreateSubscriptionGroup: bool = bool_field(True)
    flushConsumerOffsetInterval: int = int_field(5000, min=1)
    longPollingEnable: bool = bool_field(True)
    shortPollingTimeMills: int = long_field(1000, min=1)
    notifyConsumerIdsChangedEnable: bool = bool_field(True)
    registerBrokerTimeoutMills: int = int_field(24000, min=1)
    sendHeartbeatTimeoutMillis: int = int_field(1000, min=1)
    slaveReadEnable: bool = bool_field(False)
    forceRegister: bool = bool_field(True)
    # The effective period is clamped to [10000, 60000] ms (get_register_name_server_period).
    registerNameServerPeriod: int = int_field(30000, min=1)
    # RIP-32 (slave acting master) "new configuration".
    brokerHeartbeatInterval: int = int_field(1000, min=1)
    brokerNotActiveTimeoutMillis: int = long_field(10000, min=1)
    syncBrokerMemberGroupPeriod: int = int_field(1000, min=1)
    # How often the broker's own route cache (TopicRouteInfoManager, for the EscapeBridge) refreshes.
    loadBalancePollNameServerInterval: int = int_field(30_000, min=1)
    transactionTimeOut: int = long_field(6000, min=0)
    transactionCheckMax: int = int_field(15, min=0)
    transactionCheckInterval: int = long_field(30000, min=1)
    # RIP-50 (5.1.0+): op records are batched per half queue (TransactionalOpBatchService).
    transactionOpMsgMaxSize: int = int_field(4096, min=1)
    transactionOpBatchInterval: int = int_field(3000, min=1)
    rejectTransactionMessage: bool = bool_field(False)
    forwardTimeout: int = long_field(3000, min=1)
    enableSlaveActingMaster: bool = bool_field(False)
    enableRemoteEscape: bool = bool_field(False)
    skipPreOnline: bool = bool_field(False)
    consumerOffsetUpdateVersionStep: int = long_field(500, min=1)
    delayOffsetUpdateVersionStep: int = long_field(200, min=1)
    lockInStrictMode: bool = bool_field(False)
    compatibleWithOldNameSrv: bool = bool_field(True)
    # Controller mode, RIP-44 (RocketMQ 5 controller-mode deployment docs, "Broker 部署").
    enableControllerMode: bool = bool_field(False)
    controllerAddr: str = str_field("", check=check_addr_list)
    fetchControllerAddrByDnsLookup: bool = bool_field(False)
    syncBrokerMetadataPeriod: int = long_field(5000, min=1)
    checkSyncStateSetPeriod: int = long_field(5000, min=1)
    syncControllerMetadataPeriod: int = long_field(10000, min=1)
    controllerHeartBeatTimeoutMills: int = long_field(10000, min=1)
    brokerElectionPriority: int = int_field(INT32_MAX)  # smaller is preferred
    # POP consumption (RocketMQ 5; rmqlab.broker.processor.pop_message_processor and rmqlab.broker.pop).
    reviveQueueNum: int = int_field(8, min=1)
    reviveInterval: int = long_field(1000, min=1)
    reviveMaxSlow: int = long_field(3, min=1)
    reviveScanTime: int = long_field(10000, min=1)
    popPollingSize: int = int_field(1024, min=0)
    maxPopPollingSize: int = long_field(100000, min=0)
    enablePopLog: bool = bool_field(False)
    popFromRetryProbability: int = int_field(20, min=0, max=100)
    initPopOffsetByCheckMsgInMem: bool = bool_field(True)
    popLongPollingForceNotifyInterval: int = long_field(800)
    enableNotifyAfterPopOrderLockRelease: bool = bool_field(True)
    popResponseReturnActualRetryTopic: bool = bool_field(False)

    def get_namesrv_addr_list(self) -> list[str]:
        """namesrvAddr split on ';' (empty when unset)."""
        return split_addr_list(self.namesrvAddr) if self.namesrvAddr else []

    def get_controller_addr_list(self) -> list[str]:
        """controllerAddr split on ';' (ReplicasManager.updateControllerAddr without DNS lookup)."""
        return split_addr_list(self.controllerAddr) if self.controllerAddr else []

    def get_register_name_server_period(self) -> int:
        """The period BrokerController actually schedules: max(10000, min(configured, 60000))."""
        return max(10000, min(self.registerNameServerPeriod, 60000))


@dataclass
class MessageStoreConfig:
    """store/.../config/MessageStoreConfig.java: where and how the CommitLog,
    ConsumeQueues and HA replication work.

    Paths: storePathRootDir defaults to ``~/store``; storePathCommitLog, storePathEpochFile and
    storePathBrokerIdentity are None (RocketMQ's null) until set, meaning "derived from the root";
    read them through the ``get_*`` methods, which apply that rule like RocketMQ's getters."""

    storePathRootDir: str = path_field("~/store")
    storePathCommitLog: str | None = path_field(None)
    storePathEpochFile: str | None = path_field(None)
    storePathBrokerIdentity: str | None = path_field(None)
    mappedFileSizeCommitLog: int = int_field(1024 * 1024 * 1024, min=1)
    # 300000 entries of CQ_STORE_UNIT_SIZE; read it through get_mapped_file_size_consume_queue.
    mappedFileSizeConsumeQueue: int = int_field(300000 * CQ_STORE_UNIT_SIZE, min=1)
    flushIntervalCommitLog: int = int_field(500, min=1)
    flushCommitLogTimed: bool = bool_field(True)
    flushIntervalConsumeQueue: int = int_field(1000, min=1)
    flushCommitLogLeastPages: int = int_field(4, min=0)
    flushConsumeQueueLeastPages: int = int_field(2, min=0)
    flushCommitLogThoroughInterval: int = int_field(10 * 1000, min=0)
    flushConsumeQueueThoroughInterval: int = int_field(60 * 1000, min=0)
    cleanResourceInterval: int = int_field(10000, min=1)
    deleteWhen: str = str_field("04", check=_check_delete_when)
    diskMaxUsedSpaceRatio: int = int_field(75, min=0, max=100)
    fileReservedTime: int = int_field(72, min=0)  # hours
    # Store retention (rmqlab.store.clean_commit_log_service, clean_consume_queue_service).
    # RocketMQ clamps the two disk ratios (warning to [35, 90] %, forced cleaning to [30, 85] %)
    # where it reads them, CleanCommitLogService.getDiskSpace*Ratio; so does rmqlab.
    diskSpaceWarningLevelRatio: int = int_field(90)
    diskSpaceCleanForciblyRatio: int = int_field(85)
    cleanFileForciblyEnable: bool = bool_field(True)
    deleteCommitLogFilesInterval: int = int_field(100, min=0)
    deleteConsumeQueueFilesInterval: int = int_field(100, min=0)
    destroyMapedFileIntervalForcibly: int = int_field(1000 * 120, min=0)
    redeleteHangedFileInterval: int = int_field(1000 * 120, min=0)
    deleteFileBatchMax: int = int_field(10, min=1)
    # Not a RocketMQ key: the size of an rmqlab-only virtual disk holding this store. > 0: disk
    # usage is the store's files (their full, pre-allocated size, as a real disk counts them) over
    # this capacity, so a test fills the disk deterministically. 0: the file system's usage
    # (statvfs, as UtilAll.getDiskPartitionSpaceUsedPercent) on real processes, and an unlimited
    # virtual disk on the simulator, whose runs must not depend on the host's free space.
    rmqlabDiskCapacityBytes: int = long_field(0, min=0)
    maxMessageSize: int = int_field(1024 * 1024 * 4, min=1)
    checkCRCOnRecover: bool = bool_field(True)
    maxTransferBytesOnMessageInMemory: int = int_field(1024 * 256, min=1)
    maxTransferCountOnMessageInMemory: int = int_field(32, min=1)
    maxTransferBytesOnMessageInDisk: int = int_field(1024 * 64, min=1)
    maxTransferCountOnMessageInDisk: int = int_field(8, min=1)
    accessMessageInMemoryMaxRatio: int = int_field(40, min=0, max=100)
    # RocketMQ's setter turns a negative port into 0, and mqbroker replaces <= 0 by listenPort + 1
    # (BrokerStartup); the loader applies both, get_ha_listen_port gives the rule.
    haListenPort: int = int_field(10912, max=65535)
    haSendHeartbeatInterval: int = int_field(1000 * 5, min=1)
    haHousekeepingInterval: int = int_field(1000 * 20, min=1)
    haTransferBatchSize: int = int_field(1024 * 32, min=1)
    haMasterAddress: str | None = str_field(None)
    haMaxGapNotInSync: int = int_field(1024 * 1024 * 256, min=0)
    # Not a RocketMQ key (RMQLAB_KEYS in rmqlab.config.rocketmq_keys): an rmqlab-only guard, off by
    # default so classic HA behaves as RocketMQ's. RocketMQ's master takes any 8 bytes a slave sends
    # as its ack offset (DefaultHAConnection.ReadSocketService.processReadEvent), even one beyond its
    # own commitlog: a slave left ahead of a master that lost its unflushed tail then acknowledges
    # SYNC_MASTER sends it does not hold. True closes such a connection instead (a report below 0 or
    # beyond the master's max offset), so the labs can show what such a check changes: it holds only
    # until the master's log is longer than the slave's (rmqlab.ha.default_ha_protocol says more).
    # Controller mode's AutoSwitchHAConnection takes any ack as RocketMQ's does too; there the handshake
    # truncates a real slave to the master's history first, so only a forged ack is refused.
    rmqlabRejectImpossibleHaReport: bool = bool_field(False)
    # Not a RocketMQ key either: an rmqlab-only fix, off by default so controller mode behaves as
    # RocketMQ's. RocketMQ's first master of a group starts epoch 1 at its maxPhyOffset
    # (AutoSwitchHAService.changeToMaster), so a log kept from before an in-place upgrade to
    # controller mode lies below every epoch, and a slave that asks for an offset inside it (a
    # shorter log, or an empty disk asking for the first file) is never served
    # (AutoSwitchHAConnection: "Failed to find an epochEntry to match nextTransferFromWhere").
    # True starts that first epoch at the commitlog's min offset instead, and such a slave catches up.
    rmqlabFirstEpochFromMinOffset: bool = bool_field(False)
    # Not a RocketMQ key: an rmqlab-only guard for DLedger mode, off by default. RocketMQ's
    # DLedgerCommitLog.asyncPutMessage takes a put whenever DLedger leads, also before
    # DLedgerRoleChangeHandler has made the broker master and rebuilt its queue offsets
    # (recoverTopicQueueTable): a leader re-elected in its own term after a power loss then hands
    # out queue offsets already used, and acknowledged messages are lost. True refuses a put
    # (OS_PAGE_CACHE_BUSY, as a put DLedger refuses at once) until the handler has made this broker
    # master in the current term.
    rmqlabDLedgerPutOnlyAsMaster: bool = bool_field(False)
    brokerRole: BrokerRole = enum_field(BrokerRole.ASYNC_MASTER)
    flushDiskType: FlushDiskType = enum_field(FlushDiskType.ASYNC_FLUSH)
    syncFlushTimeout: int = int_field(1000 * 5, min=1)
    putMessageTimeout: int = int_field(1000 * 8, min=1)
    slaveTimeout: int = int_field(3000, min=1)
    messageDelayLevel: str = str_field("1s 5s 10s 30s 1m 2m 3m 4m 5m 6m 7m 8m 9m 10m 20m 30m 1h 2h",
                                       check=check_delay_levels)
    flushDelayOffsetInterval: int = long_field(1000 * 10, min=1)
    # DLedger CommitLog mode (RocketMQ 4.5, rmqlab.store.dledger): the commitlog is a DLedger Raft
    # log replicated to dLegerPeers, and the broker's role follows its Raft role. RocketMQ maps
    # these to a DLedgerConfig in DLedgerCommitLog's constructor (dledger_config_of). The loader
    # checks them together (a selfId is n<digits> and one of the peers) and refuses the mode with
    # enableControllerMode, as BrokerStartup does.
    enableDLegerCommitLog: bool = bool_field(False)
    dLegerGroup: str | None = str_field(None)
    dLegerPeers: str | None = str_field(None, check=check_dleger_peers)
    dLegerSelfId: str | None = str_field(None)
    preferredLeaderId: str | None = str_field(None)  # ';'-separated, DLedger's preferredLeaderIds
    enableBatchPush: bool = bool_field(False)
    storePathDLedgerCommitLog: str | None = path_field(None)  # None: <root>/dledger-<selfId>/data
    totalReplicas: int = int_field(1, min=1)
    inSyncReplicas: int = int_field(1, min=1)
    minInSyncReplicas: int = int_field(1, min=1)
    allAckInSyncStateSet: bool = bool_field(False)
    enableAutoInSyncReplicas: bool = bool_field(False)
    haFlowControlEnable: bool = bool_field(False)
    maxHaTransferByteInSecond: int = long_field(100 * 1024 * 1024, min=1)
    haMaxTimeSlaveNotCatchup: int = long_field(1000 * 15, min=1)
    syncMasterFlushOffsetWhenStartup: bool = bool_field(False)
    syncFromLastFile: bool = bool_field(False)
    asyncLearner: bool = bool_field(False)
    readUnCommitted: bool = bool_field(False)
    # RIP-43 timer messages (rmqlab.store.timer): RocketMQ's names and defaults. timerPrecisionMs
    # is read through get_timer_precision_ms (RocketMQ's setter snaps it to 100/200/500/1000).
    timerWheelEnable: bool = bool_field(True)
    timerMaxDelaySec: int = int_field(3600 * 24 * 3)
    timerPrecisionMs: int = int_field(1000)
    timerFlushIntervalMs: int = int_field(1000, min=1)
    timerEnableRetryUntilSuccess: bool = bool_field(False)

    # -- derived paths (RocketMQ's getters and StorePathConfigHelper / BrokerPathConfigHelper) --

    def _under_root(self, *parts: str) -> str:
        return os.path.join(self.storePathRootDir, *parts)

    def get_store_path_commit_log(self) -> str:
        return self.storePathCommitLog or self._under_root("commitlog")

    def get_store_path_consume_queue(self) -> str:
        return self._under_root("consumequeue")

    def get_store_path_index(self) -> str:
        return self._under_root("index")

    def get_store_checkpoint(self) -> str:
        return self._under_root("checkpoint")

    def get_abort_file(self) -> str:
        return self._under_root("abort")

    def get_lock_file(self) -> str:
        return self._under_root("lock")

    def get_store_path_epoch_file(self) -> str:
        return self.storePathEpochFile or self._under_root("epochFileCheckpoint")

    def get_store_path_broker_identity(self) -> str:
        return self.storePathBrokerIdentity or self._under_root("brokerIdentity")

    def get_config_dir(self) -> str:
        """<root>/config, home of topics.json, consumerOffset.json, ... (BrokerPathConfigHelper)."""
        return self._under_root("config")

    def get_topic_config_path(self) -> str:
        return os.path.join(self.get_config_dir(), "topics.json")

    def get_consumer_offset_path(self) -> str:
        return os.path.join(self.get_config_dir(), "consumerOffset.json")

    def get_subscription_group_path(self) -> str:
        return os.path.join(self.get_config_dir(), "subscriptionGroup.json")

    def get_delay_offset_store_path(self) -> str:
        return os.path.join(self.get_config_dir(), "delayOffset.json")

    def get_timer_check_path(self) -> str:
        """BrokerPathConfigHelper.getTimerCheckPath: <root>/config/timercheck."""
        return os.path.join(self.get_config_dir(), "timercheck")

    # -- derived values --

    def get_mapped_file_size_consume_queue(self) -> int:
        """Rounded up to whole ConsumeQueue entries, like RocketMQ's getter."""
        units = -(-self.mappedFileSizeConsumeQueue // CQ_STORE_UNIT_SIZE)
        return units * CQ_STORE_UNIT_SIZE

    def get_ha_listen_port(self, listen_port: int) -> int:
        """The HA port the broker listens on: haListenPort, or listenPort + 1 when it is <= 0."""
        return self.haListenPort if self.haListenPort > 0 else listen_port + 1

    def get_timer_precision_ms(self) -> int:
        """timerPrecisionMs as RocketMQ's setter stores it: the largest of 100, 200, 500, 1000 not
        above the value (100 for anything smaller)."""
        candidates = (100, 200, 500, 1000)
        for lower, upper in zip(candidates, candidates[1:]):
            if self.timerPrecisionMs < upper:
                return lower
        return candidates[-1]

    def get_delay_level_table(self) -> dict[int, int]:
        """messageDelayLevel as {level: delay ms}."""
        return parse_delay_level(self.messageDelayLevel)

    def effective_values(self) -> dict[str, object]:
        """Values that differ from the raw fields once RocketMQ's derivation rules are applied
        (used by the -p printout so it shows what the broker will really use)."""
        return {
            "storePathCommitLog": self.get_store_path_commit_log(),
            "storePathEpochFile": self.get_store_path_epoch_file(),
            "storePathBrokerIdentity": self.get_store_path_broker_identity(),
            "mappedFileSizeConsumeQueue": self.get_mapped_file_size_consume_queue(),
            "timerPrecisionMs": self.get_timer_precision_ms(),
        }
