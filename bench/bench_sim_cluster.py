"""A controller-mode cluster under load on the simulator: how many virtual seconds a wall second buys.

    .venv/bin/python bench/bench_sim_cluster.py [--trees OLD,NEW] [--rounds 3] [--virtual-s 60] [--rate 1000]
                                                [--profile FILE]

The cluster: three standalone controllers and a name server, two broker groups (broker-a and
broker-b) of three replicas each from conf/controller/ (allAckInSyncStateSet, ASYNC_FLUSH, the
lab's settings as the workload catalog sets them), one producer sending 64-byte messages at
`--rate` msg/s (async sends, one every 1000/rate virtual ms, at most 64 in flight) to a topic of
4 queues on each group, and one push consumer reading it from the first offset. 20 virtual s after
the producer starts, broker-a's master is killed (SIGKILL); the run lasts `--virtual-s` virtual
seconds from the producer's start (the set-up before it is not counted).

Printed per tree (medians over rounds, the trees alternating in one invocation, each round in a
fresh worker process with only that tree on the import path): wall s and CPU s of the timed
part, virtual s per wall s, trace events per wall s, acknowledged sends, messages consumed, and
whether broker-a had a new master. `--profile FILE` runs one more round of the last tree under
cProfile and prints where the time goes.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TOPIC = "BenchTopic"
KILL_AT_S = 20.0


def worker(virtual_s: float, rate: float, profile: str | None) -> dict:
    import cProfile
    import time

    from rmqlab.cluster import Cluster
    from rmqlab.cluster.modes import STANDALONE, DeploymentMode
    from rmqlab.viz import quiet_logs
    from rmqlab.workload.catalog import LAB_BROKER_SETTINGS

    brokers = {f"broker-{g}-n{i}": f"controller/broker-n{i}.conf" for g in "ab" for i in range(3)}
    mode = DeploymentMode("controller-2x3", brokers, controllers=STANDALONE,
                          broker_settings={"*": dict(LAB_BROKER_SETTINGS),
                                           **{f"broker-b-n{i}": {"brokerName": "broker-b", "listenPort": 31911 + 10 * i,
                                                                       "haListenPort": 31912 + 10 * i}
                                                    for i in range(3)}})
    with quiet_logs(), Cluster(mode, seed=1) as c:
        c.start(60_000)
        for group in ("broker-a", "broker-b"):
            c.run_until(lambda group=group: c.master(group) is not None, 30_000)
        c.create_topic(TOPIC, 4)
        c.run_for(3_000)  # routes reach the name server
        c.add_producer("producer", topic=TOPIC, interval_ms=1000.0 / rate, body_size=64, send_mode="async",
                       in_flight=64, duration_ms=virtual_s * 1000)
        c.add_consumer("consumer", topic=TOPIC, consume_from_where="CONSUME_FROM_FIRST_OFFSET")
        first_master = c.master("broker-a")
        events_before = len(c.tracer.events)
        t0 = c.now_ms()
        prof = cProfile.Profile() if profile else None
        wall, cpu = time.perf_counter(), time.process_time()
        if prof:
            prof.enable()
        c.sim.at(t0 + KILL_AT_S * 1000, lambda: c.nemesis.kill(first_master))
        c.run_for(virtual_s * 1000)
        if prof:
            prof.disable()
        wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
        events = c.tracer.events[events_before:]
        ok = [e.fields for e in events if e.kind == "client" and e.fields["type"] == "ok"]
        # Acknowledged: SEND_OK (rmqlab.checker.checkers.send_acknowledged), not any ok.
        acked = sum(1 for f in ok if f["f"] == "send" and (f["value"] or {}).get("send_status") == "SEND_OK")
        consumed = sum(1 for f in ok if f["f"] == "consume")
        new_master = c.master("broker-a")
        result = {"wall_s": wall, "cpu_s": cpu, "virtual_s": (c.now_ms() - t0) / 1000.0, "events": len(events),
                  "acked": acked, "consumed": consumed, "failover": new_master not in (None, first_master)}
    if prof:
        import pstats

        prof.dump_stats(profile)
        pstats.Stats(profile).sort_stats("tottime").print_stats(30)
    return result


def run_tree(tree: str, args: argparse.Namespace, profile: str | None = None) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith("RMQLAB_")}
    env["PYTHONPATH"] = tree
    argv = [sys.executable, os.path.abspath(__file__), "--worker", "--virtual-s", str(args.virtual_s),
            "--rate", str(args.rate)] + (["--profile", profile] if profile else [])
    out = subprocess.run(argv, env=env, cwd=tree, check=True, capture_output=True, text=True).stdout
    if profile:
        print(out)
    return json.loads([line for line in out.splitlines() if line.startswith("{")][-1])


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--trees", default=ROOT, help="comma-separated source trees (default: this repository)")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--virtual-s", type=float, default=60.0)
    p.add_argument("--rate", type=float, default=1000.0, help="messages per virtual second")
    p.add_argument("--profile", help="one more round of the last tree under cProfile, saved here")
    p.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.worker:
        print(json.dumps(worker(args.virtual_s, args.rate, args.profile)))
        return 0
    trees = [os.path.abspath(t) for t in args.trees.split(",")]
    runs: dict[str, list[dict]] = {t: [] for t in trees}
    for _ in range(args.rounds):
        for t in trees:
            runs[t].append(run_tree(t, args))
            print(f"{t}: {runs[t][-1]}", file=sys.stderr, flush=True)
    print(f"python {sys.version.split()[0]}, {args.virtual_s:.0f} virtual s at {args.rate:.0f} msg/s, "
          f"{args.rounds} rounds (medians)")
    for t, rs in runs.items():
        wall = statistics.median(r["wall_s"] for r in rs)
        cpu = statistics.median(r["cpu_s"] for r in rs)
        events = statistics.median(r["events"] for r in rs)
        print(f"{t}: wall {wall:.1f} s, CPU {cpu:.1f} s, {args.virtual_s / wall:.2f} virtual s per wall s, "
              f"{events / wall:,.0f} trace events per wall s ({events:,.0f} events), "
              f"acked {statistics.median(r['acked'] for r in rs):,.0f}, "
              f"consumed {statistics.median(r['consumed'] for r in rs):,.0f}, "
              f"failover {all(r['failover'] for r in rs)}")
    if len(trees) > 1:
        first, last = (statistics.median(r["wall_s"] for r in runs[t]) for t in (trees[0], trees[-1]))
        print(f"ratio {os.path.basename(trees[0])} / {os.path.basename(trees[-1])}: {first / last:.2f}x")
    if args.profile:
        run_tree(trees[-1], args, args.profile)
    return 0


if __name__ == "__main__":
    sys.exit(main())
