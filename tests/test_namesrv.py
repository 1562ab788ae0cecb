"""The name server: wire formats, route tables, expiry, several name servers, bad input.

Most tests run on the simulator: a NamesrvController on node "namesrv" and fake brokers, each a
RemotingClient on a node of its own sending exactly what a RocketMQ 5 broker sends
(BrokerOuterAPI.registerBrokerAll). One test runs on the real runtime (127.0.0.1, port 0). The
RouteInfoManager, being pure, is also tested on its own.
"""

from __future__ import annotations

import asyncio
import json
import zlib

import pytest

from rmqlab.common.topic_config import TopicConfig
from rmqlab.common.data_version import DataVersion
from rmqlab.common.java_compat import crc32
from rmqlab.config.addresses import split_addr_list
from rmqlab.config.loader import load_namesrv_config
from rmqlab.config.namesrv import NamesrvConfig
from rmqlab.config.netty import NettyServerConfig
from rmqlab.namesrv import NamesrvController, RouteInfoManager
from rmqlab.remoting import RemotingClient, RemotingCommand, RequestCode, ResponseCode
from rmqlab.remoting.exceptions import RemotingConnectError
from rmqlab.remoting.protocol import MQVersion
from rmqlab.remoting.protocol.body import (ClusterInfo, GetBrokerMemberGroupResponseBody, RegisterBrokerBody,
                                           TopicConfigAndMappingSerializeWrapper, TopicConfigSerializeWrapper)
from rmqlab.remoting.protocol.body.register_broker_body import topic_config_decode, topic_config_encode
from rmqlab.remoting.protocol.header.namesrv import (QueryDataVersionResponseHeader, RegisterBrokerRequestHeader,
                                                    RegisterBrokerResponseHeader, UnRegisterBrokerRequestHeader)
from rmqlab.remoting.protocol.remoting_serializable import long_hash_map_order, to_json
from rmqlab.remoting.protocol.route import BrokerData, QueueData, TopicRouteData
from rmqlab.runtime.component import Component
from rmqlab.runtime.real import RealNode
from rmqlab.runtime.sim import Simulation
from rmqlab.trace import trace_hash
from tests.namesrv_helpers import CLUSTER, NS, TIMEOUT_MS, default_topics, FakeBroker, topic

FAQ = "\nSee https://rocketmq.apache.org/docs/bestPractice/06FAQ for further details."


class Idle(Component):
    async def start(self, node):
        self.node = node


def world(seed: int = 1, namesrvs: dict[str, int] | None = None, brokers=("broker-a", "broker-a-s", "broker-b"),
          config: NamesrvConfig | None = None) -> Simulation:
    sim = Simulation(seed=seed)
    for name, port in (namesrvs or {"namesrv": 9876}).items():
        sim.add_node(name, lambda port=port: NamesrvController(config, NettyServerConfig(listenPort=port)))
    for name in (*brokers, "client"):
        sim.add_node(name, Idle)
    sim.start_all()
    return sim


def client_of(sim: Simulation) -> RemotingClient:
    return RemotingClient(sim.nodes["client"])


def ask(sim: Simulation, client: RemotingClient, code: int, ext: dict | None = None, version: int = 0,
        namesrv: str = NS, body: bytes | None = None) -> RemotingCommand:
    request = RemotingCommand.create_request_command(code, ext, body)
    request.version = version
    return sim.run(client.invoke_sync(namesrv, request, TIMEOUT_MS))


def route(sim, client, name: str, version: int = MQVersion.V3_1_8, namesrv: str = NS) -> RemotingCommand:
    return ask(sim, client, RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": name}, version, namesrv)


def namesrv_logs(sim: Simulation, node: str = "namesrv") -> list[str]:
    return [e.fields["message"] for e in sim.tracer.events if e.kind == "log" and e.node == node]


# ---------------------------------------------------------------------------------------------
# Golden bytes


# The TopicRouteData body the C++ client (PyPI ``rocketmq`` 0.4.4) accepts.
REAL_CLIENTS_EXAMPLE = """{"orderTopicConf": null,
 "queueDatas": [{"brokerName": "broker-a", "readQueueNums": 2, "writeQueueNums": 2, "perm": 6, "topicSysFlag": 0}],
 "brokerDatas": [{"cluster": "DefaultCluster", "brokerName": "broker-a", "brokerAddrs": {"0": "127.0.0.1:10911"}}],
 "filterServerTable": {}}"""


def test_golden_topic_route_data_bytes_for_the_real_clients_example():
    data = TopicRouteData([QueueData("broker-a", 2, 2, 6, 0)],
                          [BrokerData("DefaultCluster", "broker-a", {0: "127.0.0.1:10911"})])
    # What a Java name server sends a client older than V4_9_4 (the C++ client, version 63):
    # fastjson's default, properties sorted, null orderTopicConf left out, the broker id bare.
    assert data.encode() == (
        b'{"brokerDatas":[{"brokerAddrs":{0:"127.0.0.1:10911"},"brokerName":"broker-a","cluster":"DefaultCluster",'
        b'"enableActingMaster":false}],"filterServerTable":{},"queueDatas":[{"brokerName":"broker-a","perm":6,'
        b'"readQueueNums":2,"topicSysFlag":0,"writeQueueNums":2}]}')
    # Newer clients get standard JSON: the same with the key quoted.
    standard = data.encode(standard_json=True)
    assert standard == data.encode().replace(b"{0:", b'{"0":')
    # Same content as the example the C++ client was shown to accept (Java omits the null
    # orderTopicConf and adds enableActingMaster; a missing member reads as null in jsoncpp).
    example = json.loads(REAL_CLIENTS_EXAMPLE)
    ours = json.loads(standard)
    assert ours["brokerDatas"][0].pop("enableActingMaster") is False
    example.pop("orderTopicConf")
    assert ours == example
    # Both dialects read back.
    assert TopicRouteData.decode(data.encode()) == data == TopicRouteData.decode(standard)


def test_standard_json_sorts_maps_and_escapes_like_browser_compatible():
    data = TopicRouteData([QueueData("b", 1, 1, 6)], [BrokerData("c/é", "b", {2: "h:2", 0: "h:0", 10: "h:10"})],
                          {"h:2": ["f1"], "h:0": ["f0"]})
    assert data.encode() == (
        b'{"brokerDatas":[{"brokerAddrs":{2:"h:2",0:"h:0",10:"h:10"},"brokerName":"b","cluster":"c/\xc3\xa9",'
        b'"enableActingMaster":false}],"filterServerTable":{"h:2":["f1"],"h:0":["f0"]},"queueDatas":[{"brokerName":'
        b'"b","perm":6,"readQueueNums":1,"topicSysFlag":0,"writeQueueNums":1}]}')
    # Standard JSON: maps sorted (ids numerically), keys quoted, "/" and non-ASCII escaped.
    assert data.encode(standard_json=True) == (
        b'{"brokerDatas":[{"brokerAddrs":{"0":"h:0","2":"h:2","10":"h:10"},"brokerName":"b","cluster":"c\\/\\u00E9",'
        b'"enableActingMaster":false}],"filterServerTable":{"h:0":["f0"],"h:2":["f1"]},"queueDatas":[{"brokerName":'
        b'"b","perm":6,"readQueueNums":1,"topicSysFlag":0,"writeQueueNums":1}]}')
    assert to_json({"big": 2**60, "ok": 2**53 - 1}, standard=True) == '{"big":"1152921504606846976","ok":9007199254740991}'


def test_java_hash_map_order_of_broker_ids_and_names():
    # Long.hashCode folds the high half in: 2^32 lands in bucket 1, after 16 (bucket 0) and 0.
    assert long_hash_map_order([1, 0, 16, 2**32, 3], 16) == [0, 16, 1, 2**32, 3]
    # The name server's tables list "broker-b" before "broker-a" (String.hashCode buckets 8, 11).
    sim = world()
    for node, name, port in (("broker-a", "broker-a", 10911), ("broker-b", "broker-b", 10921)):
        assert FakeBroker(sim, node, name, 0, f"127.0.0.1:{port}").register().code == ResponseCode.SUCCESS
    body = ask(sim, client_of(sim), RequestCode.GET_BROKER_CLUSTER_INFO).body
    assert body == (
        b'{"brokerAddrTable":{"broker-b":{"brokerAddrs":{0:"127.0.0.1:10921"},"brokerName":"broker-b",'
        b'"cluster":"DefaultCluster","enableActingMaster":false},"broker-a":{"brokerAddrs":{0:"127.0.0.1:10911"},'
        b'"brokerName":"broker-a","cluster":"DefaultCluster","enableActingMaster":false}},'
        b'"clusterAddrTable":{"DefaultCluster":["broker-b","broker-a"]}}')
    sim.close()


def test_register_broker_body_json_and_compressed_forms():
    table = {"TopicTest": topic("TopicTest", 4, 6, sys_flag=1), "Attr": topic("Attr")}
    table["Attr"].attributes = {"+message.type": "FIFO"}
    wrapper = TopicConfigAndMappingSerializeWrapper(table, DataVersion(3, 1_700_000_000_123, 7))
    body = RegisterBrokerBody(wrapper, ["fs:1"])
    assert body.encode() == (
        b'{"filterServerList":["fs:1"],"topicConfigSerializeWrapper":{"dataVersion":{"counter":7,"stateVersion":3,'
        b'"timestamp":1700000000123},"mappingDataVersion":{"counter":0,"stateVersion":0,"timestamp":0},'
        b'"topicConfigTable":{"TopicTest":{"attributes":{},"order":false,"perm":6,"readQueueNums":4,'
        b'"topicFilterType":"SINGLE_TAG","topicName":"TopicTest","topicSysFlag":1,"writeQueueNums":4},'
        b'"Attr":{"attributes":{"+message.type":"FIFO"},"order":false,"perm":6,"readQueueNums":4,'
        b'"topicFilterType":"SINGLE_TAG","topicName":"Attr","topicSysFlag":0,"writeQueueNums":4}},'
        b'"topicQueueMappingDetailMap":{},"topicQueueMappingInfoMap":{}}}')
    assert RegisterBrokerBody.decode(body.encode(), False, MQVersion.CURRENT_VERSION) == body
    # Compressed: length-prefixed parts in a zlib stream; topics travel as "name r w perm FILTER {attrs}".
    assert topic_config_encode(table["Attr"]) == 'Attr 4 4 6 SINGLE_TAG {"+message.type":"FIFO"}'
    packed = body.encode(compress=True)
    raw = zlib.decompress(packed)
    assert raw[:4] == len(b'{"counter":7,"stateVersion":3,"timestamp":1700000000123}').to_bytes(4, "big")
    decoded = RegisterBrokerBody.decode(packed, True, MQVersion.CURRENT_VERSION)
    assert decoded.filter_server_list == ["fs:1"]
    assert decoded.topic_config_serialize_wrapper.data_version == wrapper.data_version
    got = decoded.topic_config_serialize_wrapper.topic_config_table
    assert got["Attr"] == table["Attr"]
    # The one-line format has no topicSysFlag: it decodes as 0 (RocketMQ's own loss).
    assert got["TopicTest"].topic_sys_flag == 0 and got["TopicTest"].perm == 6
    # A pre-5.0 broker's compressed body has no mapping section; it must not be read.
    assert RegisterBrokerBody.decode(zlib.compress(raw[:-4]), True, MQVersion.V4_9_4).filter_server_list == ["fs:1"]
    with pytest.raises(ValueError, match="end of compressed data"):
        RegisterBrokerBody.decode(zlib.compress(raw[:-4]), True, MQVersion.CURRENT_VERSION)
    with pytest.raises(ValueError, match="compressedRegister=true"):
        RegisterBrokerBody.decode(packed, False, MQVersion.CURRENT_VERSION)
    with pytest.raises(ValueError, match="not a zlib stream"):
        RegisterBrokerBody.decode(b"{}", True, MQVersion.CURRENT_VERSION)
    with pytest.raises(ValueError, match="5 needed"):
        topic_config_decode("T 1 1 6")


def test_headers_use_java_field_names():
    header = RegisterBrokerRequestHeader("broker-a", "127.0.0.1:10911", CLUSTER, "127.0.0.1:10912", 0,
                                         None, False, False, 123)
    assert header.to_ext_fields() == {"brokerName": "broker-a", "brokerAddr": "127.0.0.1:10911",
                                      "clusterName": CLUSTER, "haServerAddr": "127.0.0.1:10912", "brokerId": 0,
                                      "enableActingMaster": False, "compressed": False, "bodyCrc32": 123}
    request = RemotingCommand.create_request_command(RequestCode.REGISTER_BROKER, header.to_ext_fields())
    decoded_frame = RemotingCommand.decode(request.encode()[4:])
    assert decoded_frame.ext_fields["brokerId"] == "0" and decoded_frame.ext_fields["compressed"] == "false"
    assert RegisterBrokerRequestHeader.decode(decoded_frame) == header
    # The C++ client's mixed JSON types read too.
    mixed = RemotingCommand.create_request_command(RequestCode.UNREGISTER_BROKER, {
        "brokerName": "b", "brokerAddr": "a:1", "clusterName": "c", "brokerId": 2})
    assert UnRegisterBrokerRequestHeader.decode(mixed).broker_id == 2


# ---------------------------------------------------------------------------------------------
# Routes on the simulator


def test_master_and_slave_register_and_the_route_is_exact():
    sim = world()
    master = FakeBroker(sim, "broker-a", "broker-a", 0, "127.0.0.1:10911", "127.0.0.1:10912")
    slave = FakeBroker(sim, "broker-a-s", "broker-a", 1, "127.0.0.1:10921", "127.0.0.1:10922")
    response = master.register()
    assert response.code == ResponseCode.SUCCESS and response.ext_fields == {}  # no master to name: empty
    response = slave.register([topic("TopicTest"), topic("SlaveOnly")])
    assert response.code == ResponseCode.SUCCESS
    assert response.ext_fields == {"masterAddr": "127.0.0.1:10911", "haServerAddr": "127.0.0.1:10912"}
    result = RegisterBrokerResponseHeader.decode(response)
    assert (result.master_addr, result.ha_server_addr) == ("127.0.0.1:10911", "127.0.0.1:10912")

    client = client_of(sim)
    response = route(sim, client, "TopicTest")  # as the C++ client asks (version 63)
    assert response.code == ResponseCode.SUCCESS and response.remark is None
    assert response.body == (
        b'{"brokerDatas":[{"brokerAddrs":{0:"127.0.0.1:10911",1:"127.0.0.1:10921"},"brokerName":"broker-a",'
        b'"cluster":"DefaultCluster","enableActingMaster":false}],"filterServerTable":{},"queueDatas":[{"brokerName":'
        b'"broker-a","perm":6,"readQueueNums":4,"topicSysFlag":0,"writeQueueNums":4}]}')
    standard = route(sim, client, "TopicTest", version=MQVersion.CURRENT_VERSION).body
    assert standard == response.body.replace(b"{0:", b'{"0":').replace(b",1:", b',"1":')
    # acceptStandardJsonOnly asks for it whatever the version.
    assert ask(sim, client, RequestCode.GET_ROUTEINFO_BY_TOPIC,
               {"topic": "TopicTest", "acceptStandardJsonOnly": "true"}, 63).body == standard
    # Only the master writes topics while it is there: the slave's own topic has no route.
    assert route(sim, client, "SlaveOnly").code == ResponseCode.TOPIC_NOT_EXIST
    sim.close()


def test_unknown_topic_is_topic_not_exist_and_tbw102_routes_auto_creation():
    sim = world()
    client = client_of(sim)
    response = route(sim, client, "TopicTest")
    assert response.code == ResponseCode.TOPIC_NOT_EXIST == 17
    assert response.remark == "No topic route info in name server for the topic: TopicTest" + FAQ
    assert response.body is None and response.ext_fields is None
    assert route(sim, client, "TBW102").code == ResponseCode.TOPIC_NOT_EXIST

    # A broker with autoCreateTopicEnable registers TBW102 (perm RWX): the producer's fallback route.
    FakeBroker(sim, "broker-a", "broker-a", 0, "127.0.0.1:10911").register(
        [topic("TBW102", 8, 7), topic("SELF_TEST_TOPIC", 1)])
    assert route(sim, client, "TopicTest").code == ResponseCode.TOPIC_NOT_EXIST
    tbw = TopicRouteData.decode(route(sim, client, "TBW102").body)
    assert tbw.queue_datas == [QueueData("broker-a", 8, 8, 7, 0)]
    assert tbw.broker_datas == [BrokerData(CLUSTER, "broker-a", {0: "127.0.0.1:10911"})]
    # The broker created TopicTest on the first send; its next registration publishes it.
    FakeBroker(sim, "broker-a", "broker-a", 0, "127.0.0.1:10911").register(
        [topic("TBW102", 8, 7), topic("SELF_TEST_TOPIC", 1), topic("TopicTest", 4, 6)], counter=2)
    assert TopicRouteData.decode(route(sim, client, "TopicTest").body).queue_datas == [QueueData("broker-a", 4, 4, 6)]
    sim.close()


def test_slave_learns_the_master_only_while_the_master_is_registered():
    sim = world()
    master = FakeBroker(sim, "broker-a", "broker-a", 0, "127.0.0.1:10911", "127.0.0.1:10912")
    slave = FakeBroker(sim, "broker-a-s", "broker-a", 1, "127.0.0.1:10921")
    assert slave.register().ext_fields == {}  # no master yet
    master.register()
    assert slave.register().ext_fields == {"masterAddr": "127.0.0.1:10911", "haServerAddr": "127.0.0.1:10912"}
    # The master shuts down cleanly: UNREGISTER_BROKER; the slave stays, the route keeps the group.
    request = RemotingCommand.create_request_command(RequestCode.UNREGISTER_BROKER, UnRegisterBrokerRequestHeader(
        "broker-a", "127.0.0.1:10911", CLUSTER, 0).to_ext_fields())
    response = master.send(request)
    assert response.code == ResponseCode.SUCCESS and response.ext_fields is None
    assert slave.register().ext_fields == {}
    data = TopicRouteData.decode(route(sim, client_of(sim), "TopicTest").body)
    assert data.broker_datas[0].broker_addrs == {1: "127.0.0.1:10921"}
    assert any("unregisterBroker, remove from brokerLiveTable OK" in m and "10911" in m for m in namesrv_logs(sim))
    sim.close()


def test_two_groups_in_a_cluster_and_cluster_info():
    sim = world()
    FakeBroker(sim, "broker-a", "broker-a", 0, "127.0.0.1:10911").register()
    FakeBroker(sim, "broker-a-s", "broker-a", 1, "127.0.0.1:10921").register()
    FakeBroker(sim, "broker-b", "broker-b", 0, "127.0.0.1:10931").register([topic("TopicTest", 2), topic("OnlyB")])
    client = client_of(sim)
    response = ask(sim, client, RequestCode.GET_BROKER_CLUSTER_INFO)
    assert response.code == ResponseCode.SUCCESS and response.ext_fields is None
    info = ClusterInfo.decode(response.body)
    assert info.cluster_addr_table == {CLUSTER: ["broker-b", "broker-a"]}
    assert info.broker_addr_table["broker-a"].broker_addrs == {0: "127.0.0.1:10911", 1: "127.0.0.1:10921"}
    assert info.retrieve_all_addr_by_cluster(CLUSTER) == ["127.0.0.1:10931", "127.0.0.1:10911", "127.0.0.1:10921"]
    # A topic on both groups routes to both (HashMap order of the group names: b, a).
    data = TopicRouteData.decode(route(sim, client, "TopicTest").body)
    assert [q.broker_name for q in data.queue_datas] == ["broker-b", "broker-a"]
    assert [(q.read_queue_nums, q.write_queue_nums) for q in data.queue_datas] == [(2, 2), (4, 4)]
    assert [b.broker_name for b in data.broker_datas] == ["broker-b", "broker-a"]
    # GET_BROKER_MEMBER_GROUP lists every member.
    response = ask(sim, client, RequestCode.GET_BROKER_MEMBER_GROUP, {"clusterName": CLUSTER, "brokerName": "broker-a"})
    assert response.body == (b'{"brokerMemberGroup":{"brokerAddrs":{0:"127.0.0.1:10911",1:"127.0.0.1:10921"},'
                             b'"brokerName":"broker-a","cluster":"DefaultCluster"}}')
    group = GetBrokerMemberGroupResponseBody.decode(response.body).broker_member_group
    assert group.minimum_broker_id() == 0
    assert ask(sim, client, RequestCode.GET_BROKER_MEMBER_GROUP,
               {"clusterName": CLUSTER, "brokerName": "nope"}).body == (
        b'{"brokerMemberGroup":{"brokerAddrs":{},"brokerName":"nope","cluster":"DefaultCluster"}}')
    sim.close()


def test_write_permission_wipe_and_add():
    sim = world()
    FakeBroker(sim, "broker-a", "broker-a", 0, "127.0.0.1:10911").register()
    client = client_of(sim)
    response = ask(sim, client, RequestCode.WIPE_WRITE_PERM_OF_BROKER, {"brokerName": "broker-a"})
    assert response.code == ResponseCode.SUCCESS and response.ext_fields == {"wipeTopicCount": "2"}
    perms = {q.perm for name in ("TopicTest", "TBW102")
             for q in TopicRouteData.decode(route(sim, client, name).body).queue_datas}
    assert perms == {4, 5}  # RW- -> R--, RWX -> R-X
    response = ask(sim, client, RequestCode.ADD_WRITE_PERM_OF_BROKER, {"brokerName": "broker-a"})
    assert response.ext_fields == {"addTopicCount": "2"}
    assert TopicRouteData.decode(route(sim, client, "TBW102").body).queue_datas[0].perm == 6
    assert any(m.startswith("wipe write perm of broker[broker-a]") for m in namesrv_logs(sim))
    sim.close()


# ---------------------------------------------------------------------------------------------
# Liveness: expiry, heartbeats, closed channels


def test_broker_expires_after_120_s_without_heartbeat_in_virtual_time():
    sim = world()
    # A silent connection is also closed as idle after serverChannelMaxIdleTimeSeconds (120 s, the
    # same instant), which unregisters the broker as well; this test is about the expiry scan.
    sim.components["namesrv"].remoting_server.channel_max_idle_seconds = 0
    broker = FakeBroker(sim, "broker-a", "broker-a", 0, "127.0.0.1:10911")
    broker.register()
    registered_at = sim.now_ms()
    client = client_of(sim)
    sim.run_for(119_000)
    assert route(sim, client, "TopicTest").code == ResponseCode.SUCCESS
    # Scans run every 5 s; the first one after lastUpdate + 120 s removes it and closes the channel.
    sim.run_until(lambda: any("The broker channel expired" in m for m in namesrv_logs(sim)), timeout_ms=10_000)
    expired = [e for e in sim.tracer.events if e.kind == "log" and "The broker channel expired" in e.fields["message"]]
    assert 120_000 < expired[0].time_ms - registered_at <= 125_000
    assert expired[0].fields["level"] == "WARN"
    assert expired[0].fields["message"] == ("The broker channel expired, BrokerIdentityInfo [clusterName=DefaultCluster, "
                                            "brokerAddr=127.0.0.1:10911] 120000ms")
    assert route(sim, client, "TopicTest").code == ResponseCode.TOPIC_NOT_EXIST
    assert ClusterInfo.decode(ask(sim, client, RequestCode.GET_BROKER_CLUSTER_INFO).body) == ClusterInfo()
    closes = [e for e in sim.tracer.events if e.kind == "net.close" and e.node == "namesrv"]
    assert [e.fields["reason"] for e in closes] == ["broker channel expired"]
    sim.close()


def test_heartbeats_and_query_data_version_keep_a_broker_alive():
    sim = world()
    broker = FakeBroker(sim, "broker-a", "broker-a", 0, "127.0.0.1:10911")
    other = FakeBroker(sim, "broker-b", "broker-b", 0, "127.0.0.1:10921")
    broker.register(counter=5)
    other.register()
    stored = DataVersion(0, 1_700_000_000_000, 5)
    for i in range(10):  # 300 s: BROKER_HEARTBEAT and QUERY_DATA_VERSION alternately, every 30 s
        sim.run_for(30_000)
        if i % 2:
            assert broker.heartbeat().code == ResponseCode.SUCCESS
        else:
            request = RemotingCommand.create_request_command(RequestCode.QUERY_DATA_VERSION, {
                "brokerName": "broker-a", "brokerAddr": "127.0.0.1:10911", "clusterName": CLUSTER, "brokerId": 0},
                stored.to_json().encode())
            response = broker.send(request)
            assert response.code == ResponseCode.SUCCESS
            assert QueryDataVersionResponseHeader.decode(response).changed is False
            assert DataVersion.from_json(response.body.decode()) == stored
    client = client_of(sim)
    data = TopicRouteData.decode(route(sim, client, "TopicTest").body)
    assert [b.broker_name for b in data.broker_datas] == ["broker-a"]  # broker-b expired long ago
    # A newer version than the stored one: changed.
    request = RemotingCommand.create_request_command(RequestCode.QUERY_DATA_VERSION, {
        "brokerName": "broker-a", "brokerAddr": "127.0.0.1:10911", "clusterName": CLUSTER, "brokerId": "0"},
        DataVersion(0, 1_700_000_000_000, 6).to_json().encode())
    assert broker.send(request).ext_fields == {"changed": "true"}
    # An unknown broker: changed, no stored version, no live entry created.
    request.ext_fields["brokerAddr"] = "127.0.0.1:1"
    response = broker.send(request)
    assert response.ext_fields == {"changed": "true"} and response.body is None
    sim.close()


def test_heartbeat_timeout_from_the_registration():
    sim = world()
    broker = FakeBroker(sim, "broker-a", "broker-a", 0, "127.0.0.1:10911")
    broker.register(heartbeat_timeout_millis=10_000)
    sim.run_for(16_000)
    assert route(sim, client_of(sim), "TopicTest").code == ResponseCode.TOPIC_NOT_EXIST
    assert "The broker channel expired, BrokerIdentityInfo [clusterName=DefaultCluster, brokerAddr=127.0.0.1:10911] " \
           "10000ms" in namesrv_logs(sim)
    sim.close()


def test_killed_broker_is_removed_when_its_channel_closes():
    sim = world()
    FakeBroker(sim, "broker-a", "broker-a", 0, "127.0.0.1:10911").register()
    FakeBroker(sim, "broker-a-s", "broker-a", 1, "127.0.0.1:10921").register()
    client = client_of(sim)
    sim.nemesis.kill("broker-a")
    sim.run_for(50)  # the FIN travels; no expiry involved
    data = TopicRouteData.decode(route(sim, client, "TopicTest").body)
    assert data.broker_datas[0].broker_addrs == {1: "127.0.0.1:10921"}
    logs = namesrv_logs(sim)
    assert ("unregisterBroker, remove from brokerLiveTable OK, BrokerIdentityInfo [clusterName=DefaultCluster, "
            "brokerAddr=127.0.0.1:10911]") in logs
    sim.nemesis.kill("broker-a-s")
    sim.run_for(50)
    assert route(sim, client, "TopicTest").code == ResponseCode.TOPIC_NOT_EXIST
    assert "unregisterBroker, remove name from brokerAddrTable OK, broker-a" in namesrv_logs(sim)
    assert "unregisterBroker, remove cluster from clusterAddrTable DefaultCluster" in namesrv_logs(sim)
    assert ClusterInfo.decode(ask(sim, client, RequestCode.GET_BROKER_CLUSTER_INFO).body) == ClusterInfo()
    sim.close()


def test_two_name_servers_side_by_side():
    namesrv_addr = "127.0.0.1:9876;127.0.0.1:9877"  # -n "a;b"
    sim = world(namesrvs={"namesrv-1": 9876, "namesrv-2": 9877})
    broker = FakeBroker(sim, "broker-a", "broker-a", 0, "127.0.0.1:10911")
    for addr in split_addr_list(namesrv_addr):  # a broker registers with every name server
        assert broker.register(namesrv=addr).code == ResponseCode.SUCCESS
    client = client_of(sim)
    bodies = [route(sim, client, "TopicTest", namesrv=addr).body for addr in split_addr_list(namesrv_addr)]
    assert bodies[0] == bodies[1] and bodies[0] is not None
    logs_1, logs_2 = namesrv_logs(sim, "namesrv-1"), namesrv_logs(sim, "namesrv-2")
    assert logs_1[0] == "The Name Server boot success. serializeType=JSON, address 127.0.0.1:9876"
    assert logs_2[0] == "The Name Server boot success. serializeType=JSON, address 127.0.0.1:9877"
    assert logs_1[1:] == logs_2[1:] == ["new broker registered, BrokerIdentityInfo [clusterName=DefaultCluster, "
                                        "brokerAddr=127.0.0.1:10911] HAService: 127.0.0.1:10912"]

    sim.nemesis.kill("namesrv-1")
    with pytest.raises(RemotingConnectError):
        route(sim, client, "TopicTest", namesrv="127.0.0.1:9876")
    assert route(sim, client, "TopicTest", namesrv="127.0.0.1:9877").body == bodies[1]
    # A restarted name server knows nothing until the broker's next periodic registration.
    sim.nemesis.restart("namesrv-1")
    sim.run_for(10)
    assert route(sim, client, "TopicTest", namesrv="127.0.0.1:9876").code == ResponseCode.TOPIC_NOT_EXIST
    broker.register(namesrv="127.0.0.1:9876")
    assert route(sim, client, "TopicTest", namesrv="127.0.0.1:9876").body == bodies[0]
    sim.close()


# ---------------------------------------------------------------------------------------------
# The stateVersion fence (RouteInfoManager.registerBroker) and role switches


def test_state_version_fence_keeps_a_stale_master_out():
    sim = world(brokers=("old-master", "new-master"))
    new = FakeBroker(sim, "new-master", "broker-a", 0, "127.0.0.1:10921")
    old = FakeBroker(sim, "old-master", "broker-a", 0, "127.0.0.1:10911")
    client = client_of(sim)
    # The controller made 10921 master in epoch 5; it registers as id 0 with stateVersion 5.
    assert new.register(state_version=5).code == ResponseCode.SUCCESS
    # The old master, still on epoch 3, registers id 0 too: ignored (SUCCESS, but nothing changes).
    response = old.register(state_version=3)
    assert response.code == ResponseCode.SUCCESS and response.ext_fields == {}
    data = TopicRouteData.decode(route(sim, client, "TopicTest").body)
    assert data.broker_datas[0].broker_addrs == {0: "127.0.0.1:10921"}
    assert ("Registering Broker conflicts with the existed one, just ignore.: Cluster:DefaultCluster, "
            "BrokerName:broker-a, BrokerId:0, Old BrokerAddr:127.0.0.1:10921, Old Version:5, "
            "New BrokerAddr:127.0.0.1:10911, New Version:3.") in namesrv_logs(sim)
    # Equal or higher epochs are accepted: 10911 becomes master in epoch 6.
    assert old.register(state_version=6).code == ResponseCode.SUCCESS
    data = TopicRouteData.decode(route(sim, client, "TopicTest").body)
    assert data.broker_datas[0].broker_addrs == {0: "127.0.0.1:10911"}
    # The replaced master comes back as slave id 2 and learns the new master.
    new.broker_id = 2
    response = new.register(state_version=6)
    assert response.ext_fields == {"masterAddr": "127.0.0.1:10911", "haServerAddr": "127.0.0.1:10912"}
    data = TopicRouteData.decode(route(sim, client, "TopicTest").body)
    assert data.broker_datas[0].broker_addrs == {0: "127.0.0.1:10911", 2: "127.0.0.1:10921"}
    sim.close()


# ---------------------------------------------------------------------------------------------
# Bad input


def test_malformed_requests_get_rocketmq_errors_and_the_server_keeps_serving():
    sim = world()
    broker = FakeBroker(sim, "broker-a", "broker-a", 0, "127.0.0.1:10911")
    client = client_of(sim)

    def expect(request: RemotingCommand, code: int, remark: str) -> None:
        response = broker.send(request)
        assert (response.code, response.remark) == (code, remark)

    request = broker.register_request()
    del request.ext_fields["brokerId"]
    expect(request, ResponseCode.SYSTEM_ERROR, "the custom field <brokerId> is null")
    request = broker.register_request()
    request.ext_fields["brokerId"] = "zero"
    expect(request, ResponseCode.SYSTEM_ERROR,
           "the custom field <brokerId> = 'zero' is not a 64-bit integer (request code 103)")
    expect(RemotingCommand.create_request_command(RequestCode.GET_ROUTEINFO_BY_TOPIC), ResponseCode.SYSTEM_ERROR,
           "the custom field <topic> is null")
    expect(RemotingCommand.create_request_command(RequestCode.BROKER_HEARTBEAT, {"clusterName": CLUSTER}),
           ResponseCode.SYSTEM_ERROR, "the custom field <brokerAddr> is null")
    # A body that is not what the header says.
    request = broker.register_request()
    request.body = b"not json"
    request.ext_fields["bodyCrc32"] = crc32(request.body)
    response = broker.send(request)
    assert response.code == ResponseCode.SYSTEM_ERROR
    assert response.remark.startswith("Failed to decode RegisterBrokerBody: RegisterBrokerBody: not valid JSON")
    request = broker.register_request(compressed=True)
    request.ext_fields["compressed"] = "false"  # what a Java broker with compressedRegister=true sends
    response = broker.send(request)
    assert response.code == ResponseCode.SYSTEM_ERROR and "compressedRegister=true" in response.remark
    request = broker.register_request()
    request.ext_fields["bodyCrc32"] = 12345
    expect(request, ResponseCode.SYSTEM_ERROR, "crc32 not match")
    request = RemotingCommand.create_request_command(RequestCode.QUERY_DATA_VERSION, {
        "brokerName": "broker-a", "brokerAddr": "127.0.0.1:10911", "clusterName": CLUSTER, "brokerId": 0}, b"[1]")
    response = broker.send(request)
    assert response.code == ResponseCode.SYSTEM_ERROR and response.remark.startswith("Failed to decode DataVersion")
    expect(RemotingCommand.create_request_command(999), ResponseCode.REQUEST_CODE_NOT_SUPPORTED,
           " request type 999 not supported")
    expect(RemotingCommand.create_request_command(RequestCode.PUT_KV_CONFIG), ResponseCode.REQUEST_CODE_NOT_SUPPORTED,
           " request type 100 not supported")
    # A single topic before the first full registration: refused, as RocketMQ does.
    expect(broker.register_request([topic("Only")]), ResponseCode.SYSTEM_ERROR, "register broker failed")
    # None of it touched the tables or the server: a proper registration works on the same connection.
    assert broker.register().code == ResponseCode.SUCCESS
    assert route(sim, client, "TopicTest").code == ResponseCode.SUCCESS
    assert not [e for e in sim.tracer.events if e.kind == "log" and e.fields["level"] == "ERROR"]
    sim.close()


def test_compressed_and_old_version_registrations():
    sim = world()
    broker = FakeBroker(sim, "broker-a", "broker-a", 0, "127.0.0.1:10911")
    client = client_of(sim)
    assert broker.register([topic("Zipped", 2), topic("TBW102", 8, 7)], compressed=True).code == ResponseCode.SUCCESS
    assert TopicRouteData.decode(route(sim, client, "Zipped").body).queue_datas == [QueueData("broker-a", 2, 2, 6)]
    # A broker older than V3_0_11 sends a bare TopicConfigSerializeWrapper.
    old = FakeBroker(sim, "broker-b", "broker-b", 0, "127.0.0.1:10921")
    wrapper = TopicConfigSerializeWrapper({"Old": topic("Old", 3), "Old2": topic("Old2")}, DataVersion(0, 1, 1))
    request = RemotingCommand.create_request_command(RequestCode.REGISTER_BROKER, RegisterBrokerRequestHeader(
        "broker-b", "127.0.0.1:10921", CLUSTER, "127.0.0.1:10922", 0).to_ext_fields(),
        json.dumps(wrapper.to_json_dict()).encode())
    request.version = MQVersion.V3_0_0_SNAPSHOT
    assert old.send(request).code == ResponseCode.SUCCESS
    assert TopicRouteData.decode(route(sim, client, "Old").body).queue_datas == [QueueData("broker-b", 3, 3, 6)]
    sim.close()


def test_acting_master_switches_are_accepted_and_config_file_is_honoured(tmp_path):
    conf = tmp_path / "namesrv.properties"
    conf.write_text("listenPort=9886\nscanNotActiveBrokerInterval=1000\nsupportActingMaster=true\n"
                    "notifyMinBrokerIdChanged=true\nconnectTimeoutMillis=1500\n")
    controller = NamesrvController.from_startup_config(load_namesrv_config(str(conf)))
    assert (controller.namesrv_config.supportActingMaster, controller.namesrv_config.notifyMinBrokerIdChanged) \
        == (True, True)
    assert controller.netty_client_config.connectTimeoutMillis == 1500  # NOTIFY_MIN_BROKER_ID_CHANGE's client
    assert controller.boot_success_message() == "The Name Server boot success. serializeType=JSON, address 127.0.0.1:9886"
    sim = Simulation(seed=3)
    sim.add_node("namesrv", lambda: NamesrvController.from_startup_config(load_namesrv_config(str(conf))))
    sim.add_node("broker-a", Idle)
    sim.add_node("client", Idle)
    sim.start_all()
    FakeBroker(sim, "broker-a", "broker-a", 0, "127.0.0.1:10911").register(namesrv="127.0.0.1:9886",
                                                                           heartbeat_timeout_millis=2000)
    sim.run_for(3_500)  # scans every second after the first 5 s
    assert route(sim, client_of(sim), "TopicTest", namesrv="127.0.0.1:9886").code == ResponseCode.SUCCESS
    sim.run_for(3_000)
    assert route(sim, client_of(sim), "TopicTest", namesrv="127.0.0.1:9886").code == ResponseCode.TOPIC_NOT_EXIST
    sim.close()


def test_need_wait_for_service():
    sim = world(config=NamesrvConfig(needWaitForService=True, waitSecondsForService=10))
    FakeBroker(sim, "broker-a", "broker-a", 0, "127.0.0.1:10911").register()
    client = client_of(sim)
    response = route(sim, client, "TopicTest")
    assert (response.code, response.remark) == (ResponseCode.SYSTEM_ERROR, "name server not ready")
    sim.run_for(10_000)
    assert route(sim, client, "TopicTest").code == ResponseCode.SUCCESS
    sim.close()


def test_same_seed_same_trace():
    def run() -> str:
        sim = world(seed=11)
        FakeBroker(sim, "broker-a", "broker-a", 0, "127.0.0.1:10911").register()
        FakeBroker(sim, "broker-a-s", "broker-a", 1, "127.0.0.1:10921").register()
        sim.nemesis.kill("broker-a")
        sim.run_for(130_000)
        digest = trace_hash(sim.tracer.events)
        sim.close()
        return digest
    assert run() == run()


# ---------------------------------------------------------------------------------------------
# RouteInfoManager alone (no runtime)


class Clock:
    def __init__(self):
        self.now = 1_000_000

    def __call__(self) -> int:
        return self.now


def wrapper_of(*topics: TopicConfig, state_version: int = 0, counter: int = 1) -> TopicConfigAndMappingSerializeWrapper:
    return TopicConfigAndMappingSerializeWrapper({t.topic_name: t for t in topics},
                                                 DataVersion(state_version, 1, counter))


def test_route_info_manager_role_switch_prime_slave_and_acting_master_permissions():
    clock = Clock()
    events: list[tuple[str, str]] = []
    rim = RouteInfoManager(NamesrvConfig(), clock, on_event=lambda level, msg: events.append((level, msg)))
    ch_m, ch_s = object(), object()
    topics = (topic("T"), topic("U"))
    # An acting-master group (enableActingMaster): master 0 and slave 1.
    assert rim.register_broker(CLUSTER, "m:1", "g", 0, "m:2", None, None, True, wrapper_of(*topics), [], ch_m)
    rim.register_broker(CLUSTER, "s:1", "g", 1, "s:2", "zone-1", None, True, wrapper_of(*topics), [], ch_s)
    assert rim.broker_addr_table["g"].zone_name == "zone-1"
    assert rim.pickup_topic_route_data("T").queue_datas[0].perm == 6
    # The master's channel closes: the group is masterless, its queues lose WRITE (RIP-32).
    rim.on_channel_destroy(ch_m)
    data = rim.pickup_topic_route_data("T")
    assert data.broker_datas[0].broker_addrs == {1: "s:1"} and data.queue_datas[0].perm == 4
    # No rewrite of the slave to id 0: supportActingMaster is off.
    # The slave re-registers as prime slave (smallest id, no master): it writes topics, read-only.
    rim.register_broker(CLUSTER, "s:1", "g", 1, "s:2", None, None, True, wrapper_of(topic("T"), topic("New")), [], ch_s)
    assert rim.pickup_topic_route_data("New").queue_datas[0].perm == 4
    # The slave is promoted on the same address: id 1 goes, id 0 comes, perm back to 6.
    rim.register_broker(CLUSTER, "s:1", "g", 0, "s:2", None, None, True,
                        wrapper_of(topic("T"), topic("New"), counter=2), [], ch_s)
    data = rim.pickup_topic_route_data("New")
    assert data.broker_datas[0].broker_addrs == {0: "s:1"} and data.queue_datas[0].perm == 6
    assert ("INFO", "new broker registered, BrokerIdentityInfo [clusterName=DefaultCluster, brokerAddr=s:1] "
                    "HAService: s:2") in events
    # An old (pre-RIP-32) slave never counts as prime slave: its topics are not written.
    rim.register_broker(CLUSTER, "o:1", "h", 1, "o:2", None, None, None, wrapper_of(topic("OldSlave"), topic("X")),
                        None, object())
    assert rim.pickup_topic_route_data("OldSlave") is None


def test_route_info_manager_expiry_filter_servers_and_topic_deletion():
    clock = Clock()
    rim = RouteInfoManager(NamesrvConfig(deleteTopicWithBrokerRegistration=True), clock)
    channel = object()
    rim.register_broker(CLUSTER, "a:1", "a", 0, "a:2", None, 30_000, False,
                        wrapper_of(topic("T"), topic("Gone")), ["fs:1"], channel)
    data = rim.pickup_topic_route_data("T")
    assert data.filter_server_table == {"a:1": ["fs:1"]}
    # A new table version without "Gone": deleteTopicWithBrokerRegistration drops its route.
    rim.register_broker(CLUSTER, "a:1", "a", 0, "a:2", None, 30_000, False,
                        wrapper_of(topic("T"), topic("V"), counter=2), [], channel)
    assert rim.pickup_topic_route_data("Gone") is None
    assert rim.pickup_topic_route_data("T").filter_server_table == {}
    clock.now += 30_000
    assert rim.scan_not_active_broker() == []  # not yet: strictly older than the timeout
    clock.now += 1
    expired = rim.scan_not_active_broker()
    assert [live.channel for live in expired] == [channel]
    assert rim.pickup_topic_route_data("T") is None and rim.broker_live_table == {}
    assert rim.cluster_addr_table == {} and rim.broker_addr_table == {}


def test_route_info_manager_drops_orphan_live_entries():
    # Quirk fixed: an address replaced under its id keeps a live entry; Java would keep it forever.
    clock = Clock()
    rim = RouteInfoManager(NamesrvConfig(), clock)
    old_channel = object()
    rim.register_broker(CLUSTER, "old:1", "a", 0, "old:2", None, None, False, wrapper_of(topic("T"), topic("U")),
                        [], old_channel)
    # The fence refuses only a lower stateVersion: an equal one (0, outside controller mode) wins.
    rim.register_broker(CLUSTER, "new:1", "a", 0, "new:2", None, None, False,
                        wrapper_of(topic("T"), topic("U")), [], object())
    assert len(rim.broker_live_table) == 2
    rim.on_channel_destroy(old_channel)
    assert [info.broker_addr for info in rim.broker_live_table] == ["new:1"]
    assert rim.pickup_topic_route_data("T").broker_datas[0].broker_addrs == {0: "new:1"}


# ---------------------------------------------------------------------------------------------
# The real runtime


def test_on_the_real_runtime(tmp_path):
    async def main():
        ns_node = RealNode("namesrv", str(tmp_path / "namesrv"))
        broker_node = RealNode("broker-a", str(tmp_path / "broker-a"))
        controller = NamesrvController(netty_server_config=NettyServerConfig(listenPort=0))
        controller.node = ns_node
        await controller.start(ns_node)
        assert controller.boot_success_message() == (
            f"The Name Server boot success. serializeType=JSON, address 127.0.0.1:{controller.remoting_server.port}")
        broker = RemotingClient(broker_node)
        client = RemotingClient(broker_node)
        try:
            table = {t.topic_name: t for t in default_topics()}
            body = RegisterBrokerBody(TopicConfigAndMappingSerializeWrapper(table, DataVersion(0, 1, 1))).encode()
            request = RemotingCommand.create_request_command(RequestCode.REGISTER_BROKER, RegisterBrokerRequestHeader(
                "broker-a", "127.0.0.1:10911", CLUSTER, "127.0.0.1:10912", 0, None, False, False,
                crc32(body)).to_ext_fields(), body)
            request.version = MQVersion.CURRENT_VERSION
            assert (await broker.invoke_sync(controller.address, request, TIMEOUT_MS)).code == ResponseCode.SUCCESS
            query = RemotingCommand.create_request_command(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": "TopicTest"})
            query.version = MQVersion.V3_1_8
            response = await client.invoke_sync(controller.address, query, TIMEOUT_MS)
            assert response.body.startswith(b'{"brokerDatas":[{"brokerAddrs":{0:"127.0.0.1:10911"}')
            # The broker's connection closes (its process stops): the route goes with it.
            await broker.shutdown()
            for _ in range(200):
                response = await client.invoke_sync(controller.address, query, TIMEOUT_MS)
                if response.code == ResponseCode.TOPIC_NOT_EXIST:
                    break
                await asyncio.sleep(0.01)
            assert response.code == ResponseCode.TOPIC_NOT_EXIST
        finally:
            await client.shutdown()
            await controller.shutdown()
            await broker_node.close()
            await ns_node.close()

    asyncio.run(asyncio.wait_for(main(), 20))
