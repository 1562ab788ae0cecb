"""DefaultMQPushConsumer: the client pulls, the application is called with each message
(``client/consumer/DefaultMQPushConsumer.java`` with ``client/impl/consumer/DefaultMQPushConsumerImpl.java``;
the same wire sequence as the C++ PushConsumer of PyPI ``rocketmq`` 0.4.4).

    consumer = DefaultMQPushConsumer("CG", namesrv_addr="127.0.0.1:9876")
    consumer.subscribe("TopicTest", "TagA || TagB")
    consumer.register_message_listener(lambda msgs, ctx: ConsumeConcurrentlyStatus.CONSUME_SUCCESS)
    await consumer.start(node)
    ...
    await consumer.shutdown()

Clustering mode only: the members of a group share the queues (RebalanceImpl,
AllocateMessageQueueAveragely) and each message is consumed by one member; offsets are kept by the
brokers (RemoteBrokerOffsetStore). ``start``: the subscriptions plus ``%RETRY%<group>``, the routes
of the subscribed topics, a heartbeat to every broker, then a rebalance (which the broker's
NOTIFY_CONSUMER_IDS_CHANGED repeats whenever a member joins or leaves).

Pulling (``pullMessage``, one loop per queue held): long polls, sysFlag = suspend (2) | commit
offset (1, when an offset is known: the in-memory offset rides along as ``commitOffset``) |
subscription (4, only with ``post_subscription_when_pull``; otherwise the broker uses the
heartbeat's subscription), ``suspendTimeoutMillis`` 15 000 (BROKER_SUSPEND_MAX_TIME_MILLIS, the
C++ client's too), the request timing out after 30 s. Then:

    FOUND            messages to the ProcessQueue and the consume service; pull again at once
    NO_NEW_MSG,      pull again at once from next_begin_offset (with an empty ProcessQueue the
    NO_MATCHED_MSG   offset moves there too: filtered-out messages count as consumed)
    OFFSET_ILLEGAL   drop the queue, store next_begin_offset as its offset (frozen), write it to the
                     broker and rebalance at once (the queue is re-created from there)
    an error         pull again in 3 s (20 ms after FLOW_CONTROL)

and flow control: more than ``pull_threshold_for_queue`` (1000) messages held, or a span of more than
``consume_concurrently_max_span`` (2000) offsets, delays the pull 50 ms.

Master failure (2m-2s-async, RocketMQ's deployment guide "部署方式"): the pulls to the dead master fail
(every 3 s) until the next route refresh (at most pollNameServerInterval, 30 s) drops it from the
route; from then on the queue's pulls go to the slave, which serves the replicated messages
(RocketMQ 5 needs ``slaveReadEnable=true`` on the slave for that; without it the slave refuses every
pull), and the offsets are written to the slave (see RemoteBrokerOffsetStore). Known RocketMQ 5
behaviour kept as is: without slave-acting-master a slave answers an empty pull with
PULL_RETRY_IMMEDIATELY and "suggest broker 0", so a consumer that has caught up on a slave re-pulls
without waiting until its master is back. When the master returns and the route has it again, the
slave sends the consumer back to it (suggestWhichBrokerId 0).

Failed messages (RECONSUME_LATER, see ConsumeMessageConcurrentlyService) go back to the broker
(``sendMessageBack``): CONSUMER_SEND_MSG_BACK (36) to the master of the broker group the message
was pulled from, with delay level 0 (the broker picks 3 + reconsumeTimes) or the listener's
``delay_level_when_next_consume``, and ``max_reconsume_times`` (-1, the default, means 16); past it
the broker moves the message to ``%DLQ%<group>``. When that request fails (no master, no answer,
an error code), the message is sent as a new message to ``%RETRY%<group>`` through the instance's
inner producer (``sendMessageBackAsNormalMessage``: ``RETRY_TOPIC``, ``ORIGIN_MESSAGE_ID``,
``RECONSUME_TIME``, ``MAX_RECONSUME_TIMES``, ``DELAY`` = 3 + reconsumeTimes). The group's retry
messages come back through the ``%RETRY%<group>`` subscription.

Orderly consumption: register a ``MessageListenerOrderly`` and the messages of each queue are
consumed one at a time, in order, by the one member of the group holding the queue's lock at the
broker (ConsumeMessageOrderlyService, RebalanceImpl's locks). Its pulls differ: a queue not
locked (any more) is pulled again 3 s later (``pull_time_delay_mills_when_exception``), the first
pull after the lock was granted starts from the offset the broker has for the group (another
member may have consumed further), and there is no span limit.

Trace: every message handed to the listener (ConsumeMessageConcurrentlyService, ``f="consume"``),
and every send-back (``f="send_back"``); the push consumer's own pulls are not client operations
(their frames are in the trace).
"""

from __future__ import annotations

import asyncio
import datetime
import logging
from typing import TYPE_CHECKING

from rmqlab.client.client_config import ClientConfig
from rmqlab.client.consumer.allocate_message_queue_averagely import AllocateMessageQueueAveragely
from rmqlab.client.consumer.consume_message_concurrently_service import ConsumeMessageConcurrentlyService
from rmqlab.client.consumer.consume_message_orderly_service import ConsumeMessageOrderlyService
from rmqlab.client.consumer.message_listener import MessageListenerConcurrently
from rmqlab.client.consumer.message_listener_orderly import MessageListenerOrderly
from rmqlab.client.consumer.process_queue import ProcessQueue
from rmqlab.client.consumer.pull_api_wrapper import PullAPIWrapper
from rmqlab.client.consumer.pull_result import PullStatus, client_msg_id
from rmqlab.client.consumer.rebalance_impl import RebalanceImpl
from rmqlab.client.consumer.remote_broker_offset_store import ReadOffsetType, RemoteBrokerOffsetStore
from rmqlab.client.exceptions import MQBrokerException, MQClientException, outcome_unknown
from rmqlab.client.impl.mq_client_manager import MQClientManager
from rmqlab.common.message.message import Message, MessageExt
from rmqlab.common.message.message_const import MessageConst
from rmqlab.common.mix_all import RETRY_GROUP_TOPIC_PREFIX
from rmqlab.remoting.protocol.header.broker.admin import MessageQueue
from rmqlab.remoting.protocol.header.broker.heartbeat import (SUB_ALL, ConsumeFromWhere, ConsumeType, MessageModel,
                                                              SubscriptionData, build_subscription_data)
from rmqlab.remoting.protocol.header.broker.pull_message import PullSysFlag
from rmqlab.remoting.response_code import ResponseCode

if TYPE_CHECKING:
    from rmqlab.client.impl.mq_client_instance import MQClientInstance
    from rmqlab.runtime.node import Node

log = logging.getLogger("rmqlab.client")

PULL_TIME_DELAY_MILLS_WHEN_CACHE_FLOW_CONTROL = 50
PULL_TIME_DELAY_MILLS_WHEN_BROKER_FLOW_CONTROL = 20
BROKER_SUSPEND_MAX_TIME_MILLIS = 15_000
CONSUMER_TIMEOUT_MILLIS_WHEN_SUSPEND = 30_000
SEND_MESSAGE_BACK_TIMEOUT_MILLIS = 5000  # the timeout of sendMessageBack's request
DEFAULT_MAX_RECONSUME_TIMES = 16  # what maxReconsumeTimes -1 means for a concurrent consumer


DEFAULT_CONSUME_TIMESTAMP_BEFORE_MS = 30 * 60 * 1000  # consumeTimestamp's default: half an hour ago
CONSUME_TIMESTAMP_FORMAT = "%Y%m%d%H%M%S"  # UtilAll.YYYYMMDDHHMMSS


def format_consume_timestamp(millis: int) -> str:
    """``UtilAll.timeMillisToHumanString3``: local time, to the second."""
    return datetime.datetime.fromtimestamp(millis / 1000).strftime(CONSUME_TIMESTAMP_FORMAT)


def parse_consume_timestamp(text: str) -> int:
    """``UtilAll.parseDate(consumeTimestamp, YYYYMMDDHHMMSS).getTime()``: epoch ms of a local time;
    MQClientException with checkConfig's message when it does not parse."""
    try:
        if len(text) != 14 or not text.isdigit():
            raise ValueError(text)
        return int(datetime.datetime.strptime(text, CONSUME_TIMESTAMP_FORMAT).timestamp() * 1000)
    except (TypeError, ValueError):
        raise MQClientException(-1, "consumeTimestamp is invalid, the valid format is yyyyMMddHHmmss,but "
                                    f"received {text}") from None


class DefaultMQPushConsumer:
    def __init__(self, consumer_group: str, namesrv_addr: str | None = None, *,
                 client_config: ClientConfig | None = None,
                 consume_from_where: ConsumeFromWhere = ConsumeFromWhere.CONSUME_FROM_LAST_OFFSET,
                 allocate_message_queue_strategy: AllocateMessageQueueAveragely | None = None,
                 consume_thread_max: int = 20, consume_message_batch_max_size: int = 1, pull_batch_size: int = 32,
                 pull_interval: int = 0, pull_threshold_for_queue: int = 1000,
                 consume_concurrently_max_span: int = 2000, post_subscription_when_pull: bool = False,
                 pull_time_delay_mills_when_exception: int = 3000, max_reconsume_times: int = -1,
                 consume_timestamp: str | None = None, suspend_current_queue_time_millis: int = 1000):
        if consume_timestamp is not None:
            parse_consume_timestamp(consume_timestamp)  # checkConfig: refuse a malformed one now
        self.consumer_group = consumer_group
        self.client_config = client_config or ClientConfig()
        if namesrv_addr is not None:
            self.client_config.namesrv_addr = namesrv_addr
        self.message_model = MessageModel.CLUSTERING
        self.consume_from_where = consume_from_where
        # consumeTimestamp, "yyyyMMddHHmmss" in local time: where a new group starts with
        # CONSUME_FROM_TIMESTAMP. None: half an hour before start (Java: before construction).
        self.consume_timestamp = consume_timestamp
        self.allocate_message_queue_strategy = allocate_message_queue_strategy
        self.consume_thread_max = consume_thread_max
        self.consume_message_batch_max_size = consume_message_batch_max_size
        self.pull_batch_size = pull_batch_size
        self.pull_interval = pull_interval
        self.pull_threshold_for_queue = pull_threshold_for_queue
        self.consume_concurrently_max_span = consume_concurrently_max_span
        self.post_subscription_when_pull = post_subscription_when_pull
        self.pull_time_delay_mills_when_exception = pull_time_delay_mills_when_exception
        self.max_reconsume_times = max_reconsume_times
        # Orderly consumption: how long a queue waits after SUSPEND_CURRENT_QUEUE_A_MOMENT.
        self.suspend_current_queue_time_millis = suspend_current_queue_time_millis
        self.consume_orderly = False
        self.subscription: dict[str, str] = {}
        self.message_listener: MessageListenerConcurrently | MessageListenerOrderly | None = None
        self.node: Node | None = None
        self.client_factory: MQClientInstance | None = None
        self.rebalance_impl = RebalanceImpl(self)
        self.pull_api_wrapper: PullAPIWrapper | None = None
        self.offset_store: RemoteBrokerOffsetStore | None = None
        self.consume_message_service: ConsumeMessageConcurrentlyService | ConsumeMessageOrderlyService | None = None
        # Insertion-ordered (a dict, not a set): they are cancelled in a repeatable order.
        self._pull_tasks: dict[asyncio.Task, None] = {}
        self._running = False

    @property
    def retry_topic(self) -> str:
        return RETRY_GROUP_TOPIC_PREFIX + self.consumer_group

    def get_max_reconsume_times(self) -> int:
        """``getMaxReconsumeTimes``: -1 (the default) means 16."""
        return DEFAULT_MAX_RECONSUME_TIMES if self.max_reconsume_times == -1 else self.max_reconsume_times

    # -- configuration ---------------------------------------------------------------------------
    def subscribe(self, topic: str, sub_expression: str = SUB_ALL) -> None:
        """Consume ``topic``'s messages whose tag matches ``sub_expression`` ("*", "TagA || TagB")."""
        subscription = build_subscription_data(topic, sub_expression)
        self.subscription[topic] = sub_expression
        if self._running:
            subscription.sub_version = self.node.now_ms()
            self.rebalance_impl.subscription_inner[topic] = subscription
            self.node.spawn(self._announce_subscription(topic), name=f"subscribe {topic}")

    async def _announce_subscription(self, topic: str) -> None:
        await self.client_factory.update_topic_route_info_from_name_server(topic)
        await self.client_factory.send_heartbeat_to_all_broker_with_lock()
        self.client_factory.rebalance_immediately()

    def register_message_listener(self, listener: MessageListenerConcurrently | MessageListenerOrderly) -> None:
        """A function (concurrent consumption), or a MessageListenerOrderly (orderly)."""
        self.message_listener = listener
        self.consume_orderly = isinstance(listener, MessageListenerOrderly)

    # -- lifecycle -------------------------------------------------------------------------------
    async def start(self, node: Node) -> None:
        if self._running:
            return
        if self.message_listener is None:
            raise MQClientException(-1, "messageListener is null")
        self.node = node
        if self.consume_timestamp is None:
            self.consume_timestamp = format_consume_timestamp(node.now_ms() - DEFAULT_CONSUME_TIMESTAMP_BEFORE_MS)
        # copySubscription: the subscriptions, plus the group's retry topic in clustering mode.
        for topic, expression in sorted(self.subscription.items()):
            data = build_subscription_data(topic, expression)
            data.sub_version = node.now_ms()
            self.rebalance_impl.subscription_inner[topic] = data
        retry = build_subscription_data(self.retry_topic, SUB_ALL)
        retry.sub_version = node.now_ms()
        self.rebalance_impl.subscription_inner[self.retry_topic] = retry

        self.client_factory = MQClientManager.get_instance(node).get_or_create_mq_client_instance(self.client_config)
        self.pull_api_wrapper = PullAPIWrapper(self.client_factory, self.consumer_group)
        self.offset_store = RemoteBrokerOffsetStore(self.client_factory, self.consumer_group)
        if self.consume_orderly:
            self.consume_message_service = ConsumeMessageOrderlyService(self, self.message_listener)
        else:
            self.consume_message_service = ConsumeMessageConcurrentlyService(self, self.message_listener)
        if not self.client_factory.register_consumer(self.consumer_group, self):
            raise MQClientException(-1, f"The consumer group[{self.consumer_group}] has been created before, "
                                        "specify another name please.")
        self.client_factory.start()
        self._running = True
        if self.consume_orderly:
            self.consume_message_service.start()
        for topic in sorted(self.rebalance_impl.subscription_inner):
            await self.client_factory.update_topic_route_info_from_name_server(topic)
        await self.client_factory.send_heartbeat_to_all_broker_with_lock()
        self.client_factory.rebalance_immediately()

    async def shutdown(self) -> None:
        """Stop consuming, write the offsets, unregister (UNREGISTER_CLIENT), stop the instance."""
        if not self._running:
            return
        self._running = False
        self.consume_message_service.shutdown()
        for task in list(self._pull_tasks):
            task.cancel()
        if self.consume_orderly:
            await self.consume_message_service.unlock_all_mq()
        await self.persist_consumer_offset()
        await self.client_factory.unregister_consumer(self.consumer_group)
        await self.client_factory.shutdown()
        self.rebalance_impl.destroy()

    def on_crash(self) -> None:
        self._running = False
        if self.consume_orderly and self.consume_message_service is not None:
            self.consume_message_service.stopped = True
        self.rebalance_impl.destroy()
        if self.client_factory is not None:
            self.client_factory.consumer_table.pop(self.consumer_group, None)
            self.client_factory.on_crash()

    # -- MQConsumerInner -------------------------------------------------------------------------
    def consume_type(self) -> ConsumeType:
        return ConsumeType.CONSUME_PASSIVELY

    def subscriptions(self) -> list[SubscriptionData]:
        inner = self.rebalance_impl.subscription_inner
        return [inner[t] for t in sorted(inner)]

    async def do_rebalance(self) -> bool:
        if not self._running:
            return True
        return await self.rebalance_impl.do_rebalance()

    async def persist_consumer_offset(self) -> None:
        mqs = set(self.rebalance_impl.process_queue_table)
        await self.offset_store.persist_all(mqs)

    def update_topic_subscribe_info(self, topic: str, info: set[MessageQueue]) -> None:
        if topic in self.rebalance_impl.subscription_inner:
            self.rebalance_impl.topic_subscribe_info_table[topic] = info

    def is_subscribe_topic_need_update(self, topic: str) -> bool:
        return (topic in self.rebalance_impl.subscription_inner
                and topic not in self.rebalance_impl.topic_subscribe_info_table)

    # -- sending failed messages back ------------------------------------------------------------
    async def send_message_back(self, msg: MessageExt, delay_level: int, mq: MessageQueue) -> str:
        """``sendMessageBack(msg, delayLevel, mq)``: CONSUMER_SEND_MSG_BACK to the master of the
        message's broker group, falling back to a new message on ``%RETRY%<group>``. Returns how
        it went back ("CONSUMER_SEND_MSG_BACK" or "RETRY_TOPIC"); raises when both failed, the
        exception's ``maybe_stored`` telling whether either attempt may still have stored it (a
        timeout: the broker may have taken it after all)."""
        broker_name = mq.broker_name  # Java 5 reads msg.getBrokerName(), which the pull set to it
        maybe_stored = False
        try:
            broker_addr = self.client_factory.find_broker_address_in_publish(broker_name)
            if not broker_addr:
                raise MQClientException(-1, f"Broker[{broker_name}] master node does not exist")
            await self.client_factory.mq_client_api_impl.consumer_send_message_back(
                broker_addr, broker_name, msg, self.consumer_group, delay_level, SEND_MESSAGE_BACK_TIMEOUT_MILLIS,
                self.get_max_reconsume_times())
            return "CONSUMER_SEND_MSG_BACK"
        except asyncio.CancelledError:
            raise
        except Exception as e:
            log.error("Failed to send message back, consumerGroup=%s, brokerName=%s, mq=%s, message=%s: %r",
                      self.consumer_group, broker_name, mq, client_msg_id(msg), e)
            maybe_stored = outcome_unknown(e)
        try:
            await self.send_message_back_as_normal_message(msg)
        except Exception as e:
            maybe_stored = maybe_stored or getattr(e, "maybe_stored", outcome_unknown(e))
            e.maybe_stored = maybe_stored  # type: ignore[attr-defined]
            raise
        return "RETRY_TOPIC"

    async def send_message_back_as_normal_message(self, msg: MessageExt, max_reconsume_times: int | None = None) -> None:
        """``sendMessageBackAsNormalMessage``: the failed message as a new message on the group's
        retry topic, sent by the instance's inner producer (sync, with its retries), carrying
        ``max_reconsume_times`` (default: this consumer's; the orderly service passes its own, as
        ``ConsumeMessageOrderlyService.sendMessageBack`` does). Deviation: Java's new message
        shares the failed message's property map (so the properties set here also show on the
        original); rmqlab copies it, so a message retried locally afterwards looks as it was pulled."""
        new_msg = Message(self.retry_topic, msg.body, flag=msg.flag, properties=dict(msg.properties))
        origin_msg_id = new_msg.properties.get(MessageConst.PROPERTY_ORIGIN_MESSAGE_ID)
        new_msg.put_property(MessageConst.PROPERTY_ORIGIN_MESSAGE_ID,
                             origin_msg_id if origin_msg_id and origin_msg_id.strip() else client_msg_id(msg))
        new_msg.put_property(MessageConst.PROPERTY_RETRY_TOPIC, msg.topic)
        new_msg.put_property(MessageConst.PROPERTY_RECONSUME_TIME, str(msg.reconsume_times + 1))
        new_msg.put_property(MessageConst.PROPERTY_MAX_RECONSUME_TIMES, str(
            self.get_max_reconsume_times() if max_reconsume_times is None else max_reconsume_times))
        new_msg.clear_property(MessageConst.PROPERTY_TRANSACTION_PREPARED)
        new_msg.delay_time_level = 3 + msg.reconsume_times
        producer = await self.client_factory.get_default_mq_producer()
        await producer.send(new_msg)

    # -- pulling ---------------------------------------------------------------------------------
    def dispatch_pull_request(self, mq: MessageQueue, pq: ProcessQueue, next_offset: int, delay_ms: float) -> None:
        """Start the pull loop of a queue just assigned (``dispatchPullRequest``)."""
        if not self._running:
            return
        task = self.node.spawn(self._pull_loop(mq, pq, next_offset, delay_ms), name=f"PullMessageService {mq}")
        self._pull_tasks[task] = None
        task.add_done_callback(lambda t: self._pull_tasks.pop(t, None))

    async def _pull_loop(self, mq: MessageQueue, pq: ProcessQueue, next_offset: int, delay_ms: float) -> None:
        request = _PullRequest(mq, pq, next_offset)
        while True:
            if delay_ms > 0:
                await self.node.sleep(delay_ms)
            if pq.dropped or not self._running:
                log.info("the pull request[%s] is dropped.", mq)
                return
            delay = await self.pull_message(request)
            if delay is None:
                return
            delay_ms = delay

    async def pull_message(self, request: _PullRequest) -> float | None:
        """One round of ``pullMessage``; the delay before the next, None when the queue is done."""
        pq, mq = request.process_queue, request.message_queue
        if pq.dropped:
            return None
        pq.last_pull_timestamp = self.node.now_ms()
        if pq.msg_count > self.pull_threshold_for_queue:
            return PULL_TIME_DELAY_MILLS_WHEN_CACHE_FLOW_CONTROL
        if not self.consume_orderly:
            if pq.get_max_span() > self.consume_concurrently_max_span:
                return PULL_TIME_DELAY_MILLS_WHEN_CACHE_FLOW_CONTROL
        elif not pq.locked:
            log.info("pull message later because not locked in broker, %s", mq)
            return self.pull_time_delay_mills_when_exception
        elif not request.previously_locked:
            # The first pull since the lock was granted: start where the group's offset is now.
            try:
                offset = await self.rebalance_impl.compute_pull_from_where(mq)
            except Exception as e:
                log.error("Failed to compute pull offset, %s: %r", mq, e)
                return self.pull_time_delay_mills_when_exception
            log.info("the first time to pull message, so fix offset from broker. %s NewOffset: %d brokerBusy: %s",
                     mq, offset, offset < request.next_offset)
            request.previously_locked = True
            request.next_offset = offset
        subscription = self.rebalance_impl.subscription_inner.get(mq.topic)
        if subscription is None:
            log.warning("find the consumer's subscription failed, %s", mq)
            return self.pull_time_delay_mills_when_exception
        commit_offset_value = await self.offset_store.read_offset(mq, ReadOffsetType.READ_FROM_MEMORY)
        commit_offset_enable = commit_offset_value > 0
        sub_expression = subscription.sub_string if self.post_subscription_when_pull else None
        sys_flag = PullSysFlag.build_sys_flag(commit_offset=commit_offset_enable, suspend=True,
                                              subscription=sub_expression is not None)
        try:
            result = await self.pull_api_wrapper.pull_kernel_impl(
                mq, sub_expression, subscription.expression_type, subscription.sub_version, request.next_offset,
                self.pull_batch_size, sys_flag, max(commit_offset_value, 0), BROKER_SUSPEND_MAX_TIME_MILLIS,
                CONSUMER_TIMEOUT_MILLIS_WHEN_SUSPEND)
        except asyncio.CancelledError:
            raise
        except Exception as e:
            if not mq.topic.startswith(RETRY_GROUP_TOPIC_PREFIX):
                log.warning("execute the pull request exception, group=%s, messageQueue=%s: %r",
                            self.consumer_group, mq, e)
            if isinstance(e, MQBrokerException) and e.response_code == ResponseCode.FLOW_CONTROL:
                return PULL_TIME_DELAY_MILLS_WHEN_BROKER_FLOW_CONTROL
            return self.pull_time_delay_mills_when_exception
        if pq.dropped:
            return None
        self.pull_api_wrapper.process_pull_result(mq, result, subscription)
        status = result.pull_status
        if status is PullStatus.FOUND:
            request.next_offset = result.next_begin_offset
            if not result.msg_found_list:
                return 0
            dispatch_to_consume = pq.put_message(result.msg_found_list)
            if self.consume_orderly:
                self.consume_message_service.submit_consume_request(result.msg_found_list, pq, mq,
                                                                    dispatch_to_consume)
            else:
                self.consume_message_service.submit_consume_request(result.msg_found_list, pq, mq)
            return self.pull_interval
        if status in (PullStatus.NO_NEW_MSG, PullStatus.NO_MATCHED_MSG):
            request.next_offset = result.next_begin_offset
            self._correct_tags_offset(request)
            return 0
        # OFFSET_ILLEGAL: restart the queue from the broker's offset.
        log.warning("the pull request offset illegal, %s %s", mq, result)
        request.next_offset = result.next_begin_offset
        pq.dropped = True
        self.offset_store.update_and_freeze_offset(mq, request.next_offset)
        await self.offset_store.persist(mq)
        await self.rebalance_impl.remove_process_queue(mq)
        self.client_factory.rebalance_immediately()
        return None

    def _correct_tags_offset(self, request: _PullRequest) -> None:
        if request.process_queue.msg_count == 0:
            self.offset_store.update_offset(request.message_queue, request.next_offset, True)


class _PullRequest:
    """``PullRequest``: a queue, its ProcessQueue and the next offset to pull."""

    __slots__ = ("message_queue", "process_queue", "next_offset", "previously_locked")

    def __init__(self, mq: MessageQueue, pq: ProcessQueue, next_offset: int):
        self.message_queue, self.process_queue, self.next_offset = mq, pq, next_offset
        self.previously_locked = False  # orderly: the first pull since the lock re-reads the offset
