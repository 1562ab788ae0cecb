"""ReplicasManager: the broker's side of controller mode (the controller design
document, docs/en/controller/design.md, "ReplicasManager" / "online process"; the election triggers
of "一文详解 RocketMQ 如何利用 Raft 进行高可用保障").

Mirrors ``broker/src/main/java/org/apache/rocketmq/broker/controller/ReplicasManager.java`` on a
Node (timers and tasks on the node's clock instead of thread pools).

Theory of operation
-------------------
With ``enableControllerMode=true`` neither ``brokerId`` nor ``brokerRole`` of the configuration
decides anything: the controller does. From construction until it reaches RUNNING the broker is
*fenced* (isolated: no NameServer registration, no heartbeat; its store refuses writes).

``start()`` runs ``start_basic_service`` and, if that fails, retries it every 5 s in the background:

1. INITIAL → FIRST_TIME_SYNC_CONTROLLER_METADATA_DONE: find the controller leader by asking any
   reachable controller (CONTROLLER_GET_METADATA_INFO, up to 3 tries 1 s apart); the leader is
   looked up again every ``syncControllerMetadataPeriod``.
2. → REGISTER_TO_CONTROLLER_DONE: register (up to 5 attempts, random pause < 1 s), driven by the
   identity files (:mod:`rmqlab.broker.controller.broker_metadata`): without them the broker asks
   CONTROLLER_GET_NEXT_BROKER_ID, writes ``brokerIdentity-temp`` with that id and a check code,
   claims it with CONTROLLER_APPLY_BROKER_ID, then writes ``brokerIdentity`` and deletes the temp
   file; with ``brokerIdentity`` it goes straight to CONTROLLER_REGISTER_BROKER. Ids start at 1
   and never change, across restarts too. If the register answer names a master, the broker
   becomes master (it is that id) or slave now.
3. → RUNNING: one heartbeat to every reachable controller; if no master is known the broker
   nominates itself (CONTROLLER_ELECT_MASTER, broker trigger: on a never-elected set the first
   broker to ask becomes master — the article's trigger b.ii). Then it is unfenced.
4. Every ``syncBrokerMetadataPeriod`` (first after 3 s) it polls CONTROLLER_GET_REPLICA_INFO, so a
   lost notification cannot leave it behind: a newer master epoch makes it master or slave; a
   newer epoch without a master makes it nominate itself (trigger b.i); the same epoch
   while master adopts a newer SyncStateSet.

Role changes come from the register answer, the election answer, the poll, or the controller's
NOTIFY_BROKER_ROLE_CHANGED (``change_broker_role``); each acts only on a master epoch newer than
the one it holds, and one at a time:

* ``change_to_master``: adopt the SyncStateSet, ``AutoSwitchHAService.change_to_master(epoch)``
  (cut a torn tail to the last message boundary, append ``<epoch, maxPhyOffset>`` to the epoch
  file, wait for the dispatch, serve HA), ``brokerId := 0``, role SYNC_MASTER, the master-only
  services on, the periodic SyncStateSet check (shrink, every ``checkSyncStateSetPeriod``), and a
  NameServer registration as id 0. A re-election while already master only appends the epoch.
* ``change_to_slave``: role SLAVE, the master-only services off, ``brokerId := controller id``,
  SlaveSynchronize from the new master, ``AutoSwitchHAService.change_to_slave`` (its client
  connects once the NameServer registration returns the master's HA address, then handshakes,
  truncates to the consistent point and catches up), and a NameServer registration under the
  controller id.

Either way the topic table's DataVersion takes the epoch as its stateVersion, which fences a stale
master at the NameServer (``RouteInfoManager.registerBroker`` ignores a registration whose
stateVersion is older than the stored one).

As master, the HA service proposes SyncStateSet changes (a slave caught up, a slave lost); the
ReplicasManager sends them as CONTROLLER_ALTER_SYNC_STATE_SET with its masterEpoch and
syncStateSetEpoch and adopts the controller's answer (``AutoSwitchHAService.set_sync_state_set``).

Heartbeats: every ``brokerHeartbeatInterval`` while not isolated, BROKER_HEARTBEAT (oneway) to every
reachable controller with the controller id, last epoch, max and confirm offsets, timeout and
election priority.

Deviations from RocketMQ (each commented where it happens): fencing is modelled by the broker's
``is_isolated`` flag plus the role SLAVE the broker starts in (rmqlab's store has no fenced running
flag; a SLAVE store refuses every put, as a fenced one does); the heartbeat task lives here
(RocketMQ schedules it in BrokerController.scheduleSendHeartbeat); ``fetchControllerAddrByDnsLookup``
is not supported (the address is used as given); a metadata poll that finds no master releases the
role-change lock before it nominates the broker (RocketMQ holds its monitor across the election
request; the epoch checks make the outcome the same).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from enum import Enum
from typing import TYPE_CHECKING, Any

from rmqlab.broker.broker_outer_api import MQBrokerException
from rmqlab.broker.controller.broker_metadata import BrokerMetadata, TempBrokerMetadata
from rmqlab.config.broker import MASTER_ID, BrokerRole
from rmqlab.remoting.protocol.body.sync_state_set import SyncStateSet
from rmqlab.remoting.protocol.epoch_entry import EpochEntry
from rmqlab.remoting.response_code import ResponseCode

if TYPE_CHECKING:
    from rmqlab.broker.broker_controller import BrokerController
    from rmqlab.ha.autoswitch import AutoSwitchHAService
    from rmqlab.runtime.node import Timer

log = logging.getLogger("rmqlab.broker")

RETRY_INTERVAL_MS = 5_000                  # RETRY_INTERVAL_SECOND: start_basic_service retries
CONTROLLER_METADATA_TRIES = 3              # schedulingSyncControllerMetadata: 3 tries ...
CONTROLLER_METADATA_RETRY_MS = 1_000       # ... 1 s apart
REGISTER_ATTEMPTS = 5                      # register() attempts per start_basic_service
REGISTER_PAUSE_BOUND_MS = 1_000            # random pause < 1 s between them
FIRST_DELAY_MS = 3_000                     # first run of the metadata, SyncStateSet and slave-sync tasks
SCAN_CONTROLLERS_PERIOD_MS = 3_000         # scanAvailableControllerAddresses
SLAVE_SYNC_PERIOD_MS = 3_000               # handleSlaveSynchronize's task ...
SLAVE_SYNC_ALL_AFTER_MS = 10_000           # ... runs syncAll when this long has passed
METADATA_NOT_EXIST_PAUSE_MS = 2_000        # after re-registering on CONTROLLER_BROKER_METADATA_NOT_EXIST
FIRST_HEARTBEAT_DELAY_MS = 1_000           # BrokerController.scheduleSendHeartbeat


class State(Enum):
    INITIAL = "INITIAL"
    FIRST_TIME_SYNC_CONTROLLER_METADATA_DONE = "FIRST_TIME_SYNC_CONTROLLER_METADATA_DONE"
    REGISTER_TO_CONTROLLER_DONE = "REGISTER_TO_CONTROLLER_DONE"
    RUNNING = "RUNNING"
    SHUTDOWN = "SHUTDOWN"


class RegisterState(Enum):
    INITIAL = "INITIAL"
    CREATE_TEMP_METADATA_FILE_DONE = "CREATE_TEMP_METADATA_FILE_DONE"
    CREATE_METADATA_FILE_DONE = "CREATE_METADATA_FILE_DONE"
    REGISTERED = "REGISTERED"


class _FixedRateTask:
    """``scheduleAtFixedRate`` on the node's clock; a step that returns an awaitable runs to its
    end before the next run (a scheduled executor never overlaps a task with itself). The runs keep
    their slots (initial delay + n × period), as ScheduledThreadPoolExecutor's fixed rate does: a
    step that waits (a CONTROLLER_GET_REPLICA_INFO to an unreachable leader waits out its 3 s
    timeout) does not push the later runs back; one that overruns its slot is followed at once."""

    def __init__(self, manager: ReplicasManager, name: str, initial_delay_ms: float, period_ms: float,
                 step: Callable[[], Awaitable[Any] | None]):
        self.manager, self.name, self.period_ms, self.step = manager, name, period_ms, step
        self.cancelled = False
        self._timer: Timer | None = None
        self._due_ms = 0.0       # the slot of the armed run, on the node's monotonic clock
        self._next_due_ms = 0.0  # the slot after it (Java: time += period)
        self._arm(initial_delay_ms)

    def _clock_ms(self) -> float:
        return self.manager.node.monotonic_s() * 1000.0

    def _arm(self, delay_ms: float) -> None:
        self._due_ms = self._clock_ms() + delay_ms
        self._timer = self.manager.node.call_later(delay_ms, self._fire)

    def _fire(self) -> None:
        if self.cancelled:
            return
        self._timer = None
        self._next_due_ms = self._due_ms + self.period_ms
        try:
            result = self.step()
        except Exception:  # a scheduled executor's task logs and keeps its schedule
            log.exception("ReplicasManager %s failed", self.name)
            result = None
        if result is None:
            # It took no time: the next slot is one period away.
            if not self.cancelled:
                self._arm(self.period_ms)
            return

        async def run() -> None:
            try:
                await result
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("ReplicasManager %s failed", self.name)
            if not self.cancelled:
                self._arm(max(0.0, self._next_due_ms - self._clock_ms()))

        self.manager._spawn(run(), self.name)

    def cancel(self) -> None:
        self.cancelled = True
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None


class ReplicasManager:
    """See the module docstring. Built by BrokerController in controller mode, after its store and
    AutoSwitchHAService; ``start()`` is awaited during the broker's start."""

    def __init__(self, broker: BrokerController, ha_service: AutoSwitchHAService):
        self.broker = broker
        self.node = broker.node
        self.ha_service = ha_service
        self.broker_config = broker.broker_config
        self.message_store_config = broker.message_store_config
        self.broker_outer_api = broker.broker_outer_api
        self.broker_address = broker.broker_addr
        identity = self.message_store_config.get_store_path_broker_identity()
        self.broker_metadata = BrokerMetadata(identity)
        self.temp_broker_metadata = TempBrokerMetadata(identity + "-temp")

        self.controller_addresses: list[str] = []
        self.available_controller_addresses: dict[str, bool] = {}  # insertion-ordered, like a set
        self.controller_leader_address = ""
        self.state = State.INITIAL
        self.register_state = RegisterState.INITIAL

        self.broker_controller_id: int | None = None
        self.master_broker_id: int | None = None
        self.master_address = ""
        self.master_epoch = 0
        self.sync_state_set: set[int] = set()
        self.sync_state_set_epoch = 0
        self.last_sync_time_ms = self.node.now_ms()

        self._lock = asyncio.Lock()  # Java: synchronized (this) around every role change
        self._tasks: dict[str, _FixedRateTask] = {}
        self._spawned: set[asyncio.Task] = set()
        self._listener_registered = False
        self._last_role: str | None = None  # for the "role" trace event

    # -- small helpers ---------------------------------------------------------------------------
    def _spawn(self, coro: Awaitable[Any], name: str) -> asyncio.Task:
        task = self.node.spawn(coro, name=f"ReplicasManager {name}")
        self._spawned.add(task)
        task.add_done_callback(self._spawned.discard)
        return task

    def _schedule(self, name: str, initial_delay_ms: float, period_ms: float,
                  step: Callable[[], Awaitable[Any] | None]) -> None:
        self._cancel(name)
        if self.state is not State.SHUTDOWN:
            self._tasks[name] = _FixedRateTask(self, name, initial_delay_ms, period_ms, step)

    def _cancel(self, name: str) -> None:
        task = self._tasks.pop(name, None)
        if task is not None:
            task.cancel()

    def _set_state(self, state: State) -> None:
        self.node.trace("state", machine="ReplicasManager.State", **{"from": self.state.value, "to": state.value})
        self.state = state
        log.info("ReplicasManager state change to: %s", state.value)

    def _set_register_state(self, state: RegisterState) -> None:
        if state is not self.register_state:
            self.node.trace("state", machine="ReplicasManager.RegisterState",
                            **{"from": self.register_state.value, "to": state.value})
        self.register_state = state

    def _role_name(self) -> str:
        role = self.message_store_config.brokerRole
        return getattr(role, "name", str(role))

    # -- lifecycle -------------------------------------------------------------------------------
    async def start(self) -> None:
        """``start``: the controller addresses, their reachability scan, then
        ``start_basic_service``; if it fails, a background task retries it every 5 s."""
        if self.state is not State.INITIAL:
            self._set_state(State.INITIAL)
        self.update_controller_addr()
        await self.scan_available_controller_addresses()
        self._schedule("scanAvailableControllerAddresses", SCAN_CONTROLLERS_PERIOD_MS, SCAN_CONTROLLERS_PERIOD_MS,
                       self.scan_available_controller_addresses)
        if not await self.start_basic_service():
            log.error("Failed to start replicasManager")
            self._spawn(self._retry_start(), "start-retry")

    async def _retry_start(self) -> None:
        retry_times = 0
        while True:
            await self.node.sleep(RETRY_INTERVAL_MS)
            if self.state is State.SHUTDOWN:
                return
            retry_times += 1
            log.warning("Failed to start replicasManager, retry times:%d, current state:%s, try it again",
                        retry_times, self.state.value)
            if await self.start_basic_service():
                log.info("Start replicasManager success, retry times:%d", retry_times)
                return

    async def start_basic_service(self) -> bool:
        """``startBasicService``: INITIAL → FIRST_TIME_SYNC_CONTROLLER_METADATA_DONE →
        REGISTER_TO_CONTROLLER_DONE → RUNNING, resuming where the last attempt stopped."""
        if self.state is State.SHUTDOWN:
            return False
        if self.state is State.INITIAL:
            if not await self.scheduling_sync_controller_metadata():
                return False
            self._set_state(State.FIRST_TIME_SYNC_CONTROLLER_METADATA_DONE)
        if self.state is State.FIRST_TIME_SYNC_CONTROLLER_METADATA_DONE:
            for _ in range(REGISTER_ATTEMPTS):
                if await self.register():
                    self._set_state(State.REGISTER_TO_CONTROLLER_DONE)
                    break
                # After every failed attempt (the last one too, as in Java): a random pause spreads
                # the concurrent registrations of a set's brokers apart.
                await self.node.sleep(self.node.random.randrange(REGISTER_PAUSE_BOUND_MS))
                if self.state is State.SHUTDOWN:
                    return False
            if self.state is not State.REGISTER_TO_CONTROLLER_DONE:
                log.error("Register to broker failed 5 times")
                return False
        if self.state is State.REGISTER_TO_CONTROLLER_DONE:
            # The periodic heartbeat skips an isolated broker, so this one is sent by hand.
            self.send_heartbeat_to_controller()
            if self.master_broker_id is not None or await self.broker_elect():
                log.info("Master in this broker set is elected, masterBrokerId: %s, masterBrokerAddr: %s",
                         self.master_broker_id, self.master_address)
                self._set_state(State.RUNNING)
                self.set_fenced(False)
            else:
                return False
        self.scheduling_sync_broker_metadata()
        self._schedule("sendHeartbeat", FIRST_HEARTBEAT_DELAY_MS, self.broker_config.brokerHeartbeatInterval,
                       self._heartbeat_tick)
        if not self._listener_registered:
            self.ha_service.register_sync_state_set_changed_listener(self._on_sync_state_set_changed)
            self._listener_registered = True
        return True

    def shutdown(self) -> None:
        """``shutdown``: stop every task; the identity files stay."""
        if self.state is not State.SHUTDOWN:
            self._set_state(State.SHUTDOWN)
        self._stop_tasks()

    def on_crash(self) -> None:
        """The process died: the same stop, but a dead node traces nothing."""
        self.state = State.SHUTDOWN
        self._stop_tasks()

    def _stop_tasks(self) -> None:
        self.register_state = RegisterState.INITIAL
        for name in list(self._tasks):
            self._cancel(name)
        try:
            current = asyncio.current_task()
        except RuntimeError:  # on_crash runs outside the loop
            current = None
        for task in list(self._spawned):
            if task is not current:
                task.cancel()

    def set_fenced(self, fenced: bool) -> None:
        """``setFenced``: isolate the broker (no NameServer registration, no heartbeats) until the
        controller has given it a role. RocketMQ also marks the store fenced; rmqlab's broker starts
        as SLAVE in controller mode, so its store refuses writes until a role change (see the
        module docstring)."""
        self.broker.is_isolated = fenced

    # -- controller addresses and leader ------------------------------------------------------------
    def update_controller_addr(self) -> None:
        """``updateControllerAddr``: ``controllerAddr`` split on ';'."""
        if self.broker_config.fetchControllerAddrByDnsLookup:
            # Deviation: no DNS on the simulator; the configured name is used as an address.
            log.warning("fetchControllerAddrByDnsLookup is not supported by rmqlab; using controllerAddr as given")
        self.controller_addresses = self.broker_config.get_controller_addr_list()

    async def scan_available_controller_addresses(self) -> None:
        """``scanAvailableControllerAddresses``: keep the controllers a connection reaches now."""
        for addr in list(self.available_controller_addresses):
            if addr not in self.controller_addresses:
                log.warning("scanAvailableControllerAddresses remove invalid address %s", addr)
                del self.available_controller_addresses[addr]

        async def check(addr: str) -> None:
            if await self.broker_outer_api.check_address_reachable(addr):
                self.available_controller_addresses.setdefault(addr, True)
            elif self.available_controller_addresses.pop(addr, None) is not None:
                log.warning("scanAvailableControllerAddresses remove unconnected address %s", addr)

        # Java scans on a thread pool; the checks run side by side here too.
        await asyncio.gather(*(check(addr) for addr in self.controller_addresses))

    def get_available_controller_addresses(self) -> list[str]:
        return list(self.available_controller_addresses)

    async def scheduling_sync_controller_metadata(self) -> bool:
        """``schedulingSyncControllerMetadata``: find the leader (3 tries, 1 s apart), then keep it
        fresh every ``syncControllerMetadataPeriod`` (first after 3 s)."""
        for _ in range(CONTROLLER_METADATA_TRIES):
            if await self.update_controller_metadata():
                self._schedule("updateControllerMetadata", FIRST_DELAY_MS,
                               self.broker_config.syncControllerMetadataPeriod, self.update_controller_metadata)
                return True
            await self.node.sleep(CONTROLLER_METADATA_RETRY_MS)
        log.error("Failed to init controller metadata, maybe the controllers in %s is not available",
                  self.controller_addresses)
        return False

    async def update_controller_metadata(self) -> bool:
        """``updateControllerMetadata``: the first reachable controller that names a leader."""
        for addr in list(self.available_controller_addresses):
            try:
                header = await self.broker_outer_api.get_controller_meta_data(addr)
            except Exception as e:
                log.error("Failed to update controller metadata from %s: %s", addr, e)
                continue
            if header.controller_leader_address:
                if header.controller_leader_address != self.controller_leader_address:
                    log.info("Update controller leader address to %s", header.controller_leader_address)
                self.controller_leader_address = header.controller_leader_address
                return True
        return False

    # -- registration (``ReplicasManager.register``) ------------------------------------------------
    async def register(self) -> bool:
        """``register``: one attempt of the register flow, resuming from the identity files."""
        try:
            self.confirm_now_registering_state()
            log.info("Confirm now register state: %s", self.register_state.value)
            if not self.check_metadata_valid():
                log.error("Check and find that metadata/tempMetadata invalid, you can modify the broker config to "
                          "make them valid")
                return False
            if self.register_state is RegisterState.INITIAL:
                next_broker_id = await self.get_next_broker_id()
                if next_broker_id is None or not self.create_temp_metadata_file(next_broker_id):
                    log.error("Failed to create temp metadata file, nextBrokerId: %s", next_broker_id)
                    return False
                self._set_register_state(RegisterState.CREATE_TEMP_METADATA_FILE_DONE)
                log.info("Register state change to %s, temp metadata: %r", self.register_state.value,
                         self.temp_broker_metadata)
            if self.register_state is RegisterState.CREATE_TEMP_METADATA_FILE_DONE:
                if not await self.apply_broker_id():
                    # The id is taken (another broker claimed it first): start over from a new id.
                    self.temp_broker_metadata.clear()
                    self._set_register_state(RegisterState.INITIAL)
                    return False
                if not self.create_metadata_file_and_delete_temp():
                    log.error("Failed to create metadata file and delete temp metadata file, temp metadata: %r",
                              self.temp_broker_metadata)
                    return False
                self._set_register_state(RegisterState.CREATE_METADATA_FILE_DONE)
            if self.register_state is RegisterState.CREATE_METADATA_FILE_DONE:
                if not await self.register_broker_to_controller():
                    log.error("Failed to register broker to controller")
                    return False
                self._set_register_state(RegisterState.REGISTERED)
                log.info("Register state change to: REGISTERED, masterBrokerId: %s, masterBrokerAddr: %s",
                         self.master_broker_id, self.master_address)
            return True
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception("Failed to register broker to controller")
            return False

    def confirm_now_registering_state(self) -> None:
        """``confirmNowRegisteringState``: the identity file wins, then the temp file."""
        try:
            self.broker_metadata.read_from_file()
        except ValueError as e:
            log.error("Read metadata file failed: %s", e)
        if self.broker_metadata.is_loaded():
            self._set_register_state(RegisterState.CREATE_METADATA_FILE_DONE)
            self._set_broker_controller_id(self.broker_metadata.broker_id)
            return
        try:
            self.temp_broker_metadata.read_from_file()
        except ValueError as e:
            log.error("Read temp metadata file failed: %s", e)
        if self.temp_broker_metadata.is_loaded():
            self._set_register_state(RegisterState.CREATE_TEMP_METADATA_FILE_DONE)

    def check_metadata_valid(self) -> bool:
        """``checkMetadataValid``: a file written for another cluster or broker set stops the flow."""
        bc = self.broker_config
        if self.register_state is RegisterState.CREATE_TEMP_METADATA_FILE_DONE:
            meta, what = self.temp_broker_metadata, "broker temp metadata"
        elif self.register_state is RegisterState.CREATE_METADATA_FILE_DONE:
            meta, what = self.broker_metadata, "broker metadata"
        else:
            return True
        if meta.cluster_name != bc.brokerClusterName:
            log.error("The clusterName: %s in %s is different from the clusterName: %s in broker config",
                      meta.cluster_name, what, bc.brokerClusterName)
            return False
        if meta.broker_name != bc.brokerName:
            log.error("The brokerName: %s in %s is different from the brokerName: %s in broker config",
                      meta.broker_name, what, bc.brokerName)
            return False
        return True

    async def get_next_broker_id(self) -> int | None:
        try:
            header = await self.broker_outer_api.get_next_broker_id(
                self.broker_config.brokerClusterName, self.broker_config.brokerName, self.controller_leader_address)
            return header.next_broker_id
        except Exception as e:
            log.error("fail to get next broker id from controller: %s", e)
            return None

    def create_temp_metadata_file(self, broker_id: int) -> bool:
        """The temp file with the id to claim and the check code ``brokerAddress;currentTimeMillis``."""
        register_check_code = f"{self.broker_address};{self.node.now_ms()}"
        try:
            self.temp_broker_metadata.update_and_persist(self.broker_config.brokerClusterName,
                                                         self.broker_config.brokerName, broker_id, register_check_code)
            return True
        except OSError as e:
            log.error("update and persist temp broker metadata file failed: %s", e)
            self.temp_broker_metadata.clear()
            return False

    async def apply_broker_id(self) -> bool:
        try:
            await self.broker_outer_api.apply_broker_id(
                self.broker_config.brokerClusterName, self.broker_config.brokerName,
                self.temp_broker_metadata.broker_id, self.temp_broker_metadata.register_check_code,
                self.controller_leader_address)
            return True
        except Exception as e:
            log.error("fail to apply broker id: %s: %s", self.temp_broker_metadata.broker_id, e)
            return False

    def create_metadata_file_and_delete_temp(self) -> bool:
        try:
            self.broker_metadata.update_and_persist(self.broker_config.brokerClusterName,
                                                    self.broker_config.brokerName, self.temp_broker_metadata.broker_id)
            self.temp_broker_metadata.clear()
            self._set_broker_controller_id(self.broker_metadata.broker_id)
            return True
        except OSError as e:
            log.error("fail to create metadata file: %s", e)
            self.broker_metadata.clear()
            return False

    def _set_broker_controller_id(self, broker_id: int | None) -> None:
        self.broker_controller_id = broker_id
        self.ha_service.set_local_broker_id(broker_id)

    async def register_broker_to_controller(self) -> bool:
        """CONTROLLER_REGISTER_BROKER; a master named in the answer gives this broker its role now."""
        try:
            header, sync_state_set = await self.broker_outer_api.register_broker_to_controller(
                self.broker_config.brokerClusterName, self.broker_config.brokerName, self.broker_controller_id,
                self.broker_address, self.controller_leader_address)
            if header.master_broker_id is not None:
                await self._follow(header, sync_state_set)
            return True
        except asyncio.CancelledError:
            raise
        except Exception as e:
            log.error("fail to send registerBrokerToController request to controller: %s", e)
            return False

    # -- self-nomination (the Raft article's triggers b.i and b.ii) --------------------------------
    async def broker_elect(self) -> bool:
        """``brokerElect``: ask the controller to elect this broker (broker trigger). True when the
        answer names a master (this broker or another), which the broker then follows."""
        try:
            header, sync_state_set = await self.broker_outer_api.broker_elect(
                self.controller_leader_address, self.broker_config.brokerClusterName, self.broker_config.brokerName,
                self.broker_controller_id)
            if not header.master_address or header.master_broker_id is None:
                log.warning("Now no master in broker set")
                return False
            self.node.trace("log", level="INFO", logger="rmqlab.broker",
                            message=f"brokerElect: controller answered master {header.master_broker_id} "
                                    f"epoch {header.master_epoch}")
            await self._follow(header, sync_state_set)
            return True
        except asyncio.CancelledError:
            raise
        except Exception as e:
            log.error("Failed to try elect: %s", e)
            return False

    async def _follow(self, header, sync_state_set) -> None:
        """Take the role a controller answer names: master when it names this broker, else slave."""
        if header.master_broker_id == self.broker_controller_id:
            await self.change_to_master(header.master_epoch, header.sync_state_set_epoch, sync_state_set)
        else:
            await self.change_to_slave(header.master_address, header.master_epoch, header.master_broker_id)

    # -- polling the controller (``ReplicasManager.schedulingSyncBrokerMetadata``) ------------------
    def scheduling_sync_broker_metadata(self) -> None:
        self._schedule("syncBrokerMetadata", FIRST_DELAY_MS, self.broker_config.syncBrokerMetadataPeriod,
                       self.sync_broker_metadata)

    async def sync_broker_metadata(self) -> None:
        """One poll of CONTROLLER_GET_REPLICA_INFO and what it implies."""
        try:
            info, sync_state_set = await self.broker_outer_api.get_replica_info(self.controller_leader_address,
                                                                                self.broker_config.brokerName)
        except MQBrokerException as e:
            log.warning("Error happen when get broker %s's metadata: %s", self.broker_config.brokerName, e)
            if e.code == ResponseCode.CONTROLLER_BROKER_METADATA_NOT_EXIST:
                await self.register_broker_to_controller()
                await self.node.sleep(METADATA_NOT_EXIST_PAUSE_MS)
            return
        except Exception as e:
            log.warning("Error happen when get broker %s's metadata: %s", self.broker_config.brokerName, e)
            return
        new_master_epoch = info.master_epoch if info.master_epoch is not None else 0
        elect = False
        async with self._lock:
            if new_master_epoch > self.master_epoch:
                if info.master_address and info.master_broker_id is not None:
                    if info.master_broker_id == self.broker_controller_id:
                        await self._change_to_master(new_master_epoch, sync_state_set.sync_state_set_epoch,
                                                     sync_state_set.sync_state_set)
                    else:
                        await self._change_to_slave(info.master_address, new_master_epoch, info.master_broker_id)
                else:
                    # The controller has no master for this set: nominate this broker.
                    elect = True
            elif new_master_epoch == self.master_epoch and self.is_master_state():
                self._change_sync_state_set(set(sync_state_set.sync_state_set), sync_state_set.sync_state_set_epoch)
        if elect:
            await self.broker_elect()

    # -- role changes (``changeToMaster``, ``changeToSlave``) --------------------------------------
    async def change_broker_role(self, new_master_broker_id: int | None, new_master_address: str | None,
                                 new_master_epoch: int | None, sync_state_set_epoch: int | None,
                                 sync_state_set: frozenset[int] | set[int]) -> None:
        """``changeBrokerRole`` (NOTIFY_BROKER_ROLE_CHANGED): only a newer epoch with a master counts."""
        async with self._lock:
            if new_master_broker_id is not None and new_master_epoch is not None \
                    and new_master_epoch > self.master_epoch:
                if new_master_broker_id == self.broker_controller_id:
                    await self._change_to_master(new_master_epoch, sync_state_set_epoch or 0, sync_state_set)
                else:
                    await self._change_to_slave(new_master_address, new_master_epoch, new_master_broker_id)

    async def change_to_master(self, new_master_epoch: int, sync_state_set_epoch: int,
                               sync_state_set: frozenset[int] | set[int]) -> None:
        async with self._lock:
            await self._change_to_master(new_master_epoch, sync_state_set_epoch, sync_state_set)

    async def change_to_slave(self, new_master_address: str | None, new_master_epoch: int,
                              new_master_broker_id: int) -> None:
        async with self._lock:
            await self._change_to_slave(new_master_address, new_master_epoch, new_master_broker_id)

    async def _change_to_master(self, new_master_epoch: int, sync_state_set_epoch: int,
                                sync_state_set: frozenset[int] | set[int]) -> None:
        if new_master_epoch <= self.master_epoch:
            return
        bc, broker = self.broker_config, self.broker
        log.info("Begin to change to master, brokerName:%s, replicas:%s, new Epoch:%d", bc.brokerName,
                 self.broker_address, new_master_epoch)
        self.master_epoch = new_master_epoch
        if (self.master_broker_id is not None and self.master_broker_id == self.broker_controller_id
                and bc.brokerId == MASTER_ID):
            # Re-elected while master: a new epoch entry, nothing else moves.
            self._change_sync_state_set(set(sync_state_set), sync_state_set_epoch)
            self.ha_service.change_to_master_when_last_role_is_master(new_master_epoch)
            self._next_data_version(new_master_epoch)
            self._spawn(self.check_sync_state_set_and_do_report(), "checkSyncStateSetAndDoReport")
            self._trace_role("SYNC_MASTER", new_master_epoch)
            self.register_broker_when_role_change()
            return
        self._change_sync_state_set(set(sync_state_set), sync_state_set_epoch)
        self._handle_slave_synchronize(BrokerRole.SYNC_MASTER)
        # Cut a torn tail, append <epoch, maxPhyOffset> to the epoch file, wait for the dispatch.
        # As in RocketMQ the answer is not checked: the controller's word is the role.
        if not await self.ha_service.change_to_master(new_master_epoch):
            log.warning("HA service refused master epoch %d (its epoch file is ahead)", new_master_epoch)
        bc.brokerId = MASTER_ID
        self.message_store_config.brokerRole = BrokerRole.SYNC_MASTER
        broker.change_special_service_status(True)
        self.master_address = self.broker_address
        self.master_broker_id = self.broker_controller_id
        self.scheduling_check_sync_state_set()
        self._next_data_version(new_master_epoch)
        self._spawn(self.check_sync_state_set_and_do_report(), "checkSyncStateSetAndDoReport")
        self._trace_role("SYNC_MASTER", new_master_epoch)
        self.register_broker_when_role_change()

    async def _change_to_slave(self, new_master_address: str | None, new_master_epoch: int,
                               new_master_broker_id: int) -> None:
        if new_master_epoch <= self.master_epoch:
            return
        log.info("Begin to change to slave, brokerName=%s, brokerId=%s, newMasterBrokerId=%s, newMasterAddress=%s, "
                 "newMasterEpoch=%d", self.broker_config.brokerName, self.broker_controller_id, new_master_broker_id,
                 new_master_address, new_master_epoch)
        self.master_epoch = new_master_epoch
        if new_master_broker_id == self.master_broker_id:
            # Same master, new epoch: nothing to reconnect.
            self.ha_service.change_to_slave_when_master_not_change(new_master_address, new_master_epoch)
            self._next_data_version(new_master_epoch)
            self.register_broker_when_role_change()
            return
        self.stop_check_sync_state_set()
        self.message_store_config.brokerRole = BrokerRole.SLAVE
        self.broker.change_special_service_status(False)
        # The namesrv-facing id of a slave is its controller id.
        self.broker_config.brokerId = self.broker_controller_id
        self.master_address = new_master_address or ""
        self.master_broker_id = new_master_broker_id
        self._handle_slave_synchronize(BrokerRole.SLAVE)
        self.ha_service.change_to_slave(new_master_address, new_master_epoch, self.broker_controller_id)
        self._next_data_version(new_master_epoch)
        self._trace_role("SLAVE", new_master_epoch)
        self.register_broker_when_role_change()

    def _trace_role(self, to: str, epoch: int) -> None:
        self.node.trace("role", **{"from": self._last_role, "to": to, "component": "broker", "epoch": epoch})
        self._last_role = to

    def _next_data_version(self, epoch: int) -> None:
        """``getDataVersion().nextVersion(epoch)``: stateVersion := the master epoch (the NameServer's fence)."""
        self.broker.topic_config_manager.data_version.next_version(self.node.now_ms(), epoch)

    def register_broker_when_role_change(self) -> None:
        """``registerBrokerWhenRoleChange``: a NameServer registration under the new id, in the background."""
        async def register() -> None:
            bc = self.broker_config
            try:
                await self.broker.register_broker_all(True, False, bc.forceRegister)
            except asyncio.CancelledError:
                raise
            except Exception as e:
                log.error("Error happen when register broker to name-srv, Failed to change broker to %s: %s",
                          self._role_name(), e)
                return
            log.info("Change broker [id:%s][address:%s] to %s, newMasterBrokerId:%s, newMasterAddress:%s, "
                     "newMasterEpoch:%d, syncStateSetEpoch:%d", self.broker_controller_id, self.broker_address,
                     self._role_name(), self.master_broker_id, self.master_address, self.master_epoch,
                     self.sync_state_set_epoch)

        self._spawn(register(), "registerBrokerWhenRoleChange")

    def _handle_slave_synchronize(self, role: BrokerRole) -> None:
        """``handleSlaveSynchronize``: a slave copies the master's metadata (every 3 s, a full sync
        once 10 s have passed since the last); a master stops."""
        self._cancel("slaveSynchronize")
        if role is BrokerRole.SLAVE:
            self.broker.slave_synchronize.set_master_addr(self.master_address)
            self._schedule("slaveSynchronize", SLAVE_SYNC_PERIOD_MS, SLAVE_SYNC_PERIOD_MS, self._slave_sync_tick)
        else:
            self.broker.slave_synchronize.set_master_addr(None)

    async def _slave_sync_tick(self) -> None:
        if self.node.now_ms() - self.last_sync_time_ms > SLAVE_SYNC_ALL_AFTER_MS:
            await self.broker.slave_synchronize.sync_all()
            self.last_sync_time_ms = self.node.now_ms()

    # -- the SyncStateSet (``AutoSwitchHAService``, ``checkSyncStateSetAndDoReport``) ----------------
    def _change_sync_state_set(self, new_sync_state_set: set[int], new_sync_state_set_epoch: int) -> None:
        """``changeSyncStateSet``: adopt a set only with a newer epoch."""
        if new_sync_state_set_epoch > self.sync_state_set_epoch:
            log.info("SyncStateSet changed from %s to %s", sorted(self.sync_state_set), sorted(new_sync_state_set))
            self.sync_state_set_epoch = new_sync_state_set_epoch
            self.sync_state_set = set(new_sync_state_set)
            self.ha_service.set_sync_state_set(set(new_sync_state_set))

    def scheduling_check_sync_state_set(self) -> None:
        self._schedule("checkSyncStateSet", FIRST_DELAY_MS, self.broker_config.checkSyncStateSetPeriod,
                       self.check_sync_state_set_and_do_report)

    def stop_check_sync_state_set(self) -> None:
        self._cancel("checkSyncStateSet")

    async def check_sync_state_set_and_do_report(self) -> None:
        """``checkSyncStateSetAndDoReport``: the shrunk set plus this broker; report it if it differs."""
        if not self.is_master_state():
            # Deviation: RocketMQ has no guard here and the controller refuses a slave's request;
            # a check spawned just before a demotion would otherwise report as a slave.
            return
        try:
            new_sync_state_set = set(self.ha_service.maybe_shrink_sync_state_set())
            new_sync_state_set.add(self.broker_controller_id)
            if self.sync_state_set == new_sync_state_set:
                return
            await self.do_report_sync_state_set_changed(new_sync_state_set)
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception("Check syncStateSet error")

    def _on_sync_state_set_changed(self, new_sync_state_set: set[int]) -> None:
        """The HA service's listener (an expansion or a lost slave): report it in the background."""
        if not self.is_master_state():
            # Deviation (guard): only the master alters its SyncStateSet; a slave's request names
            # itself as master and the controller refuses it ("current leader is {x}, not {y}").
            log.warning("Not master, ignore the SyncStateSet change to %s", sorted(new_sync_state_set))
            return
        self._spawn(self.do_report_sync_state_set_changed(set(new_sync_state_set)), "doReportSyncStateSetChanged")

    async def do_report_sync_state_set_changed(self, new_sync_state_set: set[int]) -> None:
        """``doReportSyncStateSetChanged``: CONTROLLER_ALTER_SYNC_STATE_SET, then adopt the answer."""
        if not self.is_master_state():
            return  # demoted since the change was proposed (deviation, as above): not ours to report
        try:
            result: SyncStateSet = await self.broker_outer_api.alter_sync_state_set(
                self.controller_leader_address, self.broker_config.brokerName, self.broker_controller_id,
                self.master_epoch, new_sync_state_set, self.sync_state_set_epoch)
        except asyncio.CancelledError:
            raise
        except Exception as e:
            log.error("Error happen when change SyncStateSet, broker:%s, masterAddress:%s, masterEpoch:%d, "
                      "oldSyncStateSet:%s, newSyncStateSet:%s, syncStateSetEpoch:%d: %s",
                      self.broker_config.brokerName, self.master_address, self.master_epoch,
                      sorted(self.sync_state_set), sorted(new_sync_state_set), self.sync_state_set_epoch, e)
            return
        self._change_sync_state_set(set(result.sync_state_set), result.sync_state_set_epoch)

    # -- heartbeats --------------------------------------------------------------------------------
    def _heartbeat_tick(self) -> None:
        # BrokerController.scheduleSendHeartbeat: an isolated broker stays silent.
        if not self.broker.is_isolated:
            self.send_heartbeat_to_controller()

    def send_heartbeat_to_controller(self) -> None:
        """``sendHeartbeatToController``: BROKER_HEARTBEAT to every reachable controller."""
        bc = self.broker_config
        store = self.broker.message_store
        for addr in self.get_available_controller_addresses():
            self.broker_outer_api.send_heartbeat_to_controller(
                addr, bc.brokerClusterName, self.broker_address, bc.brokerName, self.broker_controller_id,
                self.get_last_epoch(), store.get_max_phy_offset(), self.ha_service.get_confirm_offset(),
                bc.controllerHeartBeatTimeoutMills, bc.brokerElectionPriority)

    # -- views -------------------------------------------------------------------------------------
    def get_last_epoch(self) -> int:
        return self.ha_service.get_last_epoch()

    def get_broker_role(self) -> BrokerRole:
        return self.message_store_config.brokerRole

    def is_master_state(self) -> bool:
        return self.get_broker_role() == BrokerRole.SYNC_MASTER

    def get_sync_state_set(self) -> SyncStateSet:
        return SyncStateSet(frozenset(self.sync_state_set), self.sync_state_set_epoch)

    def get_epoch_entries(self) -> list[EpochEntry]:
        return self.ha_service.get_epoch_entries()


__all__ = ["ReplicasManager", "State", "RegisterState"]
