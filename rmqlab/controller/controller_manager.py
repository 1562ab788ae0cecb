"""ControllerManager: a controller node as a component (``controller/ControllerManager.java``), on either runtime.

Deployment as in RocketMQ's "主备自动切换模式部署" documentation ("Controller 部署": standalone with
``mqcontroller -c``, or embedded in a NameServer; "a single controller still performs broker
failover"); elections on the triggers a.i and a.ii of "一文详解 RocketMQ 如何利用 Raft 进行高可用保障" (a broker's
heartbeat lapsed, a set without a live master).

It wires together:

* :class:`DefaultBrokerHeartbeatManager` — replica liveness from BROKER_HEARTBEAT (904); every
  controller keeps its own (brokers send heartbeats to every reachable controller) and scans it
  every ``scanNotActiveBrokerInterval``;
* :class:`RaftController` — the Raft-replicated metadata (pysyncobj; RocketMQ's DLedgerController);
* a RemotingServer on this node's peer address (controllerDLegerPeers) with the
  :class:`ControllerRequestProcessor` and :class:`BrokerHousekeepingService`;
* a RemotingClient for NOTIFY_BROKER_ROLE_CHANGED (1008).

Flows (as in RocketMQ's ControllerManager):

* ``on_broker_inactive(cluster, brokerName, brokerId)`` — from the heartbeat scan, a closed
  channel, or (brokerId None) the leader's inactive-master scan. Only the leader acts: brokerId
  None re-elects at once; otherwise it asks for the set's replica info and re-elects only if the
  inactive replica is the master.
* ``trigger_elect_master(brokerName)`` — up to ``electMasterMaxRetryCount`` controller-triggered
  elections, each waited up to 3 s, stopping at the first SUCCESS.
* ``notify_broker_role_changed(entry)`` — after a successful election (here or through the
  processor) and with ``notifyBrokerRoleChanged``: a oneway NOTIFY_BROKER_ROLE_CHANGED (header
  masterAddress, masterEpoch, syncStateSetEpoch, masterBrokerId; body SyncStateSet) to every
  member of the set's BrokerMemberGroup that is active; per broker a newer epoch cancels a
  notification of an older one still under way (NotifyService).

Deviations: Java runs the listener, the elections and the notifications on thread pools; here
they are tasks of the node (deterministic in the simulator). Listener calls arrive synchronously
from the heartbeat manager and are turned into tasks at once.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from rmqlab.common.decision_points import DecisionPoints
from rmqlab.common.decision_points import of as decision_points_of
from rmqlab.config.addresses import parse_addr
from rmqlab.config.controller import ControllerConfig
from rmqlab.config.netty import CONTROLLER_LISTEN_PORT, NettyClientConfig, NettyServerConfig
from rmqlab.controller.broker_housekeeping_service import BrokerHousekeepingService
from rmqlab.controller.elect.impl.default_elect_policy import DefaultElectPolicy
from rmqlab.controller.impl.heartbeat.default_broker_heartbeat_manager import (CONTROLLER_LOGGER_NAME,
                                                                              DefaultBrokerHeartbeatManager)
from rmqlab.controller.impl.raft_controller import RaftController, bounded
from rmqlab.controller.processor.controller_request_processor import (CONTROLLER_REQUEST_CODES,
                                                                      ControllerRequestProcessor)
from rmqlab.controller.role_change_notify_entry import RoleChangeNotifyEntry
from rmqlab.remoting.protocol.body.sync_state_set import SyncStateSet
from rmqlab.remoting.protocol.header.controller import (ElectMasterRequestHeader, GetReplicaInfoRequestHeader,
                                                        GetReplicaInfoResponseHeader,
                                                        NotifyBrokerRoleChangedRequestHeader)
from rmqlab.remoting.remoting_client import RemotingClient
from rmqlab.remoting.remoting_command import RemotingCommand
from rmqlab.remoting.remoting_server import RemotingServer
from rmqlab.remoting.request_code import RequestCode
from rmqlab.remoting.response_code import ResponseCode
from rmqlab.runtime.component import Component
from rmqlab.runtime.node import Node

if TYPE_CHECKING:
    from rmqlab.config.loader import ControllerStartupConfig

# triggerElectMaster waits this long for each attempt.
ELECT_MASTER_WAIT_MS = 3000
# NOTIFY_BROKER_ROLE_CHANGED is sent oneway with this timeout.
NOTIFY_TIMEOUT_MS = 3000

_LEVELS = {"INFO": logging.INFO, "WARN": logging.WARNING, "ERROR": logging.ERROR}


class ControllerManager(Component):
    """A controller node (see the module docstring).

    ``store_path`` overrides controllerStorePath (where the Raft journal and dump live);
    ``raft_conf`` are pysyncobj SyncObjConf settings passed to the RaftComponent."""

    component_type = "controller"

    def __init__(self, controller_config: ControllerConfig, netty_server_config: NettyServerConfig | None = None,
                 netty_client_config: NettyClientConfig | None = None, *, store_path: str | None = None,
                 trace_raft_frames: bool = False, decision_points: DecisionPoints | None = None, **raft_conf: Any):
        if not controller_config.controllerDLegerPeers:
            raise ValueError("Attribute value controllerDLegerPeers of ControllerConfig is null or empty")
        if not controller_config.controllerDLegerSelfId:
            raise ValueError("Attribute value controllerDLegerSelfId of ControllerConfig is null or empty")
        self.controller_config = controller_config
        self.netty_server_config = netty_server_config or NettyServerConfig(listenPort=CONTROLLER_LISTEN_PORT)
        self.netty_client_config = netty_client_config or NettyClientConfig()
        self.store_path = store_path
        self.trace_raft_frames = trace_raft_frames
        self.decision_points = decision_points_of(decision_points)  # elect_master: the election's choice
        self.raft_conf = raft_conf
        self.self_addr = controller_config.get_self_addr()
        self.broker_housekeeping_service = BrokerHousekeepingService(self)
        self.heartbeat_manager: DefaultBrokerHeartbeatManager | None = None
        self.controller: RaftController | None = None
        self.remoting_server: RemotingServer | None = None
        self.remoting_client: RemotingClient | None = None
        self.notify_service = NotifyService(self)
        self.log = logging.getLogger(CONTROLLER_LOGGER_NAME)
        self._tasks: set[asyncio.Task] = set()

    @classmethod
    def from_startup_config(cls, config: ControllerStartupConfig, **options: Any) -> ControllerManager:
        """A controller from ``load_controller_config(...)`` (what ``mqcontroller -c file`` reads)."""
        return cls(config.controllerConfig, config.nettyServerConfig, config.nettyClientConfig, **options)

    # -- lifecycle (initialize + start) ----------------------------------------------------------
    async def start(self, node: Node) -> None:
        self.node = node
        self.log = node.log.getChild(CONTROLLER_LOGGER_NAME)
        self.heartbeat_manager = DefaultBrokerHeartbeatManager(
            self.controller_config, node.now_ms, channel_closer=lambda ch: ch.close("broker channel expired"),
            logger=self.log)
        policy = DefaultElectPolicy(self.heartbeat_manager.is_broker_active,
                                    self.heartbeat_manager.get_broker_live_info,
                                    elect_master=self.decision_points.elect_master)
        self.controller = RaftController(self.controller_config, self.heartbeat_manager.is_broker_active, policy,
                                         store_path=self.store_path, trace_frames=self.trace_raft_frames,
                                         logger=self.log, **self.raft_conf)
        self.heartbeat_manager.register_broker_lifecycle_listener(self.on_broker_inactive)
        self.controller.register_broker_lifecycle_listener(self.on_broker_inactive)
        host, port = parse_addr(self.self_addr)
        server = RemotingServer(node, host, port, channel_event_listener=self.broker_housekeeping_service,
                                channel_max_idle_seconds=self.netty_server_config.serverChannelMaxIdleTimeSeconds)
        processor = ControllerRequestProcessor(self)
        for code in CONTROLLER_REQUEST_CODES:
            server.register_processor(code, processor)
        self.remoting_server = server
        self.remoting_client = RemotingClient(node, self.netty_client_config.connectTimeoutMillis)
        await server.start()
        self.heartbeat_manager.start(node.call_later)
        await self.controller.startup(node)
        self._trace_log("INFO", self.boot_success_message())

    async def shutdown(self) -> None:
        if self.heartbeat_manager is not None:
            self.heartbeat_manager.shutdown()
        self._cancel_tasks()
        if self.controller is not None:
            await self.controller.shutdown()
        if self.remoting_client is not None:
            await self.remoting_client.shutdown()
        if self.remoting_server is not None:
            await self.remoting_server.shutdown()

    def on_crash(self) -> None:
        if self.heartbeat_manager is not None:
            self.heartbeat_manager.shutdown()
        self._cancel_tasks()
        if self.controller is not None:
            self.controller.on_crash()

    def _cancel_tasks(self) -> None:
        for task in list(self._tasks):
            task.cancel()
        self._tasks.clear()

    def _spawn(self, coro, name: str) -> asyncio.Task:
        task = self.node.spawn(coro, name=name)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task

    # -- what the CLI and labs read --------------------------------------------------------------
    @property
    def address(self) -> str:
        """Where brokers reach this controller: its controllerDLegerPeers address."""
        return self.self_addr

    def boot_success_message(self) -> str:
        """ControllerStartup's boot line (plus the address, as rmqlab's name server prints it)."""
        return f"The ControllerManager boot success. serializeType=JSON, address {self.address}"

    def is_leader_state(self) -> bool:
        return self.controller is not None and self.controller.is_leader_state()

    def status(self) -> dict[str, Any]:
        return self.controller.status()

    # -- flows (ControllerManager) -----------------------------------------------------------------
    def on_broker_inactive(self, cluster_name: str | None, broker_name: str, broker_id: int | None) -> None:
        """``onBrokerInactive`` (a BrokerLifecycleListener)."""
        if not self.is_leader_state():
            self.log.warning("The broker with brokerId: %s in broker-set: %s has been inactive", broker_id,
                             broker_name)
            return
        if broker_id is None:  # forced: the leader's scan found a set without a live master
            self._spawn(self.trigger_elect_master(broker_name), name=f"elect {broker_name}")
            return
        self._spawn(self._on_replica_inactive(broker_name, broker_id), name=f"inactive {broker_name}/{broker_id}")

    async def _on_replica_inactive(self, broker_name: str, broker_id: int) -> None:
        response = await self.controller.get_replica_info(GetReplicaInfoRequestHeader(broker_name))
        if response.code != ResponseCode.SUCCESS:
            self.log.error("Failed to get replica-info for broker-set: %s when OnBrokerInactive (%s %s)",
                           broker_name, response.code, response.remark)
            return
        header = GetReplicaInfoResponseHeader.decode(response)
        if header.master_broker_id != broker_id:
            self.log.warning("The broker with brokerId: %s in broker-set: %s has been inactive", broker_id,
                             broker_name)
            return
        self._trace_log("WARN", f"The master {broker_id} of broker-set {broker_name} is inactive: elect a new master")
        self.node.trace("controller.master_inactive", broker_set=broker_name, broker_id=broker_id)
        await self.trigger_elect_master(broker_name)

    async def trigger_elect_master(self, broker_name: str) -> RemotingCommand | None:
        """``triggerElectMaster``: the SUCCESS answer, or None after electMasterMaxRetryCount attempts."""
        for attempt in range(1, self.controller_config.electMasterMaxRetryCount + 1):
            if not self.is_leader_state():
                return None
            task = self._spawn(self.controller.elect_master(ElectMasterRequestHeader.of_controller_trigger(broker_name)),
                               name=f"electMaster {broker_name}")
            try:
                response = await bounded(self.node, task, ELECT_MASTER_WAIT_MS)
            except TimeoutError:
                self.log.error("Failed to trigger elect-master in broker-set: %s (attempt %s): timeout", broker_name,
                               attempt)
                continue
            if response.code == ResponseCode.SUCCESS:
                header_master = response.ext_fields.get("masterBrokerId") if response.ext_fields else None
                self._trace_log("INFO", f"Elect a new master in broker-set: {broker_name} done, new master "
                                        f"{header_master}, masterEpoch {response.ext_fields.get('masterEpoch')}")
                if self.controller_config.notifyBrokerRoleChanged:
                    self.notify_broker_role_changed(RoleChangeNotifyEntry.convert(response))
                return response
            self.log.warning("Elect-master in broker-set: %s failed (attempt %s): %s %s", broker_name, attempt,
                             response.code, response.remark)
        return None

    def notify_broker_role_changed(self, entry: RoleChangeNotifyEntry) -> None:
        """``notifyBrokerRoleChanged``: every active member of the group hears the new master."""
        group = entry.broker_member_group
        if group is None:
            return
        if entry.master_broker_id is None:
            self.log.warning("Notify broker role change failed, because member group is not null but the new "
                             "master brokerId is empty, entry:%s", entry)
            return
        for broker_id in sorted(group.broker_addrs):
            if self.heartbeat_manager.is_broker_active(group.cluster, group.broker_name, broker_id):
                self.notify_service.notify_broker(group.broker_addrs[broker_id], entry)

    async def do_notify_broker_role_changed(self, broker_addr: str, entry: RoleChangeNotifyEntry) -> None:
        """``doNotifyBrokerRoleChanged``: one oneway NOTIFY_BROKER_ROLE_CHANGED."""
        if not broker_addr:
            return
        self._trace_log("INFO", f"Try notify broker {broker_addr} that role changed: master {entry.master_broker_id} "
                                f"({entry.master_address}), masterEpoch {entry.master_epoch}")
        header = NotifyBrokerRoleChangedRequestHeader(entry.master_address, entry.master_epoch,
                                                      entry.sync_state_set_epoch, entry.master_broker_id)
        request = RemotingCommand.create_request_command(RequestCode.NOTIFY_BROKER_ROLE_CHANGED, header.to_ext_fields(),
                                                         SyncStateSet(entry.sync_state_set,
                                                                      entry.sync_state_set_epoch).encode())
        try:
            send = self.node.spawn(self.remoting_client.invoke_oneway(broker_addr, request), name="notify")
            await bounded(self.node, send, NOTIFY_TIMEOUT_MS)
        except asyncio.CancelledError:
            raise
        except Exception as e:
            self.log.error("Failed to notify broker %s that role changed: %s", broker_addr, e)

    def _trace_log(self, level: str, message: str) -> None:
        self.log.log(_LEVELS[level], "%s", message)
        self.node.trace("log", level=level, message=message, logger=CONTROLLER_LOGGER_NAME)


@dataclass
class _NotifyTask:
    master_epoch: int
    task: asyncio.Task


class NotifyService:
    """``ControllerManager.NotifyService``: one notification per broker address at a time; a newer
    master epoch cancels the older one still under way."""

    def __init__(self, manager: ControllerManager):
        self.manager = manager
        self.current_notify_futures: dict[str, _NotifyTask] = {}

    def notify_broker(self, broker_addr: str, entry: RoleChangeNotifyEntry) -> None:
        old = self.current_notify_futures.get(broker_addr)
        if old is not None and entry.master_epoch > old.master_epoch and not old.task.done():
            old.task.cancel()
        task = self.manager._spawn(self.manager.do_notify_broker_role_changed(broker_addr, entry),
                                   name=f"notify {broker_addr}")
        current = _NotifyTask(entry.master_epoch, task)
        self.current_notify_futures[broker_addr] = current

        def done(_: asyncio.Task) -> None:
            if self.current_notify_futures.get(broker_addr) is current:
                del self.current_notify_futures[broker_addr]

        task.add_done_callback(done)
