"""One chaos run, Maelstrom style: a cluster, a workload, a nemesis schedule; the history they
leave (the trace, and the replicas' store files) is handed to the checkers.

    run = run_chaos(seed=7, controller_overrides={"enableElectUncleanMaster": False})
    results = check_all(run)               # {"total-queue": CheckResult, "replicas": ..., ...}
    run.cleanup()                          # the store files

    report = run_and_check(7)              # the same in one call, files removed: a ChaosReport

A run: the controller-mode cluster starts (every replica in the SyncStateSet); the producer
starts sending; the schedule's faults are applied on time; after its quiet period the producer
stops, the runner waits (bounded) for the cluster to converge — a master the name servers route
to, every replica at the master's max offset and the confirm offset there — and the drain reads
every queue. Convergence is judged from the components (the runner is part of the experiment); the
checkers read only the history.

How long to wait for convergence is RocketMQ's, not the runner's: see ``rejoin_window_ms``.
"""

from __future__ import annotations

import shutil
import tempfile
import time
from dataclasses import dataclass, field
from typing import Any

from rmqlab.broker.broker_controller import FIRST_SCHEDULE_DELAY_MS
from rmqlab.checker.checkers import (check_elections, check_replicas, check_single_master, check_total_queue,
                                     check_truncations)
from rmqlab.checker.queue_clients import QueueWorkload
from rmqlab.checker.result import CheckResult
from rmqlab.checker.schedule import FaultSchedule, random_schedule, run_schedule
from rmqlab.common.decision_points import DecisionPoints

CHAOS_NODE = "chaos"  # the runner's own trace events (phases), node name in the trace


@dataclass
class ChaosRun:
    """What a run leaves: its history and where the stores are. `converged`: whether the cluster
    converged before the drain (False is not itself a violation; the checkers say what it cost)."""

    seed: int
    schedule: FaultSchedule
    events: list
    stores: dict[str, str]
    root_dir: str
    converged: bool
    drained: int
    virtual_ms: float
    wall_s: float
    meta: dict[str, Any] = field(default_factory=dict)

    def cleanup(self) -> None:
        shutil.rmtree(self.root_dir, ignore_errors=True)


def converged(cluster) -> bool:
    """Every broker running, one master the name servers route to, every replica at the master's
    max physical offset and the master's confirm offset there."""
    if any(not cluster.sim.nodes[n].alive for n in cluster.brokers):
        return False
    master = cluster.master()
    if master is None:
        return False
    store = cluster.components[master].message_store
    end = store.get_max_phy_offset()
    if any(cluster.components[n].message_store.get_max_phy_offset() != end for n in cluster.brokers):
        return False
    if cluster.components[master].replicas_manager.ha_service.get_confirm_offset() != end:
        return False
    addr = f"127.0.0.1:{cluster.components[master].netty_server_config.listenPort}"
    name = cluster.components[master].broker_config.brokerName
    for ns in cluster.namesrvs:
        table = cluster.components[ns].route_info_manager.broker_addr_table.get(name)
        if table is None or table.broker_addrs.get(0) != addr:
            return False
    return True


def settle(cluster, check, timeout_ms: float) -> bool:
    """Run `cluster` until check(cluster) holds, at most `timeout_ms`; then 1 s more, in which the
    master's last confirm offset travels to the slaves with the next transfer header. Whether the
    check held (a False is no violation by itself: the checkers say what it cost)."""
    try:
        cluster.run_until(lambda: check(cluster), timeout_ms)
        ok = True
    except TimeoutError:
        ok = False
    cluster.run_for(1_000)
    return ok


def rejoin_window_ms(broker) -> float:
    """How long after its start a controller-mode slave may take to replicate again, from `broker`'s
    (a BrokerController's) timers, as RocketMQ's: its HA client learns the master's HA address only
    from the answer to a NameServer registration (BrokerController.handleRegisterBrokerResult), and
    its role-change registration (ReplicasManager.registerBrokerWhenRoleChange) often reaches the
    NameServer before the new master's registration as id 0 (the controller notifies both at once;
    the master's changeToMaster waits for its dispatch first). The next registration is the periodic
    registerBrokerAll, 10 s after the broker's start, then every registerNameServerPeriod (30 s):
    a master that registers later than start + 10 s is found at start + 40 s. Then a slave whose
    log was empty or cut sends its first ack after haSendHeartbeatInterval (5 s; AutoSwitchHAClient
    reports at once only when its log grew). 45 s with RocketMQ's defaults.

    Counted from the producer's stop, quiet_ms after the last fault, it covers a broker restarted
    by the last fault (its start takes a few seconds at most), and a slave that kept running (it
    waits at most registerNameServerPeriod after the master's registration) when the master
    registers within 10 s of the producer's stop."""
    bc, msc = broker.broker_config, broker.message_store_config
    return FIRST_SCHEDULE_DELAY_MS + bc.get_register_name_server_period() + msc.haSendHeartbeatInterval


def run_chaos(seed: int, *, mode: str = "controller-standalone", controllers: int = 3,
              controller_overrides: dict | None = None, overrides: dict | None = None,
              schedule: FaultSchedule | None = None, schedule_options: dict | None = None,
              workload: QueueWorkload | None = None, converge_timeout_ms: float | None = None,
              trace_path: str | None = None, decision_points: DecisionPoints | None = None) -> ChaosRun:
    """Run one seeded chaos experiment on the simulator (cluster seed = schedule seed = `seed`
    unless a schedule is given) and return its history; the caller checks it and cleans up.
    `decision_points`: rmqlab.common.decision_points rules for the cluster's components.
    `converge_timeout_ms`: how long to wait for convergence after the producer stops; by default
    the brokers' ``rejoin_window_ms`` (45 s with RocketMQ's defaults)."""
    from rmqlab.cluster import Cluster
    from rmqlab.cluster.sim_backend import memory_dir, owned_prefix

    wall = time.monotonic()
    # In memory when there is room, as a workload replay's: the crash model is the page cache's
    # ledger (rmqlab.runtime.page_cache), not the OS, so the run is the same; on a disk its renames
    # and fsyncs were about half of a schedule's wall time.
    root = tempfile.mkdtemp(prefix=owned_prefix(f"rmqlab-chaos-{seed}-"), dir=memory_dir())
    workload = workload or QueueWorkload()
    c = Cluster(mode, seed=seed, root_dir=root, controllers=controllers,
                controller_overrides=controller_overrides, overrides=overrides, decision_points=decision_points)
    try:
        c.start(60_000)
        # Start from a healthy set: a master and every replica in its SyncStateSet.
        c.run_until(lambda: (m := c.master()) is not None and
                    len(c.components[m].replicas_manager.sync_state_set) == len(c.brokers), 60_000)
        if schedule is None:
            schedule = random_schedule(seed, list(c.brokers), list(c.controller_nodes), **(schedule_options or {}))
        if converge_timeout_ms is None:
            converge_timeout_ms = max(rejoin_window_ms(c.components[n]) for n in c.brokers)
        workload.setup(c, duration_ms=schedule.duration_ms)
        tracer = c.sim.tracer
        tracer.emit(CHAOS_NODE, "log", level="INFO", message=f"chaos: schedule {seed} begins "
                    f"({len(schedule.faults)} faults)", logger="rmqlab.checker")
        run_schedule(c, schedule)
        workload.stop(c)
        tracer.emit(CHAOS_NODE, "log", level="INFO", message="chaos: producer stopped, waiting to converge",
                    logger="rmqlab.checker")
        ok = settle(c, converged, converge_timeout_ms)
        tracer.emit(CHAOS_NODE, "log", level="INFO" if ok else "WARN",
                    message=f"chaos: {'converged' if ok else 'did not converge'}; drain begins",
                    logger="rmqlab.checker", converged=ok)
        drained = workload.drain(c)
        events = list(c.events())
        if trace_path:
            from rmqlab.trace import write_jsonl

            write_jsonl(events, trace_path, meta={"seed": seed, "runtime": "sim", "scenario": "chaos",
                                                  "schedule": schedule.to_dict()})
        stores = {n: c.sim.store_dir(n) for n in c.brokers}
        virtual = c.sim.now_ms()
    except BaseException:
        c.close()
        shutil.rmtree(root, ignore_errors=True)
        raise
    c.close()
    return ChaosRun(seed, schedule, events, stores, root, ok, drained, virtual, time.monotonic() - wall,
                    {"mode": mode, "controller_overrides": dict(controller_overrides or {})})


def check_all(run: ChaosRun) -> dict[str, CheckResult]:
    """Every checker on the run's history."""
    return {"total-queue": check_total_queue(run.events),
            "replicas": check_replicas(run.events, run.stores),
            "single-master": check_single_master(run.events),
            "elections": check_elections(run.events, unclean_allowed=bool(
                run.meta.get("controller_overrides", {}).get("enableElectUncleanMaster"))),
            "truncations": check_truncations(run.events)}


@dataclass
class ChaosReport:
    """A run's verdicts without its files (picklable: runs may go to worker processes)."""

    seed: int
    results: dict[str, CheckResult]
    schedule: FaultSchedule
    converged: bool
    drained: int
    virtual_ms: float
    wall_s: float

    @property
    def valid(self) -> bool:
        return all(r.valid for r in self.results.values())

    def __str__(self) -> str:
        lines = [f"seed {self.seed}: {'valid' if self.valid else 'INVALID'}, {len(self.schedule.faults)} faults, "
                 f"converged={self.converged}, drained {self.drained}, {self.virtual_ms / 1000:.0f} virtual s, "
                 f"{self.wall_s:.1f} s"]
        lines += [f"  {r}" for r in self.results.values() if not r.valid]
        return "\n".join(lines)


def run_and_check(seed: int, **options: Any) -> ChaosReport:
    run = run_chaos(seed, **options)
    try:
        results = check_all(run)
    finally:
        run.cleanup()
    return ChaosReport(seed, results, run.schedule, run.converged, run.drained, run.virtual_ms, run.wall_s)
