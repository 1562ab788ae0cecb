"""RemoteBrokerOffsetStore: a clustering consumer's offsets, kept by the brokers
(``client/consumer/store/RemoteBrokerOffsetStore.java``, ``ControllableOffset.java``,
``ReadOffsetType.java``).

The consumer keeps the offset of every queue it consumes in memory and writes them to the broker
that owns the queue: every ``persistConsumerOffsetInterval`` (5 s, UPDATE_CONSUMER_OFFSET, oneway
as in Java), when it gives a queue away in a rebalance, and on shutdown; pulls also piggyback the
in-memory offset (sysFlag commitOffset). Reading from the store asks the broker
(QUERY_CONSUMER_OFFSET); QUERY_NOT_FOUND (22) means the group has no offset there (-1), which the
consumer turns into its ``consumeFromWhere`` start.

Which broker: the group's master; when the master is gone (not in the route any more), the first
member left, i.e. a slave (``findBrokerAddressInSubscribe(brokerName, MASTER_ID, false)``). So
while a master is down its consumers' offsets are written to, and read from, its slave. RocketMQ
says as much ("once the Master is off, updated to Slave"); when the master returns the client
writes to it again, and the slave's SlaveSynchronize copies the master's table back over its own,
so what only the slave saw is lost and the master's older offsets win: messages consumed from the
slave may be consumed again after the master is back. A read (``fetchConsumeOffsetFromBroker``)
asks only the master first, and falls back to any member after refreshing the route.
"""

from __future__ import annotations

import enum
import logging
from typing import TYPE_CHECKING

from rmqlab.client.exceptions import MQBrokerException, MQClientException
from rmqlab.remoting.protocol.header.broker.admin import MessageQueue
from rmqlab.remoting.protocol.route.topic_route_data import MASTER_ID
from rmqlab.remoting.response_code import ResponseCode

if TYPE_CHECKING:
    from rmqlab.client.impl.mq_client_instance import MQClientInstance

log = logging.getLogger("rmqlab.client")


class ReadOffsetType(enum.Enum):
    READ_FROM_MEMORY = "READ_FROM_MEMORY"
    READ_FROM_STORE = "READ_FROM_STORE"
    MEMORY_FIRST_THEN_STORE = "MEMORY_FIRST_THEN_STORE"


class ControllableOffset:
    """``ControllableOffset``: an offset that a frozen state protects from later updates (set when
    a pull found the offset illegal and the corrected one must win until the queue is re-created)."""

    def __init__(self, offset: int):
        self.value = offset
        self.allow_to_update = True

    def update(self, target: int, increase_only: bool = False) -> None:
        if self.allow_to_update:
            self.value = max(target, self.value) if increase_only else target

    def update_and_freeze(self, target: int) -> None:
        self.value = target
        self.allow_to_update = False


class RemoteBrokerOffsetStore:
    def __init__(self, client_factory: MQClientInstance, group_name: str):
        self.client_factory = client_factory
        self.group_name = group_name
        self.offset_table: dict[MessageQueue, ControllableOffset] = {}

    def update_offset(self, mq: MessageQueue, offset: int, increase_only: bool) -> None:
        current = self.offset_table.get(mq)
        if current is None:
            self.offset_table[mq] = ControllableOffset(offset)
        else:
            current.update(offset, increase_only)

    def update_and_freeze_offset(self, mq: MessageQueue, offset: int) -> None:
        self.offset_table.setdefault(mq, ControllableOffset(offset)).update_and_freeze(offset)

    async def read_offset(self, mq: MessageQueue, read_type: ReadOffsetType) -> int:
        """The offset (>= 0); -1 when the broker has none for the group; -2 when it could not be
        asked; -1 for a memory read of a queue not held (Java's values)."""
        if read_type in (ReadOffsetType.READ_FROM_MEMORY, ReadOffsetType.MEMORY_FIRST_THEN_STORE):
            current = self.offset_table.get(mq)
            if current is not None:
                return current.value
            if read_type is ReadOffsetType.READ_FROM_MEMORY:
                return -1
        try:
            broker_offset = await self.fetch_consume_offset_from_broker(mq)
        except MQBrokerException as e:
            if e.response_code == ResponseCode.QUERY_NOT_FOUND:
                return -1
            log.warning("fetchConsumeOffsetFromBroker exception, %s: %s", mq, e)
            return -2
        except Exception as e:  # remoting failures, no broker: the caller retries later
            log.warning("fetchConsumeOffsetFromBroker exception, %s: %r", mq, e)
            return -2
        self.update_offset(mq, broker_offset, False)
        return broker_offset

    async def persist_all(self, mqs: set[MessageQueue]) -> None:
        """``persistAll``: write the offsets of ``mqs``; forget those of queues not in it."""
        if not mqs:
            return
        unused = []
        for mq in sorted(self.offset_table):
            if mq in mqs:
                try:
                    await self.update_consume_offset_to_broker(mq, self.offset_table[mq].value, oneway=True)
                except Exception as e:
                    log.error("updateConsumeOffsetToBroker exception, %s: %r", mq, e)
            else:
                unused.append(mq)
        for mq in unused:
            self.offset_table.pop(mq, None)

    async def persist(self, mq: MessageQueue) -> None:
        current = self.offset_table.get(mq)
        if current is not None:
            try:
                await self.update_consume_offset_to_broker(mq, current.value, oneway=True)
            except Exception as e:
                log.error("updateConsumeOffsetToBroker exception, %s: %r", mq, e)

    def remove_offset(self, mq: MessageQueue) -> None:
        self.offset_table.pop(mq, None)

    def clone_offset_table(self, topic: str | None = None) -> dict[MessageQueue, int]:
        return {mq: o.value for mq, o in sorted(self.offset_table.items()) if not topic or mq.topic == topic}

    async def update_consume_offset_to_broker(self, mq: MessageQueue, offset: int, oneway: bool = True) -> None:
        """UPDATE_CONSUMER_OFFSET to the queue's master, or to a slave when the master is gone."""
        factory = self.client_factory
        found = factory.find_broker_address_in_subscribe(mq.broker_name, MASTER_ID, False)
        if found is None:
            await factory.update_topic_route_info_from_name_server(mq.topic)
            found = factory.find_broker_address_in_subscribe(mq.broker_name, MASTER_ID, False)
        if found is None:
            raise MQClientException(-1, f"The broker[{mq.broker_name}] not exist")
        await factory.mq_client_api_impl.update_consumer_offset(
            found.broker_addr, self.group_name, mq, offset, factory.client_config.mq_client_api_timeout, oneway)

    async def fetch_consume_offset_from_broker(self, mq: MessageQueue) -> int:
        factory = self.client_factory
        found = factory.find_broker_address_in_subscribe(mq.broker_name, MASTER_ID, True)
        if found is None:
            await factory.update_topic_route_info_from_name_server(mq.topic)
            found = factory.find_broker_address_in_subscribe(mq.broker_name, MASTER_ID, False)
        if found is None:
            raise MQClientException(-1, f"The broker[{mq.broker_name}] not exist")
        return await factory.mq_client_api_impl.query_consumer_offset(
            found.broker_addr, self.group_name, mq, factory.client_config.mq_client_api_timeout)
