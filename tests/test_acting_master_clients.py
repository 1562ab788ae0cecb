"""Clients and admin commands on RIP-32's rewritten route (RocketMQ's "RIP 32 Slave Acting Master
Mode" design page: while a group has no master, the name server shows its smallest-id live slave
as brokerId 0, read-only, and clients send it what only a master answered before).

On the simulator: the master-only queries (SEARCH_OFFSET_BY_TIMESTAMP, GET_MAX_OFFSET,
GET_MIN_OFFSET, GET_EARLIEST_MSG_STORETIME) answered by a master and by a slave; GET_BROKER_CONFIG
/ UPDATE_BROKER_CONFIG and `rmqlab admin getBrokerConfig / updateBrokerConfig / topicRoute`;
producers, push consumers (CONSUME_FROM_TIMESTAMP included) and rebalancing on a route whose
group broker-a lost its master; the acting-master deployment mode.

The brokers here start with RocketMQ's default enableSlaveActingMaster=false and are switched on
with UPDATE_BROKER_CONFIG (as an operator can: RocketMQ reads the flag at each registration), so
the name server sees acting-master groups and rewrites the route.
"""

from __future__ import annotations

import argparse
import asyncio
import os

import pytest

from rmqlab import admin_cli
from rmqlab.broker.broker_controller import BrokerController
from rmqlab.client import ClientProcess, DefaultMQAdminExt, DefaultMQProducer, MessageQueue
from rmqlab.client.exceptions import MQBrokerException, MQClientException
from rmqlab.common.boundary_type import BoundaryType
from rmqlab.common.constant.perm_name import PermName
from rmqlab.common.message import Message
from rmqlab.common.message.message_decoder import decode
from rmqlab.common.topic_config import TopicConfig
from rmqlab.config.errors import ConfigError
from rmqlab.config.loader import load_broker_config, load_namesrv_config
from rmqlab.namesrv import NamesrvController
from rmqlab.remoting import RemotingCommand, RequestCode, ResponseCode
from rmqlab.remoting.protocol.header.broker.offset_query import (GetBrokerConfigResponseHeader,
                                                                 SearchOffsetRequestHeader, SearchOffsetResponseHeader)
from rmqlab.remoting.protocol.header.broker.heartbeat import ConsumeFromWhere
from rmqlab.runtime.sim import Simulation
from tests.client_helpers import Recorder, push_consumer

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
NS = "127.0.0.1:9876"
CLUSTER = "DefaultCluster"
TOPIC = "TopicTest"
# Group broker-a of three replicas (the acting-master templates' shape), group broker-b a master.
BROKERS = [("broker-a", "broker-a", 0, "ASYNC_MASTER", 10911),
           ("broker-a-s1", "broker-a", 1, "SLAVE", 10921),
           ("broker-a-s2", "broker-a", 2, "SLAVE", 10931),
           ("broker-b", "broker-b", 0, "ASYNC_MASTER", 10941)]


class ActingLab:
    """A name server with supportActingMaster and notifyMinBrokerIdChanged, the brokers of
    BROKERS (slaves with slaveReadEnable), an admin client."""

    def __init__(self, seed: int = 7, **broker_options):
        self.sim = sim = Simulation(seed=seed)
        self.ports = {node: port for node, _n, _i, _r, port in BROKERS}
        sim.add_node("namesrv", lambda: NamesrvController.from_startup_config(load_namesrv_config(
            overrides={"listenPort": 9876, "supportActingMaster": True, "notifyMinBrokerIdChanged": True})))
        for node, name, broker_id, role, port in BROKERS:
            sim.add_node(node, lambda node=node, name=name, broker_id=broker_id, role=role, port=port:
                         BrokerController(load_broker_config(namesrv_addr=NS, overrides={
                             "brokerClusterName": CLUSTER, "brokerName": name, "brokerId": broker_id,
                             "brokerRole": role, "listenPort": port, "haListenPort": port + 1,
                             "brokerIP1": "127.0.0.1", "brokerIP2": "127.0.0.1",
                             "storePathRootDir": sim.store_dir(node), "mappedFileSizeCommitLog": 1024 * 1024,
                             "mappedFileSizeConsumeQueue": 6000, "slaveReadEnable": role == "SLAVE"}),
                                                          **broker_options))
        sim.add_node("admin", lambda: ClientProcess(admin=DefaultMQAdminExt(NS)))
        sim.start_all()

    def addr(self, node: str) -> str:
        return f"127.0.0.1:{self.ports[node]}"

    def broker(self, node: str) -> BrokerController:
        return self.sim.components[node]

    @property
    def admin(self) -> DefaultMQAdminExt:
        return self.sim.components["admin"]["admin"]

    def run(self, coro):
        return self.sim.run(coro)

    def wait_until(self, predicate, timeout_ms: float, poll_ms: float = 50) -> None:
        """Advance until ``predicate()`` (a plain function) holds."""
        start = self.sim.now_ms()

        async def wait():
            while not predicate():
                if self.sim.now_ms() - start >= timeout_ms:
                    raise TimeoutError(f"condition not reached within {timeout_ms:.0f} virtual ms")
                await asyncio.sleep(poll_ms / 1000)

        self.run(wait())

    def add_client(self, name: str, make_clients) -> ClientProcess:
        self.sim.add_node(name, lambda: ClientProcess(**make_clients()))
        self.sim.start(name)
        return self.sim.components[name]

    def create_topic(self, topic: str = TOPIC, queues: int = 2) -> None:
        self.run(self.admin.create_and_update_topic_config_by_cluster(CLUSTER, TopicConfig(topic, queues, queues)))
        self.wait_until(lambda: self.routed_groups(topic) == {"broker-a", "broker-b"}, 5_000)

    def route(self, topic: str = TOPIC):
        return self.run(self.admin.examine_topic_route_info(topic))

    def routed_groups(self, topic: str) -> set[str]:
        rim = self.sim.components["namesrv"].route_info_manager
        return {q.broker_name for q in rim.pickup_topic_route_data(topic).queue_datas} \
            if rim.pickup_topic_route_data(topic) is not None else set()

    def enable_acting_master(self) -> None:
        """enableSlaveActingMaster=true on every broker (UPDATE_BROKER_CONFIG), then wait for
        their next registrations to carry it. The heartbeat timeout they then register is raised
        so that registrations alone keep them alive (the lightweight heartbeat is the broker's)."""
        for node in self.ports:
            self.run(self.admin.update_broker_config(self.addr(node), {
                "enableSlaveActingMaster": "true", "brokerNotActiveTimeoutMillis": "600000"}))
        rim = self.sim.components["namesrv"].route_info_manager
        self.wait_until(lambda: all(rim.broker_addr_table[n].enable_acting_master for n in ("broker-a", "broker-b")),
                        40_000)

    def replicated(self, topic: str = TOPIC) -> bool:
        """Both slaves of broker-a have dispatched every message of the master's queues and hold
        the topic's config (SlaveSynchronize: a slave serves pulls of the topics it knows)."""
        master = self.broker("broker-a").message_store
        slaves = [self.broker(s) for s in ("broker-a-s1", "broker-a-s2")]
        return all(s.topic_config_manager.select_topic_config(topic) is not None for s in slaves) and all(
            s.message_store.get_max_offset_in_queue(topic, q) == master.get_max_offset_in_queue(topic, q)
            for s in slaves for q in range(2))

    def close(self) -> None:
        self.sim.close()


@pytest.fixture
def lab():
    lab = ActingLab()
    try:
        yield lab
    finally:
        lab.close()


def send_batches(lab: ActingLab, batches: int, per_batch: int, mq: MessageQueue, gap_ms: int = 20) -> None:
    """``batches`` rounds of ``per_batch`` concurrent sends to ``mq`` (concurrent sends reach the
    broker in the same virtual millisecond: runs of messages sharing a store time), ``gap_ms``
    apart."""
    if "sender" not in lab.sim.components:
        lab.add_client("sender", lambda: {"producer": DefaultMQProducer("PG", NS)})
    producer = lab.sim.components["sender"]["producer"]

    async def go():
        for b in range(batches):
            await asyncio.gather(*(producer.send(Message(TOPIC, f"{b}-{i}".encode()), mq) for i in range(per_batch)))
            await asyncio.sleep(gap_ms / 1000)

    lab.run(go())


def store_times(broker: BrokerController, topic: str, queue_id: int) -> list[tuple[int, int]]:
    """(queue offset, store timestamp) of every message of a queue, read from the store."""
    result = broker.message_store.get_message("test", topic, queue_id, 0, 1000)
    return [(offset, decode(buf, read_body=False, check_crc=False).store_timestamp)
            for offset, buf in zip(result.queue_offsets, result.message_buffers)]


def expected_offset(units: list[tuple[int, int]], timestamp: int, boundary: BoundaryType) -> int:
    """RocketMQ's answer, by brute force: LOWER the first offset stored at or after the time (the
    max offset if none), UPPER the last one stored at or before it (the min offset if none)."""
    if boundary is BoundaryType.LOWER:
        return next((o for o, t in units if t >= timestamp), units[-1][0] + 1)
    return max((o for o, t in units if t <= timestamp), default=units[0][0])


# -- master-only queries, from a master and from a slave ------------------------------------------------
def test_search_offset_by_timestamp_on_master_and_slave_lower_and_upper(lab):
    lab.create_topic()
    mq = MessageQueue(TOPIC, "broker-a", 0)
    send_batches(lab, batches=6, per_batch=3, mq=mq)
    lab.wait_until(lab.replicated, 70_000)
    units = store_times(lab.broker("broker-a"), TOPIC, 0)
    assert len(units) == 18
    times = sorted({t for _, t in units})
    assert len(times) < len(units), "no run of messages shares a store time: the test would not cover it"
    probes = {times[0] - 1, times[-1] + 1} | {t + d for t in times for d in (-1, 0, 1)}
    api = lab.admin.client_factory.mq_client_api_impl
    for node in ("broker-a", "broker-a-s1", "broker-a-s2"):
        assert store_times(lab.broker(node), TOPIC, 0) == units  # a slave holds the same queue
        for ts in sorted(probes):
            for boundary in BoundaryType:
                got = lab.run(api.search_offset(lab.addr(node), mq, ts, boundary, 3000))
                assert got == expected_offset(units, ts, boundary), (node, ts, boundary)


def test_search_offset_on_an_empty_or_unknown_queue_answers_0_and_absent_boundary_is_lower(lab):
    lab.create_topic()
    api = lab.admin.client_factory.mq_client_api_impl
    for queue_id in (1, 7):  # empty, never created
        assert lab.run(api.search_offset(lab.addr("broker-a-s1"), MessageQueue(TOPIC, "broker-a", queue_id),
                                         10**12, BoundaryType.UPPER, 3000)) == 0
    mq = MessageQueue(TOPIC, "broker-a", 0)
    send_batches(lab, batches=2, per_batch=2, mq=mq)
    units = store_times(lab.broker("broker-a"), TOPIC, 0)
    # A header without boundaryType (an older client): getBoundaryType() is LOWER.
    request = RemotingCommand.create_request_command(RequestCode.SEARCH_OFFSET_BY_TIMESTAMP, SearchOffsetRequestHeader(
        TOPIC, 0, units[-1][1]).to_ext_fields())
    response = lab.run(lab.admin.client_factory.remoting_client.invoke_sync(lab.addr("broker-a"), request, 3000))
    assert response.code == ResponseCode.SUCCESS
    assert SearchOffsetResponseHeader.decode(response).offset == expected_offset(units, units[-1][1],
                                                                                 BoundaryType.LOWER)


def test_max_min_offset_and_earliest_store_time_on_master_and_slave(lab):
    lab.create_topic()
    mq = MessageQueue(TOPIC, "broker-a", 0)
    send_batches(lab, batches=3, per_batch=2, mq=mq)
    lab.wait_until(lab.replicated, 70_000)
    first_time = store_times(lab.broker("broker-a"), TOPIC, 0)[0][1]
    api = lab.admin.client_factory.mq_client_api_impl
    for node in ("broker-a", "broker-a-s1", "broker-a-s2"):
        addr = lab.addr(node)
        assert lab.run(api.get_max_offset(addr, mq, 3000)) == 6
        assert lab.run(api.get_min_offset(addr, mq, 3000)) == 0
        assert lab.run(api.get_earliest_msg_storetime(addr, mq, 3000)) == first_time
        assert lab.run(api.get_earliest_msg_storetime(addr, MessageQueue(TOPIC, "broker-a", 1), 3000)) == -1


# -- GET_BROKER_CONFIG / UPDATE_BROKER_CONFIG -------------------------------------------------------------
def config_version(lab: ActingLab, node: str) -> str:
    request = RemotingCommand.create_request_command(RequestCode.GET_BROKER_CONFIG)
    response = lab.run(lab.admin.client_factory.remoting_client.invoke_sync(lab.addr(node), request, 3000))
    assert response.code == ResponseCode.SUCCESS
    return GetBrokerConfigResponseHeader.decode(response).version


def test_get_and_update_broker_config_round_trip(lab):
    addr = lab.addr("broker-a-s1")
    config = lab.run(lab.admin.get_broker_config(addr))
    assert config["brokerName"] == "broker-a" and config["brokerId"] == "1" and config["brokerRole"] == "SLAVE"
    assert config["listenPort"] == "10921" and config["enableSlaveActingMaster"] == "false"
    assert "brokerConfigPath" not in config
    before = config_version(lab, "broker-a-s1")
    lab.run(lab.admin.update_broker_config(addr, {"enableSlaveActingMaster": "true", "slaveReadEnable": "false"}))
    config = lab.run(lab.admin.get_broker_config(addr))
    assert config["enableSlaveActingMaster"] == "true" and config["slaveReadEnable"] == "false"
    bc = lab.broker("broker-a-s1").broker_config
    assert bc.enableSlaveActingMaster is True and bc.slaveReadEnable is False
    assert config_version(lab, "broker-a-s1") != before  # Configuration's DataVersion moved


@pytest.mark.parametrize("properties, code, words", [
    ({"brokerRol": "SLAVE"}, ResponseCode.INVALID_PARAMETER, ["brokerRol", "did you mean brokerRole"]),
    ({"noSuchKeyAtAll": "1"}, ResponseCode.INVALID_PARAMETER, ["unknown key 'noSuchKeyAtAll'"]),
    ({"slaveReadEnable": "false", "brokerPermission": "9"}, ResponseCode.INVALID_PARAMETER,
     ["brokerPermission = '9'", "0..7"]),
    ({"enableSlaveActingMaster": "ture"}, ResponseCode.INVALID_PARAMETER, ["enableSlaveActingMaster", "true or false"]),
    ({"slaveReadEnable": "false", "brokerConfigPath": "/tmp/x"}, ResponseCode.NO_PERMISSION,
     ["Can not update config in black list."]),
])
def test_update_broker_config_refuses_bad_keys_and_values_and_changes_nothing(lab, properties, code, words):
    addr = lab.addr("broker-a-s1")
    before = lab.run(lab.admin.get_broker_config(addr))
    with pytest.raises(MQBrokerException) as e:
        lab.run(lab.admin.update_broker_config(addr, properties))
    assert e.value.response_code == code
    for word in words:
        assert word in str(e.value)
    assert lab.run(lab.admin.get_broker_config(addr)) == before  # slaveReadEnable=false was not applied


def test_update_broker_permission_re_registers_at_once(lab):
    lab.create_topic()
    lab.run(lab.admin.update_broker_config(lab.addr("broker-a"), {"brokerPermission": "4"}))
    # No wait for the 30 s registration: the route has the masked perm already.
    perms = {q.broker_name: q.perm for q in lab.route().queue_datas}
    assert perms == {"broker-a": PermName.PERM_READ, "broker-b": PermName.PERM_READ | PermName.PERM_WRITE}


def test_admin_cli_get_and_update_broker_config_print_as_mqadmin(lab, capsys):
    addr = lab.addr("broker-b")
    args = argparse.Namespace(broker_addr=addr, key="slaveReadEnable", value="true")
    assert lab.run(admin_cli._update_broker_config(lab.admin, args)) == 0
    assert capsys.readouterr().out == f"update broker config success, {addr}\n"
    assert lab.run(admin_cli._get_broker_config(lab.admin, args)) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0] == f"============{addr}============" and out[-1] == ""
    lines = dict(line.split("=  ", 1) for line in out[1:-1])
    assert lines["slaveReadEnable".ljust(50)] == "true" and lines["brokerName".ljust(50)] == "broker-b"
    assert list(lines) == sorted(lines)
    args.key = "nope"
    with pytest.raises(MQBrokerException, match="unknown key 'nope'"):
        lab.run(admin_cli._update_broker_config(lab.admin, args))


# -- clients on the rewritten route ----------------------------------------------------------------------
def kill_master_of_a(lab: ActingLab) -> None:
    """Kill broker-a; wait until the name server answers broker-a-s1 as the acting master."""
    lab.sim.nemesis.kill("broker-a")
    rim = lab.sim.components["namesrv"].route_info_manager

    def acting() -> bool:
        route = rim.pickup_topic_route_data(TOPIC)
        return any(bd.broker_name == "broker-a" and bd.broker_addrs.get(0) == lab.addr("broker-a-s1")
                   for bd in route.broker_datas)

    lab.wait_until(acting, 10_000)


def acting_lab_with_messages(lab: ActingLab, per_queue: int = 5) -> None:
    lab.enable_acting_master()
    lab.create_topic()
    for q in range(2):
        send_batches(lab, batches=per_queue, per_batch=1, mq=MessageQueue(TOPIC, "broker-a", q))
    lab.wait_until(lab.replicated, 70_000)


def test_topic_route_shows_the_acting_master_read_only(lab, capsys):
    acting_lab_with_messages(lab, per_queue=1)
    kill_master_of_a(lab)
    route = lab.route()
    a = next(bd for bd in route.broker_datas if bd.broker_name == "broker-a")
    assert a.broker_addrs == {0: lab.addr("broker-a-s1"), 2: lab.addr("broker-a-s2")}
    perms = {q.broker_name: q.perm for q in route.queue_datas}
    assert perms == {"broker-a": PermName.PERM_READ, "broker-b": PermName.PERM_READ | PermName.PERM_WRITE}
    # `rmqlab admin topicRoute` prints that answer, rewrite included.
    assert lab.run(admin_cli._topic_route(lab.admin, argparse.Namespace(topic=TOPIC))) == 0
    printed = capsys.readouterr().out
    assert printed == route.encode().decode() + "\n"
    # (TopicRouteData's JSON as fastjson writes it: map keys that are numbers are not quoted.)
    assert f'{{0:"{lab.addr("broker-a-s1")}",2:"{lab.addr("broker-a-s2")}"}}' in printed.replace(" ", "")


def test_producer_sends_only_to_the_writeable_group_while_a_is_read_only(lab):
    acting_lab_with_messages(lab, per_queue=1)
    producer = lab.add_client("producer", lambda: {"producer": DefaultMQProducer("PG2", NS)})["producer"]

    async def send(n):
        return [await producer.send(Message(TOPIC, f"m{i}".encode())) for i in range(n)]

    assert {r.message_queue.broker_name for r in lab.run(send(8))} == {"broker-a", "broker-b"}
    kill_master_of_a(lab)
    lab.sim.run_for(31_000)  # the producer's next route refresh (pollNameServerInterval)
    info = producer.topic_publish_info_table[TOPIC]
    assert {mq.broker_name for mq in info.message_queue_list} == {"broker-b"}
    results = lab.run(send(8))
    assert {r.message_queue.broker_name for r in results} == {"broker-b"}


def test_consumers_pull_from_the_acting_master_commit_there_and_rebalance(lab):
    acting_lab_with_messages(lab, per_queue=5)
    kill_master_of_a(lab)
    recorders = [Recorder("c1"), Recorder("c2")]
    consumers = [lab.add_client(f"c{i}", lambda r=r: {"consumer": push_consumer(
        r, TOPIC, group="CG-acting", consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET)})["consumer"]
        for i, r in enumerate(recorders)]
    lab.wait_until(lambda: len({c[0] for r in recorders for c in r.consumed}) == 10, 60_000)
    held = [{mq for mq, pq in c.rebalance_impl.process_queue_table.items() if mq.topic == TOPIC and not pq.dropped}
            for c in consumers]
    assert all(held) and not held[0] & held[1]  # both members hold queues, none twice
    assert set().union(*held) == {MessageQueue(TOPIC, g, q) for g in ("broker-a", "broker-b") for q in range(2)}
    assert {c[1] for r in recorders for c in r.consumed} == {"broker-a"}
    lab.sim.run_for(11_000)  # persistConsumerOffsetInterval: offsets written to the route's id 0
    offsets = lab.broker("broker-a-s1").consumer_offset_manager
    assert [offsets.query_offset("CG-acting", TOPIC, q) for q in range(2)] == [5, 5]


def test_push_consumer_from_timestamp_asks_the_acting_master():
    """A new group with CONSUME_FROM_TIMESTAMP starts each queue of broker-a at the offset the
    acting master finds for the time. (A queue whose first message is still in memory is answered
    offset 0 by QUERY_CONSUMER_OFFSET, so the timestamp never applies there: the brokers get a
    small memory, as a lab does to see the rule, so that the message at offset 0 counts as on disk.)"""
    lab = ActingLab(total_physical_memory_size=1000)
    try:
        _consume_from_timestamp(lab)
    finally:
        lab.close()


def _consume_from_timestamp(lab: ActingLab) -> None:
    lab.enable_acting_master()
    lab.create_topic()
    mqs = [MessageQueue(TOPIC, "broker-a", q) for q in range(2)]
    for mq in mqs:
        send_batches(lab, batches=3, per_batch=1, mq=mq)
    lab.sim.run_for(3_000)
    for mq in mqs:
        send_batches(lab, batches=3, per_batch=1, mq=mq)
    lab.wait_until(lab.replicated, 70_000)
    units = store_times(lab.broker("broker-a"), TOPIC, 0)
    start_ms = units[3][1] // 1000 * 1000  # a whole second between the two rounds
    assert units[2][1] < start_ms <= units[3][1]
    kill_master_of_a(lab)
    from rmqlab.client.consumer.default_mq_push_consumer import format_consume_timestamp

    recorder = Recorder("ts")
    lab.add_client("ts", lambda: {"consumer": push_consumer(
        recorder, TOPIC, group="CG-ts", consume_from_where=ConsumeFromWhere.CONSUME_FROM_TIMESTAMP,
        consume_timestamp=format_consume_timestamp(start_ms))})
    lab.wait_until(lambda: len(recorder.consumed) >= 6, 60_000)
    lab.sim.run_for(5_000)
    assert sorted((c[2], c[3]) for c in recorder.consumed) == [(q, o) for q in range(2) for o in range(3, 6)]


def test_push_consumer_refuses_a_malformed_consume_timestamp():
    with pytest.raises(MQClientException, match="consumeTimestamp is invalid, the valid format is yyyyMMddHHmmss"):
        push_consumer(Recorder("x"), consume_from_where=ConsumeFromWhere.CONSUME_FROM_TIMESTAMP,
                      consume_timestamp="2024-01-01")


# -- the acting-master deployment -------------------------------------------------------------------------
def test_acting_master_mode_templates():
    import warnings

    from rmqlab.cluster import CONF_DIR, MODES

    mode = MODES["acting-master"]
    assert [(n.name, n.role) for n in mode.server_nodes()] == [("namesrv", "namesrv")] + [
        (f"broker-{g}{m}", "broker") for g in "ab" for m in ("", "-s1", "-s2")]
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no unknown or unimplemented key in the templates
        ns = load_namesrv_config(os.path.join(CONF_DIR, mode.namesrvs["namesrv"]))
        assert ns.namesrvConfig.supportActingMaster and ns.namesrvConfig.notifyMinBrokerIdChanged
        for name in mode.brokers:
            c = mode.broker_config(name)
            bc, role = c.brokerConfig, c.messageStoreConfig.brokerRole.name
            expected_id = 0 if "-s" not in name else int(name[-1])
            assert (bc.brokerName, bc.brokerId) == (name.split("-s")[0], expected_id)
            assert role == ("ASYNC_MASTER" if expected_id == 0 else "SLAVE")
            assert bc.enableSlaveActingMaster and bc.enableRemoteEscape
            assert bc.slaveReadEnable == (expected_id != 0)
            assert bc.namesrvAddr == f"127.0.0.1:{ns.nettyServerConfig.listenPort}"


def test_acting_master_ports_collide_with_no_other_template():
    """The acting-master deployment can run beside any other: none of its ports (listenPort,
    haListenPort or listenPort + 1) is a port of another template. (The classic templates share
    9876 and 109x1 among themselves on purpose: one of them runs at a time.)"""
    from rmqlab.config.properties import read_properties_file

    def ports(path: str) -> set[int]:
        values = {e.key: e.value for e in read_properties_file(path)}
        found = {int(values[k]) for k in ("listenPort", "haListenPort") if k in values}
        if "brokerName" in values and "haListenPort" not in values and "listenPort" in values:
            found.add(int(values["listenPort"]) + 1)
        return found

    acting, others = set(), set()
    for directory, _, files in os.walk(os.path.join(ROOT, "conf")):
        for f in files:
            if f.endswith((".conf", ".properties")):
                path = os.path.join(directory, f)
                (acting if os.path.basename(directory) == "acting-master" else others).update(ports(path))
    assert len(acting) == 13 and not acting & others, sorted(acting & others)
    assert 9876 not in acting  # the classic deployments' name server (no template: the default port)


def _refused_by_the_broker(overrides: dict) -> str | None:
    """The broker's start-up refusal of a setting of the acting-master templates that rmqlab does
    not implement yet (a ConfigError naming it): its message, else None."""
    from rmqlab.cluster import Cluster

    try:
        with Cluster("acting-master", overrides=overrides) as c:
            c.start()
    except ConfigError as e:
        if "not implemented" in str(e):
            return str(e)
        raise
    return None


def test_acting_master_mode_runs_with_the_broker_switch_off():
    from rmqlab.cluster import Cluster

    with Cluster("acting-master", overrides={"*": {"enableSlaveActingMaster": False}}) as c:
        c.start()
        assert c.registered() == 6
        c.create_topic(TOPIC)
        rim = c.sim.components["namesrv"].route_info_manager
        assert rim.namesrv_config.supportActingMaster
        assert {n: len(bd.broker_addrs) for n, bd in rim.broker_addr_table.items()} == {"broker-a": 3, "broker-b": 3}


@pytest.mark.parametrize("overrides", [
    {},  # the templates as shipped
    {"*": {"enableRemoteEscape": False}},  # without the escape to another group, which this scenario does not use
], ids=["templates", "no-remote-escape"])
def test_acting_master_mode_master_killed_consumer_continues_producer_sends_to_b(overrides):
    """The whole deployment: broker-a's master killed, a new consumer group reads broker-a's
    messages from the acting master broker-a-s1 (and commits its offsets there), the producer
    sends to broker-b only."""
    refusal = _refused_by_the_broker(overrides)
    if refusal is not None:
        pytest.skip(f"the broker refuses a setting of the templates: {refusal}")
    from rmqlab.cluster import Cluster

    with Cluster("acting-master", overrides=overrides) as c:
        c.start()
        c.create_topic(TOPIC, queues=2)
        c.add_client("producer", lambda: ClientProcess(producer=DefaultMQProducer("PG", c.namesrv_addr)))
        producer = c.sim.components["producer"]["producer"]

        async def send(n, **kw):
            return [await producer.send(Message(TOPIC, f"m{i}".encode()), **kw) for i in range(n)]

        for q in range(2):
            c.sim.run(send(5, mq=MessageQueue(TOPIC, "broker-a", q)))
        a_slaves = [c.sim.components[n] for n in ("broker-a-s1", "broker-a-s2")]
        c.run_until(lambda: all(s.topic_config_manager.select_topic_config(TOPIC) is not None
                                and s.message_store.get_max_offset_in_queue(TOPIC, q) == 5
                                for s in a_slaves for q in range(2)), 70_000)
        c.nemesis.kill("broker-a")
        c.run_for(31_000)  # the producer's next route refresh
        assert {r.message_queue.broker_name for r in c.sim.run(send(6))} == {"broker-b"}
        recorder = Recorder("late")
        c.add_client("consumer", lambda: ClientProcess(consumer=push_consumer(
            recorder, TOPIC, group="CG-late", consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET)))
        c.run_until(lambda: len({x[0] for x in recorder.consumed if x[1] == "broker-a"}) == 10, 60_000)
        c.run_for(11_000)  # persistConsumerOffsetInterval
        offsets = c.sim.components["broker-a-s1"].consumer_offset_manager
        assert [offsets.query_offset("CG-late", TOPIC, q) for q in range(2)] == [5, 5]


# -- real processes ---------------------------------------------------------------------------------------
def admin_command(*argv: str):
    import subprocess
    import sys

    return subprocess.run([sys.executable, "-m", "rmqlab.cli", "admin", *argv], capture_output=True, text=True,
                          timeout=60, cwd=ROOT)


@pytest.mark.real
def test_rmqlab_admin_broker_config_and_topic_route_against_real_processes():
    """`rmqlab admin getBrokerConfig / updateBrokerConfig / topicRoute` as OS processes against an
    `rmqlab namesrv` and an `rmqlab broker` (single-master): brokerPermission=4 takes the write bit
    off the route at once; an unknown key exits 1 naming it."""
    from rmqlab.cluster import Cluster
    from rmqlab.config.properties import read_properties_file

    with Cluster("single-master", runtime="real", relay=False) as c:
        c.start()
        c.create_topic(TOPIC)
        conf = {e.key: e.value for e in read_properties_file(os.path.join(c.root_dir, "conf", "broker-a.properties"))}
        addr, ns = f"127.0.0.1:{conf['listenPort']}", c.namesrv_addr
        got = admin_command("getBrokerConfig", "-n", ns, "-b", addr)
        assert got.returncode == 0, got.stderr
        assert got.stdout.startswith(f"============{addr}============\n")
        assert f"{'brokerPermission':<50}=  6\n" in got.stdout
        updated = admin_command("updateBrokerConfig", "-n", ns, "-b", addr, "-k", "brokerPermission", "-v", "4")
        assert updated.returncode == 0 and updated.stdout == f"update broker config success, {addr}\n", updated.stderr
        assert f"{'brokerPermission':<50}=  4\n" in admin_command("getBrokerConfig", "-n", ns, "-b", addr).stdout
        route = admin_command("topicRoute", "-n", ns, "-t", TOPIC)
        assert route.returncode == 0 and '"perm":4' in route.stdout.replace(" ", ""), route.stdout
        unknown = admin_command("updateBrokerConfig", "-n", ns, "-b", addr, "-k", "brokerPermision", "-v", "6")
        assert unknown.returncode == 1 and "brokerPermision" in unknown.stderr and "brokerPermission" in unknown.stderr


def test_pull_consumer_searches_offsets_on_the_acting_master(lab):
    """DefaultMQPullConsumer's searchOffset / earliestMsgStoreTime / maxOffset / minOffset go to
    the route's brokerId 0: with broker-a's master dead, the acting master broker-a-s1 answers."""
    from rmqlab.client.consumer.default_mq_pull_consumer import DefaultMQPullConsumer

    acting_lab_with_messages(lab, per_queue=4)
    mq = MessageQueue(TOPIC, "broker-a", 0)
    units = store_times(lab.broker("broker-a"), TOPIC, 0)
    kill_master_of_a(lab)
    consumer = lab.add_client("puller", lambda: {"consumer": DefaultMQPullConsumer("CG-pull", NS)})["consumer"]
    assert lab.run(consumer.search_offset(mq, units[2][1])) == expected_offset(units, units[2][1], BoundaryType.LOWER)
    assert lab.run(consumer.earliest_msg_store_time(mq)) == units[0][1]
    assert (lab.run(consumer.min_offset(mq)), lab.run(consumer.max_offset(mq))) == (0, 4)
