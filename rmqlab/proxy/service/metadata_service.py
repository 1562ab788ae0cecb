"""MetadataService (proxy/service/metadata/): a topic's message type and a consumer group's config.

Cluster mode asks a master over remoting (GET_TOPIC_CONFIG 351 on a master of the topic,
GET_SUBSCRIPTIONGROUP_CONFIG 352 on a master of the Proxy's rocketMQClusterName) and caches the
answers like RocketMQ's ClusterMetadataService (same refresh period as routes): an answer older
than that is still used while a background task asks again (Caffeine's refreshAfterWrite), so a
request never waits for a broker that stopped answering (a crashed master of the topic would hold
every send for its timeout). Local mode reads the broker's own managers.

A topic's message type is its `message.type` attribute (TopicAttributes; NORMAL when unset):
NORMAL, FIFO, DELAY, TRANSACTION or MIXED.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any
from collections.abc import Callable

from rmqlab.client.exceptions import MQBrokerException, MQClientException
from rmqlab.common.message.message_const import MessageConst as MC
from rmqlab.remoting.response_code import ResponseCode

if TYPE_CHECKING:
    from rmqlab.broker.broker_controller import BrokerController
    from rmqlab.client.impl.mq_client_api_impl import MQClientAPIImpl
    from rmqlab.common.topic_config import TopicConfig
    from rmqlab.proxy.service.topic_route_service import TopicRouteService
    from rmqlab.remoting.protocol.subscription.subscription_group_config import SubscriptionGroupConfig

MESSAGE_TYPE_ATTRIBUTE = "message.type"
TOPIC_MESSAGE_TYPES = ("NORMAL", "FIFO", "DELAY", "TRANSACTION", "MIXED")
TIMEOUT_MS = 3000


def topic_message_type(tc: TopicConfig) -> str:
    value = tc.attributes.get(MESSAGE_TYPE_ATTRIBUTE, "NORMAL").upper()
    return value if value in TOPIC_MESSAGE_TYPES else "NORMAL"


def message_type_of_properties(props: dict[str, str]) -> str:
    """TopicMessageType.parseFromMessageProperty."""
    if props.get(MC.PROPERTY_TRANSACTION_PREPARED, "").lower() == "true":
        return "TRANSACTION"
    if (props.get(MC.PROPERTY_DELAY_TIME_LEVEL) is not None or props.get(MC.PROPERTY_TIMER_DELIVER_MS) is not None
            or props.get(MC.PROPERTY_TIMER_DELAY_SEC) is not None or props.get(MC.PROPERTY_TIMER_DELAY_MS) is not None):
        return "DELAY"
    if props.get(MC.PROPERTY_SHARDING_KEY) is not None:
        return "FIFO"
    return "NORMAL"


class LocalMetadataService:
    def __init__(self, broker: BrokerController):
        self.broker = broker

    async def get_topic_message_type(self, topic: str) -> str:
        tc = self.broker.topic_config_manager.select_topic_config(topic)
        if tc is None:
            raise MQClientException(ResponseCode.TOPIC_NOT_EXIST, f"topic not found: {topic}")
        return topic_message_type(tc)

    async def get_subscription_group_config(self, group: str) -> SubscriptionGroupConfig | None:
        return self.broker.subscription_group_manager.subscription_group_table.get(group)


class ClusterMetadataService:
    def __init__(self, api: MQClientAPIImpl, routes: TopicRouteService, cluster_name: str,
                 now_ms: Callable[[], int], refresh_seconds: int, spawn: Callable[..., asyncio.Task]):
        """`spawn(coro, name=...)` runs a background refresh (the node's, so a crash ends it)."""
        self.api = api
        self.routes = routes
        self.cluster_name = cluster_name
        self.now_ms = now_ms
        self.refresh_ms = refresh_seconds * 1000
        self._spawn = spawn
        self._topics: dict[str, tuple[str, int]] = {}
        self._groups: dict[str, tuple[SubscriptionGroupConfig | None, int]] = {}
        self._refreshing: set[tuple[str, str]] = set()

    async def _cached(self, table: dict, kind: str, key: str, load: Callable[[str], Any],
                      reload: Callable[[str], Any] | None = None):
        """The cached value of `key`; loaded now when there is none, refreshed in the background
        (with `reload`, if given) when it is older than the refresh period (the old value answers
        meanwhile, and stays when the refresh fails)."""
        entry = table.get(key)
        if entry is None:
            value = await load(key)
            table[key] = (value, self.now_ms())
            return value
        if self.now_ms() - entry[1] >= self.refresh_ms and (kind, key) not in self._refreshing:
            self._refreshing.add((kind, key))
            self._spawn(self._refresh(table, kind, key, reload or load), name=f"proxy metadata refresh {key}")
        return entry[0]

    async def _refresh(self, table: dict, kind: str, key: str, load: Callable[[str], Any]) -> None:
        try:
            table[key] = (await load(key), self.now_ms())
        except Exception:
            pass  # the old value stays; the next use tries again
        finally:
            self._refreshing.discard((kind, key))

    async def get_topic_message_type(self, topic: str) -> str:
        return await self._cached(self._topics, "topic", topic, self._load_topic_message_type)

    async def _load_topic_message_type(self, topic: str) -> str:
        view = await self.routes.get_all_message_queue_view(topic)
        error: Exception | None = None
        for q in view.write_selector.broker_acting_queues or view.read_selector.broker_acting_queues:
            try:
                tc = await self.api.get_topic_config(q.broker_addr, topic, TIMEOUT_MS)
            except Exception as e:  # try the next broker of the topic
                error = e
                continue
            return topic_message_type(tc)
        raise error or MQClientException(ResponseCode.TOPIC_NOT_EXIST, f"topic not found: {topic}")

    async def get_subscription_group_config(self, group: str) -> SubscriptionGroupConfig | None:
        # A refresh that finds no such group keeps the config the Proxy had, as RocketMQ's
        # AbstractCacheLoader.reload keeps the old value when getDirectly throws (the broker's
        # SUBSCRIPTION_GROUP_NOT_EXIST): after a failover to a slave that has not copied the group
        # yet, a FIFO group stays FIFO until that master has a config of its own for it. A first
        # load with no such group is None.
        try:
            return await self._cached(self._groups, "group", group, self._load_subscription_group_config,
                                      self._reload_subscription_group_config)
        except _NoAnswer:
            return None  # RocketMQ's defaults this time; asked again at the next use

    async def _reload_subscription_group_config(self, group: str) -> SubscriptionGroupConfig:
        config = await self._load_subscription_group_config(group)
        if config is None:
            raise _NoAnswer(group)
        return config

    async def _load_subscription_group_config(self, group: str) -> SubscriptionGroupConfig | None:
        info = await self.api.get_broker_cluster_info(TIMEOUT_MS)
        names = sorted(info.cluster_addr_table.get(self.cluster_name, ()))
        for name in names:
            bd = info.broker_addr_table.get(name)
            addr = bd.broker_addrs.get(0) if bd is not None else None
            if addr is None:
                continue
            try:
                return await self.api.get_subscription_group_config(addr, group, TIMEOUT_MS)
            except MQBrokerException as e:
                if e.response_code == ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST:
                    return None
            except Exception:
                continue
        raise _NoAnswer(group)


class _NoAnswer(Exception):
    """No master of the cluster answered for a subscription group."""
