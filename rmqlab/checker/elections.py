"""What triggered each election of the controllers, from the trace.

The election triggers a.i-c are those of the article "一文详解 RocketMQ 如何利用 Raft 进行高可用保障"
("3S 算法"); RocketMQ's code paths for them: ControllerManager.onBrokerInactive (a.i),
ReplicasInfoManager.scanNeedReelectBrokerSets (a.ii), the broker's ReplicasManager.brokerElect after
a CONTROLLER_GET_REPLICA_INFO poll (b.i) or its registration (b.ii), and mqadmin electMaster (c).
Each cause is read from a typed event (controller.master_inactive, controller.need_reelect, the
remoting frames of requests 1002 / 1003 / 1004), never from a log line's text. The lab figures
(rmqlab.viz.controller) display what `elections` returns.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from rmqlab.checker.checkers import SyncStatePoint, sync_state_history
from rmqlab.remoting.request_code import RequestCode
from rmqlab.trace import TraceEvent

_ELECT_MASTER = int(RequestCode.CONTROLLER_ELECT_MASTER)
_REGISTER_BROKER = int(RequestCode.CONTROLLER_REGISTER_BROKER)
_GET_REPLICA_INFO = int(RequestCode.CONTROLLER_GET_REPLICA_INFO)

# "一文详解 RocketMQ 如何利用 Raft 进行高可用保障" (“3S 算法”): what may start an election, with the
# article's own picture of each.
TRIGGERS = {
    "a.i": "control plane: the HeartbeatManager saw a broker's heartbeat lapse (班主任发现有小组同学退学了)",
    "a.ii": "control plane: a SyncStateSet without a live master (班主任发现有组长虽然在名册里，但是旷课了)",
    "b.i": "data plane: a broker polling the controller found no master and nominated itself (问班主任为啥没小组长)",
    "b.ii": "data plane: a broker registered, found no master and nominated itself (同学报道后发现没小组长，汇报并自荐)",
    "c": "operations: mqadmin electMaster (校长直接任命)",
    "register": "a recorded master registered again as a new incarnation: taken as gone (rmqlab deviation)",
}


@dataclass(frozen=True)
class Election:
    """An ElectMasterEvent of the log and the trace event that caused it."""

    index: int
    time_ms: float
    broker_set: str
    new_master: int | None       # None: nobody could be elected (the old master is recorded as gone)
    master_epoch: int            # the set's masterEpoch after the event
    writer: str
    trigger: str | None          # a key of TRIGGERS; None if the trace shows no cause
    cause: TraceEvent | None
    requested_by: str | None     # the node whose request it was (a broker, or the admin client)
    retry: int = 0               # > 0: the controller's retry of a failed election (electMasterMaxRetryCount)


def raft_leaders(events: Iterable[TraceEvent]) -> dict[int, list[str]]:
    """term -> the controllers that became LEADER in it (Raft's Election Safety: at most one)."""
    out: dict[int, list[str]] = {}
    for e in events:
        if e.kind == "role" and e.fields.get("component") == "raft" and e.fields.get("to") == "LEADER":
            nodes = out.setdefault(int(e.fields.get("term") or 0), [])
            if e.node not in nodes:
                nodes.append(e.node)
    return out


def _leader_nodes(events: Sequence[TraceEvent]) -> dict[int, str]:
    return {term: nodes[0] for term, nodes in raft_leaders(events).items() if len(nodes) == 1}


@dataclass(frozen=True)
class _Entry:
    """An ElectMasterEvent of the replicated log: its first application (`controller.event`) and
    the controller that applied it first."""

    event: TraceEvent
    first_node: str


def _elect_entries(events: Iterable[TraceEvent]) -> list[_Entry]:
    """The applied ElectMasterEvents of the controllers' log in log order (index, position), one per
    place in the log however many controllers applied it."""
    first: dict[tuple[int, int], TraceEvent] = {}
    for e in events:
        if e.kind == "controller.event":
            first.setdefault((e.fields["index"], e.fields.get("position", 0)), e)
    return [_Entry(e, e.node) for _, e in sorted(first.items())
            if e.fields["event"] == "ElectMasterEvent" and e.fields["applied"]]


def _cause_kind(e: TraceEvent, broker_set: str, master: int | None) -> str | None:
    """What `e`, seen by the leader, makes it elect a master of `broker_set` whose recorded master
    is `master` (None: nothing)."""
    if e.kind == "controller.master_inactive":
        return "a.i" if e.fields["broker_set"] == broker_set and e.fields["broker_id"] == master else None
    if e.kind == "controller.need_reelect":
        return "a.ii" if e.fields["broker_set"] == broker_set else None
    if e.kind == "frame.recv" and e.fields.get("proto") == "remoting" and not e.fields.get("flag", 0) & 1:
        ext = e.fields.get("ext_fields") or {}
        if ext.get("brokerName") != broker_set:
            return None
        if e.fields.get("code") == _ELECT_MASTER:
            return "c" if str(ext.get("designateElect")).lower() == "true" else "b"
        if e.fields.get("code") == _REGISTER_BROKER and master is not None and ext.get("brokerId") == str(master):
            return "register"
    return None


def elections(events: Sequence[TraceEvent]) -> list[Election]:
    """Every ElectMasterEvent of the log with its trigger (`TRIGGERS`), read from the
    trace: the latest cause the writing leader saw after the set's previous election and before it
    applied this one. A cause is a CONTROLLER_ELECT_MASTER request (designateElect: the admin, c;
    otherwise a broker nominating itself right after registering, b.ii, or after a
    CONTROLLER_GET_REPLICA_INFO poll, b.i), the leader's controller.master_inactive event for the
    recorded master (its heartbeat or channel lost, a.i), its controller.need_reelect event
    (a.ii), or a CONTROLLER_REGISTER_BROKER of the recorded master. A controller-triggered election
    that found nobody is retried (electMasterMaxRetryCount): those retries name the same cause."""
    events = list(events)
    leader_of = _leader_nodes(events)
    applied_at: dict[tuple[str, int], int] = {}  # (node, index) -> position of its first controller.event there
    for i, e in enumerate(events):
        if e.kind == "controller.event":
            applied_at.setdefault((e.node, e.fields["index"]), i)
    before: dict[str, SyncStatePoint] = {}  # broker set -> its state before the entry at hand
    after = {}
    for p in sync_state_history(events):
        after[(p.index, p.broker_set)] = (before.get(p.broker_set), p)
        before[p.broker_set] = p
    last: dict[str, tuple[int, Election]] = {}  # broker set -> (position of the writer's apply, election)
    out = []
    for entry in _elect_entries(events):
        f = entry.event.fields
        index, broker_set, writer = f["index"], f.get("broker_set"), f["writer"]
        prev_point, point = after[(index, broker_set)]
        writer_node = leader_of.get(f["term"], entry.first_node)
        until = applied_at.get((writer_node, index), len(events))
        since, previous = last.get(broker_set, (-1, None))
        cause, trigger, at = None, None, None
        for i in range(until - 1, since, -1):
            if events[i].node == writer_node:
                trigger = _cause_kind(events[i], broker_set, prev_point.master if prev_point else None)
                if trigger is not None:
                    cause, at = events[i], i
                    break
        body = f.get("body") or {}
        new_master = body.get("newMasterBrokerId") if body.get("newMasterElected") else None
        if cause is None and previous is not None and previous.trigger in ("a.i", "a.ii") \
                and previous.new_master is None and previous.writer == writer:
            election = Election(index, entry.event.time_ms, broker_set, new_master, point.master_epoch,
                                writer, previous.trigger, previous.cause, None, previous.retry + 1)
        else:
            requested_by = None
            if cause is not None and cause.kind == "frame.recv":
                request_at = _request_frame(events, at)
                requested_by = events[request_at].node if request_at is not None else None
                if trigger == "b":
                    trigger = _broker_trigger(events, request_at)
            election = Election(index, entry.event.time_ms, broker_set, new_master, point.master_epoch,
                                writer, trigger, cause, requested_by)
        last[broker_set] = (until, election)
        out.append(election)
    return out


def _request_frame(events: Sequence[TraceEvent], recv_at: int) -> int | None:
    """Where the frame.send is that the frame.recv at `recv_at` received: the same request code,
    opaque and header fields, earlier in the trace."""
    recv = events[recv_at].fields
    for i in range(recv_at - 1, -1, -1):
        f = events[i].fields
        if (events[i].kind == "frame.send" and f.get("code") == recv.get("code") and f.get("opaque") == recv.get("opaque")
                and f.get("ext_fields") == recv.get("ext_fields")):
            return i
    return None


def _broker_trigger(events: Sequence[TraceEvent], request_at: int | None) -> str | None:
    """b.ii if the nominating broker's previous controller request was its registration, b.i if it
    was a replica-info poll."""
    if request_at is None:
        return None
    node = events[request_at].node
    for i in range(request_at - 1, -1, -1):
        e = events[i]
        if (e.node == node and e.kind == "frame.send" and not e.fields.get("flag", 0) & 1
                and e.fields.get("code") in (_REGISTER_BROKER, _GET_REPLICA_INFO)):
            return "b.ii" if e.fields["code"] == _REGISTER_BROKER else "b.i"
    return None


__all__ = ["TRIGGERS", "Election", "elections", "raft_leaders"]
