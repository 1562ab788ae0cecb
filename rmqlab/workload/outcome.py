"""A workload run's outcome: the Jepsen total-queue view, the invariants, recovery
time — plain JSON computed from the history only (the trace, plus the brokers' store files for
the replica check), with canonical bytes (`outcome_json`) that are the same for the same inputs.

    outcome(events, workload, stores)   -> dict          outcome_json(that) -> bytes

Keys:

  workload, seed, mode, runtime-independent counts from check_total_queue over every client's
  operations: attempted, acknowledged (SEND_OK), failed, indeterminate, read, lost (acknowledged,
  never read), duplicated (read more than once by one client node: `duplicated_keys`), unexpected (read, never sent); lost_keys /
  unexpected_keys (the first MAX_KEYS UNIQ_KEYs, sorted);
  invariants: name -> {"applies": bool, "holds": bool, "violations": int, "first": {what, message,
    node, seq, time_ms} | None, "details": {...}}:
      single-master                    one master per broker set and epoch (check_single_master)
      elected-in-sync-state-set        each elected master was in the SyncStateSet (check_elections);
                                       applies in controller modes unless enableElectUncleanMaster
                                       (then the unclean elections are listed, applies=false)
      truncation-at-consistent-point   each returning replica cut its log at the consistent point,
                                       never below what it had confirmed (check_truncations);
                                       controller modes (with enableElectUncleanMaster a cut below
                                       the confirm offset is expected and only counted in details)
      no-acknowledged-loss             nothing acknowledged is lost; applies only where the mode
                                       promises it (`promises_no_loss`): sync replication
                                       (brokerRole SYNC_MASTER), controller mode with
                                       allAckInSyncStateSet=true and no unclean election, or DLedger
                                       CommitLog mode (majority ack) unless a majority loses power;
                                       elsewhere reported with applies=false
      replicas-identical               the replicas' commit logs and epoch files agree on the
                                       committed prefix (check_replicas); controller modes, with
                                       the store files; in DLedger CommitLog mode the members'
                                       DLedger logs agree up to the commit index
                                       (check_dledger_replicas)
      no-rolled-back-read              no message of a rolled-back transaction was read (total-queue's
                                       rolled-back-read); only in traces with transactions
      queue-order                      orderly consumption kept each queue's order, one consumer at a
                                       time (check_order); only in traces with orderly consumers
  recovery_ms, recovery (per fault), max_unavailable_ms: see `recovery`;
  converged, virtual_ms (the trace's span), trace_events, trace_hash.

Times in the outcome are ms after the workload's t=0 (the runner's `workload.start` event; the
first event when there is none), so a real-process recording holds no wall-clock time either.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from typing import Any

from rmqlab.checker.order import check_order
from rmqlab.checker.checkers import (check_dledger_replicas, check_elections, check_replicas, check_single_master, check_total_queue,
                                     check_truncations, send_acknowledged)
from rmqlab.checker.result import CheckResult, Violation
from rmqlab.trace import TraceEvent, canonical_json, client_ops, messages_read, trace_hash
from rmqlab.workload.spec import Workload

MAX_KEYS = 10
INVARIANTS = ("single-master", "elected-in-sync-state-set", "truncation-at-consistent-point",
              "no-acknowledged-loss", "replicas-identical")
# In an outcome only when its trace has transactions / orderly consumers.
CONDITIONAL_INVARIANTS = ("no-rolled-back-read", "queue-order")
# Trace kinds that inject a fault (the nemesis's events; a loss of rate 0 is its undo).
# apply_op traces a loss op as two fault.loss events, one per direction: at the same virtual time on
# the simulator, a few ms apart on real processes.
LOSS_PAIR_MS = 50.0
FAULT_KINDS = ("node.kill", "node.crash", "node.suspend", "fault.partition", "fault.loss")


def outcome_json(outcome: Mapping[str, Any]) -> bytes:
    """The canonical bytes of an outcome (rmqlab.trace.canonical_json, UTF-8)."""
    return canonical_json(outcome).encode("utf-8")


def t0_of(events: list[TraceEvent]) -> float:
    for e in events:
        if e.kind == "workload.start":
            return e.time_ms
    return events[0].time_ms if events else 0.0


def promises_no_loss(workload: Workload) -> bool:
    """Whether the workload's deployment promises that an acknowledged message is never lost:
    every master replicates synchronously (brokerRole SYNC_MASTER, "同步双写"), controller
    mode with allAckInSyncStateSet=true on every broker (RocketMQ's "主备自动切换模式部署"
    documentation) and unclean elections off, or DLedger CommitLog mode while no majority of the
    group loses power."""
    from rmqlab.cluster import MODES

    mode = MODES[workload.mode]
    if mode.dleger_commit_log():
        # A send is acknowledged once a majority stores its entry, and a new leader holds every
        # committed entry (Raft), so nothing acknowledged is lost while a majority's disks survive.
        # A majority losing power could lose what it had not flushed: not promised when the
        # workload crashes that many members ("@master" counted as one more member).
        crashed = {op.node for op in workload.faults.ops if op.f == "crash"}
        return len(crashed) <= (len(mode.brokers) - 1) // 2
    configs = {node: mode.broker_config(node, workload.overrides) for node in mode.brokers}
    if workload.is_controller_mode:
        return all(bool(c.messageStoreConfig.allAckInSyncStateSet) for c in configs.values()) \
            and not workload.controller_overrides.get("enableElectUncleanMaster")
    masters = [c for c in configs.values() if c.brokerConfig.brokerId == 0]
    return bool(masters) and all(getattr(c.messageStoreConfig.brokerRole, "name", str(c.messageStoreConfig.brokerRole))
                                 == "SYNC_MASTER" for c in masters)


def _first(v: Violation | None, t0: float) -> dict | None:
    if v is None:
        return None
    return {"what": v.what, "message": v.message, "node": v.node, "seq": v.seq,
            "time_ms": None if v.time_ms is None else v.time_ms - t0}


def _invariant(applies: bool, result: CheckResult | None, t0: float, details: dict | None = None,
               violations: list[Violation] | None = None) -> dict:
    found = list(violations if violations is not None else (result.violations if result else ()))
    return {"applies": bool(applies), "holds": not found, "violations": len(found),
            "first": _first(found[0] if found else None, t0), "details": details or {}}


def recovery(events: list[TraceEvent], workload: Workload | None, t0: float) -> dict:
    """Recovery time, from the trace alone.

    A fault is an injecting nemesis event after t=0: node.kill, node.crash or node.suspend of a
    server node, fault.partition, fault.loss with rate > 0 (the second direction of a loss op, a
    fault.loss of the same rate within LOSS_PAIR_MS, is the same fault). Its period runs from it to the next
    fault (or the end of the trace). The sends of a period are the `send` operations of any
    client invoked in it (trace order).

    * a send invoked in a period but completed unacknowledged after the next fault (in flight when
      it struck) does not count for the period;
    * per fault, `recovery_ms`: from the fault until writes succeed again for good in its period —
      the completion of the first acknowledged (SEND_OK) send invoked after the period's last
      unacknowledged send (failed, indeterminate, or ok without SEND_OK), or after the fault when
      every send of the period was acknowledged. `recovered: false` when the period's last sends
      were not acknowledged (recovery_ms then runs to the period's end: a lower bound); None when
      no send was invoked in the period (nothing measured it).
    * `recovery_ms`: the longest of those (None without a measured fault).
    * `max_unavailable_ms`: the longest interval between two consecutive acknowledgements (or t=0
      and the first, or the last and the last send invoked) in which a send was invoked that was
      not acknowledged: how long the application could not write, faults or not.
    """
    clients = {c.name for c in workload.clients} if workload is not None else set()
    sends = sorted((op for op in client_ops(events) if op.f == "send"), key=lambda op: op.invoke_seq)
    end_ms = events[-1].time_ms if events else t0
    faults: list[TraceEvent] = []
    for e in events:
        if e.time_ms < t0 or e.kind not in FAULT_KINDS or e.node in clients \
                or (e.kind == "fault.loss" and not e.fields.get("rate")):
            continue
        if e.kind == "fault.loss" and faults and faults[-1].kind == "fault.loss" \
                and faults[-1].fields.get("rate") == e.fields.get("rate") and e.time_ms - faults[-1].time_ms <= LOSS_PAIR_MS:
            continue  # one loss op is two set_loss calls, one per direction (apply_op)
        faults.append(e)
    out = []
    for k, e in enumerate(faults):
        upto_seq = faults[k + 1].seq if k + 1 < len(faults) else None
        upto_ms = faults[k + 1].time_ms if k + 1 < len(faults) else end_ms
        period = [op for op in sends if op.invoke_seq > e.seq and (upto_seq is None or op.invoke_seq < upto_seq)]
        # A send still in flight when the next fault struck and then not acknowledged says nothing
        # about this period (the next fault may be what failed it): it is left out here.
        period = [op for op in period if upto_seq is None or send_acknowledged(op)
                  or op.complete_time_ms is None or op.complete_time_ms < upto_ms]
        bad = [i for i, op in enumerate(period) if not send_acknowledged(op)]
        tail = period[bad[-1] + 1:] if bad else period
        what = e.node if e.kind.startswith("node.") else ("partition" if e.kind == "fault.partition" else "loss")
        if not period:
            rec, ok = None, None
        elif tail:
            rec, ok = min(op.complete_time_ms for op in tail) - e.time_ms, True
        else:
            rec, ok = upto_ms - e.time_ms, False
        out.append({"kind": e.kind, "node": what, "seq": e.seq, "time_ms": e.time_ms - t0,
                    "recovery_ms": rec, "recovered": ok})
    measured = [f["recovery_ms"] for f in out if f["recovery_ms"] is not None]
    acks = sorted(op.complete_time_ms for op in sends if send_acknowledged(op) and op.complete_time_ms >= t0)
    failed_invokes = [op.invoke_time_ms for op in sends if not send_acknowledged(op) and op.invoke_time_ms >= t0]
    last_invoke = max((op.invoke_time_ms for op in sends), default=t0)
    marks = [t0, *acks, max(last_invoke, acks[-1] if acks else t0)]
    longest = 0.0
    for a, b in zip(marks, marks[1:]):
        if any(a <= i <= b for i in failed_invokes):
            longest = max(longest, b - a)
    return {"recovery_ms": max(measured) if measured else None, "recovery": out,
            "max_unavailable_ms": longest if sends else None}


def duplicated_keys(events: list[TraceEvent]) -> list[str]:
    """UNIQ_KEYs some one client node read more than once (`pull` / `receive` / `consume`
    operations): a redelivery to a consumer, or a message stored twice (a producer's retry) that
    the final read-back found twice. Two nodes reading the same message (a consumer group and the
    final read-back) is not a duplicate: each reads the queue once."""
    seen: dict[tuple[str, str], int] = {}
    for op in client_ops(events):
        for m in messages_read(op):
            if m.get("uniq_key"):
                key = (op.node, m["uniq_key"])
                seen[key] = seen.get(key, 0) + 1
    return sorted({k for (_, k), n in seen.items() if n > 1})


def outcome(events: Iterable[TraceEvent], workload: Workload, stores: Mapping[str, str] | None = None, *,
            seed: int | None = None, converged: bool | None = None) -> dict:
    """The outcome of a run of `workload` whose history is `events` (and, for the replica check,
    `stores`: broker node -> its store directory after the run; None or missing directories: the
    check does not apply). `converged`: the runner's verdict (default: read from its trace event)."""
    events = list(events)
    t0 = t0_of(events)
    controller = workload.is_controller_mode
    tq = check_total_queue(events)
    lost = [v for v in tq.violations if v.what == "lost"]
    unexpected = [v for v in tq.violations if v.what == "unexpected"]
    s = tq.stats
    duplicated = duplicated_keys(events)
    unclean_allowed = bool(workload.controller_overrides.get("enableElectUncleanMaster"))
    elections = check_elections(events, unclean_allowed=unclean_allowed)
    truncs = check_truncations(events)
    single = check_single_master(events)
    have_stores = bool(stores) and all(os.path.isdir(p) for p in stores.values())
    from rmqlab.cluster import MODES

    dledger = MODES[workload.mode].dleger_commit_log()
    if not have_stores:
        replicas = None
    elif controller:
        replicas = check_replicas(events, stores)
    else:
        replicas = check_dledger_replicas(events, stores) if dledger else None
    promised = promises_no_loss(workload)
    if converged is None:
        from rmqlab.workload.runner import WORKLOAD_NODE

        flags = [e.fields["converged"] for e in events if e.node == WORKLOAD_NODE and "converged" in e.fields]
        converged = bool(flags[-1]) if flags else False
    invariants = {
        "single-master": _invariant(True, single, t0, {"elections": single.stats.get("elections", 0)}),
        "elected-in-sync-state-set": _invariant(
            controller and not unclean_allowed, elections, t0,
            {"elections": elections.stats["elections"], "unclean": len(elections.stats["unclean"]),
             "unclean_allowed": unclean_allowed},
            violations=None if not unclean_allowed else [
                Violation("unclean-election", f"{u['node'] or u['broker_id']} elected master of {u['broker_set']} in "
                          f"epoch {u['epoch']} from outside its SyncStateSet {u['sync_state_set']}",
                          u["node"], u["seq"], u["time_ms"]) for u in elections.stats["unclean"]]),
        "truncation-at-consistent-point": _invariant(
            controller, truncs, t0, {**truncs.stats, "cut_committed": sum(v.what == "cut-committed" for v in truncs.violations)},
            # A cut below the confirm offset follows from an unclean election (the new master lacks
            # committed data): with unclean elections enabled it is expected, not a wrong cut.
            violations=[v for v in truncs.violations if not (unclean_allowed and v.what == "cut-committed")]),
        "no-acknowledged-loss": _invariant(promised, None, t0, {"promised": promised, "lost": len(lost)},
                                           violations=lost),
        "replicas-identical": _invariant(replicas is not None, replicas, t0,
                                         {} if replicas is None else {
                                             name: ({"committed_index": v["committed_index"]} if dledger
                                                    else {"committed_offset": v["committed_offset"]})
                                             for name, v in sorted(replicas.stats.items())}),
    }
    # Only for the traces that have them, so the outcomes of every other workload read as before.
    if "rolled_back" in s:
        rolled = [v for v in tq.violations if v.what == "rolled-back-read"]
        invariants["no-rolled-back-read"] = _invariant(True, None, t0, {"rolled_back": s["rolled_back"]},
                                                       violations=rolled)
    order = check_order(events)
    if order.stats["orderly_consumes"]:
        invariants["queue-order"] = _invariant(True, order, t0, dict(order.stats))
    rec = recovery(events, workload, t0)
    return {
        "workload": workload.name, "seed": workload.seed if seed is None else seed, "mode": workload.mode,
        "proxy": workload.proxy,
        "attempted": s["attempted"], "acknowledged": s["acknowledged"], "failed": s["failed"],
        "indeterminate": s["indeterminate"], "read": s["read"], "lost": s["lost"],
        "duplicated": len(duplicated), "unexpected": s["unexpected"],
        "lost_keys": sorted(v.details["uniq_key"] for v in lost)[:MAX_KEYS],
        "unexpected_keys": sorted(v.details["uniq_key"] for v in unexpected)[:MAX_KEYS],
        "invariants": invariants,
        **rec,
        "converged": bool(converged),
        "virtual_ms": (events[-1].time_ms - events[0].time_ms) if events else 0.0,
        "trace_events": len(events),
        "trace_hash": trace_hash(events),
    }


def summary(o: Mapping[str, Any]) -> str:
    """An outcome in a few human-readable lines (`rmqlab replay` without --json)."""
    def ms(v):
        return "—" if v is None else f"{v / 1000:.1f} s"

    lines = [f"workload {o['workload']} (mode {o['mode']}{', proxy ' + o['proxy'] if o.get('proxy') else ''}, "
             f"seed {o['seed']}): {'converged' if o['converged'] else 'DID NOT CONVERGE'}, "
             f"{o['virtual_ms'] / 1000:.1f} virtual s, {o['trace_events']} events",
             f"  sends: {o['attempted']} attempted, {o['acknowledged']} acknowledged, {o['failed']} failed, "
             f"{o['indeterminate']} indeterminate",
             f"  total queue: {o['read']} read, lost {o['lost']}, duplicated {o['duplicated']}, "
             f"unexpected {o['unexpected']}" + (f" (lost e.g. {', '.join(o['lost_keys'][:3])})" if o["lost"] else ""),
             f"  recovery: {ms(o['recovery_ms'])} (longest), unavailable at most {ms(o['max_unavailable_ms'])}"]
    for name in sorted(o["invariants"], key=lambda n: (INVARIANTS.index(n) if n in INVARIANTS else len(INVARIANTS), n)):
        inv = o["invariants"][name]
        verdict = "holds" if inv["holds"] else f"BROKEN ({inv['violations']})"
        if not inv["applies"]:
            verdict = f"n/a ({'would hold' if inv['holds'] else str(inv['violations']) + ' violation(s)'})"
        line = f"  {name}: {verdict}"
        if inv["first"] and inv["applies"]:
            line += f"\n      first: {inv['first']['message']}"
        lines.append(line)
    for f in o["recovery"]:
        lines.append(f"  fault {f['kind']} {f['node']} at {ms(f['time_ms'])}: recovered "
                     + (f"after {ms(f['recovery_ms'])}" if f["recovered"] else
                        "— no send after it" if f["recovered"] is None else "NEVER (sends went on failing)"))
    lines.append(f"  trace hash {o['trace_hash']}")
    return "\n".join(lines)
