"""A deployment mode built with rmqlab.cluster on the simulator, with a producer to drive it.
Shared by tests/test_modes.py and tests/test_exercises.py.
"""

from __future__ import annotations

from rmqlab.client import ClientProcess, DefaultMQProducer
from rmqlab.cluster import Cluster
from rmqlab.common.message.message import Message

TOPIC = "SeedTopic"


def start(mode: str, seed: int, decision_points=None, **overrides) -> Cluster:
    # Readable slaves (RocketMQ 5 refuses pulls on a slave without slaveReadEnable).
    cluster = Cluster(mode, seed=seed, overrides={"*": {"slaveReadEnable": True, **overrides}},
                      decision_points=decision_points)
    cluster.start()
    cluster.add_client("producer", lambda: ClientProcess(producer=DefaultMQProducer("PG", cluster.namesrv_addr)))
    cluster.run_for(2_000)  # brokers register, slaves connect to their masters
    return cluster


def producer(cluster: Cluster) -> DefaultMQProducer:
    return cluster.sim.components["producer"]["producer"]


def send(cluster: Cluster, n: int, tag: str) -> list:
    """Send n messages one after another; failed sends are recorded, not raised."""
    p = producer(cluster)

    async def go():
        results = []
        for i in range(n):
            try:
                results.append(await p.send(Message(TOPIC, f"{tag}-{i}".encode())))
            except Exception as e:  # MQClientException / MQBrokerException after retries
                results.append(e)
        return results

    return cluster.sim.run(go())
