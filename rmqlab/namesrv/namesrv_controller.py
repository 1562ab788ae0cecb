"""NamesrvController: the name server as a component (mqnamesrv), on either runtime.

Implements ``namesrv/src/main/java/org/apache/rocketmq/namesrv/NamesrvController.java``
(RocketMQ's deployment guide "部署方式": "The Name Server boot success...", several name servers
side by side).

A name server is stateless apart from its route tables, which brokers rebuild by registering every
``registerNameServerPeriod`` (30 s): name servers never talk to each other. A cluster runs several
side by side; every broker registers with all of them and clients ask any (``-n "a;b"``), so losing
one loses nothing. After a restart a name server knows nothing until the brokers' next
registration.

``start(node)``:

1. builds the RouteInfoManager on the node's clock;
2. listens on ``NettyServerConfig.bindAddress:listenPort`` (127.0.0.1:9876 by default) with
   BrokerHousekeepingService as channel listener, GET_ROUTEINFO_BY_TOPIC served by the
   ClientRequestProcessor and everything else by the DefaultRequestProcessor;
3. scans for expired brokers every ``scanNotActiveBrokerInterval`` (5 s) after a first delay of
   5 s, at a fixed rate, closing the channel of each expired broker;
4. keeps a RemotingClient (``NettyClientConfig``) for the one request a name server sends:
   NOTIFY_MIN_BROKER_ID_CHANGE (905, RIP-32, only with ``notifyMinBrokerIdChanged=true``), oneway,
   to the members of a group whose smallest broker id changed. The RouteInfoManager queues the
   notices; ``send_min_broker_id_changes`` sends them after each registration, unregistration,
   closed channel and expiry scan, one oneway request per member (Java's
   ``invokeOneway(addr, request, 300)``; a member that cannot be reached is logged and skipped).

Trace: frames are traced by the remoting layer (a NOTIFY_MIN_BROKER_ID_CHANGE as a ``frame.send``
of the name server, with its header fields); the boot line, the route tables' notable events (a
broker registered, fenced, expired, removed; a group or cluster gone) and the write-permission
commands are ``log`` events (logger ``RocketmqNamesrv``), with RocketMQ's log wording.

Embedded controller ("Controller 嵌入 NameServer 部署" in RocketMQ's "主备自动切换模式部署"): with
``enableControllerInNamesrv=true`` the name server also runs a :class:`ControllerManager` from the
same file's ControllerConfig, in the same process. As in RocketMQ the controller serves on its own
peer address (controllerDLegerPeers), not on the name server's port, and the name server's own
state stays unreplicated: losing the controllers' majority stops failover, never routing.

Not here (RocketMQ has them): the key-value configuration (KVConfigManager and its file), TLS,
the zone RPC hook and the periodic printing of tables and water marks.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

from rmqlab.common.decision_points import DecisionPoints
from rmqlab.common.decision_points import of as decision_points_of
from rmqlab.config.controller import ControllerConfig
from rmqlab.config.namesrv import NamesrvConfig
from rmqlab.config.netty import NAMESRV_LISTEN_PORT, NettyClientConfig, NettyServerConfig
from rmqlab.namesrv.processor.client_request_processor import ClientRequestProcessor
from rmqlab.namesrv.processor.default_request_processor import DefaultRequestProcessor
from rmqlab.namesrv.routeinfo.broker_housekeeping_service import BrokerHousekeepingService
from rmqlab.namesrv.routeinfo.route_info_manager import LOG_LEVELS, NAMESRV_LOGGER_NAME, RouteInfoManager
from rmqlab.remoting.remoting_client import RemotingClient
from rmqlab.remoting.remoting_command import RemotingCommand
from rmqlab.remoting.remoting_server import RemotingServer
from rmqlab.remoting.request_code import RequestCode
from rmqlab.runtime.component import Component
from rmqlab.runtime.node import Node, Timer

if TYPE_CHECKING:
    from rmqlab.config.loader import NamesrvStartupConfig

# NamesrvController.startScheduleService: the first scan 5 s after start.
SCAN_NOT_ACTIVE_BROKER_INITIAL_DELAY_MS = 5000


class NamesrvController(Component):
    """The name server (see the module docstring)."""

    component_type = "namesrv"

    def __init__(self, namesrv_config: NamesrvConfig | None = None,
                 netty_server_config: NettyServerConfig | None = None,
                 controller_config: ControllerConfig | None = None, *,
                 netty_client_config: NettyClientConfig | None = None,
                 decision_points: DecisionPoints | None = None, **controller_options):
        self.namesrv_config = namesrv_config or NamesrvConfig()
        # acting_master for the route rewrite; the embedded controller's (elect_master) go to it.
        self.decision_points = decision_points_of(decision_points)
        self.netty_client_config = netty_client_config or NettyClientConfig()
        # NamesrvStartup sets 9876 before reading the file; NettyServerConfig's own default is 0
        # in Java (10911, the broker's, in rmqlab).
        self.netty_server_config = netty_server_config or NettyServerConfig(listenPort=NAMESRV_LISTEN_PORT)
        self.route_info_manager: RouteInfoManager | None = None
        self.remoting_server: RemotingServer | None = None
        self.remoting_client: RemotingClient | None = None
        self._notify_tasks: set[asyncio.Task] = set()
        self._shutting_down = False  # no more notices: the channels closing now are this server's own
        self.broker_housekeeping_service = BrokerHousekeepingService(self)
        self._scan_timer: Timer | None = None
        self._next_scan_at = 0.0
        self.controller_manager = None
        if self.namesrv_config.enableControllerInNamesrv:
            if controller_config is None:
                raise ValueError("enableControllerInNamesrv = true needs a ControllerConfig (the same file's "
                                 "controllerDLegerGroup / controllerDLegerPeers / controllerDLegerSelfId)")
            from rmqlab.controller.controller_manager import ControllerManager  # the controller imports remoting too

            if decision_points is not None:
                controller_options["decision_points"] = decision_points
            self.controller_manager = ControllerManager(controller_config, self.netty_server_config,
                                                        **controller_options)

    @classmethod
    def from_startup_config(cls, config: NamesrvStartupConfig, **controller_options) -> NamesrvController:
        """A name server from ``load_namesrv_config(...)`` (what ``mqnamesrv -c file`` reads);
        `decision_points` (the simulator's) go to its route tables and its embedded controller,
        `controller_options` to the latter."""
        return cls(config.namesrvConfig, config.nettyServerConfig, config.controllerConfig,
                   netty_client_config=config.nettyClientConfig, **controller_options)

    # -- lifecycle ----------------------------------------------------------------------------
    async def start(self, node: Node) -> None:
        self.node = node
        self._shutting_down = False
        self.route_info_manager = RouteInfoManager(self.namesrv_config, node.now_ms, logger=node.log,
                                                   on_event=self._trace_event, on_trace=node.trace,
                                                   acting_master=self.decision_points.acting_master)
        server = RemotingServer(node, self.netty_server_config.bindAddress, self.netty_server_config.listenPort,
                                channel_event_listener=self.broker_housekeeping_service,
                                channel_max_idle_seconds=self.netty_server_config.serverChannelMaxIdleTimeSeconds)
        server.register_processor(RequestCode.GET_ROUTEINFO_BY_TOPIC, ClientRequestProcessor(self))
        server.register_default_processor(DefaultRequestProcessor(self))
        self.remoting_server = server
        # Connects only when there is something to send (no timer, no connection before).
        self.remoting_client = RemotingClient(node, self.netty_client_config.connectTimeoutMillis)
        await server.start()
        # scheduleAtFixedRate: the n-th scan is due at start + 5 s + n * interval, however long
        # the previous one took.
        self._next_scan_at = node.now_ms() + SCAN_NOT_ACTIVE_BROKER_INITIAL_DELAY_MS
        self._scan_timer = node.call_later(SCAN_NOT_ACTIVE_BROKER_INITIAL_DELAY_MS, self._scan_not_active_broker)
        if self.controller_manager is not None:
            # NamesrvController.start: the embedded ControllerManager starts with the name server.
            await self.controller_manager.start(node)
        # Traced for labs; the process runner (run_process) writes it to the log and stdout.
        self._trace_event("INFO", self.boot_success_message())

    async def shutdown(self) -> None:
        self._shutting_down = True
        self._cancel_scan()
        self._cancel_notify_tasks()
        if self.controller_manager is not None:
            await self.controller_manager.shutdown()
        if self.remoting_client is not None:
            await self.remoting_client.shutdown()
        if self.remoting_server is not None:
            await self.remoting_server.shutdown()

    def on_crash(self) -> None:
        # The tables were only in memory: they die with the process (brokers re-register); the
        # embedded controller's Raft journal stays on disk.
        self._shutting_down = True
        self._cancel_scan()
        self._cancel_notify_tasks()
        if self.controller_manager is not None:
            self.controller_manager.on_crash()

    def _cancel_scan(self) -> None:
        if self._scan_timer is not None:
            self._scan_timer.cancel()
            self._scan_timer = None

    def _cancel_notify_tasks(self) -> None:
        for task in list(self._notify_tasks):
            task.cancel()
        self._notify_tasks.clear()

    # -- what the CLI and labs read -------------------------------------------------------------
    @property
    def address(self) -> str:
        """``host:port`` this name server listens on (the bound port once started)."""
        port = self.remoting_server.port if self.remoting_server is not None else self.netty_server_config.listenPort
        return f"{self.netty_server_config.bindAddress}:{port}"

    def boot_success_message(self) -> str:
        """NamesrvStartup's boot line. Like Java (NettyRemotingServer writes the bound port back
        into its config), the port is the bound one when 0 was configured."""
        return f"The Name Server boot success. serializeType=JSON, address {self.address}"

    # -- periodic scan --------------------------------------------------------------------------
    def _scan_not_active_broker(self) -> None:
        node = self.node
        try:
            for live in self.route_info_manager.scan_not_active_broker():
                if live.channel is not None:
                    live.channel.close("broker channel expired")  # RemotingHelper.closeChannel
            self.send_min_broker_id_changes()
        except Exception:
            # Java's scan catches everything too: one bad entry must not stop future scans.
            node.log.exception("scanNotActiveBroker exception")
        self._next_scan_at += self.namesrv_config.scanNotActiveBrokerInterval
        self._scan_timer = node.call_later(max(0.0, self._next_scan_at - node.now_ms()), self._scan_not_active_broker)

    # -- NOTIFY_MIN_BROKER_ID_CHANGE (RIP-32) ----------------------------------------------------
    def send_min_broker_id_changes(self) -> None:
        """Send every NOTIFY_MIN_BROKER_ID_CHANGE the route tables queued (module docstring): one
        oneway request per target, each in a task of its own, so the caller does not wait."""
        if self.route_info_manager is None:
            return
        changes = self.route_info_manager.take_min_broker_id_changes()
        if self._shutting_down:
            return  # the server's own channels closing as it stops: nobody left to tell
        for change in changes:
            for broker_addr in change.broker_addrs:
                # One command per target: sending sets the command's opaque for its connection.
                request = RemotingCommand.create_request_command(RequestCode.NOTIFY_MIN_BROKER_ID_CHANGE,
                                                                 change.header.to_ext_fields())
                task = self.node.spawn(self._notify_min_broker_id_change(broker_addr, request),
                                       name=f"notify-min-broker-id {broker_addr}")
                self._notify_tasks.add(task)
                task.add_done_callback(self._notify_tasks.discard)

    async def _notify_min_broker_id_change(self, broker_addr: str, request: RemotingCommand) -> None:
        try:
            await self.remoting_client.invoke_oneway(broker_addr, request)
        except asyncio.CancelledError:
            raise
        except Exception as e:  # RemotingConnectError, OSError: the member is gone; nothing to retry
            self.node.log.warning("notify min broker id change to %s failed: %s", broker_addr, e)

    # -- logging ------------------------------------------------------------------------------
    def _trace_event(self, level: str, message: str) -> None:
        self.node.trace("log", level=level, message=message, logger=NAMESRV_LOGGER_NAME)

    def log_event(self, level: str, message: str) -> None:
        """A notable line: to the node's log and, as a ``log`` event, to the trace."""
        self.node.log.log(LOG_LEVELS[level], "%s", message)
        self._trace_event(level, message)
