"""MessageQueueView and MessageQueueSelector (proxy/service/route/): the queues a Proxy writes to
and reads from, built from a topic route.

* write queues: every writable queue of a broker set that has a master (brokerId 0), sorted by
  (broker name, queue id) like RocketMQ's AddressableMessageQueue ordering;
* read queues: every readable queue, addressed to the master, or to another replica when the
  set has no master (getMasterAddrPrefer), so consumers keep reading during a failover;
* broker-acting queues: one per broker (queue id -1), what ReceiveMessage pops from.

Round-robin indexes start at a seeded random value (RocketMQ: `new Random().nextInt()`).
"""

from __future__ import annotations

import random as _random
from dataclasses import dataclass

from rmqlab.common.constant.perm_name import PermName
from rmqlab.remoting.protocol.route.topic_route_data import TopicRouteData

MASTER_ID = 0
BROKER_ACTING_QUEUE_ID = -1


@dataclass(frozen=True, order=True)
class AddressableMessageQueue:
    topic: str
    broker_name: str
    queue_id: int
    broker_addr: str


def master_addr(route: TopicRouteData, broker_name: str) -> str | None:
    for bd in route.broker_datas:
        if bd.broker_name == broker_name:
            return bd.broker_addrs.get(MASTER_ID)
    return None


def master_addr_prefer(route: TopicRouteData, broker_name: str) -> str | None:
    for bd in route.broker_datas:
        if bd.broker_name == broker_name and bd.broker_addrs:
            return bd.broker_addrs.get(MASTER_ID) or bd.broker_addrs[min(bd.broker_addrs)]
    return None


class MessageQueueSelector:
    def __init__(self, topic: str, route: TopicRouteData, read: bool, rng: _random.Random):
        queues: set[AddressableMessageQueue] = set()
        for qd in route.queue_datas:
            if read and PermName.is_readable(qd.perm):
                addr, n = master_addr_prefer(route, qd.broker_name), qd.read_queue_nums
            elif not read and PermName.is_writeable(qd.perm):
                addr, n = master_addr(route, qd.broker_name), qd.write_queue_nums
            else:
                continue
            if addr is not None:
                queues.update(AddressableMessageQueue(topic, qd.broker_name, i, addr) for i in range(n))
        self.queues: list[AddressableMessageQueue] = sorted(queues)
        self.broker_acting_queues: list[AddressableMessageQueue] = sorted(
            {AddressableMessageQueue(topic, q.broker_name, BROKER_ACTING_QUEUE_ID, q.broker_addr) for q in self.queues})
        self._by_broker = {q.broker_name: q for q in self.broker_acting_queues}
        self._queue_index = rng.randrange(2 ** 31)
        self._broker_index = rng.randrange(2 ** 31)

    def get_queue_by_broker_name(self, broker_name: str) -> AddressableMessageQueue | None:
        return self._by_broker.get(broker_name)

    def select_one(self, only_broker: bool) -> AddressableMessageQueue | None:
        pool = self.broker_acting_queues if only_broker else self.queues
        if not pool:
            return None
        if only_broker:
            self._broker_index += 1
            return pool[self._broker_index % len(pool)]
        self._queue_index += 1
        return pool[self._queue_index % len(pool)]


class MessageQueueView:
    def __init__(self, topic: str, route: TopicRouteData, rng: _random.Random):
        self.topic = topic
        self.route = route
        self.read_selector = MessageQueueSelector(topic, route, True, rng)
        self.write_selector = MessageQueueSelector(topic, route, False, rng)
