"""TopicRouteService (proxy/service/route/): where the Proxy sends a topic's messages, and the
route it hands to gRPC clients.

Cluster mode (ClusterTopicRouteService): routes come from the name servers and are cached per
topic; an entry older than topicRouteServiceCacheRefreshSeconds is reloaded on its next use
(RocketMQ's Caffeine cache refreshes after write the same way), and a failed reload keeps the old
entry until topicRouteServiceCacheExpiredSeconds. That refresh is how the Proxy follows a
failover: the new master registers at the name server, the next reload sees it. The route for
clients names the Proxy itself: every broker's endpoints become the addresses the client used to
reach the Proxy, with the Proxy's gRPC port (ProxyTopicRouteData).

Local mode (LocalTopicRouteService): sends and receives only ever go to the broker the Proxy
lives in; the route for clients still lists every broker of the topic (from the name server),
each at its own host with the gRPC port, because each broker runs its own Local-mode Proxy.
"""

from __future__ import annotations

import abc
import random as _random
from dataclasses import dataclass
from typing import TYPE_CHECKING
from collections.abc import Callable

from rmqlab.proxy.service.message_queue_view import MASTER_ID, MessageQueueView
from rmqlab.remoting.protocol.route.topic_route_data import TopicRouteData

if TYPE_CHECKING:
    from rmqlab.broker.broker_controller import BrokerController
    from rmqlab.client.impl.mq_client_api_impl import MQClientAPIImpl

ROUTE_TIMEOUT_MS = 3000


@dataclass(frozen=True)
class ProxyBroker:
    """One broker of a ProxyTopicRouteData: its name, id and the gRPC endpoints that serve it."""
    name: str
    broker_id: int
    endpoints: tuple[tuple[str, int], ...]


def proxy_brokers(route: TopicRouteData, endpoints_of: Callable[[str], tuple[tuple[str, int], ...]]
                  ) -> dict[str, dict[int, ProxyBroker]]:
    out: dict[str, dict[int, ProxyBroker]] = {}
    for bd in route.broker_datas:
        out[bd.broker_name] = {bid: ProxyBroker(bd.broker_name, bid, endpoints_of(addr))
                               for bid, addr in sorted(bd.broker_addrs.items())}
    return out


class TopicRouteService(abc.ABC):
    def __init__(self, api: MQClientAPIImpl, now_ms: Callable[[], int], rng: _random.Random,
                 refresh_seconds: int, expired_seconds: int, grpc_port: int):
        self.api = api
        self.now_ms = now_ms
        self.rng = rng
        self.refresh_ms = refresh_seconds * 1000
        self.expired_ms = expired_seconds * 1000
        self.grpc_port = grpc_port
        self._cache: dict[str, tuple[MessageQueueView, int]] = {}

    async def get_all_message_queue_view(self, topic: str) -> MessageQueueView:
        """The name server's route for `topic`, cached (MQClientException TOPIC_NOT_EXIST if unknown)."""
        cached = self._cache.get(topic)
        now = self.now_ms()
        if cached is not None and now - cached[1] < self.refresh_ms:
            return cached[0]
        try:
            route = await self.api.get_topic_route_info_from_name_server(topic, ROUTE_TIMEOUT_MS)
        except Exception:
            if cached is not None and now - cached[1] < self.expired_ms:
                return cached[0]
            self._cache.pop(topic, None)
            raise
        view = MessageQueueView(topic, route, self.rng)
        self._cache[topic] = (view, now)
        return view

    def invalidate(self, topic: str) -> None:
        self._cache.pop(topic, None)

    async def get_current_message_queue_view(self, topic: str) -> MessageQueueView:
        return await self.get_all_message_queue_view(topic)

    @abc.abstractmethod
    async def get_topic_route_for_proxy(self, request_addresses: list[tuple[str, int]], topic: str
                                        ) -> tuple[TopicRouteData, dict[str, dict[int, ProxyBroker]]]:
        """The route as clients see it: the name server's, every broker served at a Proxy endpoint."""

    async def get_broker_addr(self, broker_name: str, topic: str | None = None) -> str | None:
        """The master address of `broker_name` (from any cached route, else the topic's)."""
        views = [v for v, _ in self._cache.values()]
        if topic is not None:
            views.insert(0, await self.get_all_message_queue_view(topic))
        for view in views:
            for bd in view.route.broker_datas:
                if bd.broker_name == broker_name and MASTER_ID in bd.broker_addrs:
                    return bd.broker_addrs[MASTER_ID]
        return None


class ClusterTopicRouteService(TopicRouteService):
    async def get_topic_route_for_proxy(self, request_addresses, topic):
        view = await self.get_all_message_queue_view(topic)
        endpoints = tuple((host, self.grpc_port) for host, _ in request_addresses)
        return view.route, proxy_brokers(view.route, lambda _addr: endpoints)


class LocalTopicRouteService(TopicRouteService):
    def __init__(self, broker: BrokerController, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.broker = broker

    async def get_current_message_queue_view(self, topic: str) -> MessageQueueView:
        from rmqlab.client.exceptions import MQClientException
        from rmqlab.remoting.protocol.route.topic_route_data import BrokerData, QueueData
        from rmqlab.remoting.response_code import ResponseCode

        bc = self.broker.broker_config
        tc = self.broker.topic_config_manager.select_topic_config(topic)
        if tc is None:
            raise MQClientException(ResponseCode.TOPIC_NOT_EXIST, f"No topic route info in name server for the "
                                    f"topic: {topic}")
        route = TopicRouteData(
            queue_datas=[QueueData(bc.brokerName, tc.read_queue_nums, tc.write_queue_nums, tc.perm,
                                   tc.topic_sys_flag)],
            broker_datas=[BrokerData(bc.brokerClusterName, bc.brokerName, {MASTER_ID: self.broker.broker_addr})])
        return MessageQueueView(topic, route, self.rng)

    async def get_topic_route_for_proxy(self, request_addresses, topic):
        view = await self.get_all_message_queue_view(topic)
        return view.route, proxy_brokers(view.route, lambda addr: ((addr.rsplit(":", 1)[0], self.grpc_port),))

    async def get_broker_addr(self, broker_name: str, topic: str | None = None) -> str | None:
        return self.broker.broker_addr

