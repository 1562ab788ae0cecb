"""Every property key RocketMQ's configuration classes accept, at apache/rocketmq commit 8fc57f1.

MixAll.properties2Object sets a field through its setter and derives the key from the setter's
name (``setBrokerIP1`` -> ``brokerIP1``, ``setProcessReadEvent`` -> ``processReadEvent``), for
setters taking int, long, double, float, boolean or String (the enum-valued brokerRole and
flushDiskType have String overloads). The lists below are those keys, read from the classes'
setters (BrokerConfig's include those it inherits from BrokerIdentity); for ProxyConfig, which
fastjson fills from JSON, every setter counts. AuthConfig (auth module) and JraftConfig are read
from the same files by the broker/proxy and the controller respectively.

rmqlab models a subset of them as dataclass fields. The loader uses these lists to tell apart a
genuine RocketMQ setting that rmqlab does not implement (a warning saying so) from a typo (a
warning with the closest key), and tests/test_config.py checks that every rmqlab field name is a
real RocketMQ key of its class, or one of rmqlab's own labelled options (RMQLAB_KEYS, at the end).
"""

from __future__ import annotations

ROCKETMQ_KEYS: dict[str, frozenset[str]] = {
    "BrokerConfig": frozenset("""
    accountStatsEnable accountStatsPrintZeroValues ackMessageThreadPoolNums
    ackThreadPoolQueueCapacity aclEnable adminBrokerThreadPoolNums
    adminBrokerThreadPoolQueueCapacity allowRecallWhenBrokerNotWriteable appendAckAsync
    appendCkAsync asyncSendEnable autoCreateSubscriptionGroup autoCreateTopicEnable
    autoDeleteUnusedStats broadcastOffsetExpireMaxSecond broadcastOffsetExpireSecond
    brokerClusterName brokerConfigPath brokerElectionPriority brokerFastFailureEnable
    brokerHeartbeatInterval brokerId brokerIP1 brokerIP2 brokerName brokerNotActiveTimeoutMillis
    brokerPermission brokerTopicEnable cgColdReadThreshold channelExpiredTimeout
    checkSyncStateSetPeriod cleanOfflineBrokerInterval clearRetryTopicWhenDeleteTopic
    clientManagerThreadPoolQueueCapacity clientManageThreadPoolNums clusterTopicEnable
    coldCtrStrategyEnable commercialBaseCount commercialSizePerMsg compatibleWithOldNameSrv
    compressedRegister configBlackList configManagerVersion consumerFallbehindThreshold
    consumerManagerThreadPoolQueueCapacity consumerManageThreadPoolNums
    consumerOffsetUpdateVersionStep controllerAddr controllerHeartBeatTimeoutMills
    defaultMessageRequestMode defaultPopShareQueueNum defaultTopicQueueNums
    delayOffsetUpdateVersionStep disableConsumeIfConsumerReadSlowly enableBroadcastOffsetStore
    enableCalcFilterBitMap enableConnectionMetrics enableControllerMode enableCreateSysGroup
    enableDetailStat enableFastChannelEventProcess enableLagAndDlqMetrics enableLmqStats
    enableMessageStoreMetrics enableMixedMessageType enableNetWorkFlowControl
    enableNotifyAfterPopOrderLockRelease enableNotifyBeforePopCalculateLag enablePopBatchAck
    enablePopBufferMerge enablePopLog enablePopMessageThreshold enablePopMetrics
    enablePropertyFilter enableRegisterProducer enableRemoteEscape enableRemotingMetrics
    enableRequestMetrics enableRetryTopicV2 enableSingleTopicRegister enableSkipLongAwaitingAck
    enableSlaveActingMaster enableSplitMetadata enableSplitRegistration enableStatsMetrics
    enableTransactionMetrics endTransactionPoolQueueCapacity endTransactionThreadPoolNums
    estimateAccumulation expectConsumerNumUseFilter fetchControllerAddrByDnsLookup
    fetchNamesrvAddrByAddressServer fetchNameSrvAddrByDnsLookup fetchNamesrvAddrInterval
    filterDataCleanTimeSpan filterSupportRetry flushConsumerOffsetHistoryInterval
    flushConsumerOffsetInterval forceRegister forwardTimeout globalColdReadThreshold
    heartbeatThreadPoolNums heartbeatThreadPoolQueueCapacity highSpeedMode inBrokerContainer
    initPopOffsetByCheckMsgInMem isolateLogEnable listenPort litePullMessageEnable
    litePullMessageThreadPoolNums litePullThreadPoolQueueCapacity loadBalancePollNameServerInterval
    loadBalanceProcessorThreadPoolNums loadBalanceThreadPoolQueueCapacity lockInStrictMode
    longPollingEnable maxErrorRateOfBloomFilter maxPopPollingSize maxStatsIdleTimeInMinutes
    messageStorePlugIn metricGrpcExporterIntervalInMills metricGrpcExporterTimeOutInMills
    metricLoggingExporterIntervalInMills metricsExporterType metricsGrpcExporterHeader
    metricsGrpcExporterTarget metricsInDelta metricsLabel metricsOtelCardinalityLimit
    metricsPromExporterHost metricsPromExporterPort msgTraceTopicName namesrvAddr
    notifyConsumerIdsChangedEnable popCkMaxBufferSize popCkOffsetMaxQueueSize popCkStayBufferTime
    popCkStayBufferTimeOut popConsumerFSServiceInit popConsumerKVServiceEnable
    popConsumerKVServiceInit popConsumerKVServiceLog popFromRetryProbability
    popInflightMessageThreshold popLongPollingForceNotifyInterval popPollingMapExpireTimeSeconds
    popPollingMapSize popPollingSize popResponseReturnActualRetryTopic popReviveMaxAttemptTimes
    popReviveMaxReturnSizePerRead printChannelGroups printChannelGroupsMinNum
    processReplyMessageThreadPoolNums pullMessageThreadPoolNums pullThreadPoolQueueCapacity
    putMessageFutureThreadPoolNums putThreadPoolQueueCapacity queryMessageThreadPoolNums
    queryThreadPoolQueueCapacity realTimeNotifyConsumerChange recallMessageEnable
    recoverConcurrently recoverThreadPoolNums regionId registerBrokerTimeoutMills
    registerNameServerPeriod rejectPullConsumerEnable rejectTransactionMessage
    replyThreadPoolQueueCapacity retrieveMessageFromPopRetryTopicV1 reviveAckWaitMs reviveInterval
    reviveMaxSlow reviveQueueNum reviveScanTime rocketmqHome sendHeartbeatTimeoutMillis
    sendMessageThreadPoolNums sendThreadPoolQueueCapacity serverLoadBalancerEnable
    shortPollingTimeMills skipPreOnline skipWhenCKRePutReachMaxTimes slaveReadEnable
    splitMetadataSize splitRegistrationSize startAcceptSendRequestTimeStamp storeReplyMessageEnable
    subscriptionExpiredTimeout syncBrokerMemberGroupPeriod syncBrokerMetadataPeriod
    syncControllerMetadataPeriod traceOn traceTopicEnable transactionCheckInterval
    transactionCheckMax transactionMetricFlushInterval transactionOpBatchInterval
    transactionOpMsgMaxSize transactionTimeOut transferMsgByHeap updateNameServerAddrPeriod
    usePIDColdCtrStrategy useServerSideResetOffset useStaticSubscription
    validateSystemTopicWhenUpdateTopic waitTimeMillsInAckQueue waitTimeMillsInAdminBrokerQueue
    waitTimeMillsInHeartbeatQueue waitTimeMillsInLitePullQueue waitTimeMillsInPullQueue
    waitTimeMillsInSendQueue waitTimeMillsInTransactionQueue
    """.split()),
    "MessageStoreConfig": frozenset("""
    accessMessageInMemoryHotRatio accessMessageInMemoryMaxRatio allAckInSyncStateSet asyncLearner
    autoMessageVersionOnTopicLen batchDispatchRequestThreadPoolNums bitMapLengthConsumeQueueExt
    bottomMostCompressionTypeForConsumeQueueStore brokerRole checkCRCOnRecover
    cleanFileForciblyEnable cleanResourceInterval cleanRocksDBDirtyCQIntervalMin
    cleanSwapedMapInterval coldDataFlowControlEnable coldDataScanEnable combineAssignOffsetCQType
    combineCQEnableCheckSelf combineCQLoadingCQTypes combineCQMaxExtraSearchCommitLogFiles
    combineCQPreferCQType commitCommitLogLeastPages commitCommitLogThoroughInterval
    commitIntervalCommitLog commitLogForceSwapMapInterval commitLogSwapMapInterval
    commitLogSwapMapReserveFileNum compactionCqMappedFileSize compactionMappedFileSize
    compactionScheduleInternal compactionThreadNum correctLogicMinOffsetForceInterval
    correctLogicMinOffsetSleepInterval dataReadAheadEnable debugLockEnable defaultQueryMaxNum
    deleteCommitLogFilesInterval deleteConsumeQueueFilesInterval deleteFileBatchMax deleteWhen
    destroyMapedFileIntervalForcibly disappearTimeAfterStart diskFallRecorded diskMaxUsedSpaceRatio
    diskSpaceCleanForciblyRatio diskSpaceWarningLevelRatio dispatchCqCacheNum dispatchCqThreads
    dispatchFromSenderThread dLegerGroup dLegerPeers dLegerSelfId duplicationEnable
    enableAcceleratedRecovery enableAsyncReput enableAutoInSyncReplicas enableBatchPush
    enableBuildConsumeQueueConcurrently enableCleanExpiredOffset enableCompaction
    enableConsumeQueueExt enabledAppendPropCRC enableDLegerCommitLog enableLmq
    enableLogConsumeQueueRepeatedlyBuildWhenRecover enableMultiDispatch enableRocksDBLog
    enableRunningFlagsInFlush enableScheduleAsyncDeliver enableScheduleMessageStats
    fastFailIfNoBufferInStorePool fileReservedTime flushCommitLogLeastPages
    flushCommitLogThoroughInterval flushCommitLogTimed flushConsumeQueueLeastPages
    flushConsumeQueueThoroughInterval flushDelayOffsetInterval flushDiskType flushIntervalCommitLog
    flushIntervalConsumeQueue flushLeastPagesWhenWarmMapedFile forceVerifyPropCRC
    haFlowControlEnable haHousekeepingInterval haListenPort haMasterAddress haMaxGapNotInSync
    haMaxTimeSlaveNotCatchup haSendHeartbeatInterval haTransferBatchSize inSyncReplicas
    logicalDiskSpaceCleanForciblyThreshold logicQueueForceSwapMapInterval logicQueueSwapMapInterval
    logicQueueSwapMapReserveFileNum mappedFileSizeCommitLog mappedFileSizeConsumeQueue
    mappedFileSizeConsumeQueueExt mappedFileSizeTimerLog mappedFileSwapEnable
    mapperFileSizeBatchConsumeQueue maxAsyncPutMessageRequests maxBatchDeleteFilesNum
    maxChecksumRange maxConsumeQueueScan maxFilterMessageSize maxHashSlotNum
    maxHaTransferByteInSecond maxIndexNum maxLmqConsumeQueueNum maxMessageSize maxMsgsNumBatch
    maxOffsetMapSize maxRecoveryCommitlogFiles maxSlaveResendLength maxTopicLength
    maxTransferBytesOnMessageInDisk maxTransferBytesOnMessageInMemory
    maxTransferCountOnMessageInDisk maxTransferCountOnMessageInMemory memTableFlushIntervalMs
    messageDelayLevel messageIndexEnable messageIndexSafe minInSyncReplicas offsetCheckInSlave
    osPageCacheBusyTimeOutMills preferredLeaderId pullBatchMaxMessageCount
    putConsumeQueueDataByFileChannel putMessageTimeout putMsgIndexHightWater
    readOnlyCommitLogStorePaths readUnCommitted realTimePersistRocksDBConfig
    recheckReputOffsetFromCq redeleteHangedFileInterval replicasPerDiskPartition
    rocksdbCompressionType rocksdbCQDoubleWriteEnable rocksdbFlushWalFrequency
    rocksdbWalFileRollingThreshold sampleCountThreshold sampleSteps
    scheduleAsyncDeliverMaxPendingLimit scheduleAsyncDeliverMaxResendNum2Blocked
    searchBcqByCacheEnable slaveTimeout spinLockCollisionRetreatOptimalDegree
    statRocksDBCQIntervalSec storePathBrokerIdentity storePathCommitLog storePathDLedgerCommitLog
    storePathEpochFile storePathRootDir storeType syncFlushTimeout syncFromLastFile
    syncMasterFlushOffsetWhenStartup timerColdDataCheckIntervalMs timerCongestNumEachSlot
    timerEnableCheckMetrics timerEnableRetryUntilSuccess timerFlushIntervalMs
    timerGetMessageThreadNum timerInterceptDelayLevel timerMaxDelaySec timerMetricSmallThreshold
    timerPrecisionMs timerProgressLogIntervalMs timerPutMessageThreadNum timerRollWindowSlot
    timerSkipUnknownError timerStopEnqueue timerWheelEnable topicQueueLockNum totalReplicas
    transientStorePoolEnable transientStorePoolSize travelCqFileNumWhenGetMessage useABSLock
    useReentrantLockWhenPutMessage wakeCommitWhenPutMessage wakeFlushWhenPutMessage
    warmMapedFileEnable writeWithoutMmap
    """.split()),
    "NettyServerConfig": frozenset("""
    bindAddress enableShutdownGracefully listenPort serverAsyncSemaphoreValue
    serverCallbackExecutorThreads serverChannelMaxIdleTimeSeconds serverNettyWorkerGroupEnable
    serverOnewaySemaphoreValue serverPooledByteBufAllocatorEnable serverSelectorThreads
    serverSocketBacklog serverSocketRcvBufSize serverSocketSndBufSize serverWorkerThreads
    shutdownWaitTimeSeconds useEpollNativeSelector writeBufferHighWaterMark writeBufferLowWaterMark
    """.split()),
    "NettyClientConfig": frozenset("""
    channelNotActiveInterval clientAsyncSemaphoreValue clientCallbackExecutorThreads
    clientChannelMaxIdleTimeSeconds clientCloseSocketIfTimeout clientOnewaySemaphoreValue
    clientPooledByteBufAllocatorEnable clientSocketRcvBufSize clientSocketSndBufSize
    clientWorkerThreads connectTimeoutMillis disableCallbackExecutor disableNettyWorkerGroup
    enableReconnectForGoAway maxReconnectIntervalTimeSeconds scanAvailableNameSrv socksProxyConfig
    useTLS writeBufferHighWaterMark writeBufferLowWaterMark
    """.split()),
    "AuthConfig": frozenset("""
    aclCacheExpiredSecond aclCacheMaxNum aclCacheRefreshSecond authConfigPath authenticationEnabled
    authenticationMetadataProvider authenticationProvider authenticationStrategy
    authenticationWhitelist authorizationEnabled authorizationMetadataProvider authorizationProvider
    authorizationStrategy authorizationWhitelist clusterName configName initAuthenticationUser
    innerClientAuthenticationCredentials migrateAuthFromV1Enabled
    statefulAuthenticationCacheExpiredSecond statefulAuthenticationCacheMaxNum
    statefulAuthorizationCacheExpiredSecond statefulAuthorizationCacheMaxNum userCacheExpiredSecond
    userCacheMaxNum userCacheRefreshSecond
    """.split()),
    "NamesrvConfig": frozenset("""
    clientRequestThreadPoolNums clientRequestThreadPoolQueueCapacity clusterTest configBlackList
    configStorePath defaultThreadPoolNums defaultThreadPoolQueueCapacity
    deleteTopicWithBrokerRegistration enableAllTopicList enableControllerInNamesrv enableTopicList
    kvConfigPath needWaitForService notifyMinBrokerIdChanged orderMessageEnable productEnvName
    returnOrderTopicConfigToBroker rocketmqHome scanNotActiveBrokerInterval supportActingMaster
    unRegisterBrokerQueueCapacity waitSecondsForService
    """.split()),
    "ControllerConfig": frozenset("""
    configBlackList configStorePath controllerDLegerGroup controllerDLegerPeers
    controllerDLegerSelfId controllerRequestThreadPoolQueueCapacity controllerStorePath
    controllerThreadPoolNums controllerType electMasterMaxRetryCount enableElectUncleanMaster
    mappedFileSize metricGrpcExporterIntervalInMills metricGrpcExporterTimeOutInMills
    metricLoggingExporterIntervalInMills metricsExporterType metricsGrpcExporterHeader
    metricsGrpcExporterTarget metricsInDelta metricsLabel metricsPromExporterHost
    metricsPromExporterPort notifyBrokerRoleChanged processReadEvent rocketmqHome
    scanInactiveMasterInterval scanNotActiveBrokerInterval
    """.split()),
    "JraftConfig": frozenset("""
    jRaftControllerRPCAddr jRaftElectionTimeoutMs jRaftGroupId jRaftInitConf jRaftScanWaitTimeoutMs
    jRaftServerId jRaftSnapshotIntervalSecs
    """.split()),
    "ProxyConfig": frozenset("""
    aclCacheExpiredSeconds aclCacheMaxNum aclCacheRefreshSeconds brokerConfigPath
    channelExpiredInSeconds channelExpiredTimeout consumerProcessorThreadPoolNums
    consumerProcessorThreadPoolQueueCapacity contextExpiredInSeconds defaultInvisibleTimeMills
    detectInterval detectTimeout enableAclRpcHookForClusterMode enableBatchAck enableGrpcEpoll
    enableMessageBodyEmptyCheck enablePrintJstack enableProxyAutoRenew enableRemotingLocalProxyGrpc
    enableTopicMessageTypeCheck grpcBossLoopNum grpcClientConsumerLongPollingBatchSize
    grpcClientConsumerMaxLongPollingTimeoutMillis grpcClientConsumerMinLongPollingTimeoutMillis
    grpcClientIdleTimeMills grpcClientManagerThreadPoolNums grpcClientManagerThreadQueueCapacity
    grpcClientProducerBackoffInitialMillis grpcClientProducerBackoffMaxMillis
    grpcClientProducerBackoffMultiplier grpcClientProducerMaxAttempts grpcConsumerThreadPoolNums
    grpcConsumerThreadQueueCapacity grpcMaxInboundMessageSize grpcProducerThreadPoolNums
    grpcProducerThreadQueueCapacity grpcProxyRelayRequestTimeoutInSeconds grpcRouteThreadPoolNums
    grpcRouteThreadQueueCapacity grpcServerPort grpcShutdownTimeSeconds grpcThreadPoolNums
    grpcThreadPoolQueueCapacity grpcTransactionThreadPoolNums grpcTransactionThreadQueueCapacity
    grpcWorkerLoopNum heartbeatSyncerThreadPoolNums heartbeatSyncerThreadPoolQueueCapacity
    heartbeatSyncerTopicClusterName heartbeatSyncerTopicName invisibleTimeMillisWhenClear
    localProxyConnectTimeoutMs localServeAddr lockTimeoutMsInHandleGroup
    longPollingReserveTimeInMillis maxDelayTimeMills maxInvisibleTimeMills maxMessageGroupSize
    maxMessageSize maxRenewRetryTimes maxTransactionRecoverySecond maxUserPropertySize
    messageDelayLevel metadataThreadPoolNums metadataThreadPoolQueueCapacity metricCollectorAddress
    metricCollectorMode metricGrpcExporterIntervalInMills metricGrpcExporterTimeOutInMills
    metricLoggingExporterIntervalInMills metricsExporterType metricsGrpcExporterHeader
    metricsGrpcExporterTarget metricsInDelta metricsLabel metricsPromExporterHost
    metricsPromExporterPort minInvisibleTimeMillsForRecv namesrvAddr namesrvDomain
    namesrvDomainSubgroup printJstackInMillis printThreadPoolStatusInMillis
    producerProcessorThreadPoolNums producerProcessorThreadPoolQueueCapacity proxyClusterName
    proxyMode proxyName regionId remotingAccessAddr remotingDefaultThreadPoolNums
    remotingDefaultThreadPoolQueueCapacity remotingHeartbeatThreadPoolNums
    remotingHeartbeatThreadPoolQueueCapacity remotingListenPort remotingPullMessageThreadPoolNums
    remotingPullThreadPoolQueueCapacity remotingSendMessageThreadPoolNums
    remotingSendThreadPoolQueueCapacity remotingTopicRouteThreadPoolNums
    remotingTopicRouteThreadPoolQueueCapacity remotingUpdateOffsetThreadPoolNums
    remotingUpdateOffsetThreadPoolQueueCapacity remotingWaitTimeMillsInDefaultQueue
    remotingWaitTimeMillsInHeartbeatQueue remotingWaitTimeMillsInPullQueue
    remotingWaitTimeMillsInSendQueue remotingWaitTimeMillsInTopicRouteQueue
    remotingWaitTimeMillsInUpdateOffsetQueue renewAheadTimeMillis renewMaxThreadPoolNums
    renewMaxTimeMillis renewSchedulePeriodMillis renewThreadPoolNums renewThreadPoolQueueCapacity
    rocketMQClusterName rocketmqMQClientNum sendLatencyEnable startDetectorEnable
    subscriptionGroupConfigCacheExpiredSeconds subscriptionGroupConfigCacheMaxNum
    subscriptionGroupConfigCacheRefreshSeconds tlsCertPath tlsCertWatchIntervalMs tlsKeyPath
    tlsTestModeEnable topicConfigCacheExpiredSeconds topicConfigCacheMaxNum
    topicConfigCacheRefreshSeconds topicRouteServiceCacheExpiredSeconds topicRouteServiceCacheMaxNum
    topicRouteServiceCacheRefreshSeconds topicRouteServiceThreadPoolNums
    topicRouteServiceThreadPoolQueueCapacity traceOn transactionDataExpireMillis
    transactionDataExpireScanPeriodMillis transactionDataMaxNum transactionDataMaxWaitClearMillis
    transactionHeartbeatBatchNum transactionHeartbeatPeriodSecond transactionHeartbeatThreadPoolNums
    transactionHeartbeatThreadPoolQueueCapacity useDelayLevel useEndpointPortFromRequest
    userCacheExpiredSeconds userCacheMaxNum userCacheRefreshSeconds userPropertyMaxNum
    """.split()),
}

# The classes each start-up program feeds its configuration to (BrokerStartup, NamesrvStartup,
# ControllerStartup, the proxy's Configuration), in RocketMQ's order.
COMPONENT_CLASSES: dict[str, tuple[str, ...]] = {
    "broker": ("BrokerConfig", "NettyServerConfig", "NettyClientConfig", "MessageStoreConfig", "AuthConfig"),
    "namesrv": ("NamesrvConfig", "NettyServerConfig", "NettyClientConfig", "ControllerConfig", "JraftConfig"),
    "controller": ("ControllerConfig", "JraftConfig", "NettyServerConfig", "NettyClientConfig"),
    "proxy": ("ProxyConfig", "AuthConfig"),
}

# Keys RocketMQ's documentation still describes but its code has since removed, with what became of them.
RETIRED_KEYS: dict[str, dict[str, str]] = {
    "broker": {
        "controllerDeployedStandAlone": (
            "is listed among RIP-44's broker parameters but RocketMQ removed it in July 2022 "
            "(commit 3d8296e): a broker sends its heartbeat to the controller however the controller is deployed"
        ),
    },
}

# rmqlab's own keys: fields of a configuration class that RocketMQ does not have, each a labelled
# rmqlab option whose default is RocketMQ's behaviour (the field's comment says why it exists).
# The loader reads them like any field; they are kept apart so no one mistakes them for RocketMQ's.
RMQLAB_KEYS: dict[str, frozenset[str]] = {
    "MessageStoreConfig": frozenset({"rmqlabRejectImpossibleHaReport", "rmqlabFirstEpochFromMinOffset",
                                      "rmqlabDLedgerPutOnlyAsMaster", "rmqlabDiskCapacityBytes"}),
}
