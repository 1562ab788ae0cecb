"""PullRequestHoldService: long polling, the broker holding a PULL_MESSAGE that found nothing.

RocketMQ ``broker/src/main/java/org/apache/rocketmq/broker/longpolling/PullRequestHoldService.java``,
``PullRequest.java``, ``ManyPullRequest.java`` and ``NotifyMessageArrivingListener.java``.

A pull with the suspend flag (sysFlag bit 2) that would answer PULL_NOT_FOUND is parked under
``topic@queueId`` instead. It is run again (``PullMessageProcessor.execute_request_when_wakeup``, which
no longer suspends) when

* a message arrives for that queue: the store's dispatcher calls :meth:`notify_message_arriving`
  with the queue's new max offset and the message's tags code, and requests that wait below that
  offset and whose subscription matches the tag are woken (``NotifyMessageArrivingListener``);
* the periodic check finds the queue grew (every 5 s with ``longPollingEnable``, else every
  ``shortPollingTimeMills``), which also catches what a tag mismatch left waiting;
* its time is up: RocketMQ notices that only at the next periodic check, so a request could be
  answered up to 5 s after its suspendTimeoutMillis.

Deviation: a request must be answered before the client gives up on it (the C++ client, PyPI
``rocketmq`` 0.4.4, drops a reply that comes after suspendTimeoutMillis), so each held request also
gets a timer that answers it :data:`REPLY_MARGIN_MS` before its suspendTimeoutMillis (at most half
of it before). The answer is then the same as RocketMQ's: the pull runs once more, normally
PULL_NOT_FOUND (19).

The connection stays usable meanwhile: the remoting layer serves every request in a task of its
own (clients multiplex everything over one connection), so a held pull blocks nothing behind it.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from rmqlab.broker.filter.expression_message_filter import ExpressionMessageFilter
from rmqlab.remoting.protocol.header.broker.heartbeat import SubscriptionData
from rmqlab.remoting.remoting_command import RemotingCommand

if TYPE_CHECKING:
    from rmqlab.broker.broker_controller import BrokerController

log = logging.getLogger("rmqlab.broker")

TOPIC_QUEUEID_SEPARATOR = "@"
LONG_POLLING_CHECK_INTERVAL_MS = 5 * 1000
# How long before its suspendTimeoutMillis a held request is answered (see the module docstring).
REPLY_MARGIN_MS = 500


@dataclass(eq=False)
class PullRequest:
    """``PullRequest``: a held PULL_MESSAGE and what is needed to run it again."""

    request_command: RemotingCommand
    client_channel: Any
    timeout_millis: int
    suspend_timestamp: int
    pull_from_this_offset: int
    subscription_data: SubscriptionData | None
    message_filter: ExpressionMessageFilter
    timer: Any = field(default=None, repr=False)

    @property
    def reply_deadline(self) -> int:
        """When the request is answered at the latest (node clock, ms)."""
        margin = min(REPLY_MARGIN_MS, self.timeout_millis // 2)
        return self.suspend_timestamp + self.timeout_millis - margin


class ManyPullRequest:
    """``ManyPullRequest``: the requests held for one queue."""

    def __init__(self) -> None:
        self.pull_request_list: list[PullRequest] = []

    def add_pull_request(self, request: PullRequest | list[PullRequest]) -> None:
        if isinstance(request, list):
            self.pull_request_list.extend(request)
        else:
            self.pull_request_list.append(request)

    def clone_list_and_clear(self) -> list[PullRequest] | None:
        if not self.pull_request_list:
            return None
        result, self.pull_request_list = self.pull_request_list, []
        return result

    def is_empty(self) -> bool:
        return not self.pull_request_list


class PullRequestHoldService:
    def __init__(self, broker: BrokerController):
        self.broker = broker
        self.pull_request_table: dict[str, ManyPullRequest] = {}
        self._stopped = False

    @staticmethod
    def build_key(topic: str, queue_id: int) -> str:
        return f"{topic}{TOPIC_QUEUEID_SEPARATOR}{queue_id}"

    # -- lifecycle ----------------------------------------------------------------------------
    def start(self) -> None:
        cfg = self.broker.broker_config
        period = LONG_POLLING_CHECK_INTERVAL_MS if cfg.longPollingEnable else cfg.shortPollingTimeMills
        self.broker.schedule_at_fixed_rate("PullRequestHoldService", period, period, self.check_hold_request)
        # NotifyMessageArrivingListener: the store's dispatcher wakes held pulls (only with long
        # polling enabled, DefaultMessageStore.notifyMessageArriveIfNecessary).
        if cfg.longPollingEnable:
            self.broker.message_store.reput_message_service.message_arriving_listeners.append(self._arriving)

    def shutdown(self) -> None:
        self._stopped = True
        for mpr in self.pull_request_table.values():
            for request in mpr.pull_request_list:
                if request.timer is not None:
                    request.timer.cancel()
        self.pull_request_table.clear()

    def _arriving(self, dispatch_request) -> None:
        # arriving(topic, queueId, logicOffset = consumeQueueOffset + 1, tagsCode, ...)
        self.notify_message_arriving(dispatch_request.topic, dispatch_request.queue_id,
                                     dispatch_request.consume_queue_offset + 1, dispatch_request.tags_code)

    # -- holding ------------------------------------------------------------------------------
    def suspend_pull_request(self, topic: str, queue_id: int, pull_request: PullRequest) -> None:
        key = self.build_key(topic, queue_id)
        self.pull_request_table.setdefault(key, ManyPullRequest()).add_pull_request(pull_request)
        delay = max(0, pull_request.reply_deadline - self.broker.node.now_ms())
        pull_request.timer = self.broker.node.call_later(delay, self._deadline, topic, queue_id, pull_request)

    def _deadline(self, topic: str, queue_id: int, pull_request: PullRequest) -> None:
        mpr = self.pull_request_table.get(self.build_key(topic, queue_id))
        if self._stopped or mpr is None or pull_request not in mpr.pull_request_list:
            return  # already woken
        mpr.pull_request_list.remove(pull_request)
        pull_request.timer = None
        self._wakeup(pull_request)

    def check_hold_request(self) -> None:
        """``checkHoldRequest``: recheck every queue with held requests against its max offset."""
        store = self.broker.message_store
        for key in list(self.pull_request_table):
            topic, sep, queue_id = key.rpartition(TOPIC_QUEUEID_SEPARATOR)
            if not sep:
                continue
            try:
                self.notify_message_arriving(topic, int(queue_id), store.get_max_offset_in_queue(topic, int(queue_id)))
            except Exception:
                log.exception("PullRequestHoldService: failed to check hold request failed, topic=%s, queueId=%s",
                              topic, queue_id)

    def notify_message_arriving(self, topic: str, queue_id: int, max_offset: int, tags_code: int | None = None) -> None:
        """Wake the held requests of the queue that can now find something (see the module docstring)."""
        mpr = self.pull_request_table.get(self.build_key(topic, queue_id))
        if mpr is None:
            return
        requests = mpr.clone_list_and_clear()
        if requests is None:
            return
        replay: list[PullRequest] = []
        now = self.broker.node.now_ms()
        for request in requests:
            newest = max_offset
            if newest <= request.pull_from_this_offset:
                newest = self.broker.message_store.get_max_offset_in_queue(topic, queue_id)
            if newest > request.pull_from_this_offset and request.message_filter.is_matched_by_consume_queue(tags_code):
                self._wakeup(request)
                continue
            if now >= request.suspend_timestamp + request.timeout_millis:
                self._wakeup(request)
                continue
            replay.append(request)
        if replay:
            mpr.add_pull_request(replay)

    def notify_master_online(self) -> None:
        """``notifyMasterOnline``: run every held request again (a slave's clients go back to it)."""
        for mpr in self.pull_request_table.values():
            for request in mpr.clone_list_and_clear() or []:
                log.info("notify master online, wakeup %s %s", request.client_channel, request.request_command)
                self._wakeup(request)

    def _wakeup(self, request: PullRequest) -> None:
        if request.timer is not None:
            request.timer.cancel()
            request.timer = None
        self.broker.pull_message_processor.execute_request_when_wakeup(request.client_channel, request.request_command)

    def held_count(self) -> int:
        """How many pulls are held now (for tests and the lab's widgets)."""
        return sum(len(m.pull_request_list) for m in self.pull_request_table.values())
