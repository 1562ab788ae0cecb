"""Orderly vs concurrent consumption on the simulator: how many messages a push consumer consumes
per second, both ways, over the same backlog.

    .venv/bin/python bench/bench_orderly.py [--messages 4000] [--queues 4] [--keys 16]

The cluster: "single-master" (a name server, broker-a), a topic of `--queues` queues holding
`--messages` 64-byte messages sent beforehand by the benchmark producer with `--shardingKeys`
(SelectMessageQueueByHash on "order-<i mod keys>"). Then one benchmark consumer (`rmqlab consumer`,
push, CONSUME_FROM_FIRST_OFFSET, 20 consume tasks) of a fresh group consumes the backlog:
concurrently, then (a fresh cluster, the same seed) with `--orderly` -- its queues locked at the
broker first (LOCK_BATCH_MQ), each queue's messages one at a time. Timed from the consumer's start
(its rebalance, and the locks) to the last message consumed, and from the first message to the
last: messages per virtual second (what the protocol allows) and per wall second (what the
simulator costs), and the orderly/concurrent ratios of the latter. One run each.

What it can and cannot show: the benchmark consumer's listener takes no virtual time (a concurrent
listener is a plain function here), so in virtual time both ways are bounded by the pulls alone and
come out alike; the cost of orderly consumption where a listener takes time (one message per
queue at a time, against up to 20 at once) is not measured here. The wall-clock rate is what a lab
pays for each way on the simulator.
"""

from __future__ import annotations

import argparse
import time

TOPIC = "BenchOrderly"


def run(orderly: bool, messages: int, queues: int, keys: int) -> dict:
    from rmqlab.cluster import Cluster
    from rmqlab.trace import client_ops
    from rmqlab.viz import quiet_logs

    with quiet_logs(), Cluster("single-master", seed=1) as c:
        c.start(30_000)
        c.create_topic(TOPIC, queues)
        c.add_producer("producer", topic=TOPIC, count=messages, body_size=64, sharding_keys=keys)
        c.run_until(lambda: any(e.node == "producer" and e.kind == "node.stop" for e in c.events()), 600_000,
                    poll_ms=1_000)
        begin_virtual, begin_wall = c.sim.now_ms(), time.perf_counter()
        c.add_consumer("consumer", topic=TOPIC, group="bench_orderly" if orderly else "bench_concurrent",
                       orderly=orderly, consume_from_where="CONSUME_FROM_FIRST_OFFSET")
        seen: set = set()
        cursor = [0]
        first: list = []  # (virtual ms of the first consume, wall s when it was seen)
        last = [0.0]  # virtual ms of the last consume

        def done() -> bool:
            events = c.events()
            new, cursor[0] = events[cursor[0]:], len(events)
            ops = [op for op in client_ops(new) if op.f == "consume" and op.type == "ok"] if new else []
            if ops and not first:
                first.append((ops[0].invoke_time_ms, time.perf_counter()))
            if ops:
                last[0] = max(op.invoke_time_ms for op in ops)
            seen.update(op.invoke_value["uniq_key"] for op in ops)
            return len(seen) >= messages

        c.run_until(done, 600_000, poll_ms=10)
        now_virtual, now_wall = c.sim.now_ms(), time.perf_counter()
    # From the consumer's start (its rebalance and, orderly, its locks included), and from its first
    # message (virtual: the trace's times of the first and last consume; wall: to within the 10
    # virtual ms the trace is polled at).
    return {"orderly": orderly, "consumed": len(seen), "virtual_s": (now_virtual - begin_virtual) / 1000,
            "wall_s": now_wall - begin_wall, "steady_virtual_s": (last[0] - first[0][0]) / 1000,
            "steady_wall_s": now_wall - first[0][1]}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--messages", type=int, default=4000)
    p.add_argument("--queues", type=int, default=4)
    p.add_argument("--keys", type=int, default=16)
    args = p.parse_args()
    results = [run(orderly, args.messages, args.queues, args.keys) for orderly in (False, True)]
    for r in results:
        n = r["consumed"]
        print(f"{'orderly' if r['orderly'] else 'concurrent':>10}: {n} consumed; from start {r['virtual_s']:.2f} "
              f"virtual s, {r['wall_s']:.2f} wall s; from the first message {n / r['steady_virtual_s']:.0f}/virtual s, "
              f"{n / r['steady_wall_s']:.0f}/wall s")
    conc, orde = results
    print(f"orderly/concurrent, from the first message: "
          f"{conc['steady_virtual_s'] / orde['steady_virtual_s']:.2f} per virtual s, "
          f"{conc['steady_wall_s'] / orde['steady_wall_s']:.2f} per wall s")


if __name__ == "__main__":
    main()
