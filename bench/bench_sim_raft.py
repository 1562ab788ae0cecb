"""Simulator speed with pysyncobj: a 3-replica Raft counter under a write load and leader kills.

    .venv/bin/python bench/bench_sim_raft.py [--virtual-s 60] [--kill-every-s 10] [--down-s 3]
                                             [--write-every-ms 20] [--rounds 3] [--seed 1] [--no-journal]

Each round builds a fresh Simulation (seed, seed+1, ...) with three CounterReplicas (file journals,
as a controller would keep them), lets them elect, then runs `--virtual-s` virtual seconds during
which a client submits one increment every `--write-every-ms` to the running replicas in turn
(followers forward to the leader), and every `--kill-every-s` the current leader is killed
(kill -9) and restarted `--down-s` later. Only that run is timed. Afterwards the load stops, the
cluster is given 15 virtual seconds to settle, and every replica's counter must be equal.

Printed per round and as medians: wall seconds; virtual seconds per wall second; trace events
(every frame, role and Raft-view change, connection and fault) per wall second; elections (role
changes to LEADER); writes committed (SUCCESS), and how the other writes ended.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import platform
import statistics
import time

from rmqlab.raft import RaftError
from rmqlab.raft.counter import build, leaders
from rmqlab.runtime.sim import Simulation


def run_round(seed: int, virtual_s: float, kill_every_s: float, down_s: float, write_every_ms: float,
              journal: bool) -> dict:
    sim = Simulation(seed=seed)
    names = build(sim, 3, journal=journal)
    sim.start_all()
    outcomes: collections.Counter[str] = collections.Counter()
    submitted = 0

    def record(fut: asyncio.Future) -> None:
        try:
            fut.result()
            outcomes["SUCCESS"] += 1
        except RaftError as e:
            outcomes[e.reason.name] += 1

    async def client() -> None:
        nonlocal submitted
        turn = 0
        while True:
            await asyncio.sleep(write_every_ms / 1000.0)
            running = [n for n in names if sim.nodes[n].alive]
            if running:
                fut = sim.components[running[turn % len(running)]].incr_future(1)
                fut.add_done_callback(record)
                submitted += 1
                turn += 1

    def kill_leader() -> None:
        current = leaders(sim, names)
        if current:
            victim = current[0]
            sim.nemesis.kill(victim)
            sim.at(sim.now_ms() + down_s * 1000.0, lambda: sim.nemesis.restart(victim))

    start_ms = sim.now_ms()
    kills = 0
    t = kill_every_s
    while t < virtual_s:
        sim.at(start_ms + t * 1000.0, kill_leader)
        kills += 1
        t += kill_every_s
    load = sim.loop.create_task(client())

    wall = time.perf_counter()
    events_before = len(sim.tracer.events)
    sim.run_for(virtual_s * 1000.0)
    wall = time.perf_counter() - wall
    events = len(sim.tracer.events) - events_before

    load.cancel()
    sim.run_for(15_000)  # settle: restarts finish, followers catch up
    final = {n: sim.components[n].value for n in names if sim.nodes[n].alive}
    elections = sum(1 for e in sim.tracer.events[events_before:]
                    if e.kind == "role" and e.fields["to"] == "LEADER" and e.time_ms <= start_ms + virtual_s * 1000)
    sim.close()
    if len(set(final.values())) != 1:
        raise AssertionError(f"replicas disagree after settling: {final}")
    return {"seed": seed, "wall": wall, "virtual_per_wall": virtual_s / wall, "events": events,
            "events_per_wall": events / wall, "elections": elections, "kills": kills, "submitted": submitted,
            "committed": outcomes["SUCCESS"], "outcomes": dict(sorted(outcomes.items())),
            "final_value": next(iter(final.values()))}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--virtual-s", type=float, default=60.0)
    ap.add_argument("--kill-every-s", type=float, default=10.0)
    ap.add_argument("--down-s", type=float, default=3.0)
    ap.add_argument("--write-every-ms", type=float, default=20.0)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--no-journal", dest="journal", action="store_false")
    args = ap.parse_args(argv)
    print(f"python {platform.python_version()}, 3 replicas, {args.virtual_s:g} virtual s per round, leader killed "
          f"every {args.kill_every_s:g} s (down {args.down_s:g} s), one write every {args.write_every_ms:g} ms, "
          f"journal {'on' if args.journal else 'off'}")
    rounds = []
    for r in range(args.rounds):
        res = run_round(args.seed + r, args.virtual_s, args.kill_every_s, args.down_s, args.write_every_ms,
                        args.journal)
        rounds.append(res)
        print(f"seed {res['seed']}: {res['wall']:.2f} s wall, {res['virtual_per_wall']:.1f} virtual s/wall s, "
              f"{res['events']} events ({res['events_per_wall']:,.0f}/wall s), {res['elections']} elections "
              f"for {res['kills']} kills, {res['committed']}/{res['submitted']} writes committed, "
              f"outcomes {res['outcomes']}, final value {res['final_value']} on every replica")
    med = lambda key: statistics.median(r[key] for r in rounds)  # noqa: E731
    print(f"median: {med('wall'):.2f} s wall, {med('virtual_per_wall'):.1f} virtual s per wall s, "
          f"{med('events_per_wall'):,.0f} trace events per wall s, {med('elections'):g} elections, "
          f"{med('committed'):g} writes committed")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
