"""Admin of controller mode: getControllerMetaData, getSyncStateSet, getBrokerEpoch, electMaster,
cleanBrokerMetadata through DefaultMQAdminExt and `rmqlab admin` (RocketMQ's mqadmin commands in
tools/src/main/java/org/apache/rocketmq/tools/command/, the request and response codes of
RequestCode.java and ResponseCode.java, the controller's ControllerRequestProcessor).

On the simulator: three ControllerManagers (tests.test_controller's set-up), a name server, and
scripted brokers (tests.test_controller.FakeBroker: heartbeats and the register flow) that also
answer GET_BROKER_EPOCH_CACHE (1007) from a scripted epoch list, and are registered with the name
server, so that getBrokerEpoch can find them as mqadmin does. The CLI's commands run there too
(their output checked line by line). Then once on real processes: three standalone controllers
(`rmqlab controller -c`), `python -m rmqlab.cli admin ...` against them.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import re
import subprocess
import sys
import threading
import time

import pytest

from rmqlab import admin_cli
from rmqlab.client import DefaultMQAdminExt
from rmqlab.client.exceptions import ClientErrorCode, MQBrokerException, MQClientException
from rmqlab.common.checkpoint_file import LONG_MAX
from rmqlab.config.namesrv import NamesrvConfig
from rmqlab.config.netty import NettyServerConfig
from rmqlab.controller.controller_manager import ControllerManager
from rmqlab.namesrv import NamesrvController
from rmqlab.remoting.exceptions import RemotingConnectError
from rmqlab.remoting.protocol.body.epoch_entry_cache import EpochEntryCache
from rmqlab.remoting.protocol.body.sync_state_set import SyncStateSet
from rmqlab.remoting.protocol.epoch_entry import EpochEntry
from rmqlab.remoting.protocol.header.controller import (AlterSyncStateSetRequestHeader, ApplyBrokerIdRequestHeader,
                                                        ElectMasterRequestHeader, GetMetaDataResponseHeader,
                                                        RegisterBrokerToControllerRequestHeader)
from rmqlab.remoting.remoting_client import RemotingClient
from rmqlab.remoting.remoting_command import RemotingCommand
from rmqlab.remoting.remoting_server import RemotingServer
from rmqlab.remoting.request_code import RequestCode
from rmqlab.remoting.response_code import ResponseCode as RC
from rmqlab.runtime.component import Component
from rmqlab.runtime.sim import Simulation
from tests.controller_helpers import CLUSTER, A, FakeBroker, Idle, ask, controller_config, wait_leader
from tests.namesrv_helpers import FakeBroker as NamesrvRegistration

NS = "127.0.0.1:9876"
CONTROLLERS = [f"127.0.0.1:{9877 + i}" for i in range(3)]


class EpochBroker(FakeBroker):
    """FakeBroker that also answers GET_BROKER_EPOCH_CACHE as a controller-mode broker's
    AdminBrokerProcessor does: its identity, its epoch entries, its commitlog max offset."""

    def __init__(self, addr: str, controllers: list[str], epochs: list[EpochEntry], max_offset: int):
        super().__init__(addr, controllers)
        self.epochs, self.max_offset = epochs, max_offset

    async def start(self, node):
        await super().start(node)
        self.server.register_processor(RequestCode.GET_BROKER_EPOCH_CACHE, self._on_epoch_cache)

    async def _on_epoch_cache(self, channel, request):
        cache = EpochEntryCache(CLUSTER, self.broker_name, self.broker_id, self.epochs, self.max_offset)
        return RemotingCommand.create_response_command(RC.SUCCESS, body=cache.encode())


class StaleController(Component):
    """A controller stand-in answering CONTROLLER_GET_METADATA_INFO with a fixed view (a controller
    that names a leader which has since stepped down, or that knows no leader)."""

    def __init__(self, port: int, leader_address: str | None):
        self.port, self.leader_address = port, leader_address

    async def start(self, node):
        self.server = RemotingServer(node, "127.0.0.1", self.port)
        self.server.register_processor(RequestCode.CONTROLLER_GET_METADATA_INFO, self._meta)
        await self.server.start()

    async def _meta(self, channel, request):
        header = GetMetaDataResponseHeader("group1", "n9" if self.leader_address else None, self.leader_address,
                                           False, "n9:127.0.0.1:9999;")
        return RemotingCommand.create_response_command(RC.SUCCESS, None, ext_fields=header.to_ext_fields())


# b1 was master in epoch 1 up to offset 1000, b2 from there; each broker's file as its own.
EPOCHS = {"b1": [EpochEntry(1, 0, 1000), EpochEntry(2, 1000)], "b2": [EpochEntry(1, 0, 1000), EpochEntry(2, 1000)],
          "b3": [EpochEntry(1, 0)]}
MAX_OFFSETS = {"b1": 1000, "b2": 2500, "b3": 640}


class Lab:
    def __init__(self, seed: int):
        sim = self.sim = Simulation(seed=seed)
        self.names = ["n0", "n1", "n2"]
        for name in self.names:
            sim.add_node(name, lambda name=name: ControllerManager(controller_config(sim, name, 3)))
        sim.add_node("namesrv", lambda: NamesrvController(NamesrvConfig(), NettyServerConfig(listenPort=9876)))
        self.bnames = ["b1", "b2", "b3"]
        for i, b in enumerate(self.bnames):
            sim.add_node(b, lambda i=i, b=b: EpochBroker(f"127.0.0.1:{30911 + 10 * i}", CONTROLLERS, EPOCHS[b],
                                                         MAX_OFFSETS[b]))
        sim.add_node("client", Idle)
        sim.start_all()
        self.leader = wait_leader(sim, self.names)
        self.addr = {n: sim.components[n].address for n in self.names}
        self.followers = [self.addr[n] for n in self.names if n != self.leader]
        self.admin = DefaultMQAdminExt(NS)
        self.run(self.admin.start(sim.nodes["client"]))

    def run(self, coro):
        return self.sim.run(coro)

    def broker(self, b: str) -> EpochBroker:
        return self.sim.components[b]

    def register_all(self) -> None:
        """b1 registers and is elected (first election); b2, b3 follow; the master widens its
        SyncStateSet to {1, 2}. Each also registers with the name server (b1 as the master, id 0)."""
        for b in self.bnames:
            self.broker(b).start_heartbeats()
        self.sim.run_for(1_500)
        for b in self.bnames:
            self.run(self.broker(b).register())
        assert self.run(self.broker("b1").elect()).code == RC.SUCCESS
        r = ask(self.sim, self.addr[self.leader], RequestCode.CONTROLLER_ALTER_SYNC_STATE_SET,
                AlterSyncStateSetRequestHeader(A, 1, 1), SyncStateSet({1, 2}, 1).encode())
        assert r.code == RC.SUCCESS, r.remark
        for b in self.bnames:
            fb = self.broker(b)
            ns_id = 0 if fb.broker_id == 1 else fb.broker_id
            assert NamesrvRegistration(self.sim, b, A, ns_id, fb.addr).register(namesrv=NS).code == RC.SUCCESS

    def wait_inactive(self, b: str) -> None:
        """Until the leader no longer counts broker ``b`` alive (its connections closed)."""
        hm = self.sim.components[self.leader].heartbeat_manager
        bid = self.broker(b).broker_id
        self.sim.run_until(lambda: not hm.is_broker_active(CLUSTER, A, bid), timeout_ms=15_000, poll_ms=10)

    def cli(self, capsys, name: str, **options) -> tuple[int, str, str]:
        """Run `rmqlab admin <name>`'s command on the simulator's admin client; (exit, stdout, stderr)."""
        defaults = {"namesrv_addr": NS, "controller_address": None, "broker_name": None, "cluster_name": None,
                    "interval": None, "broker_id": None, "broker_ids": None, "clean_living_broker": False}
        args = argparse.Namespace(subcommand=name, **{**defaults, **options})
        capsys.readouterr()
        code = self.run(admin_cli.COMMANDS[name](self.admin, args))
        captured = capsys.readouterr()
        return code, captured.out, captured.err

    def close(self) -> None:
        self.sim.close()


@pytest.fixture
def lab():
    lab = Lab(seed=21)
    yield lab
    lab.close()


def replica_view(info) -> dict:
    return {name: (ri.master_broker_id, ri.master_address, ri.master_epoch, ri.sync_state_set_epoch,
                   [(r.broker_id, r.broker_address, r.alive) for r in ri.in_sync_replicas],
                   [(r.broker_id, r.broker_address, r.alive) for r in ri.not_in_sync_replicas])
            for name, ri in info.replicas_info_table.items()}


# -- getControllerMetaData ---------------------------------------------------------------------------
def test_get_controller_meta_data_from_each_controller_and_from_a_list(lab, capsys):
    for n in lab.names:
        meta = lab.run(lab.admin.get_controller_meta_data(lab.addr[n]))
        assert (meta.group, meta.controller_leader_id, meta.controller_leader_address) == (
            "group1", lab.leader, lab.addr[lab.leader])
        assert meta.is_leader == (n == lab.leader)
        assert meta.peers == "n0:127.0.0.1:9877;n1:127.0.0.1:9878;n2:127.0.0.1:9879;"

    code, out, _ = lab.cli(capsys, "getControllerMetaData", controller_address=";".join(CONTROLLERS))
    assert code == 0
    blocks = out.strip().split("\n\n")
    assert len(blocks) == 3
    n0 = blocks[0].splitlines()
    assert n0 == ["#ControllerAddress\t127.0.0.1:9877", "#ControllerGroup\tgroup1",
                  f"#ControllerLeaderId\t{lab.leader}", f"#ControllerLeaderAddress\t{lab.addr[lab.leader]}",
                  f"#IsLeader\t{'true' if lab.leader == 'n0' else 'false'}",
                  "#Peer:\tn0:127.0.0.1:9877", "#Peer:\tn1:127.0.0.1:9878", "#Peer:\tn2:127.0.0.1:9879"]
    assert out.count("#IsLeader\ttrue") == 1

    # A dead controller first in the list: the next one answers.
    dead = next(n for n in lab.names if n != lab.leader)
    lab.sim.nemesis.kill(dead)
    others = [lab.addr[n] for n in lab.names if n != dead]
    meta = lab.run(lab.admin.get_controller_meta_data(";".join([lab.addr[dead], *others])))
    assert meta.controller_leader_address == lab.addr[lab.leader]
    with pytest.raises(RemotingConnectError):
        lab.run(lab.admin.get_controller_meta_data(lab.addr[dead]))
    code, out, err = lab.cli(capsys, "getControllerMetaData", controller_address=";".join(CONTROLLERS))
    assert code == 1 and out.count("#ControllerAddress") == 2  # the others are still printed
    assert err.startswith(f"rmqlab admin getControllerMetaData: cannot reach {lab.addr[dead]}: ")
    for bad in ("", "nohost", "127.0.0.1:9877;;127.0.0.1:9878"):
        with pytest.raises(ValueError, match="controller address|no controller address"):
            lab.run(lab.admin.get_controller_meta_data(bad))


# -- getSyncStateSet ---------------------------------------------------------------------------------
def test_get_in_sync_state_data_asks_the_leader_found_through_any_controller(lab, capsys):
    lab.register_all()
    b1, b2, b3 = (lab.broker(b) for b in lab.bnames)
    expected = {A: (1, b1.addr, 1, 2, [(1, b1.addr, True), (2, b2.addr, True)], [(3, b3.addr, True)])}
    # Through a follower (it names the leader), through a list led by a dead address.
    assert replica_view(lab.run(lab.admin.get_in_sync_state_data(lab.followers[0], [A]))) == expected
    assert replica_view(lab.run(lab.admin.get_in_sync_state_data(
        "127.0.0.1:9000;" + ";".join(lab.followers), [A, "broker-x"]))) == expected  # unknown sets left out

    code, out, _ = lab.cli(capsys, "getSyncStateSet", controller_address=lab.followers[1], broker_name=A)
    assert code == 0
    assert out == ("\n#brokerName\tbroker-a\n#MasterBrokerId\t1\n#MasterAddr\t127.0.0.1:30911\n#MasterEpoch\t1\n"
                   "#SyncStateSetEpoch\t2\n#SyncStateSetNums\t2\n"
                   "\nInSyncReplica:\tReplicaIdentity{brokerName='broker-a', brokerId=1, "
                   "brokerAddress='127.0.0.1:30911', alive=true}\n"
                   "\nInSyncReplica:\tReplicaIdentity{brokerName='broker-a', brokerId=2, "
                   "brokerAddress='127.0.0.1:30921', alive=true}\n"
                   "\nNotInSyncReplica:\tReplicaIdentity{brokerName='broker-a', brokerId=3, "
                   "brokerAddress='127.0.0.1:30931', alive=true}\n")
    # -c: the cluster's broker sets come from the name server.
    code, by_cluster, _ = lab.cli(capsys, "getSyncStateSet", controller_address=lab.followers[1], cluster_name=CLUSTER)
    assert code == 0 and by_cluster == out

    # A replica whose process died is reported not alive.
    lab.sim.nemesis.kill("b3")
    lab.wait_inactive("b3")
    info = lab.run(lab.admin.get_in_sync_state_data(lab.addr[lab.leader], [A]))
    assert [(r.broker_id, r.alive) for r in info.replicas_info_table[A].not_in_sync_replicas] == [(3, False)]

    # Unknown set, unknown cluster, no -n for -c, nothing to ask: clear errors.
    with pytest.raises(ValueError, match="broker set broker-x is not known to the controller"):
        lab.cli(capsys, "getSyncStateSet", controller_address=lab.followers[0], broker_name="broker-x")
    with pytest.raises(ValueError, match="cluster NoSuchCluster not found on the name server"):
        lab.cli(capsys, "getSyncStateSet", controller_address=lab.followers[0], cluster_name="NoSuchCluster")
    with pytest.raises(ValueError, match="missing -n"):
        lab.cli(capsys, "getSyncStateSet", controller_address=lab.followers[0], cluster_name=CLUSTER,
                namesrv_addr=None)
    with pytest.raises(ValueError, match="missing -b or -c"):
        lab.cli(capsys, "getSyncStateSet", controller_address=lab.followers[0])
    for bad in ([], "broker-a", [""]):
        with pytest.raises(ValueError, match="non-empty list of broker names"):
            lab.run(lab.admin.get_in_sync_state_data(lab.followers[0], bad))


def test_get_sync_state_set_interval_repeats_until_cancelled(lab, capsys):
    lab.register_all()
    args = argparse.Namespace(subcommand="getSyncStateSet", namesrv_addr=NS, controller_address=lab.followers[0],
                              broker_name=A, cluster_name=None, interval=2)
    capsys.readouterr()
    task = lab.sim.nodes["client"].spawn(admin_cli.COMMANDS["getSyncStateSet"](lab.admin, args))
    lab.sim.run_for(5_000)  # virtual time: rounds at 0, 2 and 4 s
    task.cancel()
    lab.sim.run_for(10)
    assert capsys.readouterr().out.count("#brokerName\tbroker-a") == 3


def test_leader_lookup_follows_a_not_leader_redirect_and_fails_clearly_without_a_leader(lab):
    lab.register_all()
    # A controller whose view is stale names a follower as leader; the follower's
    # CONTROLLER_NOT_LEADER names the real leader, which is followed once.
    lab.sim.add_node("stale", lambda: StaleController(9890, lab.followers[0]))
    lab.sim.add_node("lost", lambda: StaleController(9891, None))
    lab.sim.start("stale")
    lab.sim.start("lost")
    info = lab.run(lab.admin.get_in_sync_state_data("127.0.0.1:9890", [A]))
    assert info.replicas_info_table[A].master_broker_id == 1
    # No controller knows a leader / none answers.
    with pytest.raises(MQClientException, match="no controller leader known") as e:
        lab.run(lab.admin.get_in_sync_state_data("127.0.0.1:9891", [A]))
    assert e.value.response_code == RC.CONTROLLER_NOT_LEADER
    with pytest.raises(MQClientException, match="no controller reachable") as e:
        lab.run(lab.admin.elect_master("127.0.0.1:9000;127.0.0.1:9001", CLUSTER, A, 2))
    assert e.value.response_code == ClientErrorCode.CONNECT_BROKER_EXCEPTION
    # The leader and a follower die: the survivor still answers metadata, but either names the
    # dead leader (unreachable) or no leader; no serving leader either way, said so.
    survivor = lab.names.index(next(n for n in lab.names if lab.addr[n] == lab.followers[1]))
    for i, n in enumerate(lab.names):
        if i != survivor:
            lab.sim.nemesis.kill(n)
    lab.sim.run_for(20_000)
    with pytest.raises(MQClientException) as e:
        lab.run(lab.admin.clean_controller_broker_data(lab.followers[1], CLUSTER, A, "3"))
    assert ((e.value.response_code, e.value.error_message.split(" (")[0]) in (
        (ClientErrorCode.CONNECT_BROKER_EXCEPTION, f"the controller leader {lab.addr[lab.leader]} is unreachable"),
        (RC.CONTROLLER_NOT_LEADER, "no controller leader known"))), e.value


# -- electMaster -------------------------------------------------------------------------------------
def test_elect_master_designates_a_broker_and_reports_the_controllers_refusals(lab, capsys):
    lab.register_all()
    b1, b2, b3 = (lab.broker(b) for b in lab.bnames)
    before = len(b2.notifications)
    header, members = lab.run(lab.admin.elect_master(lab.followers[0], CLUSTER, A, 2))  # through a follower
    assert (header.master_broker_id, header.master_address, header.master_epoch, header.sync_state_set_epoch) == (
        2, b2.addr, 2, 3)
    assert members.broker_addrs == {1: b1.addr, 2: b2.addr, 3: b3.addr}
    lab.sim.run_until(lambda: len(b2.notifications) > before, timeout_ms=5_000, poll_ms=5)
    assert b2.notifications[-1][0].master_broker_id == 2  # the controller told the set's live members
    info = lab.run(lab.admin.get_in_sync_state_data(lab.followers[0], [A]))
    assert replica_view(info)[A][:5] == (2, b2.addr, 2, 3, [(2, b2.addr, True)])

    # Refusals, with the controller's codes.
    cases = [(2, RC.CONTROLLER_MASTER_STILL_EXIST),  # already the master
             (3, RC.CONTROLLER_ELECT_MASTER_FAILED)]  # alive, but not in the SyncStateSet {2}
    for broker_id, code in cases:
        with pytest.raises(MQBrokerException) as e:
            lab.run(lab.admin.elect_master(lab.followers[1], CLUSTER, A, broker_id))
        assert e.value.response_code == code and e.value.broker_addr == lab.addr[lab.leader]
    with pytest.raises(MQBrokerException) as e:
        lab.run(lab.admin.elect_master(lab.followers[1], CLUSTER, "broker-x", 1))
    assert e.value.response_code == RC.CONTROLLER_BROKER_NEED_TO_BE_REGISTERED
    args = argparse.Namespace(broker_name="broker-x")
    assert "broker set broker-x is not known to the controller" in admin_cli.explain(e.value, args)
    # In the SyncStateSet but dead: not electable either.
    r = ask(lab.sim, lab.addr[lab.leader], RequestCode.CONTROLLER_ALTER_SYNC_STATE_SET,
            AlterSyncStateSetRequestHeader(A, 2, 2), SyncStateSet({2, 3}, 3).encode())
    assert r.code == RC.SUCCESS, r.remark
    lab.sim.nemesis.kill("b3")
    lab.wait_inactive("b3")
    with pytest.raises(MQBrokerException) as e:
        lab.run(lab.admin.elect_master(lab.followers[1], CLUSTER, A, 3))
    assert e.value.response_code == RC.CONTROLLER_ELECT_MASTER_FAILED

    # Bad arguments never reach the controller (the master is still 2).
    for bad_id in (0, -1, True, "2", None):
        with pytest.raises(ValueError, match="brokerId: expected a controller broker id"):
            lab.run(lab.admin.elect_master(lab.followers[0], CLUSTER, A, bad_id))
    for cluster, name, what in (("", A, "clusterName"), (CLUSTER, " ", "brokerName")):
        with pytest.raises(ValueError, match=what):
            lab.run(lab.admin.elect_master(lab.followers[0], cluster, name, 1))

    # Back to b1 through the CLI, once the master has taken it into its SyncStateSet.
    r = ask(lab.sim, lab.addr[lab.leader], RequestCode.CONTROLLER_ALTER_SYNC_STATE_SET,
            AlterSyncStateSetRequestHeader(A, 2, 2), SyncStateSet({1, 2}, 4).encode())
    assert r.code == RC.SUCCESS, r.remark
    code, out, _ = lab.cli(capsys, "electMaster", controller_address=";".join(CONTROLLERS), cluster_name=CLUSTER,
                        broker_name=A, broker_id=1)
    assert code == 0
    assert out == ("\n#ClusterName\tDefaultCluster\n#BrokerName\tbroker-a\n#BrokerMasterAddr\t127.0.0.1:30911\n"
                   "#MasterEpoch\t3\n#SyncStateSetEpoch\t6\n"
                   "\t#Broker\t1\t127.0.0.1:30911\n\t#Broker\t2\t127.0.0.1:30921\n\t#Broker\t3\t127.0.0.1:30931\n")


# -- cleanBrokerMetadata -----------------------------------------------------------------------------
def test_clean_controller_broker_data_refuses_living_brokers_unless_told(lab, capsys):
    lab.register_all()
    follower = lab.followers[0]
    # A live replica, or the whole set while it has a master, is refused without -l.
    for ids in ("1", "2;3", None):
        with pytest.raises(MQBrokerException) as e:
            lab.run(lab.admin.clean_controller_broker_data(follower, CLUSTER, A, ids))
        assert e.value.response_code == RC.CONTROLLER_INVALID_CLEAN_BROKER_METADATA
        assert "is still alive, clean up failure" in e.value.error_message
    with pytest.raises(MQBrokerException, match="Broker broker-x is not existed,clean broker data failure."):
        lab.run(lab.admin.clean_controller_broker_data(follower, CLUSTER, "broker-x", "1"))
    # Argument checks (mqadmin's), before anything is sent.
    with pytest.raises(ValueError, match="clusterName: cleanLivingBroker is false"):
        lab.run(lab.admin.clean_controller_broker_data(follower, None, A, "3"))
    for ids in ("1;x", "", "1;;2", "1 2"):
        with pytest.raises(ValueError, match="brokerControllerIdsToClean"):
            lab.run(lab.admin.clean_controller_broker_data(follower, CLUSTER, A, ids))

    # b3 dies: its metadata can go.
    lab.sim.nemesis.kill("b3")
    lab.wait_inactive("b3")
    code, out, _ = lab.cli(capsys, "cleanBrokerMetadata", controller_address=follower, cluster_name=CLUSTER,
                        broker_name=A, broker_ids="3")
    assert (code, out) == (0, "clear broker broker-a metadata from controller success! \n")
    info = lab.run(lab.admin.get_in_sync_state_data(follower, [A]))
    assert [r.broker_id for r in info.replicas_info_table[A].not_in_sync_replicas] == []
    leader_state = lab.sim.components[lab.leader].controller.replicas_info_manager
    assert 3 not in leader_state.replica_info_table[A].get_broker_id_table()

    # -l: the whole set, living master included (no cluster name needed).
    lab.run(lab.admin.clean_controller_broker_data(follower, None, A, None, True))
    assert lab.run(lab.admin.get_in_sync_state_data(follower, [A])).replicas_info_table == {}
    with pytest.raises(MQBrokerException) as e:
        lab.run(lab.admin.elect_master(follower, CLUSTER, A, 1))
    assert e.value.response_code == RC.CONTROLLER_BROKER_NEED_TO_BE_REGISTERED
    lab.sim.run_for(500)
    states = {lab.sim.components[n].controller.replicas_info_manager.serialize() for n in lab.names}
    assert len(states) == 1  # every controller applied the same clean


# -- getBrokerEpoch ----------------------------------------------------------------------------------
def test_get_broker_epoch_cache_from_each_broker_found_on_the_name_server(lab, capsys):
    lab.register_all()
    b1, b2, b3 = (lab.broker(b) for b in lab.bnames)
    cache = lab.run(lab.admin.get_broker_epoch_cache(b2.addr))
    assert (cache.cluster_name, cache.broker_name, cache.broker_id, cache.max_offset) == (CLUSTER, A, 2, 2500)
    assert cache.epoch_list == [EpochEntry(1, 0, 1000), EpochEntry(2, 1000, LONG_MAX)]

    code, out, _ = lab.cli(capsys, "getBrokerEpoch", broker_name=A)
    assert code == 0
    assert out == (
        "\n#clusterName\tDefaultCluster\n#brokerName\tbroker-a\n#brokerAddr\t127.0.0.1:30911\n#brokerId\t1\n"
        "#Epoch: EpochEntry{epoch=1, startOffset=0, endOffset=1000}\n"
        "#Epoch: EpochEntry{epoch=2, startOffset=1000, endOffset=1000}\n"
        "\n#clusterName\tDefaultCluster\n#brokerName\tbroker-a\n#brokerAddr\t127.0.0.1:30921\n#brokerId\t2\n"
        "#Epoch: EpochEntry{epoch=1, startOffset=0, endOffset=1000}\n"
        "#Epoch: EpochEntry{epoch=2, startOffset=1000, endOffset=2500}\n"  # the open epoch ends at maxOffset
        "\n#clusterName\tDefaultCluster\n#brokerName\tbroker-a\n#brokerAddr\t127.0.0.1:30931\n#brokerId\t3\n"
        "#Epoch: EpochEntry{epoch=1, startOffset=0, endOffset=640}\n")
    code, by_cluster, _ = lab.cli(capsys, "getBrokerEpoch", cluster_name=CLUSTER)
    assert code == 0 and by_cluster == out

    with pytest.raises(ValueError, match="broker set broker-x not found on the name server"):
        lab.cli(capsys, "getBrokerEpoch", broker_name="broker-x")
    with pytest.raises(ValueError, match="cluster NoSuchCluster not found"):
        lab.cli(capsys, "getBrokerEpoch", cluster_name="NoSuchCluster")
    # Something that is not a controller-mode broker (here a controller) refuses the request.
    with pytest.raises(MQBrokerException) as e:
        lab.run(lab.admin.get_broker_epoch_cache(lab.addr[lab.leader]))
    assert e.value.response_code == RC.REQUEST_CODE_NOT_SUPPORTED


# -- real processes ----------------------------------------------------------------------------------
class HeartbeatThread(threading.Thread):
    """Keeps scripted replicas alive on every controller: BROKER_HEARTBEAT every 500 ms over one
    connection per controller, as a broker's ReplicasManager does (a closed connection would make
    the controllers drop them at once)."""

    def __init__(self, controllers: list[str], replicas: list[tuple[int, str]]):
        super().__init__(daemon=True)
        self.controllers, self.replicas = controllers, replicas
        self.stop_event = threading.Event()
        self.beats = 0

    def run(self) -> None:
        asyncio.run(self._main())

    async def _main(self) -> None:
        from rmqlab.runtime.real import RealNode

        node = RealNode("test-brokers", "/tmp")
        client = RemotingClient(node)
        try:
            while not self.stop_event.is_set():
                for addr in self.controllers:
                    for broker_id, broker_addr in self.replicas:
                        request = RemotingCommand.create_request_command(RequestCode.BROKER_HEARTBEAT, {
                            "clusterName": CLUSTER, "brokerAddr": broker_addr, "brokerName": A,
                            "brokerId": broker_id, "epoch": 0, "maxOffset": 0, "confirmOffset": 0,
                            "heartbeatTimeoutMills": 10_000})
                        try:
                            await client.invoke_sync(addr, request, 1000)
                        except Exception:
                            pass  # a controller not up yet
                self.beats += 1
                await asyncio.sleep(0.5)
        finally:
            await client.shutdown()
            await node.close()


def admin_command(*argv: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "rmqlab.cli", "admin", *argv], capture_output=True, text=True,
                          timeout=60, cwd=os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


@pytest.mark.real
def test_rmqlab_admin_against_three_controller_processes(tmp_path):
    from rmqlab.runtime.real_cluster import RealCluster, free_ports
    from tests.controller_helpers import call_leader, controller_ports, leader_of, wait_for

    ports = controller_ports(3)
    names = ["n0", "n1", "n2"]
    addr = {n: f"127.0.0.1:{p}" for n, p in zip(names, ports)}
    addrs = list(addr.values())
    peers = ";".join(f"{n}-{addr[n]}" for n in names)
    b1, b2 = (f"127.0.0.1:{p}" for p in free_ports(2))  # nothing listens there: notifications fail, logged
    cluster = RealCluster(str(tmp_path / "cluster"), relay=False, startup_timeout_s=30)
    beats = HeartbeatThread(addrs, [(1, b1), (2, b2)])
    try:
        for n in names:
            conf = tmp_path / f"controller-{n}.conf"
            conf.write_text(f"controllerDLegerGroup = group1\ncontrollerDLegerPeers = {peers}\n"
                            f"controllerDLegerSelfId = {n}\ncontrollerStorePath = {tmp_path / ('store-' + n)}\n")
            cluster.add_node(n, [sys.executable, "-m", "rmqlab.cli", "controller", "-c", str(conf)],
                             ports=[ports[names.index(n)]])
        cluster.start_all(timeout_s=30)
        # Two replicas of broker-a: ids applied and registered; b1 is elected (the first election).
        now = int(time.time() * 1000)
        for broker_id, broker_addr in ((1, b1), (2, b2)):
            r = call_leader(addrs, RequestCode.CONTROLLER_APPLY_BROKER_ID,
                            ApplyBrokerIdRequestHeader(CLUSTER, A, broker_id, f"{broker_addr};{now}"))
            assert r.code == RC.SUCCESS, r.remark
            r = call_leader(addrs, RequestCode.CONTROLLER_REGISTER_BROKER,
                            RegisterBrokerToControllerRequestHeader(CLUSTER, A, broker_id, broker_addr))
            assert r.code == RC.SUCCESS, r.remark
        r = call_leader(addrs, RequestCode.CONTROLLER_ELECT_MASTER,
                        ElectMasterRequestHeader.of_broker_trigger(CLUSTER, A, 1))
        assert r.code == RC.SUCCESS, r.remark
        beats.start()
        wait_for(lambda: beats.beats >= 2, 20, "two rounds of heartbeats")

        all_addrs = ";".join(addrs)
        # The leader when the command ran (a loaded machine may have elected again since the
        # requests above): every controller names the same one, and only it says it leads.
        wait_for(lambda: leader_of(addrs), 20, "a serving leader")
        meta = admin_command("getControllerMetaData", "-a", all_addrs)
        assert meta.returncode == 0, meta.stderr
        leader_ids = set(re.findall(r"#ControllerLeaderId\t(\S+)\n", meta.stdout))
        assert len(leader_ids) == 1 and leader_ids <= set(names), meta.stdout
        leader_id = leader_ids.pop()
        leader = addr[leader_id]
        for n in names:
            assert f"#ControllerAddress\t{addr[n]}\n#ControllerGroup\tgroup1\n#ControllerLeaderId\t{leader_id}\n" \
                   f"#ControllerLeaderAddress\t{leader}\n#IsLeader\t{'true' if n == leader_id else 'false'}\n" \
                   in meta.stdout
        assert meta.stdout.count(f"#Peer:\t{names[0]}:{addr[names[0]]}") == 3

        follower = next(a for a in addrs if a != leader)
        sss = admin_command("getSyncStateSet", "-a", follower, "-b", A)
        assert sss.returncode == 0, sss.stderr
        assert sss.stdout == (
            f"\n#brokerName\t{A}\n#MasterBrokerId\t1\n#MasterAddr\t{b1}\n#MasterEpoch\t1\n#SyncStateSetEpoch\t1\n"
            f"#SyncStateSetNums\t1\n"
            f"\nInSyncReplica:\tReplicaIdentity{{brokerName='{A}', brokerId=1, brokerAddress='{b1}', alive=true}}\n"
            f"\nNotInSyncReplica:\tReplicaIdentity{{brokerName='{A}', brokerId=2, brokerAddress='{b2}', "
            f"alive=true}}\n")

        # electMaster of replica 2, outside the SyncStateSet {1}: refused, exit 1 with the code.
        refused = admin_command("electMaster", "-a", all_addrs, "-c", CLUSTER, "-bn", A, "-b", "2")
        assert refused.returncode == 1 and "CODE: 2012" in refused.stderr and refused.stdout == ""
        unknown = admin_command("getSyncStateSet", "-a", follower, "-b", "broker-x")
        assert unknown.returncode == 1
        assert "broker set broker-x is not known to the controller" in unknown.stderr
        dead_port = free_ports(1)[0]
        unreachable = admin_command("electMaster", "-a", f"127.0.0.1:{dead_port}", "-c", CLUSTER, "-bn", A, "-b", "2")
        assert unreachable.returncode == 1 and "no controller reachable" in unreachable.stderr
        bad = admin_command("electMaster", "-a", follower, "-c", CLUSTER, "-bn", A, "-b", "two")
        assert bad.returncode == 2 and "expected a broker id (an integer), got 'two'" in bad.stderr
    finally:
        beats.stop_event.set()
        if beats.is_alive():
            beats.join(timeout=10)
        cluster.close()


# -- real controller-mode brokers ---------------------------------------------------------------------

def test_elect_master_moves_real_controller_mode_brokers_and_get_broker_epoch_reads_their_epoch_files(capsys):
    """BrokerControllers with enableControllerMode (tests.test_replicas_manager's set-up) against
    three Raft controllers: the admin election moves the master, both brokers' epoch files show it."""
    from rmqlab.config.broker import BrokerRole
    from tests.replicas_helpers import PORTS, br, broker_factory, put, rm, start_and_wait_running

    sim = Simulation(seed=31)
    try:
        sim.add_node("namesrv", NamesrvController)
        sim.start("namesrv")
        for name in ("n0", "n1", "n2"):
            sim.add_node(name, lambda name=name: ControllerManager(controller_config(sim, name, 3)))
            sim.start(name)
        for name in ("A", "B"):
            sim.add_node(name, broker_factory(sim, name, controllerAddr=";".join(CONTROLLERS)))
        start_and_wait_running(sim, "A", 60_000)
        start_and_wait_running(sim, "B", 60_000)
        sim.add_node("client", Idle)
        sim.start("client")
        admin = DefaultMQAdminExt(NS)
        sim.run(admin.start(sim.nodes["client"]))
        a, b = f"127.0.0.1:{PORTS['A']}", f"127.0.0.1:{PORTS['B']}"
        for i in range(10):
            assert put(sim, "A", i).result().put_message_status.name == "PUT_OK"
        switch_offset = br(sim, "A").message_store.get_max_phy_offset()
        sim.run_until(lambda: rm(sim, "A").sync_state_set == {1, 2}
                      and br(sim, "B").message_store.get_max_phy_offset() == switch_offset, 30_000)

        header, members = sim.run(admin.elect_master(";".join(CONTROLLERS), CLUSTER, A, 2))
        assert (header.master_broker_id, header.master_address, header.master_epoch) == (2, b, 2)
        assert members.broker_addrs == {1: a, 2: b}
        # The controller's notification makes B master and A its slave.
        sim.run_until(lambda: br(sim, "B").message_store_config.brokerRole is BrokerRole.SYNC_MASTER
                      and rm(sim, "A").master_broker_id == 2, 30_000)
        assert put(sim, "B", 100).result().put_message_status.name == "PUT_OK"
        end = br(sim, "B").message_store.get_max_phy_offset()
        sim.run_until(lambda: br(sim, "A").message_store.get_max_phy_offset() == end, 30_000)
        ns = sim.components["namesrv"].route_info_manager.broker_addr_table
        sim.run_until(lambda: A in ns and dict(ns[A].broker_addrs) == {0: b, 1: a}, 30_000)

        args = argparse.Namespace(subcommand="getBrokerEpoch", namesrv_addr=NS, broker_name=A, cluster_name=None,
                                  interval=None)
        capsys.readouterr()
        assert sim.run(admin_cli.COMMANDS["getBrokerEpoch"](admin, args)) == 0
        epochs = (f"#Epoch: EpochEntry{{epoch=1, startOffset=0, endOffset={switch_offset}}}\n"
                  f"#Epoch: EpochEntry{{epoch=2, startOffset={switch_offset}, endOffset={end}}}\n")
        # On the name server's side the master is id 0; the epoch cache carries the broker's brokerId.
        assert capsys.readouterr().out == (
            f"\n#clusterName\t{CLUSTER}\n#brokerName\t{A}\n#brokerAddr\t{a}\n#brokerId\t1\n{epochs}"
            f"\n#clusterName\t{CLUSTER}\n#brokerName\t{A}\n#brokerAddr\t{b}\n#brokerId\t0\n{epochs}")
        info = sim.run(admin.get_in_sync_state_data(CONTROLLERS[0], [A]))
        # syncStateSetEpoch: 1 first election, 2 A joins, 3 the admin election resets the set to {2},
        # 4 A, caught up with B, joins again.
        assert replica_view(info)[A][:4] == (2, b, 2, 4)
    finally:
        sim.close()
