"""TransactionalMessageCheckService (RocketMQ ``broker/.../transaction/TransactionalMessageCheckService.java``):
every ``transactionCheckInterval`` (30 s) it runs ``TransactionalMessageServiceImpl.check`` with
``transactionTimeOut`` (6 s) and ``transactionCheckMax`` (15). It is a special service
(``BrokerController.changeSpecialServiceStatus``): it runs on the group's master, or with slave
acting master (RIP-32) on the smallest-id live slave while the group has no master.

Deviation, for the simulator's sake: RocketMQ's thread wakes every interval even on a broker that
never saw a half message; here the loop is not scheduled until the half queue holds a message (at
start, or when one is prepared), then runs on the same schedule (start + k x interval), so a
broker without transactions schedules nothing and its trace is unchanged.
"""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING

from rmqlab.broker.transaction.queue.default_transactional_message_check_listener import (
    DefaultTransactionalMessageCheckListener)
from rmqlab.broker.transaction.queue.transactional_message_util import build_half_topic

if TYPE_CHECKING:
    from rmqlab.broker.broker_controller import BrokerController

log = logging.getLogger("rmqlab.broker")


class TransactionalMessageCheckService:
    def __init__(self, broker: BrokerController):
        self.broker = broker
        self.listener = DefaultTransactionalMessageCheckListener(broker)
        self.started = False
        self.start_time = 0
        self._generation = 0
        self._task: asyncio.Task | None = None

    def start(self) -> None:
        if self.started:
            return
        self.started = True
        self._generation += 1
        self.start_time = self.broker.node.now_ms()
        log.info("Start transaction check service thread!")
        store = self.broker.message_store
        if store is not None and store.get_max_offset_in_queue(build_half_topic(), 0) > 0:
            self.notify_half_message()

    def shutdown(self) -> None:
        if not self.started:
            return
        self.started = False
        self._generation += 1
        if self._task is not None and not self._task.done():
            self._task.cancel()
        self._task = None
        log.info("End transaction check service thread!")

    def notify_half_message(self) -> None:
        """A half message exists: start the loop if it is not running yet."""
        if not self.started or (self._task is not None and not self._task.done()):
            return
        self._task = self.broker.node.spawn(self._run(self._generation), name="TransactionalMessageCheckService")

    async def _run(self, generation: int) -> None:
        node, bc = self.broker.node, self.broker.broker_config
        interval = bc.transactionCheckInterval
        # The first wake-up on the schedule the thread would have kept since start().
        elapsed = node.now_ms() - self.start_time
        await node.sleep((elapsed // interval + 1) * interval - elapsed)
        while self.started and generation == self._generation and not self.broker.is_shutdown():
            begin = node.now_ms()
            log.debug("Begin to check prepare message, begin time:%s", begin)
            try:
                await self.broker.transactional_message_service.check(bc.transactionTimeOut, bc.transactionCheckMax,
                                                                      self.listener)
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("TransactionalMessageCheckService check failed")
            log.debug("End to check prepare message, consumed time:%s", node.now_ms() - begin)
            if not (self.started and generation == self._generation):
                return
            await node.sleep(interval)
