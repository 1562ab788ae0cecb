"""TopicPublishInfo: the queues a producer may send a topic's messages to
(``client/impl/producer/TopicPublishInfo.java`` with ``MQClientInstance.topicRouteData2TopicPublishInfo``
and ``client/common/ThreadLocalIndex.java``).

Built from the topic's route: for every queue data (sorted by broker name) whose perm is
writable and whose broker group has a master (id 0), queues 0 .. writeQueueNums-1. A group whose
master is gone has no publish queues: sends go to the other groups (RocketMQ's deployment guide "部署方式": "no
automatic failover" - a slave never takes writes). An ordered topic's route (``orderTopicConf``,
"brokerA:4;brokerB:4") lists its queues instead.

Selection is a round robin (``sendWhichQueue``) starting at a random index, optionally through
filters that skip queues (MQFaultStrategy): at most one full turn is tried.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from rmqlab.common.constant.perm_name import PermName
from rmqlab.remoting.protocol.header.broker.admin import MessageQueue
from rmqlab.remoting.protocol.route.topic_route_data import MASTER_ID

if TYPE_CHECKING:
    import random  # only the node's seeded random.Random is ever passed in

    from rmqlab.remoting.protocol.route.topic_route_data import TopicRouteData

QueueFilter = Callable[[MessageQueue], bool]
_POSITIVE_MASK = 0x7FFFFFFF


def _java_int(value: int) -> int:
    value &= 0xFFFFFFFF
    return value - (1 << 32) if value >= 1 << 31 else value


class ThreadLocalIndex:
    """``ThreadLocalIndex``: a counter that starts at a random int and wraps like a Java int.

    Java keeps one per thread; a node's asyncio code runs on one thread, so there is one.
    ``rng`` is the node's seeded random."""

    def __init__(self, rng: random.Random):
        self._rng = rng
        self._index: int | None = None

    def increment_and_get(self) -> int:
        index = self._index
        if index is None:
            index = _java_int(self._rng.getrandbits(32))  # Random.nextInt()
        # _java_int(index + 1): an int in range only wraps at Integer.MAX_VALUE.
        index = index + 1 if index != 0x7FFFFFFF else -0x80000000
        self._index = index
        return index & _POSITIVE_MASK

    def reset(self) -> None:
        self._index = self._rng.randrange(0x7FFFFFFF)  # Math.abs(nextInt(Integer.MAX_VALUE))


class TopicPublishInfo:
    def __init__(self, rng: random.Random):
        self.order_topic = False
        self.have_topic_router_info = False
        self.message_queue_list: list[MessageQueue] = []
        self.send_which_queue = ThreadLocalIndex(rng)
        self.topic_route_data: TopicRouteData | None = None

    @classmethod
    def from_route(cls, topic: str, route: TopicRouteData, rng: random.Random) -> TopicPublishInfo:
        """``topicRouteData2TopicPublishInfo`` (see the module docstring)."""
        info = cls(rng)
        info.topic_route_data = route
        if route.order_topic_conf:
            for broker in route.order_topic_conf.split(";"):
                name, nums = broker.split(":")
                info.message_queue_list.extend(MessageQueue(topic, name, i) for i in range(int(nums)))
            info.order_topic = True
            return info
        masters = {bd.broker_name for bd in route.broker_datas if MASTER_ID in bd.broker_addrs}
        for qd in sorted(route.queue_datas, key=lambda q: q.broker_name):
            if PermName.is_writeable(qd.perm) and qd.broker_name in masters:
                info.message_queue_list.extend(MessageQueue(topic, qd.broker_name, i)
                                               for i in range(qd.write_queue_nums))
        return info

    def ok(self) -> bool:
        return bool(self.message_queue_list)

    def reset_index(self) -> None:
        self.send_which_queue.reset()

    def select_one_message_queue(self, *filters: QueueFilter) -> MessageQueue | None:
        """The next queue in the round robin that passes every filter (one turn at most); without
        filters simply the next queue. None when the list is empty or no queue passes."""
        queues = self.message_queue_list
        if not queues:
            return None
        if filters:
            for _ in range(len(queues)):
                mq = queues[self.send_which_queue.increment_and_get() % len(queues)]
                if all(f(mq) for f in filters):
                    return mq
            return None
        return queues[self.send_which_queue.increment_and_get() % len(queues)]

    def get_write_queue_nums_by_broker(self, broker_name: str) -> int:
        if self.topic_route_data is not None:
            for qd in self.topic_route_data.queue_datas:
                if qd.broker_name == broker_name:
                    return qd.write_queue_nums
        return -1
