"""TransactionalOpBatchService (RocketMQ 5.1.0+, RIP-50:
``broker/.../transaction/queue/TransactionalOpBatchService.java`` with
``TransactionalMessageServiceImpl.batchSendOpMessage`` and ``MessageQueueOpContext``).

An ended half message is not marked at once: ``"<queue offset>,"`` is queued per half queue
(``delete_prepare_message``), and one op message per queue carries what is pending when the text
reaches ``transactionOpMsgMaxSize`` (4096) or ``transactionOpBatchInterval`` (3000 ms) after the
queue's last write. A queue whose context holds 20000 entries is written at once.

Deviation, for the simulator's sake: RocketMQ's thread wakes every interval even with nothing
queued; here the loop starts with the first ended transaction and sleeps while nothing is queued,
so a broker that never sees a transaction schedules nothing (its trace is unchanged). The writes
happen at the same times.
"""

from __future__ import annotations

import asyncio
import logging
from collections import deque
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from rmqlab.broker.transaction.queue.transactional_message_util import OFFSET_SEPARATOR

if TYPE_CHECKING:
    from rmqlab.broker.broker_controller import BrokerController
    from rmqlab.broker.transaction.queue.transactional_message_bridge import TransactionalMessageBridge

log = logging.getLogger("rmqlab.broker")

CONTEXT_QUEUE_CAPACITY = 20000  # new MessageQueueOpContext(now, 20000)


@dataclass
class MessageQueueOpContext:
    last_write_timestamp: int
    context_queue: deque = field(default_factory=deque)
    total_size: int = 0


class TransactionalOpBatchService:
    def __init__(self, broker: BrokerController, bridge: TransactionalMessageBridge):
        self.broker = broker
        self.bridge = bridge
        self.delete_context: dict[int, MessageQueueOpContext] = {}
        self.wakeup_timestamp = 0
        self._task: asyncio.Task | None = None
        self._wakeup: asyncio.Future | None = None
        self._stopped = False
        self._idle = False
        self._grid_start = 0  # when the loop started: its wake-ups are grid_start + k x interval

    # -- deletePrepareMessage -----------------------------------------------------------------
    async def delete_prepare_message(self, queue_id: int, queue_offset: int) -> bool:
        """Queue the op entry of one ended half message (see the module docstring)."""
        bc = self.broker.broker_config
        ctx = self.delete_context.get(queue_id)
        if ctx is None:
            ctx = self.delete_context.setdefault(queue_id, MessageQueueOpContext(self.broker.node.now_ms()))
        data = f"{queue_offset}{OFFSET_SEPARATOR}"
        self._ensure_started()
        if self._idle:  # the loop sleeps while nothing is queued: back on its schedule
            self.wakeup()
        if len(ctx.context_queue) < CONTEXT_QUEUE_CAPACITY:
            ctx.context_queue.append(data)
            ctx.total_size += len(data)
            if ctx.total_size > bc.transactionOpMsgMaxSize:
                self.wakeup()
            return True
        self.wakeup()
        body = self._take(ctx, data)
        if body and await self.bridge.write_op(queue_id, body):
            return True
        log.error("Transaction op message write failed. messageQueue: %s, data: %s", queue_id, data)
        return False

    def _take(self, ctx: MessageQueueOpContext, more: str | None) -> str:
        """``getOpMessage``: the pending entries (up to transactionOpMsgMaxSize), plus ``more``."""
        max_size = self.broker.broker_config.transactionOpMsgMaxSize
        parts = [more] if more else []
        size = len(more) if more else 0
        while ctx.context_queue and size < max_size:
            item = ctx.context_queue.popleft()
            ctx.total_size -= len(item)
            parts.append(item)
            size += len(item)
        ctx.last_write_timestamp = self.broker.node.now_ms()
        return "".join(parts)

    # -- the service thread -------------------------------------------------------------------
    def _ensure_started(self) -> None:
        if self._task is None and not self._stopped:
            now = self.broker.node.now_ms()
            self._grid_start = now
            self.wakeup_timestamp = now + self.broker.broker_config.transactionOpBatchInterval
            self._task = self.broker.node.spawn(self._run(), name="TransactionalOpBatchService")

    def wakeup(self) -> None:
        if self._wakeup is not None and not self._wakeup.done():
            self._wakeup.set_result(None)

    def shutdown(self) -> None:
        self._stopped = True
        self.wakeup()

    def _pending(self) -> bool:
        return any(ctx.context_queue for ctx in self.delete_context.values())

    async def _run(self) -> None:
        node = self.broker.node
        while not self._stopped and not self.broker.is_shutdown():
            interval = self.wakeup_timestamp - node.now_ms()
            self._wakeup = asyncio.get_running_loop().create_future()
            if interval > 0:
                timer = node.call_later(interval, lambda f=self._wakeup: f.done() or f.set_result(None))
                await self._wakeup
                timer.cancel()
            self._wakeup = None
            if self._stopped:
                return
            self.wakeup_timestamp = await self.batch_send_op_message()
            while not self._pending() and not self._stopped:  # idle: nothing to write until an end
                self._idle = True
                self._wakeup = asyncio.get_running_loop().create_future()
                await self._wakeup
                self._wakeup = None
                self._idle = False
                # The next wake-up the always-running thread would have had.
                interval = self.broker.broker_config.transactionOpBatchInterval
                elapsed = node.now_ms() - self._grid_start
                self.wakeup_timestamp = max(self.wakeup_timestamp,
                                            self._grid_start + (elapsed // interval + 1) * interval)

    async def batch_send_op_message(self) -> int:
        """``batchSendOpMessage``: write the queues due; the next wake-up time."""
        bc = self.broker.broker_config
        start = self.broker.node.now_ms()
        interval, max_size = bc.transactionOpBatchInterval, bc.transactionOpMsgMaxSize
        first_timestamp = start
        over_size = False
        send: dict[int, str] = {}
        for queue_id, ctx in sorted(self.delete_context.items()):
            if (ctx.total_size <= 0 or not ctx.context_queue
                    or (ctx.total_size < max_size and start - ctx.last_write_timestamp < interval)):
                continue
            body = self._take(ctx, None)
            if not body:
                continue
            send[queue_id] = body
            first_timestamp = min(first_timestamp, ctx.last_write_timestamp)
            if ctx.total_size >= max_size:
                over_size = True
        for queue_id, body in send.items():
            if not await self.bridge.write_op(queue_id, body):
                log.error("Transaction batch op message write failed. body is %s, queueId is %s", body, queue_id)
        if over_size:
            return start
        if self._pending():
            first_timestamp = min((c.last_write_timestamp for c in self.delete_context.values() if c.context_queue),
                                  default=first_timestamp)
        return first_timestamp + interval
