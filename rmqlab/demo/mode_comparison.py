"""The deployment-mode comparison of `rmqlab demo`: seed 000's pros and cons, measured.

Every classic mode (single master, 2m-noslave, 2m-2s-async, 2m-2s-sync) runs the same workload on
the simulator — one producer sending a message every 20 ms for 10 s — and suffers the same fault:
broker-a's machine loses power at t = 4 s. While it is down a consumer tries to read broker-a's
messages; then its machine comes back (recovering what was flushed) and a consumer reads back
everything, so "lost" means acknowledged and gone for good. Every number comes from the event trace (sends are `client` operations; the crash is a
`node.crash` event), never from component internals.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass

from rmqlab.broker.topic.topic_config import TopicConfig
from rmqlab.client import ClientProcess, DefaultMQAdminExt, DefaultMQProducer, DefaultMQPullConsumer
from rmqlab.cluster import Cluster
from rmqlab.common.message.message import Message
from rmqlab.trace import client_ops

TOPIC = "DemoModes"
SEND_EVERY_MS = 20
SENDS = 500          # 10 s of sends
CRASH_AT_MS = 4_000  # after the workload starts
SETTLE_MS = 160_000  # the name server's 120 s live timeout, then a client route refresh

# What seed 000 says of each mode (pros / cons), to set beside the measurements.
SEED_CLAIMS = {
    "single-master": "risky: one broker; a restart or crash makes the whole service unavailable",
    "2m-noslave": "one master down does not stop the application; its unconsumed messages wait for it; "
                  "async flush may lose a few messages on a machine crash",
    "2m-2s-async": "consumers continue from the slave; a master disk failure may lose a few messages",
    "2m-2s-sync": "no single point of failure for data; about 10% slower; the slave does not take over",
}


@dataclass
class ModeResult:
    mode: str
    sent: int
    acknowledged: int
    failed: int
    indeterminate: int
    acknowledged_lost: int        # acknowledged, and on no broker: not on the slave, not after recovery
    missing_after_recovery: int   # acknowledged, not readable once broker-a is back (it reads its own disk)
    acked_during_outage: int
    sends_during_outage: int
    p50_ms: float
    p99_ms: float
    readable_during_outage: int   # of broker-a's acknowledged messages
    on_broker_a: int
    seed_says: str


def run_mode(mode: str, seed: int) -> ModeResult:
    cluster = Cluster(mode, seed=seed, overrides={"*": {"slaveReadEnable": True}})
    try:
        cluster.start()
        cluster.add_client("producer", lambda: ClientProcess(producer=DefaultMQProducer("PG", cluster.namesrv_addr),
                                                             admin=DefaultMQAdminExt(cluster.namesrv_addr)))
        sim = cluster.sim
        producer = sim.components["producer"]["producer"]
        node = sim.nodes["producer"]
        # As an operator would: the topic on every master (mqadmin updateTopic -c), then one
        # SlaveSynchronize period (60 s) so the slaves know it too.
        admin = sim.components["producer"]["admin"]
        sim.run(admin.create_and_update_topic_config_by_cluster("DefaultCluster", TopicConfig(TOPIC, 4, 4)))
        cluster.run_for(65_000)
        start = sim.now_ms()
        sim.at(start + CRASH_AT_MS, lambda: cluster.nemesis.crash("broker-a"))

        async def workload():
            for i in range(SENDS):
                try:
                    await producer.send(Message(TOPIC, f"{mode}-{i}".encode()))
                except Exception:  # traced as a failed send; the workload goes on, as a client would
                    pass
                await node.sleep(SEND_EVERY_MS)

        sim.run(workload())
        cluster.run_for(SETTLE_MS)
        during_outage = _read_back(cluster, "reader-outage")
        cluster.nemesis.restart("broker-a")
        cluster.run_for(40_000)  # re-registration, then the clients' 30 s route refresh
        after = _read_back(cluster, "reader-after")
        return _judge(mode, cluster, start, during_outage, after)
    finally:
        cluster.close()


def _read_back(cluster: Cluster, name: str) -> set[str]:
    """The UNIQ_KEYs a fresh pull consumer can read now."""
    cluster.add_client(name, lambda: ClientProcess(consumer=DefaultMQPullConsumer(name, cluster.namesrv_addr)))
    consumer = cluster.sim.components[name]["consumer"]

    async def read():
        keys = set()
        try:
            queues = await consumer.fetch_subscribe_message_queues(TOPIC)
        except Exception:  # no route at all: every broker of the topic is down
            return keys
        for mq in queues:
            offset = 0
            while True:
                try:
                    r = await consumer.pull(mq, "*", offset, 32)
                except Exception:  # the group has no live member
                    break
                if not r.msg_found_list:
                    break
                keys.update(m.get_property("UNIQ_KEY") for m in r.msg_found_list)
                offset = r.next_begin_offset
        return keys

    return cluster.sim.run(read())


def _judge(mode: str, cluster: Cluster, start: float, during_outage: set[str], after: set[str]) -> ModeResult:
    ops = [op for op in client_ops(cluster.events()) if op.f == "send" and start <= op.invoke_time_ms]
    ops = [op for op in ops if op.invoke_value["topic"] == TOPIC]
    acked = [op for op in ops if op.type == "ok"]
    latencies = sorted(op.complete_time_ms - op.invoke_time_ms for op in acked)
    crash_at = start + CRASH_AT_MS
    during = [op for op in ops if crash_at <= op.invoke_time_ms < crash_at + 4_000]
    on_a = {op.invoke_value["uniq_key"] for op in acked if op.value.get("broker_name") == "broker-a"}
    acked_keys = {op.invoke_value["uniq_key"] for op in acked}
    lost = acked_keys - after - during_outage
    return ModeResult(
        mode=mode, sent=len(ops), acknowledged=len(acked), failed=sum(op.type == "fail" for op in ops),
        indeterminate=sum(op.type == "info" for op in ops), acknowledged_lost=len(lost),
        missing_after_recovery=len(acked_keys - after),
        acked_during_outage=sum(op.type == "ok" for op in during), sends_during_outage=len(during),
        p50_ms=statistics.median(latencies) if latencies else 0.0,
        p99_ms=latencies[int(0.99 * (len(latencies) - 1))] if latencies else 0.0,
        readable_during_outage=len(on_a & during_outage), on_broker_a=len(on_a), seed_says=SEED_CLAIMS[mode])


def run_comparison(seed: int) -> list[ModeResult]:
    return [run_mode(mode, seed) for mode in SEED_CLAIMS]
