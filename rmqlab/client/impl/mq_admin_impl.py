"""MQAdminImpl: the queue facts a client asks for itself (``client/impl/MQAdminImpl.java``).

* ``fetch_subscribe_message_queues(topic)`` - the readable queues of a topic, straight from the
  name server (what a pull consumer iterates over);
* ``max_offset(mq)`` / ``min_offset(mq)`` - GET_MAX_OFFSET / GET_MIN_OFFSET on the queue's master
  (a push consumer starting from the last offset asks for the max);
* ``search_offset(mq, timestamp)`` - SEARCH_OFFSET_BY_TIMESTAMP (a push consumer starting from a
  timestamp), ``earliest_msg_store_time(mq)`` - GET_EARLIEST_MSG_STORETIME.

"The master" is the route's brokerId 0 (``findBrokerAddressInPublish``): with the name server's
RIP-32 rewrite (``supportActingMaster``) that is the acting master, a slave, while the group's
master is down, and it answers these queries from its own store.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from rmqlab.client.exceptions import MQClientException
from rmqlab.common.boundary_type import BoundaryType
from rmqlab.remoting.protocol.header.broker.admin import MessageQueue

if TYPE_CHECKING:
    from rmqlab.client.impl.mq_client_instance import MQClientInstance


class MQAdminImpl:
    def __init__(self, client_factory: MQClientInstance):
        self.client_factory = client_factory

    async def fetch_subscribe_message_queues(self, topic: str) -> list[MessageQueue]:
        from rmqlab.client.impl.mq_client_instance import topic_route_data_to_topic_subscribe_info

        factory = self.client_factory
        try:
            route = await factory.mq_client_api_impl.get_topic_route_info_from_name_server(
                topic, factory.client_config.mq_client_api_timeout)
        except Exception as e:
            raise MQClientException(-1, f"Can not find Message Queue for this topic, {topic}", e) from e
        mqs = sorted(topic_route_data_to_topic_subscribe_info(topic, route))
        if not mqs:
            raise MQClientException(-1, f"Can not find Message Queue for this topic, {topic} Namesrv return empty")
        return mqs

    async def _master_addr(self, mq: MessageQueue) -> str:
        factory = self.client_factory
        addr = factory.find_broker_address_in_publish(mq.broker_name)
        if addr is None:
            await factory.update_topic_route_info_from_name_server(mq.topic)
            addr = factory.find_broker_address_in_publish(mq.broker_name)
        if addr is None:
            raise MQClientException(-1, f"The broker[{mq.broker_name}] not exist")
        return addr

    async def max_offset(self, mq: MessageQueue) -> int:
        addr = await self._master_addr(mq)
        return await self.client_factory.mq_client_api_impl.get_max_offset(
            addr, mq, self.client_factory.client_config.mq_client_api_timeout)

    async def min_offset(self, mq: MessageQueue) -> int:
        addr = await self._master_addr(mq)
        return await self.client_factory.mq_client_api_impl.get_min_offset(
            addr, mq, self.client_factory.client_config.mq_client_api_timeout)

    async def search_offset(self, mq: MessageQueue, timestamp: int,
                            boundary_type: BoundaryType = BoundaryType.LOWER) -> int:
        addr = await self._master_addr(mq)
        return await self.client_factory.mq_client_api_impl.search_offset(
            addr, mq, timestamp, boundary_type, self.client_factory.client_config.mq_client_api_timeout)

    async def earliest_msg_store_time(self, mq: MessageQueue) -> int:
        addr = await self._master_addr(mq)
        return await self.client_factory.mq_client_api_impl.get_earliest_msg_storetime(
            addr, mq, self.client_factory.client_config.mq_client_api_timeout)
