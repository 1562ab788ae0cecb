"""The controller as a Raft-replicated server on the simulator (RocketMQ's ``controller`` module).

Controllers are ControllerManager components (pysyncobj on the virtual clock, seeded); brokers are
scripted fakes built on rmqlab's RemotingClient / RemotingServer that speak RocketMQ's wire
protocol: BROKER_HEARTBEAT (904) to every controller, the register flow of ReplicasManager
(get next id, apply id, register, elect) to the leader, and a NOTIFY_BROKER_ROLE_CHANGED (1008)
handler that records what it is told.
"""

from __future__ import annotations

import os

import pytest

from rmqlab.config.controller import ControllerConfig
from rmqlab.config.namesrv import NamesrvConfig
from rmqlab.config.netty import NettyServerConfig
from rmqlab.controller.controller_manager import ControllerManager
from rmqlab.controller.impl.raft_controller import RAFT_PORT_OFFSET, raft_peers
from rmqlab.namesrv import NamesrvController
from rmqlab.remoting.protocol import remoting_serializable
from rmqlab.remoting.protocol.body.broker_replicas_info import BrokerReplicasInfo
from rmqlab.remoting.protocol.body.elect_master_response_body import ElectMasterResponseBody
from rmqlab.remoting.protocol.body.sync_state_set import SyncStateSet
from rmqlab.remoting.protocol.header.controller import (AlterSyncStateSetRequestHeader, ApplyBrokerIdRequestHeader,
                                                        ElectMasterRequestHeader, GetMetaDataResponseHeader,
                                                        GetNextBrokerIdRequestHeader, GetNextBrokerIdResponseHeader,
                                                        GetReplicaInfoRequestHeader, GetReplicaInfoResponseHeader)
from rmqlab.remoting.remoting_client import RemotingClient
from rmqlab.remoting.remoting_command import RemotingCommand
from rmqlab.remoting.request_code import RequestCode
from rmqlab.remoting.response_code import ResponseCode as RC
from rmqlab.runtime.sim import Simulation
from rmqlab.trace import trace_hash
from tests.controller_helpers import (A, CLUSTER, TIMEOUT_MS, ask, controller_config, FakeBroker, Idle, serving,
                                      wait_leader)


def build(seed: int, n: int = 3, brokers: int = 3) -> tuple[Simulation, list[str], list[str]]:
    sim = Simulation(seed=seed)
    names = [f"n{i}" for i in range(n)]
    for name in names:
        sim.add_node(name, lambda name=name: ControllerManager(controller_config(sim, name, n)))
    addrs = [f"127.0.0.1:{9877 + i}" for i in range(n)]
    bnames = [f"b{i + 1}" for i in range(brokers)]
    for i, b in enumerate(bnames):
        sim.add_node(b, lambda i=i: FakeBroker(f"127.0.0.1:{30911 + 10 * i}", addrs))
    sim.add_node("client", Idle)
    sim.start_all()
    return sim, names, bnames


def state(sim, name) -> bytes:
    return sim.components[name].controller.replicas_info_manager.serialize()


def register_all(sim, bnames) -> None:
    """b1 registers and elects itself (the first election takes the asking broker); the others follow."""
    for b in bnames:
        sim.components[b].start_heartbeats()
    sim.run_for(1_500)
    first = sim.components[bnames[0]]
    reg = sim.run(first.register())
    assert reg.master_broker_id is None
    elected = sim.run(first.elect())
    assert elected.code == RC.SUCCESS, elected.remark
    for b in bnames[1:]:
        reg = sim.run(sim.components[b].register())
        assert (reg.master_broker_id, reg.master_address, reg.master_epoch) == (1, first.addr, 1)


def test_three_controllers_elect_a_raft_leader_and_serve_the_register_flow_through_it():
    sim, names, bnames = build(seed=1)
    leader = wait_leader(sim, names)
    addr = {n: sim.components[n].address for n in names}

    # Every controller answers getControllerMetadata, naming the same leader.
    for n in names:
        meta = ask(sim, addr[n], RequestCode.CONTROLLER_GET_METADATA_INFO)
        header = GetMetaDataResponseHeader.decode(meta)
        assert meta.code == RC.SUCCESS and header.group == "group1"
        assert (header.controller_leader_id, header.controller_leader_address) == (leader, addr[leader])
        assert header.is_leader == (n == leader)
        assert header.peers == "n0:127.0.0.1:9877;n1:127.0.0.1:9878;n2:127.0.0.1:9879;"

    # Followers refuse reads and writes at once, naming the leader.
    for n in names:
        if n == leader:
            continue
        for code, header in ((RequestCode.CONTROLLER_GET_NEXT_BROKER_ID, GetNextBrokerIdRequestHeader(CLUSTER, A)),
                             (RequestCode.CONTROLLER_APPLY_BROKER_ID,
                              ApplyBrokerIdRequestHeader(CLUSTER, A, 1, "127.0.0.1:30911;1"))):
            r = ask(sim, addr[n], code, header)
            assert (r.code, r.remark) == (RC.CONTROLLER_NOT_LEADER, "The controller is not in leader state")
            assert r.ext_fields == {"controllerLeaderId": leader, "controllerLeaderAddress": addr[leader]}

    register_all(sim, bnames)
    b1, b2, b3 = (sim.components[b] for b in bnames)
    assert (b1.broker_id, b2.broker_id, b3.broker_id) == (1, 2, 3)
    # The first election's success was pushed to the live members (b1 only was registered then).
    assert [(h.master_broker_id, h.master_epoch) for h, _ in b1.notifications] == [(1, 1)]

    # The master widens its SyncStateSet; stale epochs are fenced.
    r = ask(sim, addr[leader], RequestCode.CONTROLLER_ALTER_SYNC_STATE_SET,
            AlterSyncStateSetRequestHeader(A, 1, 1), SyncStateSet({1, 2, 3}, 1).encode())
    assert r.code == RC.SUCCESS and SyncStateSet.decode(r.body) == SyncStateSet({1, 2, 3}, 2)
    r = ask(sim, addr[leader], RequestCode.CONTROLLER_ALTER_SYNC_STATE_SET,
            AlterSyncStateSetRequestHeader(A, 1, 1), SyncStateSet({1, 2}, 1).encode())
    assert r.code == RC.CONTROLLER_FENCED_SYNC_STATE_SET_EPOCH

    # getSyncStateData through the leader; every replica applied the same events.
    r = ask(sim, addr[leader], RequestCode.CONTROLLER_GET_SYNC_STATE_DATA, body=remoting_serializable.encode([A]))
    info = BrokerReplicasInfo.decode(r.body).replicas_info_table[A]
    assert info.master_broker_id == 1 and sorted(x.broker_id for x in info.in_sync_replicas) == [1, 2, 3]
    sim.run_for(500)
    assert state(sim, "n0") == state(sim, "n1") == state(sim, "n2")
    sim.close()


def test_dead_master_heartbeat_lapse_triggers_an_election_and_the_survivors_are_notified():
    sim, names, bnames = build(seed=2)
    leader = wait_leader(sim, names)
    register_all(sim, bnames)
    ask(sim, sim.components[leader].address, RequestCode.CONTROLLER_ALTER_SYNC_STATE_SET,
        AlterSyncStateSetRequestHeader(A, 1, 1), SyncStateSet({1, 2, 3}, 1).encode())
    b1, b2, b3 = (sim.components[b] for b in bnames)
    before = {b: len(sim.components[b].notifications) for b in bnames}

    # SIGSTOP the master: its connections stay open, its heartbeats stop. Only the heartbeat
    # timeout (10 s) and the scan (every 5 s) can tell the controllers.
    sim.nemesis.suspend("b1")
    sim.run_until(lambda: len(b2.notifications) > before["b2"] and len(b3.notifications) > before["b3"],
                  timeout_ms=30_000, poll_ms=10)
    (h2, s2), (h3, s3) = b2.notifications[-1], b3.notifications[-1]
    assert h2 == h3 and s2 == s3
    assert h2.master_broker_id in (2, 3) and h2.master_epoch == 2
    assert h2.master_address == sim.components[f"b{h2.master_broker_id}"].addr
    assert s2 == SyncStateSet({h2.master_broker_id}, 3)
    assert len(b1.notifications) == before["b1"]  # not active: not told
    logs = [e.fields["message"] for e in sim.tracer.events if e.kind == "log" and e.node == leader]
    # Triggered by the controller (the heartbeat scan or the leader's inactive-master scan, whichever
    # sees the lapse first), not by a broker.
    assert any(m.startswith("Elect a new master in broker-set: broker-a done") for m in logs), logs
    r = ask(sim, sim.components[leader].address, RequestCode.CONTROLLER_GET_REPLICA_INFO, GetReplicaInfoRequestHeader(A))
    assert GetReplicaInfoResponseHeader.decode(r).master_broker_id == h2.master_broker_id
    sim.close()


def test_killed_raft_leader_a_new_leader_serves_the_same_state():
    sim, names, bnames = build(seed=3)
    old = wait_leader(sim, names)
    register_all(sim, bnames)
    sim.run_for(300)
    snapshot = state(sim, old)
    sim.nemesis.kill(old)
    survivors = [n for n in names if n != old]
    new = wait_leader(sim, survivors)
    assert new != old and state(sim, new) == snapshot
    b2 = sim.components["b2"]
    assert sim.run(b2.leader()) == sim.components[new].address
    r = ask(sim, sim.components[new].address, RequestCode.CONTROLLER_GET_REPLICA_INFO, GetReplicaInfoRequestHeader(A))
    header = GetReplicaInfoResponseHeader.decode(r)
    assert (header.master_broker_id, header.master_epoch) == (1, 1)
    # Writes continue: an admin election of replica 2 (alive, but not in the SyncStateSet {1}).
    r = ask(sim, sim.components[new].address, RequestCode.CONTROLLER_ELECT_MASTER,
            ElectMasterRequestHeader.of_admin_trigger(CLUSTER, A, 2))
    assert r.code == RC.CONTROLLER_ELECT_MASTER_FAILED
    r = ask(sim, sim.components[new].address, RequestCode.CONTROLLER_GET_NEXT_BROKER_ID,
            GetNextBrokerIdRequestHeader(CLUSTER, A))
    assert GetNextBrokerIdResponseHeader.decode(r).next_broker_id == 4
    # The old leader comes back as a follower and catches up.
    sim.nemesis.restart(old)
    sim.run_until(lambda: state(sim, old) == state(sim, new) and sim.components[old].controller.leader_id == new,
                  timeout_ms=20_000, poll_ms=10)
    sim.close()


def test_restarted_controller_rebuilds_its_state_from_journal_and_snapshot():
    sim, names, bnames = build(seed=4)
    leader = wait_leader(sim, names)
    follower = next(n for n in names if n != leader)
    for b in bnames[:2]:
        sim.components[b].start_heartbeats()
    sim.run_for(1_500)
    sim.run(sim.components["b1"].register())
    sim.run(sim.components["b1"].elect())
    sim.run_for(300)
    sim.components[follower].controller.raft.force_log_compaction()
    sim.run_for(200)
    dump = os.path.join(sim.store_dir(follower), "controller", "raft.dump")
    assert os.path.getsize(dump) > 0
    sim.run(sim.components["b2"].register())  # after the dump: only in the journal
    sim.run_for(1_500)  # the journal saves the commit index once a second
    expected = state(sim, leader)
    assert b'"2":["127.0.0.1:30921"' in expected and state(sim, follower) == expected

    # Restart it cut off from everyone: what it knows comes from its own files.
    sim.nemesis.kill(follower)
    sim.nemesis.partition([follower], [n for n in names if n != follower])
    sim.nemesis.restart(follower)
    sim.run_for(300)
    assert sim.nodes[follower].incarnation == 2
    assert state(sim, follower) == expected
    sim.nemesis.heal()
    sim.run_until(lambda: len(serving(sim, names)) == 1, timeout_ms=20_000, poll_ms=10)
    sim.close()


def test_single_controller_elects_and_fails_over_on_a_closed_channel():
    """RocketMQ's "主备自动切换模式部署": a single controller still performs broker failover."""
    sim, names, bnames = build(seed=5, n=1, brokers=2)
    wait_leader(sim, names)
    register_all(sim, bnames)
    ask(sim, sim.components["n0"].address, RequestCode.CONTROLLER_ALTER_SYNC_STATE_SET,
        AlterSyncStateSetRequestHeader(A, 1, 1), SyncStateSet({1, 2}, 1).encode())
    b2 = sim.components["b2"]
    before = len(b2.notifications)
    sim.nemesis.kill("b1")  # its connection closes: inactive at once (BrokerHousekeepingService)
    sim.run_until(lambda: len(b2.notifications) > before, timeout_ms=5_000, poll_ms=5)
    header, sync = b2.notifications[-1]
    assert (header.master_broker_id, header.master_epoch, header.master_address) == (2, 2, b2.addr)
    assert sync == SyncStateSet({2}, 3)
    sim.close()


def test_losing_the_majority_rejects_writes_but_metadata_still_answers():
    sim, names, bnames = build(seed=6, brokers=1)
    leader = wait_leader(sim, names)
    follower = next(n for n in names if n != leader)
    for n in names:
        if n != follower:
            sim.nemesis.kill(n)
    addr = sim.components[follower].address
    r = ask(sim, addr, RequestCode.CONTROLLER_APPLY_BROKER_ID, ApplyBrokerIdRequestHeader(CLUSTER, A, 1, "x:1;1"))
    assert r.code == RC.CONTROLLER_NOT_LEADER
    sim.run_for(20_000)  # it campaigns, but nobody votes
    assert serving(sim, names) == []
    r = ask(sim, addr, RequestCode.CONTROLLER_GET_NEXT_BROKER_ID, GetNextBrokerIdRequestHeader(CLUSTER, A))
    assert r.code == RC.CONTROLLER_NOT_LEADER
    meta = ask(sim, addr, RequestCode.CONTROLLER_GET_METADATA_INFO)
    assert meta.code == RC.SUCCESS and GetMetaDataResponseHeader.decode(meta).is_leader is False
    sim.close()


def test_isolated_leader_cannot_commit_and_steps_down():
    sim, names, bnames = build(seed=7, brokers=1)
    leader = wait_leader(sim, names)
    sim.nemesis.partition([leader], [n for n in names if n != leader])
    r = ask(sim, sim.components[leader].address, RequestCode.CONTROLLER_APPLY_BROKER_ID,
            ApplyBrokerIdRequestHeader(CLUSTER, A, 1, "127.0.0.1:30911;1"))
    # It still thinks it leads, so it appends; nothing commits within 5 s.
    assert r.code in (RC.SYSTEM_ERROR, RC.CONTROLLER_NOT_LEADER)
    sim.run_until(lambda: sim.components[leader].controller.raft.role != "LEADER", timeout_ms=15_000, poll_ms=10)
    others = [n for n in names if n != leader]
    wait_leader(sim, others)
    sim.nemesis.heal()

    def converged() -> bool:
        now = serving(sim, names)
        return (len(now) == 1 and sim.components[leader].controller.leader_id == now[0]
                and len({state(sim, n) for n in names}) == 1)

    # pysyncobj has no PreVote: the returning node may force one more election before all agree.
    sim.run_until(converged, timeout_ms=30_000, poll_ms=10)
    assert b"broker-a" not in state(sim, serving(sim, names)[0])  # the isolated leader's write never happened
    sim.close()


def test_heartbeat_and_configuration_requests():
    sim, names, bnames = build(seed=8, n=1, brokers=0)
    wait_leader(sim, names)
    addr = sim.components["n0"].address
    r = ask(sim, addr, RequestCode.BROKER_HEARTBEAT, None)
    assert r.code == RC.SYSTEM_ERROR  # the header's @CFNotNull fields are missing
    r = sim.run(RemotingClient(sim.nodes["client"]).invoke_sync(addr, RemotingCommand.create_request_command(
        RequestCode.BROKER_HEARTBEAT, {"clusterName": CLUSTER, "brokerAddr": "127.0.0.1:30911", "brokerName": A}),
        TIMEOUT_MS))
    assert (r.code, r.remark) == (RC.CONTROLLER_INVALID_REQUEST, "Heart beat with empty brokerId")
    r = ask(sim, addr, RequestCode.GET_CONTROLLER_CONFIG)
    assert b"controllerDLegerSelfId=n0\n" in r.body and b"notifyBrokerRoleChanged=true\n" in r.body
    r = ask(sim, addr, RequestCode.UPDATE_CONTROLLER_CONFIG, body=b"configStorePath=/tmp/x\n")
    assert (r.code, r.remark) == (RC.NO_PERMISSION, "Can not update config in black list.")
    r = ask(sim, addr, RequestCode.UPDATE_CONTROLLER_CONFIG, body=b"notifyBrokerRoleChanged=false\n")
    assert r.code == RC.SUCCESS and sim.components["n0"].controller_config.notifyBrokerRoleChanged is False
    r = ask(sim, addr, RequestCode.CONTROLLER_GET_SYNC_STATE_DATA)
    assert r.code == RC.SYSTEM_ERROR  # no broker names: RocketMQ answers createResponseCommand(null)
    r = ask(sim, addr, RequestCode.CONTROLLER_ELECT_MASTER, ElectMasterRequestHeader.of_broker_trigger(CLUSTER, A, 1))
    assert r.code == RC.CONTROLLER_BROKER_NEED_TO_BE_REGISTERED
    sim.close()


def test_first_election_response_body_and_raft_ports():
    assert raft_peers({"n0": "127.0.0.1:9877"}) == {"n0": f"127.0.0.1:{9877 + RAFT_PORT_OFFSET}"}
    with pytest.raises(ValueError, match="above 65535"):
        raft_peers({"n0": "127.0.0.1:65000"})
    sim, names, bnames = build(seed=9, n=1, brokers=1)
    wait_leader(sim, names)
    b1 = sim.components["b1"]
    b1.start_heartbeats()
    sim.run_for(1_100)
    sim.run(b1.register())
    r = sim.run(b1.elect())
    body = ElectMasterResponseBody.decode(r.body)
    assert body.broker_member_group.broker_addrs == {1: b1.addr} and body.sync_state_set == {1}
    r = sim.run(b1.elect())
    assert r.code == RC.CONTROLLER_MASTER_STILL_EXIST
    sim.close()


def test_embedded_in_the_name_server_routing_survives_the_loss_of_the_controller_majority():
    from tests.namesrv_helpers import FakeBroker as NamesrvBroker

    sim = Simulation(seed=10)
    names = ["ns0", "ns1", "ns2"]
    peers = ";".join(f"{n}-127.0.0.1:{9877 + i}" for i, n in enumerate(names))
    for i, n in enumerate(names):
        def factory(i=i, n=n):
            cc = ControllerConfig(controllerDLegerGroup="group1", controllerDLegerPeers=peers,
                                  controllerDLegerSelfId=n,
                                  controllerStorePath=os.path.join(sim.store_dir(n), "controller"))
            return NamesrvController(NamesrvConfig(enableControllerInNamesrv=True),
                                     NettyServerConfig(listenPort=9876 + 10 * i), cc)
        sim.add_node(n, factory)
    sim.add_node("broker-a", Idle)
    sim.add_node("client", Idle)
    sim.start_all()
    sim.run_until(lambda: sum(sim.components[n].controller_manager.is_leader_state() for n in names) == 1,
                  timeout_ms=15_000, poll_ms=5)
    leader = next(n for n in names if sim.components[n].controller_manager.is_leader_state())
    survivor = next(n for n in names if n != leader)
    ns = sim.components[survivor].address
    broker = NamesrvBroker(sim, "broker-a", A, 0, "127.0.0.1:10911")
    assert broker.register(namesrv=ns).code == RC.SUCCESS
    for n in names:
        if n != survivor:
            sim.nemesis.kill(n)
    sim.run_for(10_000)
    ctl = sim.components[survivor].controller_manager.address
    r = ask(sim, ctl, RequestCode.CONTROLLER_GET_NEXT_BROKER_ID, GetNextBrokerIdRequestHeader(CLUSTER, A))
    assert r.code == RC.CONTROLLER_NOT_LEADER  # no failover without a majority ...
    assert broker.heartbeat(namesrv=ns).code == RC.SUCCESS  # ... but the name server serves on
    client = RemotingClient(sim.nodes["client"])
    request = RemotingCommand.create_request_command(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": "TBW102"})
    route = sim.run(client.invoke_sync(ns, request, TIMEOUT_MS))
    assert route.code == RC.SUCCESS and b"127.0.0.1:10911" in route.body
    sim.close()


def scenario_hash(seed: int) -> str:
    sim, names, bnames = build(seed=seed)
    wait_leader(sim, names)
    register_all(sim, bnames)
    sim.nemesis.suspend("b1")
    sim.run_for(20_000)
    digest = trace_hash(sim.tracer.events)
    sim.close()
    return digest


def test_same_seed_same_trace():
    assert scenario_hash(11) == scenario_hash(11)


def test_a_leader_fenced_by_a_stale_open_term_of_its_own_term_opens_it_again():
    """A replica that read role LEADER and then a term pysyncobj had just moved to opens a term
    that is not its own; pysyncobj forwards a follower's command to the leader, which commits it,
    and the real leader's batches are fenced. Seen on real processes under load: every write of
    the term answered CONTROLLER_NOT_LEADER. The fenced leader opens its term again."""
    from rmqlab.remoting.protocol.header.controller import ApplyBrokerIdRequestHeader

    sim, names, _ = build(seed=1)
    leader = wait_leader(sim, names)
    ctl = {n: sim.components[n].controller for n in names}
    stale = next(n for n in names if n != leader)
    term = ctl[leader].raft.term
    ctl[stale].raft.replicate_future(ctl[stale].state_machine.open_term, stale, term)
    sim.run_for(1_000)
    assert ctl[leader].state_machine.writer == (stale, term)  # committed through the leader
    addr = sim.components[leader].address
    codes = []
    for broker_id in (1, 2):
        for _ in range(2):  # the first write finds the fence; the term is opened again
            r = ask(sim, addr, RequestCode.CONTROLLER_APPLY_BROKER_ID,
                    ApplyBrokerIdRequestHeader(CLUSTER, A, broker_id, f"127.0.0.1:3091{broker_id};{broker_id}"))
            codes.append(r.code)
            if r.code == RC.SUCCESS:
                break
            sim.run_for(1_000)
    assert codes == [RC.CONTROLLER_NOT_LEADER, RC.SUCCESS, RC.SUCCESS], codes
    assert ctl[leader].state_machine.writer == (leader, term)
    sim.close()
