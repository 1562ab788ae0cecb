"""MQClientInstance: what the producers and consumers of one client process share
(``client/impl/factory/MQClientInstance.java``, with ``RebalanceService`` and
``ClientRemotingProcessor.notifyConsumerIdsChanged``).

It owns the connections (one RemotingClient, MQClientAPIImpl on top) and the view of the cluster:

* ``topic_route_table`` - the last route of every topic in use, from the name servers;
* ``broker_addr_table`` - brokerName -> {brokerId: address}, replaced from each new route, so a
  master that left the route (it died: the name server dropped it when its connection closed)
  disappears from here at the next route refresh, and a master that came back reappears.

Broker selection:

* sends go to the master only (``find_broker_address_in_publish``); a group without a master gets
  no sends (TopicPublishInfo leaves its queues out);
* pulls go to the broker id PullAPIWrapper remembers for the queue (the broker's
  ``suggestWhichBrokerId``, 0 at first); if that id is not in the table, a slave id tries id+1, and
  then any member is taken (``find_broker_address_in_subscribe(name, id, only_this_broker=False)``),
  which is how a consumer keeps reading from the slave while the master is gone;
* offsets go to the master, or any member when it is gone (RemoteBrokerOffsetStore).

Periodic tasks (``startScheduledTask``), on the node's clock:

    every pollNameServerInterval (30 s, first after 10 ms)  refresh the route of every topic in use
    every heartbeatBrokerInterval (30 s, first after 1 s)   drop brokers no route mentions, then
                                                            HEART_BEAT to every broker (to masters
                                                            only when there is no consumer)
    every persistConsumerOffsetInterval (5 s, first 10 s)   consumers write their offsets
    RebalanceService                                        rebalance every rebalance_interval
                                                            (1 s while unbalanced), and at once on
                                                            NOTIFY_CONSUMER_IDS_CHANGED (40)

A route is fetched for a topic only when it is needed and then refreshed; a topic the name server
does not know (TOPIC_NOT_EXIST) keeps the old route. A producer whose topic has no route at all
uses TBW102's (``is_default``), with at most ``defaultTopicQueueNums`` queues per broker; the broker
then creates the topic on the first send.

The instance's inner producer (``getDefaultMQProducer``, group ``CLIENT_INNER_PRODUCER``) sends a
failed message to ``%RETRY%<group>`` as a new message when CONSUMER_SEND_MSG_BACK fails (see
DefaultMQPushConsumer.send_message_back). Deviation: Java starts it with every instance, so every
Java client heartbeats that producer group; rmqlab starts it the first time it is needed, so a
client that never needs it sends what it sent before (heartbeats then carry it, as in Java).

Not implemented: heartbeat v2 fingerprints, thread-pool adjustment, requests from brokers other
than NOTIFY_CONSUMER_IDS_CHANGED (they get REQUEST_CODE_NOT_SUPPORTED).
"""

from __future__ import annotations

import asyncio
import inspect
import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from rmqlab.client.exceptions import MQClientException
from rmqlab.client.impl.mq_admin_impl import MQAdminImpl
from rmqlab.client.impl.mq_client_api_impl import MQClientAPIImpl
from rmqlab.client.producer.topic_publish_info import TopicPublishInfo
from rmqlab.common.constant.perm_name import PermName
from rmqlab.common.mix_all import RETRY_GROUP_TOPIC_PREFIX
from rmqlab.common.topic.topic_validator import TopicValidator
from rmqlab.remoting.protocol.header.broker.admin import MessageQueue
from rmqlab.remoting.protocol.header.broker.heartbeat import ConsumerData, HeartbeatData, ProducerData
from rmqlab.remoting.protocol.route.topic_route_data import MASTER_ID, TopicRouteData
from rmqlab.remoting.remoting_client import RemotingClient
from rmqlab.remoting.request_code import RequestCode

if TYPE_CHECKING:
    from rmqlab.client.client_config import ClientConfig
    from rmqlab.client.impl.mq_client_manager import MQClientManager
    from rmqlab.client.operation_tracer import OperationTracer
    from rmqlab.client.producer.default_mq_producer import DefaultMQProducer
    from rmqlab.runtime.node import Node, Timer

log = logging.getLogger("rmqlab.client")

ROUTE_REFRESH_INITIAL_DELAY_MS = 10
HEARTBEAT_INITIAL_DELAY_MS = 1_000
PERSIST_OFFSET_INITIAL_DELAY_MS = 10_000
CLIENT_INNER_PRODUCER_GROUP = "CLIENT_INNER_PRODUCER"  # MixAll.CLIENT_INNER_PRODUCER_GROUP


@dataclass(frozen=True)
class FindBrokerResult:
    """``FindBrokerResult``: a broker's address, whether it is a slave, its version."""

    broker_addr: str
    slave: bool
    broker_version: int = 0


def topic_route_data_to_topic_subscribe_info(topic: str, route: TopicRouteData) -> set[MessageQueue]:
    """``topicRouteData2TopicSubscribeInfo``: queues 0 .. readQueueNums-1 of every readable queue data."""
    return {MessageQueue(topic, qd.broker_name, i)
            for qd in route.queue_datas if PermName.is_readable(qd.perm)
            for i in range(qd.read_queue_nums)}


def _route_key(route: TopicRouteData | None) -> Any:
    """What ``topicRouteDataChanged`` compares: the route with its lists in a fixed order."""
    if route is None:
        return None
    return (sorted((q.broker_name, q.read_queue_nums, q.write_queue_nums, q.perm, q.topic_sys_flag)
                   for q in route.queue_datas),
            sorted((b.broker_name, b.cluster, tuple(sorted(b.broker_addrs.items()))) for b in route.broker_datas),
            route.order_topic_conf)


class MQClientInstance:
    def __init__(self, node: Node, client_config: ClientConfig, client_id: str, manager: MQClientManager):
        self.node = node
        self.client_config = client_config
        self.client_id = client_id
        self.manager = manager
        self.remoting_client = RemotingClient(node)
        self.remoting_client.register_processor(RequestCode.NOTIFY_CONSUMER_IDS_CHANGED,
                                                self._notify_consumer_ids_changed)
        self.remoting_client.register_processor(RequestCode.CHECK_TRANSACTION_STATE, self._check_transaction_state)
        self.mq_client_api_impl = MQClientAPIImpl(node, self.remoting_client)
        self.mq_client_api_impl.update_name_server_address_list(client_config.namesrv_addr_list())
        self.mq_admin_impl = MQAdminImpl(self)
        self.topic_route_table: dict[str, TopicRouteData] = {}
        self.broker_addr_table: dict[str, dict[int, str]] = {}
        self.broker_version_table: dict[str, dict[str, int]] = {}
        self.producer_table: dict[str, Any] = {}
        self.consumer_table: dict[str, Any] = {}
        self.admin_ext_table: dict[str, Any] = {}
        self._lock_namesrv = asyncio.Lock()
        self._lock_heartbeat = asyncio.Lock()
        self._timers: dict[str, Timer] = {}
        self._running = False
        self._rebalance_wakeup = asyncio.Event()
        self._rebalance_task: asyncio.Task | None = None
        self.default_mq_producer: DefaultMQProducer | None = None
        self._inner_producer_lock = asyncio.Lock()

    @property
    def tracer(self) -> OperationTracer:
        return self.manager.tracer

    # -- lifecycle -------------------------------------------------------------------------------
    def start(self) -> None:
        """Start the periodic tasks and the rebalance service (once; later calls do nothing)."""
        if self._running:
            return
        self._running = True
        cfg = self.client_config
        self._schedule("updateTopicRouteInfoFromNameServer", ROUTE_REFRESH_INITIAL_DELAY_MS,
                       cfg.poll_name_server_interval, self.update_all_topic_route_info_from_name_server)
        self._schedule("sendHeartbeatToAllBroker", HEARTBEAT_INITIAL_DELAY_MS, cfg.heartbeat_broker_interval,
                       self._clean_offline_broker_and_heartbeat)
        self._schedule("persistAllConsumerOffset", PERSIST_OFFSET_INITIAL_DELAY_MS,
                       cfg.persist_consumer_offset_interval, self.persist_all_consumer_offset)
        self._rebalance_task = self.node.spawn(self._rebalance_service(), name=f"RebalanceService {self.client_id}")

    async def shutdown(self) -> None:
        """Stop, once no producer, consumer or admin uses this instance any more (the inner
        producer does not count: it is stopped here, unregistering its group, as in Java)."""
        if any(g != CLIENT_INNER_PRODUCER_GROUP for g in self.producer_table) or self.consumer_table \
                or self.admin_ext_table:
            return
        if self.default_mq_producer is not None:
            inner, self.default_mq_producer = self.default_mq_producer, None
            await inner.shutdown(shutdown_factory=False)
        if not self._running:
            self.manager.remove_client_factory(self.client_id)
            return
        self._running = False
        for timer in self._timers.values():
            timer.cancel()
        self._timers.clear()
        if self._rebalance_task is not None:
            self._rebalance_task.cancel()
        await self.remoting_client.shutdown()
        self.manager.remove_client_factory(self.client_id)

    def on_crash(self) -> None:
        """The process died: its tasks and connections are gone already; forget the instance."""
        self._running = False
        self._timers.clear()
        self.manager.remove_client_factory(self.client_id)

    def _schedule(self, name: str, initial_delay_ms: float, period_ms: float, task: Callable[[], Any]) -> None:
        """``scheduleAtFixedRate`` on the node's clock; a coroutine's next run waits for it to end,
        and an exception is logged without stopping the schedule, as Java's tasks catch Throwable."""

        def fire() -> None:
            if not self._running:
                return

            async def run() -> None:
                try:
                    result = task()
                    if inspect.isawaitable(result):
                        await result
                except Exception:
                    log.exception("ScheduledTask %s exception", name)
                finally:
                    if self._running:
                        self._timers[name] = self.node.call_later(period_ms, fire)

            self.node.spawn(run(), name=name)

        self._timers[name] = self.node.call_later(initial_delay_ms, fire)

    async def get_default_mq_producer(self) -> DefaultMQProducer:
        """``getDefaultMQProducer``: the instance's inner producer (group CLIENT_INNER_PRODUCER,
        this instance's client config), started on first use (see the module docstring)."""
        async with self._inner_producer_lock:
            if self.default_mq_producer is None:
                from rmqlab.client.producer.default_mq_producer import DefaultMQProducer

                producer = DefaultMQProducer(CLIENT_INNER_PRODUCER_GROUP,
                                             client_config=self.client_config.clone_client_config())
                await producer.start(self.node, start_factory=False, client_factory=self)
                self.default_mq_producer = producer
            return self.default_mq_producer

    # -- registration ------------------------------------------------------------------------------
    def register_producer(self, group: str, producer: Any) -> bool:
        if group in self.producer_table:
            log.warning("the producer group[%s] exist already.", group)
            return False
        self.producer_table[group] = producer
        return True

    async def unregister_producer(self, group: str) -> None:
        self.producer_table.pop(group, None)
        await self._unregister_client(group, None)

    def register_consumer(self, group: str, consumer: Any) -> bool:
        if group in self.consumer_table:
            log.warning("the consumer group[%s] exist already.", group)
            return False
        self.consumer_table[group] = consumer
        return True

    async def unregister_consumer(self, group: str) -> None:
        self.consumer_table.pop(group, None)
        await self._unregister_client(None, group)

    def register_admin_ext(self, group: str, admin: Any) -> bool:
        if group in self.admin_ext_table:
            return False
        self.admin_ext_table[group] = admin
        return True

    def unregister_admin_ext(self, group: str) -> None:
        self.admin_ext_table.pop(group, None)

    async def _unregister_client(self, producer_group: str | None, consumer_group: str | None) -> None:
        """UNREGISTER_CLIENT to every broker known, so it forgets this client at once."""
        for broker_name, addrs in sorted(self.broker_addr_table.items()):
            for broker_id, addr in sorted(addrs.items()):
                try:
                    await self.mq_client_api_impl.unregister_client(addr, self.client_id, producer_group,
                                                                    consumer_group,
                                                                    self.client_config.mq_client_api_timeout)
                    log.info("unregister client[Producer: %s Consumer: %s] from broker[%s %s %s] success",
                             producer_group, consumer_group, broker_name, broker_id, addr)
                except Exception as e:
                    log.warning("unregister client exception from broker: %s: %r", addr, e)

    # -- routes ------------------------------------------------------------------------------------
    async def update_all_topic_route_info_from_name_server(self) -> None:
        """Refresh the route of every topic a consumer subscribes to or a producer publishes to."""
        topics: set[str] = set()
        for consumer in self.consumer_table.values():
            topics.update(s.topic for s in consumer.subscriptions())
        for producer in self.producer_table.values():
            topics.update(producer.get_publish_topic_list())
        for topic in sorted(topics):
            await self.update_topic_route_info_from_name_server(topic)

    async def update_topic_route_info_from_name_server(self, topic: str, is_default: bool = False,
                                                       producer: Any = None) -> bool:
        """``updateTopicRouteInfoFromNameServer``: fetch the route and, when it changed, update the
        broker table, the producers' publish info and the consumers' subscribe info. True when
        something was updated. With ``is_default`` the route is TBW102's, trimmed to the producer's
        defaultTopicQueueNums per broker."""
        async with self._lock_namesrv:
            timeout = self.client_config.mq_client_api_timeout
            try:
                if is_default and producer is not None:
                    route = await self.mq_client_api_impl.get_default_topic_route_info_from_name_server(timeout)
                    for qd in route.queue_datas:
                        nums = min(producer.default_topic_queue_nums, qd.read_queue_nums)
                        qd.read_queue_nums = qd.write_queue_nums = nums
                else:
                    route = await self.mq_client_api_impl.get_topic_route_info_from_name_server(topic, timeout)
            except MQClientException as e:
                # A group's retry topic and TBW102 may legitimately have no route: not worth a warning.
                if not (topic.startswith(RETRY_GROUP_TOPIC_PREFIX)
                        or topic == TopicValidator.AUTO_CREATE_TOPIC_KEY_TOPIC):
                    log.warning("updateTopicRouteInfoFromNameServer Exception: %s", e)
                return False
            except Exception as e:  # name servers unreachable or slow: keep the old route
                log.error("updateTopicRouteInfoFromNameServer Exception, topic %s: %r", topic, e)
                return False
            old = self.topic_route_table.get(topic)
            changed = _route_key(route) != _route_key(old)
            if not changed:
                changed = self._is_need_update_topic_route_info(topic)
            else:
                log.info("the topic[%s] route info changed, old[%s] ,new[%s]", topic, old, route)
            if not changed:
                return False
            for bd in route.broker_datas:
                self.broker_addr_table[bd.broker_name] = dict(bd.broker_addrs)
            publish_info = TopicPublishInfo.from_route(topic, route, self.node.random)
            publish_info.have_topic_router_info = True
            for p in self.producer_table.values():
                p.update_topic_publish_info(topic, publish_info)
            if self.consumer_table:
                subscribe_info = topic_route_data_to_topic_subscribe_info(topic, route)
                for c in self.consumer_table.values():
                    c.update_topic_subscribe_info(topic, subscribe_info)
            self.topic_route_table[topic] = route
            return True

    def _is_need_update_topic_route_info(self, topic: str) -> bool:
        return (any(p.is_publish_topic_need_update(topic) for p in self.producer_table.values())
                or any(c.is_subscribe_topic_need_update(topic) for c in self.consumer_table.values()))

    def _is_broker_addr_exist_in_topic_route_table(self, addr: str) -> bool:
        return any(addr in bd.broker_addrs.values()
                   for route in self.topic_route_table.values() for bd in route.broker_datas)

    def _clean_offline_broker(self) -> None:
        """``cleanOfflineBroker``: forget addresses no route mentions any more."""
        for broker_name in sorted(self.broker_addr_table):
            addrs = {i: a for i, a in self.broker_addr_table[broker_name].items()
                     if self._is_broker_addr_exist_in_topic_route_table(a)}
            if addrs:
                self.broker_addr_table[broker_name] = addrs
            else:
                del self.broker_addr_table[broker_name]
                log.info("the broker[%s] name's host is offline, remove it", broker_name)

    # -- broker selection --------------------------------------------------------------------------
    def find_broker_address_in_publish(self, broker_name: str | None) -> str | None:
        if broker_name is None:
            return None
        return self.broker_addr_table.get(broker_name, {}).get(MASTER_ID)

    def find_broker_address_in_subscribe(self, broker_name: str | None, broker_id: int,
                                         only_this_broker: bool) -> FindBrokerResult | None:
        """``findBrokerAddressInSubscribe`` (see the module docstring). "Any member" is the lowest
        id, the entry Java's HashMap of small Long keys iterates first."""
        if broker_name is None:
            return None
        addrs = self.broker_addr_table.get(broker_name)
        if not addrs:
            return None
        addr = addrs.get(broker_id)
        slave = broker_id != MASTER_ID
        if addr is None and slave:
            addr = addrs.get(broker_id + 1)
        if addr is None and not only_this_broker:
            first = min(addrs)
            addr, slave = addrs[first], first != MASTER_ID
        if addr is None:
            return None
        return FindBrokerResult(addr, slave, self.broker_version_table.get(broker_name, {}).get(addr, 0))

    def find_broker_addr_by_topic(self, topic: str) -> str | None:
        """A random broker group of the topic, its master or else a random member."""
        route = self.topic_route_table.get(topic)
        if route is None or not route.broker_datas:
            return None
        bd = route.broker_datas[self.node.random.randrange(len(route.broker_datas))]
        return bd.select_broker_addr(self.node.random)

    async def find_consumer_id_list(self, topic: str, group: str) -> list[str] | None:
        """GET_CONSUMER_LIST_BY_GROUP from one broker of the topic; None when it failed."""
        addr = self.find_broker_addr_by_topic(topic)
        if addr is None:
            await self.update_topic_route_info_from_name_server(topic)
            addr = self.find_broker_addr_by_topic(topic)
        if addr is None:
            return None
        try:
            return await self.mq_client_api_impl.get_consumer_id_list_by_group(
                addr, group, self.client_config.mq_client_api_timeout)
        except Exception as e:
            log.warning("getConsumerIdListByGroup exception, %s %s: %r", addr, group, e)
            return None

    # -- heartbeats --------------------------------------------------------------------------------
    async def _clean_offline_broker_and_heartbeat(self) -> None:
        self._clean_offline_broker()
        await self.send_heartbeat_to_all_broker_with_lock()

    def prepare_heartbeat_data(self) -> HeartbeatData:
        data = HeartbeatData(client_id=self.client_id)
        for group, consumer in sorted(self.consumer_table.items()):
            data.consumer_data_set.append(ConsumerData(
                group_name=group, consume_type=consumer.consume_type(), message_model=consumer.message_model,
                consume_from_where=consumer.consume_from_where, subscription_data_set=list(consumer.subscriptions()),
                unit_mode=False))
        for group in sorted(self.producer_table):
            data.producer_data_set.append(ProducerData(group))
        return data

    async def send_heartbeat_to_all_broker_with_lock(self) -> bool:
        async with self._lock_heartbeat:
            return await self._send_heartbeat_to_all_broker()

    async def _send_heartbeat_to_all_broker(self) -> bool:
        """HEART_BEAT to every broker of the table; producers alone skip the slaves (they never
        send to one). False when there was nothing to send or a broker did not answer."""
        heartbeat = self.prepare_heartbeat_data()
        consumer_empty = not heartbeat.consumer_data_set
        if consumer_empty and not heartbeat.producer_data_set:
            return False
        ok = True
        for broker_name, addrs in sorted(self.broker_addr_table.items()):
            for broker_id, addr in sorted(addrs.items()):
                if consumer_empty and broker_id != MASTER_ID:
                    continue
                try:
                    version = await self.mq_client_api_impl.send_heartbeat(
                        addr, heartbeat, self.client_config.mq_client_api_timeout)
                    self.broker_version_table.setdefault(broker_name, {})[addr] = version
                except Exception as e:
                    ok = False
                    log.info("send heart beat to broker[%s %s %s] failed: %r", broker_name, broker_id, addr, e)
        return ok

    # -- consumers ---------------------------------------------------------------------------------
    async def persist_all_consumer_offset(self) -> None:
        for _group, consumer in sorted(self.consumer_table.items()):
            await consumer.persist_consumer_offset()

    def rebalance_immediately(self) -> None:
        self._rebalance_wakeup.set()

    async def do_rebalance(self) -> bool:
        """Rebalance every consumer; False when one is not balanced yet."""
        balanced = True
        for _group, consumer in sorted(self.consumer_table.items()):
            try:
                if not await consumer.do_rebalance():
                    balanced = False
            except Exception:
                log.exception("doRebalance exception")
                balanced = False
        return balanced

    async def _rebalance_service(self) -> None:
        """``RebalanceService``: wait (or be woken), rebalance, wait less while unbalanced; never
        twice within rebalance_min_interval."""
        cfg = self.client_config
        wait_ms: float = cfg.rebalance_interval
        last = self.node.now_ms()
        while self._running:
            timer = self.node.call_later(wait_ms, self._rebalance_wakeup.set)
            try:
                await self._rebalance_wakeup.wait()
            finally:
                timer.cancel()
            self._rebalance_wakeup.clear()
            elapsed = self.node.now_ms() - last
            if elapsed < cfg.rebalance_min_interval:
                wait_ms = cfg.rebalance_min_interval - elapsed
                continue
            balanced = await self.do_rebalance()
            wait_ms = cfg.rebalance_interval if balanced else cfg.rebalance_min_interval
            last = self.node.now_ms()

    async def _notify_consumer_ids_changed(self, channel: Any, request: Any) -> None:
        """NOTIFY_CONSUMER_IDS_CHANGED (oneway, from a broker): a member joined or left a group."""
        log.info("receive broker's notification[%s], the consumer group: %s changed, rebalance immediately",
                 channel.remote_addr, (request.ext_fields or {}).get("consumerGroup"))
        self.rebalance_immediately()
        return None

    async def _check_transaction_state(self, channel: Any, request: Any) -> None:
        """CHECK_TRANSACTION_STATE (oneway, from a broker; ``ClientRemotingProcessor.checkTransactionState``):
        the message's PGROUP picks the producer, which answers with END_TRANSACTION."""
        from rmqlab.common.message.message_const import MessageConst
        from rmqlab.remoting.protocol.header.check_transaction_state_request_header import decode_check_request

        header, msg_ext = decode_check_request(request)
        if msg_ext is None:
            log.warning("checkTransactionState, decode message failed")
            return None
        group = msg_ext.properties.get(MessageConst.PROPERTY_PRODUCER_GROUP)
        if group is None:
            log.warning("checkTransactionState, pick producer group failed")
            return None
        producer = self.producer_table.get(group)
        check = getattr(producer, "check_transaction_state", None)
        if check is None:
            log.debug("checkTransactionState, pick producer by group[%s] failed", group)
            return None
        check(channel.remote_addr, msg_ext, header)
        return None
