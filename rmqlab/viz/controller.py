"""The controller, from the trace (lab 02): the controllers' Raft roles and terms, the
replicated event log and the metadata tables it builds, the SyncStateSet over time, and what
triggered each election.

RIP-44 as RocketMQ's docs give it ("DLedgerController core design", "Consistent metadata",
"Event"; the "主备自动切换模式部署" page) and the article
"一文详解 RocketMQ 如何利用 Raft 进行高可用保障" ("Raft In Controller", "3S Algorithm", the
election triggers a.i-c). Everything here reads only the
event trace (`Cluster.events()`, schema in datasets/README.md):

* `raft` and `role` (component raft) events of the controllers: who leads, in which term;
* `controller.event`: every entry a controller applies from the Raft log, with its index, its
  writer and the writer's term (the RIP-44 event as stored, or OpenTerm);
* the election triggers, as rmqlab.checker.elections classifies them (from the typed
  controller.master_inactive / controller.need_reelect events and the `frame.*` events of remoting
  requests 1002 / 1003 / 1004).

The metadata tables are rebuilt by replaying the logged events through rmqlab's own state machine
(`ReplicasInfoManager.apply_event`), exactly as a controller rebuilds them from its journal; the
SyncStateSet over time is the election checker's independent replay of the same log
(rmqlab.checker.checkers.sync_state_history), and the two agree. Static figures are `go.Figure`s
(deterministic for a seed); `ControllerView` redraws FigureWidgets in place.
"""

from __future__ import annotations

import html
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import plotly.graph_objects as go
from plotly.subplots import make_subplots

from rmqlab.checker.checkers import broker_id_nodes, sync_state_history
# Election triggers are classified by the checker; this module displays them, and re-exports the
# names the labs import from here.
from rmqlab.checker.elections import TRIGGERS, Election, elections, raft_leaders  # noqa: F401
from rmqlab.config.controller import ControllerConfig
from rmqlab.controller.impl.event.event_serializer import EVENT_CLASSES
from rmqlab.controller.impl.event.event_type import EventType
from rmqlab.controller.impl.manager.replicas_info_manager import ReplicasInfoManager
from rmqlab.trace.event import TraceEvent
from rmqlab.viz.figure_widgets import redraw
from rmqlab.viz.timeaxis import time_axis

RAFT_STATES = ("LEADER", "CANDIDATE", "FOLLOWER", "suspended", "down")
STATE_COLORS = {"LEADER": "#d62728", "CANDIDATE": "#ff7f0e", "FOLLOWER": "#1f77b4", "suspended": "#9467bd",
                "down": "#c7c7c7"}
OPEN_TERM = "OpenTerm"
_DOWN = ("node.kill", "node.crash", "node.stop")
_EVENT_TYPES = {t.event_name: t for t in EventType}
# Remoting request codes of the broker-controller protocol (RIP-44 "New RequestCode").
_ELECT_MASTER, _REGISTER_BROKER = 1002, 1003

def _t0(events: Sequence[TraceEvent]) -> float:
    """x = 0 of the run's one time axis (rmqlab.viz.timeaxis): every figure of a run shares it."""
    return time_axis(events).origin_ms


def _end(events: Sequence[TraceEvent], end_ms: float | None) -> float:
    return end_ms if end_ms is not None else (events[-1].time_ms if events else 0.0)


def controller_nodes(events: Iterable[TraceEvent]) -> list[str]:
    """The nodes that run a controller (those that emit `raft` events), sorted."""
    return sorted({e.node for e in events if e.kind == "raft"})


# --- Raft roles and terms ----------------------------------------------------------------------
@dataclass(frozen=True)
class RoleSpan:
    """What a controller was from `start_ms` to `end_ms`: a Raft role, suspended or down, in `term`."""

    node: str
    start_ms: float
    end_ms: float
    state: str
    term: int | None


def raft_spans(events: Sequence[TraceEvent], end_ms: float | None = None) -> list[RoleSpan]:
    """Each controller's Raft role over time, from its `role` (component raft) and `raft` events and
    its process's node.* events; the last span of each node ends at `end_ms` (default: the last
    event's time). A controller that is up but has not reported a role yet counts as FOLLOWER
    (pysyncobj starts every replica so)."""
    nodes = set(controller_nodes(events))
    now: dict[str, dict] = {}
    spans: list[RoleSpan] = []
    open_: dict[str, tuple[float, str, int | None]] = {}

    def shown(st: dict) -> tuple[str, int | None]:
        if not st["up"]:
            return "down", st["term"]
        if st["suspended"]:
            return "suspended", st["term"]
        return st["role"] or "FOLLOWER", st["term"]

    def mark(node: str, t: float) -> None:
        state, term = shown(now[node])
        prev = open_.get(node)
        if prev is not None and (prev[1], prev[2]) == (state, term):
            return
        if prev is not None and t > prev[0]:
            spans.append(RoleSpan(node, prev[0], t, prev[1], prev[2]))
        open_[node] = (t, state, term)

    for e in events:
        if e.node not in nodes:
            continue
        st = now.setdefault(e.node, {"up": True, "suspended": False, "role": None, "term": None})
        if e.kind == "node.start":
            st["up"] = True
        elif e.kind in _DOWN:
            st.update(up=False, suspended=False, role=None)
        elif e.kind in ("node.suspend", "node.resume"):
            st["suspended"] = e.kind == "node.suspend"
        elif e.kind == "role" and e.fields.get("component") == "raft":
            st.update(up=True, role=e.fields["to"], term=e.fields.get("term", st["term"]))
        elif e.kind == "raft":
            st["term"] = e.fields["term"]
        else:
            continue
        mark(e.node, e.time_ms)
    end = _end(events, end_ms)
    for node, (start, state, term) in open_.items():
        if end > start:
            spans.append(RoleSpan(node, start, end, state, term))
    return sorted(spans, key=lambda s: (s.node, s.start_ms))


def raft_status(events: Sequence[TraceEvent]) -> dict[str, dict]:
    """controller -> {"state", "term", "leader", "applied"}: now. `leader` is the leader it knows of
    (its controllerDLegerSelfId, from its last `raft` event), `applied` the highest Raft index it
    applied (from its controller.event)."""
    spans = raft_spans(events)
    out: dict[str, dict] = {n: {"state": "FOLLOWER", "term": None, "leader": None, "applied": None}
                            for n in controller_nodes(events)}
    for s in spans:
        out[s.node].update(state=s.state, term=s.term)
    for e in events:
        if e.node not in out:
            continue
        if e.kind == "raft":
            out[e.node]["leader"] = e.fields.get("leader")
        elif e.kind == "controller.event":
            applied = out[e.node]["applied"]
            out[e.node]["applied"] = max(applied or 0, e.fields["index"])
    return out


def raft_text(events: Sequence[TraceEvent]) -> str:
    """One line per controller (state, term, the leader it knows, last applied index) and the
    leader of every term so far."""
    lines = [f"{'controller':<15}{'state':<11}{'term':>5}  {'knows leader':<13}{'applied up to':>13}"]
    for node, st in raft_status(events).items():
        term = "-" if st["term"] is None else st["term"]
        applied = "-" if st["applied"] is None else st["applied"]
        lines.append(f"{node:<15}{st['state']:<11}{term:>5}  {st['leader'] or '-':<13}{applied:>13}")
    leaders = raft_leaders(events)
    lines.append("leaders by term: " + (", ".join(f"term {t}: {' and '.join(n)}" for t, n in sorted(leaders.items()))
                                        or "none yet"))
    return "\n".join(lines)


def raft_figure(events: Sequence[TraceEvent], end_ms: float | None = None, title: str | None = None) -> go.Figure:
    """Two rows: each controller's Raft role over time (bars by state; a leader's bar names its term),
    and each controller's term (a step line). x: the run's time axis (rmqlab.viz.timeaxis)."""
    t0, spans = _t0(events), raft_spans(events, end_ms)
    nodes = controller_nodes(events)
    fig = make_subplots(rows=2, cols=1, shared_xaxes=True, row_heights=[0.62, 0.38], vertical_spacing=0.08,
                        subplot_titles=("Raft role of each controller", "Raft term"))
    for state in RAFT_STATES:
        mine = [s for s in spans if s.state == state]
        fig.add_trace(go.Bar(
            name=state, orientation="h", y=[s.node for s in mine], base=[(s.start_ms - t0) / 1000 for s in mine],
            x=[(s.end_ms - s.start_ms) / 1000 for s in mine], marker_color=STATE_COLORS[state],
            text=[f"term {s.term}" if state == "LEADER" else "" for s in mine], textposition="inside", insidetextanchor="start", textangle=0,
            customdata=[[s.term if s.term is not None else "-"] for s in mine],
            hovertemplate="%{y}: " + state + ", term %{customdata[0]}<br>from %{base:.1f} s for %{x:.1f} s"
                          "<extra></extra>"), row=1, col=1)
    for node in nodes:
        mine = [s for s in spans if s.node == node and s.term is not None]
        xs = [(s.start_ms - t0) / 1000 for s in mine] + ([(mine[-1].end_ms - t0) / 1000] if mine else [])
        ys = [s.term for s in mine] + ([mine[-1].term] if mine else [])
        fig.add_trace(go.Scatter(name=f"term {node}", x=xs, y=ys, mode="lines", line_shape="hv",
                                 showlegend=False, hovertemplate=node + ": term %{y} at %{x:.1f} s<extra></extra>"),
                      row=2, col=1)
    fig.update_layout(barmode="overlay", height=420, title=title, legend_orientation="h", legend_y=-0.18,
                      uniformtext_minsize=9, uniformtext_mode="hide", margin=dict(l=10, r=10, t=60 if title else 40, b=10))
    fig.update_yaxes(categoryorder="array", categoryarray=list(reversed(nodes)), row=1, col=1)
    fig.update_yaxes(title_text="term", rangemode="tozero", dtick=1, row=2, col=1)
    fig.update_xaxes(title_text=time_axis(events).label, row=2, col=1)
    return fig


# --- the replicated event log ------------------------------------------------------------------
@dataclass(frozen=True)
class LogEntry:
    """One event of the controllers' replicated log (or an OpenTerm entry): at Raft `index`, its
    `position` among the entry's events, written by leader `writer` in `term`. `time_ms` is when
    the first controller applied it, `applied_on` who did (in that order)."""

    index: int
    position: int
    term: int
    writer: str
    event: str
    broker_set: str | None
    body: dict | None
    applied: bool
    time_ms: float
    applied_on: tuple[str, ...]


def event_log(events: Iterable[TraceEvent]) -> list[LogEntry]:
    """The replicated log from the controllers' `controller.event`s, in log order (index, position),
    one row per event however many replicas applied it. What a replica applies at an index is what
    the others apply there (Raft's Log Matching); `log_conflicts` checks it."""
    first: dict[tuple[int, int], TraceEvent] = {}
    on: dict[tuple[int, int], list[str]] = {}
    for e in events:
        if e.kind != "controller.event":
            continue
        key = (e.fields["index"], e.fields.get("position", 0))
        first.setdefault(key, e)
        nodes = on.setdefault(key, [])
        if e.node not in nodes:
            nodes.append(e.node)
    return [LogEntry(index, position, e.fields["term"], e.fields["writer"], e.fields["event"],
                     e.fields.get("broker_set"), e.fields.get("body"), e.fields["applied"], e.time_ms,
                     tuple(on[(index, position)]))
            for (index, position), e in sorted(first.items())]


def log_conflicts(events: Iterable[TraceEvent]) -> list[tuple[int, int, str, str]]:
    """(index, position, node, other node) wherever two controllers applied different entries at the
    same place of the log; empty when the replicas agree, as Raft promises."""
    seen: dict[tuple[int, int], tuple[str, tuple]] = {}
    out = []
    for e in events:
        if e.kind != "controller.event":
            continue
        f = e.fields
        key = (f["index"], f.get("position", 0))
        content = (f["event"], f["term"], f["writer"], f["applied"], repr(sorted((f.get("body") or {}).items())))
        if key not in seen:
            seen[key] = (e.node, content)
        elif seen[key][1] != content:
            out.append((*key, e.node, seen[key][0]))
    return out


def _ids(values) -> str:
    return "{" + ", ".join(str(v) for v in sorted(values or [])) + "}"


def describe_entry(entry: LogEntry) -> str:
    """What the entry does to the metadata, in a few words."""
    b = entry.body or {}
    if entry.event == OPEN_TERM:
        return f"leader {entry.writer} opens term {entry.term}"
    if entry.event == "ApplyBrokerIdEvent":
        return f"brokerId {b.get('newBrokerId')} := {b.get('brokerAddress')}"
    if entry.event == "ElectMasterEvent":
        if b.get("newMasterElected"):
            return f"master := {b.get('newMasterBrokerId')}, SyncStateSet := {{{b.get('newMasterBrokerId')}}}"
        return "master := none (the old one is gone)"
    if entry.event == "AlterSyncStateSetEvent":
        return f"SyncStateSet := {_ids(b.get('newSyncStateSet'))}"
    if entry.event == "CleanBrokerDataEvent":
        ids = b.get("brokerIdSetToClean")
        return "forget the whole set" if not ids else f"forget brokerIds {_ids(ids)}"
    if entry.event == "UpdateBrokerAddressEvent":
        return f"brokerId {b.get('brokerId')} address := {b.get('brokerAddress')}"
    return entry.event


def event_log_rows(events: Iterable[TraceEvent], broker_set: str | None = None,
                   include_open_term: bool = True) -> list[dict]:
    """The log as plain rows (for a table): index, term, writer, event, broker set, what it does,
    applied (False: fenced), time (s on the run's time axis), and the controllers that applied it."""
    events = list(events)
    t0 = _t0(events)
    rows = []
    for entry in event_log(events):
        if entry.event == OPEN_TERM and not include_open_term:
            continue
        if broker_set is not None and entry.broker_set not in (None, broker_set):
            continue
        rows.append({"index": entry.index, "term": entry.term, "writer": entry.writer, "event": entry.event,
                     "broker_set": entry.broker_set or "", "does": describe_entry(entry), "applied": entry.applied,
                     "time_s": round((entry.time_ms - t0) / 1000, 3), "applied_on": list(entry.applied_on)})
    return rows


def event_log_text(events: Iterable[TraceEvent], broker_set: str | None = None, *, since_index: int = 0,
                   include_open_term: bool = True) -> str:
    """The log as a text table (what a notebook prints and nbval compares)."""
    rows = [r for r in event_log_rows(events, broker_set, include_open_term) if r["index"] >= since_index]
    lines = [f"{'index':>5} {'term':>4} {'writer':<6} {'t (s)':>7}  {'event':<24}{'broker set':<11}"
             f"{'what it does':<44}applied on"]
    for r in rows:
        on = " ".join(n.rsplit("-", 1)[-1] for n in r["applied_on"]) + ("" if r["applied"] else "  (fenced)")
        lines.append(f"{r['index']:>5} {r['term']:>4} {r['writer']:<6} {r['time_s']:>7.1f}  {r['event']:<24}"
                     f"{r['broker_set']:<11}{r['does']:<44}{on}")
    return "\n".join(lines)


def event_log_figure(events: Iterable[TraceEvent], broker_set: str | None = None) -> go.Figure:
    """The log as a plotly table."""
    rows = event_log_rows(events, broker_set)
    columns = [("index", "index"), ("term", "term"), ("writer", "writer"), ("time_s", "t (s)"), ("event", "event"),
               ("broker_set", "broker set"), ("does", "what it does"), ("applied_on", "applied on")]
    cells = [[(" ".join(r[k]) if k == "applied_on" else r[k]) for r in rows] for k, _ in columns]
    fig = go.Figure(go.Table(header=dict(values=[label for _, label in columns], align="left"),
                             cells=dict(values=cells, align="left"),
                             columnwidth=[5, 4, 5, 6, 18, 9, 30, 20]))
    fig.update_layout(height=min(80 + 24 * len(rows), 520), margin=dict(l=10, r=10, t=10, b=10))
    return fig


# --- the metadata tables, rebuilt from the log ----------------------------------------------------
def _event_object(entry: LogEntry):
    return EVENT_CLASSES[_EVENT_TYPES[entry.event]].from_json_dict(entry.body)


def replay(events: Iterable[TraceEvent], upto_index: int | None = None) -> ReplicasInfoManager:
    """A ReplicasInfoManager fed the logged events (applied ones, up to `upto_index`) in log order:
    the tables every controller holds after applying that prefix of the log."""
    manager = ReplicasInfoManager(ControllerConfig())
    for entry in event_log(events):
        if upto_index is not None and entry.index > upto_index:
            break
        if entry.applied and entry.event != OPEN_TERM:
            manager.apply_event(_event_object(entry))
    return manager


def metadata_rows(manager: ReplicasInfoManager) -> tuple[list[dict], list[dict]]:
    """(replicaInfoTable rows, syncStateSetInfoTable rows), RIP-44's two tables ("Consistent
    metadata")."""
    replicas, syncs = [], []
    for name in sorted(manager.replica_info_table):
        info = manager.replica_info_table[name]
        for broker_id, address in info.get_broker_id_table().items():
            replicas.append({"broker_set": name, "cluster": info.cluster_name, "broker_id": broker_id,
                             "address": address, "next_assign_broker_id": info.next_assign_broker_id})
    for name in sorted(manager.sync_state_set_info_table):
        s = manager.sync_state_set_info_table[name]
        syncs.append({"broker_set": name, "master_broker_id": s.master_broker_id, "master_epoch": s.master_epoch,
                      "sync_state_set": sorted(s.sync_state_set), "sync_state_set_epoch": s.sync_state_set_epoch})
    return replicas, syncs


def metadata_text(events: Iterable[TraceEvent], upto_index: int | None = None) -> str:
    """Both tables after replaying the log (up to `upto_index`), as text."""
    replicas, syncs = metadata_rows(replay(events, upto_index))
    lines = ["replicaInfoTable (brokerName -> BrokerReplicaInfo)",
             f"  {'broker set':<11}{'brokerId':>8}  {'address':<18}{'nextAssignBrokerId':>18}"]
    lines += [f"  {r['broker_set']:<11}{r['broker_id']:>8}  {r['address']:<18}{r['next_assign_broker_id']:>18}"
              for r in replicas]
    lines += ["syncStateSetInfoTable (brokerName -> SyncStateInfo)",
              f"  {'broker set':<11}{'master':>6}{'masterEpoch':>12}  {'syncStateSet':<14}{'syncStateSetEpoch':>17}"]
    lines += [f"  {s['broker_set']:<11}{'-' if s['master_broker_id'] is None else s['master_broker_id']:>6}"
              f"{s['master_epoch']:>12}  {_ids(s['sync_state_set']):<14}{s['sync_state_set_epoch']:>17}"
              for s in syncs]
    return "\n".join(lines)


# --- the SyncStateSet over time ------------------------------------------------------------------
# sync_state_history and broker_nodes are the checker's (rmqlab.checker.checkers), so the figures
# show what check_elections judges.
broker_nodes = broker_id_nodes


def sync_state_figure(events: Sequence[TraceEvent], broker_set: str = "broker-a", end_ms: float | None = None,
                      title: str | None = None) -> go.Figure:
    """Two rows: each replica of `broker_set` over time as the controllers record it (master, in
    the SyncStateSet, or only registered; replayed from their log), with its process's kills,
    crashes and restarts marked; and the set's masterEpoch and syncStateSetEpoch (step lines)."""
    t0, end = _t0(events), _end(events, end_ms)
    points = sync_state_history(events, broker_set)
    names = broker_nodes(events)
    ids = sorted({i for p in points for i in p.broker_ids})
    label = {i: f"brokerId {i}" + (f" ({names[(broker_set, i)]})" if (broker_set, i) in names else "") for i in ids}
    spans: dict[str, list[list]] = {"master": [], "in SyncStateSet": [], "registered": []}
    current: dict[int, list] = {}  # id -> its open span [what, id, start, stop, epoch]
    for k, p in enumerate(points):
        stop = points[k + 1].time_ms if k + 1 < len(points) else end
        for i in p.broker_ids:
            what = "master" if i == p.master else "in SyncStateSet" if i in p.sync_state_set else "registered"
            span = current.get(i)
            if span is not None and span[0] == what and span[4] == (p.master_epoch if what == "master" else None) \
                    and span[3] == p.time_ms:
                span[3] = stop
                continue
            current[i] = [what, i, p.time_ms, stop, p.master_epoch if what == "master" else None]
            spans[what].append(current[i])
    colors = {"master": "#d62728", "in SyncStateSet": "#2ca02c", "registered": "#c7c7c7"}
    fig = make_subplots(rows=2, cols=1, shared_xaxes=True, row_heights=[0.62, 0.38], vertical_spacing=0.08,
                        subplot_titles=(f"{broker_set}: each replica as the controllers record it", "epochs"))
    for what, mine in spans.items():
        mine = [s for s in mine if s[3] > s[2]]
        fig.add_trace(go.Bar(
            name=what, orientation="h", y=[label[s[1]] for s in mine], base=[(s[2] - t0) / 1000 for s in mine],
            x=[(s[3] - s[2]) / 1000 for s in mine], marker_color=colors[what],
            text=[f"epoch {s[4]}" if s[4] is not None else "" for s in mine], textposition="inside", insidetextanchor="start", textangle=0,
            hovertemplate="%{y}: " + what + "<br>from %{base:.1f} s for %{x:.1f} s<extra></extra>"), row=1, col=1)
    node_ids = {node: i for (name, i), node in names.items() if name == broker_set and i in label}
    for kinds, name, symbol in ((_DOWN, "process killed / crashed", "x"), (("node.restart",), "restarted", "triangle-up")):
        marks = [e for e in events if e.kind in kinds and e.node in node_ids]
        fig.add_trace(go.Scatter(name=name, mode="markers", x=[(e.time_ms - t0) / 1000 for e in marks],
                                 y=[label[node_ids[e.node]] for e in marks], marker=dict(symbol=symbol, size=11,
                                                                                           color="black"),
                                 hovertemplate="%{y}: " + name + " at %{x:.1f} s<extra></extra>"), row=1, col=1)
    for field, name in (("master_epoch", "masterEpoch"), ("sync_state_set_epoch", "syncStateSetEpoch")):
        xs = [(p.time_ms - t0) / 1000 for p in points] + ([(end - t0) / 1000] if points else [])
        ys = [getattr(p, field) for p in points] + ([getattr(points[-1], field)] if points else [])
        fig.add_trace(go.Scatter(name=name, x=xs, y=ys, mode="lines", line_shape="hv",
                                 hovertemplate=name + " %{y} from %{x:.1f} s<extra></extra>"), row=2, col=1)
    fig.update_layout(barmode="overlay", height=400, title=title, legend_orientation="h", legend_y=-0.2,
                      uniformtext_minsize=9, uniformtext_mode="hide", margin=dict(l=10, r=10, t=60 if title else 40, b=10))
    fig.update_yaxes(categoryorder="array", categoryarray=[label[i] for i in reversed(ids)], row=1, col=1)
    fig.update_yaxes(title_text="epoch", rangemode="tozero", row=2, col=1)
    fig.update_xaxes(title_text=time_axis(events).label, row=2, col=1)
    return fig


# --- elections and what triggered them -----------------------------------------------------------
def elections_text(events: Sequence[TraceEvent]) -> str:
    """One line per election: when, the log index, the outcome, the trigger and its evidence."""
    t0 = _t0(events)
    lines = [f"{'t (s)':>7} {'index':>5}  {'broker set':<11}{'outcome':<22}{'trigger':<9}evidence in the trace"]
    for el in elections(events):
        outcome = (f"master {el.new_master}, epoch {el.master_epoch}" if el.new_master is not None
                   else f"no master, epoch {el.master_epoch}")
        if el.cause is None:
            evidence = "-"
        elif el.retry:
            evidence = f"retry {el.retry} of the election above (electMasterMaxRetryCount)"
        elif el.cause.kind == "controller.master_inactive":
            evidence = (f"{el.cause.node}: master {el.cause.fields['broker_id']} of {el.cause.fields['broker_set']} "
                        "inactive (onBrokerInactive)")
        elif el.cause.kind == "controller.need_reelect":
            evidence = (f"{el.cause.node}: {el.cause.fields['broker_set']} has no live master while replicas are "
                        "alive (scanNeedReelectBrokerSets)")
        else:
            code = el.cause.fields.get("code")
            name = {_ELECT_MASTER: "CONTROLLER_ELECT_MASTER", _REGISTER_BROKER: "CONTROLLER_REGISTER_BROKER"}[code]
            evidence = f"{el.cause.node} got {name} from {el.requested_by or el.cause.fields.get('peer')}"
        lines.append(f"{(el.time_ms - t0) / 1000:>7.1f} {el.index:>5}  {el.broker_set:<11}{outcome:<22}"
                     f"{el.trigger or '?':<9}{evidence}")
    return "\n".join(lines)


# --- live view ---------------------------------------------------------------------------------------
_TEXT_COLORS = {"down": "#7f7f7f"}  # the bars' light grey is unreadable as text


def status_html(events: Sequence[TraceEvent]) -> str:
    """The controllers' Raft status as a small HTML table (the live view's header)."""
    rows = "".join(
        f"<tr><td style='padding-right:1em'><b>{html.escape(node)}</b></td>"
        f"<td style='color:{_TEXT_COLORS.get(st['state'], STATE_COLORS[st['state']])};padding-right:1em'>"
        f"{st['state']}</td>"
        f"<td style='padding-right:1em'>term {st['term'] if st['term'] is not None else '-'}</td>"
        f"<td style='padding-right:1em'>knows leader {html.escape(st['leader'] or '-')}</td>"
        f"<td>applied up to index {st['applied'] if st['applied'] is not None else '-'}</td></tr>"
        for node, st in raft_status(events).items())
    return f"<table class='rmqlab-controller-table'>{rows}</table>"


class ControllerView:
    """Live figures of the controllers for a notebook: their Raft status (HTML), the Raft roles and
    terms, the SyncStateSet of `broker_set`, and the last `log_rows` entries of the replicated
    log. `update(events)` redraws everything in place from the trace (give it to
    `FaultPanel.on_change`)."""

    def __init__(self, events: Sequence[TraceEvent], broker_set: str = "broker-a", log_rows: int = 8):
        import ipywidgets as widgets

        self.broker_set, self.log_rows = broker_set, log_rows
        self.status = widgets.HTML()
        self.status.add_class("rmqlab-controller-status")
        self.roles = go.FigureWidget(raft_figure(events))
        self.sync = go.FigureWidget(sync_state_figure(events, broker_set))
        self.log = widgets.HTML()
        self.widget = widgets.VBox([self.status, self.roles, self.sync, self.log])
        self.update(events)

    def update(self, events: Sequence[TraceEvent]) -> None:
        self.status.value = status_html(events)
        redraw(self.roles, raft_figure(events))
        redraw(self.sync, sync_state_figure(events, self.broker_set))
        text = event_log_text(events)
        head, *rows = text.split("\n")
        self.log.value = ("<b>the replicated log, last entries</b><pre style='font-size:11px'>"
                          + html.escape("\n".join([head, *rows[-self.log_rows:]])) + "</pre>")
