"""Running a workload (`rmqlab record` and `rmqlab replay`): its inputs in, its trace and outcome out.

    run = run_workload(workload)                     # the simulator, seed = workload.seed
    run.outcome, run.events, run.virtual_ms, run.wall_s
    run_workload(workload, runtime="real")           # OS processes (recording only)
    run_workload(workload, decision_points=exercise.decision_points(fn))   # a student's function decides

A run, on either runtime:

  start      the cluster of the workload's mode starts (rmqlab.cluster.Cluster); controller modes
             wait for a master whose SyncStateSet holds every replica (as run_chaos), classic modes
             for every broker registered and every slave's HA connection reporting to its master
  topics     every topic is created with `mqadmin updateTopic -c` and then `updateTopic -b` on every
             broker, slaves too (a slave copies a new topic only at its SlaveSynchronize run, a
             minute in: rmqlab.demo.mode_comparison.create_topic_everywhere does the same)
  t = 0      a `log` event of node "workload" marks it; from then on each client starts at its
             start_ms and stops (SIGTERM) at its stop_ms, and each fault op is applied at its
             time_ms (rmqlab.checker.schedule.apply_op; "@master" resolved as run_schedule does)
  end        at duration_ms the producers still running stop
  converge   bounded (CONVERGE_TIMEOUT_MS; controller modes rmqlab.checker.chaos.rejoin_window_ms,
             RocketMQ's rejoin time): every broker up, the master routed by the name servers,
             every replica at the master's max offset (rmqlab.checker.chaos.converged; classic
             modes: `converged_classic`)
  read-back  a fresh pull consumer reads every queue of every topic from its first offset (Jepsen's
             final read); whatever it cannot read counts as lost
  outcome    rmqlab.workload.outcome on the trace and the brokers' store files

The simulator is deterministic: the same workload and seed give the same trace and the same
outcome bytes, in any process (PYTHONHASHSEED does not matter). The real runtime (runtime="real",
for recording) runs the same steps on OS processes through rmqlab.runtime.real_cluster: every
fault kind works there with the fault relay, except that link faults (partition, loss) do not reach
the controllers' Raft port (rmqlab.cluster's docstring) and proxy="local" runs without the relay
(no link faults at all); its convergence is judged from the trace (`_settle_real`), and its
read-back is a pull-consumer process (ConsumerSpec consumer_type="pull", CONSUME_FROM_FIRST_OFFSET)
stopped once it has read nothing new for READ_QUIET_MS.
"""

from __future__ import annotations

import contextlib
import shutil
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from rmqlab.checker.schedule import FaultOp, MasterResolver, apply_op
from rmqlab.cluster.sim_backend import memory_dir, owned_prefix
from rmqlab.common.decision_points import DecisionPoints
from rmqlab.example.benchmark import ConsumerSpec, build_client
from rmqlab.workload.spec import CLIENT_SETTINGS, Workload

WORKLOAD_NODE = "workload"          # the runner's own trace events (t=0, phases)
READER = "workload-reader"          # the final read-back's consumer
START_TIMEOUT_MS = 60_000
CONVERGE_TIMEOUT_MS = 30_000        # virtual ms on the simulator, wall ms on the real runtime
READ_TIMEOUT_MS = 30_000
READ_QUIET_MS = 3_000               # real runtime: the reader is done when it read nothing new this long
T0_MESSAGE = "workload: t=0"


@dataclass
class WorkloadRun:
    """What a run gives: the trace, the outcome (plain JSON, rmqlab.workload.outcome), virtual ms
    the run took on the simulator (the trace's span on the real runtime), and its wall seconds."""

    workload: Workload
    seed: int
    runtime: str
    events: list
    outcome: dict
    virtual_ms: float
    wall_s: float
    converged: bool
    root_dir: str | None = None      # kept only when the caller gave root_dir
    meta: dict[str, Any] = field(default_factory=dict)


def run_workload(workload: Workload, *, seed: int | None = None, runtime: str = "sim",
                 patches: Sequence[contextlib.AbstractContextManager] = (), root_dir: str | None = None,
                 quiet: bool = True, decision_points: DecisionPoints | None = None) -> WorkloadRun:
    """Run `workload` (module docstring) with `seed` (default: workload.seed). `decision_points`
    (rmqlab.common.decision_points; the simulator only) are the rules the cluster's components use
    instead of RocketMQ's at those points (an exercise's function). `patches` are context managers
    entered in order around the whole run; an exception raised inside one propagates. `root_dir`:
    where the nodes' files go, kept after the run (default: a temporary directory, removed).
    `quiet`: rmqlab's and pysyncobj's loggers are silenced during the run (the trace holds what
    happened; a failover makes every client log a warning per retry)."""
    if not isinstance(workload, Workload):
        raise TypeError(f"run_workload: expected a Workload, not {type(workload).__name__}")
    if runtime not in ("sim", "real"):
        raise ValueError(f"runtime must be 'sim' or 'real', not {runtime!r}")
    seed = workload.seed if seed is None else seed
    if not isinstance(seed, int) or isinstance(seed, bool) or seed < 0:
        raise ValueError(f"seed must be an integer >= 0, not {seed!r}")
    if runtime == "real" and patches:
        raise ValueError("patches swap code into the simulator's components: they need runtime='sim'")
    if runtime == "real" and decision_points is not None:
        raise ValueError("decision_points are Python callables handed to the simulator's components: they need "
                         "runtime='sim'")
    from rmqlab.viz import quiet_logs

    wall = time.monotonic()
    root = root_dir or tempfile.mkdtemp(prefix=owned_prefix(f"rmqlab-workload-{workload.name}-"),
                                        dir=memory_dir() if runtime == "sim" else None)
    try:
        with contextlib.ExitStack() as stack:
            if quiet:
                stack.enter_context(quiet_logs())
            for patch in patches:
                stack.enter_context(patch)
            run = _run(workload, seed, runtime, root, decision_points)
        run.wall_s = time.monotonic() - wall
        run.root_dir = root_dir
        return run
    finally:
        if root_dir is None:
            shutil.rmtree(root, ignore_errors=True)


def _run(workload: Workload, seed: int, runtime: str, root: str,
         decision_points: DecisionPoints | None = None) -> WorkloadRun:
    from rmqlab.cluster import Cluster
    from rmqlab.workload.outcome import outcome as compute_outcome

    kwargs = workload.cluster_kwargs()
    if runtime == "real":
        # The relay carries the link faults; a Local-mode Proxy cannot sit behind it.
        kwargs["relay"] = workload.proxy != "local"
    if decision_points is not None:
        kwargs["decision_points"] = decision_points
    c = Cluster(workload.mode, runtime, seed=seed, root_dir=root, **kwargs)
    try:
        _add_clients(c, workload)
        c.start(START_TIMEOUT_MS)
        _wait_healthy(c)
        _create_topics(c, workload)
        tracer = c.tracer
        now = c.now_ms
        t0 = now()
        tracer.emit(WORKLOAD_NODE, "log", level="INFO", message=T0_MESSAGE, logger="rmqlab.workload")
        tracer.emit(WORKLOAD_NODE, "workload.start", workload=workload.name, seed=seed, mode=workload.mode)
        applied = _run_timeline(c, workload, t0, now)
        tracer.emit(WORKLOAD_NODE, "log", level="INFO", message="workload: producers stopped, waiting to converge",
                    logger="rmqlab.workload")
        ok = _converge(c)
        tracer.emit(WORKLOAD_NODE, "log", level="INFO" if ok else "WARN",
                    message=f"workload: {'converged' if ok else 'did not converge'}; final read begins",
                    logger="rmqlab.workload", converged=ok)
        drained = _drain(c, workload)
        tracer.emit(WORKLOAD_NODE, "log", level="INFO", message=f"workload: final read done ({drained} messages)",
                    logger="rmqlab.workload", read=drained)
        events = list(c.events())
        stores = {n: c.store_dir(n) for n in c.brokers}
        result = compute_outcome(events, workload, stores, seed=seed, converged=ok)
        virtual = c.sim.now_ms() if runtime == "sim" else (events[-1].time_ms - events[0].time_ms if events else 0.0)
    finally:
        c.close()
    return WorkloadRun(workload, seed, runtime, events, result, virtual, 0.0, ok,
                       meta={"applied_faults": [op.to_dict() for op in applied], "read": drained})


# --- clients ----------------------------------------------------------------------------------------------
def apply_client_overrides(process, overrides) -> None:
    """Set the workload's client_overrides on every remoting client of a ClientProcess (the 5.x
    gRPC clients have no ClientConfig: their settings are the Proxy's)."""
    for client in process.clients.values():
        config = getattr(client, "client_config", None)
        if config is None:
            continue
        for key, value in overrides.items():
            setattr(config, CLIENT_SETTINGS[key][0], value)


def _add_clients(c, workload: Workload) -> None:
    """Every client node, not started (t=0 starts them). On the simulator a factory builds the
    spec's component with the client overrides; on the real runtime each is a process of
    rmqlab.workload.real_client (the `rmqlab producer|consumer` command with the overrides)."""
    for client in workload.clients:
        _add_client(c, client.name, client.spec, workload.client_overrides)
    if c.runtime == "real":
        for i, topic in enumerate(workload.topics):
            _add_client(c, f"{READER}-{i}", _reader_spec(topic.topic), workload.client_overrides)


def _add_client(c, name: str, spec, overrides) -> None:
    address = c.client_address(name, spec)
    if c.runtime == "sim":
        def factory(spec=spec, address=address):
            process = build_client(spec, address)
            apply_client_overrides(process, overrides)
            return process

        c.add_client(name, factory, start=False)
        c.clients[name] = spec  # the description, as add_client records it for a described client
        return
    import json

    where = "--endpoints" if spec.protocol == "grpc" else "-n"
    argv = [sys.executable, "-m", "rmqlab.workload.real_client", "--client-overrides", json.dumps(dict(overrides)),
            spec.kind, where, address, *spec.to_argv()]
    # Cluster.add_client builds `python -m rmqlab.cli producer ...`; this is the same command with
    # the client settings a ProducerSpec has no flag for, so the node is added the same way by hand.
    c.real.add_node(name, argv)
    c.clients[name] = spec


def _reader_spec(topic: str) -> ConsumerSpec:
    return ConsumerSpec(topic=topic, group="workload_reader", consumer_type="pull",
                        consume_from_where="CONSUME_FROM_FIRST_OFFSET")


# --- start-up ---------------------------------------------------------------------------------------------
def _wait_healthy(c) -> None:
    """Controller modes: a master whose SyncStateSet holds every replica (from the trace: the
    controllers' AlterSyncStateSet events, so it works on either runtime). DLedger CommitLog mode:
    a master, and every other member a follower of its term (their `dledger.role` events; DLedger
    has no HA client to report). Classic modes: every slave's HA client has reported its offset to
    its master once."""
    if c.deployment.mode.dleger_commit_log():
        def healthy() -> bool:
            master = c.master()
            if master is None:
                return False
            last: dict[str, tuple[str, int]] = {}
            for e in c.events():
                if e.kind == "dledger.role":
                    last[e.node] = (e.fields["role"], e.fields["term"])
            leader = last.get(master)
            return leader is not None and leader[0] == "LEADER" and all(
                last.get(n) == ("FOLLOWER", leader[1]) for n in c.brokers if n != master)
    elif c.controller_nodes:
        from rmqlab.checker.checkers import sync_state_sets

        def healthy() -> bool:
            master = c.master()
            if master is None:
                return False
            events = c.events()
            if any(len(s) == len(c.brokers) for s in sync_state_sets(events).values()):
                return True
            if c.runtime == "real":
                # The real runtime's trace lacks the controllers' log (their events are traced on
                # the simulator only), so read the master's last SyncStateSet proposal instead.
                proposals = [e.fields["sync_state_set"] for e in events if e.node == master
                             and e.kind == "ha.sync_state_set_change"]
                return bool(proposals) and len(proposals[-1]) == len(c.brokers)
            return False
    else:
        slaves = [n for n in c.brokers if c.broker_template(n).brokerId != 0]

        def healthy() -> bool:
            reported = {e.node for e in c.events() if e.kind == "frame.send" and e.fields.get("proto") == "ha"
                        and e.fields.get("name") == "report"}
            return reported >= set(slaves)
    c.run_until(healthy, START_TIMEOUT_MS)


def _create_topics(c, workload: Workload) -> None:
    """`mqadmin updateTopic -c` for every topic (it waits for the route), then `updateTopic -b` on
    every broker that registered, slaves too (module docstring)."""
    from rmqlab.common.topic_config import TopicConfig
    from rmqlab.remoting.request_code import RequestCode

    for t in workload.topics:
        c.create_topic(t.topic, queues=t.queues, timeout_ms=START_TIMEOUT_MS)
    addrs = sorted({(e.fields.get("ext_fields") or {}).get("brokerAddr") for e in c.events()
                    if e.kind == "frame.send" and e.fields.get("code") == RequestCode.REGISTER_BROKER
                    and not e.fields.get("flag", 0) & 1} - {None})

    async def create(admin, now_ms) -> None:
        for addr in addrs:
            for t in workload.topics:
                await admin.create_and_update_topic_config(addr, TopicConfig(t.topic, t.queues, t.queues))

    c.admin(create)


# --- the timeline -----------------------------------------------------------------------------------------
def _run_timeline(c, workload: Workload, t0: float, now) -> list[FaultOp]:
    """Start and stop clients and apply the fault ops at their times after t0, then at
    duration_ms stop the producers still running. Returns the fault ops applied, "@master"
    resolved (rmqlab.checker.schedule.run_schedule's rules: a MASTER fault is skipped, with its
    undo, when there is no master or the master is under a process fault already)."""
    actions: list[tuple[float, int, int, str, Any]] = []
    for i, client in enumerate(workload.clients):
        actions.append((client.start_ms, 0, i, "start", client.name))
        if client.stop_ms is not None:
            actions.append((client.stop_ms, 1, i, "stop", client.name))
    for i, op in enumerate(workload.faults.ops):
        actions.append((op.time_ms, 2, i, "fault", op))
    actions.sort(key=lambda a: a[:3])  # at equal times: starts, stops, then faults in schedule order
    resolve = MasterResolver(c)
    applied: list[FaultOp] = []
    for at_ms, _, _, what, item in actions:
        _advance(c, t0 + at_ms, now)
        if what == "start":
            c.start_client(item)
        elif what == "stop":
            if c.alive(item):
                c.stop_client(item)
        else:
            op = resolve(item)
            if op is None:
                continue
            apply_op(c.nemesis, op)
            applied.append(op)
    _advance(c, t0 + workload.duration_ms, now)
    for client in workload.clients:
        if client.kind == "producer" and c.alive(client.name):
            c.stop_client(client.name)
    return applied


def _advance(c, until_ms: float, now) -> None:
    left = until_ms - now()
    if left > 0:
        c.run_for(left)


# --- convergence and the final read -------------------------------------------------------------------------
def converged_classic(c) -> bool:
    """A classic cluster has settled: every broker running, every broker set's master registered
    with every name server, every slave at its master's max physical offset."""
    if any(not c.sim.nodes[n].alive for n in c.brokers):
        return False
    sets: dict[str, list[str]] = {}
    for n in c.brokers:
        sets.setdefault(c.components[n].broker_config.brokerName, []).append(n)
    for name, nodes in sets.items():
        if len({c.components[n].message_store.get_max_phy_offset() for n in nodes}) > 1:
            return False
        for ns in c.namesrvs:
            table = c.components[ns].route_info_manager.broker_addr_table.get(name)
            if table is None or table.broker_addrs.get(0) is None:
                return False
    return True


def _converge(c) -> bool:
    if c.runtime == "real":
        return _settle_real(c)
    from rmqlab.checker.chaos import converged, rejoin_window_ms, settle

    check = converged if c.controller_nodes else converged_classic
    # Controller mode: a slave may take RocketMQ's rejoin time (rejoin_window_ms, 45 s by default)
    # to replicate again after a restart, longer than the classic modes' window.
    timeout = max([CONVERGE_TIMEOUT_MS] + [rejoin_window_ms(c.components[b]) for b in c.brokers
                                           if c.controller_nodes and c.components.get(b) is not None])
    return settle(c, check, timeout)


def _settle_real(c) -> bool:
    """Real runtime: the components cannot be read, so the trace is: every server node running
    (its last node.* event not a kill, crash or stop) and, in controller mode, a master; then
    READ_QUIET_MS for the replicas to catch up."""
    down_kinds = ("node.kill", "node.crash", "node.stop", "node.suspend")

    def settled() -> bool:
        last: dict[str, str] = {}
        for e in c.events():
            if e.kind.startswith("node.") and e.node in c.brokers:
                last[e.node] = e.kind
        if any(last.get(n) in down_kinds for n in c.brokers):
            return False
        return not c.controller_nodes or c.master() is not None

    try:
        c.run_until(settled, CONVERGE_TIMEOUT_MS, poll_ms=250)
        ok = True
    except TimeoutError:
        ok = False
    c.run_for(READ_QUIET_MS)
    return ok


def _drain(c, workload: Workload) -> int:
    return _drain_sim(c, workload) if c.runtime == "sim" else _drain_real(c, workload)


def _drain_sim(c, workload: Workload, batch: int = 32) -> int:
    """The chaos workload's final read (rmqlab.checker.queue_clients.drain_topics) over every topic."""
    from rmqlab.checker.queue_clients import drain_topics

    n = drain_topics(c, [t.topic for t in workload.topics], READER, "workload_reader", READ_TIMEOUT_MS, batch,
                     "final read gave up", "rmqlab.workload")
    c.stop_client(READER)
    return n


def _drain_real(c, workload: Workload) -> int:
    """Real runtime: a pull-consumer process per topic (new group, first offset) runs until its
    pulls have returned nothing new for READ_QUIET_MS (at most READ_TIMEOUT_MS), then stops."""
    from rmqlab.trace import client_ops

    readers = [f"{READER}-{i}" for i in range(len(workload.topics))]
    for r in readers:
        c.start_client(r)
    begin = time.monotonic()
    last_count, last_change, count = -1, time.monotonic(), 0
    while time.monotonic() - begin < READ_TIMEOUT_MS / 1000.0:
        time.sleep(0.5)
        pulls = [op for op in client_ops(c.events()) if op.node in readers and op.f == "pull" and op.type == "ok"
                 and isinstance(op.value, dict)]
        count = sum(len(op.value.get("messages") or []) for op in pulls)
        if count != last_count:
            last_count, last_change = count, time.monotonic()
        elif pulls and time.monotonic() - last_change >= READ_QUIET_MS / 1000.0:
            break
    for r in readers:
        if c.alive(r):
            c.stop_client(r)
    return count
