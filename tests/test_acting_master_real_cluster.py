"""The `acting-master` mode of rmqlab.cluster on the real runtime: each broker on a host of its own
(DeploymentMode.own_hosts), so that a returning master's pre-online finds its members' HA
connections (by host, as BrokerPreOnlineService does) and the master comes back."""

from __future__ import annotations

import time

import pytest

from rmqlab.cluster import Cluster
from tests.deployment_helpers import admin_call, poll

pytestmark = pytest.mark.real


def test_the_fault_relay_is_refused_with_the_reason(tmp_path):
    with pytest.raises(ValueError, match="needs relay=False .* pre-online finds its members' HA connections by host"):
        Cluster("acting-master", runtime="real", root_dir=str(tmp_path))


def test_a_killed_master_is_stood_in_for_and_comes_back_through_pre_online(tmp_path):
    def group_a(c: Cluster) -> dict[int, str]:
        async def fn(admin):
            info = await admin.examine_broker_cluster_info()
            data = info.broker_addr_table.get("broker-a")
            return dict(data.broker_addrs) if data is not None else {}
        return admin_call(c.namesrv_addr, fn)

    with Cluster("acting-master", runtime="real", root_dir=str(tmp_path), relay=False) as c:
        c.start(60_000)
        members = poll(lambda: (m := group_a(c)) and len(m) == 3 and m, 30, "broker-a's three members")
        assert len({addr.split(":")[0] for addr in members.values()}) == 3, members  # a host each
        master = members[0]
        c.nemesis.kill("broker-a")
        poll(lambda: 0 not in group_a(c), 20, "the name server to drop the killed master")
        assert sorted(group_a(c)) == [1, 2]
        c.nemesis.restart("broker-a")
        began = time.monotonic()
        poll(lambda: group_a(c).get(0) == master, 60, "the master back as brokerId 0 after its pre-online")
        print(f"pre-online and registration took {time.monotonic() - began:.1f} s")
        done = [e for e in c.events() if e.node == "broker-a" and e.kind == "state"
                and e.fields.get("to") == "ONLINE"]
        assert len(done) == 2, done  # the cold start, then the return
