"""Produce and consume throughput through the Proxy with Apache's 5.x gRPC client, beside the same
workload straight over remoting with rmqlab's own client, in one run.

    .venv/bin/python bench/bench_proxy.py [--messages 2000] [--rounds 3] [--size 1024] [--mode cluster|local]

One real deployment (rmqlab.cluster.Cluster, runtime="real", no fault relay): a NameServer, one
broker (single-master, ASYNC_FLUSH) and a Proxy, Cluster mode by default (`--mode local`: the
broker runs it, --enable-proxy). Each round, alternating so machine noise hits both alike:

  proxy     the official client (rocketmq-python-client 5.1.2, its own venv, a subprocess):
            produce = `--messages` sync Producer.send calls one after another;
            consume = a SimpleConsumer receiving batches of 32 (ReceiveMessage -> POP on the
            broker) and acking each message (AckMessage -> ACK_MESSAGE), as 5.x consumers do;
  remoting  rmqlab's DefaultMQProducer (sync send, SEND_MESSAGE_V2 to the broker) and
            DefaultMQPullConsumer (PULL_MESSAGE, 32 per pull, queue by queue, the offsets kept in
            memory and written once at the end, as a 4.x pull consumer does) in a child process.

A third row sends the same messages as raw SendMessage calls from a plain grpc stub (rmqlab's
generated classes, a child process), to separate the Proxy's cost from the official client's.

Each side's rate is messages / elapsed time from its first call, excluding client start-up; the
script prints each round and the medians and the proxy/remoting ratios. One message at a time on
both sides: these are latency-bound rates (a round trip per send, per ack), not the broker's
capacity (bench/bench_broker_throughput.py measures that, with 64 sends in flight).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)


async def remoting_main(namesrv: str, topic: str, group: str, messages: int, size: int) -> dict:
    from rmqlab.client import ClientProcess
    from rmqlab.client.consumer.default_mq_pull_consumer import DefaultMQPullConsumer
    from rmqlab.client.consumer.pull_result import PullStatus
    from rmqlab.client.producer import DefaultMQProducer
    from rmqlab.common.message import Message
    from rmqlab.runtime.real import RealNode

    node = RealNode("bench-remoting", tempfile.mkdtemp(prefix="rmqlab-bench-proxy-"))
    producer = DefaultMQProducer("PID_BENCH_PROXY", namesrv)
    consumer = DefaultMQPullConsumer(group, namesrv)
    process = ClientProcess(producer=producer, pull_consumer=consumer)
    await process.start(node)
    await producer.send(Message(topic, bytes(size)))  # route lookup and connection, untimed
    body = bytes(size)
    t0 = time.perf_counter()
    errors = 0
    for _ in range(messages):
        try:
            await producer.send(Message(topic, body))
        except Exception:
            errors += 1
    produce = {"count": messages, "elapsed": time.perf_counter() - t0, "errors": errors}
    queues = await consumer.fetch_subscribe_message_queues(topic)
    got = 0
    t0 = time.perf_counter()
    for mq in queues:
        offset = await consumer.fetch_consume_offset(mq, True)
        offset = max(offset, 0)
        while True:
            result = await consumer.pull(mq, "*", offset, 32)
            if result.pull_status is not PullStatus.FOUND:
                break
            got += len(result.msg_found_list)
            offset = result.next_begin_offset
            consumer.update_consume_offset(mq, offset)  # in memory, as the Java pull consumer
    await consumer.persist_consumer_offset()
    consume = {"count": got - 1, "elapsed": time.perf_counter() - t0, "errors": 0}  # minus the warm-up send
    await process.shutdown()
    await node.close()
    return {"produce": produce, "consume": consume}


def run_remoting(namesrv: str, topic: str, group: str, messages: int, size: int) -> dict:
    out = subprocess.run([sys.executable, __file__, "--remoting-child", namesrv, topic, group, str(messages), str(size)],
                         capture_output=True, text=True, timeout=600, cwd=ROOT)
    if out.returncode != 0:
        raise RuntimeError(out.stderr[-3000:])
    return json.loads(out.stdout.strip().splitlines()[-1])


def run_proxy(endpoint: str, topic: str, group: str, messages: int, size: int, home: str) -> dict:
    from tests.oracles import SCRIPTS, oracle_env, python5_client_python

    def oracle(*args: str) -> dict:
        out = subprocess.run([python5_client_python(), os.path.join(SCRIPTS, "py5_client.py"), *args],
                             capture_output=True, text=True, timeout=600, env=oracle_env(home))
        if out.returncode != 0:
            raise RuntimeError(out.stderr[-3000:])
        return json.loads(out.stdout.strip().splitlines()[-1])

    return {"produce": oracle("bench_produce", endpoint, topic, str(messages), str(size)),
            "consume": oracle("bench_consume", endpoint, topic, group, str(messages))}


def run_raw_grpc(endpoint: str, topic: str, messages: int, size: int) -> dict:
    """SendMessage requests straight from a grpc stub in a child process, one after another: the
    Proxy's own cost per send, without the official client's (its threads, retries, metadata
    signing). rmqlab's generated classes; never the official client's in the same process."""
    code = (
        "import sys, time, os, grpc\n"
        "from rmqlab.proto.v2 import definition_pb2 as pb, service_pb2 as spb\n"
        "ep, topic, n, size = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])\n"
        "ch = grpc.insecure_channel(ep); call = ch.unary_unary('/apache.rocketmq.v2.MessagingService/SendMessage')\n"
        "def req(i): return spb.SendMessageRequest(messages=[pb.Message(topic=pb.Resource(name=topic), body=bytes(size),"
        " system_properties=pb.SystemProperties(message_id='01%032X' % i, message_type=pb.NORMAL))]).SerializeToString()\n"
        "call(req(0), timeout=10)\n"
        "t0 = time.perf_counter(); errors = 0\n"
        "for i in range(1, n + 1):\n"
        "    r = spb.SendMessageResponse.FromString(call(req(i), timeout=10))\n"
        "    errors += r.status.code != pb.OK\n"
        "print('{\"count\": %d, \"elapsed\": %f, \"errors\": %d}' % (n, time.perf_counter() - t0, errors))\n")
    out = subprocess.run([sys.executable, "-c", code, endpoint, topic, str(messages), str(size)],
                         capture_output=True, text=True, timeout=600, cwd=ROOT)
    if out.returncode != 0:
        raise RuntimeError(out.stderr[-3000:])
    return json.loads(out.stdout.strip().splitlines()[-1])


def rate(r: dict) -> float:
    return r["count"] / r["elapsed"]


def main() -> int:
    if len(sys.argv) > 1 and sys.argv[1] == "--remoting-child":
        namesrv, topic, group, messages, size = sys.argv[2:7]
        print(json.dumps(asyncio.run(remoting_main(namesrv, topic, group, int(messages), int(size)))))
        return 0
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--messages", type=int, default=2000)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--size", type=int, default=1024)
    ap.add_argument("--mode", choices=("cluster", "local"), default="cluster")
    args = ap.parse_args()

    from rmqlab.cluster import Cluster
    from tests.oracles import python5_client_python

    python5_client_python()
    home = tempfile.mkdtemp(prefix="rmqlab-bench-home-")
    c = Cluster("single-master", runtime="real", relay=False, proxy=args.mode)
    rows: dict[str, dict[str, list[float]]] = {"proxy": {"produce": [], "consume": []},
                                               "remoting": {"produce": [], "consume": []}}
    raw: list[float] = []
    try:
        c.start()
        for i in range(args.rounds):
            for side in ("proxy", "remoting"):
                topic, group = f"Bench{side.title()}{i}", f"GID_bench_{side}_{i}"
                c.create_topic(topic)
                if side == "proxy":
                    r = run_proxy(c.proxy_endpoints[0], topic, group, args.messages, args.size, home)
                else:
                    r = run_remoting(c.namesrv_addr, topic, group, args.messages, args.size)
                for what in ("produce", "consume"):
                    assert r[what]["count"] == args.messages and not r[what]["errors"], (side, what, r[what])
                    rows[side][what].append(rate(r[what]))
                print(f"round {i} {side:8s} produce {rate(r['produce']):8.0f} msg/s   "
                      f"consume {rate(r['consume']):8.0f} msg/s", flush=True)
            r = run_raw_grpc(c.proxy_endpoints[0], f"BenchProxy{i}", args.messages, args.size)
            assert not r["errors"], r
            raw.append(rate(r))
            print(f"round {i} raw gRPC SendMessage {raw[-1]:8.0f} msg/s", flush=True)
    finally:
        c.close()
    print(f"\n{args.messages} messages of {args.size} B per round, {args.rounds} rounds, proxy {args.mode} mode; medians:")
    for what in ("produce", "consume"):
        p, r = statistics.median(rows["proxy"][what]), statistics.median(rows["remoting"][what])
        print(f"  {what:8s} proxy {p:8.0f} msg/s   remoting {r:8.0f} msg/s   proxy/remoting {p / r:.2f}")
    print(f"  produce  raw gRPC stub to the Proxy {statistics.median(raw):8.0f} msg/s (no official client)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
