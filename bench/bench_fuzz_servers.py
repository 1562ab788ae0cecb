"""A fuzz campaign against a real name server and broker: seeded mutations of the frames real
clients send, round after round, with each server's RSS before and after every round, the bytes
its logs hold, their ERROR lines and tracebacks.

    PYTHONPATH=. .venv/bin/python bench/bench_fuzz_servers.py [--frames 1000000] [--rounds 4] [--seed 1]

`rmqlab namesrv` and `rmqlab broker` run as their own processes on 127.0.0.1 with their default
settings (idle timeout 120 s, a 64 MiB budget for unfinished frames, logs rolling over at 16 MiB),
from a temporary HOME. Each round sends --frames / --rounds mutated frames, half to each server,
over 8 connections per server (tests/fuzz_frames.py: byte flips and insertions, weird, long and
mistyped header values, nesting 50 to 100,000 levels deep, mutated bodies, broken framing; a
connection the server closes is reopened). After the rounds: each server must still answer a
real request, and the name server must hold no registration but the broker's own.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import select
import shutil
import socket
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from rmqlab.remoting.protocol.body.cluster_info import ClusterInfo  # noqa: E402
from rmqlab.remoting.remoting_command import RemotingCommand  # noqa: E402
from tests.fuzz_frames import broker_seeds, campaign_frames, log_census, namesrv_seeds, rss_kib, send_frames  # noqa: E402
from tests.process_helpers import stop  # noqa: E402
from tests.fuzz_frames import request_on_new_connection  # noqa: E402

BATCH = 5000  # frames generated and sent at a time (bounds the fuzzer's own memory)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def boot(argv: list[str], env: dict, cwd: str) -> subprocess.Popen:
    proc = subprocess.Popen([sys.executable, "-m", "rmqlab.cli", *argv], env=env, cwd=cwd,
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    ready, _, _ = select.select([proc.stdout], [], [], 60)
    line = proc.stdout.readline() if ready else ""
    if "boot success" not in line:
        stop(proc)
        raise SystemExit(f"{argv[0]} did not start: {line!r}")
    return proc


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--frames", type=int, default=1_000_000)
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    tmp = tempfile.mkdtemp(prefix="rmqlab-fuzz-")
    ns_port, broker_port = free_port(), free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("RMQLAB_") and k != "NAMESRV_ADDR"}
    env.update(HOME=tmp, PYTHONPATH=os.pathsep.join(p for p in (ROOT, os.environ.get("PYTHONPATH")) if p))
    with open(os.path.join(tmp, "namesrv.properties"), "w") as f:
        f.write(f"listenPort={ns_port}\n")
    with open(os.path.join(tmp, "broker.properties"), "w") as f:
        f.write(f"brokerName=broker-f\nlistenPort={broker_port}\nhaListenPort={free_port()}\nbrokerIP1=127.0.0.1\n"
                f"namesrvAddr=127.0.0.1:{ns_port}\nstorePathRootDir={tmp}/store\n")
    logs_dir = os.path.join(tmp, "logs")
    namesrv = boot(["namesrv", "-c", os.path.join(tmp, "namesrv.properties")], env, tmp)
    broker = boot(["broker", "-c", os.path.join(tmp, "broker.properties")], env, tmp)
    rng = random.Random(args.seed)
    per_round = args.frames // args.rounds // 2
    print(f"{args.frames:,} frames in {args.rounds} rounds ({per_round:,} per server per round), seed {args.seed}")
    print("| round | frames | s | namesrv RSS MB before → after | broker RSS MB before → after "
          "| log MB | ERROR lines | tracebacks | reconnects |")
    print("|---|---|---|---|---|---|---|---|---|")
    sent = 0
    try:
        for r in range(1, args.rounds + 1):
            before = rss_kib(namesrv.pid) / 1024, rss_kib(broker.pid) / 1024
            start = time.monotonic()
            reconnects = 0
            for _ in range(0, per_round, BATCH):
                reconnects += asyncio.run(send_frames(ns_port, campaign_frames(rng, namesrv_seeds(), BATCH)))
                reconnects += asyncio.run(send_frames(broker_port, campaign_frames(rng, broker_seeds(), BATCH)))
                sent += 2 * BATCH
            time.sleep(1)
            after = rss_kib(namesrv.pid) / 1024, rss_kib(broker.pid) / 1024
            census = log_census(logs_dir)
            print(f"| {r} | {sent:,} | {time.monotonic() - start:.0f} | {before[0]:.0f} → {after[0]:.0f} "
                  f"| {before[1]:.0f} → {after[1]:.0f} | {census['bytes'] / 2 ** 20:.1f} | {census['errors']:,} "
                  f"| {census['tracebacks']} | {reconnects:,} |", flush=True)
        alive = namesrv.poll() is None and broker.poll() is None
        info = ClusterInfo.decode(asyncio.run(request_on_new_connection(
            ns_port, RemotingCommand.create_request_command(106))).body)
        offset = asyncio.run(request_on_new_connection(broker_port, RemotingCommand.create_request_command(
            30, {"topic": "broker-f", "queueId": "0"})))
        def names(table) -> str:  # a junk name may be 70 KB long
            return f"{len(table)} {sorted(n if len(n) <= 40 else f'{n[:20]}...({len(n)} chars)' for n in table)}"
        print(f"alive: {alive}; broker answers GET_MAX_OFFSET: code {offset.code}; name server holds clusters "
              f"{names(info.cluster_addr_table)}, groups {names(info.broker_addr_table)}")
        print("log files:", sorted(os.listdir(os.path.join(logs_dir, "rmqlab"))))
    finally:
        stop(broker)
        stop(namesrv)
        shutil.rmtree(tmp, ignore_errors=True)  # the broker's store holds a 1 GiB (sparse) commitlog file


if __name__ == "__main__":
    main()
