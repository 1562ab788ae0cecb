"""The smallest replicated state machine: a counter, for tests, the benchmark and notebooks.

    sim = Simulation(seed=7)
    names = build(sim, 3)                                  # n0, n1, n2 on 127.0.0.1:7800..7802
    sim.start_all()
    sim.run_until(lambda: agreed_leader(sim, names), timeout_ms=5_000)
    sim.run(sim.components["n0"].incr(5))                  # -> 5 once applied on n0

    python -m rmqlab.raft.counter --seed 7                 # the determinism scenario: trace hash

`scenario` is the fault schedule the determinism check replays in several processes: an election,
writes, a leader kill and restart, a partition of the new leader with a write it can never commit,
the heal, a suspended leader, a paused clock.
"""

from __future__ import annotations

import argparse
import asyncio
from collections.abc import Mapping
from typing import Any

from pysyncobj import SyncObjConsumer, replicated

from rmqlab.raft.component import RaftComponent
from rmqlab.raft.fail_reason import RaftError


class ReplicatedCounter(SyncObjConsumer):
    """One integer. Attributes set after SyncObjConsumer.__init__ are the replicated state."""

    def __init__(self) -> None:
        super().__init__()
        self.value = 0

    @replicated
    def incr(self, by: int = 1) -> int:
        self.value += by
        return self.value


class CounterReplica(RaftComponent):
    """A RaftComponent whose state machine is one ReplicatedCounter."""

    def __init__(self, self_id: str, peers: Mapping[str, str], **options: Any):
        self.counter = ReplicatedCounter()
        options.setdefault("group", "counter")
        super().__init__(self_id, peers, [self.counter], **options)

    @property
    def value(self) -> int:
        """The counter as applied on this replica (it may lag the leader's)."""
        return self.counter.value

    def incr_future(self, by: int = 1) -> asyncio.Future:
        return self.replicate_future(self.counter.incr, by)

    async def incr(self, by: int = 1) -> int:
        return await self.replicate(self.counter.incr, by)

    def status(self) -> dict[str, Any]:
        return {**super().status(), "value": self.value}


def peer_map(n: int, base_port: int = 7800, host: str = "127.0.0.1") -> dict[str, str]:
    """{"n0": "127.0.0.1:7800", ...} for n replicas."""
    return {f"n{i}": f"{host}:{base_port + i}" for i in range(n)}


def build(sim, n: int = 3, base_port: int = 7800, **options: Any) -> list[str]:
    """Add n CounterReplica nodes to a Simulation; returns their names."""
    peers = peer_map(n, base_port)
    for name in peers:
        sim.add_node(name, lambda name=name: CounterReplica(name, peers, **options))
    return list(peers)


def leaders(sim, names) -> list[str]:
    """The running replicas that are in LEADER state (more than one is possible: pysyncobj warns)."""
    return [n for n in names if sim.nodes[n].alive and sim.components[n].role == "LEADER"]


def agreed_leader(sim, names) -> str | None:
    """The leader every running replica follows, if they all agree on one that is itself leader."""
    alive = [n for n in names if sim.nodes[n].alive]
    views = {sim.components[n].leader for n in alive}
    if len(views) != 1:
        return None
    leader = views.pop()
    if leader is None or leader not in alive or sim.components[leader].role != "LEADER":
        return None
    return leader


def scenario(seed: int, ms: float = 30_000.0):
    """The determinism scenario; returns the finished Simulation (close it when done) and the
    outcomes of its writes in completion order ("n1+1=7", "n2+100:DISCARDED")."""
    from rmqlab.runtime.sim import Simulation

    sim = Simulation(seed=seed)
    names = build(sim, 3)
    sim.start_all()
    outcomes: list[str] = []

    def write(name: str, by: int) -> None:
        if not sim.nodes[name].alive:
            return
        fut = sim.components[name].incr_future(by)

        def done(f: asyncio.Future) -> None:
            try:
                outcomes.append(f"{name}+{by}={f.result()}")
            except RaftError as e:
                outcomes.append(f"{name}+{by}:{e.reason.name}")

        fut.add_done_callback(done)

    def current_leader() -> str:
        return (leaders(sim, names) or names)[-1]

    for i in range(40):  # a steady trickle of writes, spread over the replicas
        sim.at(1_000 + i * 500, lambda i=i: write(names[i % 3], 1))
    sim.at(4_000, lambda: sim.nemesis.kill(current_leader()))
    sim.at(7_000, lambda: sim.nemesis.restart(next(n for n in names if not sim.nodes[n].alive)))
    isolated: list[str] = []

    def isolate() -> None:
        isolated.append(current_leader())
        sim.nemesis.partition(isolated, [n for n in names if n not in isolated])
        write(isolated[0], 100)  # appended by a leader that can never commit it

    sim.at(12_000, isolate)
    sim.at(17_000, sim.nemesis.heal)
    sim.at(24_000, lambda: sim.nemesis.suspend(current_leader()))
    sim.at(26_000, lambda: sim.nemesis.resume(next(n for n in names if sim.nodes[n].suspended)))
    sim.at(27_000, lambda: sim.nemesis.clock_pause(names[0]))
    sim.at(29_000, lambda: sim.nemesis.clock_resume(names[0]))
    sim.run_for(ms)
    return sim, outcomes


def main(argv=None) -> int:
    from rmqlab.trace import trace_hash

    ap = argparse.ArgumentParser(description="run the Raft counter determinism scenario; print its trace hash")
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--ms", type=float, default=30_000.0)
    args = ap.parse_args(argv)
    sim, outcomes = scenario(args.seed, args.ms)
    events = sim.tracer.events
    elections = sum(1 for e in events if e.kind == "role" and e.fields["to"] == "LEADER")
    values = sorted({sim.components[n].value for n in sim.components})
    print(trace_hash(events), len(events), f"elections={elections}", f"values={values}",
          " ".join(outcomes))
    sim.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
