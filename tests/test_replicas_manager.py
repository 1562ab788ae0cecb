"""The broker's side of controller mode (ReplicasManager; the election triggers of
"一文详解 RocketMQ 如何利用 Raft 进行高可用保障"): BrokerControllers with enableControllerMode=true, a
NameServer and a controller on the simulator.

The controller here is *scripted*: a RemotingServer answering RocketMQ's controller requests with
rmqlab's controller core (ReplicasInfoManager computing each answer and applying its events at once,
DefaultBrokerHeartbeatManager for liveness, DefaultElectPolicy), and, like ControllerManager,
re-electing when a master's heartbeats lapse and notifying the live members with
NOTIFY_BROKER_ROLE_CHANGED. It has no Raft: one controller, whose answers follow ReplicasInfoManager. The last
tests run the same brokers against rmqlab's ControllerManager (three Raft-replicated controllers).
"""

from __future__ import annotations

import os

import pytest

from rmqlab.broker.controller import BrokerMetadata, RegisterState, State, TempBrokerMetadata
from rmqlab.config.broker import BrokerRole
from rmqlab.config.controller import ControllerConfig
from rmqlab.namesrv import NamesrvController
from rmqlab.remoting import RemotingClient, RemotingCommand, RequestCode, ResponseCode
from rmqlab.remoting.protocol.body.epoch_entry_cache import EpochEntryCache
from rmqlab.remoting.protocol.body.sync_state_set import SyncStateSet
from rmqlab.remoting.protocol.epoch_entry import EpochEntry
from rmqlab.remoting.protocol.header.controller import NotifyBrokerRoleChangedRequestHeader
from rmqlab.runtime.component import Component
from rmqlab.runtime.sim import Simulation
from rmqlab.store.put_message_result import PutMessageStatus
from rmqlab.trace import trace_hash
from tests.store_helpers import read_queue
from tests.replicas_helpers import (PORTS, ScriptedController, br, broker_factory, put, rm,
                                    start_and_wait_running, world)
from tests.sim_helpers import track

E = EpochEntry
CLUSTER = "DefaultCluster"
TOPIC = "TopicTest"


# --- the world ----------------------------------------------------------------------------------------
def ctl(sim) -> ScriptedController:
    return sim.components["controller"]


def restart_and_wait_running(sim, name, timeout_ms=30_000) -> None:
    sim.nemesis.restart(name)
    sim.run_until(lambda: sim.nodes[name].alive and sim.components[name] is not None
                  and br(sim, name).replicas_manager is not None and rm(sim, name).state is State.RUNNING,
                  timeout_ms)


def namesrv_addrs(sim) -> dict[int, str]:
    data = sim.components["namesrv"].route_info_manager.broker_addr_table.get("broker-a")
    return dict(data.broker_addrs) if data else {}


def keys(sim, name) -> list[str]:
    store = br(sim, name).message_store
    sim.run_until(lambda: store.dispatch_behind_bytes() <= 0, 10_000)
    return [m.keys for m in read_queue(store, TOPIC, 0)]


def commitlog_bytes(sim, name) -> bytes:
    store = br(sim, name).message_store
    d = os.path.join(store.config.storePathRootDir, "commitlog")
    data = b"".join(open(os.path.join(d, f), "rb").read() for f in sorted(os.listdir(d)))
    return data[:store.get_max_phy_offset()]


def events(sim, kind, node=None, **match):
    return [e for e in sim.tracer.events if e.kind == kind and (node is None or e.node == node)
            and all(e.fields.get(k) == v for k, v in match.items())]


def identity_text(sim, name, suffix="") -> str | None:
    path = os.path.join(sim.store_dir(name), "store", "brokerIdentity" + suffix)
    return open(path).read() if os.path.exists(path) else None


def master_and_slave(seed: int, **overrides) -> Simulation:
    """A registers first and nominates itself (master, epoch 1); B registers as its slave and is
    taken into the SyncStateSet once it caught up."""
    sim = world(seed, **overrides)
    start_and_wait_running(sim, "A")
    start_and_wait_running(sim, "B")
    A, B = rm(sim, "A"), rm(sim, "B")
    sim.run_until(lambda: A.sync_state_set == {1, 2} and B.master_epoch == 1, 30_000)
    return sim


# --- the identity files -------------------------------------------------------------------------------
def test_broker_metadata_files_in_rocketmqs_format(tmp_path):
    path = str(tmp_path / "store" / "brokerIdentity")
    meta = BrokerMetadata(path)
    meta.read_from_file()
    assert not meta.is_loaded() and not meta.file_exists()
    meta.update_and_persist("DefaultCluster", "broker-a", 2)
    assert open(path).read() == "DefaultCluster#broker-a#2"
    again = BrokerMetadata(path)
    again.read_from_file()
    assert again.is_loaded() and again == meta and again.broker_id == 2
    temp = TempBrokerMetadata(path + "-temp")
    temp.update_and_persist("DefaultCluster", "broker-a", 3, "127.0.0.1:30931;1700000000000")
    assert open(path + "-temp").read() == "DefaultCluster#broker-a#3#127.0.0.1:30931;1700000000000"
    loaded = TempBrokerMetadata(path + "-temp")
    loaded.read_from_file()
    assert loaded.is_loaded() and loaded.register_check_code == "127.0.0.1:30931;1700000000000"
    temp.clear()
    assert not temp.file_exists() and temp.broker_id is None
    with open(path, "w") as f:
        f.write("DefaultCluster#broker-a")
    broken = BrokerMetadata(path)
    with pytest.raises(ValueError, match="does not have the 3 '#'-separated fields"):
        broken.read_from_file()
    assert not broken.is_loaded()
    with open(path, "w") as f:
        f.write("DefaultCluster#broker-a#x1")
    with pytest.raises(ValueError, match="brokerId 'x1'"):
        broken.read_from_file()


# --- register flow --------------------------------------------------------------------------------------
def test_register_flow_assigns_ids_from_one_and_the_elected_master_registers_as_zero():
    sim = world(51, brokers=("A", "B"))
    start_and_wait_running(sim, "A")
    A = rm(sim, "A")
    # A: no identity file -> next id (1), temp file, apply, identity file, register; no master, so
    # A nominates itself and, the set's first election, becomes master of epoch 1.
    assert ctl(sim).codes_from(PORTS["A"]) == [RequestCode.CONTROLLER_APPLY_BROKER_ID,
                                               RequestCode.CONTROLLER_REGISTER_BROKER]
    codes = [c for c, _ in ctl(sim).requests if c != RequestCode.BROKER_HEARTBEAT]
    assert codes == [RequestCode.CONTROLLER_GET_METADATA_INFO, RequestCode.CONTROLLER_GET_NEXT_BROKER_ID,
                     RequestCode.CONTROLLER_APPLY_BROKER_ID, RequestCode.CONTROLLER_REGISTER_BROKER,
                     RequestCode.CONTROLLER_ELECT_MASTER]
    elect = [ext for c, ext in ctl(sim).requests if c == RequestCode.CONTROLLER_ELECT_MASTER][0]
    assert (elect["brokerId"], elect["designateElect"], elect["brokerName"]) == ("1", "false", "broker-a")
    apply = [ext for c, ext in ctl(sim).requests if c == RequestCode.CONTROLLER_APPLY_BROKER_ID][0]
    assert apply["appliedBrokerId"] == "1" and apply["registerCheckCode"].startswith(f"127.0.0.1:{PORTS['A']};")
    assert A.broker_controller_id == 1 and A.register_state is RegisterState.REGISTERED
    assert identity_text(sim, "A") == "DefaultCluster#broker-a#1" and identity_text(sim, "A", "-temp") is None
    assert (A.master_epoch, A.master_broker_id, A.sync_state_set) == (1, 1, {1})
    assert br(sim, "A").broker_config.brokerId == 0
    assert br(sim, "A").message_store_config.brokerRole is BrokerRole.SYNC_MASTER
    assert A.get_epoch_entries() == [E(1, 0)]
    states = [e.fields["to"] for e in events(sim, "state", "A", machine="ReplicasManager.State")]
    assert states == ["FIRST_TIME_SYNC_CONTROLLER_METADATA_DONE", "REGISTER_TO_CONTROLLER_DONE", "RUNNING"]

    start_and_wait_running(sim, "B")
    B = rm(sim, "B")
    # B: id 2; the register answer names master 1, so B is a slave (no election request).
    assert B.broker_controller_id == 2 and identity_text(sim, "B") == "DefaultCluster#broker-a#2"
    assert RequestCode.CONTROLLER_ELECT_MASTER not in ctl(sim).codes_from(PORTS["B"])
    assert (B.master_epoch, B.master_broker_id, B.master_address) == (1, 1, f"127.0.0.1:{PORTS['A']}")
    assert br(sim, "B").broker_config.brokerId == 2
    assert br(sim, "B").message_store_config.brokerRole is BrokerRole.SLAVE
    # The name server knows the master as 0 and the slave by its controller id.
    sim.run_until(lambda: namesrv_addrs(sim) == {0: f"127.0.0.1:{PORTS['A']}", 2: f"127.0.0.1:{PORTS['B']}"},
                  15_000)
    # B replicates; A's HA service proposes {1, 2}, A alters it at the controller and adopts it.
    for i in range(10):
        assert put(sim, "A", i).result().put_message_status is PutMessageStatus.PUT_OK
    sim.run_until(lambda: rm(sim, "A").sync_state_set == {1, 2}, 30_000)
    assert ctl(sim).manager.sync_state_set_info_table["broker-a"].sync_state_set == {1, 2}
    assert br(sim, "A").ha_service.get_local_sync_state_set() == {1, 2}
    alter = [ext for c, ext in ctl(sim).requests if c == RequestCode.CONTROLLER_ALTER_SYNC_STATE_SET]
    assert alter and str(alter[-1]["masterBrokerId"]) == "1" and str(alter[-1]["masterEpoch"]) == "1"
    sim.run_until(lambda: br(sim, "B").message_store.get_max_phy_offset()
                  == br(sim, "A").message_store.get_max_phy_offset(), 30_000)
    assert B.get_epoch_entries() == [E(1, 0)]
    sim.run_for(2_000)  # a heartbeat after B recorded epoch 1
    # Heartbeats carry the controller id and the epoch file's last epoch.
    beats = [ext for c, ext in ctl(sim).requests if c == RequestCode.BROKER_HEARTBEAT
             and ext["brokerAddr"] == f"127.0.0.1:{PORTS['B']}"]
    assert str(beats[-1]["brokerId"]) == "2" and str(beats[-1]["epoch"]) == "1"

    # GET_BROKER_EPOCH_CACHE (1007): the epoch file, under the broker's current id (0 on the master).
    async def ask(addr: str, code: int, body: bytes | None = None, header=None):
        client = RemotingClient(sim.nodes["controller"])
        try:
            request = RemotingCommand.create_request_command(code, header.to_ext_fields() if header else None, body)
            return await client.invoke_sync(addr, request, 3_000)
        finally:
            await client.shutdown()

    response = sim.run(ask(f"127.0.0.1:{PORTS['A']}", RequestCode.GET_BROKER_EPOCH_CACHE))
    cache = EpochEntryCache.decode(response.body)
    assert response.code == ResponseCode.SUCCESS
    assert (cache.cluster_name, cache.broker_name, cache.broker_id) == (CLUSTER, "broker-a", 0)
    assert [(e.epoch, e.start_offset) for e in cache.epoch_list] == [(1, 0)]
    assert cache.max_offset == br(sim, "A").message_store.get_max_phy_offset()
    # A stale notification (epoch 1 is not newer) changes nothing.
    stale = NotifyBrokerRoleChangedRequestHeader(f"127.0.0.1:{PORTS['B']}", 1, 1, 2)
    response = sim.run(ask(f"127.0.0.1:{PORTS['A']}", RequestCode.NOTIFY_BROKER_ROLE_CHANGED,
                           SyncStateSet({2}, 1).encode(), stale))
    assert response.code == ResponseCode.SUCCESS and rm(sim, "A").master_broker_id == 1
    assert br(sim, "A").message_store_config.brokerRole is BrokerRole.SYNC_MASTER


def test_a_classic_broker_refuses_the_epoch_cache_and_ignores_role_notifications():
    from tests.broker_helpers import broker_factory as classic_factory
    sim = Simulation(seed=52)
    track(sim)
    sim.add_node("broker-a", classic_factory(sim, "broker-a"))
    sim.add_node("client", lambda: _Idle())
    sim.start_all()

    async def ask(code, header=None, body=None):
        client = RemotingClient(sim.nodes["client"])
        try:
            request = RemotingCommand.create_request_command(code, header.to_ext_fields() if header else None, body)
            return await client.invoke_sync("127.0.0.1:10911", request, 3_000)
        finally:
            await client.shutdown()

    response = sim.run(ask(RequestCode.GET_BROKER_EPOCH_CACHE))
    assert (response.code, response.remark) == (ResponseCode.SYSTEM_ERROR, "this request only for controllerMode ")
    notify = NotifyBrokerRoleChangedRequestHeader("127.0.0.1:1", 5, 5, 3)
    response = sim.run(ask(RequestCode.NOTIFY_BROKER_ROLE_CHANGED, notify, SyncStateSet({3}, 5).encode()))
    assert response.code == ResponseCode.SUCCESS
    assert sim.components["broker-a"].message_store_config.brokerRole is BrokerRole.ASYNC_MASTER


class _Idle(Component):
    component_type = "client"

    async def start(self, node) -> None:
        self.node = node


# --- role changes ---------------------------------------------------------------------------------------
def test_notification_makes_the_slave_master_and_the_old_master_a_slave_that_truncates_and_catches_up():
    sim = master_and_slave(53)
    A, B = rm(sim, "A"), rm(sim, "B")
    for i in range(20):
        assert put(sim, "A", i).result().put_message_status is PutMessageStatus.PUT_OK
    sim.run_until(lambda: br(sim, "B").message_store.get_max_phy_offset()
                  == br(sim, "A").message_store.get_max_phy_offset(), 30_000)
    committed = br(sim, "A").message_store.get_max_phy_offset()
    # A is cut off from everyone; what it writes now only A has (inSyncReplicas 1: no wait).
    sim.nemesis.partition(["A"], ["B", "controller", "namesrv"])
    for i in range(100, 105):
        assert put(sim, "A", i).result().put_message_status is PutMessageStatus.PUT_OK
    assert br(sim, "A").message_store.get_max_phy_offset() > committed
    # B's log ends in a torn write (a partial record past what it dispatched).
    b_store = br(sim, "B").message_store
    b_store.commit_log.append_data(b_store.get_max_phy_offset(), b"\x00\x00\x01\x00torn")
    assert b_store.get_max_phy_offset() == committed + 8
    # The controller notices A's silence, elects B (epoch 2) and notifies the live members: B.
    sim.run_until(lambda: B.master_epoch == 2, 40_000)
    sim.run_until(lambda: br(sim, "B").message_store_config.brokerRole is BrokerRole.SYNC_MASTER, 5_000)
    notifications = [e for e in events(sim, "frame.recv", "B", proto="remoting")
                     if e.fields.get("code") == RequestCode.NOTIFY_BROKER_ROLE_CHANGED]
    assert notifications and not events(sim, "frame.recv", "A", code=RequestCode.NOTIFY_BROKER_ROLE_CHANGED)
    # changeToMaster: the torn tail is cut to the last message boundary, <2, committed> appended.
    assert b_store.get_max_phy_offset() == committed
    assert B.get_epoch_entries() == [E(1, 0, committed), E(2, committed)]
    assert br(sim, "B").broker_config.brokerId == 0 and B.master_broker_id == 2
    assert events(sim, "epoch", "B", epoch=2, start_offset=committed)
    for i in range(200, 210):
        assert put(sim, "B", i).result().put_message_status is PutMessageStatus.PUT_OK
    # A still believes it is master of epoch 1 (isolated, the notification could not reach it).
    assert A.master_epoch == 1 and br(sim, "A").message_store_config.brokerRole is BrokerRole.SYNC_MASTER
    sim.nemesis.heal()
    # A's next poll finds epoch 2 with master B: A becomes a slave, registers as id 1, learns B's
    # HA address from the name server, truncates its divergent tail in the handshake and catches up.
    sim.run_until(lambda: A.master_epoch == 2, 30_000)
    assert br(sim, "A").message_store_config.brokerRole is BrokerRole.SLAVE
    assert br(sim, "A").broker_config.brokerId == 1 and A.master_address == f"127.0.0.1:{PORTS['B']}"
    sim.run_until(lambda: br(sim, "A").message_store.get_max_phy_offset()
                  == br(sim, "B").message_store.get_max_phy_offset(), 60_000)
    decision = br(sim, "A").ha_service.get_ha_client().last_truncate_decision
    assert decision.ok and decision.truncate_offset == committed
    assert commitlog_bytes(sim, "A") == commitlog_bytes(sim, "B")
    assert A.get_epoch_entries() == B.get_epoch_entries() == [E(1, 0, committed), E(2, committed)]
    sim.run_until(lambda: namesrv_addrs(sim) == {0: f"127.0.0.1:{PORTS['B']}", 1: f"127.0.0.1:{PORTS['A']}"},
                  30_000)
    sim.run_for(6_000)  # B's heartbeat frames carry the confirm offset to A
    expected = [f"key-{i}" for i in range(20)] + [f"key-{i}" for i in range(200, 210)]
    assert keys(sim, "B") == expected and keys(sim, "A") == expected
    # The broker traced its roles with their epochs.
    roles = [(e.node, e.fields["to"], e.fields["epoch"]) for e in events(sim, "role", component="broker")]
    assert roles == [("A", "SYNC_MASTER", 1), ("B", "SLAVE", 1), ("B", "SYNC_MASTER", 2), ("A", "SLAVE", 2)]


def test_a_broker_that_finds_no_master_when_polling_nominates_itself():
    """The Raft article's election trigger b.i: the controller's own election found no live candidate (the
    master died while B could not reach the controller), so the set has no master; B's next poll
    sees the newer epoch without a master and asks to be elected."""
    sim = master_and_slave(54)
    B = rm(sim, "B")
    for i in range(5):
        put(sim, "A", i)
    sim.run_until(lambda: br(sim, "B").message_store.get_max_phy_offset()
                  == br(sim, "A").message_store.get_max_phy_offset(), 30_000)
    end_of_epoch_1 = br(sim, "B").message_store.get_max_phy_offset()
    sim.nemesis.partition(["B"], ["controller"])
    sim.nemesis.crash("A")
    info = ctl(sim).manager.sync_state_set_info_table["broker-a"]
    sim.run_until(lambda: info.master_epoch == 2, 40_000)
    assert info.master_broker_id is None and info.sync_state_set == {1, 2}
    assert B.master_epoch == 1
    before = len(ctl(sim).requests)
    sim.nemesis.heal()
    sim.run_until(lambda: B.master_epoch > 2, 30_000)
    elects = [ext for c, ext in ctl(sim).requests[before:] if c == RequestCode.CONTROLLER_ELECT_MASTER]
    assert elects and all(ext["brokerId"] == "2" and ext["designateElect"] == "false" for ext in elects)
    assert (B.master_epoch, B.master_broker_id) == (3, 2) and info.master_broker_id == 2
    assert br(sim, "B").message_store_config.brokerRole is BrokerRole.SYNC_MASTER
    assert B.get_epoch_entries() == [E(1, 0, end_of_epoch_1), E(3, end_of_epoch_1)]
    assert put(sim, "B", 1).result().put_message_status is PutMessageStatus.PUT_OK


# --- restarts and the identity files ----------------------------------------------------------------
def test_restart_keeps_the_assigned_broker_id():
    sim = master_and_slave(55)
    assert identity_text(sim, "B") == "DefaultCluster#broker-a#2"
    next_ids = sum(1 for c, _ in ctl(sim).requests if c == RequestCode.CONTROLLER_GET_NEXT_BROKER_ID)
    sim.stop("B")
    # A's HA service loses B's connection and proposes {1}; A's alter request shrinks the set.
    sim.run_until(lambda: rm(sim, "A").sync_state_set == {1}, 30_000)
    assert ctl(sim).manager.sync_state_set_info_table["broker-a"].sync_state_set == {1}
    restart_and_wait_running(sim, "B")
    B = rm(sim, "B")
    # The identity file decides: straight to CONTROLLER_REGISTER_BROKER with id 2.
    assert B.broker_controller_id == 2 and identity_text(sim, "B") == "DefaultCluster#broker-a#2"
    assert sum(1 for c, _ in ctl(sim).requests if c == RequestCode.CONTROLLER_GET_NEXT_BROKER_ID) == next_ids
    assert ctl(sim).manager.replica_info_table["broker-a"].next_assign_broker_id == 3
    assert B.master_broker_id == 1 and br(sim, "B").message_store_config.brokerRole is BrokerRole.SLAVE
    # Back in the SyncStateSet (A expands it once B caught up), B can take over: A crashes, keeps
    # its id, and the controller (which saw it go) elects B.
    sim.run_until(lambda: rm(sim, "A").sync_state_set == {1, 2}, 30_000)
    sim.nemesis.crash("A")
    sim.run_until(lambda: B.master_broker_id == 2 and B.master_epoch == 2, 40_000)
    restart_and_wait_running(sim, "A")
    A = rm(sim, "A")
    assert A.broker_controller_id == 1 and (A.master_broker_id, A.master_epoch) == (2, 2)
    assert br(sim, "A").message_store_config.brokerRole is BrokerRole.SLAVE


def test_a_temp_identity_file_is_claimed_again_after_a_crash_before_the_identity_file():
    """A broker that died between writing brokerIdentity-temp and brokerIdentity applies the id of
    the temp file (no new CONTROLLER_GET_NEXT_BROKER_ID)."""
    sim = master_and_slave(56)
    temp = os.path.join(sim.store_dir("C"), "store", "brokerIdentity-temp")
    os.makedirs(os.path.dirname(temp), exist_ok=True)
    with open(temp, "w") as f:
        f.write(f"DefaultCluster#broker-a#7#127.0.0.1:{PORTS['C']};1700000000000")
    sim.add_node("C", broker_factory(sim, "C"))
    before = len(ctl(sim).requests)
    start_and_wait_running(sim, "C")
    C = rm(sim, "C")
    assert C.broker_controller_id == 7 and identity_text(sim, "C") == "DefaultCluster#broker-a#7"
    assert identity_text(sim, "C", "-temp") is None
    assert ctl(sim).codes_from(PORTS["C"])[:2] == [RequestCode.CONTROLLER_APPLY_BROKER_ID,
                                                   RequestCode.CONTROLLER_REGISTER_BROKER]
    assert RequestCode.CONTROLLER_GET_NEXT_BROKER_ID not in [c for c, _ in ctl(sim).requests[before:]]
    assert C.master_broker_id == 1 and br(sim, "C").broker_config.brokerId == 7


def test_an_identity_file_of_another_broker_set_keeps_the_broker_fenced():
    sim = world(57, brokers=("A",))
    identity = os.path.join(sim.store_dir("A"), "store", "brokerIdentity")
    os.makedirs(os.path.dirname(identity), exist_ok=True)
    with open(identity, "w") as f:
        f.write("DefaultCluster#broker-b#1")
    sim.start("A")
    sim.run_for(20_000)
    A = rm(sim, "A")
    assert A.state is State.FIRST_TIME_SYNC_CONTROLLER_METADATA_DONE and br(sim, "A").is_isolated
    assert ctl(sim).codes_from(PORTS["A"]) == []  # never registered
    assert namesrv_addrs(sim) == {}  # an isolated broker does not register with the name server
    assert put(sim, "A", 0).result().put_message_status is PutMessageStatus.SERVICE_NOT_AVAILABLE


# --- with the real controller: three Raft-replicated ControllerManagers -----------------------------
def test_with_three_raft_controllers_register_fail_over_and_rejoin():
    """The same brokers against rmqlab's ControllerManager (pysyncobj Raft, three nodes): the leader
    found through any controller, the register flow, the first election, a failover when the master
    crashes (heartbeats lapse, the controller elects and notifies), the old master rejoining as slave."""
    from rmqlab.controller.controller_manager import ControllerManager

    peers = ";".join(f"n{i}-127.0.0.1:{9877 + i}" for i in range(3))
    addrs = ";".join(f"127.0.0.1:{9877 + i}" for i in range(3))
    sim = Simulation(seed=58)
    track(sim)
    sim.add_node("namesrv", NamesrvController)
    sim.start("namesrv")
    for i in range(3):
        name = f"n{i}"
        config = ControllerConfig(controllerDLegerGroup="group1", controllerDLegerPeers=peers,
                                  controllerDLegerSelfId=name,
                                  controllerStorePath=os.path.join(sim.store_dir(name), "controller"))
        sim.add_node(name, lambda config=config: ControllerManager(config))
        sim.start(name)
    for name in ("A", "B"):
        sim.add_node(name, broker_factory(sim, name, controllerAddr=addrs))
    start_and_wait_running(sim, "A", 60_000)
    start_and_wait_running(sim, "B", 60_000)
    A, B = rm(sim, "A"), rm(sim, "B")
    leader = [n for n in ("n0", "n1", "n2") if sim.components[n].is_leader_state()]
    assert len(leader) == 1 and A.controller_leader_address == B.controller_leader_address \
        == sim.components[leader[0]].self_addr
    assert (A.broker_controller_id, B.broker_controller_id) == (1, 2)
    assert (A.master_broker_id, A.master_epoch, B.master_broker_id) == (1, 1, 1)
    for i in range(10):
        assert put(sim, "A", i).result().put_message_status is PutMessageStatus.PUT_OK
    sim.run_until(lambda: A.sync_state_set == {1, 2}, 30_000)
    sim.run_until(lambda: br(sim, "B").message_store.get_max_phy_offset()
                  == br(sim, "A").message_store.get_max_phy_offset(), 30_000)
    replicated = sim.components[leader[0]].controller.replicas_info_manager.sync_state_set_info_table["broker-a"]
    assert replicated.sync_state_set == {1, 2}

    sim.nemesis.crash("A")
    sim.run_until(lambda: B.master_broker_id == 2 and B.master_epoch == 2, 60_000)
    sim.run_until(lambda: br(sim, "B").message_store_config.brokerRole is BrokerRole.SYNC_MASTER, 10_000)
    assert put(sim, "B", 100).result().put_message_status is PutMessageStatus.PUT_OK
    restart_and_wait_running(sim, "A", 60_000)
    A = rm(sim, "A")
    assert (A.broker_controller_id, A.master_broker_id, A.master_epoch) == (1, 2, 2)
    sim.run_until(lambda: br(sim, "A").message_store.get_max_phy_offset()
                  == br(sim, "B").message_store.get_max_phy_offset(), 60_000)
    assert A.get_epoch_entries() == B.get_epoch_entries()
    sim.run_until(lambda: namesrv_addrs(sim) == {0: f"127.0.0.1:{PORTS['B']}", 1: f"127.0.0.1:{PORTS['A']}"},
                  30_000)


def test_same_seed_same_trace():
    def run(seed: int) -> str:
        sim = master_and_slave(seed)
        for i in range(5):
            put(sim, "A", i)
        sim.nemesis.crash("A")
        sim.run_until(lambda: rm(sim, "B").master_broker_id == 2, 40_000)
        sim.run_for(5_000)
        digest = trace_hash(sim.tracer.events)
        sim.close()
        return digest

    assert run(59) == run(59)
