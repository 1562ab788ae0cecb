"""Controller-mode failover on real processes: SIGKILL the master, time the first acknowledged send
on the new master (target ≤ 1.5 s).

    .venv/bin/python bench/bench_failover.py [--runs 10] [--interval-ms 5] [--poll-ms 100] [--json FILE]

Each run starts a fresh deployment as tests/test_cpp_controller_failover.py does (`rmqlab
namesrv`, three `rmqlab controller`, three `rmqlab broker` of broker set broker-a from
conf/controller/ with free ports and the lab's short timeouts, LAB_CONTROLLER and LAB_BROKER
there; RealCluster without the fault relay), waits until the master is the name server's brokerId 0
and the SyncStateSet holds all three replicas, then starts a producer process: rmqlab's
DefaultMQProducer on a RealNode, a child of this script, starting a send_async every
`--interval-ms` (at most 64 in flight, so a send stuck on the dying master delays no other) and
polling the name server's cluster info every 10 ms in the same loop. After 100 acknowledged sends
the master gets SIGKILL, and the run ends 0.5 s after the first send acknowledged by another broker.

Measured from the kill (the manager's node.kill event, wall clock after the signal was sent):

* inactive: a controller traced that the master is inactive (its channel closed);
* elected:  the controller leader traced the election done (committed through Raft);
* master:   the new master traced its role change to SYNC_MASTER (epoch file, HA, then the
            NameServer registration starts);
* route:    the producer process's poll first saw the new master as brokerId 0 (10 ms poll);
* ack:      the producer received the first SEND_OK whose offset message id names the new master.

Client setting that matters: the producer's route refresh, ClientConfig.poll_name_server_interval
(RocketMQ's pollNameServerInterval, 30 s by default), here `--poll-ms`. The producer sends to the
master of its cached route; a send to the dead address fails at once (connection refused) and its
retries (retry_times_when_send_failed 2) go to the same broker, the only one in the set; once a
refresh shows the group without a master there is no writable queue and every send fetches the
route, so the new master is found within a refresh interval of its registration at the latest.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

TOPIC = "FailoverBench"
KILL_AFTER_ACKS = 100
AFTER_FIRST_ACK_S = 0.5
MAX_IN_FLIGHT = 64
ROUTE_POLL_S = 0.010


# -- the producer process -----------------------------------------------------------------------

async def producer_main(namesrv: str, interval_ms: float, poll_ms: int) -> None:
    """Print one JSON line per send result and per change of the route's master; stop on stdin EOF."""
    with tempfile.TemporaryDirectory(prefix="rmqlab-bench-failover-producer-") as store_dir:
        await produce(namesrv, interval_ms, poll_ms, store_dir)


async def produce(namesrv: str, interval_ms: float, poll_ms: int, store_dir: str) -> None:
    from rmqlab.client import ClientProcess
    from rmqlab.client.admin import DefaultMQAdminExt
    from rmqlab.client.client_config import ClientConfig
    from rmqlab.client.producer import DefaultMQProducer
    from rmqlab.client.producer.send_result import SendStatus
    from rmqlab.common.message import Message
    from rmqlab.common.message.message_decoder import decode_message_id
    from rmqlab.runtime.real import RealNode

    node = RealNode("bench-producer", store_dir)
    producer = DefaultMQProducer("PID_FAILOVER", client_config=ClientConfig(
        namesrv_addr=namesrv, poll_name_server_interval=poll_ms))
    admin = DefaultMQAdminExt(namesrv, timeout_millis=1000)
    process = ClientProcess(admin=admin, producer=producer)
    await process.start(node)
    loop = asyncio.get_running_loop()
    stopped = asyncio.Event()

    def on_stdin() -> None:  # any line, or EOF, stops the producer
        sys.stdin.readline()
        loop.remove_reader(sys.stdin.fileno())
        stopped.set()

    loop.add_reader(sys.stdin.fileno(), on_stdin)

    def emit(**fields) -> None:
        print(json.dumps({"t": time.time(), **fields}), flush=True)

    def done(fut: asyncio.Future) -> None:
        sem.release()
        if fut.cancelled() or fut.exception() is not None:
            emit(ev="send", ok=False, err=type(fut.exception()).__name__ if not fut.cancelled() else "cancelled")
            return
        r = fut.result()
        (host, port), _ = decode_message_id(r.offset_msg_id)
        emit(ev="send", ok=r.send_status is SendStatus.SEND_OK, status=r.send_status.value, store=f"{host}:{port}")

    async def poll_route() -> None:
        last = None
        while not stopped.is_set():
            try:
                data = (await admin.examine_broker_cluster_info()).broker_addr_table.get("broker-a")
                master = data.broker_addrs.get(0) if data is not None else None
            except Exception:
                master = "?"
            if master != last:
                emit(ev="route", master=master)
                last = master
            await asyncio.sleep(ROUTE_POLL_S)

    poller = asyncio.ensure_future(poll_route())
    sem = asyncio.Semaphore(MAX_IN_FLIGHT)
    i = 0
    next_at = time.monotonic()
    while not stopped.is_set():
        await sem.acquire()
        producer.send_async(Message(TOPIC, b"x" * 128, properties={"KEYS": f"k{i}"})).add_done_callback(done)
        i += 1
        next_at += interval_ms / 1000
        await asyncio.sleep(max(0.0, next_at - time.monotonic()))
    await poller
    await process.shutdown()
    await node.close()


# -- one run --------------------------------------------------------------------------------------

def run_once(args, k: int) -> dict:
    from tests.deployment_helpers import start_deployment, wait_ready

    root = tempfile.mkdtemp(prefix=f"rmqlab-bench-failover-{k}-")
    dep = start_deployment(root, lab_timeouts=not args.production_timeouts)
    child = None
    err = open(os.path.join(root, "producer.err"), "w")  # the client's own log lines
    try:
        old = wait_ready(dep)
        old_node = dep.broker_node(old)
        child = subprocess.Popen([sys.executable, os.path.abspath(__file__), "--child", dep.namesrv,
                                  str(args.interval_ms), str(args.poll_ms)],
                                 stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                                 stderr=err)
        events: list[dict] = []
        acks = 0
        deadline = time.monotonic() + 30
        while acks < KILL_AFTER_ACKS:
            line = child.stdout.readline()
            assert line and time.monotonic() < deadline, "the producer did not get 100 acknowledgements"
            events.append(json.loads(line))
            acks += events[-1]["ev"] == "send" and events[-1]["ok"]
        dep.cluster.nemesis.kill(old_node)
        kill_ms = next(e.time_ms for e in dep.cluster.manager_events() if e.kind == "node.kill")
        first_ack = None
        deadline = time.monotonic() + 60
        while first_ack is None or time.time() < first_ack + AFTER_FIRST_ACK_S:
            line = child.stdout.readline()
            assert line and time.monotonic() < deadline, "no acknowledged send on a new master within 60 s"
            e = json.loads(line)
            events.append(e)
            if first_ack is None and e["ev"] == "send" and e["ok"] and e["store"] != old:
                first_ack = e["t"]
        child.stdin.close()
        child.wait(20)

        def since(t_ms: float | None) -> float | None:
            return None if t_ms is None else round((t_ms - kill_ms) / 1000, 3)

        def first(node_names, pred) -> float | None:
            times = [e.time_ms for n in node_names for e in dep.cluster.events(n) if e.time_ms >= kill_ms and pred(e)]
            return min(times) if times else None

        controllers = list(dep.controllers)
        msg = lambda e: e.fields.get("message", "")  # noqa: E731
        new = next(e["store"] for e in events if e["ev"] == "send" and e["ok"] and e["t"] >= first_ack)
        route = [e["t"] for e in events if e["ev"] == "route" and e["master"] == new and e["t"] * 1000 >= kill_ms]
        after_kill = [e for e in events if e["ev"] == "send" and e["t"] * 1000 >= kill_ms and e["t"] < first_ack]
        return {
            "inactive": since(first(controllers, lambda e: e.kind == "log" and "is inactive" in msg(e))),
            "elected": since(first(controllers, lambda e: e.kind == "log" and msg(e).startswith(
                "Elect a new master in broker-set: broker-a done"))),
            "master": since(first([dep.broker_node(new)], lambda e: e.kind == "role" and e.fields.get("to") ==
                                   "SYNC_MASTER" and e.fields.get("component") == "broker")),
            "route": since(route[0] * 1000) if route else None,
            "ack": since(first_ack * 1000),
            "failed_sends": sum(1 for e in after_kill if not e["ok"]),
        }
    finally:
        if child is not None and child.poll() is None:
            child.kill()
            child.wait(10)
        dep.cluster.close()
        err.close()
        if not args.keep:
            shutil.rmtree(root, ignore_errors=True)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--runs", type=int, default=10)
    p.add_argument("--interval-ms", type=float, default=5.0, help="ms between sends (default 5)")
    p.add_argument("--poll-ms", type=int, default=100,
                   help="the producer's route refresh, pollNameServerInterval (default 100; RocketMQ 30000)")
    p.add_argument("--production-timeouts", action="store_true",
                   help="run the servers with RocketMQ's default timeouts instead of the lab's")
    p.add_argument("--json", help="also write every run's numbers here")
    p.add_argument("--keep", action="store_true", help="keep each run's directory (logs, traces, stores)")
    p.add_argument("--child", nargs=3, metavar=("NAMESRV", "INTERVAL_MS", "POLL_MS"), help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.child:
        asyncio.run(producer_main(args.child[0], float(args.child[1]), int(args.child[2])))
        return 0

    from tests.deployment_helpers import LAB_BROKER, LAB_CONTROLLER

    if args.production_timeouts:
        print("controller and broker: RocketMQ's default timeouts")
    else:
        print(f"controller: {LAB_CONTROLLER}\nbroker: {LAB_BROKER}")
    print(f"producer: send_async every {args.interval_ms} ms, "
          f"pollNameServerInterval {args.poll_ms} ms, retryTimesWhenSendFailed 2, sendMsgTimeout 3000 ms")
    columns = ("inactive", "elected", "master", "route", "ack")
    print("run  " + "  ".join(f"{c:>8}" for c in columns) + "  failed sends   (s after the kill)")
    runs = []
    for k in range(args.runs):
        r = run_once(args, k)
        runs.append(r)
        print(f"{k:>3}  " + "  ".join(f"{r[c]:8.3f}" if r[c] is not None else f"{'-':>8}" for c in columns)
              + f"  {r['failed_sends']:>12}", flush=True)
    print("median " + "  ".join(f"{statistics.median(v):8.3f}" if (v := [r[c] for r in runs if r[c] is not None])
                                else f"{'-':>8}" for c in columns))
    for label, fn in (("min", min), ("max", max)):
        print(f"{label:<6} " + "  ".join(f"{fn(v):8.3f}" if (v := [r[c] for r in runs if r[c] is not None])
                                         else f"{'-':>8}" for c in columns))
    acks = [r["ack"] for r in runs]
    print(f"first acknowledged send on the new master: median {statistics.median(acks):.3f} s over {len(acks)} runs "
          f"(target <= 1.5 s: {'met' if statistics.median(acks) <= 1.5 else 'not met'})")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"args": vars(args), "runs": runs}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
