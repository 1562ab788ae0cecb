"""DefaultMQPullConsumer: the application pulls queues itself and keeps its own place
(``client/consumer/DefaultMQPullConsumer.java`` with ``client/impl/consumer/DefaultMQPullConsumerImpl.java``;
the same request sequence as the C++ PullConsumer of PyPI ``rocketmq`` 0.4.4).

    consumer = DefaultMQPullConsumer("CG", namesrv_addr="127.0.0.1:9876")
    await consumer.start(node)
    for mq in await consumer.fetch_subscribe_message_queues("TopicTest"):
        offset = 0
        while True:
            result = await consumer.pull(mq, "*", offset, 32)       # PullResult
            if result.pull_status is not PullStatus.FOUND:
                break
            offset = result.next_begin_offset
        consumer.update_consume_offset(mq, offset)
    await consumer.shutdown()                                       # writes the offsets

A pull (``pullSyncImpl``) sends sysFlag 4 (subscription, no suspend, no commit) and waits
``consumer_pull_timeout_millis`` (10 s); ``pull_block_if_not_found`` adds the suspend bit so the
broker holds the request up to ``broker_suspend_max_time_millis`` (20 s) until a message arrives.
The subscription expression ("*", "TagA || TagB") filters by tag on the broker and again here.

``max_offset``, ``min_offset``, ``search_offset`` (by store time) and ``earliest_msg_store_time``
ask the route's brokerId 0 (MQAdminImpl) - the acting master while a RIP-32 group's master is down.

Offsets: ``update_consume_offset`` records one in memory; ``fetch_consume_offset(mq, True)`` asks the
broker (QUERY_CONSUMER_OFFSET). Deviation: Java persists (every 5 s and on shutdown) only the
queues of topics registered for rebalancing, so a plain pull consumer's offsets are never written;
here every offset the application recorded is written (UPDATE_CONSUMER_OFFSET).

Trace: each pull is a ``client`` operation ``f="pull"`` whose ``ok`` value lists the messages found
(describe_message), so pulled messages count as consumed for a history checker.
"""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING

from rmqlab.client.client_config import ClientConfig
from rmqlab.client.consumer.pull_api_wrapper import PullAPIWrapper
from rmqlab.client.consumer.pull_result import PullResult
from rmqlab.client.consumer.remote_broker_offset_store import ReadOffsetType, RemoteBrokerOffsetStore
from rmqlab.client.exceptions import MQClientException, outcome_unknown
from rmqlab.client.impl.mq_client_manager import MQClientManager
from rmqlab.client.operation_tracer import describe_message
from rmqlab.remoting.protocol.header.broker.admin import MessageQueue
from rmqlab.remoting.protocol.header.broker.heartbeat import (SUB_ALL, ConsumeFromWhere, ConsumeType, MessageModel,
                                                              SubscriptionData, build_subscription_data)
from rmqlab.remoting.protocol.header.broker.pull_message import PullSysFlag

if TYPE_CHECKING:
    from rmqlab.client.impl.mq_client_instance import MQClientInstance
    from rmqlab.runtime.node import Node

log = logging.getLogger("rmqlab.client")


class DefaultMQPullConsumer:
    def __init__(self, consumer_group: str, namesrv_addr: str | None = None, *,
                 client_config: ClientConfig | None = None, broker_suspend_max_time_millis: int = 20_000,
                 consumer_timeout_millis_when_suspend: int = 30_000, consumer_pull_timeout_millis: int = 10_000,
                 message_model: MessageModel = MessageModel.CLUSTERING):
        self.consumer_group = consumer_group
        self.client_config = client_config or ClientConfig()
        if namesrv_addr is not None:
            self.client_config.namesrv_addr = namesrv_addr
        self.broker_suspend_max_time_millis = broker_suspend_max_time_millis
        self.consumer_timeout_millis_when_suspend = consumer_timeout_millis_when_suspend
        self.consumer_pull_timeout_millis = consumer_pull_timeout_millis
        self.message_model = message_model
        self.consume_from_where = ConsumeFromWhere.CONSUME_FROM_LAST_OFFSET
        self.subscription_inner: dict[str, SubscriptionData] = {}
        self.topic_subscribe_info_table: dict[str, set[MessageQueue]] = {}
        self.node: Node | None = None
        self.client_factory: MQClientInstance | None = None
        self.pull_api_wrapper: PullAPIWrapper | None = None
        self.offset_store: RemoteBrokerOffsetStore | None = None
        self._running = False

    # -- lifecycle -------------------------------------------------------------------------------
    async def start(self, node: Node) -> None:
        if self._running:
            return
        self.node = node
        self.client_factory = MQClientManager.get_instance(node).get_or_create_mq_client_instance(self.client_config)
        self.pull_api_wrapper = PullAPIWrapper(self.client_factory, self.consumer_group)
        self.offset_store = RemoteBrokerOffsetStore(self.client_factory, self.consumer_group)
        if not self.client_factory.register_consumer(self.consumer_group, self):
            raise MQClientException(-1, f"The consumer group[{self.consumer_group}] has been created before, "
                                        "specify another name please.")
        self.client_factory.start()
        self._running = True

    async def shutdown(self) -> None:
        """Write the offsets, unregister from the brokers, stop the client instance if unused."""
        if not self._running:
            return
        await self.persist_consumer_offset()
        self._running = False
        await self.client_factory.unregister_consumer(self.consumer_group)
        await self.client_factory.shutdown()

    def on_crash(self) -> None:
        self._running = False
        if self.client_factory is not None:
            self.client_factory.consumer_table.pop(self.consumer_group, None)
            self.client_factory.on_crash()

    def _is_running(self) -> None:
        if not self._running:
            raise MQClientException(-1, "The consumer is not in running status")

    # -- MQConsumerInner -------------------------------------------------------------------------
    def consume_type(self) -> ConsumeType:
        return ConsumeType.CONSUME_ACTIVELY

    def subscriptions(self) -> list[SubscriptionData]:
        return [self.subscription_inner[t] for t in sorted(self.subscription_inner)]

    async def do_rebalance(self) -> bool:
        """The application chooses its queues: nothing to rebalance."""
        return True

    async def persist_consumer_offset(self) -> None:
        await self.offset_store.persist_all(set(self.offset_store.offset_table))

    def update_topic_subscribe_info(self, topic: str, info: set[MessageQueue]) -> None:
        if topic in self.subscription_inner:
            self.topic_subscribe_info_table[topic] = info

    def is_subscribe_topic_need_update(self, topic: str) -> bool:
        return topic in self.subscription_inner and topic not in self.topic_subscribe_info_table

    # -- queues and offsets ----------------------------------------------------------------------
    async def fetch_subscribe_message_queues(self, topic: str) -> list[MessageQueue]:
        """The topic's readable queues, sorted (from the name server)."""
        self._is_running()
        return await self.client_factory.mq_admin_impl.fetch_subscribe_message_queues(topic)

    async def max_offset(self, mq: MessageQueue) -> int:
        self._is_running()
        return await self.client_factory.mq_admin_impl.max_offset(mq)

    async def min_offset(self, mq: MessageQueue) -> int:
        self._is_running()
        return await self.client_factory.mq_admin_impl.min_offset(mq)

    async def search_offset(self, mq: MessageQueue, timestamp: int) -> int:
        """``searchOffset``: the first offset of ``mq`` stored at or after ``timestamp`` (ms),
        SEARCH_OFFSET_BY_TIMESTAMP to the route's brokerId 0."""
        self._is_running()
        return await self.client_factory.mq_admin_impl.search_offset(mq, timestamp)

    async def earliest_msg_store_time(self, mq: MessageQueue) -> int:
        """``earliestMsgStoreTime``: the store time of the first message of ``mq``, -1 if none."""
        self._is_running()
        return await self.client_factory.mq_admin_impl.earliest_msg_store_time(mq)

    def update_consume_offset(self, mq: MessageQueue, offset: int) -> None:
        self.offset_store.update_offset(mq, offset, False)

    async def fetch_consume_offset(self, mq: MessageQueue, from_store: bool) -> int:
        """The group's offset of ``mq``: from the broker with ``from_store``, else from memory
        (-1 when none)."""
        self._is_running()
        read_type = ReadOffsetType.READ_FROM_STORE if from_store else ReadOffsetType.MEMORY_FIRST_THEN_STORE
        return await self.offset_store.read_offset(mq, read_type)

    # -- pulling ---------------------------------------------------------------------------------
    async def pull(self, mq: MessageQueue, sub_expression: str | None, offset: int, max_nums: int,
                   timeout: int | None = None) -> PullResult:
        """Pull up to ``max_nums`` messages of ``mq`` from ``offset`` (no waiting when there are none)."""
        return await self._pull_sync_impl(mq, sub_expression, offset, max_nums, False,
                                          self.consumer_pull_timeout_millis if timeout is None else timeout)

    async def pull_block_if_not_found(self, mq: MessageQueue, sub_expression: str | None, offset: int,
                                      max_nums: int) -> PullResult:
        """Like :meth:`pull`, but the broker holds the request until a message arrives or
        broker_suspend_max_time_millis passes."""
        return await self._pull_sync_impl(mq, sub_expression, offset, max_nums, True,
                                          self.consumer_timeout_millis_when_suspend)

    def _subscription_automatically(self, topic: str) -> None:
        if topic not in self.subscription_inner:
            self.subscription_inner[topic] = build_subscription_data(topic, SUB_ALL)

    async def _pull_sync_impl(self, mq: MessageQueue, sub_expression: str | None, offset: int, max_nums: int,
                              block: bool, timeout_ms: int) -> PullResult:
        self._is_running()
        if mq is None:
            raise MQClientException(-1, "mq is null")
        if offset < 0:
            raise MQClientException(-1, "offset < 0")
        if max_nums <= 0:
            raise MQClientException(-1, "maxNums <= 0")
        try:
            subscription = build_subscription_data(mq.topic, sub_expression)
        except ValueError as e:
            raise MQClientException(-1, "parse subscription error", e) from e
        self._subscription_automatically(mq.topic)
        op = self.client_factory.tracer.invoke("pull", {
            "group": self.consumer_group, "topic": mq.topic, "broker_name": mq.broker_name, "queue_id": mq.queue_id,
            "offset": offset, "max_nums": max_nums, "sub_expression": subscription.sub_string})
        sys_flag = PullSysFlag.build_sys_flag(commit_offset=False, suspend=block, subscription=True)
        try:
            result = await self.pull_api_wrapper.pull_kernel_impl(
                mq, subscription.sub_string, subscription.expression_type, 0, offset, max_nums, sys_flag, 0,
                self.broker_suspend_max_time_millis, timeout_ms)
            self.pull_api_wrapper.process_pull_result(mq, result, subscription)
        except asyncio.CancelledError:
            raise
        except Exception as e:
            # A pull changes nothing on the broker (no commit offset): "unknown" and "failed" only
            # differ in whether an answer may have been lost.
            (op.info if outcome_unknown(e) else op.fail)(None, f"{type(e).__name__}: {e}")
            raise
        op.ok({"pull_status": result.pull_status.value, "next_begin_offset": result.next_begin_offset,
               "min_offset": result.min_offset, "max_offset": result.max_offset, "broker_addr": result.broker_addr,
               "messages": [describe_message(m, mq) for m in result.msg_found_list]})
        return result
