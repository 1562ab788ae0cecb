"""Recovery checkers (OpenChaos's RecoveryChecker and per-partition order checker): how long each
injected fault kept the service away, and whether a queue's messages are stored in the order a
sequential producer had them acknowledged. From the trace only, as every checker here:

    fault_windows(events)                  each fault: kind, nodes, start, end (node.* / fault.* events)
    unavailability_windows(events)         gaps between acknowledged sends longer than `gap_ms`
    check_recovery(events)                 per fault: RTO to the first acknowledged send invoked after
                                           it, RTO to the first consumption after it, and the send gap
                                           time inside its period; `not-recovered` when none came
    check_queue_order(events)              per queue: acknowledged sends of one producer read back
                                           in the order they were acknowledged

An RTO that did not happen within the history is None with a reason, never 0: a fault after which
nothing was acknowledged again is the finding, not a fast recovery.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import asdict, dataclass

from rmqlab.checker.checkers import send_acknowledged
from rmqlab.checker.result import CheckResult, Violation, result
from rmqlab.trace import ClientOp, TraceEvent, client_ops, messages_read

_PROCESS = {"node.kill": "kill", "node.crash": "crash", "node.suspend": "suspend"}
_UNDO_PROCESS = {"kill": "node.restart", "crash": "node.restart", "suspend": "node.resume"}
_SHAPES = {"groups": "partition", "one-way": "partition", "ring": "ring", "bridge": "bridge"}


@dataclass(frozen=True)
class FaultWindow:
    """One injected fault as the trace shows it: the injecting events of one kind at (nearly) the
    same time form one fault (a kill of a majority is one fault on several nodes). `end_ms`: when
    its last undo happened (restart, resume, heal, loss 0), None when it was never undone."""

    kind: str                 # kill, crash, suspend, partition, ring, bridge, loss
    nodes: tuple[str, ...]
    start_ms: float
    end_ms: float | None
    seq: int                  # the first injecting event

    @property
    def duration_ms(self) -> float | None:
        return None if self.end_ms is None else self.end_ms - self.start_ms


def _injection(e: TraceEvent) -> tuple[str, tuple[str, ...]] | None:
    if e.kind in _PROCESS:
        return _PROCESS[e.kind], (e.node,)
    if e.kind == "fault.partition":
        return _SHAPES.get(e.fields.get("shape"), "partition"), tuple(sorted({n for g in e.fields["groups"] for n in g}))
    if e.kind == "fault.loss" and e.fields.get("rate", 0) > 0:
        return "loss", tuple(sorted({n for link in e.fields.get("links") or () for n in link}))
    return None


def fault_windows(events: Iterable[TraceEvent], group_ms: float = 50) -> list[FaultWindow]:
    """The faults of a history, in order (module docstring). Injecting events of one kind within
    `group_ms` of a fault's first event belong to it (the real runtime applies a multi-node fault
    one node after another)."""
    found: list[dict] = []
    for e in events:
        inj = _injection(e)
        if inj is not None:
            kind, nodes = inj
            last = found[-1] if found else None
            if last and last["kind"] == kind and last["end"] is None and e.time_ms - last["start"] <= group_ms:
                last["nodes"].update(nodes)
            else:
                found.append({"kind": kind, "nodes": set(nodes), "start": e.time_ms, "seq": e.seq,
                              "undone": set(), "end": None})
            continue
        for f in found:
            if f["end"] is not None:
                continue
            if f["kind"] in _UNDO_PROCESS and e.kind == _UNDO_PROCESS[f["kind"]] and e.node in f["nodes"]:
                f["undone"].add(e.node)
                if f["undone"] >= f["nodes"]:
                    f["end"] = e.time_ms
            elif f["kind"] in ("partition", "ring", "bridge") and e.kind == "fault.heal":
                f["end"] = e.time_ms
            elif f["kind"] == "loss" and e.kind == "fault.loss" and e.fields.get("rate", 0) == 0:
                f["end"] = e.time_ms
    return [FaultWindow(f["kind"], tuple(sorted(f["nodes"])), f["start"], f["end"], f["seq"]) for f in found]


def _acked_sends(ops: list[ClientOp]) -> list[ClientOp]:
    return sorted((op for op in ops if op.f == "send" and send_acknowledged(op)), key=lambda o: o.complete_time_ms)


def unavailability_windows(events: Iterable[TraceEvent], gap_ms: float = 1_000) -> list[tuple[float, float | None]]:
    """(start, end) of every gap longer than `gap_ms` between acknowledged send completions, from
    the first send's invocation to the last's; a gap still open at the last send (nothing
    acknowledged after it) ends None."""
    ops = client_ops(list(events))
    sends = [op for op in ops if op.f == "send"]
    if not sends:
        return []
    acked = [op.complete_time_ms for op in _acked_sends(ops)]
    first, horizon = sends[0].invoke_time_ms, max(op.invoke_time_ms for op in sends)
    windows: list[tuple[float, float | None]] = []
    prev = first
    for t in acked:
        if t - prev > gap_ms:
            windows.append((prev, t))
        prev = max(prev, t)
    if horizon - prev > gap_ms:
        windows.append((prev, None))
    return windows


@dataclass(frozen=True)
class FaultRecovery:
    """A fault and what it cost. `rto_send_ms`: from its start to the completion of the first
    acknowledged send invoked after it; `rto_consume_ms`: to the first message handed to a
    consumer's listener after it; None with `*_reason` when that never happened in the history.
    `unavailable_ms`: the time of acknowledged-send gaps (unavailability_windows) inside the fault's
    period, from its start to the next fault's (or the last send)."""

    fault: FaultWindow
    rto_send_ms: float | None
    rto_send_reason: str | None
    rto_consume_ms: float | None
    rto_consume_reason: str | None
    unavailable_ms: float

    def to_dict(self) -> dict:
        return {**asdict(self.fault), "nodes": list(self.fault.nodes), **{k: v for k, v in asdict(self).items() if k != "fault"}}


def recoveries(events: Iterable[TraceEvent], *, gap_ms: float = 1_000, group_ms: float = 50) -> list[FaultRecovery]:
    """Each fault of the history with its RTOs and unavailable time (FaultRecovery)."""
    events = list(events)
    ops = client_ops(events)
    sends = [op for op in ops if op.f == "send"]
    acked = _acked_sends(ops)
    consumed = sorted((op for op in ops if op.f == "consume"), key=lambda o: o.invoke_time_ms)
    horizon = max((op.invoke_time_ms for op in sends), default=None)
    windows = unavailability_windows(events, gap_ms)
    faults = fault_windows(events, group_ms)
    out = []
    for i, f in enumerate(faults):
        first_send = next((op for op in acked if op.invoke_time_ms >= f.start_ms), None)
        if first_send is not None:
            rto_send, send_reason = first_send.complete_time_ms - f.start_ms, None
        else:
            rto_send = None
            send_reason = ("no send in the history" if horizon is None else
                           f"no acknowledged send invoked after the fault (the producer's last send at "
                           f"{horizon:.0f} ms)")
        first_consume = next((op for op in consumed if op.invoke_time_ms >= f.start_ms), None)
        if first_consume is not None:
            rto_consume, consume_reason = first_consume.invoke_time_ms - f.start_ms, None
        else:
            rto_consume = None
            consume_reason = ("no consumer in the history" if not consumed else
                              "no message consumed after the fault")
        period_end = faults[i + 1].start_ms if i + 1 < len(faults) else horizon
        unavailable = 0.0
        if period_end is not None:
            for a, b in windows:
                b = horizon if b is None else b
                unavailable += max(0.0, min(b, period_end) - max(a, f.start_ms))
        out.append(FaultRecovery(f, rto_send, send_reason, rto_consume, consume_reason, unavailable))
    return out


def check_recovery(events: Iterable[TraceEvent], *, gap_ms: float = 1_000, group_ms: float = 50) -> CheckResult:
    """Liveness per fault: `not-recovered` when no acknowledged send was invoked after a fault
    (the stats carry every fault's FaultRecovery as a dict, and the RTO distribution)."""
    rs = recoveries(events, gap_ms=gap_ms, group_ms=group_ms)
    violations = [Violation("not-recovered", f"{r.fault.kind} of {','.join(r.fault.nodes)} at {r.fault.start_ms:.0f} ms: "
                            f"{r.rto_send_reason}", r.fault.nodes[0] if r.fault.nodes else None, r.fault.seq,
                            r.fault.start_ms, {"kind": r.fault.kind, "nodes": list(r.fault.nodes)})
                  for r in rs if r.rto_send_ms is None]
    rtos = sorted(r.rto_send_ms for r in rs if r.rto_send_ms is not None)
    stats = {"faults": len(rs), "recovered": len(rtos), "not_recovered": len(rs) - len(rtos),
             "rto_send_max_ms": rtos[-1] if rtos else None,
             "unavailable_ms": sum(r.unavailable_ms for r in rs),
             "per_fault": [r.to_dict() for r in rs]}
    return result("recovery", violations, stats)


def check_queue_order(events: Iterable[TraceEvent], *, topic: str | None = None) -> CheckResult:
    """Per queue (broker name, queue id): the acknowledged sends of each producer, taken in the
    order they were acknowledged (a sync producer sends one at a time), must sit in the queue at
    increasing offsets as read back (`pull` / `consume`). `out-of-order` names a message read
    at an offset below one acknowledged before it was sent."""
    ops = client_ops(list(events))
    where: dict[str, tuple] = {}   # uniq_key -> (broker_name, queue_id, queue_offset) as read
    for op in ops:
        for m in messages_read(op):
            if (topic is None or m.get("topic") == topic) and m.get("uniq_key") and m.get("queue_offset") is not None:
                where.setdefault(m["uniq_key"], (m.get("broker_name"), m.get("queue_id"), m["queue_offset"]))
    violations: list[Violation] = []
    last: dict[tuple, tuple[int, ClientOp]] = {}   # (producer, broker, queue) -> highest offset so far
    checked = 0
    for op in _acked_sends(ops):
        key = op.invoke_value.get("uniq_key") if isinstance(op.invoke_value, dict) else None
        if key not in where or (topic is not None and op.invoke_value.get("topic") != topic):
            continue
        broker, queue, offset = where[key]
        broker = broker or op.value.get("broker_name")
        q = (op.node, broker, queue)
        checked += 1
        if q in last and offset < last[q][0]:
            ahead_offset, ahead = last[q]
            if ahead.complete_time_ms <= op.invoke_time_ms:
                violations.append(Violation(
                    "out-of-order", f"{broker} queue {queue}: {key} (acknowledged at seq {op.complete_seq}) read at "
                    f"offset {offset}, below offset {ahead_offset} of {ahead.invoke_value.get('uniq_key')} "
                    "acknowledged before it was sent", op.node, op.complete_seq, op.complete_time_ms,
                    {"broker_name": broker, "queue_id": queue, "uniq_key": key, "queue_offset": offset,
                     "ahead": {"uniq_key": ahead.invoke_value.get("uniq_key"), "queue_offset": ahead_offset}}))
                continue
        if q not in last or offset > last[q][0]:
            last[q] = (offset, op)
    return result("queue-order", violations, {"checked": checked, "queues": len({q[1:] for q in last}),
                                              "out_of_order": len(violations)})


def duplicated_per_reader(events: Iterable[TraceEvent], *, topic: str | None = None) -> dict[str, int]:
    """reader node -> how many messages (UNIQ_KEY) it read more than once (OpenChaos's duplicate
    count: at-least-once redelivery seen by one consumer; a final drain reading again what a live
    consumer already had is not a duplicate)."""
    seen: dict[str, dict[str, int]] = {}
    for op in client_ops(list(events)):
        found = messages_read(op)
        if not found:
            continue
        counts = seen.setdefault(op.node, {})
        for m in found:
            if (topic is None or m.get("topic") == topic) and m.get("uniq_key"):
                counts[m["uniq_key"]] = counts.get(m["uniq_key"], 0) + 1
    return {node: sum(1 for n in counts.values() if n > 1) for node, counts in seen.items()}
