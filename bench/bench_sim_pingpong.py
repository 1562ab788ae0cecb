"""Simulator speed: an 8-node ping-pong (every node pings every other) on the virtual clock.

    .venv/bin/python bench/bench_sim_pingpong.py [--virtual-ms 10000] [--rounds 5] [--interval-ms 1]

Prints, as medians over rounds: trace events per wall second, simulator steps (loop callbacks)
per wall second, network segments delivered per wall second, and virtual seconds per wall
second. The target: >= 100,000 events/s on one core.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time

from rmqlab.runtime.pingpong import build
from rmqlab.runtime.sim import Simulation


def one_round(virtual_ms: float, seed: int, interval_ms: float = 1.0) -> dict[str, float]:
    sim = Simulation(seed=seed)
    build(sim, 8, interval_ms=interval_ms)  # 56 ping streams
    sim.start_all()
    steps = 0
    original = sim.loop._run_once

    def counting_run_once():
        nonlocal steps
        steps += len(sim.loop._ready) or 1
        original()

    sim.loop._run_once = counting_run_once
    events0, segs0 = len(sim.tracer.events), sim.network.segments_delivered
    t0 = time.perf_counter()
    sim.run_for(virtual_ms)
    wall = time.perf_counter() - t0
    out = {"wall_s": wall,
           "events_per_s": (len(sim.tracer.events) - events0) / wall,
           "steps_per_s": steps / wall,
           "segments_per_s": (sim.network.segments_delivered - segs0) / wall,
           "virtual_s_per_wall_s": virtual_ms / 1000.0 / wall,
           "events": len(sim.tracer.events) - events0}
    sim.close()
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--virtual-ms", type=float, default=10_000)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--interval-ms", type=float, default=1.0, help="pause between pings of one stream")
    args = ap.parse_args(argv)
    rounds = [one_round(args.virtual_ms, seed, args.interval_ms) for seed in range(args.rounds)]
    med = {k: statistics.median(r[k] for r in rounds) for k in rounds[0]}
    print(f"python {sys.version.split()[0]}, 8 nodes, 56 ping streams, {args.interval_ms:g} ms between pings, "
          f"{args.virtual_ms / 1000:.0f} virtual s x {args.rounds} rounds (medians)")
    print(f"trace events        : {med['events_per_s']:,.0f} /s  ({med['events']:,.0f} events per round)")
    print(f"loop callbacks      : {med['steps_per_s']:,.0f} /s")
    print(f"segments delivered  : {med['segments_per_s']:,.0f} /s")
    print(f"virtual s per wall s: {med['virtual_s_per_wall_s']:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
