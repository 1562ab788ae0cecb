"""PopLongPollingService: POP_MESSAGE requests held until a message arrives or their poll time
ends (RocketMQ 5 ``broker/src/main/java/org/apache/rocketmq/broker/longpolling/PopLongPollingService.java``,
``PopRequest.java``, ``PollingResult.java``, ``PollingHeader.java``).

A pop that found nothing and asked for ``pollTime`` > 0 is parked under ``topic@group@queueId``
(queueId -1 for a pop of any queue) until ``bornTime + pollTime``. It is run again
(``PopMessageProcessor.execute_request_when_wakeup``) when

* a message is dispatched to a consume queue of the topic (the store's dispatcher, as for pull
  long polling; only with ``longPollingEnable``): for every group polling the topic, first the
  group's any-queue requests, then those of that queue, the oldest first, one request per
  arrival, if the message's tags code matches the request's filter (every
  ``popLongPollingForceNotifyInterval``-th offset wakes one regardless). A message arriving in a
  v1 pop retry topic (``%RETRY%group_topic``) wakes nothing, as in RocketMQ (only v2 retry
  topics are mapped back to their topic);
* the processor finds more left after answering (``restNum`` > 0), an orderly ack unblocks a
  queue, or an orderly queue's invisible time ends (ConsumerOrderInfoLockManager);
* its poll time is up: it is run once more and then answered POLLING_TIMEOUT.

``polling`` refuses with POLLING_FULL when more than ``popPollingSize`` requests wait for one key or
``maxPopPollingSize`` in all, and with POLLING_TIMEOUT when the request is already within 50 ms of
its end. Deviation: RocketMQ's service thread scans every 20 ms for expired requests; here each
held request has a timer on the node's clock at its timeout (the same moment, without the scan).
"""

from __future__ import annotations

import enum
import itertools
import logging
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from rmqlab.common.key_builder import build_polling_key, is_pop_retry_topic_v2, parse_normal_topic

if TYPE_CHECKING:
    from rmqlab.broker.broker_controller import BrokerController
    from rmqlab.remoting.remoting_command import RemotingCommand

log = logging.getLogger("RocketmqPop")

TIMEOUT_MARGIN_MS = 50  # PopRequest.isTimeout: now > expired - 50


class PollingResult(enum.Enum):
    POLLING_SUC = "POLLING_SUC"
    POLLING_FULL = "POLLING_FULL"
    POLLING_TIMEOUT = "POLLING_TIMEOUT"
    NOT_POLLING = "NOT_POLLING"


@dataclass
class PollingHeader:
    """``PollingHeader``: what polling needs of a pop request header."""

    consumer_group: str
    topic: str
    queue_id: int
    born_time: int
    poll_time: int

    @classmethod
    def of(cls, header) -> PollingHeader:
        return cls(header.consumer_group, header.topic, header.get_queue_id(), header.born_time, header.poll_time)


_OP = itertools.count()


@dataclass(eq=False)
class PopRequest:
    """``PopRequest``: a held request, ordered by expiry then arrival."""

    remoting_command: RemotingCommand
    channel: Any
    expired: int
    subscription_data: Any = None
    message_filter: Any = None
    op: int = field(default_factory=lambda: next(_OP))
    completed: bool = False
    key: str = ""
    timer: Any = field(default=None, repr=False)

    def is_timeout(self, now_ms: int) -> bool:
        return now_ms > self.expired - TIMEOUT_MARGIN_MS

    def complete(self) -> bool:
        """``complete``: true for the first caller only."""
        if self.completed:
            return False
        self.completed = True
        return True


class PopLongPollingService:
    def __init__(self, broker: BrokerController, processor: Any, notify_last: bool = False):
        self.broker = broker
        self.processor = processor
        self.notify_last = notify_last
        self.topic_cid_map: dict[str, dict[str, None]] = {}
        self.polling_map: dict[str, list[PopRequest]] = {}
        self.total_polling_num = 0
        self.stopped = False

    # -- lifecycle ----------------------------------------------------------------------------
    def start(self) -> None:
        if self.broker.broker_config.longPollingEnable:
            self.broker.message_store.reput_message_service.message_arriving_listeners.append(self._arriving)

    def shutdown(self) -> None:
        self.stopped = True
        for queue in self.polling_map.values():
            for request in queue:
                if request.timer is not None:
                    request.timer.cancel()
        self.polling_map.clear()
        self.total_polling_num = 0

    def _arriving(self, dispatch_request) -> None:
        # NotifyMessageArrivingListener -> PopMessageProcessor.notifyMessageArriving
        self.notify_message_arriving_with_retry_topic(dispatch_request.topic, dispatch_request.queue_id,
                                                      dispatch_request.consume_queue_offset + 1,
                                                      dispatch_request.tags_code)

    # -- holding ------------------------------------------------------------------------------
    def polling(self, channel: Any, request: RemotingCommand, header: PollingHeader, subscription_data: Any = None,
                message_filter: Any = None) -> PollingResult:
        if header.poll_time <= 0 or self.stopped:
            return PollingResult.NOT_POLLING
        cfg = self.broker.broker_config
        self.topic_cid_map.setdefault(header.topic, {}).setdefault(header.consumer_group, None)
        expired = header.born_time + header.poll_time
        pop_request = PopRequest(request, channel, expired, subscription_data, message_filter)
        if self.total_polling_num >= cfg.maxPopPollingSize:
            log.info("polling %s, result POLLING_FULL, total:%s", request, self.total_polling_num)
            return PollingResult.POLLING_FULL
        now = self.broker.node.now_ms()
        if pop_request.is_timeout(now):
            return PollingResult.POLLING_TIMEOUT
        key = build_polling_key(header.topic, header.consumer_group, header.queue_id)
        queue = self.polling_map.setdefault(key, [])
        if len(queue) > cfg.popPollingSize:
            log.info("polling %s, result POLLING_FULL, singleSize:%s", request, len(queue))
            return PollingResult.POLLING_FULL
        pop_request.key = key
        queue.append(pop_request)
        queue.sort(key=lambda r: (r.expired, r.op))
        self.total_polling_num += 1
        delay = max(0, pop_request.expired - TIMEOUT_MARGIN_MS - now + 1)
        pop_request.timer = self.broker.node.call_later(delay, self._expire, pop_request)
        return PollingResult.POLLING_SUC

    def _expire(self, request: PopRequest) -> None:
        """The 20 ms scan of RocketMQ's run(), for one request: wake it when it timed out."""
        request.timer = None
        queue = self.polling_map.get(request.key)
        if self.stopped or queue is None or request not in queue:
            return
        queue.remove(request)
        self.total_polling_num -= 1
        self.wake_up(request)

    # -- notifying ----------------------------------------------------------------------------
    def notify_message_arriving_with_retry_topic(self, topic: str, queue_id: int, offset: int = -1,
                                                 tags_code: int | None = None) -> None:
        notify_topic = parse_normal_topic(topic) if is_pop_retry_topic_v2(topic) else topic
        self.notify_message_arriving(notify_topic, queue_id, offset, tags_code)

    def notify_message_arriving(self, topic: str, queue_id: int, offset: int = -1, tags_code: int | None = None) -> None:
        cids = self.topic_cid_map.get(topic)
        if not cids:
            return
        interval = self.broker.broker_config.popLongPollingForceNotifyInterval
        force = interval > 0 and offset % interval == 0
        for cid in list(cids):
            if queue_id >= 0:
                self.notify_message_arriving_cid(topic, -1, cid, force, tags_code)
            self.notify_message_arriving_cid(topic, queue_id, cid, force, tags_code)

    def notify_message_arriving_cid(self, topic: str, queue_id: int, cid: str, force: bool = False,
                                    tags_code: int | None = None) -> bool:
        """Wake the first request held for ``topic@cid@queueId`` if the message matches its filter."""
        queue = self.polling_map.get(build_polling_key(topic, cid, queue_id))
        if not queue:
            return False
        request = self._poll_remoting_commands(queue)
        if request is None:
            return False
        if not force and request.message_filter is not None and request.subscription_data is not None:
            if not request.message_filter.is_matched_by_consume_queue(tags_code):
                queue.append(request)
                queue.sort(key=lambda r: (r.expired, r.op))
                self.total_polling_num += 1
                return False
        return self.wake_up(request)

    def _poll_remoting_commands(self, queue: list[PopRequest]) -> PopRequest | None:
        while queue:
            request = queue.pop() if self.notify_last else queue.pop(0)
            self.total_polling_num -= 1
            if request.channel.is_active():
                return request
            if request.timer is not None:
                request.timer.cancel()
        return None

    def wake_up(self, request: PopRequest) -> bool:
        if request is None or not request.complete():
            return False
        if request.timer is not None:
            request.timer.cancel()
            request.timer = None
        if not request.channel.is_active():
            return False
        self.processor.execute_request_when_wakeup(request.channel, request.remoting_command)
        return True

    def held_count(self) -> int:
        """How many pops are held now (for tests and the lab's widgets)."""
        return sum(len(q) for q in self.polling_map.values())
