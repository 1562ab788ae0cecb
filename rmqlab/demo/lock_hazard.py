"""Lab 05's lock-quorum experiment with real orderly consumers: the hazard of RIP-32's "Lock
Quorum" section (Slave Acting Master Mode, RocketMQ's wiki) and what ``lockInStrictMode`` does.

The group broker-a: a master (id 0) and a slave (id 1) with ``enableSlaveActingMaster``,
``totalReplicas=2`` (a lock needs both, in strict mode) and ``skipPreOnline`` (the returning
master serves at once); the name server rewrites the route while the master is down (the slave as
brokerId 0). The story, on the simulator:

    c1        an orderly push consumer of group GID_ORDER locks both queues at the master
    kill      the master dies; the route names the slave; c1's route follows at its next
              refresh, and its periodic lockAll moves its locks to the acting slave
    restart   the master comes back, with no locks (RebalanceLockManager is memory only)
    c2        a second consumer of the group starts: its route has the master, whose consumer
              list has only c2 (c1 heartbeats to the brokers its route names), so c2 is allocated
              every queue and asks the master for their locks
    sends     8 orders x 3 steps, each order to one queue (SelectMessageQueueByHash); each message
              carries its order as keys and its step as tags, so the trace says which is which

``lockInStrictMode=false`` (RocketMQ's default): the master grants c2 the locks the slave granted
c1; both consume the same queue, every message twice, and an order's steps interleave across the
group (step 0 after step 2). ``lockInStrictMode=true``: a lock needs both replicas; nobody gets the
contested queue until the views converge — no message consumed twice, no order out of order.

`scenario` returns the running cluster (tests look at the brokers' locks); `run_lock_hazard` runs
it and returns the trace, which rmqlab.viz.orderly reads.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

from rmqlab.broker.broker_controller import BrokerController
from rmqlab.client import ClientProcess, DefaultMQAdminExt, DefaultMQProducer, DefaultMQPushConsumer, MessageQueue
from rmqlab.client.consumer import ConsumeOrderlyStatus, MessageListenerOrderly
from rmqlab.client.producer.selector import SelectMessageQueueByHash
from rmqlab.common.message import Message
from rmqlab.common.topic_config import TopicConfig
from rmqlab.config.loader import load_broker_config, load_namesrv_config
from rmqlab.namesrv import NamesrvController
from rmqlab.remoting.protocol.header.broker.heartbeat import ConsumeFromWhere
from rmqlab.runtime.sim import Simulation
from rmqlab.trace import TraceEvent

NS = "127.0.0.1:9876"
TOPIC, GROUP = "TopicOrder", "GID_ORDER"
MASTER, SLAVE = "127.0.0.1:10911", "127.0.0.1:10921"
ORDERS = tuple(f"order-{o}" for o in range(8))
STEPS = 3
SEND_AFTER_C2_MS = 3_000    # c2 has rebalanced and locked at the master by then
WATCH_MS = 10_000           # after the sends; c1's route refresh (30 s) ends the split view later


class LockHazardCluster:
    """A name server, broker-a's master and slave (module docstring), an admin client."""

    def __init__(self, strict: bool, seed: int = 5):
        self.sim = sim = Simulation(seed=seed)
        sim.add_node("namesrv", lambda: NamesrvController.from_startup_config(load_namesrv_config(
            overrides={"listenPort": 9876, "supportActingMaster": True, "notifyMinBrokerIdChanged": True})))
        for node, broker_id, role, port in (("broker-a", 0, "ASYNC_MASTER", 10911), ("broker-a-s1", 1, "SLAVE", 10921)):
            sim.add_node(node, lambda node=node, broker_id=broker_id, role=role, port=port: BrokerController(
                load_broker_config(namesrv_addr=NS, overrides={
                    "brokerClusterName": "DefaultCluster", "brokerName": "broker-a", "brokerId": broker_id,
                    "brokerRole": role, "listenPort": port, "haListenPort": port + 1, "brokerIP1": "127.0.0.1",
                    "brokerIP2": "127.0.0.1", "storePathRootDir": sim.store_dir(node),
                    "mappedFileSizeCommitLog": 1024 * 1024, "mappedFileSizeConsumeQueue": 6000,
                    "slaveReadEnable": True, "enableSlaveActingMaster": True, "totalReplicas": 2,
                    "skipPreOnline": True, "lockInStrictMode": strict}), slave_synchronize_period_ms=1_000))
        sim.add_node("admin", lambda: ClientProcess(admin=DefaultMQAdminExt(NS)))
        sim.start_all()
        self.c1: DefaultMQPushConsumer | None = None
        self.c2: DefaultMQPushConsumer | None = None

    def run(self, coro):
        return self.sim.run(coro)

    def wait_until(self, predicate, timeout_ms: float, what: str, poll_ms: float = 50) -> None:
        start = self.sim.now_ms()

        async def wait():
            while not predicate():
                if self.sim.now_ms() - start >= timeout_ms:
                    raise TimeoutError(f"{what}: not reached within {timeout_ms:.0f} virtual ms")
                await asyncio.sleep(poll_ms / 1000)

        self.run(wait())

    def broker(self, node: str) -> BrokerController:
        return self.sim.components[node]

    def route_id0(self) -> str | None:
        route = self.sim.components["namesrv"].route_info_manager.pickup_topic_route_data(TOPIC)
        return None if route is None else next((bd.broker_addrs.get(0) for bd in route.broker_datas), None)

    def add_client(self, name: str, make) -> ClientProcess:
        self.sim.add_node(name, lambda: ClientProcess(**make()))
        self.sim.start(name)
        return self.sim.components[name]

    def add_consumer(self, name: str) -> DefaultMQPushConsumer:
        def make():
            consumer = DefaultMQPushConsumer(GROUP, NS, consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET)
            consumer.subscribe(TOPIC, "*")
            consumer.register_message_listener(MessageListenerOrderly(lambda msgs, context: ConsumeOrderlyStatus.SUCCESS))
            return {"consumer": consumer}
        return self.add_client(name, make)["consumer"]

    def send_orders(self, producer: DefaultMQProducer) -> None:
        async def go():
            for step in range(STEPS):
                for order in ORDERS:
                    msg = Message(TOPIC, f"{order}:{step}".encode())
                    msg.keys, msg.tags = order, f"step{step}"
                    await producer.send(msg, selector=SelectMessageQueueByHash(), arg=order)
        self.run(go())

    def close(self) -> None:
        self.sim.close()


def held(consumer: DefaultMQPushConsumer) -> set[int]:
    """The queues of TOPIC a consumer believes it holds locked (ProcessQueue.locked)."""
    return {mq.queue_id for mq, pq in consumer.rebalance_impl.process_queue_table.items()
            if mq.topic == TOPIC and not pq.dropped and pq.locked}


def scenario(strict: bool, seed: int = 5) -> LockHazardCluster:
    """Run the module docstring's story up to WATCH_MS after the sends; the cluster still runs."""
    cl = LockHazardCluster(strict, seed)
    admin = cl.sim.components["admin"]["admin"]
    cl.run(admin.create_and_update_topic_config_by_cluster("DefaultCluster", TopicConfig(TOPIC, 2, 2)))
    cl.wait_until(lambda: cl.route_id0() == MASTER
                  and cl.broker("broker-a-s1").topic_config_manager.select_topic_config(TOPIC) is not None,
                  10_000, "topic on both brokers")
    c1 = cl.c1 = cl.add_consumer("c1")
    cl.wait_until(lambda: held(c1) == {0, 1}, 10_000, "c1 holds both queues")

    cl.sim.nemesis.kill("broker-a")
    cl.wait_until(lambda: cl.route_id0() == SLAVE, 30_000, "the route names the slave")
    cl.wait_until(lambda: c1.client_factory.broker_addr_table.get("broker-a") == {0: SLAVE}, 35_000,
                  "c1's route names the slave")
    slave_locks = cl.broker("broker-a-s1").admin_broker_processor.rebalance_lock_manager
    cl.wait_until(lambda: slave_locks.lock_holder(GROUP, MessageQueue(TOPIC, "broker-a", 0)) == c1.client_factory.client_id,
                  25_000, "c1's locks at the acting slave")

    cl.sim.nemesis.restart("broker-a")
    cl.wait_until(lambda: cl.route_id0() == MASTER, 30_000, "the route names the master again")
    cl.c2 = cl.add_consumer("c2")
    producer = cl.add_client("producer", lambda: {"producer": DefaultMQProducer("PG", NS)})["producer"]
    cl.sim.run_for(SEND_AFTER_C2_MS)
    cl.send_orders(producer)
    cl.sim.run_for(WATCH_MS)
    return cl


@dataclass
class LockHazardRun:
    strict: bool
    events: list[TraceEvent]


def run_lock_hazard(seed: int = 5, *, strict: bool) -> LockHazardRun:
    cl = scenario(strict, seed)
    try:
        return LockHazardRun(strict, list(cl.sim.tracer.events))
    finally:
        cl.close()


__all__ = ["LockHazardCluster", "LockHazardRun", "scenario", "run_lock_hazard", "held", "ORDERS", "STEPS", "TOPIC",
           "GROUP", "MASTER", "SLAVE"]
