"""RebalanceImpl: which queues of its topics this push consumer consumes
(``client/impl/consumer/RebalanceImpl.java`` with ``RebalancePushImpl.java``; clustering mode).

For every subscribed topic (the retry topic ``%RETRY%<group>`` included), ``rebalance_by_topic``:

1. takes the topic's queues (from the route) and the group's members (GET_CONSUMER_LIST_BY_GROUP
   from one broker of the topic: the client ids of the heartbeats it holds), sorts both, and lets
   the strategy (AllocateMessageQueueAveragely) pick this client's share - every member computes
   the same split;
2. drops the ProcessQueues of queues no longer its own (their offsets are written to the broker
   first, so the next owner starts where this one stopped), and re-creates one whose pulls
   stalled for 2 minutes;
3. for each new queue computes where to start (``computePullFromWhere``): the group's offset on the
   broker; with none (a new group) CONSUME_FROM_LAST_OFFSET takes the queue's max offset (0 for a
   retry topic), CONSUME_FROM_FIRST_OFFSET 0, CONSUME_FROM_TIMESTAMP the offset of the consumer's
   ``consume_timestamp`` (SEARCH_OFFSET_BY_TIMESTAMP, LOWER; the max offset for a retry topic),
   asked of the route's brokerId 0 - the acting master while a RIP-32 group's master is down. (A broker answers offset 0 rather than "none" for
   a fresh queue whose first message is still in memory, ConsumerManageProcessor, so a new group reads a
   young topic from its start either way.) Then a pull request is dispatched 500 ms later;
4. when the share changed, the subscription's version is bumped and a heartbeat sent to every
   broker (``messageQueueChanged``), so brokers see the new subscription before the new pulls.

The result is "balanced" when the queues held equal the share computed; the RebalanceService
then waits the long interval, else 1 s.

An orderly consumer (ConsumeMessageOrderlyService) locks its queues at the broker
(LOCK_BATCH_MQ to the master, or the route's brokerId 0): a new queue is added only once ``lock(mq)``
got it (else the rebalance is not balanced and is retried), ``lock_all`` renews them, a queue removed
is unlocked (UNLOCK_BATCH_MQ, oneway) after its offset was written -- waiting at most 500 ms for
the listener to finish its message (the ProcessQueue's consume lock), or at once once the queue
was dropped 20 s after its last lock -- and shutdown unlocks them all. Deviation: Java asks for a
rebalance 500 ms after a lock failed (``rebalanceLater``); rmqlab's RebalanceService retries an
unbalanced result after ``rebalance_min_interval``.

Queue handover is not exclusive: between one member's last pull and the offset it wrote and the
next member's first pull, messages can be consumed by both (RocketMQ's at-least-once).
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from rmqlab.client.consumer.allocate_message_queue_averagely import AllocateMessageQueueAveragely
from rmqlab.client.consumer.process_queue import ProcessQueue
from rmqlab.client.consumer.remote_broker_offset_store import ReadOffsetType
from rmqlab.client.exceptions import MQClientException
from rmqlab.common.mix_all import RETRY_GROUP_TOPIC_PREFIX
from rmqlab.remoting.protocol.body.lock_batch_body import LockBatchRequestBody, UnlockBatchRequestBody
from rmqlab.remoting.protocol.header.broker.admin import MessageQueue
from rmqlab.remoting.protocol.header.broker.heartbeat import ConsumeFromWhere, SubscriptionData
from rmqlab.remoting.protocol.route.topic_route_data import MASTER_ID
from rmqlab.remoting.response_code import ResponseCode

if TYPE_CHECKING:
    from rmqlab.client.consumer.default_mq_push_consumer import DefaultMQPushConsumer

log = logging.getLogger("rmqlab.client")

DISPATCH_PULL_DELAY_MS = 500
LOCK_TIMEOUT_MS = 1000  # lockBatchMQ / unlockBatchMQ's timeout in lock, lockAll, unlock, unlockAll
# rocketmq.client.unlockDelayTimeMills: a dropped queue is unlocked without waiting for its
# listener once this long passed since its last lock.
UNLOCK_DELAY_TIME_MILLS = 20_000

# ConsumeFromWhere values that RocketMQ 5 treats as CONSUME_FROM_LAST_OFFSET (deprecated aliases).
_FROM_LAST = frozenset({ConsumeFromWhere.CONSUME_FROM_LAST_OFFSET,
                        ConsumeFromWhere.CONSUME_FROM_LAST_OFFSET_AND_FROM_MIN_WHEN_BOOT_FIRST,
                        ConsumeFromWhere.CONSUME_FROM_MIN_OFFSET, ConsumeFromWhere.CONSUME_FROM_MAX_OFFSET})


class RebalanceImpl:
    def __init__(self, consumer: DefaultMQPushConsumer):
        self.consumer = consumer
        self.consumer_group = consumer.consumer_group
        self.allocate_message_queue_strategy = (consumer.allocate_message_queue_strategy
                                                or AllocateMessageQueueAveragely())
        self.process_queue_table: dict[MessageQueue, ProcessQueue] = {}
        self.topic_subscribe_info_table: dict[str, set[MessageQueue]] = {}
        self.subscription_inner: dict[str, SubscriptionData] = {}

    @property
    def client_factory(self):
        return self.consumer.client_factory

    async def do_rebalance(self) -> bool:
        balanced = True
        for topic in sorted(self.subscription_inner):
            try:
                if not await self.rebalance_by_topic(topic):
                    balanced = False
            except Exception:
                if not topic.startswith(RETRY_GROUP_TOPIC_PREFIX):
                    log.exception("rebalance Exception")
                    balanced = False
        await self.truncate_message_queue_not_my_topic()
        return balanced

    async def rebalance_by_topic(self, topic: str) -> bool:
        mq_set = self.topic_subscribe_info_table.get(topic)
        cid_all = await self.client_factory.find_consumer_id_list(topic, self.consumer_group)
        if mq_set is None:
            if not topic.startswith(RETRY_GROUP_TOPIC_PREFIX):
                log.warning("doRebalance, %s, but the topic[%s] not exist.", self.consumer_group, topic)
        if cid_all is None:
            log.warning("doRebalance, %s %s, get consumer id list failed", self.consumer_group, topic)
        if mq_set is None or cid_all is None:
            return True
        mq_all = sorted(mq_set)
        cid_all = sorted(cid_all)
        strategy = self.allocate_message_queue_strategy
        try:
            allocated = set(strategy.allocate(self.consumer_group, self.client_factory.client_id, mq_all, cid_all))
        except Exception:
            log.exception("allocate message queue exception. strategy name: %s", strategy.get_name())
            return False
        changed = await self.update_process_queue_table_in_rebalance(topic, allocated)
        if changed:
            log.info("client rebalanced result changed. group=%s, topic=%s, clientId=%s, mqAllSize=%d, "
                     "cidAllSize=%d, rebalanceResultSize=%d", self.consumer_group, topic,
                     self.client_factory.client_id, len(mq_all), len(cid_all), len(allocated))
            await self.message_queue_changed(topic)
        return allocated == self.get_working_message_queue(topic)

    def get_working_message_queue(self, topic: str) -> set[MessageQueue]:
        return {mq for mq, pq in self.process_queue_table.items() if mq.topic == topic and not pq.dropped}

    async def truncate_message_queue_not_my_topic(self) -> None:
        for mq in sorted(self.process_queue_table):
            if mq.topic not in self.subscription_inner:
                pq = self.process_queue_table.pop(mq)
                pq.dropped = True
                log.info("doRebalance, %s, truncateMessageQueueNotMyTopic remove unnecessary mq, %s",
                         self.consumer_group, mq)

    async def update_process_queue_table_in_rebalance(self, topic: str, mq_set: set[MessageQueue]) -> bool:
        changed = False
        now = self.consumer.node.now_ms()
        to_remove: list[tuple[MessageQueue, ProcessQueue]] = []
        for mq in sorted(self.process_queue_table):
            pq = self.process_queue_table[mq]
            if mq.topic != topic:
                continue
            if mq not in mq_set:
                pq.dropped = True
                to_remove.append((mq, pq))
            elif pq.is_pull_expired(now):
                pq.dropped = True
                to_remove.append((mq, pq))
                log.error("[BUG]doRebalance, %s, try remove unnecessary mq, %s, because pull is pause, so try to "
                          "fixed it", self.consumer_group, mq)
        for mq, pq in to_remove:
            if await self.remove_unnecessary_message_queue(mq, pq):
                self.process_queue_table.pop(mq, None)
                changed = True
                log.info("doRebalance, %s, remove unnecessary mq, %s", self.consumer_group, mq)
        new_requests = []
        for mq in sorted(mq_set):
            if mq in self.process_queue_table:
                continue
            if self.consumer.consume_orderly and not await self.lock(mq):
                log.warning("doRebalance, %s, add a new mq failed, %s, because lock failed", self.consumer_group, mq)
                continue
            self.consumer.offset_store.remove_offset(mq)  # removeDirtyOffset
            try:
                next_offset = await self.compute_pull_from_where(mq)
            except MQClientException as e:
                log.warning("doRebalance, %s, add new mq failed, %s: %s", self.consumer_group, mq, e)
                continue
            if mq in self.process_queue_table:  # added meanwhile by a concurrent rebalance
                continue
            pq = ProcessQueue(self.consumer.node.now_ms())
            if self.consumer.consume_orderly:
                pq.locked = True  # just granted by lock(mq), before the ProcessQueue existed
            self.process_queue_table[mq] = pq
            log.info("doRebalance, %s, add a new mq, %s", self.consumer_group, mq)
            new_requests.append((mq, pq, next_offset))
            changed = True
        for mq, pq, next_offset in new_requests:
            self.consumer.dispatch_pull_request(mq, pq, next_offset, DISPATCH_PULL_DELAY_MS)
        return changed

    async def remove_unnecessary_message_queue(self, mq: MessageQueue, pq: ProcessQueue) -> bool:
        """The queue goes to another member: write its offset, then forget it (an orderly
        consumer also unlocks it: ``try_remove_order_message_queue``)."""
        if self.consumer.consume_orderly:
            await self.consumer.offset_store.persist(mq)
            return await self.try_remove_order_message_queue(mq, pq)
        await self.consumer.offset_store.persist(mq)
        self.consumer.offset_store.remove_offset(mq)
        return True

    async def try_remove_order_message_queue(self, mq: MessageQueue, pq: ProcessQueue) -> bool:
        """``RebalancePushImpl.tryRemoveOrderMessageQueue``: unlock once no message is being
        consumed (the consume lock within 500 ms), or at once when the queue was dropped and its
        last lock is UNLOCK_DELAY_TIME_MILLS old; False (kept, retried by the next rebalance) else."""
        node = self.consumer.node
        force_unlock = pq.dropped and node.now_ms() > pq.last_lock_timestamp + UNLOCK_DELAY_TIME_MILLS
        if not force_unlock and not await pq.consume_lock.try_write_lock(node, 500):
            pq.try_unlock_times += 1
            log.warning("[WRONG]mq is consuming, so can not unlock it, %s. maybe hanged for a while, %d", mq,
                        pq.try_unlock_times)
            return False
        try:
            await self.consumer.offset_store.persist(mq)
            self.consumer.offset_store.remove_offset(mq)
            pq.locked = False
            await self.unlock(mq, True)
            return True
        finally:
            if not force_unlock:
                await pq.consume_lock.release_write()

    # -- queue locks (orderly consumption) -------------------------------------------------------
    def _lock_broker_addr(self, broker_name: str) -> str | None:
        found = self.client_factory.find_broker_address_in_subscribe(broker_name, MASTER_ID, True)
        return found.broker_addr if found is not None else None

    def build_process_queue_table_by_broker_name(self) -> dict[str, list[MessageQueue]]:
        result: dict[str, list[MessageQueue]] = {}
        for mq in sorted(self.process_queue_table):
            if not self.process_queue_table[mq].dropped:
                result.setdefault(mq.broker_name, []).append(mq)
        return result

    async def lock(self, mq: MessageQueue) -> bool:
        """``lock(mq)``: LOCK_BATCH_MQ for one queue; True when granted (every queue granted is
        marked locked now)."""
        addr = self._lock_broker_addr(mq.broker_name)
        if addr is None:
            return False
        body = LockBatchRequestBody(self.consumer_group, self.client_factory.client_id, False, [mq])
        try:
            locked_mq = await self.client_factory.mq_client_api_impl.lock_batch_mq(addr, body, LOCK_TIMEOUT_MS)
        except Exception as e:
            log.error("lockBatchMQ exception, %s: %r", mq, e)
            return False
        now = self.consumer.node.now_ms()
        for m in locked_mq:
            pq = self.process_queue_table.get(m)
            if pq is not None:
                pq.locked = True
                pq.last_lock_timestamp = now
        lock_ok = mq in locked_mq
        log.info("message queue lock %s, %s %s", "OK" if lock_ok else "Failed", self.consumer_group, mq)
        return lock_ok

    async def lock_all(self) -> None:
        """``lockAll``: per broker group, one LOCK_BATCH_MQ with every queue held; the granted are
        locked (their lock time now), the refused are not."""
        for broker_name, mqs in sorted(self.build_process_queue_table_by_broker_name().items()):
            addr = self._lock_broker_addr(broker_name)
            if addr is None:
                continue
            body = LockBatchRequestBody(self.consumer_group, self.client_factory.client_id, False, list(mqs))
            try:
                lock_ok_mq_set = set(await self.client_factory.mq_client_api_impl.lock_batch_mq(
                    addr, body, LOCK_TIMEOUT_MS))
            except Exception as e:
                log.error("lockBatchMQ exception, %s: %r", mqs, e)
                continue
            now = self.consumer.node.now_ms()
            for mq in mqs:
                pq = self.process_queue_table.get(mq)
                if pq is None:
                    continue
                if mq in lock_ok_mq_set:
                    if not pq.locked:
                        log.info("the message queue locked OK, Group: %s %s", self.consumer_group, mq)
                    pq.locked = True
                    pq.last_lock_timestamp = now
                else:
                    pq.locked = False
                    log.warning("the message queue locked Failed, Group: %s %s", self.consumer_group, mq)

    async def unlock(self, mq: MessageQueue, oneway: bool) -> None:
        addr = self._lock_broker_addr(mq.broker_name)
        if addr is None:
            return
        body = UnlockBatchRequestBody(self.consumer_group, self.client_factory.client_id, False, [mq])
        try:
            await self.client_factory.mq_client_api_impl.unlock_batch_mq(addr, body, LOCK_TIMEOUT_MS, oneway=oneway)
            log.warning("unlock messageQueue. group:%s, clientId:%s, mq:%s", self.consumer_group,
                        self.client_factory.client_id, mq)
        except Exception as e:
            log.error("unlockBatchMQ exception, %s: %r", mq, e)

    async def unlock_all(self, oneway: bool) -> None:
        for broker_name, mqs in sorted(self.build_process_queue_table_by_broker_name().items()):
            addr = self._lock_broker_addr(broker_name)
            if addr is None:
                continue
            body = UnlockBatchRequestBody(self.consumer_group, self.client_factory.client_id, False, list(mqs))
            try:
                await self.client_factory.mq_client_api_impl.unlock_batch_mq(addr, body, LOCK_TIMEOUT_MS,
                                                                            oneway=oneway)
            except Exception as e:
                log.error("unlockBatchMQ exception, %s: %r", mqs, e)
                continue
            for mq in mqs:
                pq = self.process_queue_table.get(mq)
                if pq is not None:
                    pq.locked = False
                    log.info("the message queue unlock OK, Group: %s %s", self.consumer_group, mq)

    async def remove_process_queue(self, mq: MessageQueue) -> None:
        pq = self.process_queue_table.pop(mq, None)
        if pq is not None:
            pq.dropped = True
            await self.remove_unnecessary_message_queue(mq, pq)

    async def message_queue_changed(self, topic: str) -> None:
        """``messageQueueChanged``: a new subscription version, announced to the brokers."""
        subscription = self.subscription_inner.get(topic)
        if subscription is not None:
            subscription.sub_version = self.consumer.node.now_ms()
        await self.client_factory.send_heartbeat_to_all_broker_with_lock()

    async def compute_pull_from_where(self, mq: MessageQueue) -> int:
        """``computePullFromWhereWithException`` (see the module docstring); MQClientException when
        the broker could not be asked."""
        where = self.consumer.consume_from_where
        last_offset = await self.consumer.offset_store.read_offset(mq, ReadOffsetType.READ_FROM_STORE)
        if last_offset >= 0:
            return last_offset
        if last_offset != -1:
            raise MQClientException(ResponseCode.QUERY_NOT_FOUND, "Failed to query consume offset from offset store")
        if where in _FROM_LAST:
            if mq.topic.startswith(RETRY_GROUP_TOPIC_PREFIX):
                return 0
            try:
                return await self.client_factory.mq_admin_impl.max_offset(mq)
            except Exception as e:
                raise MQClientException(ResponseCode.SYSTEM_ERROR, f"Compute consume offset from last offset "
                                                                    f"exception, mq={mq}", e) from e
        if where is ConsumeFromWhere.CONSUME_FROM_TIMESTAMP:
            from rmqlab.client.consumer.default_mq_push_consumer import parse_consume_timestamp

            admin = self.client_factory.mq_admin_impl
            try:
                if mq.topic.startswith(RETRY_GROUP_TOPIC_PREFIX):
                    return await admin.max_offset(mq)
                return await admin.search_offset(mq, parse_consume_timestamp(self.consumer.consume_timestamp))
            except MQClientException:
                raise
            except Exception as e:
                raise MQClientException(ResponseCode.SYSTEM_ERROR, f"Compute consume offset from timestamp "
                                                                    f"exception, mq={mq}", e) from e
        return 0  # CONSUME_FROM_FIRST_OFFSET: an offset below the queue's start is fixed by OFFSET_ILLEGAL

    def destroy(self) -> None:
        for pq in self.process_queue_table.values():
            pq.dropped = True
        self.process_queue_table.clear()
