"""client_ops: the Jepsen-style history of client operations in a trace.

Clients emit `client` events the way Jepsen records operations: an ``invoke`` when an operation
starts, then one completion with the same node, process and op_id — ``ok`` (it happened),
``fail`` (it certainly did not happen) or ``info`` (unknown: a timeout, a lost connection).
Checkers work on operations, not events, so `client_ops` pairs each invoke with its completion.

An operation whose completion never appears in the trace (the client was killed, the run ended)
is indeterminate, exactly like an explicit ``info``: it may or may not have taken effect, at any
time after its invoke. It is returned with ``type == "info"`` and ``complete_time_ms is None``.
A node's ``node.start`` begins a new incarnation, which numbers its operations anew: the ops the
previous incarnation left pending stay indeterminate, and its op ids may be used again.

Works on one tracer's events and on `merge_traces` output (the ``_src``/``_src_seq`` fields that
merging adds belong to the trace tooling and are not checked against the catalog).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from rmqlab.trace.event import TraceEvent
from rmqlab.trace.kinds import kind_spec


@dataclass(frozen=True)
class ClientOp:
    """One client operation: invoke and completion. `invoke_value` is the argument, `value` the
    result reported on completion (None when none, or when it never completed)."""

    node: str
    process: int
    op_id: int
    f: str
    type: str  # "ok", "fail" or "info"
    invoke_value: Any
    value: Any
    error: Any
    invoke_time_ms: float
    complete_time_ms: float | None  # None: never completed
    invoke_seq: int
    complete_seq: int | None
    incarnation: int = 0  # how many node.start events of this node came before the last (0: the first run)

    @property
    def indeterminate(self) -> bool:
        """True when the operation may or may not have taken effect (info, or never completed)."""
        return self.type == "info"


def client_ops(events: Iterable[TraceEvent]) -> list[ClientOp]:
    """Pair the `client` events of `events` by (node, process, op_id) into operations, in invoke
    order, within each incarnation of a node (see the module docstring). Other kinds are ignored. ValueError, naming the event's node and seq, for a client event
    that does not fit the catalog, a completion without an invoke, a second invoke of a pending
    operation, or a completion whose f differs from its invoke's."""
    spec = kind_spec("client")
    # (invoke, completion or None) per operation, in invoke order; `pending` maps an operation's
    # key to its slot until it completes (a key may be reused after that).
    slots: list[tuple[TraceEvent, TraceEvent | None]] = []
    pending: dict[tuple[str, int, int], int] = {}
    incarnation: dict[int, int] = {}  # slot -> incarnation of its node
    starts: dict[str, int] = {}  # node -> node.start events seen
    for event in events:
        if event.kind == "node.start":
            starts[event.node] = starts.get(event.node, 0) + 1
            for key in [k for k in pending if k[0] == event.node]:
                del pending[key]  # left pending by the previous incarnation: indeterminate
            continue
        if event.kind != "client":
            continue
        where = f"client event {event.node} seq {event.seq}"
        try:
            spec.validate({k: v for k, v in event.fields.items() if not k.startswith("_")})
        except ValueError as e:
            raise ValueError(f"{where}: {e}") from None
        f = event.fields
        key = (event.node, f["process"], f["op_id"])
        where += f" (process {key[1]}, op_id {key[2]})"
        if f["type"] == "invoke":
            if key in pending:
                raise ValueError(f"{where}: invoked again while the first invoke is pending")
            pending[key] = len(slots)
            incarnation[len(slots)] = max(starts.get(event.node, 1) - 1, 0)
            slots.append((event, None))
            continue
        slot = pending.pop(key, None)
        if slot is None:
            raise ValueError(f"{where}: {f['type']} without a pending invoke")
        invoke = slots[slot][0]
        if invoke.fields["f"] != f["f"]:
            raise ValueError(f"{where}: completes f={f['f']!r} but was invoked as f={invoke.fields['f']!r}")
        slots[slot] = (invoke, event)
    return [_op(invoke, completion, incarnation[i]) for i, (invoke, completion) in enumerate(slots)]


def _op(invoke: TraceEvent, completion: TraceEvent | None, incarnation: int) -> ClientOp:
    fi = invoke.fields
    fc = completion.fields if completion is not None else {}
    return ClientOp(
        node=invoke.node, process=fi["process"], op_id=fi["op_id"], f=fi["f"],
        type=fc.get("type", "info"), invoke_value=fi["value"], value=fc.get("value"),
        error=fc.get("error"), invoke_time_ms=invoke.time_ms,
        complete_time_ms=None if completion is None else completion.time_ms,
        invoke_seq=invoke.seq, complete_seq=None if completion is None else completion.seq,
        incarnation=incarnation,
    )


def messages_read(op: ClientOp) -> list[dict]:
    """The messages a completed read handed to its client: a remoting `pull`'s or a 5.x `receive`'s
    answer, or the one message a `consume` passed to the listener; [] for anything else."""
    if op.type != "ok":
        return []
    if op.f in ("pull", "receive") and isinstance(op.value, dict):
        return [m for m in op.value.get("messages") or [] if isinstance(m, dict)]
    if op.f == "consume" and isinstance(op.invoke_value, dict):
        return [op.invoke_value]
    return []
