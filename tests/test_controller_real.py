"""Three standalone controllers as OS processes (`rmqlab controller -c ...`).

Started from conf files like conf/controller/controller-n*.conf (free ports on 127.0.0.1) with
RealCluster, which stops them by PID. A broker's register flow goes through the leader; SIGKILL
the leader; the survivors elect another, which serves the same state.
"""

from __future__ import annotations

import sys
import time

import pytest

from rmqlab.remoting.protocol.header.controller import (ApplyBrokerIdRequestHeader, ElectMasterRequestHeader,
                                                        GetNextBrokerIdRequestHeader,
                                                        GetNextBrokerIdResponseHeader, GetReplicaInfoRequestHeader,
                                                        GetReplicaInfoResponseHeader,
                                                        RegisterBrokerToControllerRequestHeader)
from rmqlab.remoting.request_code import RequestCode
from rmqlab.remoting.response_code import ResponseCode as RC
from rmqlab.runtime.real_cluster import RealCluster
from tests.controller_helpers import call, call_leader, controller_ports, leader_of, wait_for

pytestmark = pytest.mark.real

CLUSTER, A, BROKER = "DefaultCluster", "broker-a", "127.0.0.1:30911"


def test_three_standalone_controllers_register_elect_and_survive_a_sigkilled_leader(tmp_path):
    ports = controller_ports(3)
    names = ["n0", "n1", "n2"]
    addr = {n: f"127.0.0.1:{p}" for n, p in zip(names, ports)}
    peers = ";".join(f"{n}-{addr[n]}" for n in names)
    cluster = RealCluster(str(tmp_path / "cluster"), relay=False, startup_timeout_s=30)
    try:
        for n in names:
            conf = tmp_path / f"controller-{n}.conf"
            conf.write_text(f"controllerDLegerGroup = group1\ncontrollerDLegerPeers = {peers}\n"
                            f"controllerDLegerSelfId = {n}\ncontrollerStorePath = {tmp_path / ('store-' + n)}\n")
            cluster.add_node(n, [sys.executable, "-m", "rmqlab.cli", "controller", "-c", str(conf)],
                             ports=[ports[names.index(n)]])
        cluster.start_all(timeout_s=30)
        addrs = list(addr.values())
        leader = wait_for(lambda: leader_of(addrs), 20, "a serving leader")
        follower = next(a for a in addrs if a != leader)
        r = call(follower, RequestCode.CONTROLLER_APPLY_BROKER_ID, ApplyBrokerIdRequestHeader(CLUSTER, A, 1, "x;1"))
        assert r.code == RC.CONTROLLER_NOT_LEADER and r.ext_fields["controllerLeaderAddress"] == leader

        # The register flow (ReplicasManager.register) through the leader; the first election takes the asker.
        r = call_leader(addrs, RequestCode.CONTROLLER_GET_NEXT_BROKER_ID, GetNextBrokerIdRequestHeader(CLUSTER, A))
        assert GetNextBrokerIdResponseHeader.decode(r).next_broker_id == 1
        r = call_leader(addrs, RequestCode.CONTROLLER_APPLY_BROKER_ID,
                           ApplyBrokerIdRequestHeader(CLUSTER, A, 1, f"{BROKER};{int(time.time() * 1000)}"))
        assert r.code == RC.SUCCESS, r.remark
        r = call_leader(addrs, RequestCode.CONTROLLER_REGISTER_BROKER,
                           RegisterBrokerToControllerRequestHeader(CLUSTER, A, 1, BROKER))
        assert r.code == RC.SUCCESS, r.remark
        r = call_leader(addrs, RequestCode.CONTROLLER_ELECT_MASTER, ElectMasterRequestHeader.of_broker_trigger(CLUSTER, A, 1))
        assert r.code == RC.SUCCESS, r.remark

        # SIGKILL the leader (the one serving now): another serves the same state.
        leader = wait_for(lambda: leader_of(addrs), 20, "a serving leader")
        killed = next(n for n in names if addr[n] == leader)
        cluster.nemesis.kill(killed)
        survivors = [addr[n] for n in names if n != killed]
        new = wait_for(lambda: leader_of(survivors), 20, "a new serving leader")
        assert new != leader
        r = call(new, RequestCode.CONTROLLER_GET_REPLICA_INFO, GetReplicaInfoRequestHeader(A))
        header = GetReplicaInfoResponseHeader.decode(r)
        assert r.code == RC.SUCCESS and (header.master_broker_id, header.master_address, header.master_epoch) == (
            1, BROKER, 1)
        r = call(new, RequestCode.CONTROLLER_GET_NEXT_BROKER_ID, GetNextBrokerIdRequestHeader(CLUSTER, A))
        assert GetNextBrokerIdResponseHeader.decode(r).next_broker_id == 2
        # Every replica traces the entries it applies (controller.event, handed from pysyncobj's
        # thread to the loop's): the survivors' traces hold the register flow's events, in order.
        def applied(n: str) -> list[str]:
            return [e.fields["event"] for e in cluster.events(n) if e.kind == "controller.event"
                    and e.fields.get("applied") and e.fields["event"] != "OpenTerm"]
        expected = ["ApplyBrokerIdEvent", "ElectMasterEvent"]
        for n in names:
            if n != killed:
                wait_for(lambda: [e for e in applied(n) if e in expected] == expected, 5, f"{n}'s applied events")
        boot = (tmp_path / "cluster" / "n0" / "logs" / "n0.log").read_text()
        assert "The ControllerManager boot success. serializeType=JSON, address " + addr["n0"] in boot
    finally:
        cluster.close()
