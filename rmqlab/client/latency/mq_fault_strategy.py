"""MQFaultStrategy: the producer's queue selection with send-latency fault avoidance
(``client/latency/MQFaultStrategy.java``).

Queue selection is a round robin over the topic's writable queues (TopicPublishInfo). Filters
then skip queues:

* on a retry, the broker the last attempt went to (``BrokerFilter``), so a retry goes to another
  broker when there is one;
* with ``sendLatencyFaultEnable``: brokers not *available* in LatencyFaultTolerance, then (if no
  queue passed) brokers not *reachable*; if still nothing, plain round robin. On a retry the
  round-robin index is reset to a random value first.

After every attempt the producer reports the broker's latency (``updateFaultItem``). The isolation
is ``notAvailableDuration[i]`` for the largest ``latencyMax[i]`` the latency reaches::

    latencyMax            50  100  550   1800  3000  5000   15000  ms
    notAvailableDuration   0    0  2000  5000  6000  10000  30000  ms

A failed attempt counts as a latency of 10 000 ms (``isolation``), hence 10 s out of rotation. With
the fault strategy off, only the retry filter applies and a dead broker keeps its turn in the
round robin (each send tries it first, then retries elsewhere).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from rmqlab.client.latency.latency_fault_tolerance import LatencyFaultTolerance

if TYPE_CHECKING:
    from rmqlab.client.producer.topic_publish_info import TopicPublishInfo
    from rmqlab.remoting.protocol.header.broker.admin import MessageQueue

LATENCY_MAX = (50, 100, 550, 1800, 3000, 5000, 15000)
NOT_AVAILABLE_DURATION = (0, 0, 2000, 5000, 6000, 10000, 30000)
ISOLATION_LATENCY = 10_000  # what a failed attempt counts as


class MQFaultStrategy:
    def __init__(self, clock: Callable[[], int], send_latency_fault_enable: bool = False):
        self.latency_fault_tolerance = LatencyFaultTolerance(clock)
        self.send_latency_fault_enable = send_latency_fault_enable
        self.latency_max = LATENCY_MAX
        self.not_available_duration = NOT_AVAILABLE_DURATION

    def select_one_message_queue(self, tp_info: TopicPublishInfo, last_broker_name: str | None,
                                 reset_index: bool) -> MessageQueue | None:
        """``selectOneMessageQueue``: see the module docstring for the order of the filters."""
        if last_broker_name is None and not self.send_latency_fault_enable:
            # A first attempt without fault avoidance: no filter can skip a queue, so the next one
            # in the round robin (what the filtered turn below takes at its first step).
            return tp_info.select_one_message_queue()

        def other_broker(mq: MessageQueue) -> bool:
            return last_broker_name is None or mq.broker_name != last_broker_name

        if self.send_latency_fault_enable:
            if reset_index:
                tp_info.reset_index()
            lft = self.latency_fault_tolerance
            mq = tp_info.select_one_message_queue(lambda q: lft.is_available(q.broker_name), other_broker)
            if mq is not None:
                return mq
            mq = tp_info.select_one_message_queue(lambda q: lft.is_reachable(q.broker_name), other_broker)
            if mq is not None:
                return mq
            return tp_info.select_one_message_queue()
        mq = tp_info.select_one_message_queue(other_broker)
        if mq is not None:
            return mq
        return tp_info.select_one_message_queue()

    def update_fault_item(self, broker_name: str, current_latency: int, isolation: bool, reachable: bool) -> None:
        """``updateFaultItem``: only with the strategy enabled."""
        if self.send_latency_fault_enable:
            duration = self.compute_not_available_duration(ISOLATION_LATENCY if isolation else current_latency)
            self.latency_fault_tolerance.update_fault_item(broker_name, current_latency, duration, reachable)

    def compute_not_available_duration(self, current_latency: int) -> int:
        for i in range(len(self.latency_max) - 1, -1, -1):
            if current_latency >= self.latency_max[i]:
                return self.not_available_duration[i]
        return 0
