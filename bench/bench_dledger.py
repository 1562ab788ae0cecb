"""DLedger CommitLog mode against controller mode and 2m-2s-sync on real processes: acknowledged
msg/s, send latency, and failover time from a master kill to the first acknowledged send.

    .venv/bin/python bench/bench_dledger.py [--runs 10] [--messages 3000] [--rounds 2] [--inflight 64]
                                            [--sequential 300] [--modes dledger,controller-embedded,2m-2s-sync]
                                            [--strace] [--json FILE] [--keep]

Every run starts each mode afresh, in a rotated order (run k starts with mode k mod 3), so that a
drift of the shared machine's load hits all modes alike: a rmqlab.cluster.Cluster on the real
runtime without the fault relay (`rmqlab namesrv`, the mode's `rmqlab broker` processes from
conf/<mode>/, and for controller-embedded three name servers with embedded controllers), 64 MiB
commitlog files, ASYNC_FLUSH as the templates have it, RocketMQ's default server timeouts.
`--modes dledger,dledger+batchpush` compares DLedger with and without enableBatchPush (DLedger's
BatchAppendEntryRequest pushes, off by default).

One replica group takes the measured writes in every mode: RaftNode00's three DLedger members
(a write is acknowledged once 2 of 3 store it); broker-a's three controller-mode replicas
(allAckInSyncStateSet: once every member of the SyncStateSet, 3 of 3, has it); broker-a and its
slave in 2m-2s-sync (SYNC_MASTER, inSyncReplicas 2: once the slave has it). The throughput topic
lives on that group only (in 2m-2s-sync, on broker-a; broker-b runs idle).

A producer process (rmqlab's DefaultMQProducer on a RealNode, a child of this script) then:

1. throughput: 300 warm-up sends, then `--rounds` rounds of `--messages` sends of 1 KiB bodies with
   `--inflight` send_async calls outstanding; acked msg/s is SEND_OK results over the round's wall
   time (median round), latency from the send_async call to its result (p50/p99 over all rounds);
2. sequential latency: `--sequential` sends one at a time (nothing queued behind another: the
   replication round trips themselves);
3. failover: a send_async every 5 ms (at most 64 in flight), route refresh every 100 ms
   (pollNameServerInterval, RocketMQ 30 s), until told to stop. After 100 acknowledged sends the
   master gets SIGKILL. In DLedger and controller mode the stream goes to the group's topic; in
   2m-2s-sync broker-a's group gets no new master (nothing elects one), so the stream goes to a
   topic on both groups, and the first acknowledged send after the kill is broker-b's.

Measured from the kill (the manager's node.kill event): `master` a broker traced its role change
to a master role, `route` the producer's 10 ms poll first listed a new master of the group as
brokerId 0, `ack` the first SEND_OK of a send started after the kill. CPU µs per acknowledged
message of each process comes from /proc during the throughput rounds (bench_broker_throughput's
helper); the replication frames per message and their bytes from the brokers' traces
(frame.send events, by request code) over the same rounds. `--strace` also counts, in the first
run only, the syscalls of the master (leader) during an extra round under `strace -f -c`
(msync/fsync, sendto/writev, ...), whose rate does not count.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
sys.path.insert(0, os.path.join(ROOT, "bench"))

from bench_broker_throughput import cpu_seconds  # noqa: E402

TOPIC = "BenchDLedger"            # the measured group's topic
STREAM_TOPIC_2M = "BenchDLedgerAB"  # 2m-2s-sync's failover stream: both groups
BODY = bytes(1024)
WARMUP = 300
KILL_AFTER_ACKS = 100
AFTER_FIRST_ACK_S = 0.3
STREAM_INTERVAL_MS = 5.0
STREAM_MAX_IN_FLIGHT = 64
ROUTE_POLL_S = 0.010
POLL_NAMESRV_MS = 100
GROUP = {"dledger": "RaftNode00", "dledger-5": "RaftNode00", "controller-embedded": "broker-a",
         "controller-standalone": "broker-a", "2m-2s-sync": "broker-a"}
# Variants: a mode of rmqlab.cluster.modes with broker settings on top (a mode name + a suffix).
VARIANTS = {"+batchpush": {"enableBatchPush": True}}  # DLedger's batch push (default false)


def mode_and_overrides(name: str) -> tuple[str, dict]:
    for suffix, settings in VARIANTS.items():
        if name.endswith(suffix):
            return name[:-len(suffix)], {"*": settings}
    return name, {}


# -- the producer process -----------------------------------------------------------------------

async def producer_main(namesrv: str, group: str, stream_topic: str, messages: int, rounds: int, inflight: int,
                        sequential: int, store_dir: str) -> None:
    from rmqlab.client import ClientProcess
    from rmqlab.client.admin import DefaultMQAdminExt
    from rmqlab.client.client_config import ClientConfig
    from rmqlab.client.producer import DefaultMQProducer
    from rmqlab.client.producer.send_result import SendStatus
    from rmqlab.common.message import Message
    from rmqlab.common.message.message_decoder import decode_message_id
    from rmqlab.runtime.real import RealNode

    node = RealNode("bench-producer", store_dir)
    producer = DefaultMQProducer("PID_DLEDGER_BENCH", client_config=ClientConfig(
        namesrv_addr=namesrv, poll_name_server_interval=POLL_NAMESRV_MS))
    admin = DefaultMQAdminExt(namesrv, timeout_millis=1000)
    process = ClientProcess(admin=admin, producer=producer)
    await process.start(node)
    loop = asyncio.get_running_loop()

    def emit(**fields) -> None:
        print(json.dumps({"t": time.time(), **fields}), flush=True)

    async def window(count: int, width: int) -> tuple[float, list[float], dict[str, int]]:
        sem = asyncio.Semaphore(width)
        latencies: list[float] = []
        outcomes: dict[str, int] = {}
        done = asyncio.Event()
        pending = count

        def finish(t0: float, fut: asyncio.Future) -> None:
            nonlocal pending
            sem.release()
            if fut.cancelled() or fut.exception() is not None:
                key = "cancelled" if fut.cancelled() else "error: " + type(fut.exception()).__name__
            else:
                key = fut.result().send_status.value
                if fut.result().send_status is SendStatus.SEND_OK:
                    latencies.append(time.perf_counter() - t0)
            outcomes[key] = outcomes.get(key, 0) + 1
            pending -= 1
            if pending == 0:
                done.set()

        t_start = time.perf_counter()
        for _ in range(count):
            await sem.acquire()
            t0 = time.perf_counter()
            producer.send_async(Message(TOPIC, BODY)).add_done_callback(lambda f, t0=t0: finish(t0, f))
        await done.wait()
        return time.perf_counter() - t_start, latencies, outcomes

    async def next_command() -> str:
        return (await loop.run_in_executor(None, sys.stdin.readline)).strip()

    # Warm-up, until a whole window is SEND_OK: the followers caught up (DLedger), the slave's HA
    # connection is up (2m-2s-sync answers FLUSH_SLAVE_TIMEOUT or SLAVE_NOT_AVAILABLE until then).
    deadline = time.monotonic() + 60
    while (await window(WARMUP, inflight))[2] != {"SEND_OK": WARMUP}:
        if time.monotonic() > deadline:
            raise TimeoutError("warm-up sends not all SEND_OK within 60 s")
    node.tracer.events.clear()
    emit(ev="rounds")                       # the parent samples CPU and the traces' ends here
    rounds_out = []
    for _ in range(rounds):
        elapsed, latencies, outcomes = await window(messages, inflight)
        rounds_out.append({"elapsed": elapsed, "latencies": latencies, "outcomes": outcomes})
        node.tracer.events.clear()          # the in-memory trace does not grow across rounds
    emit(ev="rounds_done", rounds=rounds_out)
    _, latencies, outcomes = await window(sequential, 1)
    emit(ev="sequential", latencies=latencies, outcomes=outcomes)
    node.tracer.events.clear()
    if await next_command() == "extra":     # a round under strace (its rate does not count)
        elapsed, _, outcomes = await window(messages, inflight)
        emit(ev="extra_done", elapsed=elapsed, outcomes=outcomes)
        node.tracer.events.clear()
        await next_command()

    # -- the failover stream: until stdin closes
    stopped = asyncio.Event()

    def on_stdin() -> None:
        sys.stdin.readline()
        loop.remove_reader(sys.stdin.fileno())
        stopped.set()

    loop.add_reader(sys.stdin.fileno(), on_stdin)

    def done(t0: float, fut: asyncio.Future) -> None:
        sem.release()
        if fut.cancelled() or fut.exception() is not None:
            emit(ev="send", start=t0, ok=False)
            return
        r = fut.result()
        (host, port), _ = decode_message_id(r.offset_msg_id)
        emit(ev="send", start=t0, ok=r.send_status is SendStatus.SEND_OK, store=f"{host}:{port}")

    async def poll_route() -> None:
        last = None
        while not stopped.is_set():
            try:
                data = (await admin.examine_broker_cluster_info()).broker_addr_table.get(group)
                master = data.broker_addrs.get(0) if data is not None else None
            except Exception:
                master = "?"
            if master != last:
                emit(ev="route", master=master)
                last = master
            await asyncio.sleep(ROUTE_POLL_S)

    poller = asyncio.ensure_future(poll_route())
    sem = asyncio.Semaphore(STREAM_MAX_IN_FLIGHT)
    next_at = time.monotonic()
    while not stopped.is_set():
        await sem.acquire()
        t0 = time.time()
        producer.send_async(Message(stream_topic, b"x" * 128)).add_done_callback(lambda f, t0=t0: done(t0, f))
        next_at += STREAM_INTERVAL_MS / 1000
        await asyncio.sleep(max(0.0, next_at - time.monotonic()))
    await poller
    await process.shutdown()
    await node.close()


def child_entry(args) -> int:
    import rmqlab.runtime.real as real

    namesrv, group, stream_topic = args.child
    with tempfile.TemporaryDirectory(prefix="rmqlab-bench-dledger-producer-") as store_dir:
        real.run_loop(producer_main(namesrv, group, stream_topic, args.messages, args.rounds, args.inflight,
                                    args.sequential, store_dir))
    return 0


# -- one mode, one run ----------------------------------------------------------------------------

def topic_on(cluster, topic: str, broker_name: str | None) -> None:
    """Create `topic` (4 queues) on `broker_name`'s master only, or on every master (None), and wait
    until the name server routes it there."""
    from rmqlab.common.topic_config import TopicConfig

    if broker_name is None:
        cluster.create_topic(topic, timeout_ms=20_000)
        return

    async def create(admin, now_ms) -> None:
        info = await admin.examine_broker_cluster_info()
        await admin.create_and_update_topic_config(info.broker_addr_table[broker_name].broker_addrs[0],
                                                   TopicConfig(topic, 4, 4))
        deadline = now_ms() + 20_000
        while True:
            try:
                route = await admin.examine_topic_route_info(topic)
                if any(q.broker_name == broker_name for q in route.queue_datas):
                    return
            except Exception:
                pass
            if now_ms() > deadline:
                raise TimeoutError(f"{topic} not routed to {broker_name}")
            await asyncio.sleep(0.05)

    cluster.admin(create)


def wait_sync_state_set(cluster, group: str, size: int, timeout_s: float = 60) -> None:
    """Controller mode: wait until the controller leader's SyncStateSet of `group` holds `size`
    live replicas. Before that a write is acknowledged by fewer replicas (allAckInSyncStateSet
    waits for the set as it is), and a replica outside it is not electable."""
    found: list[int] = []

    async def probe(admin, now_ms) -> None:
        meta = await admin.get_controller_meta_data(cluster.controller_addr)
        if meta.controller_leader_address:
            info = await admin.get_in_sync_state_data(meta.controller_leader_address, [group])
            replicas = info.replicas_info_table.get(group)
            found.append(sum(1 for r in replicas.in_sync_replicas if r.alive) if replicas else 0)

    deadline = time.monotonic() + timeout_s
    while True:
        found.clear()
        try:
            cluster.admin(probe)
        except Exception:
            pass
        if found and found[0] >= size:
            return
        assert time.monotonic() < deadline, f"the SyncStateSet of {group} never held {size} replicas"
        time.sleep(0.3)


def frame_counts(cluster, nodes: list[str], since_ms: float, until_ms: float) -> dict[str, list[float]]:
    """frame.send events of `nodes` in [since_ms, until_ms): request name -> [count, bytes]."""
    out: dict[str, list[float]] = {}
    for n in nodes:
        for e in cluster.real.events(n):
            if e.kind == "frame.send" and since_ms <= e.time_ms < until_ms:
                name = f"{e.fields.get('name')}{' (response)' if e.fields.get('flag', 0) & 1 else ''}"
                c = out.setdefault(name, [0, 0])
                c[0] += 1
                c[1] += e.fields.get("size", 0)
    return out


def strace_counts(pid: int, seconds_hint: float, proc: subprocess.Popen, out_path: str) -> dict[str, int]:
    """Attach `strace -f -c` to `pid` while the producer's extra round runs."""
    tracer = subprocess.Popen(["strace", "-f", "-c", "-o", out_path, "-p", str(pid)],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    time.sleep(1.0)  # attached to every thread
    proc.stdin.write("extra\n")
    proc.stdin.flush()
    line = json.loads(proc.stdout.readline())
    assert line["ev"] == "extra_done", line
    tracer.send_signal(signal.SIGINT)
    tracer.wait(30)
    counts = {}
    with open(out_path) as f:
        for row in f:
            parts = row.split()
            if len(parts) >= 5 and parts[0][0].isdigit() and parts[-1] != "total":
                counts[parts[-1]] = int(parts[3])
    counts["_acked"] = line["outcomes"].get("SEND_OK", 0)
    return counts


def run_mode(mode: str, args, k: int, do_strace: bool) -> dict:
    from rmqlab.cluster import Cluster

    root = tempfile.mkdtemp(prefix=f"rmqlab-bench-dledger-{mode}-{k}-")
    base, overrides = mode_and_overrides(mode)
    cluster = Cluster(base, runtime="real", seed=k, root_dir=root, relay=False, mapped_file_size=64 * 1024 * 1024,
                      overrides=overrides)
    child = None
    group = GROUP[base]
    classic = base == "2m-2s-sync"
    result: dict = {"mode": mode, "load": os.getloadavg()[0]}
    try:
        cluster.start(timeout_ms=60_000)
        cluster.run_until(lambda: cluster.master(group if not classic else None) is not None, 60_000, poll_ms=100)
        if cluster.controller_nodes:
            wait_sync_state_set(cluster, group, len(cluster.brokers))
        topic_on(cluster, TOPIC, group)
        stream_topic = STREAM_TOPIC_2M if classic else TOPIC
        if classic:
            topic_on(cluster, STREAM_TOPIC_2M, None)
        master = "broker-a" if classic else cluster.master(group)
        members = [n for n in cluster.brokers if cluster.broker_template(n).brokerName == group]
        child = subprocess.Popen([sys.executable, os.path.abspath(__file__), "--child", cluster.namesrv_addr, group,
                                  stream_topic, "--messages", str(args.messages), "--rounds", str(args.rounds),
                                  "--inflight", str(args.inflight), "--sequential", str(args.sequential)],
                                 stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                                 stderr=open(os.path.join(root, "producer.err"), "w"),
                                 env=dict(os.environ, PYTHONPATH=os.pathsep.join(
                                     p for p in (ROOT, os.environ.get("PYTHONPATH")) if p)))

        def read(ev: str, timeout_s: float = 300) -> dict:
            deadline = time.monotonic() + timeout_s
            while True:
                line = child.stdout.readline()
                assert line, f"{mode}: the producer exited before {ev}"
                e = json.loads(line)
                if e["ev"] == ev:
                    return e
                assert time.monotonic() < deadline, f"{mode}: no {ev} within {timeout_s} s"

        pids = {n: cluster.real.pid(n) for n in members}
        pids["producer"] = child.pid
        start = read("rounds")
        cpu0 = {n: cpu_seconds(p) for n, p in pids.items()}
        done = read("rounds_done")
        cpu = {n: cpu_seconds(p) - cpu0[n] for n, p in pids.items()}
        seq = read("sequential")
        rounds = done["rounds"]
        acked = sum(r["outcomes"].get("SEND_OK", 0) for r in rounds)
        lat = sorted(x for r in rounds for x in r["latencies"])
        slat = sorted(seq["latencies"])

        def pct(xs: list[float], q: float) -> float:
            return xs[min(len(xs) - 1, int(len(xs) * q))] * 1000 if xs else float("nan")

        result.update({
            "master": master,
            "rate": statistics.median(r["outcomes"].get("SEND_OK", 0) / r["elapsed"] for r in rounds),
            "not_ok": sum(v for r in rounds for o, v in r["outcomes"].items() if o != "SEND_OK"),
            "p50": pct(lat, 0.5), "p99": pct(lat, 0.99), "seq_p50": pct(slat, 0.5), "seq_p99": pct(slat, 0.99),
            "cpu_us": {("master" if n == master else "producer" if n == "producer" else "replica " + n):
                       v / acked * 1e6 for n, v in cpu.items()},
            "frames": {name: [c / acked, b / acked] for name, (c, b) in frame_counts(
                cluster, members, start["t"] * 1000, done["t"] * 1000).items()},
        })
        if do_strace:
            result["syscalls"] = strace_counts(cluster.real.pid(master), 0, child, os.path.join(root, "strace.txt"))
        child.stdin.write("go\n")
        child.stdin.flush()

        # -- failover
        acks = 0
        while acks < KILL_AFTER_ACKS:
            e = read("send", 30)
            acks += e["ok"]
        old_addr = e["store"] if not classic else None
        cluster.nemesis.kill(master)
        kill_ms = max(e.time_ms for e in cluster.real.manager_events() if e.kind == "node.kill")
        kill_s = kill_ms / 1000
        first_ack = route_t = None
        failed = 0
        deadline = time.monotonic() + 90
        while first_ack is None or time.time() < first_ack + AFTER_FIRST_ACK_S:
            line = child.stdout.readline()
            assert line and time.monotonic() < deadline, f"{mode}: no acknowledged send within 90 s of the kill"
            e = json.loads(line)
            if e["ev"] == "route" and route_t is None and e["t"] >= kill_s and e["master"] not in (None, "?", old_addr):
                route_t = e["t"]
            if e["ev"] == "send" and e["start"] >= kill_s:
                if e["ok"] and first_ack is None:
                    first_ack = e["t"]
                elif not e["ok"] and first_ack is None:
                    failed += 1
        child.stdin.close()
        child.wait(30)
        masters = [t for t, n, _ in cluster.master_changes() if t >= kill_ms and n != master]
        result.update({
            "failover_master": (min(masters) - kill_ms) / 1000 if masters else None,
            "failover_route": route_t - kill_s if route_t and not classic else None,
            "failover_ack": first_ack - kill_s, "failed_sends": failed,
        })
        return result
    finally:
        if child is not None and child.poll() is None:
            child.kill()
            child.wait(10)
        cluster.close()
        if not args.keep:
            shutil.rmtree(root, ignore_errors=True)


# -- the report -----------------------------------------------------------------------------------

def med(values) -> float | None:
    values = [v for v in values if v is not None]
    return statistics.median(values) if values else None


def fmt(v, spec: str = ".2f") -> str:
    return "-" if v is None else format(v, spec)


def report(runs: list[dict], modes: list[str]) -> None:
    by_mode = {m: [r for r in runs if r["mode"] == m] for m in modes}
    print(f"\nmedians over runs ({', '.join(f'{m}: {len(rs)}' for m, rs in by_mode.items())}):")
    print(f"{'mode':<20} {'acked msg/s':>11} {'p50 ms':>8} {'p99 ms':>8} {'seq p50':>8} {'seq p99':>8} "
          f"{'master s':>9} {'route s':>8} {'ack s':>7} {'ack min-max':>13}")
    meds = {}
    for m, rs in by_mode.items():
        meds[m] = {k: med(r.get(k) for r in rs) for k in ("rate", "p50", "p99", "seq_p50", "seq_p99",
                                                            "failover_master", "failover_route", "failover_ack")}
        acks = [r["failover_ack"] for r in rs]
        d = meds[m]
        print(f"{m:<20} {fmt(d['rate'], ',.0f'):>11} {fmt(d['p50']):>8} {fmt(d['p99']):>8} {fmt(d['seq_p50']):>8} "
              f"{fmt(d['seq_p99']):>8} {fmt(d['failover_master'], '.3f'):>9} {fmt(d['failover_route'], '.3f'):>8} "
              f"{fmt(d['failover_ack'], '.3f'):>7} {min(acks):6.3f}-{max(acks):.3f}")
    base = "dledger" if "dledger" in modes else modes[0]
    for m in modes:
        if m == base:
            continue
        # Ratios within each run (same machine state), then their median.
        pairs = [(a, b) for a in by_mode[base] for b in by_mode[m] if a["run"] == b["run"]]
        for key, label in (("rate", "acked msg/s"), ("p50", "p50 latency"), ("p99", "p99 latency"),
                           ("seq_p50", "sequential p50"), ("failover_ack", "kill -> first ack")):
            ratios = [a[key] / b[key] for a, b in pairs if a.get(key) and b.get(key)]
            print(f"{base} / {m:<20} {label:<18}: median {fmt(med(ratios))}x  "
                  f"[{', '.join(f'{x:.2f}' for x in ratios)}]")
    print("\nper acknowledged message, median over runs (throughput rounds):")
    for m, rs in by_mode.items():
        keys = sorted({k for r in rs for k in r["cpu_us"]})
        print(f"  {m:<20} CPU us: " + ", ".join(f"{k} {med(r['cpu_us'].get(k) for r in rs):.0f}" for k in keys))
        names = sorted({k for r in rs for k in r["frames"]})
        print(f"  {'':<20} frames sent by the group's brokers (count, bytes): " + "; ".join(
            f"{k} {med(r['frames'].get(k, [0, 0])[0] for r in rs):.2f}, {med(r['frames'].get(k, [0, 0])[1] for r in rs):.0f}"
            for k in names))
        for r in rs:
            if "syscalls" in r:
                s = r["syscalls"]
                n = s.pop("_acked") or 1
                top = sorted(s.items(), key=lambda kv: -kv[1])[:10]
                print(f"  {'':<20} master syscalls per acked message (strace, run {r['run']}): "
                      + ", ".join(f"{k} {v / n:.2f}" for k, v in top)
                      + "; " + ", ".join(f"{k} {s.get(k, 0) / n:.3f}" for k in ("msync", "fsync", "fdatasync")))


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--runs", type=int, default=10)
    p.add_argument("--messages", type=int, default=3000, help="sends per throughput round")
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument("--inflight", type=int, default=64)
    p.add_argument("--sequential", type=int, default=300, help="sends one at a time, for the latency alone")
    p.add_argument("--modes", default="dledger,controller-embedded,2m-2s-sync",
                   help="modes of rmqlab.cluster.modes; dledger+batchpush is dledger with enableBatchPush=true")
    p.add_argument("--strace", action="store_true", help="count the master's syscalls in the first run")
    p.add_argument("--json", help="also write every run's numbers here")
    p.add_argument("--keep", action="store_true", help="keep each run's directory (logs, traces, stores)")
    p.add_argument("--child", nargs=3, metavar=("NAMESRV", "GROUP", "STREAM_TOPIC"), help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.child:
        return child_entry(args)
    modes = args.modes.split(",")
    print(f"python {sys.version.split()[0]}, {os.cpu_count()} cores; per mode and run: {args.rounds} x "
          f"{args.messages} sends of 1 KiB, {args.inflight} in flight; {args.sequential} sequential; failover "
          f"stream every {STREAM_INTERVAL_MS} ms, pollNameServerInterval {POLL_NAMESRV_MS} ms")
    print(f"uptime before: {subprocess.run(['uptime'], capture_output=True, text=True).stdout.strip()}")
    runs = []
    for k in range(args.runs):
        order = modes[k % len(modes):] + modes[:k % len(modes)]
        for m in order:
            r = run_mode(m, args, k, args.strace and k == 0)
            r["run"] = k
            runs.append(r)
            print(f"run {k} {m:<20} load {r['load']:4.2f}  {r['rate']:7,.0f} acked msg/s  p50 {r['p50']:6.2f} "
                  f"p99 {r['p99']:6.2f} ms  seq p50 {r['seq_p50']:5.2f} p99 {r['seq_p99']:5.2f} ms  kill -> master "
                  f"{fmt(r['failover_master'], '.3f')} route {fmt(r['failover_route'], '.3f')} ack "
                  f"{r['failover_ack']:.3f} s ({r['failed_sends']} failed)"
                  + (f"  not SEND_OK {r['not_ok']}" if r["not_ok"] else ""), flush=True)
            if args.json:
                with open(args.json, "w") as f:
                    json.dump(runs, f, indent=1)
    print(f"uptime after: {subprocess.run(['uptime'], capture_output=True, text=True).stdout.strip()}")
    report(runs, modes)
    return 0


if __name__ == "__main__":
    sys.exit(main())
