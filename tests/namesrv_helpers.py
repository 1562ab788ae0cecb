"""What a RocketMQ 5 broker sends the name servers (``FakeBroker``), from a simulated node.
Shared by the name server, controller and admin tests.
"""

from __future__ import annotations

from rmqlab.common.topic_config import PermName, TopicConfig
from rmqlab.common.data_version import DataVersion
from rmqlab.common.java_compat import crc32
from rmqlab.remoting import RemotingClient, RemotingCommand, RequestCode
from rmqlab.remoting.protocol import MQVersion
from rmqlab.remoting.protocol.body import RegisterBrokerBody, TopicConfigAndMappingSerializeWrapper
from rmqlab.remoting.protocol.header.namesrv import RegisterBrokerRequestHeader
from rmqlab.runtime.sim import Simulation

CLUSTER = "DefaultCluster"
NS = "127.0.0.1:9876"
TIMEOUT_MS = 3000


def topic(name: str, queues: int = 4, perm: int = 6, sys_flag: int = 0) -> TopicConfig:
    tc = TopicConfig(name, queues, queues, perm)
    tc.topic_sys_flag = sys_flag
    return tc


def default_topics() -> list[TopicConfig]:
    # Two topics at least: a registration of exactly one topic before the broker's first full one
    # is refused (registerSingleTopicAll), as RocketMQ does.
    return [topic("TopicTest"), topic("TBW102", 8, PermName.PERM_READ | PermName.PERM_WRITE | PermName.PERM_INHERIT)]


class FakeBroker:
    """What a RocketMQ 5 broker sends the name servers, from its own simulated node."""

    def __init__(self, sim: Simulation, node_name: str, broker_name: str, broker_id: int, addr: str,
                 ha_addr: str | None = None, cluster: str = CLUSTER):
        self.sim, self.node_name = sim, node_name
        self.broker_name, self.broker_id, self.addr, self.cluster = broker_name, broker_id, addr, cluster
        self.ha_addr = ha_addr or addr.rsplit(":", 1)[0] + ":" + str(int(addr.rsplit(":", 1)[1]) + 1)
        self.client = RemotingClient(sim.nodes[node_name])

    def register_request(self, topics=None, *, state_version: int = 0, counter: int = 1, compressed: bool = False,
                         version: int = MQVersion.CURRENT_VERSION, heartbeat_timeout_millis: int | None = None,
                         enable_acting_master: bool = False) -> RemotingCommand:
        table = {tc.topic_name: tc for tc in (default_topics() if topics is None else topics)}
        wrapper = TopicConfigAndMappingSerializeWrapper(table, DataVersion(state_version, 1_700_000_000_000, counter))
        body = RegisterBrokerBody(wrapper).encode(compressed)
        header = RegisterBrokerRequestHeader(self.broker_name, self.addr, self.cluster, self.ha_addr, self.broker_id,
                                             heartbeat_timeout_millis, enable_acting_master, compressed, crc32(body))
        request = RemotingCommand.create_request_command(RequestCode.REGISTER_BROKER, header.to_ext_fields(), body)
        request.version = version
        return request

    def send(self, request: RemotingCommand, namesrv: str = NS) -> RemotingCommand:
        return self.sim.run(self.client.invoke_sync(namesrv, request, TIMEOUT_MS))

    def register(self, topics=None, namesrv: str = NS, **kwargs) -> RemotingCommand:
        return self.send(self.register_request(topics, **kwargs), namesrv)

    def heartbeat(self, namesrv: str = NS) -> RemotingCommand:
        request = RemotingCommand.create_request_command(RequestCode.BROKER_HEARTBEAT, {
            "clusterName": self.cluster, "brokerAddr": self.addr, "brokerName": self.broker_name})
        return self.send(request, namesrv)
