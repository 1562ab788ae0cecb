"""Acknowledged messages/s of real broker processes, beside raw loopback TCP in the same run.

    .venv/bin/python bench/bench_broker_throughput.py [--messages 20000] [--rounds 3] [--inflight 64]
                                                      [--modes 2m-2s-async,2m-2s-sync] [--relay] [--profile DIR]

For each mode a rmqlab.cluster.Cluster on the real runtime: a NameServer and four brokers (two
masters, two slaves, ASYNC_FLUSH) as OS processes connected directly (`relay=False`: an operator
runs no fault relay). `--relay` runs the same modes a second time with every connection through
the fault relay (a thread of this process, no faults set), so its cost can be stated. One producer process (a DefaultMQProducer on a RealNode,
a child of this script) creates the topic on both masters (4 queues each), waits until the route
shows both, sends 500 warm-up messages, then `--rounds` rounds of `--messages` sends with 1 KiB
bodies, keeping `--inflight` send_async calls outstanding (a semaphore). Each send's latency is from
the send_async call to its result. A message is *acknowledged* when its SendResult is SEND_OK;
anything else is counted apart. The script prints, per mode, the median round's rate and the
p50/p99 latency over all rounds, and the sync/async ratios.

"CPU s" is the CPU time (user + system, from /proc) each process used during the timed rounds:
the producer, the masters, the slaves, and this process (the relay thread, when there is one).

Raw: asyncio streams in this process, no rmqlab code and no relay: a client keeps `--inflight`
copies of a 1 KiB SEND_MESSAGE request frame in flight over one loopback connection and a server
reads each by its length prefix and writes it back (as bench/bench_remoting.py).

`--profile DIR` adds a last 2m-2s-async run with broker-a and the producer under cProfile
(DIR/broker-a.prof, DIR/producer.prof) and prints the top functions of each.

Two trees in one invocation: `--tree DIR` runs the rmqlab package found in DIR (its brokers and
the producer too) instead of this checkout's; `--compare OLD_DIR --pairs N` runs this script
once per tree and pair as a child process (`--tree OLD_DIR`, then this checkout, the order
swapped every other pair so that a drift of the machine's load hits both alike) and prints each
run and the medians of the per-pair new/old ratios, with the load average (`os.getloadavg`)
before each run. The producer runs on the event loop the tree's real runtime gives its
processes (`rmqlab.runtime.real.run_loop`, when the tree has it). For example, against a commit:

    git archive <commit> rmqlab conf | tar -x -C /tmp/old
    .venv/bin/python bench/bench_broker_throughput.py --compare /tmp/old --pairs 3
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import statistics
import struct
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TREE = ROOT  # where rmqlab is imported from (--tree); set in main before any import of it

TOPIC = "BenchTopic"
BODY = bytes(1024)
WARMUP = 500


# -- the producer process ---------------------------------------------------------------------

async def producer_main(namesrv_addr: str, messages: int, rounds: int, inflight: int) -> dict:
    from rmqlab.runtime.real import RealNode

    node_dir = tempfile.mkdtemp(prefix="rmqlab-bench-producer-")
    try:
        return await _produce(RealNode("producer", node_dir), namesrv_addr, messages, rounds, inflight)
    finally:
        shutil.rmtree(node_dir, ignore_errors=True)


async def _produce(node, namesrv_addr: str, messages: int, rounds: int, inflight: int) -> dict:
    from rmqlab.client import ClientProcess
    from rmqlab.client.admin import DefaultMQAdminExt
    from rmqlab.client.producer import DefaultMQProducer
    from rmqlab.client.producer.send_result import SendStatus
    from rmqlab.common.message import Message
    from rmqlab.common.topic_config import TopicConfig

    admin = DefaultMQAdminExt(namesrv_addr)
    producer = DefaultMQProducer("PID_BENCH", namesrv_addr)
    process = ClientProcess(admin=admin, producer=producer)
    await process.start(node)
    await admin.create_and_update_topic_config_by_cluster("DefaultCluster", TopicConfig(TOPIC, 4, 4))
    deadline = time.monotonic() + 30
    while True:  # both masters have registered the topic with the name server
        try:
            route = await admin.examine_topic_route_info(TOPIC)
            if len(route.queue_datas) >= 2:
                break
        except Exception:
            pass
        if time.monotonic() > deadline:
            raise TimeoutError("the topic's route never showed both masters")
        await asyncio.sleep(0.2)

    async def run(count: int) -> tuple[float, list[float], dict[str, int]]:
        sem = asyncio.Semaphore(inflight)
        latencies: list[float] = []
        outcomes: dict[str, int] = {}
        done = asyncio.Event()
        pending = count

        def finish(t0: float, fut: asyncio.Future) -> None:
            nonlocal pending
            sem.release()
            if fut.cancelled() or fut.exception() is not None:
                key = "error: " + type(fut.exception()).__name__ if not fut.cancelled() else "cancelled"
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

    await run(WARMUP)
    node.tracer.events.clear()
    result = {"rounds": [], "cpu_s": 0.0}
    for _ in range(rounds):
        cpu0 = time.process_time()
        elapsed, latencies, outcomes = await run(messages)
        result["cpu_s"] += time.process_time() - cpu0
        result["rounds"].append({"elapsed": elapsed, "latencies": latencies, "outcomes": outcomes})
        node.tracer.events.clear()  # the in-memory trace does not grow across rounds
    await process.shutdown()
    await node.close()
    return result


def producer_entry(args) -> int:
    """The child process: prints a "cpu" line when its timed rounds start, and the result as JSON."""
    if args.profile_out:
        import cProfile

        prof = cProfile.Profile()
        prof.enable()
    import rmqlab.runtime.real as real

    run = getattr(real, "run_loop", asyncio.run)  # the loop the tree's node processes run on
    result = run(producer_main(args.namesrv, args.messages, args.rounds, args.inflight))
    if args.profile_out:
        prof.disable()
        prof.dump_stats(args.profile_out)
    print("RESULT " + json.dumps(result), flush=True)
    return 0


# -- CPU accounting ---------------------------------------------------------------------------

_TICK = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid: int) -> float:
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / _TICK  # utime, stime
    except (FileNotFoundError, ProcessLookupError):
        return 0.0


# -- raw loopback TCP -------------------------------------------------------------------------

def request_frame() -> bytes:
    from rmqlab.remoting import RequestCode, create_request_command

    return create_request_command(RequestCode.SEND_MESSAGE, {
        "producerGroup": "PID_BENCH", "topic": TOPIC, "defaultTopic": "TBW102", "defaultTopicQueueNums": 4,
        "queueId": 1, "sysFlag": 0, "bornTimestamp": 1_700_000_000_000, "flag": 0,
        "properties": "UNIQ_KEY\x017F0000010F2A18B4AAC2171A2B3C0000\x02WAIT\x01true\x02", "reconsumeTimes": 0,
        "unitMode": False, "batch": False}, body=BODY).encode()


async def _echo(reader, writer):
    try:
        while True:
            prefix = await reader.readexactly(4)
            writer.write(prefix + await reader.readexactly(struct.unpack(">i", prefix)[0]))
            await writer.drain()
    except (asyncio.IncompleteReadError, ConnectionError):
        writer.close()


async def raw_rounds(frame: bytes, requests: int, inflight: int, rounds: int) -> float:
    server = await asyncio.start_server(_echo, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    times = []
    for _ in range(rounds):
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        t0 = time.perf_counter()
        sent = min(inflight, requests)
        writer.write(frame * sent)
        for _ in range(requests):
            prefix = await reader.readexactly(4)
            await reader.readexactly(struct.unpack(">i", prefix)[0])
            if sent < requests:
                writer.write(frame)
                sent += 1
                await writer.drain()
        times.append(time.perf_counter() - t0)
        writer.close()
        await writer.wait_closed()
    server.close()
    return requests / statistics.median(times)


# -- the frame path alone ---------------------------------------------------------------------

def hot_path_us(messages: int, repeats: int = 5) -> float:
    """CPU us per message of the frame and trace work a producer and its broker do together per
    message, in this process without sockets: a SEND_MESSAGE_V2 request and its response each
    encoded, decoded by a FrameDecoder and traced as frame.send and frame.recv (the fields
    RemotingChannel builds) into a buffered JSONL trace file, as a node process writes it (one
    write per event-loop iteration; here one iteration per `--inflight`-like batch of 64
    messages). On the event loop the tree's processes run on. The best of `repeats` runs."""
    from rmqlab.remoting import RemotingCommand
    from rmqlab.remoting.frame_decoder import FrameDecoder
    from rmqlab.remoting.remoting_helper import get_request_code_desc, get_response_code_desc
    import rmqlab.runtime.real as real
    from rmqlab.trace import Tracer

    ext = {"a": "PID_BENCH", "b": TOPIC, "c": "TBW102", "d": "4", "e": "1", "f": "0", "g": "1700000000000",
           "h": "0", "i": "UNIQ_KEY\x017F0000010F2A18B4AAC2171A2B3C0000\x02WAIT\x01true\x02", "j": "0",
           "k": "false", "l": "16", "m": "false", "n": "broker-a"}
    response_ext = {"msgId": "7F00000100002A9F0000000000000000", "queueId": "1", "queueOffset": "42",
                    "MSG_REGION": "DefaultRegion", "TRACE_ON": "true"}
    best = float("inf")
    with tempfile.TemporaryDirectory(prefix="rmqlab-bench-hot-") as tmp:
        for r in range(repeats):
            tracer = Tracer(lambda: time.time() * 1000.0, jsonl_path=os.path.join(tmp, f"{r}.jsonl"), keep=False,
                            buffered=True)
            decoder = FrameDecoder()

            def trace(kind: str, cmd, size: int, ext_fields) -> None:
                describe = get_response_code_desc if cmd.is_response_type() else get_request_code_desc
                fields = {"proto": "remoting", "peer": "127.0.0.1:10911", "size": size, "code": cmd.code,
                          "name": describe(cmd.code), "opaque": cmd.opaque, "flag": cmd.flag, "remark": cmd.remark,
                          "body_size": len(cmd.body) if cmd.body else 0,
                          "ext_fields": dict(ext_fields) if kind == "frame.recv" else ext_fields}
                tracer.emit_trusted("broker-a", kind, fields)

            async def run() -> float:
                cpu0 = time.process_time()
                for i in range(messages):
                    if i % 64 == 0:
                        await asyncio.sleep(0)  # a loop iteration: the trace lines are written
                    one(i)
                return time.process_time() - cpu0

            def one(i: int) -> None:
                request = RemotingCommand(310, version=475, ext_fields=ext, body=BODY)
                request.opaque = i
                frame, wire = request.encode_frame()
                trace("frame.send", request, len(frame), wire)
                received = decoder.feed(frame)[0]
                trace("frame.recv", received, received.frame_size, received.ext_fields)
                response = RemotingCommand.create_response_command(0, ext_fields=response_ext)
                response.opaque = i
                frame, wire = response.encode_frame()
                trace("frame.send", response, len(frame), wire)
                answer = decoder.feed(frame)[0]
                trace("frame.recv", answer, answer.frame_size, answer.ext_fields)

            best = min(best, getattr(real, "run_loop", asyncio.run)(run()))
            tracer.close()
    return best / messages * 1e6


# -- one mode ---------------------------------------------------------------------------------

def run_mode(mode: str, args, profile_dir: str | None = None, relay: bool = False) -> dict:
    from rmqlab.cluster import Cluster

    # The Cluster's own temporary root: removed at close.
    cluster = Cluster(mode, runtime="real", mapped_file_size=1024 * 1024 * 1024, relay=relay)
    if profile_dir:  # broker-a under cProfile; a clean stop (SIGTERM) writes the profile
        n = cluster.real.nodes["broker-a"]
        n.argv = [sys.executable, "-m", "cProfile", "-o", os.path.join(profile_dir, "broker-a.prof"), *n.argv[1:]]
    producer = None
    try:
        t0 = time.monotonic()
        cluster.start()
        boot_s = time.monotonic() - t0
        argv = [sys.executable, os.path.abspath(__file__), "--producer", "--tree", TREE, "--namesrv", cluster.namesrv_addr,
                "--messages", str(args.messages), "--rounds", str(args.rounds), "--inflight", str(args.inflight)]
        if profile_dir:
            argv += ["--profile-out", os.path.join(profile_dir, "producer.prof")]
        env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in (TREE, os.environ.get("PYTHONPATH")) if p))
        producer = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
        names = list(cluster.brokers)
        pids = {name: cluster.real.pid(name) for name in names}
        before = {name: cpu_seconds(pid) for name, pid in pids.items()}
        self0 = sum(os.times()[:2])
        out, err = producer.communicate(timeout=args.timeout)
        cpu = {name: cpu_seconds(pid) - before[name] for name, pid in pids.items()}
        cpu["manager+relay" if relay else "manager"] = sum(os.times()[:2]) - self0
        if producer.returncode != 0:
            raise RuntimeError(f"producer exited {producer.returncode}:\n{err[-3000:]}")
        line = next(ln for ln in out.splitlines() if ln.startswith("RESULT "))
        result = json.loads(line[len("RESULT "):])
        if profile_dir:
            cluster.real.stop("broker-a", timeout_s=30)
    finally:
        if producer is not None and producer.poll() is None:
            producer.kill()
        cluster.close()
    rates = [args.messages / r["elapsed"] for r in result["rounds"]]
    acked = [sum(v for k, v in r["outcomes"].items() if k == "SEND_OK") for r in result["rounds"]]
    latencies = sorted(x for r in result["rounds"] for x in r["latencies"])
    outcomes: dict[str, int] = {}
    for r in result["rounds"]:
        for k, v in r["outcomes"].items():
            outcomes[k] = outcomes.get(k, 0) + v
    ack_rates = [a / r["elapsed"] for a, r in zip(acked, result["rounds"])]
    return {"mode": mode, "boot_s": boot_s, "rate": statistics.median(ack_rates), "rates": ack_rates,
            "send_rate": statistics.median(rates), "outcomes": outcomes,
            "p50": latencies[len(latencies) // 2] * 1000 if latencies else float("nan"),
            "p99": latencies[min(len(latencies) - 1, int(len(latencies) * 0.99))] * 1000 if latencies else float("nan"),
            "cpu": {"producer": result["cpu_s"], **cpu},
            "wall_s": sum(r["elapsed"] for r in result["rounds"]), "acked": sum(acked)}


def print_profile(path: str, title: str, top: int) -> None:
    import io
    import pstats

    s = io.StringIO()
    stats = pstats.Stats(path, stream=s)
    print(f"--- {title}: top {top} by own time (tottime) ---")
    stats.sort_stats("tottime").print_stats(top)
    body = s.getvalue()
    print(body[body.find("   ncalls"):].rstrip())
    s = io.StringIO()
    stats.stream = s
    print(f"--- {title}: top {top} by cumulative time ---")
    stats.sort_stats("cumulative").print_stats(top)
    body = s.getvalue()
    print(body[body.find("   ncalls"):].rstrip())


def compare(args) -> int:
    """--compare: this script per tree and pair as a child process; the runs, then the medians."""
    trees = {"old": os.path.abspath(args.compare), "new": ROOT}
    runs: list[tuple[int, str, float, dict]] = []
    with tempfile.TemporaryDirectory(prefix="rmqlab-bench-compare-") as tmp:
        for pair in range(args.pairs):
            for label in (("old", "new") if pair % 2 == 0 else ("new", "old")):
                out = os.path.join(tmp, f"{pair}-{label}.json")
                argv = [sys.executable, os.path.abspath(__file__), "--tree", trees[label], "--json", out,
                        "--messages", str(args.messages), "--rounds", str(args.rounds),
                        "--inflight", str(args.inflight), "--modes", args.modes, "--timeout", str(args.timeout)]
                load = os.getloadavg()[0]
                done = subprocess.run(argv, capture_output=True, text=True, timeout=args.timeout * 4)
                if done.returncode != 0:
                    raise RuntimeError(f"the {label} run exited {done.returncode}:\n{done.stderr[-3000:]}")
                with open(out) as f:
                    runs.append((pair, label, load, json.load(f)))
    print(f"python {sys.version.split()[0]}, {os.cpu_count()} cores; {args.messages} sends x {args.rounds} rounds "
          f"per mode and run, {args.inflight} in flight; old = {trees['old']}, new = {trees['new']}")
    modes = args.modes.split(",")
    for pair, label, load, r in runs:
        raw = r["raw"]
        cells = []
        for mode in modes:
            m = r["modes"][mode]
            acked = m["acked"]
            cpu = m["cpu"]
            cells.append(f"{mode} {m['rate']:>6,.0f} msg/s ({m['rate'] / raw:5.1%} of raw) p50 {m['p50']:6.2f} ms, "
                         f"us/msg producer {cpu['producer'] / acked * 1e6:.0f} broker-a {cpu['broker-a'] / acked * 1e6:.0f} "
                         f"total {sum(cpu.values()) / acked * 1e6:.0f}")
        print(f"pair {pair} {label}: load {load:4.2f}, raw {raw:,.0f} rt/s, frame path {r['hot_path_us']:.1f} us/msg; "
              + "; ".join(cells))

    def metric(r: dict, mode: str, what: str) -> float:
        m = r["modes"][mode]
        if what == "rate":
            return m["rate"]
        if what == "p50":
            return m["p50"]
        cpu = m["cpu"]
        return (sum(cpu.values()) if what == "total" else cpu[what]) / m["acked"] * 1e6

    by_pair = {(pair, label): r for pair, label, _load, r in runs}
    old_hot = [by_pair[(p, "old")]["hot_path_us"] for p in range(args.pairs)]
    new_hot = [by_pair[(p, "new")]["hot_path_us"] for p in range(args.pairs)]
    print(f"frame path alone   us/msg        : old median {statistics.median(old_hot):>8,.1f}, new median "
          f"{statistics.median(new_hot):>8,.1f}; median new/old "
          f"{statistics.median(n / o for n, o in zip(new_hot, old_hot)):.2f}")
    for mode in modes:
        for what, unit in (("rate", "acked msg/s"), ("p50", "p50 ms"), ("producer", "producer us/msg"),
                           ("broker-a", "broker-a us/msg"), ("total", "total us/msg")):
            old = [metric(by_pair[(p, "old")], mode, what) for p in range(args.pairs)]
            new = [metric(by_pair[(p, "new")], mode, what) for p in range(args.pairs)]
            ratio = statistics.median(n / o for n, o in zip(new, old))
            print(f"{mode:<12} {unit:<16}: old median {statistics.median(old):>8,.1f}, new median "
                  f"{statistics.median(new):>8,.1f}; median new/old {ratio:.2f}")
    if "2m-2s-async" in modes and "2m-2s-sync" in modes:
        for label in ("old", "new"):
            ratios = [by_pair[(p, label)]["modes"]["2m-2s-sync"]["p50"] / by_pair[(p, label)]["modes"]["2m-2s-async"]["p50"]
                      for p in range(args.pairs)]
            print(f"sync / async p50 latency, {label}: median {statistics.median(ratios):.2f}x "
                  f"[{', '.join(f'{x:.2f}' for x in ratios)}]")
    if args.json:
        with open(args.json, "w") as f:
            json.dump([{"pair": p, "tree": label, "load": load, **r} for p, label, load, r in runs], f)
    return 0


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--messages", type=int, default=20_000, help="sends per round")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--inflight", type=int, default=64)
    ap.add_argument("--modes", default="2m-2s-async,2m-2s-sync")
    ap.add_argument("--timeout", type=float, default=300.0, help="seconds a mode's producer may run")
    ap.add_argument("--relay", action="store_true", help="also run every mode through the fault relay")
    ap.add_argument("--profile", metavar="DIR", help="add a profiled 2m-2s-async run, writing .prof files to DIR")
    ap.add_argument("--top", type=int, default=25)
    ap.add_argument("--tree", metavar="DIR", help="import rmqlab from DIR (default: this checkout)")
    ap.add_argument("--compare", metavar="OLD_DIR", help="run OLD_DIR's rmqlab and this checkout's alternating")
    ap.add_argument("--pairs", type=int, default=3, help="with --compare: runs per tree")
    ap.add_argument("--json", metavar="PATH", help="also write the results as JSON to PATH")
    ap.add_argument("--producer", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--namesrv", help=argparse.SUPPRESS)
    ap.add_argument("--profile-out", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    global TREE
    TREE = os.path.abspath(args.tree) if args.tree else ROOT
    sys.path.insert(0, TREE)
    if args.producer:
        return producer_entry(args)
    if args.compare:
        return compare(args)

    frame = request_frame()
    hot = hot_path_us(min(args.messages, 20_000))
    raw = asyncio.run(raw_rounds(frame, args.messages, args.inflight, args.rounds))
    raw_uv = None
    try:
        import uvloop
    except ImportError:
        pass
    else:
        with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
            raw_uv = runner.run(raw_rounds(frame, args.messages, args.inflight, args.rounds))
    modes = args.modes.split(",")
    results = {mode: run_mode(mode, args) for mode in modes}
    relayed = {mode: run_mode(mode, args, relay=True) for mode in modes} if args.relay else {}
    print(f"python {sys.version.split()[0]}, {os.cpu_count()} cores; {args.messages} sends x {args.rounds} rounds "
          f"per mode, {args.inflight} in flight, one producer process, 1 KiB bodies, ASYNC_FLUSH, "
          f"request frame {len(frame)} bytes")
    print(f"rmqlab from {TREE}")
    print(f"frame path alone (request and response encoded, decoded, 4 frame events traced to JSONL): "
          f"{hot:.1f} us CPU per message")
    print(f"raw loopback TCP (asyncio echo, same frame, {args.inflight} in flight): {raw:>9,.0f} rt/s"
          + (f"; on uvloop's loop {raw_uv:,.0f} rt/s" if raw_uv else ""))

    def report(mode: str, r: dict) -> None:
        others = {k: v for k, v in r["outcomes"].items() if k != "SEND_OK"}
        print(f"{mode:<12}: {r['rate']:>7,.0f} acked msg/s ({r['rate'] / raw:5.1%} of raw)  "
              f"p50 {r['p50']:6.2f} ms  p99 {r['p99']:6.2f} ms  rounds "
              f"[{', '.join(f'{x:,.0f}' for x in r['rates'])}]" + (f"  not SEND_OK: {others}" if others else ""))
        cpu = r["cpu"]
        acked = r["acked"]
        print(f"{'':<12}  CPU s over {r['wall_s']:.1f} s wall: " + ", ".join(f"{k} {v:.1f}" for k, v in cpu.items()))
        print(f"{'':<12}  CPU us per acked message: " + ", ".join(
            f"{k} {v / acked * 1e6:.0f}" for k, v in cpu.items()) + f"; total {sum(cpu.values()) / acked * 1e6:.0f}")

    print("direct connections (no relay):")
    for mode, r in results.items():
        report(mode, r)
    if "2m-2s-async" in results and "2m-2s-sync" in results:
        a, s = results["2m-2s-async"], results["2m-2s-sync"]
        print(f"sync / async: throughput {s['rate'] / a['rate']:.1%}, p50 latency {s['p50'] / a['p50']:.2f}x, "
              f"p99 latency {s['p99'] / a['p99']:.2f}x  (sync is {1 - s['rate'] / a['rate']:.1%} slower)")
    if relayed:
        print("through the fault relay (no faults set):")
        for mode, r in relayed.items():
            report(mode, r)
            print(f"{'':<12}  relay / direct: throughput {r['rate'] / results[mode]['rate']:.1%}, "
                  f"p50 latency {r['p50'] / results[mode]['p50']:.2f}x")
    target = results.get("2m-2s-async")
    if target:
        print(f"floor >= 10,000 acked msg/s in 2m-2s-async: {'met' if target['rate'] >= 10_000 else 'NOT met'} "
              f"({target['rate']:,.0f})")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"tree": TREE, "raw": raw, "raw_uvloop": raw_uv, "hot_path_us": hot, "modes": results,
                       "relayed": relayed}, f)
    if args.profile:
        os.makedirs(args.profile, exist_ok=True)
        p = run_mode("2m-2s-async", args, profile_dir=args.profile)
        print(f"profiled 2m-2s-async run (broker-a and producer under cProfile): {p['rate']:,.0f} acked msg/s; "
              "CPU s: " + ", ".join(f"{k} {v:.1f}" for k, v in p["cpu"].items()))
        print_profile(os.path.join(args.profile, "broker-a.prof"), "broker-a", args.top)
        print_profile(os.path.join(args.profile, "producer.prof"), "producer", args.top)
    return 0


if __name__ == "__main__":
    sys.exit(main())
