"""One run of a case on the simulator, in any deployment mode, and the task a worker (a process
pool's, or a Spark executor's mapPartitions) calls:

    run = run_case(case, seed=3)            # a CaseRun: the history, the verdicts, per-fault recoveries
    run_row, fault_rows = run_task(case.to_dict(), 3)   # plain dicts (rmqlab.chaos.results)

A run: the cluster starts and becomes ready (per mode, `ready`); the producer (QueueWorkload) and a
live push consumer start; the case's interval schedule runs; the producer stops; the runner waits,
bounded, until the cluster converges (per mode, `converged`); the consumer stops and a final drain
reads every queue. The runner judges readiness and convergence from the components (it is part of
the experiment); the checkers read only the history (the trace and the store files).
"""

from __future__ import annotations

import shutil
import tempfile
import time
from dataclasses import dataclass, field
from typing import Any

from rmqlab.chaos.case import Case
from rmqlab.checker.chaos import converged as controller_converged
from rmqlab.checker.chaos import settle
from rmqlab.checker.checkers import (check_dledger_replicas, check_elections, check_replicas, check_single_master,
                                     check_total_queue, check_truncations)
from rmqlab.checker.order import check_order
from rmqlab.checker.queue_clients import QueueWorkload
from rmqlab.checker.recovery import check_queue_order, check_recovery, duplicated_per_reader, recoveries
from rmqlab.checker.result import CheckResult
from rmqlab.checker.schedule import FaultOp, FaultSchedule, interval_schedule, run_schedule
from rmqlab.cluster.modes import MODES

CONSUMER = "consumer"
CONSUMER_GROUP = "chaos_consumer"
# The checkers that judge safety (a run is valid when they all are); `recovery` is liveness and
# reported apart (a fault after which the service never came back within the run).
LIVENESS = ("recovery",)


def mode_family(mode: str) -> str:
    """controller, dledger or classic (master-slave by brokerId, with or without acting master)."""
    m = MODES[mode]
    if m.controllers:
        return "controller"
    if m.dleger_commit_log():
        return "dledger"
    return "classic"


def _addr(cluster, node: str) -> str:
    return f"127.0.0.1:{cluster.components[node].netty_server_config.listenPort}"


def _routed(cluster, broker_name: str, addr: str) -> bool:
    """Every name server routes broker set `broker_name`'s brokerId 0 to `addr`."""
    for ns in cluster.namesrvs:
        table = cluster.components[ns].route_info_manager.broker_addr_table.get(broker_name)
        if table is None or table.broker_addrs.get(0) != addr:
            return False
    return True


def _dledger_server(cluster, node: str):
    return cluster.components[node].message_store.commit_log.dledger_server


def ready(cluster) -> bool:
    """A healthy start: controller mode, a master and every replica in its SyncStateSet; DLedger, a
    leader every member follows; classic, every broker set's master registered (Cluster.start
    waited for the registrations)."""
    family = mode_family(cluster.mode)
    if family == "controller":
        m = cluster.master()
        return m is not None and len(cluster.components[m].replicas_manager.sync_state_set) == len(cluster.brokers)
    if family == "dledger":
        m = cluster.master()
        return m is not None and all(_dledger_server(cluster, n).get_member_state().leader_id ==
                                     _dledger_server(cluster, m).get_member_state().self_id for n in cluster.brokers)
    return all(_routed(cluster, name, _addr(cluster, master)) for name, master in _classic_masters(cluster).items())


def _classic_masters(cluster) -> dict[str, str]:
    """broker set -> its brokerId 0 node (classic and acting-master modes)."""
    out = {}
    for n in cluster.brokers:
        cfg = cluster.components[n].broker_config
        if cfg.brokerId == 0:
            out[cfg.brokerName] = n
    return out


def converged(cluster) -> bool:
    """Every broker running and caught up: controller mode as rmqlab.checker.chaos.converged;
    DLedger, the leader routed and every member's ledger at the leader's end, committed; classic,
    each set's master routed and its slaves at the master's max physical offset."""
    family = mode_family(cluster.mode)
    if family == "controller":
        return controller_converged(cluster)
    if any(not cluster.sim.nodes[n].alive for n in cluster.brokers):
        return False
    if family == "dledger":
        m = cluster.master()
        if m is None:
            return False
        store = _dledger_server(cluster, m).get_dledger_store()
        end = store.get_ledger_end_index()
        if store.get_committed_index() != end:
            return False
        if any(_dledger_server(cluster, n).get_dledger_store().get_ledger_end_index() != end for n in cluster.brokers):
            return False
        return _routed(cluster, cluster.components[m].broker_config.brokerName, _addr(cluster, m))
    for name, master in _classic_masters(cluster).items():
        end = cluster.components[master].message_store.get_max_phy_offset()
        members = [n for n in cluster.brokers if cluster.components[n].broker_config.brokerName == name]
        if any(cluster.components[n].message_store.get_max_phy_offset() != end for n in members):
            return False
        if not _routed(cluster, name, _addr(cluster, master)):
            return False
    return True


def check_run(family: str, events: list, stores: dict[str, str], unclean_allowed: bool = False) -> dict[str, CheckResult]:
    """The checkers that apply to a mode family's history."""
    results = {"total-queue": check_total_queue(events), "queue-order": check_queue_order(events),
               "order": check_order(events), "recovery": check_recovery(events)}
    if family == "controller":
        results.update({"replicas": check_replicas(events, stores), "single-master": check_single_master(events),
                        "elections": check_elections(events, unclean_allowed=unclean_allowed),
                        "truncations": check_truncations(events)})
    elif family == "dledger":
        results["replicas"] = check_dledger_replicas(events, stores)
    return results


@dataclass
class CaseRun:
    """What a run of a case leaves, without its files (they are removed): verdicts, per-fault
    recoveries, and the schedule as planned and as applied (symbolic targets resolved)."""

    case: Case
    seed: int
    schedule: FaultSchedule
    applied: list[FaultOp]
    results: dict[str, CheckResult]
    recoveries: list
    converged: bool
    drained: int
    virtual_ms: float
    wall_s: float
    schedule_start_ms: float
    events: list | None = None
    meta: dict[str, Any] = field(default_factory=dict)

    @property
    def valid(self) -> bool:
        return all(r.valid for name, r in self.results.items() if name not in LIVENESS)


def run_case(case: Case, seed: int, *, converge_timeout_ms: float = 60_000, keep_events: bool = False,
             trace_path: str | None = None) -> CaseRun:
    """Run `case` once on the simulator with `seed` (cluster and schedule); see the module docstring."""
    from rmqlab.cluster import Cluster
    from rmqlab.cluster.sim_backend import memory_dir, owned_prefix
    from rmqlab.example.benchmark import BenchmarkConsumer, ConsumerSpec

    wall = time.monotonic()
    family = mode_family(case.mode)
    root = tempfile.mkdtemp(prefix=owned_prefix(f"rmqlab-case-{seed}-"), dir=memory_dir())
    options = dict(case.workload)
    orderly = bool(options.pop("orderly", False))
    workload = QueueWorkload(**options)
    c = Cluster(case.mode, seed=seed, root_dir=root, overrides={"*": dict(case.broker)} if case.broker else None,
                **({"controllers": case.controllers, "controller_overrides": dict(case.controller)}
                   if family == "controller" else {}))
    try:
        c.start(60_000)
        c.run_until(lambda: ready(c), 60_000)
        schedule = interval_schedule(seed, list(c.brokers), list(c.controller_nodes), kind=case.kind,
                                     target=case.target, duration_ms=case.duration_ms, interval_ms=case.interval_ms,
                                     run_ms=case.run_ms, quiet_ms=case.quiet_ms, loss_rate=case.loss_rate)
        # A classic slave copies the topic from its master with SlaveSynchronize, once a period
        # (rmqlab.broker.broker_controller.DEFAULT_SLAVE_SYNCHRONIZE_PERIOD_MS): wait for it.
        workload.setup(c, duration_ms=schedule.duration_ms, timeout_ms=90_000 if family == "classic" else 30_000)
        if orderly:
            c.create_group(CONSUMER_GROUP, orderly=True)
        spec = ConsumerSpec(topic=workload.topic, group=CONSUMER_GROUP, consumer_type="push",
                            consume_from_where="CONSUME_FROM_FIRST_OFFSET", orderly=orderly, threads=4)

        def consumer() -> BenchmarkConsumer:
            # The producer's route interval for the consumer too: both follow a failover as soon.
            b = BenchmarkConsumer(spec, c.namesrv_addr)
            b["consumer"].client_config.poll_name_server_interval = workload.poll_name_server_interval_ms
            return b

        c.add_client(CONSUMER, consumer)
        start = c.now_ms()
        applied = run_schedule(c, schedule)
        workload.stop(c)
        ok = settle(c, converged, converge_timeout_ms)
        c.stop_client(CONSUMER)
        drained = workload.drain(c)
        events = list(c.events())
        if trace_path:
            from rmqlab.trace import write_jsonl

            write_jsonl(events, trace_path, meta={"seed": seed, "runtime": "sim", "scenario": "chaos-case",
                                                  "case": case.to_dict(), "schedule": schedule.to_dict()})
        stores = {n: c.sim.store_dir(n) for n in c.brokers}
        results = check_run(family, events, stores, bool(case.controller.get("enableElectUncleanMaster")))
        virtual = c.sim.now_ms()
    finally:
        c.close()
        shutil.rmtree(root, ignore_errors=True)
    return CaseRun(case, seed, schedule, applied, results, recoveries(events), ok, drained, virtual,
                   time.monotonic() - wall, start, events if keep_events else None,
                   {"duplicated": sum(duplicated_per_reader(events).values()),
                    "consumed": sum(1 for e in events if e.node == CONSUMER and e.kind == "client"
                                    and e.fields.get("type") == "invoke" and e.fields.get("f") == "consume")})


def run_task(case_dict: dict[str, Any], seed: int) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """One case and seed, as rows (rmqlab.chaos.results): picklable arguments and results, no
    global state, so a process pool or a Spark mapPartitions can call it. A run that raises is a
    row too (`error`), with no fault rows."""
    import logging

    from rmqlab.chaos.results import error_row, rows

    case = Case.from_dict(case_dict)
    t0 = time.monotonic()
    was = logging.root.manager.disable
    logging.disable(logging.CRITICAL)  # the cluster's WARN lines, once per run; restored after
    try:
        run = run_case(case, seed)
    except Exception as e:  # noqa: BLE001 - the row says what broke; the campaign goes on
        return error_row(case, seed, f"{type(e).__name__}: {e}", time.monotonic() - t0), []
    finally:
        logging.disable(was)
    return rows(run)


def replay_command(case: Case, seed: int) -> str:
    """The command that runs this case and seed again (same seed, same run)."""
    source = case.campaign or "CAMPAIGN"
    return f"rmqlab chaos run {source} --case '{case.name}' --seeds {seed} --workers 1 --out chaos-replay"
