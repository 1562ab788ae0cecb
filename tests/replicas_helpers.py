"""Controller-mode BrokerControllers on the simulator with a scripted controller (``ScriptedController``)
that answers the broker's controller requests as the test tells it; shared by
tests/test_replicas_manager.py and tests/test_admin_controller.py.
"""

from __future__ import annotations

import os

from rmqlab.broker import BrokerController
from rmqlab.broker.controller import State
from rmqlab.config import load_broker_config
from rmqlab.config.controller import ControllerConfig
from rmqlab.controller.elect.impl.default_elect_policy import DefaultElectPolicy
from rmqlab.controller.impl.heartbeat.default_broker_heartbeat_manager import DefaultBrokerHeartbeatManager
from rmqlab.controller.impl.manager.replicas_info_manager import ReplicasInfoManager
from rmqlab.namesrv import NamesrvController
from rmqlab.remoting import RemotingClient, RemotingCommand, RequestCode, ResponseCode
from rmqlab.remoting.protocol.body.elect_master_response_body import ElectMasterResponseBody
from rmqlab.remoting.protocol.body.sync_state_set import SyncStateSet
from rmqlab.remoting.protocol.header.controller import (AlterSyncStateSetRequestHeader, ApplyBrokerIdRequestHeader,
                                                        ElectMasterRequestHeader, GetMetaDataResponseHeader,
                                                        GetNextBrokerIdRequestHeader, GetReplicaInfoRequestHeader,
                                                        NotifyBrokerRoleChangedRequestHeader,
                                                        RegisterBrokerToControllerRequestHeader)
from rmqlab.remoting.protocol.header.namesrv import BrokerHeartbeatRequestHeader
from rmqlab.remoting.remoting_server import RemotingServer
from rmqlab.runtime.component import Component
from rmqlab.runtime.sim import Simulation
from tests.sim_helpers import track
from tests.store_helpers import make_message

CONTROLLER = "127.0.0.1:9878"
NAMESRV = "127.0.0.1:9876"
PORTS = {"A": 30911, "B": 30921, "C": 30931}


def broker_factory(sim: Simulation, name: str, **overrides):
    def factory() -> BrokerController:
        props = {"brokerName": "broker-a", "listenPort": PORTS[name], "enableControllerMode": "true",
                 "controllerAddr": CONTROLLER, "storePathRootDir": os.path.join(sim.store_dir(name), "store"),
                 "mappedFileSizeCommitLog": 64 * 1024, "mappedFileSizeConsumeQueue": 20 * 100,
                 "registerNameServerPeriod": 10_000}
        props.update(overrides)
        cfg = load_broker_config(None, namesrv_addr=NAMESRV, overrides={k: str(v) for k, v in props.items()})
        return BrokerController(cfg)
    return factory


def world(seed: int, brokers=("A", "B"), **overrides) -> Simulation:
    sim = Simulation(seed=seed)
    track(sim)
    sim.add_node("namesrv", NamesrvController)
    sim.add_node("controller", ScriptedController)
    sim.start("namesrv")
    sim.start("controller")
    for name in brokers:
        sim.add_node(name, broker_factory(sim, name, **overrides.get(name, {})))
    return sim


def br(sim, name) -> BrokerController:
    return sim.components[name]


def rm(sim, name):
    return br(sim, name).replicas_manager


def start_and_wait_running(sim, name, timeout_ms=30_000) -> None:
    sim.start(name)
    sim.run_until(lambda: name in sim.components and br(sim, name).replicas_manager is not None
                  and rm(sim, name).state is State.RUNNING, timeout_ms)


def put(sim, name, i):
    broker = br(sim, name)
    return broker.message_store.async_put_message(make_message(broker.node.now_ms, i))


class ScriptedController(Component):
    """One controller without Raft (see the module docstring); ``requests`` records (code, extFields)."""

    component_type = "controller"

    def __init__(self):
        self.config = ControllerConfig()
        self.manager = ReplicasInfoManager(self.config)
        self.requests: list[tuple[int, dict]] = []

    async def start(self, node) -> None:
        self.node = node
        self.heartbeats = DefaultBrokerHeartbeatManager(self.config, node.now_ms)
        self.heartbeats.register_broker_lifecycle_listener(self._on_broker_inactive)
        self.heartbeats.start(node.call_later)
        self.policy = DefaultElectPolicy(self.heartbeats.is_broker_active, self.heartbeats.get_broker_live_info)
        self.client = RemotingClient(node)
        self.server = RemotingServer(node, "127.0.0.1", 9878)
        self.server.register_default_processor(self.process)
        await self.server.start()

    async def shutdown(self) -> None:
        self.heartbeats.shutdown()
        await self.server.shutdown()
        await self.client.shutdown()

    def on_crash(self) -> None:
        self.heartbeats.shutdown()

    def _answer(self, result) -> RemotingCommand:
        self.manager.apply_events(result.events)  # committed at once: a one-node "Raft"
        return result.to_response_command()

    async def process(self, channel, request: RemotingCommand) -> RemotingCommand | None:
        self.requests.append((request.code, dict(request.ext_fields or {})))
        code, alive = request.code, self.heartbeats.is_broker_active
        if code == RequestCode.CONTROLLER_GET_METADATA_INFO:
            header = GetMetaDataResponseHeader("group1", "n0", CONTROLLER, True, CONTROLLER)
            return RemotingCommand.create_response_command(ResponseCode.SUCCESS, ext_fields=header.to_ext_fields())
        if code == RequestCode.BROKER_HEARTBEAT:
            h = BrokerHeartbeatRequestHeader.decode(request)
            self.heartbeats.on_broker_heartbeat(h.cluster_name, h.broker_name, h.broker_addr, h.broker_id,
                                                h.heartbeat_timeout_mills, channel, h.epoch, h.max_offset,
                                                h.confirm_offset, h.election_priority)
            return None
        if code == RequestCode.CONTROLLER_GET_NEXT_BROKER_ID:
            return self._answer(self.manager.get_next_broker_id(GetNextBrokerIdRequestHeader.decode(request)))
        if code == RequestCode.CONTROLLER_APPLY_BROKER_ID:
            return self._answer(self.manager.apply_broker_id(ApplyBrokerIdRequestHeader.decode(request)))
        if code == RequestCode.CONTROLLER_REGISTER_BROKER:
            return self._answer(self.manager.register_broker(RegisterBrokerToControllerRequestHeader.decode(request),
                                                             alive))
        if code == RequestCode.CONTROLLER_GET_REPLICA_INFO:
            return self._answer(self.manager.get_replica_info(GetReplicaInfoRequestHeader.decode(request)))
        if code == RequestCode.CONTROLLER_ALTER_SYNC_STATE_SET:
            return self._answer(self.manager.alter_sync_state_set(AlterSyncStateSetRequestHeader.decode(request),
                                                                  SyncStateSet.decode(request.body), alive))
        if code == RequestCode.CONTROLLER_ELECT_MASTER:
            result = self.manager.elect_master(ElectMasterRequestHeader.decode(request), self.policy)
            response = self._answer(result)
            if result.response_code == ResponseCode.SUCCESS:
                self._notify(result)
            return response
        return RemotingCommand.create_response_command(ResponseCode.REQUEST_CODE_NOT_SUPPORTED, "not scripted")

    # ControllerManager.onBrokerInactive / triggerElectMaster / notifyBrokerRoleChanged.
    def _on_broker_inactive(self, cluster_name, broker_name, broker_id) -> None:
        info = self.manager.sync_state_set_info_table.get(broker_name)
        if info is not None and info.master_broker_id == broker_id:
            self.trigger_elect_master(broker_name)

    def trigger_elect_master(self, broker_name: str):
        result = self.manager.elect_master(ElectMasterRequestHeader.of_controller_trigger(broker_name), self.policy)
        self.manager.apply_events(result.events)
        if result.response_code == ResponseCode.SUCCESS:
            self._notify(result)
        return result

    def _notify(self, result) -> None:
        header = result.response
        group = ElectMasterResponseBody.decode(result.body).broker_member_group
        notify = NotifyBrokerRoleChangedRequestHeader(header.master_address, header.master_epoch,
                                                      header.sync_state_set_epoch, header.master_broker_id)
        body = SyncStateSet({header.master_broker_id}, header.sync_state_set_epoch).encode()
        for broker_id, addr in sorted(group.broker_addrs.items()):
            if self.heartbeats.is_broker_active(group.cluster, group.broker_name, broker_id):
                request = RemotingCommand.create_request_command(RequestCode.NOTIFY_BROKER_ROLE_CHANGED,
                                                                 notify.to_ext_fields(), body)
                request.mark_oneway_rpc()
                self.node.spawn(self.client.invoke_oneway(addr, request), name=f"notify {addr}")

    def codes_from(self, broker_addr_port: int) -> list[int]:
        """The codes of the requests that named this broker (by address or check code)."""
        addr = f"127.0.0.1:{broker_addr_port}"
        return [c for c, ext in self.requests
                if c != RequestCode.BROKER_HEARTBEAT and any(str(v).startswith(addr) for v in ext.values())]
