"""The clients of a chaos run (its queue workload): a producer sends at a steady rate while the
nemesis works, then a final drain reads every queue of the topic from offset 0. Both are ordinary
clients, so everything they did is in the trace as Jepsen `client` operations (`send`, `pull`) —
which is all a checker sees.

    w = QueueWorkload(topic="ChaosTopic", interval_ms=100)
    w.setup(cluster, duration_ms=...)      # topic created, producer started
    ...                                    # the nemesis runs its schedule
    w.stop(cluster)                        # the producer stops cleanly (in-flight sends complete)
    w.drain(cluster)                       # a fresh pull consumer reads everything

The workload runs on the simulator only: the drain drives its pull consumer from inside the
simulation and the chaos runner's convergence wait reads the components (the checkers themselves
read only the trace and store files, so they apply to a real-process run's trace as well).
"""

from __future__ import annotations

from dataclasses import dataclass

from rmqlab.client import ClientProcess, DefaultMQPullConsumer
from rmqlab.client.consumer.pull_result import PullStatus
from rmqlab.example.benchmark import BenchmarkProducer, ProducerSpec

PRODUCER = "producer"
READER = "reader"


def _require_simulator(cluster) -> None:
    if cluster.runtime != "sim":
        raise ValueError(f"QueueWorkload runs on the simulator, not on the {cluster.runtime!r} runtime "
                         "(see the module docstring)")


@dataclass
class QueueWorkload:
    """`interval_ms` between sends (the rate), bodies of `body_size` bytes built from the key
    (rmqlab.example.benchmark), sync sends one at a time."""

    topic: str = "ChaosTopic"
    queues: int = 4
    interval_ms: float = 100
    body_size: int = 64
    # The producer's pollNameServerInterval (RocketMQ: 30 s): how soon it follows a failover.
    # A schedule lasts ~20 s, so the chaos producer refreshes its route every second.
    poll_name_server_interval_ms: int = 1_000

    def setup(self, cluster, duration_ms: float, timeout_ms: float = 30_000) -> None:
        """The topic on every replica (a slave copies it from the master with SlaveSynchronize
        every 10 s; a master elected before that rejects sends to it), then the producer."""
        _require_simulator(cluster)
        cluster.create_topic(self.topic, queues=self.queues)
        cluster.run_until(lambda: all(cluster.components[n].topic_config_manager.select_topic_config(self.topic)
                                      for n in cluster.brokers), timeout_ms)
        spec = ProducerSpec(topic=self.topic, group="chaos_producer", interval_ms=self.interval_ms,
                            duration_ms=duration_ms, body_size=self.body_size)

        def producer() -> BenchmarkProducer:
            p = BenchmarkProducer(spec, cluster.namesrv_addr)
            p["producer"].client_config.poll_name_server_interval = self.poll_name_server_interval_ms
            return p

        cluster.add_client(PRODUCER, producer)

    def stop(self, cluster) -> None:
        cluster.stop_client(PRODUCER)

    def drain(self, cluster, timeout_ms: float = 30_000, batch: int = 32) -> int:
        """Read every queue of the topic from offset 0 to its end with a new pull consumer (its
        pulls are traced); returns how many messages it read."""
        _require_simulator(cluster)
        return drain_topics(cluster, [self.topic], READER, "chaos_reader", timeout_ms, batch,
                            "drain gave up", "rmqlab.checker")


def drain_topics(cluster, topics: list[str], reader: str, group: str, timeout_ms: float, batch: int,
                 gave_up: str, logger: str) -> int:
    """Jepsen's final read on the simulator: a fresh pull consumer (node `reader`, consumer group
    `group`) reads every queue of `topics` from offset 0 to its end, a failure (no route yet, a
    connection reset) retried each second until `timeout_ms`; what is left unread then shows as
    lost to the checker, and a `log` event (`gave_up`, `logger`) says why. Returns how many
    messages it read; the reader stays on its node (the caller may stop it)."""
    cluster.add_client(reader, lambda: ClientProcess(consumer=DefaultMQPullConsumer(group, cluster.namesrv_addr)))
    sim = cluster.sim
    consumer: DefaultMQPullConsumer = sim.components[reader]["consumer"]
    node = sim.nodes[reader]
    deadline = sim.now_ms() + timeout_ms

    class GaveUp(Exception):
        pass

    async def attempt(call):
        while True:
            try:
                return await call()
            except Exception as e:
                if sim.now_ms() >= deadline:
                    node.trace("log", level="WARN", message=f"{gave_up}: {e}", logger=logger)
                    raise GaveUp() from e
                await node.sleep(1_000)

    async def read() -> int:
        n = 0
        for topic in topics:
            try:
                mqs = await attempt(lambda: consumer.fetch_subscribe_message_queues(topic))
            except GaveUp:
                continue
            for mq in sorted(mqs, key=lambda q: (q.broker_name, q.queue_id)):
                offset = 0
                while sim.now_ms() < deadline:
                    try:
                        r = await attempt(lambda: consumer.pull(mq, "*", offset, batch))
                    except GaveUp:
                        break
                    if r.pull_status is PullStatus.FOUND:
                        n += len(r.msg_found_list)
                    elif r.pull_status is PullStatus.OFFSET_ILLEGAL and r.next_begin_offset > offset:
                        pass  # the queue starts later: continue from where the broker says
                    elif r.pull_status is not PullStatus.NO_MATCHED_MSG:
                        break  # NO_NEW_MSG: the end of the queue
                    if r.next_begin_offset <= offset:
                        break
                    offset = r.next_begin_offset
        return n

    return sim.run(read())
