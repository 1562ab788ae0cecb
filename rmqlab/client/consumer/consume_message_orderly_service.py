"""ConsumeMessageOrderlyService: hands each queue's messages to the listener one batch at a time,
in queue order, while this client holds the queue's lock at the broker
(``client/impl/consumer/ConsumeMessageOrderlyService.java``; clustering mode).

Locks. The broker's RebalanceLockManager gives a queue of a group to one client at a time (a lock
lives 60 s unless renewed). The client takes a queue only once ``RebalanceImpl.lock`` got its lock
(LOCK_BATCH_MQ), renews all of its locks with ``lockAll`` every ``REBALANCE_LOCK_INTERVAL`` (20 s,
the first 1 s after start), and treats a lock as gone 30 s after the last grant
(``ProcessQueue.is_lock_expired``); a queue that ``lockAll`` was refused is no longer ``locked``.

A consume request (one per queue, under the queue's ``MessageQueueLock``, at most
``consume_thread_max`` at once) runs only when the queue is locked and not expired; otherwise it
tries ``lock(mq)`` again 100 ms later. It then takes the queue's messages one batch
(``consume_message_batch_max_size``, 1) at a time and calls the listener under the
ProcessQueue's consume lock, until none is left, or:

* the queue is no longer locked, or its lock expired: relock 10 ms later (one-queue LOCK_BATCH_MQ),
  then consume again 10 ms after a grant, 3000 ms after a refusal;
* it ran for ``MAX_TIME_CONSUME_CONTINUOUSLY`` (60 s): consume again 10 ms later (other queues
  get a turn).

The listener's result (autoCommit, the default):

* SUCCESS (and the deprecated COMMIT / ROLLBACK) - the batch is committed: the queue's offset is
  one past its last message;
* SUSPEND_CURRENT_QUEUE_A_MOMENT, an exception or no status - ``checkReconsumeTimes``: a message
  that was already consumed ``maxReconsumeTimes`` times (-1, the default, means Integer.MAX_VALUE
  for orderly consumption: retried forever) is sent back (``sendMessageBack``: a normal send to
  ``%RETRY%<group>`` with RETRY_TOPIC, RECONSUME_TIME = n + 1, MAX_RECONSUME_TIMES, ORIGIN_MESSAGE_ID
  and delay level 3 + n; the broker sends it straight to ``%DLQ%<group>`` while the group holds a
  lock, ``SendMessageProcessor.handleRetryAndDLQ``); any other message (or one whose send-back
  failed) has its reconsume count raised and the whole batch goes back in front of the queue, to be
  consumed again after ``suspend_current_queue_time_millis`` (the context's, else the consumer's
  1000 ms, clamped to [10, 30000]). Nothing after it is consumed meanwhile: the queue stays in order.

With ``auto_commit`` off: COMMIT commits, ROLLBACK puts the batch back and suspends, SUCCESS
leaves the offset alone, SUSPEND as above.

Trace: each message handed to the listener is a ``client`` operation ``f="consume"`` with
``orderly: true``, its queue (``broker_name``, ``queue_id``) and ``queue_offset``; ``ok`` when the
batch was consumed, ``fail`` when it will be consumed again. Each send-back is an ``f="send_back"``
operation (``via``: RETRY_TOPIC).
"""

from __future__ import annotations

import asyncio
import inspect
import logging
from typing import TYPE_CHECKING

from rmqlab.client.consumer.message_listener_orderly import (ConsumeOrderlyContext, ConsumeOrderlyStatus,
                                                             MessageListenerOrderly)
from rmqlab.client.consumer.message_queue_lock import MessageQueueLock
from rmqlab.client.consumer.process_queue import ProcessQueue
from rmqlab.client.operation_tracer import describe_message
from rmqlab.common.message.message import MessageExt
from rmqlab.common.message.message_const import MessageConst
from rmqlab.remoting.protocol.header.broker.admin import MessageQueue

if TYPE_CHECKING:
    from rmqlab.client.consumer.default_mq_push_consumer import DefaultMQPushConsumer

log = logging.getLogger("rmqlab.client")

# rocketmq.client.maxTimeConsumeContinuously
MAX_TIME_CONSUME_CONTINUOUSLY = 60_000
INTEGER_MAX_VALUE = 2**31 - 1


class ConsumeMessageOrderlyService:
    def __init__(self, consumer: DefaultMQPushConsumer, listener: MessageListenerOrderly):
        self.consumer = consumer
        self.consumer_group = consumer.consumer_group
        self.message_listener = listener
        self.message_queue_lock = MessageQueueLock()
        self.consume_semaphore = asyncio.Semaphore(consumer.consume_thread_max)
        self.stopped = False
        self._tasks: dict[asyncio.Task, None] = {}  # insertion-ordered: cancelled in a repeatable order

    @property
    def node(self):
        return self.consumer.node

    # -- lifecycle -------------------------------------------------------------------------------
    def start(self) -> None:
        """Clustering: renew the locks every REBALANCE_LOCK_INTERVAL, the first time after 1 s."""
        self._spawn(self._lock_mq_periodically(), "lockMQPeriodically")

    async def _lock_mq_periodically(self) -> None:
        await self.node.sleep(1000)
        while not self.stopped:
            try:
                await self.lock_mq_periodically()
            except Exception:
                log.exception("scheduleAtFixedRate lockMQPeriodically exception")
            await self.node.sleep(ProcessQueue.REBALANCE_LOCK_INTERVAL)

    async def lock_mq_periodically(self) -> None:
        if not self.stopped:
            await self.consumer.rebalance_impl.lock_all()

    def shutdown(self) -> None:
        """Stop consuming (the consumer then unlocks every queue: ``unlock_all_mq``)."""
        self.stopped = True
        for task in list(self._tasks):
            task.cancel()
        self._tasks.clear()

    async def unlock_all_mq(self) -> None:
        await self.consumer.rebalance_impl.unlock_all(False)

    def _spawn(self, coro, name: str | None = None) -> None:
        task = self.node.spawn(coro, name=name or f"ConsumeMessageThread_{self.consumer_group}")
        self._tasks[task] = None
        task.add_done_callback(lambda t: self._tasks.pop(t, None))

    # -- requests --------------------------------------------------------------------------------
    def submit_consume_request(self, msgs: list[MessageExt] | None, pq: ProcessQueue, mq: MessageQueue,
                               dispatch_to_consume: bool) -> None:
        if dispatch_to_consume and not self.stopped:
            self._spawn(self._consume_request(pq, mq))

    def try_lock_later_and_reconsume(self, mq: MessageQueue, pq: ProcessQueue, delay_ms: int) -> None:
        async def later() -> None:
            await self.node.sleep(delay_ms)
            lock_ok = await self.lock_one_mq(mq)
            self.submit_consume_request_later(pq, mq, 10 if lock_ok else 3000)

        self._spawn(later(), "tryLockLaterAndReconsume")

    async def lock_one_mq(self, mq: MessageQueue) -> bool:
        if not self.stopped:
            return await self.consumer.rebalance_impl.lock(mq)
        return False

    def submit_consume_request_later(self, pq: ProcessQueue, mq: MessageQueue, suspend_time_millis: int) -> None:
        time_millis = suspend_time_millis
        if time_millis == -1:
            time_millis = self.consumer.suspend_current_queue_time_millis
        time_millis = min(max(time_millis, 10), 30_000)

        async def later() -> None:
            await self.node.sleep(time_millis)
            self.submit_consume_request(None, pq, mq, True)

        self._spawn(later(), "submitConsumeRequestLater")

    def reset_retry_and_namespace(self, msgs: list[MessageExt]) -> None:
        """A message from ``%RETRY%<group>`` is shown with the topic it was first sent to."""
        retry_topic = self.consumer.retry_topic
        for msg in msgs:
            original = msg.properties.get(MessageConst.PROPERTY_RETRY_TOPIC)
            if original is not None and msg.topic == retry_topic:
                msg.topic = original

    async def _consume_request(self, pq: ProcessQueue, mq: MessageQueue) -> None:
        """``ConsumeRequest.run`` (see the module docstring)."""
        if pq.dropped:
            log.warning("run, the message queue not be able to consume, because it's dropped. %s", mq)
            return
        async with self.consume_semaphore, self.message_queue_lock.fetch_lock_object(mq):
            node = self.node
            if not (pq.locked and not pq.is_lock_expired(node.now_ms())):
                if pq.dropped:
                    return
                self.try_lock_later_and_reconsume(mq, pq, 100)
                return
            begin = node.now_ms()
            continue_consume = True
            while continue_consume:
                if pq.dropped:
                    log.warning("the message queue not be able to consume, because it's dropped. %s", mq)
                    break
                if not pq.locked:
                    log.warning("the message queue not locked, so consume later, %s", mq)
                    self.try_lock_later_and_reconsume(mq, pq, 10)
                    break
                if pq.is_lock_expired(node.now_ms()):
                    log.warning("the message queue lock expired, so consume later, %s", mq)
                    self.try_lock_later_and_reconsume(mq, pq, 10)
                    break
                if node.now_ms() - begin > MAX_TIME_CONSUME_CONTINUOUSLY:
                    self.submit_consume_request_later(pq, mq, 10)
                    break
                msgs = pq.take_messages(self.consumer.consume_message_batch_max_size, node.now_ms())
                self.reset_retry_and_namespace(msgs)
                if not msgs:
                    break
                context = ConsumeOrderlyContext(mq)
                status = None
                error = None
                await pq.consume_lock.acquire_read()
                try:
                    if pq.dropped:
                        log.warning("consumeMessage, the message queue not be able to consume, because it's "
                                    "dropped. %s", mq)
                        break
                    tracer = self.consumer.client_factory.tracer
                    ops = [tracer.invoke("consume", dict(describe_message(m, mq), group=self.consumer_group,
                                                         orderly=True)) for m in msgs]
                    try:
                        status = self.message_listener.consume_message(list(msgs), context)
                        if inspect.isawaitable(status):
                            status = await status
                    except asyncio.CancelledError:
                        raise
                    except Exception as e:
                        log.warning("consumeMessage exception, Group: %s %s", self.consumer_group, mq, exc_info=True)
                        status, error = None, f"{type(e).__name__}: {e}"
                finally:
                    await pq.consume_lock.release_read()
                if not isinstance(status, ConsumeOrderlyStatus):
                    status = ConsumeOrderlyStatus.SUSPEND_CURRENT_QUEUE_A_MOMENT
                if status is not ConsumeOrderlyStatus.SUCCESS:
                    log.warning("consumeMessage Orderly return not OK, Group: %s MQ: %s: %s", self.consumer_group,
                                mq, status.value)
                consumed = (status in (ConsumeOrderlyStatus.SUCCESS, ConsumeOrderlyStatus.COMMIT)
                            or (context.auto_commit and status is ConsumeOrderlyStatus.ROLLBACK))
                for op in ops:
                    if consumed:
                        op.ok(status.value)
                    else:
                        op.fail(status.value, error)
                continue_consume = await self.process_consume_result(msgs, status, context, pq, mq)

    async def process_consume_result(self, msgs: list[MessageExt], status: ConsumeOrderlyStatus,
                                     context: ConsumeOrderlyContext, pq: ProcessQueue, mq: MessageQueue) -> bool:
        """``processConsumeResult``: commit, or put the batch back and suspend the queue; False
        when the queue's consuming stops here (it was suspended)."""
        continue_consume = True
        commit_offset = -1
        suspend = ConsumeOrderlyStatus.SUSPEND_CURRENT_QUEUE_A_MOMENT
        if context.auto_commit:
            if status in (ConsumeOrderlyStatus.COMMIT, ConsumeOrderlyStatus.ROLLBACK):
                log.warning("the message queue consume result is illegal, we think you want to ack these message %s",
                            mq)
                status = ConsumeOrderlyStatus.SUCCESS
            if status is ConsumeOrderlyStatus.SUCCESS:
                commit_offset = pq.commit()
            elif status is suspend:
                if await self.check_reconsume_times(msgs, mq):
                    pq.make_message_to_consume_again(msgs)
                    self.submit_consume_request_later(pq, mq, context.suspend_current_queue_time_millis)
                    continue_consume = False
                else:
                    commit_offset = pq.commit()
        else:
            if status is ConsumeOrderlyStatus.COMMIT:
                commit_offset = pq.commit()
            elif status is ConsumeOrderlyStatus.ROLLBACK:
                pq.rollback()
                self.submit_consume_request_later(pq, mq, context.suspend_current_queue_time_millis)
                continue_consume = False
            elif status is suspend:
                if await self.check_reconsume_times(msgs, mq):
                    pq.make_message_to_consume_again(msgs)
                    self.submit_consume_request_later(pq, mq, context.suspend_current_queue_time_millis)
                    continue_consume = False
        if commit_offset >= 0 and not pq.dropped:
            self.consumer.offset_store.update_offset(mq, commit_offset, False)
        return continue_consume

    def get_max_reconsume_times(self) -> int:
        """-1 (the default) means Integer.MAX_VALUE: an orderly consumer retries a message forever."""
        times = self.consumer.max_reconsume_times
        return INTEGER_MAX_VALUE if times == -1 else times

    async def check_reconsume_times(self, msgs: list[MessageExt], mq: MessageQueue) -> bool:
        """``checkReconsumeTimes``: send back the messages out of retries; True when the batch must
        be consumed again (a message with retries left, or a send-back that failed)."""
        suspend = False
        for msg in msgs:
            if msg.reconsume_times >= self.get_max_reconsume_times():
                msg.properties[MessageConst.PROPERTY_RECONSUME_TIME] = str(msg.reconsume_times)
                if not await self.send_message_back(msg, mq):
                    suspend = True
                    msg.reconsume_times += 1
            else:
                suspend = True
                msg.reconsume_times += 1
        return suspend

    async def send_message_back(self, msg: MessageExt, mq: MessageQueue) -> bool:
        """``sendMessageBack``: the message as a new one on ``%RETRY%<group>``, sent by the
        instance's inner producer (traced as ``f="send_back"``). Deviation: Java's new message
        shares the failed message's property map; rmqlab copies it."""
        delay_level = 3 + msg.reconsume_times
        value = dict(describe_message(msg, mq), group=self.consumer_group, delay_level=delay_level)
        op = self.consumer.client_factory.tracer.invoke("send_back", value)
        try:
            await self.consumer.send_message_back_as_normal_message(msg, self.get_max_reconsume_times())
        except asyncio.CancelledError:
            op.info(None, "cancelled: the consumer stopped")
            raise
        except Exception as e:
            log.error("sendMessageBack exception, group: %s msg: %s: %r", self.consumer_group, msg.msg_id, e)
            op.fail(None, f"{type(e).__name__}: {e}")
            return False
        op.ok({"via": "RETRY_TOPIC"})
        return True
