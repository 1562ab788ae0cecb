"""Seeded random fault schedules (Jepsen's nemesis generator): a plan of nemesis operations over a
cluster's brokers and controllers, a pure function of its seed and parameters, then applied to a
running cluster through the fault API (rmqlab.runtime.nemesis) on either runtime.

    schedule = random_schedule(7, brokers=["broker-n0", ...], controllers=["controller-n0", ...])
    run_schedule(cluster, schedule)        # lets the cluster run and applies each op on time

`interval_schedule` is OpenChaos's loop instead: one fault kind on one kind of target, for a fixed
duration, then a fixed interval to recover, repeated over the run (a campaign's case, rmqlab.chaos).

Faults: kill (process crash, page cache survives), crash (machine crash: unflushed bytes lost,
sometimes a torn write), suspend (SIGSTOP), a network partition (one node cut off, or the servers
split in two), packet loss between a node and some others. A process fault names a node, or
`MASTER` ("@master"): the broker that is master when the op is applied (read from the trace by
Cluster.master(), as OpenChaos's "kill the leader") — the faults that force elections; it is
skipped, with its undo, if that broker is under a process fault already. Each fault is undone (restart, resume,
heal, loss 0) before the fault window ends; then `quiet_ms` without faults lets the cluster heal
and converge. Rules that keep the plan meaningful:

* at most `max_concurrent` faults at a time, one partition and one loss at a time (heal() heals
  every partition), a node under at most one process fault;
* a machine crash only hits a broker when every other broker has been healthy (no fault on it)
  for `crash_cooldown_ms`: under ASYNC_FLUSH a replica's unflushed tail survives only on its
  peers, so crashing the only holder of acknowledged data (a SyncStateSet shrunk to one after
  other faults) loses it in RocketMQ as well — power loss of every in-sync replica is outside the
  allAckInSyncStateSet guarantee, not a bug to find.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

FAULTS = ("kill", "crash", "suspend", "partition", "loss")
# Every injecting op: random_schedule's FAULTS and the partition shapes interval_schedule adds.
INJECTIONS = (*FAULTS, "ring", "bridge")
PROCESS_FAULTS = ("kill", "crash", "suspend")
MASTER = "@master"  # a process fault's node resolved when applied: the master then
# ... or the controller that leads the controllers' Raft group then (OpenChaos's "kill the leader")
CONTROLLER_LEADER = "@controller-leader"
RESOLVED_WHEN_APPLIED = (MASTER, CONTROLLER_LEADER)
# op f -> the op that undoes it
UNDO = {"kill": "restart", "crash": "restart", "suspend": "resume", "partition": "heal", "loss": "loss-heal",
        "ring": "heal", "bridge": "heal"}


@dataclass(frozen=True)
class FaultOp:
    """One nemesis operation at `time_ms` (ms after the schedule starts). `f`: kill, crash,
    restart, suspend, resume, partition, ring, bridge, heal, loss, loss-heal; `node` for a process
    fault on one node, or None and `value["nodes"]` for one on several at once; `value` the rest
    (partition groups; ring / bridge nodes; loss: node and peers, or srcs and dsts of a link class,
    and the rate; crash torn bytes), plain JSON."""

    time_ms: float
    f: str
    node: str | None = None
    value: dict[str, Any] = field(default_factory=dict)
    fault_id: int = 0  # a fault and its undo share it

    def to_dict(self) -> dict[str, Any]:
        return {"time_ms": self.time_ms, "f": self.f, "node": self.node, "value": self.value,
                "fault_id": self.fault_id}

    def __str__(self) -> str:
        what = self.node or ",".join(self.value.get("nodes", ()))
        if self.f == "partition":
            what = " | ".join(",".join(g) for g in self.value["groups"])
        elif self.f == "loss" and "srcs" in self.value:
            what = f"{','.join(self.value['srcs'])}<->{','.join(self.value['dsts'])} p={self.value['rate']}"
        elif self.f == "loss":
            what = f"{self.value['node']}<->{','.join(self.value['peers'])} p={self.value['rate']}"
        return f"{self.time_ms:8.0f} ms  {self.f:<9} {what}"


@dataclass(frozen=True)
class FaultSchedule:
    seed: int
    ops: tuple[FaultOp, ...]
    fault_window_ms: float
    quiet_ms: float

    @property
    def duration_ms(self) -> float:
        return self.fault_window_ms + self.quiet_ms

    @property
    def faults(self) -> list[FaultOp]:
        """The injecting ops (not their undos)."""
        return [op for op in self.ops if op.f in INJECTIONS]

    def to_dict(self) -> dict[str, Any]:
        return {"seed": self.seed, "fault_window_ms": self.fault_window_ms, "quiet_ms": self.quiet_ms,
                "ops": [op.to_dict() for op in self.ops]}

    def __str__(self) -> str:
        return "\n".join([f"schedule seed {self.seed}: {len(self.faults)} faults in {self.fault_window_ms:.0f} ms, "
                          f"then {self.quiet_ms:.0f} ms quiet"] + [str(op) for op in self.ops])


def random_schedule(seed: int, brokers: Sequence[str], controllers: Sequence[str], *,
                    fault_window_ms: float = 16_000, quiet_ms: float = 12_000,
                    gap_ms: tuple[float, float] = (500, 2_500), length_ms: tuple[float, float] = (1_000, 6_000),
                    max_concurrent: int = 2, faults: Sequence[str] = FAULTS,
                    weights: dict[str, float] | None = None, crash_cooldown_ms: float = 8_000,
                    master_share: float = 0.5,
                    loss_rate: tuple[float, float] = (0.1, 0.5)) -> FaultSchedule:
    """A random schedule over `brokers` and `controllers`, the same for the same arguments.
    A fault starts every `gap_ms` (uniform), lasts `length_ms` (uniform, cut at the window's end);
    a fault that would break a rule (module docstring) is skipped for that slot. `master_share`
    of the process faults target MASTER when no broker is under a fault."""
    unknown = sorted(set(faults) - set(FAULTS))
    if unknown:
        raise ValueError(f"unknown fault(s) {', '.join(unknown)}; known: {', '.join(FAULTS)}")
    rng = random.Random(f"rmqlab.checker.schedule/{seed}")  # str seed: stable across Python versions
    weights = {f: (weights or {}).get(f, 1.0) for f in faults}
    servers = [*brokers, *controllers]
    ops: list[FaultOp] = []
    active: list[tuple[float, FaultOp]] = []   # (end time, fault) of the faults under way
    busy_until: dict[str, float] = {}          # node -> end of the last fault touching it
    fault_id = 0
    t = 0.0
    while True:
        t += rng.uniform(*gap_ms)
        if t >= fault_window_ms - length_ms[0]:
            break
        active = [(end, op) for end, op in active if end > t]
        if len(active) >= max_concurrent:
            continue
        f = rng.choices(list(weights), weights=list(weights.values()))[0]
        end = min(t + rng.uniform(*length_ms), fault_window_ms)
        touched = {n for _, op in active for n in _nodes(op, brokers)}
        op: FaultOp | None = None
        if f in ("kill", "crash", "suspend"):
            pool = [n for n in (brokers if f == "crash" else servers) if n not in touched]
            if f == "crash":
                pool = [n for n in pool if all(busy_until.get(b, -1e18) + crash_cooldown_ms <= t
                                               for b in brokers if b != n)]
            if not touched & set(brokers) and (f != "crash" or len(pool) == len(brokers)):
                pool += [MASTER] * round(len(pool) * master_share / (1 - master_share)) if master_share < 1 else [MASTER]
            if pool:
                node = rng.choice(pool)
                value = {"torn_bytes": rng.choice([0, 0, 7, 64])} if f == "crash" else {}
                op = FaultOp(round(t, 3), f, node, value, fault_id)
        elif f == "partition" and not any(o.f == "partition" for _, o in active):
            if rng.random() < 0.5:
                node = rng.choice(servers)
                groups = [[node], sorted(n for n in servers if n != node)]
            else:
                shuffled = rng.sample(servers, len(servers))
                cut = rng.randint(1, len(servers) - 1)
                groups = [sorted(shuffled[:cut]), sorted(shuffled[cut:])]
            op = FaultOp(round(t, 3), "partition", None, {"groups": groups}, fault_id)
        elif f == "loss" and not any(o.f == "loss" for _, o in active):
            node = rng.choice(servers)
            others = [n for n in servers if n != node]
            peers = sorted(rng.sample(others, rng.randint(1, len(others))))
            op = FaultOp(round(t, 3), "loss", None, {"node": node, "peers": peers,
                                                      "rate": round(rng.uniform(*loss_rate), 2)}, fault_id)
        if op is None:
            continue
        undo = FaultOp(round(end, 3), UNDO[op.f], op.node, dict(op.value) if op.f == "loss" else {}, fault_id)
        fault_id += 1
        ops += [op, undo]
        active.append((end, op))
        for n in _nodes(op, brokers):
            busy_until[n] = max(busy_until.get(n, -1e18), end)
    ops.sort(key=lambda o: (o.time_ms, o.f not in UNDO.values()))  # at equal times undo first
    return FaultSchedule(seed, tuple(ops), fault_window_ms, quiet_ms)


# interval_schedule's fault kinds and the targets each takes (seed-003-style campaigns: OpenChaos's
# random-kill / minor-kill / major-kill / fixed-kill, random-suspend, random-loss, random-partition,
# partition-majorities-ring and bridge).
PROCESS_TARGETS = ("master", "broker", "brokers-majority", "controller-leader", "controller",
                   "controllers-majority", "controllers-all", "servers-majority")
PARTITION_KINDS = ("partition-one", "partition-halves", "ring", "bridge")
SCOPES = ("brokers", "controllers", "servers")          # the nodes a partition splits
LINK_CLASSES = ("broker-broker", "controller-controller", "broker-controller")  # where loss applies
INTERVAL_KINDS = (*PROCESS_FAULTS, *PARTITION_KINDS, "loss")


def interval_targets(kind: str) -> tuple[str, ...]:
    """The targets fault `kind` of interval_schedule takes."""
    if kind in PROCESS_FAULTS:
        return PROCESS_TARGETS
    if kind in PARTITION_KINDS:
        return SCOPES
    if kind == "loss":
        return LINK_CLASSES
    raise ValueError(f"unknown fault kind {kind!r}; known: {', '.join(INTERVAL_KINDS)}")


def _majority(n: int) -> int:
    return n // 2 + 1


def _target_nodes(rng: random.Random, kind: str, target: str, brokers: Sequence[str],
                  controllers: Sequence[str]) -> list[str] | str:
    """A process fault's nodes (a symbolic node for one resolved when applied)."""
    servers = [*brokers, *controllers]
    if target in ("controller-leader", "controller", "controllers-majority", "controllers-all") and not controllers:
        raise ValueError(f"target {target!r}: the cluster has no controllers")
    if target == "master":
        return MASTER
    if target == "controller-leader":
        return CONTROLLER_LEADER
    if target == "broker":
        return [rng.choice(list(brokers))]
    if target == "controller":
        return [rng.choice(list(controllers))]
    if target == "brokers-majority":  # "随机宕机一半以上的节点, 至少保留一台 Broker 工作"
        if len(brokers) < 2:
            raise ValueError("target 'brokers-majority' needs at least 2 brokers (one keeps working)")
        return sorted(rng.sample(list(brokers), min(_majority(len(brokers)), len(brokers) - 1)))
    if target == "controllers-majority":
        return sorted(rng.sample(list(controllers), _majority(len(controllers))))
    if target == "controllers-all":
        return sorted(controllers)
    if target == "servers-majority":
        return sorted(rng.sample(servers, _majority(len(servers))))
    raise ValueError(f"unknown target {target!r} for {kind}; known: {', '.join(PROCESS_TARGETS)}")


def _scope(target: str, brokers: Sequence[str], controllers: Sequence[str]) -> list[str]:
    nodes = {"brokers": list(brokers), "controllers": list(controllers),
             "servers": [*brokers, *controllers]}.get(target)
    if nodes is None:
        raise ValueError(f"unknown partition scope {target!r}; known: {', '.join(SCOPES)}")
    return nodes


def interval_fault(rng: random.Random, kind: str, target: str, brokers: Sequence[str],
                   controllers: Sequence[str], t: float, fault_id: int, loss_rate: float = 0.8) -> FaultOp:
    """One injecting op of `kind` on `target` at `t` (random choices from `rng`). ValueError when
    the cluster cannot have it (no controllers; a ring of fewer than 4 nodes; ...)."""
    t = round(t, 3)
    if kind in PROCESS_FAULTS:
        nodes = _target_nodes(rng, kind, target, brokers, controllers)
        value = {"torn_bytes": rng.choice([0, 0, 7, 64])} if kind == "crash" else {}
        if isinstance(nodes, str) or len(nodes) == 1:
            return FaultOp(t, kind, nodes if isinstance(nodes, str) else nodes[0], value, fault_id)
        return FaultOp(t, kind, None, {"nodes": nodes, **value}, fault_id)
    if kind in PARTITION_KINDS:
        nodes = _scope(target, brokers, controllers)
        need = {"partition-one": 2, "partition-halves": 2, "ring": 4, "bridge": 3}[kind]
        if len(nodes) < need:
            raise ValueError(f"{kind} of {target} needs at least {need} nodes, the cluster has {len(nodes)}")
        if kind == "partition-one":
            node = rng.choice(nodes)
            return FaultOp(t, "partition", None, {"groups": [[node], sorted(n for n in nodes if n != node)]}, fault_id)
        shuffled = rng.sample(nodes, len(nodes))
        if kind == "partition-halves":
            cut = len(nodes) // 2
            return FaultOp(t, "partition", None, {"groups": [sorted(shuffled[:cut]), sorted(shuffled[cut:])]}, fault_id)
        return FaultOp(t, kind, None, {"nodes": shuffled}, fault_id)  # ring / bridge: the order is the shape
    if kind == "loss":
        if target not in LINK_CLASSES:
            raise ValueError(f"unknown link class {target!r}; known: {', '.join(LINK_CLASSES)}")
        a, b = target.split("-")
        ends = {"broker": sorted(brokers), "controller": sorted(controllers)}
        if len(ends[a]) + len(ends[b]) - (len(ends[a]) if a == b else 0) < 2 or not ends[a] or not ends[b]:
            raise ValueError(f"loss on {target} links: the cluster has none")
        return FaultOp(t, "loss", None, {"link_class": target, "srcs": ends[a], "dsts": ends[b],
                                         "rate": loss_rate}, fault_id)
    raise ValueError(f"unknown fault kind {kind!r}; known: {', '.join(INTERVAL_KINDS)}")


def interval_schedule(seed: int, brokers: Sequence[str], controllers: Sequence[str], *, kind: str,
                      target: str, duration_ms: float = 60_000, interval_ms: float = 60_000,
                      run_ms: float = 3_600_000, lead_ms: float | None = None, quiet_ms: float = 10_000,
                      loss_rate: float = 0.8) -> FaultSchedule:
    """OpenChaos's fault loop: after `lead_ms` of steady traffic (default: `interval_ms`, at most
    5 s), fault `kind` on `target` for `duration_ms`, then `interval_ms` to recover, again and again
    while a whole fault fits in `run_ms`; then `quiet_ms` for the cluster to converge. Each fault
    picks its random nodes anew; the same arguments give the same schedule. Raises ValueError for
    a kind or target the cluster cannot have (interval_fault)."""
    if duration_ms <= 0 or interval_ms < 0:
        raise ValueError(f"duration_ms must be > 0 and interval_ms >= 0, got {duration_ms}, {interval_ms}")
    rng = random.Random(f"rmqlab.checker.interval_schedule/{seed}/{kind}/{target}")
    t = min(interval_ms, 5_000) if lead_ms is None else lead_ms
    ops: list[FaultOp] = []
    fault_id = 0
    while t + duration_ms <= run_ms:
        op = interval_fault(rng, kind, target, brokers, controllers, t, fault_id, loss_rate)
        undo_value = {k: v for k, v in op.value.items() if k == "nodes"} if kind in PROCESS_FAULTS else (
            dict(op.value) if op.f == "loss" else {})
        ops += [op, FaultOp(round(t + duration_ms, 3), UNDO[op.f], op.node, undo_value, fault_id)]
        fault_id += 1
        t += duration_ms + interval_ms
    if not ops:
        raise ValueError(f"no fault of {duration_ms:.0f} ms fits a run of {run_ms:.0f} ms")
    ops.sort(key=lambda o: (o.time_ms, o.f not in UNDO.values()))  # at equal times undo first
    return FaultSchedule(seed, tuple(ops), run_ms, quiet_ms)


def _nodes(op: FaultOp, brokers_of_master: Sequence[str] = ()) -> list[str]:
    """The nodes a fault touches (a partition: every node of every group; loss: both ends)."""
    if op.node == MASTER:
        return list(brokers_of_master)
    if op.node:
        return [op.node]
    if "nodes" in op.value:
        return list(op.value["nodes"])
    if op.f == "partition":
        return [n for g in op.value["groups"] for n in g]
    if op.f == "loss" and "srcs" in op.value:
        return sorted({*op.value["srcs"], *op.value["dsts"]})
    if op.f == "loss":
        return [op.value["node"], *op.value["peers"]]
    return []


def apply_op(nemesis, op: FaultOp) -> None:
    """One op through the fault API (rmqlab.runtime.nemesis.Nemesis); it traces itself. A process
    op on several nodes (`value["nodes"]`) applies to each in turn, at the same instant."""
    nodes = [op.node] if op.node is not None else list(op.value.get("nodes", ()))
    if op.f == "kill":
        for node in nodes:
            nemesis.kill(node)
    elif op.f == "crash":
        torn = op.value.get("torn_bytes", 0)
        for node in nodes:
            nemesis.crash(node, torn_bytes=(lambda _file, unflushed, n=torn: min(n, unflushed)) if torn else None)
    elif op.f == "restart":
        for node in nodes:
            nemesis.restart(node)
    elif op.f == "suspend":
        for node in nodes:
            nemesis.suspend(node)
    elif op.f == "resume":
        for node in nodes:
            nemesis.resume(node)
    elif op.f == "partition":
        nemesis.partition(*op.value["groups"])
    elif op.f == "ring":
        nemesis.ring(op.value["nodes"])
    elif op.f == "bridge":
        nemesis.bridge(op.value["nodes"])
    elif op.f == "heal":
        nemesis.heal()
    elif op.f in ("loss", "loss-heal"):
        rate = op.value["rate"] if op.f == "loss" else 0.0
        if "srcs" in op.value:  # a link class: every link between the two sets, both ways
            srcs, dsts = op.value["srcs"], op.value["dsts"]
        else:
            srcs, dsts = [op.value["node"]], op.value["peers"]
        nemesis.set_loss(srcs, dsts, rate)
        nemesis.set_loss(dsts, srcs, rate)
    else:
        raise ValueError(f"unknown fault op {op.f!r}")


class MasterResolver:
    """Names the node of each op as it is applied: a MASTER fault is the broker that is master then
    (cluster.master(), from the trace), and its undo the same broker; a MASTER fault is skipped
    (None), with its undo, when there is no master or the master is under a process fault already.
    CONTROLLER_LEADER likewise, with cluster.controller_leader()."""

    def __init__(self, cluster):
        self.cluster = cluster
        self.resolved: dict[int, str | None] = {}  # fault_id -> node of a MASTER fault (None: skipped)
        self.down: set[str] = set()                # nodes under a process fault now

    def __call__(self, op: FaultOp) -> FaultOp | None:
        if op.node in RESOLVED_WHEN_APPLIED:
            if op.f in FAULTS:
                leader = self.cluster.master() if op.node == MASTER else self.cluster.controller_leader()
                self.resolved[op.fault_id] = leader if leader is not None and leader not in self.down else None
            node = self.resolved.get(op.fault_id)
            if node is None:
                return None
            op = FaultOp(op.time_ms, op.f, node, op.value, op.fault_id)
        if op.node is not None:
            (self.down.add if op.f in FAULTS else self.down.discard)(op.node)
        elif op.f in (*PROCESS_FAULTS, "restart", "resume"):
            for node in op.value.get("nodes", ()):
                (self.down.add if op.f in FAULTS else self.down.discard)(node)
        return op


def run_schedule(cluster, schedule: FaultSchedule, *, quiet: bool = True) -> list[FaultOp]:
    """Let `cluster` (rmqlab.cluster.Cluster) run through `schedule` from now: each op at its time,
    then, with `quiet`, the quiet period. Virtual time on the simulator, wall time on the real
    runtime (ops there land within the polling resolution). Returns the ops applied, MASTER
    resolved to a node (the nemesis traced each of them too)."""
    elapsed = 0.0
    resolve = MasterResolver(cluster)
    applied: list[FaultOp] = []
    for op in schedule.ops:
        if op.time_ms > elapsed:
            cluster.run_for(op.time_ms - elapsed)
            elapsed = op.time_ms
        op = resolve(op)
        if op is None:
            continue
        apply_op(cluster.nemesis, op)
        applied.append(op)
    if quiet:
        cluster.run_for(max(0.0, schedule.duration_ms - elapsed))
    return applied
