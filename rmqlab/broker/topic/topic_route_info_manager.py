"""TopicRouteInfoManager: the broker's own cache of topic routes, asked of the name servers
(RocketMQ ``broker/src/main/java/org/apache/rocketmq/broker/topic/TopicRouteInfoManager.java``).

The EscapeBridge (``rmqlab.broker.failover.escape_bridge``) needs it on a slave acting as master:
where to send a message that falls due (a queue of another group's master: the publish info) and
where to read a message owned by another broker name (that group's id-0 member).

* ``try_to_find_topic_publish_info(topic)``: the cached TopicPublishInfo; when there is none, or
  it has no queue, the route is fetched now (GET_ROUTEINFO_BY_TOPIC, 3000 ms) and cached.
* ``update_topic_route_info_from_name_server(topic, publish, subscribe)``: fetch one route; a
  changed route (or a cached publish info without queues) replaces the table entries: the
  members of each group (``brokerAddrTable``), the publish info
  (``MQClientInstance.topicRouteData2TopicPublishInfo``: writeable queues of groups with an id 0)
  and the route. A failure is logged and leaves the cache as it was.
* ``find_broker_address_in_publish(name)``: the id-0 address of the group;
  ``find_broker_address_in_subscribe(name, id, only_this_broker)``: that id, else (for a slave id)
  the next one, else (unless ``only_this_broker``) any member.
* Every topic in the route table is refreshed every ``loadBalancePollNameServerInterval`` (30 s,
  RocketMQ's default), first 1 s after ``start``.

Deviations: RocketMQ starts the periodic refresh on every broker; here it starts only where the
cache is used to escape (``enableSlaveActingMaster`` and ``enableRemoteEscape``), so a broker with
the defaults sends nothing new. The POP assignment's subscribe table (``topicSubscribeInfoTable``)
is not built: rmqlab's broker does not assign POP queues to clients.
"""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING

from rmqlab.client.producer.topic_publish_info import TopicPublishInfo
from rmqlab.config.broker import MASTER_ID
from rmqlab.remoting.exceptions import RemotingError
from rmqlab.remoting.protocol.route import TopicRouteData

if TYPE_CHECKING:
    from rmqlab.broker.broker_controller import BrokerController

log = logging.getLogger("rmqlab.broker")

GET_TOPIC_ROUTE_TIMEOUT_MS = 3_000
FIRST_UPDATE_DELAY_MS = 1_000


class TopicRouteInfoManager:
    def __init__(self, broker: BrokerController):
        self.broker = broker
        self.topic_route_table: dict[str, TopicRouteData] = {}
        self.broker_addr_table: dict[str, dict[int, str]] = {}  # brokerName -> id -> address
        self.topic_publish_info_table: dict[str, TopicPublishInfo] = {}
        self._lock_namesrv: asyncio.Lock | None = None

    def start(self) -> None:
        """The periodic refresh (see the module docstring's deviation for when it runs)."""
        self.broker.schedule_at_fixed_rate("TopicRouteInfoManager", FIRST_UPDATE_DELAY_MS,
                                           self.broker.broker_config.loadBalancePollNameServerInterval,
                                           self.update_all_from_name_server)

    async def update_all_from_name_server(self) -> None:
        for topic in list(self.topic_route_table):
            await self.update_topic_route_info_from_name_server(topic, True, False)

    async def update_topic_route_info_from_name_server(self, topic: str, is_need_update_publish_info: bool,
                                                       is_need_update_subscribe_info: bool) -> None:
        """One topic's route from a name server into the cache, one fetch at a time
        (``lockNamesrv``; RocketMQ gives up after waiting 3 s for the lock, here the wait is
        bounded by the fetch ahead, itself bounded by its 3 s timeout)."""
        if self._lock_namesrv is None:
            self._lock_namesrv = asyncio.Lock()
        async with self._lock_namesrv:
            try:
                route = await self.broker.broker_outer_api.get_topic_route_info_from_name_server(
                    topic, GET_TOPIC_ROUTE_TIMEOUT_MS)
            except (RemotingError, ValueError, OSError) as e:
                # MQBrokerException (TOPIC_NOT_EXIST...) too: RocketMQ then only drops the
                # subscribe entry, which rmqlab does not keep.
                log.error("updateTopicRouteInfoFromNameServer Exception %s: %s", topic, e)
                return
            if route is None:
                log.warning("TopicRouteInfoManager: updateTopicRouteInfoFromNameServer, "
                            "getTopicRouteInfoFromNameServer return null, Topic: %s.", topic)
                return
            if is_need_update_publish_info:
                self._update_topic_route_table(topic, route)

    def _update_topic_route_table(self, topic: str, route: TopicRouteData) -> bool:
        old = self.topic_route_table.get(topic)
        if old is not None and old.to_json_dict() == route.to_json_dict():  # topicRouteDataChanged
            if not self._is_need_update_topic_route_info(topic):
                return False
        else:
            log.info("the topic[%s] route info changed, old[%s] ,new[%s]", topic, old, route)
        for bd in route.broker_datas:
            self.broker_addr_table[bd.broker_name] = dict(bd.broker_addrs)
        info = TopicPublishInfo.from_route(topic, route, self.broker.node.random)
        info.have_topic_router_info = True
        self.topic_publish_info_table[topic] = info
        self.topic_route_table[topic] = TopicRouteData(  # new TopicRouteData(topicRouteData): a copy
            [qd.copy() for qd in route.queue_datas], [bd.copy() for bd in route.broker_datas],
            {addr: list(servers) for addr, servers in route.filter_server_table.items()}, route.order_topic_conf,
            route.topic_queue_mapping_by_broker)
        return True

    def _is_need_update_topic_route_info(self, topic: str) -> bool:
        prev = self.topic_publish_info_table.get(topic)
        return prev is None or not prev.ok()

    async def try_to_find_topic_publish_info(self, topic: str) -> TopicPublishInfo | None:
        info = self.topic_publish_info_table.get(topic)
        if info is None or not info.ok():
            await self.update_topic_route_info_from_name_server(topic, True, False)
            info = self.topic_publish_info_table.get(topic)
        return info

    def find_broker_address_in_publish(self, broker_name: str | None) -> str | None:
        if broker_name is None:
            return None
        addrs = self.broker_addr_table.get(broker_name)
        return addrs.get(MASTER_ID) if addrs else None

    def find_broker_address_in_subscribe(self, broker_name: str | None, broker_id: int,
                                         only_this_broker: bool) -> str | None:
        if broker_name is None:
            return None
        addrs = self.broker_addr_table.get(broker_name)
        if not addrs:
            return None
        addr = addrs.get(broker_id)
        if addr is None and broker_id != MASTER_ID:
            addr = addrs.get(broker_id + 1)
        if addr is None and not only_this_broker:
            addr = next(iter(addrs.values()))  # the first entry, as the route listed them
        return addr

