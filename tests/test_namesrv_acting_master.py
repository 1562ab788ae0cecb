"""The name server's side of RIP-32, slave acting master (RocketMQ's "RIP 32 Slave Acting Master
Mode" design page; ``namesrv/.../routeinfo/RouteInfoManager.java``).

The first part ports RocketMQ's ``RouteInfoManagerNewTest`` (which runs with
``supportActingMaster=true``) and adds the cases it leaves out: every condition of the route
rewrite, the minimum-id tracking and the NOTIFY_MIN_BROKER_ID_CHANGE targets and header. The second
part runs a name server on the simulator with brokers that listen, so the notices travel as
frames; the last two send them over TCP on the real runtime, in this process and from an
`rmqlab namesrv` process.
"""

from __future__ import annotations

import asyncio
import os
import select
import subprocess
import sys

import pytest


from rmqlab.common.constant.perm_name import PermName
from rmqlab.common.data_version import DataVersion
from rmqlab.common.java_compat import crc32
from rmqlab.common.topic.topic_validator import TopicValidator
from rmqlab.common.topic_config import TopicConfig
from rmqlab.config.namesrv import NamesrvConfig
from rmqlab.config.netty import NettyServerConfig
from rmqlab.namesrv import NamesrvController, RouteInfoManager
from rmqlab.remoting import RemotingClient, RemotingCommand, RequestCode, ResponseCode
from rmqlab.remoting.protocol.body import (GetBrokerMemberGroupResponseBody, RegisterBrokerBody,
                                           TopicConfigAndMappingSerializeWrapper)
from rmqlab.remoting.protocol.header.namesrv import (QueryDataVersionResponseHeader, RegisterBrokerRequestHeader,
                                                    UnRegisterBrokerRequestHeader)
from rmqlab.remoting.protocol.header.notify_min_broker_id_change_request_header import (
    NotifyMinBrokerIdChangeRequestHeader)
from rmqlab.remoting.protocol.mq_version import MQVersion
from rmqlab.remoting.protocol.route import TopicRouteData
from rmqlab.remoting.remoting_server import RemotingServer
from rmqlab.runtime.component import Component
from rmqlab.runtime.real import RealNode
from rmqlab.runtime.real_cluster import free_ports
from rmqlab.runtime.sim import Simulation
from rmqlab.trace import trace_hash
from tests.namesrv_helpers import CLUSTER, NS, TIMEOUT_MS, FakeBroker
from tests.process_helpers import stop

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

ACTING = NamesrvConfig(supportActingMaster=True, notifyMinBrokerIdChanged=True)

# RouteInfoManagerNewTest's brokers: master 0 and slave 1 of one group, acting master enabled.
GROUP = "Default_Broker"
MASTER, MASTER_HA = "127.0.0.1:10911", "127.0.0.1:20911"
SLAVE, SLAVE_HA = "127.0.0.1:30911", "127.0.0.1:40911"
SLAVE2, SLAVE2_HA = "127.0.0.1:50911", "127.0.0.1:60911"


class Clock:
    def __init__(self):
        self.now = 1_000_000

    def __call__(self) -> int:
        return self.now


def topic(name: str, queues: int = 8, perm: int = 6) -> TopicConfig:
    return TopicConfig(name, queues, queues, perm)


def wrapper(*names: str, counter: int = 1, state_version: int = 0) -> TopicConfigAndMappingSerializeWrapper:
    # Two topics at least: exactly one before the broker's first registration is refused.
    names = names or ("TestTopic", "TestTopic1")
    return TopicConfigAndMappingSerializeWrapper({n: topic(n) for n in names},
                                                 DataVersion(state_version, 1_700_000_000_000, counter))


class Members:
    """A RouteInfoManager and the channels of the brokers registered in it."""

    def __init__(self, config: NamesrvConfig = ACTING):
        self.clock = Clock()
        self.events: list[tuple[str, str]] = []
        self.rim = RouteInfoManager(config, self.clock, on_event=lambda level, msg: self.events.append((level, msg)))
        self.channels: dict[str, object] = {}

    def register(self, addr: str, broker_id: int, ha: str, *names: str, acting: bool | None = True,
                 group: str = GROUP, counter: int = 1, state_version: int = 0, timeout: int | None = None):
        channel = self.channels.setdefault(addr, object())
        return self.rim.register_broker(CLUSTER, addr, group, broker_id, ha, None, timeout, acting,
                                        wrapper(*names, counter=counter, state_version=state_version), None, channel)

    def unregister(self, addr: str, broker_id: int, group: str = GROUP) -> None:
        self.rim.un_register_broker([UnRegisterBrokerRequestHeader(group, addr, CLUSTER, broker_id)])

    def route(self, name: str = "TestTopic") -> TopicRouteData | None:
        return self.rim.pickup_topic_route_data(name)

    def addrs(self, name: str = "TestTopic", group: str = GROUP) -> dict[int, str]:
        return next(b.broker_addrs for b in self.route(name).broker_datas if b.broker_name == group)

    def perm(self, name: str = "TestTopic", group: str = GROUP) -> int:
        return next(q.perm for q in self.route(name).queue_datas if q.broker_name == group)

    def notices(self) -> list[tuple[dict, tuple[str, ...]]]:
        return [(c.header.to_ext_fields(), c.broker_addrs) for c in self.rim.take_min_broker_id_changes()]


def notice(min_id: int, min_addr: str, offline: str | None = None, ha: str | None = None) -> dict:
    return NotifyMinBrokerIdChangeRequestHeader(min_id, None, min_addr, offline, ha).to_ext_fields()


# ---------------------------------------------------------------------------------------------
# RouteInfoManagerNewTest, ported


def test_register_master_and_slave_results():
    m = Members()
    result = m.register(MASTER, 0, MASTER_HA)
    assert (result.ha_server_addr, result.master_addr) == (None, None)
    result = m.register(SLAVE, 1, SLAVE_HA)
    assert (result.ha_server_addr, result.master_addr) == (MASTER_HA, MASTER)
    assert m.addrs() == {0: MASTER, 1: SLAVE} and m.perm() == 6


def test_unregister_master_of_an_acting_master_group_shows_the_slave_as_a_read_only_master():
    # unRegisterMasterBroker
    m = Members()
    m.register(MASTER, 0, MASTER_HA)
    m.register(SLAVE, 1, SLAVE_HA)
    m.unregister(MASTER, 0)
    route = m.route()
    assert len(route.broker_datas) == 1 and route.broker_datas[0].broker_addrs == {0: SLAVE}
    assert [q.perm for q in route.queue_datas] == [PermName.PERM_READ]
    # Only the copy shows id 0: the stored group still has the slave under its own id.
    assert m.rim.broker_addr_table[GROUP].broker_addrs == {1: SLAVE}


def test_unregister_master_of_an_old_group_keeps_ids_and_write_perm():
    # unRegisterMasterBrokerOldVersion: enableActingMaster=false on both.
    m = Members()
    m.register(MASTER, 0, MASTER_HA, acting=False)
    m.register(SLAVE, 1, SLAVE_HA, acting=False)
    m.unregister(MASTER, 0)
    assert m.addrs() == {1: SLAVE}
    assert m.perm() == PermName.PERM_READ | PermName.PERM_WRITE


def test_pickup_route_with_slave_through_master_loss_and_return():
    # pickupTopicRouteDataWithSlave
    m = Members()
    m.register(MASTER, 0, MASTER_HA)
    m.register(SLAVE, 1, SLAVE_HA)
    assert len(m.addrs()) == 2 and PermName.is_writeable(m.perm())
    m.unregister(MASTER, 0)
    assert m.addrs() == {0: SLAVE} and not PermName.is_writeable(m.perm())
    # The master comes back: its first registration under id 0 writes its own perm back.
    m.register(MASTER, 0, MASTER_HA)
    assert m.addrs() == {0: MASTER, 1: SLAVE} and m.perm() == 6


def test_register_only_slave_broker():
    # registerOnlySlaveBroker, case 1: a group of one slave (the prime slave) is read-only (6 -> 4).
    m = Members()
    m.register(SLAVE, 1, SLAVE_HA)
    assert m.perm() == PermName.PERM_READ and m.addrs() == {0: SLAVE}
    m.unregister(SLAVE, 1)
    assert m.route() is None
    # Case 2: master, slave, master leaves, master returns.
    m.register(MASTER, 0, MASTER_HA)
    m.register(SLAVE, 1, SLAVE_HA)
    assert PermName.is_writeable(m.perm())
    m.unregister(MASTER, 0)
    assert not PermName.is_writeable(m.perm())
    m.register(MASTER, 0, MASTER_HA)
    assert PermName.is_writeable(m.perm())


def test_prime_slave_of_a_group_without_acting_master_registers_its_own_perm():
    m = Members()
    m.register(SLAVE, 1, SLAVE_HA, acting=False)
    assert m.perm() == 6 and m.addrs() == {1: SLAVE}  # a new broker, but the group does not act
    # A slave that is not the smallest id writes nothing.
    m.register(SLAVE2, 2, SLAVE2_HA, "OnlyOnSlave2", "Other", acting=False)
    assert m.route("OnlyOnSlave2") is None


def test_switch_broker_role_and_channel_destroy():
    # switchBrokerRole and switchBrokerRole_ChannelDestroy (enableActingMaster=false).
    for by_channel in (False, True):
        m = Members()
        m.register(MASTER, 0, MASTER_HA, acting=False)
        m.register(SLAVE, 1, SLAVE_HA, acting=False)
        if by_channel:
            m.rim.on_channel_destroy(m.channels[MASTER])
        else:
            m.unregister(MASTER, 0)
        assert m.addrs() == {1: SLAVE}
        m.register(SLAVE, 0, SLAVE_HA, acting=False, counter=2)  # the slave becomes master
        assert m.addrs() == {0: SLAVE}
        m.register(MASTER, 1, MASTER_HA, acting=False, counter=2)  # the old master becomes slave
        assert m.addrs() == {0: SLAVE, 1: MASTER}


def test_on_channel_destroy():
    m = Members()
    m.register(MASTER, 0, MASTER_HA, acting=False)
    m.register(SLAVE, 1, SLAVE_HA, acting=False)
    m.rim.on_channel_destroy(m.channels[MASTER])
    assert m.addrs() == {1: SLAVE}
    m.rim.on_channel_destroy(m.channels[SLAVE])
    assert m.route() is None


# ---------------------------------------------------------------------------------------------
# The route rewrite: every condition


def test_rewrite_is_off_without_support_acting_master():
    m = Members(NamesrvConfig(notifyMinBrokerIdChanged=True))
    m.register(MASTER, 0, MASTER_HA)
    m.register(SLAVE, 1, SLAVE_HA)
    m.unregister(MASTER, 0)
    assert m.addrs() == {1: SLAVE} and m.perm() == 4  # read-only, but no acting master shown


def test_rewrite_picks_the_smallest_id_and_keeps_java_map_order():
    m = Members()
    m.register(MASTER, 0, MASTER_HA)
    m.register(SLAVE2, 2, SLAVE2_HA)
    m.register(SLAVE, 1, SLAVE_HA)
    m.unregister(MASTER, 0)
    addrs = m.addrs()
    assert addrs == {0: SLAVE, 2: SLAVE2} and list(addrs) == [0, 2]
    # The JSON a client decodes carries the rewrite, brokerId 0 first.
    body = m.route().encode(False)
    assert b'"brokerAddrs":{0:"127.0.0.1:30911",2:"127.0.0.1:50911"}' in body
    # Slave 1 leaves too: slave 2 is the acting master.
    m.unregister(SLAVE, 1)
    assert m.addrs() == {0: SLAVE2} and m.perm() == 4


def test_rewrite_leaves_the_member_sync_topic_writeable_groups_and_groups_with_a_master_alone():
    m = Members()
    sync_topic = TopicValidator.SYNC_BROKER_MEMBER_GROUP_PREFIX + GROUP
    m.register(MASTER, 0, MASTER_HA, "TestTopic", sync_topic)
    m.register(SLAVE, 1, SLAVE_HA, "TestTopic", sync_topic)
    # Another group keeps its master: untouched, even in a route that has a masterless group.
    m.register("127.0.0.1:11911", 0, "127.0.0.1:11912", "TestTopic", "B", group="broker-b")
    m.register("127.0.0.1:12911", 1, "127.0.0.1:12912", "TestTopic", "B", group="broker-b")
    m.unregister(MASTER, 0)
    assert m.addrs() == {0: SLAVE}
    assert m.addrs(group="broker-b") == {0: "127.0.0.1:11911", 1: "127.0.0.1:12911"}
    assert m.perm(group="broker-b") == 6
    # The member-group sync topic shows the real ids (that is how brokers see who is alive).
    assert m.addrs(sync_topic) == {1: SLAVE}
    # A masterless acting group whose queues are writeable again (an operator's ADD_WRITE_PERM)
    # is shown as it is: a writeable group has no read-only master to show.
    assert m.rim.add_write_perm_of_broker_by_lock(GROUP) == 2
    assert m.addrs() == {1: SLAVE} and m.perm() == 6


def test_reading_the_route_never_changes_the_tables():
    m = Members()
    m.register(MASTER, 0, MASTER_HA)
    m.register(SLAVE, 1, SLAVE_HA)
    m.register(SLAVE2, 2, SLAVE2_HA)
    m.unregister(MASTER, 0)
    first = m.route()
    first.broker_datas[0].broker_addrs[7] = "junk"
    first.queue_datas[0].perm = 6
    second = m.route()
    assert second.broker_datas[0].broker_addrs == {0: SLAVE, 2: SLAVE2} and second.queue_datas[0].perm == 4
    assert m.rim.broker_addr_table[GROUP].broker_addrs == {1: SLAVE, 2: SLAVE2}
    assert m.rim.topic_queue_table["TestTopic"][GROUP].perm == 4


# ---------------------------------------------------------------------------------------------
# Minimum broker id: tracking and NOTIFY_MIN_BROKER_ID_CHANGE notices


def test_register_notices_and_their_targets():
    m = Members()
    # The first member of a group: an empty group counts as minimum 0, so no notice.
    m.register(SLAVE2, 2, SLAVE2_HA)
    assert m.notices() == []
    # A smaller id joins: every member but the new minimum hears, with the newcomer's HA address.
    m.register(SLAVE, 1, SLAVE_HA)
    assert m.notices() == [(notice(1, SLAVE, ha=SLAVE_HA), (SLAVE2,))]
    # The master joins: both slaves hear.
    m.register(MASTER, 0, MASTER_HA)
    assert m.notices() == [(notice(0, MASTER, ha=MASTER_HA), (SLAVE, SLAVE2))]
    assert ("INFO", f"min broker id changed to 0, notify [{SLAVE}, {SLAVE2}], offline broker addr None") in m.events
    # Registrations that do not lower the minimum (a heartbeat-like re-registration, a bigger id): none.
    m.register(MASTER, 0, MASTER_HA)
    m.register("127.0.0.1:70911", 3, "127.0.0.1:70912")
    assert m.notices() == []


def test_register_notice_for_a_group_of_one_and_regardless_of_the_group_flag():
    # A slave switched to master on the same address: the group is that one member, which hears.
    m = Members()
    m.register(SLAVE, 1, SLAVE_HA, acting=False)
    m.register(SLAVE, 0, SLAVE_HA, acting=False, counter=2)
    # The registration path does not look at enableActingMaster (as in RocketMQ).
    assert m.notices() == [(notice(0, SLAVE, ha=SLAVE_HA), (SLAVE,))]


def test_unregister_notices_go_to_every_remaining_member_of_acting_groups_only():
    m = Members()
    m.register(MASTER, 0, MASTER_HA)
    m.register(SLAVE, 1, SLAVE_HA)
    m.register(SLAVE2, 2, SLAVE2_HA)
    m.notices()
    m.unregister(SLAVE2, 2)  # not the minimum
    assert m.notices() == []
    m.register(SLAVE2, 2, SLAVE2_HA)
    m.unregister(MASTER, 0)
    assert m.notices() == [(notice(1, SLAVE, offline=MASTER), (SLAVE, SLAVE2))]
    assert ("INFO", f"min broker id changed to 1, notify [{SLAVE}, {SLAVE2}], offline broker addr {MASTER}") \
        in m.events
    m.unregister(SLAVE, 1)
    assert m.notices() == [(notice(2, SLAVE2, offline=SLAVE), (SLAVE2,))]
    m.unregister(SLAVE2, 2)  # the group is gone: nobody to tell
    assert m.notices() == []
    # A group without enableActingMaster: no notice on unregistration.
    m.register(MASTER, 0, MASTER_HA, acting=False)
    m.register(SLAVE, 1, SLAVE_HA, acting=False)
    m.notices()
    m.unregister(MASTER, 0)
    assert m.notices() == []


def test_channel_close_and_expiry_notify_too():
    m = Members()
    m.register(MASTER, 0, MASTER_HA, timeout=10_000)
    m.register(SLAVE, 1, SLAVE_HA, timeout=10_000)
    m.register(SLAVE2, 2, SLAVE2_HA, timeout=10_000)
    m.rim.on_channel_destroy(m.channels[MASTER])
    assert m.notices() == [(notice(1, SLAVE, offline=MASTER), (SLAVE, SLAVE2))]
    # Slave 1 stops its heartbeats; slave 2 keeps sending them (BROKER_HEARTBEAT).
    for _ in range(3):
        m.clock.now += 4_000
        m.rim.update_broker_info_update_timestamp(CLUSTER, SLAVE2)
    expired = m.rim.scan_not_active_broker()
    assert [live.channel for live in expired] == [m.channels[SLAVE]]
    assert m.notices() == [(notice(2, SLAVE2, offline=SLAVE), (SLAVE2,))]
    assert m.addrs() == {0: SLAVE2}


def test_no_notice_without_notify_min_broker_id_changed():
    m = Members(NamesrvConfig(supportActingMaster=True))
    m.register(SLAVE, 1, SLAVE_HA)
    m.register(MASTER, 0, MASTER_HA)
    m.unregister(MASTER, 0)
    assert m.notices() == [] and not any("min broker id changed" in msg for _, msg in m.events)


# ---------------------------------------------------------------------------------------------
# Bad input: what RocketMQ does, and that nothing is lost


def test_a_second_address_claiming_id_0():
    m = Members()
    m.register(MASTER, 0, MASTER_HA, state_version=2)
    m.register(SLAVE, 1, SLAVE_HA, state_version=2)
    m.notices()
    intruder, intruder_ha = "127.0.0.1:80911", "127.0.0.1:80912"
    # A lower stateVersion (a stale master in controller mode) is fenced: SUCCESS without a
    # master, nothing changes, nobody is notified, the claimant gets no live entry.
    result = m.register(intruder, 0, intruder_ha, "TestTopic", "Intruder", state_version=1)
    assert (result.ha_server_addr, result.master_addr) == (None, None)
    assert m.addrs() == {0: MASTER, 1: SLAVE} and m.route("Intruder") is None
    assert any(level == "WARN" and msg.startswith("Registering Broker conflicts with the existed one, just ignore.")
               for level, msg in m.events)
    assert [a.broker_addr for a in m.rim.broker_live_table] == [MASTER, SLAVE] and m.notices() == []
    # An equal or higher stateVersion replaces the address under id 0 (RocketMQ's last writer
    # wins, without a log line): the minimum id is still 0, so nobody is notified; the group's
    # topics stay; the replaced master keeps its live entry until its channel closes or expires.
    m.register(intruder, 0, intruder_ha, "TestTopic", "Intruder", state_version=2)
    assert m.addrs() == {0: intruder, 1: SLAVE} and m.perm() == 6 and m.route("TestTopic1") is not None
    assert m.notices() == []
    assert {a.broker_addr for a in m.rim.broker_live_table} == {MASTER, SLAVE, intruder}
    # The slave is now told the new master's HA address.
    assert m.register(SLAVE, 1, SLAVE_HA, state_version=2).ha_server_addr == intruder_ha
    # The replaced master's channel closes: it is no member any more, so the group keeps its
    # members and its write perm.
    m.rim.on_channel_destroy(m.channels[MASTER])
    assert m.addrs() == {0: intruder, 1: SLAVE} and m.perm() == 6 and m.notices() == []


def test_a_stale_data_version_is_still_a_change():
    # RocketMQ compares DataVersions for equality, never for order: an older version than the
    # stored one is "changed" (QUERY_DATA_VERSION answers changed=true and the broker registers
    # again) and its registration rewrites the topics; nothing is dropped.
    m = Members()
    m.register(MASTER, 0, MASTER_HA, counter=5)
    stale = DataVersion(0, 1_700_000_000_000, 4)
    assert m.rim.is_broker_topic_config_changed(CLUSTER, MASTER, stale)
    m.register(MASTER, 0, MASTER_HA, "TestTopic", "TestTopic1", "Later", counter=4)
    assert m.rim.query_broker_topic_config(CLUSTER, MASTER) == stale
    assert m.route("Later") is not None and m.route("TestTopic") is not None


# ---------------------------------------------------------------------------------------------
# The simulator: notices travel as frames to brokers that listen


class ListeningBroker(Component):
    """A broker's listening port: records every request the name server sends it."""

    def __init__(self, port: int):
        self.port = port
        self.received: list[RemotingCommand] = []

    async def start(self, node):
        self.node = node

        async def record(channel, request: RemotingCommand) -> None:
            self.received.append(request)

        self.server = RemotingServer(node, "127.0.0.1", self.port)
        self.server.register_default_processor(record)
        await self.server.start()

    async def shutdown(self):
        await self.server.shutdown()


class Idle(Component):
    async def start(self, node):
        self.node = node


BROKERS = {"m": (0, 10911), "s1": (1, 10921), "s2": (2, 10931)}


def acting_world(config: NamesrvConfig = ACTING, seed: int = 5) -> Simulation:
    sim = Simulation(seed=seed)
    sim.add_node("namesrv", lambda: NamesrvController(config, NettyServerConfig(listenPort=9876)))
    for name, (_, port) in BROKERS.items():
        sim.add_node(name, lambda port=port: ListeningBroker(port))
    sim.add_node("client", Idle)
    sim.start_all()
    return sim


def fake(sim: Simulation, name: str) -> FakeBroker:
    broker_id, port = BROKERS[name]
    return FakeBroker(sim, name, "broker-a", broker_id, f"127.0.0.1:{port}")


def received_905(sim: Simulation, name: str) -> list[dict]:
    return [r.ext_fields for r in sim.components[name].received if r.code == RequestCode.NOTIFY_MIN_BROKER_ID_CHANGE]


def route_of(sim: Simulation, topic_name: str = "TopicTest") -> TopicRouteData:
    client = RemotingClient(sim.nodes["client"])
    request = RemotingCommand.create_request_command(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": topic_name})
    request.version = MQVersion.CURRENT_VERSION
    response = sim.run(client.invoke_sync(NS, request, TIMEOUT_MS))
    assert response.code == ResponseCode.SUCCESS
    return TopicRouteData.decode(response.body)


def test_master_killed_and_back_on_the_simulator():
    sim = acting_world()
    brokers = {name: fake(sim, name) for name in BROKERS}
    for name in ("s2", "s1", "m"):  # the master last: two notices on registration
        assert brokers[name].register(enable_acting_master=True).code == ResponseCode.SUCCESS
    sim.run_for(50)
    assert received_905(sim, "s2") == [{"minBrokerId": "1", "minBrokerAddr": "127.0.0.1:10921",
                                        "haBrokerAddr": "127.0.0.1:10922"},
                                       {"minBrokerId": "0", "minBrokerAddr": "127.0.0.1:10911",
                                        "haBrokerAddr": "127.0.0.1:10912"}]
    assert received_905(sim, "s1") == [{"minBrokerId": "0", "minBrokerAddr": "127.0.0.1:10911",
                                        "haBrokerAddr": "127.0.0.1:10912"}]
    assert received_905(sim, "m") == []
    # Oneway: the flag's oneway bit is set and nothing is answered.
    assert all(r.is_oneway_rpc() for r in sim.components["s2"].received)
    route = route_of(sim)
    assert route.broker_datas[0].broker_addrs == {0: "127.0.0.1:10911", 1: "127.0.0.1:10921", 2: "127.0.0.1:10931"}

    # The master dies: its channel closes, both slaves hear that 1 is the minimum now.
    sim.nemesis.kill("m")
    sim.run_for(50)
    expected = {"minBrokerId": "1", "minBrokerAddr": "127.0.0.1:10921", "offlineBrokerAddr": "127.0.0.1:10911"}
    assert received_905(sim, "s1")[-1] == expected and received_905(sim, "s2")[-1] == expected
    route = route_of(sim)
    assert route.broker_datas[0].broker_addrs == {0: "127.0.0.1:10921", 2: "127.0.0.1:10931"}
    assert [q.perm for q in route.queue_datas] == [PermName.PERM_READ]
    # GET_BROKER_MEMBER_GROUP (901) lists the real members, without rewrite.
    client = RemotingClient(sim.nodes["client"])
    request = RemotingCommand.create_request_command(RequestCode.GET_BROKER_MEMBER_GROUP,
                                                     {"clusterName": CLUSTER, "brokerName": "broker-a"})
    group = GetBrokerMemberGroupResponseBody.decode(sim.run(client.invoke_sync(NS, request, TIMEOUT_MS)).body)
    assert group.broker_member_group.broker_addrs == {1: "127.0.0.1:10921", 2: "127.0.0.1:10931"}
    # The notices are in the trace as the name server's frames, with their header fields.
    frames = [e for e in sim.tracer.events if e.kind == "frame.send" and e.node == "namesrv"
              and e.fields["name"] == "NOTIFY_MIN_BROKER_ID_CHANGE"]
    assert [e.fields["peer"] for e in frames][-2:] == ["127.0.0.1:10921", "127.0.0.1:10931"]
    logs = [e.fields["message"] for e in sim.tracer.events if e.kind == "log" and e.node == "namesrv"]
    assert ("min broker id changed to 1, notify [127.0.0.1:10921, 127.0.0.1:10931], offline broker addr "
            "127.0.0.1:10911") in logs

    # The master comes back: the slaves hear that 0 is the minimum again, the queues are writeable.
    sim.nemesis.restart("m")
    sim.run_for(10)
    assert fake(sim, "m").register(enable_acting_master=True).code == ResponseCode.SUCCESS
    sim.run_for(50)
    back = {"minBrokerId": "0", "minBrokerAddr": "127.0.0.1:10911", "haBrokerAddr": "127.0.0.1:10912"}
    assert received_905(sim, "s1")[-1] == back and received_905(sim, "s2")[-1] == back
    route = route_of(sim)
    assert route.broker_datas[0].broker_addrs == {0: "127.0.0.1:10911", 1: "127.0.0.1:10921", 2: "127.0.0.1:10931"}
    assert [q.perm for q in route.queue_datas] == [6]
    sim.close()


def test_heartbeats_keep_members_and_expiry_notifies_on_the_simulator():
    # The brokers' lightweight heartbeat: BROKER_HEARTBEAT or QUERY_DATA_VERSION within the
    # timeout each registration sent (brokerNotActiveTimeoutMillis, 10 s).
    sim = acting_world()
    sim.components["namesrv"].remoting_server.channel_max_idle_seconds = 0  # the scan is the subject
    brokers = {name: fake(sim, name) for name in ("m", "s1")}
    for broker in brokers.values():
        broker.register(enable_acting_master=True, heartbeat_timeout_millis=10_000)
    for i in range(6):  # 30 s of heartbeats, one a second, alternating the two kinds
        sim.run_for(1_000)
        for broker in brokers.values():
            if i % 2:
                assert broker.heartbeat().code == ResponseCode.SUCCESS
            else:
                request = RemotingCommand.create_request_command(RequestCode.QUERY_DATA_VERSION, {
                    "brokerName": "broker-a", "brokerAddr": broker.addr, "clusterName": CLUSTER,
                    "brokerId": broker.broker_id}, DataVersion(0, 1_700_000_000_000, 1).to_json().encode())
                response = broker.send(request)
                assert QueryDataVersionResponseHeader.decode(response).changed is False
    sim.run_for(4_000)
    assert route_of(sim).broker_datas[0].broker_addrs == {0: "127.0.0.1:10911", 1: "127.0.0.1:10921"}
    # The master goes silent (its connection stays open): the scan expires it and s1 hears.
    for _ in range(15):
        sim.run_for(1_000)
        brokers["s1"].heartbeat()
    assert received_905(sim, "s1") == [{"minBrokerId": "1", "minBrokerAddr": "127.0.0.1:10921",
                                        "offlineBrokerAddr": "127.0.0.1:10911"}]
    assert route_of(sim).broker_datas[0].broker_addrs == {0: "127.0.0.1:10921"}
    assert any(e.kind == "namesrv.channel_expired" and e.fields["broker_addr"] == "127.0.0.1:10911"
               for e in sim.tracer.events)
    sim.close()


def test_an_unreachable_member_does_not_keep_the_others_from_hearing():
    sim = acting_world()
    for name in ("m", "s1", "s2"):
        fake(sim, name).register(enable_acting_master=True)
    sim.run_for(50)
    # s1 stops listening while its registration stays: the first target of the notice is refused.
    sim.run(sim.components["s1"].server.shutdown())
    sim.nemesis.kill("m")
    sim.run_for(5_000)
    assert received_905(sim, "s2")[-1]["offlineBrokerAddr"] == "127.0.0.1:10911"
    sim.close()


def test_same_seed_same_trace_with_notices():
    def run() -> str:
        sim = acting_world(seed=13)
        for name in ("s2", "s1", "m"):
            fake(sim, name).register(enable_acting_master=True)
        sim.nemesis.kill("m")
        sim.run_for(15_000)
        assert received_905(sim, "s2")
        digest = trace_hash(sim.tracer.events)
        sim.close()
        return digest
    assert run() == run()


def test_defaults_send_nothing_and_show_no_acting_master():
    sim = acting_world(NamesrvConfig())
    for name in ("m", "s1"):
        fake(sim, name).register(enable_acting_master=True)
    sim.nemesis.kill("m")
    sim.run_for(50)
    assert received_905(sim, "s1") == []
    assert not any(e.kind == "net.connect" and e.node == "namesrv" for e in sim.tracer.events)
    route = route_of(sim)
    assert route.broker_datas[0].broker_addrs == {1: "127.0.0.1:10921"}
    assert [q.perm for q in route.queue_datas] == [PermName.PERM_READ]  # the wipe is not behind a switch
    sim.close()


# ---------------------------------------------------------------------------------------------
# The real runtime: the notice over TCP


def test_notice_over_tcp_on_the_real_runtime(tmp_path):
    async def main():
        ns_node = RealNode("namesrv", str(tmp_path / "namesrv"))
        slave_node = RealNode("s1", str(tmp_path / "s1"))
        master_node = RealNode("m", str(tmp_path / "m"))
        controller = NamesrvController(ACTING, NettyServerConfig(listenPort=0))
        controller.node = ns_node
        await controller.start(ns_node)
        received: list[RemotingCommand] = []
        got = asyncio.Event()

        async def record(channel, request):
            received.append(request)
            got.set()

        slave_server = RemotingServer(slave_node, "127.0.0.1", 0)
        slave_server.register_default_processor(record)
        await slave_server.start()
        slave_addr = f"127.0.0.1:{slave_server.port}"
        master_client, slave_client = RemotingClient(master_node), RemotingClient(slave_node)
        try:
            await register_real(master_client, controller.address, "127.0.0.1:1", 0)
            await register_real(slave_client, controller.address, slave_addr, 1)
            await master_client.shutdown()  # the master's process stops: its connection closes
            await asyncio.wait_for(got.wait(), 10)
            assert received[0].code == RequestCode.NOTIFY_MIN_BROKER_ID_CHANGE and received[0].is_oneway_rpc()
            assert received[0].ext_fields == {"minBrokerId": "1", "minBrokerAddr": slave_addr,
                                              "offlineBrokerAddr": "127.0.0.1:1"}
        finally:
            await slave_client.shutdown()
            await slave_server.shutdown()
            await controller.shutdown()
            for node in (master_node, slave_node, ns_node):
                await node.close()

    asyncio.run(asyncio.wait_for(main(), 30))


async def register_real(client: RemotingClient, namesrv: str, addr: str, broker_id: int) -> None:
    body = RegisterBrokerBody(wrapper("TopicTest", "TBW102")).encode()
    header = RegisterBrokerRequestHeader("broker-a", addr, CLUSTER, addr, broker_id, 10_000, True, False, crc32(body))
    request = RemotingCommand.create_request_command(RequestCode.REGISTER_BROKER, header.to_ext_fields(), body)
    request.version = MQVersion.CURRENT_VERSION
    assert (await client.invoke_sync(namesrv, request, TIMEOUT_MS)).code == ResponseCode.SUCCESS


@pytest.mark.real
def test_a_name_server_process_notifies_and_rewrites(tmp_path):
    """`rmqlab namesrv -c` with both switches in its file, as an OS process on 127.0.0.1 (stopped by
    its PID); the brokers are this test's sockets."""
    ns_port, slave_port = free_ports(2)
    conf = tmp_path / "namesrv.properties"
    conf.write_text(f"listenPort={ns_port}\nsupportActingMaster=true\nnotifyMinBrokerIdChanged=true\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith("RMQLAB_") and k != "NAMESRV_ADDR"}
    env["HOME"] = str(tmp_path / "home")
    env["PYTHONPATH"] = os.pathsep.join(p for p in (ROOT, os.environ.get("PYTHONPATH")) if p)
    proc = subprocess.Popen([sys.executable, "-m", "rmqlab.cli", "namesrv", "-c", str(conf)], env=env,
                            cwd=str(tmp_path), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        ready, _, _ = select.select([proc.stdout], [], [], 60)  # bounded: a hung start fails the test
        line = proc.stdout.readline() if ready else ""
        assert "boot success" in line, (line, proc.poll())
        namesrv = f"127.0.0.1:{ns_port}"
        slave_addr = f"127.0.0.1:{slave_port}"

        async def main():
            slave_node, master_node = RealNode("s1", str(tmp_path / "s1")), RealNode("m", str(tmp_path / "m"))
            received: list[RemotingCommand] = []
            got = asyncio.Event()

            async def record(channel, request):
                received.append(request)
                got.set()

            slave_server = RemotingServer(slave_node, "127.0.0.1", slave_port)
            slave_server.register_default_processor(record)
            await slave_server.start()
            master_client, slave_client = RemotingClient(master_node), RemotingClient(slave_node)
            try:
                await register_real(master_client, namesrv, "127.0.0.1:1", 0)
                await register_real(slave_client, namesrv, slave_addr, 1)
                await master_client.shutdown()  # the master's connection closes
                await asyncio.wait_for(got.wait(), 10)
                assert received[0].code == RequestCode.NOTIFY_MIN_BROKER_ID_CHANGE and received[0].is_oneway_rpc()
                assert received[0].ext_fields == {"minBrokerId": "1", "minBrokerAddr": slave_addr,
                                                  "offlineBrokerAddr": "127.0.0.1:1"}
                query = RemotingCommand.create_request_command(RequestCode.GET_ROUTEINFO_BY_TOPIC,
                                                               {"topic": "TopicTest"})
                query.version = MQVersion.CURRENT_VERSION
                route = TopicRouteData.decode((await slave_client.invoke_sync(namesrv, query, TIMEOUT_MS)).body)
                assert route.broker_datas[0].broker_addrs == {0: slave_addr}
                assert [q.perm for q in route.queue_datas] == [PermName.PERM_READ]
            finally:
                await slave_client.shutdown()
                await slave_server.shutdown()
                await master_node.close()
                await slave_node.close()

        asyncio.run(asyncio.wait_for(main(), 30))
    finally:
        stop(proc)
