"""A simulated cluster for the client tests (``Lab``: a name server, brokers and client processes in
one Simulation; the ``lab`` fixture in tests/conftest.py builds and checks them) and what the
scenarios read back from the trace.
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections import Counter

from rmqlab.broker.broker_controller import BrokerController
from rmqlab.common.topic_config import TopicConfig
from rmqlab.client import (ClientProcess, ConsumeConcurrentlyStatus, DefaultMQAdminExt, DefaultMQProducer,
                           DefaultMQPushConsumer, MessageQueue, MQClientException)
from rmqlab.common.message import Message
from rmqlab.common.message.message_const import MessageConst
from rmqlab.cluster import Cluster
from rmqlab.config.loader import load_broker_config, load_namesrv_config
from rmqlab.namesrv import NamesrvController
from rmqlab.runtime.sim import Simulation
from rmqlab.trace import client_ops

NS = "127.0.0.1:9876"
CLUSTER = "DefaultCluster"
TOPIC = "TopicTest"
GROUP = "CG"
SUCCESS = ConsumeConcurrentlyStatus.CONSUME_SUCCESS
# 2m-noslave: two masters.
TWO_MASTERS = [("broker-a", "broker-a", 0, "ASYNC_MASTER", 10911, {}),
               ("broker-b", "broker-b", 0, "ASYNC_MASTER", 10921, {})]
# 2m-2s-async, with broker-b's slave left out: broker-a has a slave that serves reads (RocketMQ 5
# refuses pulls on a slave without slaveReadEnable).
MASTER_SLAVE = [("broker-a", "broker-a", 0, "ASYNC_MASTER", 10911, {}),
                ("broker-a-s", "broker-a", 1, "SLAVE", 10931, {"slaveReadEnable": True}),
                ("broker-b", "broker-b", 0, "ASYNC_MASTER", 10921, {})]


class Lab:
    """A name server, brokers and client processes in one Simulation."""

    def __init__(self, brokers=TWO_MASTERS, seed: int = 7, namesrvs: dict[str, int] | None = None,
                 slave_synchronize_period_ms: int = 60_000):
        self.sim = sim = Simulation(seed=seed)
        self.brokers = {node: (name, broker_id, port) for node, name, broker_id, _r, port, _o in brokers}
        namesrvs = namesrvs or {"namesrv": 9876}
        self.namesrv_addr = ";".join(f"127.0.0.1:{port}" for port in namesrvs.values())
        for node, port in namesrvs.items():
            sim.add_node(node, lambda port=port: NamesrvController.from_startup_config(
                load_namesrv_config(overrides={"listenPort": port})))
        for node, name, broker_id, role, port, extra in brokers:
            sim.add_node(node, lambda node=node, name=name, broker_id=broker_id, role=role, port=port, extra=extra:
                         BrokerController(load_broker_config(namesrv_addr=self.namesrv_addr, overrides={
                             "brokerClusterName": CLUSTER, "brokerName": name, "brokerId": broker_id,
                             "brokerRole": role, "listenPort": port, "haListenPort": port + 1,
                             "brokerIP1": "127.0.0.1", "brokerIP2": "127.0.0.1",
                             "storePathRootDir": sim.store_dir(node), "mappedFileSizeCommitLog": 1024 * 1024,
                             "mappedFileSizeConsumeQueue": 6000, **extra}),
                             slave_synchronize_period_ms=slave_synchronize_period_ms))
        sim.add_node("admin", lambda: ClientProcess(admin=DefaultMQAdminExt(self.namesrv_addr)))
        sim.start_all()

    def addr(self, broker_node: str) -> str:
        return f"127.0.0.1:{self.brokers[broker_node][2]}"

    def add_client(self, name: str, make_clients) -> ClientProcess:
        """A client process on its own node; ``make_clients()`` builds fresh clients per start."""
        self.sim.add_node(name, lambda: ClientProcess(**make_clients()))
        self.sim.start(name)
        return self.sim.components[name]

    def client(self, node: str, key: str):
        return self.sim.components[node][key]

    def run(self, coro):
        return self.sim.run(coro)

    @property
    def admin(self) -> DefaultMQAdminExt:
        return self.client("admin", "admin")

    async def route_brokers(self, topic: str) -> set[str]:
        """The broker groups the name server lists for ``topic``."""
        try:
            route = await self.admin.examine_topic_route_info(topic)
        except MQClientException:
            return set()
        return {q.broker_name for q in route.queue_datas}

    def wait_until(self, predicate, timeout_ms: float, poll_ms: float = 10) -> float:
        """Advance until the coroutine function ``predicate()`` returns true; the virtual ms it took."""
        start = self.sim.now_ms()

        async def wait():
            while not await predicate():
                if self.sim.now_ms() - start >= timeout_ms:
                    raise TimeoutError(f"condition not reached within {timeout_ms:.0f} virtual ms")
                await asyncio.sleep(poll_ms / 1000)

        self.run(wait())
        return self.sim.now_ms() - start

    def create_topic(self, topic: str = TOPIC, queues: int = 4) -> None:
        """``mqadmin updateTopic -c DefaultCluster``, then wait until the name server has it on
        every broker group."""
        masters = self.run(self.admin.create_and_update_topic_config_by_cluster(
            CLUSTER, TopicConfig(topic, queues, queues)))
        groups = {name for name, broker_id, _ in self.brokers.values() if broker_id == 0}
        assert len(masters) == len(groups)

        async def registered():
            return await self.route_brokers(topic) == groups

        self.wait_until(registered, 5_000)

    def close(self) -> None:
        self.sim.close()


def uniq(msg) -> str:
    return msg.properties[MessageConst.PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX]


class Recorder:
    """A push consumer's listener: records what it was given, answers with ``status(msg)``."""

    def __init__(self, name: str, status=lambda msg: SUCCESS):
        self.name, self.status = name, status
        self.consumed: list[tuple[str, str, int, int, bytes]] = []

    def __call__(self, msgs, context):
        result = SUCCESS
        for m in msgs:
            self.consumed.append((uniq(m), context.message_queue.broker_name, m.queue_id, m.queue_offset, m.body))
            if self.status(m) is not SUCCESS:
                result = ConsumeConcurrentlyStatus.RECONSUME_LATER
        return result


def push_consumer(recorder: Recorder, topic: str = TOPIC, expression: str = "*", group: str = GROUP,
                  **kwargs) -> DefaultMQPushConsumer:
    consumer = DefaultMQPushConsumer(group, NS, **kwargs)
    consumer.subscribe(topic, expression)
    consumer.register_message_listener(recorder)
    return consumer


def send_all(lab: Lab, producer: DefaultMQProducer, bodies, topic: str = TOPIC, tags: str | None = None):
    async def go():
        results = []
        for body in bodies:
            msg = Message(topic, body)
            if tags is not None:
                msg.tags = tags
            msg.keys = body.decode()
            results.append(await producer.send(msg))
        return results
    return lab.run(go())


def history(sim: Simulation):
    return history_of(sim.tracer.events)


def history_of(events):
    """What a checker computes from the trace: the UNIQ_KEYs acknowledged by a send, and how many
    times each was consumed successfully."""
    ops = client_ops(events)
    acked = {op.invoke_value["uniq_key"] for op in ops if op.f == "send" and op.type == "ok"}
    consumed = Counter(op.invoke_value["uniq_key"] for op in ops if op.f == "consume" and op.type == "ok")
    # Every delivery carries the body its send recorded (body_crc: the commitlog's BODYCRC).
    sent_crc = {op.invoke_value["uniq_key"]: op.invoke_value["body_crc"] for op in ops if op.f == "send"}
    for op in ops:
        if op.f == "consume" and op.invoke_value["uniq_key"] in sent_crc:
            assert op.invoke_value["body_crc"] == sent_crc[op.invoke_value["uniq_key"]], op
    return ops, acked, consumed


def held_queues(lab: Lab, node: str, topic: str = TOPIC) -> set[MessageQueue]:
    consumer = lab.client(node, "consumer")
    table = consumer.rebalance_impl.process_queue_table
    return {mq for mq, pq in table.items() if mq.topic == topic and not pq.dropped}


# -- the benchmark clients on either runtime (rmqlab producer / consumer) -------------------------------
def ops_of(events):
    """client_ops over a whole cluster's trace, each op's node named "<node>#<incarnation>" (each
    incarnation of a process numbers its operations anew)."""
    return [dataclasses.replace(op, node=f"{op.node}#{op.incarnation}") for op in client_ops(events)]


def consumed_messages(op) -> list[dict]:
    """The messages an ok operation consumed: a push consume's message, a pull's messages found."""
    if op.type != "ok":
        return []
    if op.f == "consume":
        return [op.invoke_value]
    if op.f == "pull":
        return op.value["messages"]
    return []


def make_cluster(runtime: str, mode: str, tmp_path) -> Cluster:
    return Cluster(mode, runtime=runtime, seed=3, root_dir=str(tmp_path / runtime))
