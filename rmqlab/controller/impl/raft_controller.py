"""RaftController: the Raft-replicated controller (RocketMQ's ``impl/DLedgerController.java``, here on pysyncobj).

RIP-44, "DLedgerController core design" (the active controller is the Raft leader; it accepts
requests, reaches consensus through the log and applies to the in-memory state machine; the others
only apply); "一文详解 RocketMQ 如何利用 Raft 进行高可用保障" ("Raft In Controller", election trigger a.ii).

Requests. Each request method computes a :class:`ControllerResult` with
``ReplicasInfoManager`` on the leader, appends its events to the Raft log as one entry
(``ControllerStateMachine.apply_event_batch``), waits until the entry is applied here (at most
5 s, as RocketMQ waits for DLedger) and answers with the computed response. Requests run one at a
time (RocketMQ's single-threaded EventScheduler), so each computation sees every earlier one
applied. A controller that is not the serving leader answers CONTROLLER_NOT_LEADER (2007) at
once; reads too, as in RocketMQ (processReadEvent only adds a log round trip for them).

Leadership. When pysyncobj makes this replica leader it first commits ``open_term`` (DLedger's
empty entry); only once that is applied does it serve (:meth:`is_leader_state`) and start the
inactive-master scan: every ``scanInactiveMasterInterval`` the broker sets whose master is not
alive while another replica is (``scanNeedReelectBrokerSets``) are reported to the lifecycle
listeners with brokerId None, which makes the ControllerManager re-elect.

Ports. In RocketMQ DLedger serves its Raft RPCs and the controller's requests on one Netty server,
the peer address of controllerDLegerPeers (where brokers' controllerAddr points). pysyncobj needs
a TCP port of its own, so here the peer address serves the remoting protocol (brokers, mqadmin)
and Raft runs on ``host:(port + RAFT_PORT_OFFSET)`` of every peer (:func:`raft_peers`).

Deviations: CONTROLLER_NOT_LEADER also carries the known leader as extFields
``controllerLeaderId`` / ``controllerLeaderAddress`` (GetMetaDataResponseHeader's names; RocketMQ
sends only the remark, clients ignore extra fields). A leader that cannot commit within 5 s answers
SYSTEM_ERROR and re-opens its term before serving again (RocketMQ completes the request
exceptionally and carries on). The leader steps down after LEADER_FALLBACK_TIMEOUT_S without a
majority (pysyncobj's default is 30 s; a DLedger leader steps down within seconds).
"""

from __future__ import annotations

import asyncio
import functools
import logging
import threading
from collections.abc import Callable, Iterable
from typing import Any

from rmqlab.config.addresses import parse_addr
from rmqlab.config.controller import ControllerConfig
from rmqlab.controller.elect.elect_policy import ElectPolicy
from rmqlab.controller.helper.broker_lifecycle_listener import BrokerLifecycleListener
from rmqlab.controller.helper.broker_valid_predicate import BrokerValidPredicate
from rmqlab.controller.impl.controller_state_machine import ControllerStateMachine
from rmqlab.controller.impl.event.controller_result import ControllerResult
from rmqlab.controller.impl.event.list_event_serializer import ListEventSerializer
from rmqlab.controller.impl.heartbeat.default_broker_heartbeat_manager import CONTROLLER_LOGGER_NAME
from rmqlab.controller.impl.manager.replicas_info_manager import ReplicasInfoManager
from rmqlab.raft.component import RaftComponent
from rmqlab.raft.fail_reason import RaftError
from rmqlab.remoting.protocol.body.sync_state_set import SyncStateSet
from rmqlab.remoting.protocol.header.controller import (AlterSyncStateSetRequestHeader, ApplyBrokerIdRequestHeader,
                                                        CleanControllerBrokerDataRequestHeader,
                                                        ElectMasterRequestHeader, GetMetaDataResponseHeader,
                                                        GetNextBrokerIdRequestHeader, GetReplicaInfoRequestHeader,
                                                        RegisterBrokerToControllerRequestHeader)
from rmqlab.remoting.remoting_command import RemotingCommand
from rmqlab.remoting.response_code import ResponseCode
from rmqlab.runtime.node import Node, Timer

# Raft (pysyncobj) listens this far above each peer's remoting port (see the module docstring).
RAFT_PORT_OFFSET = 1000
# How long a request waits for its events to be committed and applied (RocketMQ: 5 s).
APPEND_WAIT_MS = 5000
# A leader without a majority steps down after this long (pysyncobj's default is 30 s).
LEADER_FALLBACK_TIMEOUT_S = 6.0
NOT_LEADER_REMARK = "The controller is not in leader state"


def raft_peers(peers: dict[str, str]) -> dict[str, str]:
    """Each peer's Raft address: its controllerDLegerPeers address with RAFT_PORT_OFFSET added."""
    out = {}
    for name, addr in peers.items():
        host, port = parse_addr(addr)
        if port + RAFT_PORT_OFFSET > 65535:
            raise ValueError(f"controllerDLegerPeers: {name}-{addr}: the Raft port {port} + {RAFT_PORT_OFFSET} "
                             f"is above 65535; use a peer port of at most {65535 - RAFT_PORT_OFFSET}")
        out[name] = f"{host}:{port + RAFT_PORT_OFFSET}"
    return out


async def bounded(node: Node, fut: asyncio.Future, timeout_ms: float) -> Any:
    """Await ``fut`` for at most ``timeout_ms`` of the node's time; TimeoutError after, leaving
    ``fut`` running (as Java's ``future.get(timeout)`` does)."""
    if not fut.done():
        woke = asyncio.get_running_loop().create_future()

        def wake(*_: Any) -> None:
            if not woke.done():
                woke.set_result(None)

        timer = node.call_later(timeout_ms, wake)
        fut.add_done_callback(wake)
        try:
            await woke
        finally:
            timer.cancel()
            fut.remove_done_callback(wake)
        if not fut.done():
            # Nobody awaits it any more: retrieve its outcome so asyncio does not log it as lost.
            fut.add_done_callback(lambda f: f.cancelled() or f.exception())
            raise TimeoutError(f"no result within {timeout_ms:.0f} ms")
    return fut.result()


class RaftController:
    """One member of the controllers' Raft group (see the module docstring)."""

    def __init__(self, controller_config: ControllerConfig, broker_alive_predicate: BrokerValidPredicate,
                 elect_policy: ElectPolicy, *, store_path: str | None = None, trace_frames: bool = False,
                 logger: logging.Logger | None = None, **raft_conf: Any):
        self.controller_config = controller_config
        self.broker_alive_predicate = broker_alive_predicate
        self.elect_policy = elect_policy
        self.log = logger or logging.getLogger(CONTROLLER_LOGGER_NAME)
        self.self_id = controller_config.controllerDLegerSelfId
        self.peers = controller_config.get_peers()
        if self.self_id not in self.peers:
            raise ValueError(f"controllerDLegerSelfId {self.self_id!r} is not among the peers {sorted(self.peers)}")
        self.group = controller_config.controllerDLegerGroup or "controller"
        self.store_path = store_path or controller_config.get_controller_store_path()
        self.replicas_info_manager = ReplicasInfoManager(controller_config, logger=self.log)
        self.state_machine = ControllerStateMachine(self.replicas_info_manager, logger=self.log)
        raft_conf.setdefault("leaderFallbackTimeout", LEADER_FALLBACK_TIMEOUT_S)
        self.raft = RaftComponent(self.self_id, raft_peers(self.peers), [self.state_machine], group=self.group,
                                  journal=True, full_dump=True, data_dir=self.store_path,
                                  trace_frames=trace_frames, on_view_change=self._on_view_change, **raft_conf)
        self.node: Node | None = None
        self._listeners: list[BrokerLifecycleListener] = []
        self._serving_term: int | None = None   # the term whose open_term is applied here
        self._opening_term: int | None = None   # the term whose open_term is in flight
        self._lock: asyncio.Lock | None = None
        self._scan_timer: Timer | None = None
        self._next_scan_ms = 0.0
        self._stopped = False

    # -- lifecycle -------------------------------------------------------------------------------
    async def startup(self, node: Node) -> None:
        self.node = node
        self._lock = asyncio.Lock()
        self.state_machine.trace = _loop_thread_trace(node)
        await self.raft.start(node)

    async def shutdown(self) -> None:
        self._stop()
        await self.raft.shutdown()

    def on_crash(self) -> None:
        self._stop()
        self.raft.on_crash()

    def _stop(self) -> None:
        self._stopped = True
        self._serving_term = None
        self.stop_scheduling()

    # -- leadership ------------------------------------------------------------------------------
    def is_leader_state(self) -> bool:
        """``isLeaderState``: leader, and this term's first entry is applied (ready to serve)."""
        return (not self._stopped and self._serving_term is not None and self.raft.role == "LEADER"
                and self.raft.term == self._serving_term)

    def _on_view_change(self, role: str, term: int, leader: str | None) -> None:
        # Called inside a pysyncobj session: only schedule.
        if self.node is not None and not self._stopped:
            self.node.call_later(0, self._check_role)

    def _check_role(self) -> None:
        if self._stopped:
            return
        if self.raft.role != "LEADER":
            if self._serving_term is not None:
                self.log.info("The controller %s is no longer the leader (term %s)", self.self_id, self._serving_term)
                self._trace_log("INFO", f"The controller {self.self_id} stops serving: no longer the leader")
            self._serving_term = None
            self.stop_scheduling()
            return
        term = self.raft.term
        if self._serving_term != term and self._opening_term != term:
            self._open_term(term)

    def _open_term(self, term: int) -> None:
        """Commit this leader's first entry, then serve (DLedger: append an empty entry first)."""
        if self.raft.role != "LEADER" or self.raft.term != term:
            return  # the role and the term were read apart and pysyncobj moved on between the reads
        self._opening_term = term
        self._serving_term = None
        fut = self.raft.replicate_future(self.state_machine.open_term, self.self_id, term)

        def done(f: asyncio.Future) -> None:
            if self._opening_term == term:
                self._opening_term = None
            if self._stopped or f.cancelled() or f.exception() is not None:
                if not self._stopped:
                    self.node.call_later(0, self._check_role)  # still leader? try again
                return
            if self.raft.role == "LEADER" and self.raft.term == term:
                self._serving_term = term
                self.log.info("The controller %s is the leader of term %s and serves", self.self_id, term)
                self._trace_log("INFO", f"The controller {self.self_id} becomes the leader (term {term}) and "
                                        f"starts scheduling")
                self.start_scheduling()

        fut.add_done_callback(done)

    def start_scheduling(self) -> None:
        """``startScheduling``: the inactive-master scan, while leader."""
        if self._scan_timer is not None:
            return
        interval = self.controller_config.scanInactiveMasterInterval
        self._next_scan_ms = self.node.now_ms() + interval
        self._scan_timer = self.node.call_later(interval, self._scan_inactive_master)

    def stop_scheduling(self) -> None:
        if self._scan_timer is not None:
            self._scan_timer.cancel()
            self._scan_timer = None

    def _scan_inactive_master(self) -> None:
        self._scan_timer = None
        if not self.is_leader_state():
            return
        try:
            with self.state_machine.lock:
                need = self.replicas_info_manager.scan_need_reelect_broker_sets(self.broker_alive_predicate)
            for broker_name in need:
                self.log.warning("The master of broker-set %s is inactive while replicas are alive: re-elect",
                                 broker_name)
                # The Raft article's election trigger a.ii: the line for people, the event for readers.
                self._trace_log("WARN", f"scanNeedReelectBrokerSets: broker-set {broker_name} has no live master "
                                        f"while replicas are alive: re-elect")
                self.node.trace("controller.need_reelect", broker_set=broker_name)
                self._notify_listeners(None, broker_name, None)
        except Exception:
            self.log.exception("scanInactiveMasterAndTriggerReelect exception")
        interval = self.controller_config.scanInactiveMasterInterval
        self._next_scan_ms += interval
        self._scan_timer = self.node.call_later(max(0.0, self._next_scan_ms - self.node.now_ms()),
                                                self._scan_inactive_master)

    def register_broker_lifecycle_listener(self, listener: BrokerLifecycleListener) -> None:
        self._listeners.append(listener)

    def _notify_listeners(self, cluster_name: str | None, broker_name: str, broker_id: int | None) -> None:
        for listener in list(self._listeners):
            try:
                listener(cluster_name, broker_name, broker_id)
            except Exception:
                self.log.exception("broker lifecycle listener failed for %s", broker_name)

    # -- metadata --------------------------------------------------------------------------------
    @property
    def leader_id(self) -> str | None:
        return self.raft.leader if self.raft.sync_obj is not None else None

    @property
    def leader_address(self) -> str | None:
        leader = self.leader_id
        return self.peers.get(leader) if leader is not None else None

    def get_controller_metadata(self) -> RemotingCommand:
        """CONTROLLER_GET_METADATA_INFO (1005), answered by every controller: group, the leader this
        replica knows of and its address, whether it is the leader, and the peers as
        ``id:host:port;`` entries (DLedgerController builds them from DLedger's peer map so)."""
        peers = "".join(f"{name}:{addr};" for name, addr in self.peers.items())
        is_leader = self.raft.sync_obj is not None and self.raft.role == "LEADER"
        header = GetMetaDataResponseHeader(self.group, self.leader_id, self.leader_address, is_leader, peers)
        return RemotingCommand.create_response_command(ResponseCode.SUCCESS, None, ext_fields=header.to_ext_fields())

    def not_leader_response(self) -> RemotingCommand:
        response = RemotingCommand.create_response_command(ResponseCode.CONTROLLER_NOT_LEADER, NOT_LEADER_REMARK)
        if self.leader_id is not None and self.leader_id != self.self_id:
            response.add_ext_field("controllerLeaderId", self.leader_id)
            response.add_ext_field("controllerLeaderAddress", self.leader_address)
        return response

    # -- requests --------------------------------------------------------------------------------
    async def alter_sync_state_set(self, request: AlterSyncStateSetRequestHeader,
                                   sync_state_set: SyncStateSet) -> RemotingCommand:
        return await self._append_event("alterSyncStateSet", lambda: self.replicas_info_manager.alter_sync_state_set(
            request, sync_state_set, self.broker_alive_predicate), True)

    async def elect_master(self, request: ElectMasterRequestHeader) -> RemotingCommand:
        return await self._append_event("electMaster", lambda: self.replicas_info_manager.elect_master(
            request, self.elect_policy), True)

    async def get_next_broker_id(self, request: GetNextBrokerIdRequestHeader) -> RemotingCommand:
        return await self._append_event("getNextBrokerId",
                                        lambda: self.replicas_info_manager.get_next_broker_id(request), False)

    async def apply_broker_id(self, request: ApplyBrokerIdRequestHeader) -> RemotingCommand:
        return await self._append_event("applyBrokerId",
                                        lambda: self.replicas_info_manager.apply_broker_id(request), True)

    async def register_broker(self, request: RegisterBrokerToControllerRequestHeader) -> RemotingCommand:
        return await self._append_event("registerBroker", lambda: self.replicas_info_manager.register_broker(
            request, self.broker_alive_predicate), True)

    async def get_replica_info(self, request: GetReplicaInfoRequestHeader) -> RemotingCommand:
        return await self._append_event("getReplicaInfo",
                                        lambda: self.replicas_info_manager.get_replica_info(request), False)

    async def get_sync_state_data(self, broker_names: Iterable[str]) -> RemotingCommand:
        names = list(broker_names)
        return await self._append_event("getSyncStateData", lambda: self.replicas_info_manager.get_sync_state_data(
            names, self.broker_alive_predicate), False)

    async def clean_broker_data(self, request: CleanControllerBrokerDataRequestHeader) -> RemotingCommand:
        return await self._append_event("cleanBrokerData", lambda: self.replicas_info_manager.clean_broker_data(
            request, self.broker_alive_predicate), True)

    async def _append_event(self, name: str, supplier: Callable[[], ControllerResult],
                            is_write_event: bool) -> RemotingCommand:
        """``EventScheduler.appendEvent`` + ``ControllerEventHandler.run``."""
        if not self.is_leader_state():
            return self.not_leader_response()
        async with self._lock:
            if not self.is_leader_state():
                return self.not_leader_response()
            with self.state_machine.lock:
                result = supplier()
            self.log.info("Event queue run event %s, get the result %s", name, result.response_code)
            term = self._serving_term
            if is_write_event and result.events:
                data = ListEventSerializer.serialize(result.events)
                fut = self.raft.replicate_future(self.state_machine.apply_event_batch, self.self_id, term, data)
            elif self.controller_config.processReadEvent:
                # DLedger has no read index: a read goes through the log to be linearizable.
                fut = self.raft.replicate_future(self.state_machine.open_term, self.self_id, term)
            else:
                return result.to_response_command()
            try:
                applied = await bounded(self.node, fut, APPEND_WAIT_MS)
            except RaftError as e:
                return self._append_failed(name, e.reason.name, certain=e.reason.certainly_not_applied)
            except TimeoutError:
                return self._append_failed(name, f"not committed within {APPEND_WAIT_MS} ms", certain=False)
            if applied is False:
                # Fenced: another writer's open_term was applied after ours. A newer leader's, or a
                # stale one of this very term: a replica that read role LEADER and then the term
                # pysyncobj had just moved on (two reads, another thread) opens a term that is not
                # its own, and pysyncobj forwards a follower's command to the leader, which commits
                # it. Open the term again if this replica still leads it, or every later write of
                # the term would be fenced.
                self._serving_term = None
                self.node.call_later(0, self._check_role)
                return self.not_leader_response()
            return result.to_response_command()

    def _append_failed(self, name: str, why: str, *, certain: bool) -> RemotingCommand:
        self.log.error("Failed to append the events of %s to the Raft log: %s", name, why)
        if not certain:
            # The entry may still commit later: compute nothing more until a fresh open_term has
            # been applied, after which every earlier entry is applied or gone.
            self._serving_term = None
            self.node.call_later(0, self._check_role)
        if self.raft.role != "LEADER":
            return self.not_leader_response()
        return RemotingCommand.create_response_command(
            ResponseCode.SYSTEM_ERROR, f"The controller failed to commit {name}: {why}")

    # -- what labs and tests read ----------------------------------------------------------------
    def status(self) -> dict[str, Any]:
        return {**self.raft.status(), "serving": self.is_leader_state(),
                "applied_batches": self.state_machine.applied_batches}

    def _trace_log(self, level: str, message: str) -> None:
        if self.node is not None:
            self.node.trace("log", level=level, message=message, logger=CONTROLLER_LOGGER_NAME)


__all__ = ["APPEND_WAIT_MS", "RAFT_PORT_OFFSET", "RaftController", "bounded", "raft_peers"]


def _loop_thread_trace(node: Node) -> Callable[..., None]:
    """`node.trace` for the state machine, run on the loop's thread. On the simulator everything
    runs there, so every applied entry is traced at once, in order. On the real runtime pysyncobj
    applies entries on its own thread, and a node's tracer belongs to the loop's thread (its
    sequence numbers and file are not guarded by a lock): the entry is handed over with
    call_soon_threadsafe, in apply order, and traced a moment later. Nothing raised by tracing may
    reach pysyncobj's thread (an exception in an apply stops that replica)."""
    loop = asyncio.get_running_loop()
    owner = threading.get_ident()

    def trace(kind: str, **fields: Any) -> None:
        if threading.get_ident() == owner:
            node.trace(kind, **fields)
            return
        try:
            loop.call_soon_threadsafe(functools.partial(node.trace, kind, **fields))
        except RuntimeError:
            pass  # the loop is closed: the process is exiting and its trace with it

    return trace
