"""BrokerController: one RocketMQ broker as a Component on a Node (the classic
deployments of RocketMQ's deployment guide, "部署方式"; classic HA as the article
"RocketMQ原理解析-HA" describes it).

Mirrors ``broker/src/main/java/org/apache/rocketmq/broker/BrokerController.java`` with
``BrokerStartup``, for classic master/slave deployments (ASYNC_MASTER, SYNC_MASTER, SLAVE): master and
slaves of one group share a ``brokerName``, the master has ``brokerId`` 0 and slaves ids >= 1 (the
config loader enforces it, as BrokerStartup does).

``start(node)`` does what ``initialize()`` + ``start()`` do, in steps named after theirs:

1. the metadata managers (topics.json, consumerOffset.json, subscriptionGroup.json, delayOffset.json
   under ``storePathRootDir/config``) load, on the node's clock (``initialize_metadata``); the
   client managers, processors and services are built (``initialize_resources``);
2. the RemotingServer binds ``bindAddress:listenPort`` and the processors are registered: SEND
   (10, 310) and CONSUMER_SEND_MSG_BACK (36, the SendMessageProcessor too), PULL (11), HEART_BEAT (34), UNREGISTER_CLIENT (35), CHECK_CLIENT_CONFIG (46),
   GET_CONSUMER_LIST_BY_GROUP (38), QUERY/UPDATE_CONSUMER_OFFSET (14, 15), and the
   AdminBrokerProcessor as the default processor (admin codes; anything else -> 3). The remoting
   layer serves each request in a task of its own, so held pulls never block a connection
   (``initialize_remoting_server``, ``register_processor``);
3. the DefaultMessageStore (``storePathRootDir``; store host = brokerIP1:listenPort) loads and its
   service steps (``periodic_services()``) are scheduled on ``node.call_later`` at their intervals,
   and its dispatcher runs when woken (``initialize_message_store``, ``start_message_store``);
4. the HA service (``rmqlab.ha.DefaultHAService``) listens on the HA port; a slave replicates from
   ``haMasterAddress`` when configured, else from the master's HA address its registration returns
   (``start_ha_service``);
5. PullRequestHoldService (long polling, woken by the store's dispatcher), the client housekeeping
   (``start_basic_service``), the periodic persistence of consumer and delay offsets
   (``initialize_broker_scheduled_tasks``);
6. registration with every name server in ``namesrvAddr`` ("a;b") now, then every
   ``registerNameServerPeriod`` clamped to [10 s, 60 s] (first after 10 s); newly created topics
   are registered at once (``registerIncrementBrokerData``);
7. on a slave, SlaveSynchronize copies the master's metadata (see ``slave_synchronize``).

``shutdown()`` unregisters from the name servers, stops serving, persists the offsets and shuts
the store down cleanly; ``on_crash()`` only drops what is in memory (``store.kill()``).

On the group's master the delayed messages are delivered (``rmqlab.broker.schedule``).

Controller mode (``enableControllerMode=true``, RIP-44): the HA service is an
AutoSwitchHAService and a ReplicasManager (``rmqlab.broker.controller``) registers with the
controller and gives the broker its id and role; ``brokerId`` and ``brokerRole`` of the file are
ignored. Until the controller has named a master the broker is isolated (``is_isolated``: no
NameServer registration) and starts as SLAVE, so its store refuses writes (RocketMQ fences the
store instead). A slave learns its master's HA address from the NameServer registration.

DLedger CommitLog mode (``enableDLegerCommitLog=true``, RocketMQ 4.5; conf/dledger/): the store's
commitlog is a DLedger Raft log (``rmqlab.store.dledger``) and there is no HA service; the broker
does not register at start, and its DLedgerRoleChangeHandler (``rmqlab.broker.dledger``) makes it
SYNC_MASTER with brokerId 0 when its member leads (once the log is committed and dispatched) and
SLAVE with brokerId = the selfId's number + 1 otherwise, registering at each change; ``brokerId``
and ``brokerRole`` of the file are ignored.

Timer messages (RIP-43, ``timerWheelEnable``, default true): after the store loads, a
TimerMessageStore (``rmqlab.store.timer``) rebuilds its schedule from ``config/timercheck``; its
checkpoint is written every ``timerFlushIntervalMs``; only the master delivers (the special
services); a clean shutdown stops its delivery first and writes the checkpoint right before the
store shuts down.

POP consumption (RocketMQ 5: POP_MESSAGE 200050, ACK_MESSAGE 200051, CHANGE_MESSAGE_INVISIBLETIME
200053): the processors in ``rmqlab.broker.processor``, long polling in
``rmqlab.broker.longpolling.pop_long_polling_service``, the orderly state in
``config/consumerOrderInfo.json`` (persisted with the consumer offsets), and on the master the
revive service (``rmqlab.broker.pop``), every ``reviveInterval``.

Slave acting master (RIP-32, ``enableSlaveActingMaster``, off by default; with it off none of
this runs): every ``brokerHeartbeatInterval`` a lightweight heartbeat to each name server
(QUERY_DATA_VERSION with ``compatibleWithOldNameSrv``, the default, else BROKER_HEARTBEAT), and every
``syncBrokerMemberGroupPeriod`` the group's members from a name server (the route of
``rmq_sys_SYNC_BROKER_MEMBER_<brokerName>``, else GET_BROKER_MEMBER_GROUP); a slave that learns the
group's smallest live broker id, from that sync or from the name server's
NOTIFY_MIN_BROKER_ID_CHANGE (905), runs ``updateMinBroker``: the smallest-id slave runs the special
services (``changeSpecialServiceStatus``) while the master is away and gives them back when it
returns; a slave whose master went away stops replicating from it, and when a master is back it
learns its HA address (EXCHANGE_BROKER_HA_INFO, 906) and replicates again. Each change of the
smallest id and each start or stop of the special services is a ``state`` trace event (machines
``BrokerController.minBrokerIdInGroup`` and ``BrokerController.specialService``). An acting slave's
due delayed and timer messages, and its POP checkpoints and acks, go through the EscapeBridge
(``rmqlab.broker.failover.escape_bridge``): with ``enableRemoteEscape`` to another group's master,
found through the broker's route cache (``rmqlab.broker.topic.topic_route_info_manager``).

A broker of such a group with ``totalReplicas > 1`` starts isolated (``is_isolated``: it neither
registers with the name servers, periodically or for a new topic, nor sends heartbeats, and runs no
special services) until its pre-online is done (``rmqlab.broker.broker_pre_online_service``: a
returning master first takes back the consumer offsets, delay offsets and timer checkpoint its
slaves moved on while acting, then registers); with ``skipPreOnline=true`` it serves at once, as
in RocketMQ, with whatever metadata it had.

Not part of this broker: static topics; the proxy is ``rmqlab.proxy``. Transactional messages
(4.x model) are ``rmqlab.broker.transaction``; their check service is a special service.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
from collections.abc import Callable
from typing import Any

from rmqlab.broker.broker_outer_api import BrokerOuterAPI
from rmqlab.broker.broker_pre_online_service import BrokerPreOnlineService
from rmqlab.broker.broker_stats import BrokerStats
from rmqlab.broker.client.client_housekeeping_service import (Broker2Client, ClientHousekeepingService,
                                                              DefaultConsumerIdsChangeListener)
from rmqlab.broker.client.consumer_manager import ConsumerManager
from rmqlab.broker.client.producer_manager import ProducerManager
from rmqlab.broker.controller.replicas_manager import ReplicasManager
from rmqlab.broker.dledger.dledger_role_change_handler import DLedgerRoleChangeHandler
from rmqlab.broker.longpolling.pull_request_hold_service import PullRequestHoldService
from rmqlab.broker.offset.consumer_offset_manager import ConsumerOffsetManager
from rmqlab.broker.offset.consumer_order_info_manager import ConsumerOrderInfoManager
from rmqlab.broker.failover.escape_bridge import EscapeBridge
from rmqlab.broker.processor.end_transaction_processor import EndTransactionProcessor
from rmqlab.broker.transaction.queue.transactional_message_service_impl import TransactionalMessageServiceImpl
from rmqlab.broker.transaction.transactional_message_check_service import TransactionalMessageCheckService
from rmqlab.broker.pop.pop_revive_service import PopReviveService
from rmqlab.broker.pop.queue_lock_manager import CLEAN_INTERVAL_MS as POP_LOCK_CLEAN_INTERVAL_MS
from rmqlab.broker.processor.ack_message_processor import AckMessageProcessor
from rmqlab.broker.processor.admin_broker_processor import AdminBrokerProcessor
from rmqlab.broker.processor.change_invisible_time_processor import ChangeInvisibleTimeProcessor
from rmqlab.broker.processor.client_manage_processor import ClientManageProcessor
from rmqlab.broker.processor.consumer_manage_processor import ConsumerManageProcessor
from rmqlab.broker.processor.pop_message_processor import PopMessageProcessor
from rmqlab.broker.processor.pull_message_processor import PullMessageProcessor
from rmqlab.broker.processor.send_message_processor import SendMessageProcessor
from rmqlab.broker.schedule.deliver_delayed_message_timer_task import DeliverDelayedMessageTimerTask, correct_delay_offset
from rmqlab.broker.schedule.schedule_message_service import ScheduleMessageService
from rmqlab.broker.slave_synchronize import SlaveSynchronize
from rmqlab.broker.subscription.subscription_group_manager import SubscriptionGroupManager
from rmqlab.broker.topic.topic_config_manager import TopicConfigManager
from rmqlab.broker.topic.topic_route_info_manager import TopicRouteInfoManager
from rmqlab.common.constant.perm_name import PermName
from rmqlab.common.data_version import DataVersion
from rmqlab.common.message.message_client_id_setter import MessageClientIDSetter
from rmqlab.common.topic_config import TopicConfig
from rmqlab.common.topic.topic_validator import TopicValidator
from rmqlab.common.decision_points import DecisionPoints
from rmqlab.config.broker import MASTER_ID, BrokerRole
from rmqlab.config.loader import BrokerStartupConfig
from rmqlab.ha import DefaultHAService
from rmqlab.ha.autoswitch import AutoSwitchHAService
from rmqlab.remoting.exceptions import RemotingError
from rmqlab.remoting.protocol.body.broker_member_group import BrokerMemberGroup
from rmqlab.remoting.protocol.body.register_broker_body import TopicConfigAndMappingSerializeWrapper
from rmqlab.remoting.protocol.mq_version import MQVersion
from rmqlab.remoting.remoting_server import RemotingServer
from rmqlab.remoting.request_code import RequestCode
from rmqlab.runtime.component import Component
from rmqlab.runtime.node import Node, Timer
from rmqlab.store.default_message_store import DefaultMessageStore
from rmqlab.store.timer import TimerCheckpoint, TimerMessageStore

log = logging.getLogger("rmqlab.broker")

# RocketMQ reads the machine's RAM (StoreUtil.TOTAL_PHYSICAL_MEMORY_SIZE) for the "is it still in
# memory" estimates (QUERY_CONSUMER_OFFSET's rule, suggestPullingFromSlave). rmqlab fixes it so a
# run does not depend on the machine; a lab passes a small value to see the rules trigger.
DEFAULT_TOTAL_PHYSICAL_MEMORY_SIZE = 16 * 1024 * 1024 * 1024
# RocketMQ 5 syncs a slave's metadata when 60 s have passed since the last sync.
DEFAULT_SLAVE_SYNCHRONIZE_PERIOD_MS = 60_000
SLAVE_SYNCHRONIZE_CHECK_MS = 3_000
FIRST_SCHEDULE_DELAY_MS = 10_000   # the 10 s initial delay of the registration and sync tasks
HA_ADDRESS_MIN_LENGTH = 6          # BrokerController.HA_ADDRESS_MIN_LENGTH
ACTING_MASTER_FIRST_DELAY_MS = 1_000  # the 1 s initial delay of the RIP-32 heartbeat and member sync
UPDATE_MIN_BROKER_LOCK_WAIT_MS = 3_000  # updateMinBroker from a notification: lock.tryLock(3000 ms)


class BrokerController(Component):
    component_type = "broker"

    def __init__(self, startup_config: BrokerStartupConfig, *,
                 slave_synchronize_period_ms: int = DEFAULT_SLAVE_SYNCHRONIZE_PERIOD_MS,
                 total_physical_memory_size: int = DEFAULT_TOTAL_PHYSICAL_MEMORY_SIZE,
                 decision_points: DecisionPoints | None = None):
        self.startup_config = startup_config
        self.decision_points = decision_points  # rmqlab.common.decision_points: for its HA service
        self.broker_config = startup_config.brokerConfig
        self.message_store_config = startup_config.messageStoreConfig
        self.netty_server_config = startup_config.nettyServerConfig
        self.netty_client_config = startup_config.nettyClientConfig
        if slave_synchronize_period_ms <= 0:
            raise ValueError(f"slave_synchronize_period_ms must be positive, got {slave_synchronize_period_ms}")
        self.slave_synchronize_period_ms = slave_synchronize_period_ms
        self.total_physical_memory_size = total_physical_memory_size
        # RIP-32 state; without slave-acting-master it stays 0 (the group has a master).
        self.min_broker_id_in_group = MASTER_ID
        self.min_broker_addr_in_group: str | None = None
        self.special_service_running = False
        self.broker_member_group: BrokerMemberGroup | None = None  # the last one synced (start: self)
        self.broker_init_max_offset = -1  # DefaultMessageStore.brokerInitMaxOffset: max offset after load
        self._min_broker_lock: asyncio.Lock | None = None
        self.update_master_ha_server_addr_periodically = False
        self.remoting_version = MQVersion.CURRENT_VERSION
        self.broker_stats = BrokerStats()
        self.boot_timestamp = 0
        self._timers: dict[str, Timer] = {}
        self._deliver_tasks: list[DeliverDelayedMessageTimerTask] = []
        self._register_lock: asyncio.Lock | None = None
        self._last_sync_time_ms = 0
        self._shutdown = False
        self._started = False
        self.node: Node | None = None
        self.message_store: DefaultMessageStore | None = None
        self.timer_message_store: TimerMessageStore | None = None
        self.ha_service: DefaultHAService | AutoSwitchHAService | None = None
        # Controller mode: the ReplicasManager, and isolation (fenced until it is RUNNING).
        self.replicas_manager: ReplicasManager | None = None
        self.is_isolated = False
        self.broker_pre_online_service: BrokerPreOnlineService | None = None  # RIP-32, without skipPreOnline
        self.dledger_role_change_handler: DLedgerRoleChangeHandler | None = None  # DLedger CommitLog mode
        self.remoting_server: RemotingServer | None = None

    # -- identity --------------------------------------------------------------------------------
    @property
    def broker_addr(self) -> str:
        """``getBrokerAddr``: brokerIP1:listenPort, what the name servers and clients use."""
        return f"{self.broker_config.brokerIP1}:{self.netty_server_config.listenPort}"

    @property
    def ha_server_addr(self) -> str:
        """``getHAServerAddr``: brokerIP2:haListenPort, where slaves replicate from."""
        port = self.message_store_config.get_ha_listen_port(self.netty_server_config.listenPort)
        if self.ha_service is not None:
            port = self.ha_service.ha_listen_port
        return f"{self.broker_config.brokerIP2}:{port}"

    @property
    def store_host(self) -> tuple[str, int]:
        """``getStoreHost``: brokerIP1:listenPort, written into every message and its msgId."""
        return self.broker_config.brokerIP1, self.netty_server_config.listenPort

    def boot_success_message(self) -> str:
        """The line BrokerStartup prints once the broker serves."""
        tip = f"The broker[{self.broker_config.brokerName}, {self.broker_addr}] boot success. serializeType=JSON"
        if self.broker_config.namesrvAddr is not None:
            tip += f" and name server is {self.broker_config.namesrvAddr}"
        return tip

    # -- start -----------------------------------------------------------------------------------
    async def start(self, node: Node) -> None:
        """``initialize()`` + ``start()``, as BrokerStartup calls them, in the steps of
        BrokerController.java. The steps keep rmqlab's order (listen before the store loads,
        metadata managers built here), which differs from RocketMQ's in places: each step's
        docstring says where; the order is what the recorded traces replay."""
        self.node = node
        bc, msc = self.broker_config, self.message_store_config
        if bc.enableControllerMode:
            # The controller gives the role; until then the store refuses writes (see the docstring).
            msc.brokerRole = BrokerRole.SLAVE
        self.boot_timestamp = node.now_ms()
        self._register_lock = asyncio.Lock()
        self._min_broker_lock = asyncio.Lock()
        if bc.enableSlaveActingMaster and msc.totalReplicas > 1:
            self.is_isolated = True  # until pre-online; with skipPreOnline, startServiceWithoutCondition below
        # initialize()
        self.initialize_metadata()
        self.initialize_resources()
        await self.initialize_remoting_server()
        self.broker_member_group = BrokerMemberGroup(bc.brokerClusterName, bc.brokerName,
                                                     {bc.brokerId: self.broker_addr})
        self.initialize_message_store()
        # start()
        self.start_message_store()
        await self.start_ha_service()
        self.start_basic_service()
        self.initialize_broker_scheduled_tasks()
        self._started = True
        if not bc.enableControllerMode and not msc.enableDLegerCommitLog:
            # The ReplicasManager traces controller-given roles, the DLedgerRoleChangeHandler DLedger's.
            node.trace("role", **{"from": None, "to": msc.brokerRole.value, "component": "broker"})
        if not self.is_isolated and not msc.enableDLegerCommitLog:
            # In DLedger mode the first role change registers the broker (DLedgerRoleChangeHandler).
            self.change_special_service_status(bc.brokerId == MASTER_ID)
            await self.register_broker_all(True, False, True)
        self.schedule_at_fixed_rate("RegisterBrokerAll", FIRST_SCHEDULE_DELAY_MS,
                                    bc.get_register_name_server_period(), self._register_broker_all_periodically)
        if bc.enableSlaveActingMaster:
            self.schedule_at_fixed_rate("BrokerHeartbeat", ACTING_MASTER_FIRST_DELAY_MS, bc.brokerHeartbeatInterval,
                                        self._send_heartbeat_periodically)
            self.schedule_at_fixed_rate("SyncBrokerMemberGroup", ACTING_MASTER_FIRST_DELAY_MS,
                                        bc.syncBrokerMemberGroupPeriod, self.sync_broker_member_group)
        if bc.skipPreOnline and self.is_isolated:
            # RocketMQ calls it whenever skipPreOnline is set; a broker that is not isolated has
            # just done the same (special services, registration), so only the isolated one does.
            await self.start_service_without_condition()
        tip = self.boot_success_message()
        log.info(tip)
        node.trace("log", level="INFO", message=tip, logger="rmqlab.broker")

    def initialize_metadata(self) -> None:
        """``initializeMetadata``: the metadata managers load, before the store as in RocketMQ. RocketMQ
        builds the managers in its constructor and loads the delay offsets (ScheduleMessageService)
        after the store; here they are built on the node's clock and all four load together (the
        delay offsets are corrected once the store is loaded: ``initialize_message_store``)."""
        bc, msc = self.broker_config, self.message_store_config
        clock, root = self.node.now_ms, msc.storePathRootDir
        self.topic_config_manager = TopicConfigManager(
            root, clock, broker_cluster_name=bc.brokerClusterName, broker_name=bc.brokerName,
            auto_create_topic_enable=bc.autoCreateTopicEnable, default_topic_queue_nums=bc.defaultTopicQueueNums,
            cluster_topic_enable=bc.clusterTopicEnable, broker_topic_enable=bc.brokerTopicEnable,
            state_machine_version=self._state_machine_version, timer_wheel_enable=msc.timerWheelEnable,
            revive_queue_num=bc.reviveQueueNum)
        self.consumer_offset_manager = ConsumerOffsetManager(
            root, clock, consumer_offset_update_version_step=bc.consumerOffsetUpdateVersionStep,
            state_machine_version=self._state_machine_version)
        self.subscription_group_manager = SubscriptionGroupManager(
            root, clock, auto_create_subscription_group=bc.autoCreateSubscriptionGroup)
        self.schedule_message_service = ScheduleMessageService(
            root, clock, message_delay_level=msc.messageDelayLevel,
            delay_offset_update_version_step=bc.delayOffsetUpdateVersionStep,
            state_machine_version=self._state_machine_version)
        for manager in (self.topic_config_manager, self.consumer_offset_manager, self.subscription_group_manager,
                        self.schedule_message_service):
            manager.load()
        self.topic_config_manager.register_broker_data = \
            lambda tc: self.register_increment_broker_data([tc], self.topic_config_manager.data_version)
        # TopicQueueMappingManager's version: rmqlab has no static topics, so it never changes.
        self.topic_queue_mapping_data_version = DataVersion(timestamp=clock())

    def initialize_resources(self) -> None:
        """The client managers, the processors and the services that serve them. RocketMQ builds
        these in its constructor (its ``initializeResources`` makes the thread pools, which rmqlab
        does not have); here they need the node, so they are built once it is known. The orderly
        POP state (consumerOrderInfo.json) loads here, after the other metadata, rather than in
        ``initializeMetadata``."""
        bc, node = self.broker_config, self.node
        clock, root = node.now_ms, self.message_store_config.storePathRootDir
        self.consumer_manager = ConsumerManager(DefaultConsumerIdsChangeListener(self), clock)
        self.producer_manager = ProducerManager(clock)
        self.broker2client = Broker2Client(self)
        self.client_housekeeping_service = ClientHousekeepingService(self)
        self.pull_request_hold_service = PullRequestHoldService(self)
        # POP (RocketMQ 5): processors, orderly state, revive service (rmqlab.broker.pop).
        self.consumer_order_info_manager = ConsumerOrderInfoManager(root, clock, self)
        self.consumer_order_info_manager.load()
        self.pop_message_processor = PopMessageProcessor(self)
        self.ack_message_processor = AckMessageProcessor(self)
        self.change_invisible_time_processor = ChangeInvisibleTimeProcessor(self)
        self.pop_revive_service = PopReviveService(self)
        self.send_message_processor = SendMessageProcessor(self)
        self.pull_message_processor = PullMessageProcessor(self)
        self.consumer_manage_processor = ConsumerManageProcessor(self)
        self.client_manage_processor = ClientManageProcessor(self)
        self.admin_broker_processor = AdminBrokerProcessor(self)
        self.slave_synchronize = SlaveSynchronize(self)
        self.broker_outer_api = BrokerOuterAPI(node, self.netty_client_config.connectTimeoutMillis)
        self.broker_outer_api.update_name_server_address_list(bc.get_namesrv_addr_list())
        self.message_client_id_setter = MessageClientIDSetter(bc.brokerIP1, clock, node.random)
        self.topic_route_info_manager = TopicRouteInfoManager(self)
        self.escape_bridge = EscapeBridge(self)
        # Transactions (rmqlab.broker.transaction): nothing runs until a half message arrives.
        self.transactional_message_service = TransactionalMessageServiceImpl(self)
        self.transactional_message_check_service = TransactionalMessageCheckService(self)
        self.end_transaction_processor = EndTransactionProcessor(self)

    async def initialize_remoting_server(self) -> None:
        """``initializeRemotingServer`` + ``registerProcessor`` + the server's start (RocketMQ starts
        it in ``startBasicService``, after the store): here it binds before the store loads, which
        is safe because nothing awaits between the bind and the load (``initialize_message_store``),
        so no request is served before the store is ready. One server: RocketMQ's "fast" server
        (listenPort - 2) has no use here."""
        nsc = self.netty_server_config
        server = RemotingServer(self.node, nsc.bindAddress, nsc.listenPort, self.client_housekeeping_service,
                                channel_max_idle_seconds=nsc.serverChannelMaxIdleTimeSeconds)
        self.register_processor(server)
        self.remoting_server = server
        await server.start()
        # listenPort 0: the system picked one; the broker address and store host use it.
        nsc.listenPort = server.port

    def initialize_message_store(self) -> None:
        """``initializeMessageStore`` + the loads of ``recoverAndInitService``: the
        DefaultMessageStore (store host = brokerIP1:listenPort) and, with ``timerWheelEnable``, the
        TimerMessageStore, each built and loaded; the delay offsets are then corrected against
        the loaded queues (ScheduleMessageService.load)."""
        msc, clock = self.message_store_config, self.node.now_ms
        self.message_store = DefaultMessageStore(msc, clock=clock, store_host=self.store_host, node=self.node)
        self.message_store.set_controller_mode(self.broker_config.enableControllerMode)
        self.message_store.load()
        if msc.enableDLegerCommitLog:
            self.dledger_role_change_handler = DLedgerRoleChangeHandler(self, self.message_store)
            elector = self.message_store.commit_log.dledger_server.get_dledger_leader_elector()
            elector.add_role_change_handler(self.dledger_role_change_handler)
        self.message_store.set_slave_acting_master(self.broker_config.enableSlaveActingMaster)
        self.broker_init_max_offset = self.message_store.get_max_phy_offset()
        correct_delay_offset(self)  # ScheduleMessageService.load: offsets within their queues
        # The delay levels' tasks sleep while their queues hold nothing (DeliverDelayedMessageTimerTask).
        self.message_store.reput_message_service.message_arriving_listeners.append(self._schedule_message_arriving)
        if msc.timerWheelEnable:
            self.timer_message_store = TimerMessageStore(
                self.message_store, msc,
                TimerCheckpoint(msc.get_timer_check_path(), self.message_store.page_cache), clock=clock,
                put_message=self.escape_bridge.put_message,  # registerEscapeBridgeHook
                state_machine_version=self._state_machine_version)
            self.timer_message_store.load()

    def start_message_store(self) -> None:
        """``messageStore.start()`` + ``timerMessageStore.start()`` of ``startBasicService``. The
        simulated store has no threads of its own: the broker schedules its service steps
        (``periodic_services()``) and the timer checkpoint's flush on the node's clock."""
        msc = self.message_store_config
        if msc.timerWheelEnable:
            self.timer_message_store.start(False)  # dequeue: changeSpecialServiceStatus in start()
            self.schedule_at_fixed_rate("TimerFlushService", msc.timerFlushIntervalMs, msc.timerFlushIntervalMs,
                                        self.timer_message_store.flush)
        for name, interval_ms, step in self.message_store.periodic_services():
            self.schedule_at_fixed_rate(name, interval_ms, interval_ms, step)
        for name, initial_delay_ms, period_ms, step in self.message_store.clean_services():
            self.schedule_at_fixed_rate(name, initial_delay_ms, period_ms, step)
        self.message_store.reput_message_service.start(self.node.call_later)

    async def start_ha_service(self) -> None:
        """The HA service listens on the HA port (RocketMQ's DefaultMessageStore owns and starts its
        HAService in ``messageStore.start()``); a slave replicates from ``haMasterAddress`` when
        configured, else from the master's HA address its registration returns. In controller
        mode the ReplicasManager is built fenced and starts here (RocketMQ: built in
        ``recoverAndInitService``, started in ``startBasicService``)."""
        bc, msc = self.broker_config, self.message_store_config
        if msc.enableDLegerCommitLog:
            # No HA service: DLedger replicates (DefaultMessageStore.initializeHAService makes none);
            # its server starts with the store (DLedgerCommitLog.start).
            await self.message_store.commit_log.start()
            return
        ha_port = msc.get_ha_listen_port(self.netty_server_config.listenPort)
        if bc.enableControllerMode:
            self.ha_service = AutoSwitchHAService(self.node, self.message_store, msc,
                                                  host=self.netty_server_config.bindAddress, port=ha_port,
                                                  broker_name=bc.brokerName, decision_points=self.decision_points)
            self.update_master_ha_server_addr_periodically = True
        else:
            self.ha_service = DefaultHAService(self.node, self.message_store, msc,
                                               host=self.netty_server_config.bindAddress, port=ha_port,
                                               decision_points=self.decision_points)
        if msc.brokerRole == BrokerRole.SLAVE and not bc.enableControllerMode:
            ha_master = msc.haMasterAddress
            self.update_master_ha_server_addr_periodically = not (ha_master and len(ha_master) >= HA_ADDRESS_MIN_LENGTH)
        await self.ha_service.start()
        if bc.enableControllerMode:
            self.replicas_manager = ReplicasManager(self, self.ha_service)
            self.replicas_manager.set_fenced(True)
            await self.replicas_manager.start()

    def start_basic_service(self) -> None:
        """The services of ``startBasicService``: long polling (pull and POP), the POP revive
        service and queue-lock cleaning, the client housekeeping, and with slave acting master (unless
        ``skipPreOnline``) the pre-online service. The orderly POP state is persisted here with them
        (RocketMQ persists it with the consumer offsets)."""
        bc = self.broker_config
        self.pull_request_hold_service.start()
        self.pop_message_processor.pop_long_polling_service.start()
        self.schedule_at_fixed_rate("PopReviveService", bc.reviveInterval, bc.reviveInterval,
                                    self.pop_revive_service.revive)
        self.schedule_at_fixed_rate("QueueLockManager", POP_LOCK_CLEAN_INTERVAL_MS, POP_LOCK_CLEAN_INTERVAL_MS,
                                    self.pop_message_processor.queue_lock_manager.clean_unused_lock)
        self.schedule_at_fixed_rate("ConsumerOrderInfoPersist", FIRST_SCHEDULE_DELAY_MS,
                                    bc.flushConsumerOffsetInterval, self.consumer_order_info_manager.persist)
        self.client_housekeeping_service.start()
        if bc.enableSlaveActingMaster and not bc.skipPreOnline:
            # Built in RocketMQ's initialize(), started here; its loop ends at once for a broker
            # that is not isolated (totalReplicas = 1).
            self.broker_pre_online_service = BrokerPreOnlineService(self)
            self.broker_pre_online_service.start()
        if bc.enableSlaveActingMaster and bc.enableRemoteEscape:  # the route cache's refresh: only where
            self.topic_route_info_manager.start()                  # it escapes (its module's deviation)

    def initialize_broker_scheduled_tasks(self) -> None:
        """``initializeBrokerScheduledTasks``: the periodic persistence of the consumer and delay
        offsets, and on a classic slave the SlaveSynchronize check (in controller mode the
        ReplicasManager syncs). RocketMQ schedules these during ``initialize()``; here they are
        scheduled after the services start, the order the recorded traces replay."""
        bc, msc = self.broker_config, self.message_store_config
        self.schedule_at_fixed_rate("ConsumerOffsetPersist", FIRST_SCHEDULE_DELAY_MS, bc.flushConsumerOffsetInterval,
                                    self.consumer_offset_manager.persist)
        self.schedule_at_fixed_rate("DelayOffsetPersist", FIRST_SCHEDULE_DELAY_MS, msc.flushDelayOffsetInterval,
                                    self.schedule_message_service.persist)
        if msc.brokerRole == BrokerRole.SLAVE and not bc.enableControllerMode and not msc.enableDLegerCommitLog:
            # (controller mode: the ReplicasManager syncs; DLedger mode: the DLedgerRoleChangeHandler)
            self._last_sync_time_ms = self.node.now_ms()
            check = min(SLAVE_SYNCHRONIZE_CHECK_MS, self.slave_synchronize_period_ms)
            self.schedule_at_fixed_rate("SlaveSynchronize", FIRST_SCHEDULE_DELAY_MS, check, self._slave_sync_tick)

    def _register_broker_all_periodically(self):
        if self.is_isolated:
            log.info("Skip register for broker is isolated")
            return None
        return self.register_broker_all(True, False, self.broker_config.forceRegister)

    def _state_machine_version(self) -> int:
        """``MessageStore.getStateMachineVersion``: the master epoch in controller mode, else 0."""
        return self.replicas_manager.master_epoch if self.replicas_manager is not None else 0

    def register_processor(self, server: RemotingServer) -> None:
        """``registerProcessor``: which processor serves which code."""
        versioned = self._versioned
        for code in (RequestCode.SEND_MESSAGE, RequestCode.SEND_MESSAGE_V2, RequestCode.CONSUMER_SEND_MSG_BACK):
            server.register_processor(code, versioned(self.send_message_processor))
        server.register_processor(RequestCode.PULL_MESSAGE, versioned(self.pull_message_processor))
        for code in (RequestCode.HEART_BEAT, RequestCode.UNREGISTER_CLIENT, RequestCode.CHECK_CLIENT_CONFIG):
            server.register_processor(code, versioned(self.client_manage_processor))
        for code in (RequestCode.GET_CONSUMER_LIST_BY_GROUP, RequestCode.UPDATE_CONSUMER_OFFSET,
                     RequestCode.QUERY_CONSUMER_OFFSET):
            server.register_processor(code, versioned(self.consumer_manage_processor))
        server.register_processor(RequestCode.POP_MESSAGE, versioned(self.pop_message_processor))
        server.register_processor(RequestCode.ACK_MESSAGE, versioned(self.ack_message_processor))
        server.register_processor(RequestCode.CHANGE_MESSAGE_INVISIBLETIME,
                                  versioned(self.change_invisible_time_processor))
        server.register_processor(RequestCode.END_TRANSACTION, versioned(self.end_transaction_processor))
        server.register_default_processor(versioned(self.admin_broker_processor))

    def _versioned(self, processor: Any) -> Callable:
        """A Java broker's responses carry its MQVersion (BrokerStartup sets
        ``rocketmq.remoting.version``, ``createResponseCommand`` stamps it); so do these."""
        async def process(channel, request):
            response = await processor.process(channel, request)
            if response is not None:
                response.version = self.remoting_version
            return response
        return process

    def change_special_service_status(self, should_start: bool) -> None:
        """``changeSpecialServiceStatus``: the services only the group's master runs (with slave
        acting master, the smallest-id live slave while there is no master). Of RocketMQ's
        (delayed-message delivery, transaction checks, POP revive, timer wheel) rmqlab has the
        delayed-message delivery: one DeliverDelayedMessageTimerTask per delay level; the transaction
        check (``rmqlab.broker.transaction.transactional_message_check_service``); and the
        timer messages' dequeue (``TimerMessageStore.set_should_running_dequeue``); and the POP
        revive service (``rmqlab.broker.pop.pop_revive_service``). With slave acting master each
        start and stop is a ``state`` event (machine ``BrokerController.specialService``); without
        it the trace stays as it was (the group's master always runs them)."""
        if self.special_service_running == should_start:
            return
        log.info("change special service status to %s", should_start)
        self.special_service_running = should_start
        if self.broker_config.enableSlaveActingMaster:
            self._trace_state("BrokerController.specialService", "STOPPED" if should_start else "RUNNING",
                              "RUNNING" if should_start else "STOPPED",
                              f"change special service status to {str(should_start).lower()}",
                              broker_id=self.broker_config.brokerId, min_broker_id=self.min_broker_id_in_group)
        for task in self._deliver_tasks:
            task.stop()
        self._deliver_tasks = []
        # ackMessageProcessor.setPopReviveServiceStatus(shouldStart)
        self.pop_revive_service.set_should_run_pop_revive(should_start)
        tms = self.timer_message_store
        if tms is not None:  # timerMessageStore.setShouldRunningDequeue(shouldStart)
            generation = tms.set_should_running_dequeue(should_start)
            if generation is not None:
                self.node.spawn(tms.run(generation, self.node.sleep), name="TimerDequeueGetService")
        # changeTransactionCheckServiceStatus(shouldStart)
        if should_start:
            self.transactional_message_check_service.start()
        else:
            self.transactional_message_check_service.shutdown()
        if should_start:
            sms = self.schedule_message_service
            for level in sorted(sms.delay_level_table):
                task = DeliverDelayedMessageTimerTask(self, level, sms.offset_table.get(level, 0))
                self._deliver_tasks.append(task)
                self.node.spawn(task.run(), name=f"ScheduleMessageTimerThread_{level}")

    def peek_master_broker(self) -> BrokerController | None:
        """``peekMasterBroker``: this broker when it is its group's master (brokerId 0). (RocketMQ's
        broker container would name the master of the same process; rmqlab has no container.)"""
        return self if self.broker_config.brokerId == MASTER_ID else None

    def _trace_state(self, machine: str, old: str | None, new: str, message: str, **fields: Any) -> None:
        """The log line people read, then the typed event readers use (tests/test_trace_contract.py)."""
        self.node.trace("log", level="INFO", message=message, logger="rmqlab.broker")
        self.node.trace("state", machine=machine, from_=old, to=new, broker_set=self.broker_config.brokerName,
                        **fields)

    # -- slave acting master (RIP-32) ------------------------------------------------------------
    def _send_heartbeat_periodically(self) -> None:
        if self.is_isolated:
            return
        self.send_heartbeat()

    def send_heartbeat(self) -> None:
        """``sendHeartbeat`` (the name server part; the controller's is the ReplicasManager's)."""
        bc = self.broker_config
        if not bc.enableSlaveActingMaster:
            return
        if bc.compatibleWithOldNameSrv:
            self.broker_outer_api.send_heartbeat_via_data_version(
                bc.brokerClusterName, self.broker_addr, bc.brokerName, bc.brokerId,
                self.topic_config_manager.data_version.copy())
        else:
            self.broker_outer_api.send_heartbeat(bc.brokerClusterName, self.broker_addr, bc.brokerName)

    async def sync_broker_member_group(self) -> None:
        """``syncBrokerMemberGroup``: the group's members from a name server; the number alive
        (``aliveReplicaNumInGroup``, self counted when the name server does not list it) and,
        when not isolated, ``updateMinBroker`` with the smallest id."""
        bc = self.broker_config
        try:
            group = await self.broker_outer_api.sync_broker_member_group(bc.brokerClusterName, bc.brokerName,
                                                                         bc.compatibleWithOldNameSrv)
        except (RemotingError, ValueError, OSError) as e:
            log.error("syncBrokerMemberGroup from namesrv failed, %s", e)
            return
        if group is None or not group.broker_addrs:
            log.warning("Couldn't find any broker member from namesrv in %s/%s", bc.brokerClusterName, bc.brokerName)
            return
        self.broker_member_group = group
        addrs = group.broker_addrs
        self.message_store.set_alive_replica_num_in_group(len(addrs) if bc.brokerId in addrs else len(addrs) + 1)
        if not self.is_isolated:
            min_broker_id = group.minimum_broker_id()
            await self.update_min_broker(min_broker_id, addrs.get(min_broker_id))

    async def update_min_broker(self, min_broker_id: int, min_broker_addr: str | None) -> None:
        """``updateMinBroker(minBrokerId, minBrokerAddr)``, from the periodic sync: a slave of an
        acting-master group acts on a new smallest id; a larger one means the previous smallest
        went offline. Skipped while another update runs (RocketMQ's ``lock.tryLock()``).

        Quirk kept from RocketMQ: the previous smallest's address is known only once a change (or
        pre-online's ``startService``) recorded it, so the first loss of the master seen by this
        path alone names no offline address, and ``onMasterOffline`` does not run (the name
        server's notice names it); replication and SlaveSynchronize then fail until it is back."""
        bc = self.broker_config
        if not bc.enableSlaveActingMaster or bc.brokerId == MASTER_ID or self._min_broker_lock.locked():
            return
        async with self._min_broker_lock:
            if min_broker_id != self.min_broker_id_in_group:
                offline_broker_addr = None
                if min_broker_id > self.min_broker_id_in_group:
                    offline_broker_addr = self.min_broker_addr_in_group
                await self.on_min_broker_change(min_broker_id, min_broker_addr, offline_broker_addr, None, "sync")

    async def update_min_broker_notified(self, min_broker_id: int, min_broker_addr: str | None,
                                         offline_broker_addr: str | None, master_ha_addr: str | None) -> None:
        """``updateMinBroker(minBrokerId, minBrokerAddr, offlineBrokerAddr, masterHaAddr)``, from the
        name server's NOTIFY_MIN_BROKER_ID_CHANGE: waits up to 3 s for a running update
        (``lock.tryLock(3000 ms)``), else gives up as RocketMQ does."""
        bc = self.broker_config
        if not bc.enableSlaveActingMaster or bc.brokerId == MASTER_ID:
            return
        try:
            await asyncio.wait_for(self._min_broker_lock.acquire(), UPDATE_MIN_BROKER_LOCK_WAIT_MS / 1000)
        except TimeoutError:
            log.error("Update min broker error, the lock is held")
            return
        try:
            if min_broker_id != self.min_broker_id_in_group:
                await self.on_min_broker_change(min_broker_id, min_broker_addr, offline_broker_addr, master_ha_addr,
                                                "notify")
        finally:
            self._min_broker_lock.release()

    async def on_min_broker_change(self, min_broker_id: int, min_broker_addr: str | None,
                                   offline_broker_addr: str | None, master_ha_addr: str | None, source: str) -> None:
        """``onMinBrokerChange``: record the new smallest id; the special services run here iff it is
        this broker's; the master's going (its address is the offline one) or coming back (id 0)."""
        old_id, old_addr = self.min_broker_id_in_group, self.min_broker_addr_in_group
        message = f"Min broker changed, old: {old_id}-{old_addr}, new {min_broker_id}-{min_broker_addr}"
        log.info(message)
        self._trace_state("BrokerController.minBrokerIdInGroup", str(old_id), str(min_broker_id), message,
                          broker_id=self.broker_config.brokerId, min_broker_id=min_broker_id,
                          min_broker_addr=min_broker_addr, offline_broker_addr=offline_broker_addr, source=source)
        self.min_broker_id_in_group = min_broker_id
        self.min_broker_addr_in_group = min_broker_addr
        self.change_special_service_status(self.broker_config.brokerId == self.min_broker_id_in_group)
        if offline_broker_addr is not None and offline_broker_addr == self.slave_synchronize.master_addr:
            self.on_master_offline()
        if min_broker_id == MASTER_ID and min_broker_addr is not None:
            await self.on_master_online(min_broker_addr, master_ha_addr)
        if self.min_broker_id_in_group == MASTER_ID:
            # Held pulls go back to the client, which pulls from the master again.
            self.pull_request_hold_service.notify_master_online()

    def on_master_offline(self) -> None:
        """``onMasterOffline``: close the channels to the master, stop syncing its metadata, stop
        replicating (no HA master address). (RocketMQ also closes the master's VIP channel;
        rmqlab's broker has none.)"""
        master_addr = self.slave_synchronize.master_addr
        if master_addr is not None:
            self.broker_outer_api.remoting_client.close_channel(master_addr)
        self.slave_synchronize.set_master_addr(None)
        self.ha_service.update_ha_master_address(None)

    async def on_master_online(self, master_addr: str, master_ha_addr: str | None) -> None:
        """``onMasterOnline``: the master's HA address (asked with EXCHANGE_BROKER_HA_INFO when the
        notification had none), and its flushed offset when ``syncMasterFlushOffsetWhenStartup``
        and none is known; then replicate from it, and wake the HA client (``wakeupHAClient``) so
        that it connects now rather than at its next retry (up to 5 s later)."""
        checkpoint = self.message_store.store_checkpoint
        need_sync_master_flush_offset = (checkpoint.master_flushed_offset == 0
                                         and self.message_store_config.syncMasterFlushOffsetWhenStartup)
        if master_ha_addr is None or need_sync_master_flush_offset:
            try:
                info = await self.broker_outer_api.retrieve_broker_ha_info(master_addr)
                if need_sync_master_flush_offset and info.master_flush_offset is not None:
                    log.info("Set master flush offset in slave to %s", info.master_flush_offset)
                    checkpoint.master_flushed_offset = info.master_flush_offset
                if master_ha_addr is None:
                    self.ha_service.update_ha_master_address(info.master_ha_address)
            except (RemotingError, ValueError, OSError) as e:
                log.error("retrieve master ha info exception, %s", e)
        if master_ha_addr is not None:
            self.ha_service.update_ha_master_address(master_ha_addr)
        if isinstance(self.ha_service, DefaultHAService):  # (controller mode has no slave acting master)
            self.ha_service.wakeup_ha_client()

    async def start_service(self, min_broker_id: int, min_broker_addr: str | None) -> None:
        """``startService``: the end of pre-online; record the smallest id, run the special
        services iff it is this broker's, register, serve."""
        log.info("%s start service, min broker id is %s, min broker addr: %s", self.broker_config.brokerName,
                 min_broker_id, min_broker_addr)
        self.min_broker_id_in_group = min_broker_id
        self.min_broker_addr_in_group = min_broker_addr
        self.change_special_service_status(self.broker_config.brokerId == min_broker_id)
        await self.register_broker_all(True, False, self.broker_config.forceRegister)
        self.is_isolated = False

    async def start_service_without_condition(self) -> None:
        """``startServiceWithoutCondition`` (``skipPreOnline``): serve as the configured role."""
        log.info("%s start service", self.broker_config.brokerName)
        self.change_special_service_status(self.broker_config.brokerId == MASTER_ID)
        await self.register_broker_all(True, False, self.broker_config.forceRegister)
        self.is_isolated = False

    def stop_service(self) -> None:
        """``stopService``: isolated again, the special services off."""
        log.info("%s stop service", self.broker_config.brokerName)
        self.is_isolated = True
        self.change_special_service_status(False)

    def _schedule_message_arriving(self, req) -> None:
        if req.topic == TopicValidator.RMQ_SYS_SCHEDULE_TOPIC:
            for task in self._deliver_tasks:
                if task.queue_id == req.queue_id:
                    task.notify_arriving()

    # -- scheduling ------------------------------------------------------------------------------
    def schedule_at_fixed_rate(self, name: str, initial_delay_ms: float, period_ms: float,
                               task: Callable[[], Any]) -> None:
        """A ``scheduledExecutorService.scheduleAtFixedRate`` task on the node's clock. A task
        that returns a coroutine runs as a node task, and its next run is scheduled once it ends
        (so it never overlaps itself). Exceptions are logged, as RocketMQ's runnables catch
        Throwable, and the schedule goes on."""
        if name in self._timers:
            raise ValueError(f"a task named {name!r} is already scheduled")

        def fire() -> None:
            if self._shutdown:
                return
            try:
                result = task()
            except Exception:
                log.exception("%s: scheduled task failed", name)
                result = None
            if inspect.isawaitable(result):
                async def run() -> None:
                    try:
                        await result
                    except Exception:
                        log.exception("%s: scheduled task failed", name)
                    finally:
                        if not self._shutdown:
                            self._timers[name] = self.node.call_later(period_ms, fire)
                self.node.spawn(run(), name=name)
            elif not self._shutdown:
                self._timers[name] = self.node.call_later(period_ms, fire)

        self._timers[name] = self.node.call_later(initial_delay_ms, fire)

    def _cancel_timers(self) -> None:
        for timer in self._timers.values():
            timer.cancel()
        self._timers.clear()

    # -- registration with the name servers ------------------------------------------------------
    def _topic_config_for_registration(self, tc: TopicConfig) -> TopicConfig:
        perm = self.broker_config.brokerPermission
        if not PermName.is_writeable(perm) or not PermName.is_readable(perm):
            # A broker without read or write permission advertises its topics with it masked.
            return TopicConfig(tc.topic_name, tc.read_queue_nums, tc.write_queue_nums, tc.perm & perm)
        return tc

    async def register_broker_all(self, check_order_config: bool, oneway: bool, force_register: bool) -> None:
        """``registerBrokerAll``: the whole topic table, to every name server."""
        tcm = self.topic_config_manager
        table = {name: self._topic_config_for_registration(tcm.topic_config_table[name])
                 for name in sorted(tcm.topic_config_table)}
        wrapper = TopicConfigAndMappingSerializeWrapper(topic_config_table=table, data_version=tcm.data_version.copy(),
                                                        mapping_data_version=self.topic_queue_mapping_data_version)
        if not force_register:
            bc = self.broker_config
            changed = await self.broker_outer_api.need_register(
                bc.brokerClusterName, self.broker_addr, bc.brokerName, bc.brokerId, tcm.data_version,
                bc.registerBrokerTimeoutMills)
            if not any(changed):
                return
        await self.do_register_broker_all(check_order_config, oneway, wrapper)

    def register_increment_broker_data(self, topic_configs: list[TopicConfig], data_version: DataVersion) -> None:
        """``registerIncrementBrokerData``: tell the name servers about changed topics now (runs
        as a node task; the caller does not wait)."""
        if not self._started or self._shutdown:
            return
        if self.is_isolated and self.broker_config.enableSlaveActingMaster:
            # Deviation: RocketMQ's registerIncrementBrokerData does not look at isIsolated, so a
            # topic created on a broker in pre-online (a client with a stale route) would register
            # it before its metadata is synced back; rmqlab keeps it isolated. (Controller mode
            # keeps RocketMQ's behaviour.)
            log.info("Skip register increment broker data for broker is isolated")
            return
        wrapper = TopicConfigAndMappingSerializeWrapper(
            topic_config_table={tc.topic_name: self._topic_config_for_registration(tc) for tc in topic_configs},
            data_version=data_version.copy(), mapping_data_version=self.topic_queue_mapping_data_version)
        self.node.spawn(self.do_register_broker_all(True, False, wrapper), name="register-increment-broker-data")

    async def do_register_broker_all(self, check_order_config: bool, oneway: bool,
                                     wrapper: TopicConfigAndMappingSerializeWrapper) -> None:
        if self._shutdown:
            log.info("BrokerController#doRegisterBrokerAll: broker has shutdown, no need to register any more.")
            return
        bc = self.broker_config
        async with self._register_lock:
            results = await self.broker_outer_api.register_broker_all(
                bc.brokerClusterName, self.broker_addr, bc.brokerName, bc.brokerId, self.ha_server_addr, wrapper, [],
                oneway, bc.registerBrokerTimeoutMills, bc.enableSlaveActingMaster,
                bc.brokerNotActiveTimeoutMillis if bc.enableSlaveActingMaster else None)
        self.handle_register_broker_result(results, check_order_config)

    def handle_register_broker_result(self, results: list, check_order_config: bool) -> None:
        """``handleRegisterBrokerResult``: the first answer names the master (for SlaveSynchronize)
        and the master's HA address (for a slave without haMasterAddress)."""
        for result in results:
            if result is None:
                continue
            if self.update_master_ha_server_addr_periodically and result.ha_server_addr is not None:
                self.ha_service.update_ha_master_address(result.ha_server_addr)
            self.slave_synchronize.set_master_addr(result.master_addr)
            if check_order_config and result.kv_table:
                self.topic_config_manager.update_order_topic_config(result.kv_table.keys())
            break

    # -- slave -----------------------------------------------------------------------------------
    async def _slave_sync_tick(self) -> None:
        if self.node.now_ms() - self._last_sync_time_ms >= self.slave_synchronize_period_ms:
            await self.slave_synchronize.sync_all()
            self._last_sync_time_ms = self.node.now_ms()

    # -- store estimates the processors need -----------------------------------------------------
    def estimate_in_mem_by_commit_offset(self, offset_py: int, max_offset_py: int) -> bool:
        """``DefaultMessageStore.estimateInMemByCommitOffset``: within the memory share from the end."""
        memory = int(self.total_physical_memory_size * (self.message_store_config.accessMessageInMemoryMaxRatio / 100.0))
        return (max_offset_py - offset_py) <= memory

    def check_in_disk_by_consume_offset(self, topic: str, queue_id: int, consume_offset: int) -> bool:
        """``DefaultMessageStore.checkInDiskByConsumeOffset``: the message exists and is too far
        behind the commitlog's end to be in memory."""
        store = self.message_store
        cq = store.consume_queue_table.get((topic, queue_id))
        if cq is None:
            return False
        units = cq.get_units(consume_offset, 1)
        if not units:
            return False
        return not self.estimate_in_mem_by_commit_offset(units[0][0], store.get_max_phy_offset())

    # -- stop ------------------------------------------------------------------------------------
    def is_shutdown(self) -> bool:
        """True once shutdown() began: scheduled work stops rescheduling itself."""
        return self._shutdown

    async def shutdown(self) -> None:
        """Clean stop: unregister, stop serving, persist, shut the store down (flushes it)."""
        bc = self.broker_config
        self._shutdown = True  # no task reschedules itself, no registration starts
        self._cancel_timers()
        if self.broker_pre_online_service is not None:
            self.broker_pre_online_service.shutdown()
        for task in self._deliver_tasks:
            task.stop()
        if self._started:
            self.transactional_message_check_service.shutdown()
            self.transactional_message_service.shutdown()
        if self.timer_message_store is not None:
            # "it is better to make sure the timerMessageStore shutdown firstly": the slot being
            # delivered ends, then the dequeue stops.
            await self.timer_message_store.stop_dequeue(self.node.sleep)
        if self._started:
            await self.broker_outer_api.unregister_broker_all(bc.brokerClusterName, self.broker_addr,
                                                              bc.brokerName, bc.brokerId)
        if self.remoting_server is not None:
            await self.remoting_server.shutdown()
        if self._started:
            self.pull_request_hold_service.shutdown()
            self.pop_message_processor.shutdown()
            self.consumer_order_info_manager.shutdown()
        if self.replicas_manager is not None:
            self.replicas_manager.shutdown()
        if self.ha_service is not None:
            self.ha_service.shutdown()
        if self.message_store is not None and self.message_store.is_dledger() and self.message_store.running:
            await self.message_store.commit_log.shutdown()  # the DLedger server; its store flushes
        if self._started:
            self.consumer_offset_manager.persist()
            self.schedule_message_service.persist()
            self.consumer_order_info_manager.persist()
        tms = self.timer_message_store
        if tms is not None and self.message_store is not None and self.message_store.running:
            tms.shutdown()  # its last checkpoint counts on the store's flush right below
        if self.message_store is not None:
            self.message_store.shutdown()
        if self._started:
            await self.broker_outer_api.shutdown()
        self.node.trace("log", level="INFO", message=f"The broker[{bc.brokerName}, {self.broker_addr}] shutdown",
                        logger="rmqlab.broker")

    def on_crash(self) -> None:
        """Process crash: nothing is flushed; the store keeps what reached the page cache."""
        self._shutdown = True
        self._cancel_timers()
        if self.replicas_manager is not None:
            self.replicas_manager.on_crash()
        if self.ha_service is not None:
            self.ha_service.on_crash()
        if self.timer_message_store is not None:
            self.timer_message_store.kill()
        if self.message_store is not None:
            self.message_store.kill()
