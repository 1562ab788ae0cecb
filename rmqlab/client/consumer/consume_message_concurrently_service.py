"""ConsumeMessageConcurrentlyService: hands pulled messages to the listener and commits what it
consumed (``client/impl/consumer/ConsumeMessageConcurrentlyService.java``).

Pulled messages are cut into batches of ``consume_message_batch_max_size`` (1) and each batch runs
as a task of the node, at most ``consume_thread_max`` (20) at a time (Java's consume thread pool).
A retry-topic message gets its original topic back (``RETRY_TOPIC`` property) before the listener
sees it. The listener's status:

* CONSUME_SUCCESS - the batch (up to ``ack_index``) is done: removed from the ProcessQueue, and the
  queue's offset advanced to the smallest offset still held (in memory; written to the broker by
  the 5 s persist task and piggybacked on pulls);
* RECONSUME_LATER, an exception, or no status - every message of the batch failed. Each is sent
  back (``DefaultMQPushConsumer.send_message_back``: CONSUMER_SEND_MSG_BACK, code 36, with the
  context's ``delay_level_when_next_consume``, else a new message on ``%RETRY%<group>``); the broker
  re-delivers it through ``%RETRY%<group>`` after its delay level's time, with reconsumeTimes + 1
  (or, past maxReconsumeTimes, parks it in ``%DLQ%<group>``). A message sent back counts as
  consumed here: it leaves the ProcessQueue and the offset moves past it. Only a message that
  could not be sent back either way stays in the ProcessQueue (holding the committed offset back,
  so it is not lost if this consumer dies), its ``reconsume_times`` goes up by one, and it is handed
  to the listener again 5 s later (``submitConsumeRequestLater``).

A batch whose queue was given away (ProcessQueue dropped) while the listener ran is not committed:
the new owner will consume it again.

Trace: each message handed to the listener is a ``client`` operation ``f="consume"``; ``ok`` for
CONSUME_SUCCESS, ``fail`` otherwise (the message will come again). Each send-back is an operation
``f="send_back"``: ``ok`` with how it went back (``via``: CONSUMER_SEND_MSG_BACK, or RETRY_TOPIC
for the inner producer's send, itself an ``f="send"`` operation), ``fail`` when neither worked
and the message is retried locally, ``info`` when neither is known to have worked but one timed out
(it may come back from the retry topic as well as from the local retry).
"""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING

from rmqlab.client.consumer.message_listener import (ConsumeConcurrentlyContext, ConsumeConcurrentlyStatus,
                                                     MessageListenerConcurrently)
from rmqlab.client.consumer.process_queue import ProcessQueue
from rmqlab.client.operation_tracer import describe_message
from rmqlab.common.message.message import MessageExt
from rmqlab.common.message.message_const import MessageConst
from rmqlab.remoting.protocol.header.broker.admin import MessageQueue

if TYPE_CHECKING:
    from rmqlab.client.consumer.default_mq_push_consumer import DefaultMQPushConsumer

log = logging.getLogger("rmqlab.client")

SUBMIT_CONSUME_REQUEST_LATER_MS = 5000  # the fixed delay of submitConsumeRequestLater


class ConsumeMessageConcurrentlyService:
    def __init__(self, consumer: DefaultMQPushConsumer, listener: MessageListenerConcurrently):
        self.consumer = consumer
        self.listener = listener
        self.consume_semaphore = asyncio.Semaphore(consumer.consume_thread_max)
        self._tasks: dict[asyncio.Task, None] = {}  # insertion-ordered: cancelled in a repeatable order

    def submit_consume_request(self, msgs: list[MessageExt], pq: ProcessQueue, mq: MessageQueue) -> None:
        size = self.consumer.consume_message_batch_max_size
        for i in range(0, len(msgs), size):
            self._spawn(self._consume_request(msgs[i:i + size], pq, mq))

    def submit_consume_request_later(self, msgs: list[MessageExt], pq: ProcessQueue, mq: MessageQueue) -> None:
        async def later() -> None:
            await self.consumer.node.sleep(SUBMIT_CONSUME_REQUEST_LATER_MS)
            self.submit_consume_request(msgs, pq, mq)

        self._spawn(later())

    def _spawn(self, coro) -> None:
        task = self.consumer.node.spawn(coro, name=f"ConsumeMessageThread_{self.consumer.consumer_group}")
        self._tasks[task] = None
        task.add_done_callback(lambda t: self._tasks.pop(t, None))

    def shutdown(self) -> None:
        for task in list(self._tasks):
            task.cancel()
        self._tasks.clear()

    def reset_retry_and_namespace(self, msgs: list[MessageExt]) -> None:
        """A message from ``%RETRY%<group>`` is shown with the topic it was first sent to."""
        retry_topic = self.consumer.retry_topic
        for msg in msgs:
            original = msg.properties.get(MessageConst.PROPERTY_RETRY_TOPIC)
            if original is not None and msg.topic == retry_topic:
                msg.topic = original

    async def _consume_request(self, msgs: list[MessageExt], pq: ProcessQueue, mq: MessageQueue) -> None:
        async with self.consume_semaphore:
            if pq.dropped:
                log.info("the message queue not be able to consume, because it's dropped. group=%s %s",
                         self.consumer.consumer_group, mq)
                return
            self.reset_retry_and_namespace(msgs)
            context = ConsumeConcurrentlyContext(mq)
            now = str(self.consumer.node.now_ms())
            for msg in msgs:
                msg.properties[MessageConst.PROPERTY_CONSUME_START_TIMESTAMP] = now
            tracer = self.consumer.client_factory.tracer
            ops = [tracer.invoke("consume", dict(describe_message(m, mq), group=self.consumer.consumer_group))
                   for m in msgs]
            status: ConsumeConcurrentlyStatus | None
            error = None
            try:
                status = self.listener(list(msgs), context)
            except Exception as e:
                log.warning("consumeMessage exception, Group: %s %s", self.consumer.consumer_group, mq,
                            exc_info=True)
                status, error = None, f"{type(e).__name__}: {e}"
            if not isinstance(status, ConsumeConcurrentlyStatus):
                status = ConsumeConcurrentlyStatus.RECONSUME_LATER
            ack_index = context.ack_index if status is ConsumeConcurrentlyStatus.CONSUME_SUCCESS else -1
            for i, op in enumerate(ops):
                if i <= ack_index:
                    op.ok(status.value)
                else:
                    op.fail(ConsumeConcurrentlyStatus.RECONSUME_LATER.value, error)
            if pq.dropped:
                log.warning("processQueue is dropped without process consume result. messageQueue=%s", mq)
                return
            await self.process_consume_result(status, context, msgs, pq, mq)

    async def process_consume_result(self, status: ConsumeConcurrentlyStatus, context: ConsumeConcurrentlyContext,
                                     msgs: list[MessageExt], pq: ProcessQueue, mq: MessageQueue) -> None:
        """``processConsumeResult`` (clustering): send the failed messages back; retry locally
        those that could not be; remove the rest from the ProcessQueue and advance the offset."""
        if not msgs:
            return
        if status is ConsumeConcurrentlyStatus.CONSUME_SUCCESS:
            ack_index = min(context.ack_index, len(msgs) - 1)
        else:
            ack_index = -1
        msg_back_failed: list[MessageExt] = []
        for msg in msgs[ack_index + 1:]:
            if not pq.contains_message(msg):
                # Maybe the message expired and was cleaned: nothing to send back.
                log.info("Message is not found in its process queue; skip send-back procedure, topic=%s, "
                         "queueOffset=%s", msg.topic, msg.queue_offset)
                continue
            if not await self.send_message_back(msg, context, mq):
                msg.reconsume_times += 1
                msg_back_failed.append(msg)
        if msg_back_failed:
            log.info("send back failed, %d message(s) of %s will be consumed again in %d ms", len(msg_back_failed),
                     mq, SUBMIT_CONSUME_REQUEST_LATER_MS)
            self.submit_consume_request_later(msg_back_failed, pq, mq)
        failed_ids = {id(m) for m in msg_back_failed}
        done = [m for m in msgs if id(m) not in failed_ids]
        offset = pq.remove_message(done, self.consumer.node.now_ms())
        if offset >= 0 and not pq.dropped:
            self.consumer.offset_store.update_offset(mq, offset, True)

    async def send_message_back(self, msg: MessageExt, context: ConsumeConcurrentlyContext,
                                mq: MessageQueue) -> bool:
        """``sendMessageBack``: True when the message is back with the broker (traced as
        ``f="send_back"``)."""
        delay_level = context.delay_level_when_next_consume
        value = dict(describe_message(msg, mq), group=self.consumer.consumer_group, delay_level=delay_level)
        op = self.consumer.client_factory.tracer.invoke("send_back", value)
        try:
            via = await self.consumer.send_message_back(msg, delay_level, mq)
        except asyncio.CancelledError:
            op.info(None, "cancelled: the consumer stopped")
            raise
        except Exception as e:
            log.error("sendMessageBack exception, group: %s msg: %s: %r", self.consumer.consumer_group,
                      msg.msg_id, e)
            if getattr(e, "maybe_stored", False):
                # A timed-out attempt may have reached a broker: the message may come back from
                # %RETRY%<group> as well as from the local retry (at least once).
                op.info(None, f"{type(e).__name__}: {e}")
            else:
                op.fail(None, f"{type(e).__name__}: {e}")
            return False
        op.ok({"via": via})
        return True
