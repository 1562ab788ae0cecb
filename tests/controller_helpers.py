"""The controllers: a simulated broker reduced to its wire traffic with them (``FakeBroker``), their
configuration on the simulator, and requests to real controller processes. Shared by
tests/test_controller.py, tests/test_controller_real.py and tests/test_admin_controller.py.
"""

from __future__ import annotations

import asyncio
import os
import socket
import time

from rmqlab.config.controller import ControllerConfig
from rmqlab.controller.impl.raft_controller import RAFT_PORT_OFFSET
from rmqlab.remoting.protocol.body.sync_state_set import SyncStateSet
from rmqlab.remoting.protocol.header.controller import (ApplyBrokerIdRequestHeader, ElectMasterRequestHeader,
                                                        GetMetaDataResponseHeader, GetNextBrokerIdRequestHeader,
                                                        GetNextBrokerIdResponseHeader,
                                                        NotifyBrokerRoleChangedRequestHeader,
                                                        RegisterBrokerToControllerRequestHeader,
                                                        RegisterBrokerToControllerResponseHeader)
from rmqlab.remoting.remoting_client import RemotingClient
from rmqlab.remoting.remoting_command import RemotingCommand
from rmqlab.remoting.remoting_server import RemotingServer
from rmqlab.remoting.request_code import RequestCode
from rmqlab.remoting.response_code import ResponseCode as RC
from rmqlab.runtime.component import Component
from rmqlab.runtime.real import RealNode
from rmqlab.runtime.real_cluster import free_ports
from rmqlab.runtime.sim import Simulation

CLUSTER = "DefaultCluster"
A = "broker-a"
TIMEOUT_MS = 8000


def peers_of(n: int, base: int = 9877) -> str:
    return ";".join(f"n{i}-127.0.0.1:{base + i}" for i in range(n))


def controller_config(sim: Simulation, name: str, n: int) -> ControllerConfig:
    return ControllerConfig(controllerDLegerGroup="group1", controllerDLegerPeers=peers_of(n),
                            controllerDLegerSelfId=name,
                            controllerStorePath=os.path.join(sim.store_dir(name), "controller"))


class FakeBroker(Component):
    """A controller-mode replica reduced to its wire traffic with the controllers."""

    component_type = "broker"

    def __init__(self, addr: str, controllers: list[str], broker_name: str = A):
        self.addr, self.controllers, self.broker_name = addr, controllers, broker_name
        self.broker_id: int | None = None
        self.notifications: list[tuple[NotifyBrokerRoleChangedRequestHeader, SyncStateSet]] = []
        self.heartbeating = False

    async def start(self, node):
        self.node = node
        self.client = RemotingClient(node)
        host, port = self.addr.rsplit(":", 1)
        self.server = RemotingServer(node, host, int(port))
        self.server.register_processor(RequestCode.NOTIFY_BROKER_ROLE_CHANGED, self._on_notify)
        await self.server.start()

    async def _on_notify(self, channel, request):
        self.notifications.append((NotifyBrokerRoleChangedRequestHeader.decode(request),
                                   SyncStateSet.decode(request.body)))
        return None  # oneway

    # -- heartbeats (ReplicasManager: every 1 s to every controller) --------------------------------
    def start_heartbeats(self) -> None:
        self.heartbeating = True
        self._beat()

    def heartbeat_request(self) -> RemotingCommand:
        return RemotingCommand.create_request_command(RequestCode.BROKER_HEARTBEAT, {
            "clusterName": CLUSTER, "brokerAddr": self.addr, "brokerName": self.broker_name,
            "brokerId": self.broker_id, "epoch": 0, "maxOffset": 0, "confirmOffset": 0,
            "heartbeatTimeoutMills": 10_000})

    def _beat(self) -> None:
        if not self.heartbeating:
            return
        if self.broker_id is not None:  # a replica beats once the controller gave it an id
            for addr in self.controllers:
                request = self.heartbeat_request()
                request.mark_oneway_rpc()
                self.node.spawn(self._send_quietly(addr, request))
        self.node.call_later(1000, self._beat)

    async def _send_quietly(self, addr, request):
        try:
            await self.client.invoke_oneway(addr, request)
        except Exception:
            pass  # a dead controller: the broker keeps beating to the others

    # -- requests ---------------------------------------------------------------------------------
    async def ask(self, addr: str, code: int, header=None, body: bytes | None = None) -> RemotingCommand:
        request = RemotingCommand.create_request_command(code, header.to_ext_fields() if header else None, body)
        return await self.client.invoke_sync(addr, request, TIMEOUT_MS)

    async def leader(self) -> str | None:
        for addr in self.controllers:
            try:
                response = await self.ask(addr, RequestCode.CONTROLLER_GET_METADATA_INFO)
            except Exception:
                continue
            leader = GetMetaDataResponseHeader.decode(response).controller_leader_address
            if leader:
                return leader
        return None

    async def register(self) -> RegisterBrokerToControllerResponseHeader:
        """ReplicasManager's register steps (``ReplicasManager.register``) and, with no master, brokerElect."""
        leader = await self.leader()
        r = await self.ask(leader, RequestCode.CONTROLLER_GET_NEXT_BROKER_ID,
                           GetNextBrokerIdRequestHeader(CLUSTER, self.broker_name))
        assert r.code == RC.SUCCESS, r.remark
        next_id = GetNextBrokerIdResponseHeader.decode(r).next_broker_id
        r = await self.ask(leader, RequestCode.CONTROLLER_APPLY_BROKER_ID,
                           ApplyBrokerIdRequestHeader(CLUSTER, self.broker_name, next_id, f"{self.addr};{self.node.now_ms()}"))
        assert r.code == RC.SUCCESS, r.remark
        self.broker_id = next_id
        r = await self.ask(leader, RequestCode.CONTROLLER_REGISTER_BROKER,
                           RegisterBrokerToControllerRequestHeader(CLUSTER, self.broker_name, next_id, self.addr))
        assert r.code == RC.SUCCESS, r.remark
        # ReplicasManager step 4: one heartbeat to every reachable controller right after registering.
        for addr in self.controllers:
            try:
                await self.client.invoke_sync(addr, self.heartbeat_request(), TIMEOUT_MS)
            except Exception:
                pass
        return RegisterBrokerToControllerResponseHeader.decode(r)

    async def elect(self) -> RemotingCommand:
        leader = await self.leader()
        return await self.ask(leader, RequestCode.CONTROLLER_ELECT_MASTER,
                              ElectMasterRequestHeader.of_broker_trigger(CLUSTER, self.broker_name, self.broker_id))


class Idle(Component):
    async def start(self, node):
        self.node = node


def serving(sim, names) -> list[str]:
    return [n for n in names if sim.nodes[n].alive and sim.components[n].is_leader_state()]


def wait_leader(sim, names, timeout_ms: float = 15_000) -> str:
    sim.run_until(lambda: len(serving(sim, names)) == 1, timeout_ms=timeout_ms, poll_ms=5)
    return serving(sim, names)[0]


def ask(sim, addr, code, header=None, body=None) -> RemotingCommand:
    client = RemotingClient(sim.nodes["client"])
    request = RemotingCommand.create_request_command(code, header.to_ext_fields() if header else None, body)
    return sim.run(client.invoke_sync(addr, request, TIMEOUT_MS))


def controller_ports(n: int) -> list[int]:
    """n ports whose Raft ports (port + RAFT_PORT_OFFSET) are free too."""
    for _ in range(50):
        ports = [p for p in free_ports(3 * n) if p + RAFT_PORT_OFFSET <= 65535]
        chosen = []
        for p in ports:
            with socket.socket() as s:
                try:
                    s.bind(("127.0.0.1", p + RAFT_PORT_OFFSET))
                except OSError:
                    continue
            chosen.append(p)
            if len(chosen) == n:
                return chosen
    raise RuntimeError("no free controller ports")


def call(addr: str, code: int, header=None, timeout_ms: float = 8000) -> RemotingCommand:
    async def main():
        node = RealNode("test-client", "/tmp")
        client = RemotingClient(node)
        try:
            request = RemotingCommand.create_request_command(code, header.to_ext_fields() if header else None)
            return await client.invoke_sync(addr, request, timeout_ms)
        finally:
            await client.shutdown()
            await node.close()

    return asyncio.run(main())


def leader_of(addrs: list[str]) -> str | None:
    """The leader address every reachable controller names, once it serves."""
    views = set()
    for addr in addrs:
        try:
            views.add(GetMetaDataResponseHeader.decode(call(addr, RequestCode.CONTROLLER_GET_METADATA_INFO,
                                                            timeout_ms=1000)).controller_leader_address)
        except Exception:
            return None
    if len(views) != 1 or None in views:
        return None
    leader = views.pop()
    try:  # the survivors may still name a leader that was just killed
        probe = call(leader, RequestCode.CONTROLLER_GET_NEXT_BROKER_ID, GetNextBrokerIdRequestHeader(CLUSTER, "probe"),
                     timeout_ms=2000)
    except Exception:
        return None
    return leader if probe.code == RC.SUCCESS else None


def call_leader(addrs: list[str], code: int, header, timeout_s: float = 20) -> RemotingCommand:
    """The request to the serving leader. Three Raft peers on a loaded machine may elect again
    between two requests (the old leader then answers CONTROLLER_NOT_LEADER, having applied
    nothing): ask the new one, as ReplicasManager does after it re-reads the controller metadata."""
    deadline = time.monotonic() + timeout_s
    while True:
        current = wait_for(lambda: leader_of(addrs), timeout_s, "a serving leader")
        r = call(current, code, header)
        if r.code != RC.CONTROLLER_NOT_LEADER or time.monotonic() > deadline:
            return r
        time.sleep(0.2)


def wait_for(predicate, timeout_s: float, what: str):
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        result = predicate()
        if result:
            return result
        time.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what}")
