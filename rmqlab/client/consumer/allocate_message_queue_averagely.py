"""AllocateMessageQueueAveragely: the default way a consumer group splits a topic's queues
(``client/consumer/rebalance/AllocateMessageQueueAveragely.java`` with the argument checks of
``AbstractAllocateMessageQueueStrategy``).

Every member computes the same split from the same inputs, with no coordination: the sorted
list of all queues (by topic, broker name, queue id) and the sorted list of the group's client
ids (GET_CONSUMER_LIST_BY_GROUP). The queues are cut into contiguous blocks, one per consumer in
client-id order; the first ``len(queues) % len(consumers)`` consumers get one queue more. With
more consumers than queues the last consumers get nothing::

    8 queues, 3 consumers -> [q0 q1 q2] [q3 q4 q5] [q6 q7]
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

from rmqlab.remoting.protocol.header.broker.admin import MessageQueue

log = logging.getLogger("rmqlab.client")


class AllocateMessageQueueAveragely:
    def get_name(self) -> str:
        return "AVG"

    def allocate(self, consumer_group: str, current_cid: str, mq_all: Sequence[MessageQueue],
                 cid_all: Sequence[str]) -> list[MessageQueue]:
        if not current_cid:
            raise ValueError("currentCID is empty")
        if not mq_all or not cid_all:
            return []
        if current_cid not in cid_all:
            # This client's heartbeat has not reached the broker yet: take nothing this round.
            log.info("[BUG] ConsumerGroup: %s The consumerId: %s not in cidAll: %s", consumer_group, current_cid,
                     list(cid_all))
            return []
        index = cid_all.index(current_cid)
        n, m = len(mq_all), len(cid_all)
        mod = n % m
        if n <= m:
            average_size = 1
        elif mod > 0 and index < mod:
            average_size = n // m + 1
        else:
            average_size = n // m
        start_index = index * average_size if (mod > 0 and index < mod) else index * average_size + mod
        size = min(average_size, n - start_index)
        return [mq_all[start_index + i] for i in range(max(0, size))]
