"""The Proxy as a component (proxy/ProxyStartup.java): Cluster mode on a node of its own, or Local
mode inside a broker's process (`rmqlab broker ... --enable-proxy`). RocketMQ's deployment guide ("部署方式"):
the Proxy is stateless, in Local or Cluster mode.

Cluster mode (`rmqlab proxy -n ADDR -pc rmq-proxy.json`): the gRPC server listens on
localServeAddr:grpcServerPort; routes and metadata come from the name servers and the brokers of
rocketMQClusterName, over remoting.

Local mode: the broker starts first, then the Proxy on the broker's host (brokerIP1) at
grpcServerPort. Routes list every broker at its own host with that same port, because each
broker runs its own Proxy, so brokers of one cluster need distinct hosts (as on separate
machines; one machine: distinct loopback addresses).

Transport: gRPC through grpcio (`transport="grpc"`, the real runtime), or, on the simulator where
grpcio cannot open sockets, the same MessagingService over framed RPC on the simulated streams
(`transport="framed"`, rmqlab.proto.framed: a deviation from RocketMQ, see there). There a
Local-mode Proxy reaches its broker through an in-process pipe (rmqlab.proxy.in_process).
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from rmqlab.client.impl.mq_client_api_impl import MQClientAPIImpl
from rmqlab.config.proxy import ProxyConfig
from rmqlab.proxy.grpc.v2.grpc_messaging_activity import GrpcMessagingActivity
from rmqlab.proxy.processor.messaging_processor import MessagingProcessor
from rmqlab.proxy.service.metadata_service import ClusterMetadataService, LocalMetadataService
from rmqlab.proxy.service.topic_route_service import ClusterTopicRouteService, LocalTopicRouteService
from rmqlab.proxy.service.transaction_service import TransactionService
from rmqlab.remoting.remoting_client import RemotingClient
from rmqlab.remoting.request_code import RequestCode
from rmqlab.runtime.component import Component

if TYPE_CHECKING:
    from rmqlab.broker.broker_controller import BrokerController
    from rmqlab.runtime.node import Node

log = logging.getLogger("rmqlab.proxy")

TRANSPORTS = ("grpc", "framed")


class ProxyController(Component):
    component_type = "proxy"

    def __init__(self, proxy_config: ProxyConfig, broker: BrokerController | None = None, transport: str = "grpc"):
        if transport not in TRANSPORTS:
            raise ValueError(f"transport must be one of {', '.join(TRANSPORTS)}, not {transport!r}")
        self.proxy_config = proxy_config
        self.broker = broker  # Local mode: the broker this Proxy lives in
        self.transport = transport
        self.component_type = "broker" if broker is not None else "proxy"  # node.start names the process
        self.node: Node | None = None
        self.grpc_server = None  # GrpcServer or FramedGrpcServer
        self.activity: GrpcMessagingActivity | None = None
        self.remoting_client: RemotingClient | None = None
        self.transactions: TransactionService | None = None

    @classmethod
    def from_startup_config(cls, bundle) -> ProxyController:
        return cls(bundle.proxyConfig)

    @property
    def is_local(self) -> bool:
        return self.broker is not None

    def grpc_addr(self) -> str:
        return f"{self.grpc_server.host}:{self.grpc_server.port}" if self.grpc_server else ""

    def boot_success_message(self) -> str:
        mode = "LOCAL" if self.is_local else "CLUSTER"
        return f"The proxy[{self.proxy_config.proxyName}, {self.grpc_addr()}] boot success. proxyMode={mode}"

    async def start(self, node: Node) -> None:
        self.node = node
        pc = self.proxy_config
        pc.init_data()
        if self.broker is not None:
            await self.broker.start(node)  # Local mode: BrokerStartup --enable-proxy starts the broker first
            namesrv = self.broker.broker_config.get_namesrv_addr_list()
            host = self.broker.broker_config.brokerIP1
        else:
            namesrv = [a for a in (pc.namesrvAddr or "").split(";") if a]
            host = pc.localServeAddr
        remoting_node = node
        if self.broker is not None and self.transport == "framed":
            # The simulator: the broker in-process, not over a connection to this node itself.
            from rmqlab.proxy.in_process import InProcessNode

            server = self.broker.remoting_server
            remoting_node = InProcessNode(node, (self.broker.broker_config.brokerIP1, server.port), server.on_accept)
        self.remoting_client = RemotingClient(remoting_node)
        api = MQClientAPIImpl(node, self.remoting_client)
        api.update_name_server_address_list(namesrv)
        args = (api, node.now_ms, node.random, pc.topicRouteServiceCacheRefreshSeconds,
                pc.topicRouteServiceCacheExpiredSeconds, pc.grpcServerPort)
        if self.broker is not None:
            routes = LocalTopicRouteService(self.broker, *args)
            metadata = LocalMetadataService(self.broker)
        else:
            routes = ClusterTopicRouteService(*args)
            metadata = ClusterMetadataService(api, routes, pc.rocketMQClusterName, node.now_ms,
                                              pc.topicRouteServiceCacheRefreshSeconds, node.spawn)
        processor = MessagingProcessor(api, routes, metadata, node.now_ms)
        self.transactions = processor.transactions = TransactionService(node, api, routes, pc)
        # A broker's check of a half message sent through this Proxy comes back on its connection.
        self.remoting_client.register_processor(RequestCode.CHECK_TRANSACTION_STATE,
                                                self.transactions.process_check_transaction_state)
        self.activity = GrpcMessagingActivity(processor, pc)
        if self.transport == "grpc":
            from rmqlab.proxy.grpc.grpc_server import GrpcServer as server_class  # loads grpcio
        else:
            from rmqlab.proxy.grpc.framed_server import FramedGrpcServer as server_class
        self.grpc_server = server_class(node, self.activity, host, pc.grpcServerPort, pc.grpcMaxInboundMessageSize)
        await self.grpc_server.start()
        tip = self.boot_success_message()
        log.info(tip)
        node.trace("log", level="INFO", message=tip, logger="rmqlab.proxy")

    async def shutdown(self) -> None:
        if self.transactions is not None:
            self.transactions.shutdown()
        if self.grpc_server is not None:
            await self.grpc_server.shutdown()
        if self.remoting_client is not None:
            await self.remoting_client.shutdown()
        if self.broker is not None:
            await self.broker.shutdown()

    def on_crash(self) -> None:
        """The process died: the Proxy holds nothing to lose (its consumption state is in the broker)."""
        if self.broker is not None:
            self.broker.on_crash()
