"""The SyncStateSet and the master epochs of a broker set over time (RocketMQ's controller design
document, docs/cn/controller/design.md 「SyncStateSet 变更」, docs/en/controller/design.md
"SyncStateSet change"; AutoSwitchHAService and ReplicasManager in RocketMQ's source), read from the
trace.

Two views of the set are traced, and the figure shows both:

* what the controllers committed: the `controller.event`s they apply — an ElectMasterEvent
  (elected: master := id, masterEpoch + 1, set := {id}; not elected: no master, masterEpoch + 1)
  and an AlterSyncStateSetEvent (set := newSyncStateSet). Every controller applies every entry;
  the first application of each (Raft index, position) is when it took effect. The replay is
  rmqlab.checker.checkers.sync_state_history, the one the election checker judges.
* what the master proposed and why: its HA service's `ha.sync_state_set_change` events ("shrink":
  a slave did not catch up for haMaxTimeSlaveNotCatchup, or its connection closed; "expand": its
  ack reached the confirm offset) and the `sync_state_set` it asked for.

Broker ids are the controller's (1, 2, 3 ...); `broker_nodes` names them from the trace: the broker
that registers with the controllers under that id (checkers.broker_id_nodes). The second panel
shows each replica's written offset and the masters' confirm offset: a suspended slave's line
stands still while the master's grows, then catches up.
"""

from __future__ import annotations

import html
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import plotly.graph_objects as go
from plotly.subplots import make_subplots

from rmqlab.checker.checkers import (ALTER_SYNC_STATE_SET as ALTER, ELECT_MASTER as ELECT, SyncStatePoint,
                                     broker_id_nodes, sync_state_history)
from rmqlab.trace.event import TraceEvent
from rmqlab.viz.figure_widgets import redraw
from rmqlab.viz.timeaxis import time_axis

_DOWN = {"node.kill": "killed", "node.crash": "crashed", "node.stop": "stopped", "node.suspend": "suspended"}
_UP = ("node.start", "node.resume")
MEMBER, MASTER = "#6aa84f", "#1c4587"
NODE_COLOURS = ("#1f77b4", "#e377c2", "#ff7f0e", "#17becf", "#8c564b")  # each replica's offset line


@dataclass(frozen=True)
class Proposal:
    """A SyncStateSet change a master's HA service proposed to the controller."""

    time_ms: float
    node: str
    broker_id: int | None
    change: str                    # "shrink" or "expand"
    sync_state_set: tuple[int, ...]
    reason: str                    # why, in words


def sync_state_set_history(events: Iterable[TraceEvent], broker_set: str | None = None) -> list[SyncStatePoint]:
    """The replica info of `broker_set` (every set if None) after each election and alter."""
    return [p for p in sync_state_history(events, broker_set) if p.event in (ELECT, ALTER)]


def proposals(events: Iterable[TraceEvent]) -> list[Proposal]:
    """The masters' proposed SyncStateSet changes, in trace order."""
    return [Proposal(e.time_ms, e.node, e.fields.get("broker_id"), e.fields["change"],
                     tuple(e.fields["sync_state_set"]), e.fields["reason"])
            for e in events if e.kind == "ha.sync_state_set_change"]


def broker_nodes(events: Iterable[TraceEvent], broker_set: str | None = None) -> dict[int, str]:
    """Controller broker id -> node name, of `broker_set` (of every set if None)."""
    return {i: node for (name, i), node in broker_id_nodes(events).items() if broker_set in (None, name)}


def _fmt(ids: Iterable[int], names: dict[int, str]) -> str:
    return "{" + ", ".join(f"{i} {names[i]}" if i in names else str(i) for i in ids) + "}"


def describe_history(events: Sequence[TraceEvent], broker_set: str | None = None, since_ms: float = 0.0) -> str:
    """The committed changes and the masters' proposals, one line each, in time order."""
    names = broker_nodes(events, broker_set)
    rows: list[tuple[float, int, str]] = []
    for c in sync_state_set_history(events, broker_set):
        if c.event == ALTER:
            what = f"syncStateSetEpoch {c.sync_state_set_epoch}"
        elif c.master is not None:
            what = f"master {c.master} ({names.get(c.master, '?')}), masterEpoch {c.master_epoch}"
        else:
            what = f"no master, masterEpoch {c.master_epoch}"
        rows.append((c.time_ms, 1, f"committed  {c.event:<23} SyncStateSet {_fmt(c.sync_state_set, names)}, {what}"))
    for p in proposals(events):
        rows.append((p.time_ms, 0, f"proposed   {p.change:<23} by {p.node}: {_fmt(p.sync_state_set, names)}"))
    rows.sort(key=lambda r: (r[0], r[1]))
    return "\n".join(f"t={t / 1000:7.2f} s  {text}" for t, _, text in rows if t >= since_ms)


def _intervals(events: Iterable[TraceEvent], nodes: set[str], end_ms: float) -> list[tuple[str, str, float, float]]:
    """(node, what, start, end) for every time a node was down or suspended."""
    out, since = [], {}
    for e in events:
        if e.node not in nodes:
            continue
        if e.kind in _DOWN and e.node not in since:
            since[e.node] = (_DOWN[e.kind], e.time_ms)
        elif e.kind in _UP and e.node in since:
            what, start = since.pop(e.node)
            out.append((e.node, what, start, e.time_ms))
    out += [(node, what, start, end_ms) for node, (what, start) in since.items()]
    return out


def sync_state_set_figure(events: Sequence[TraceEvent], broker_set: str | None = None, *, offsets: bool = True,
                          title: str | None = None, since_ms: float = 0.0) -> go.Figure:
    """Who was in the committed SyncStateSet (green), who was master (blue, with its epoch), what
    the master proposed (▼ shrink, ▲ expand), when a replica was down or suspended (grey), and
    with `offsets` each replica's log end as a slave (what it appended from its master) and the
    confirm offset of each broker that was master (dotted)."""
    history = sync_state_set_history(events, broker_set)
    names = broker_nodes(events, broker_set)
    ids = sorted({i for c in history for i in c.sync_state_set} | {c.master for c in history if c.master} | set(names))
    rows = {i: r for r, i in enumerate(ids)}
    end_ms = max(events[-1].time_ms if events else 0.0, since_ms)
    fig = make_subplots(rows=2 if offsets else 1, cols=1, shared_xaxes=True, vertical_spacing=0.08,
                        row_heights=[0.45, 0.55] if offsets else [1.0])

    axis = time_axis(events)

    def s(ms: float) -> float:
        return round(axis.s(max(ms, since_ms)), 3)

    # Membership and mastership: one segment per (replica, interval between changes).
    for colour, label, pick in ((MEMBER, "in the SyncStateSet", lambda c, i: i in c.sync_state_set and i != c.master),
                                (MASTER, "master", lambda c, i: i == c.master)):
        xs, ys, texts = [], [], []
        for k, c in enumerate(history):
            stop = history[k + 1].time_ms if k + 1 < len(history) else end_ms
            if stop < since_ms:
                continue
            for i in ids:
                if pick(c, i):
                    text = (f"{names.get(i, i)} (id {i}): {label}, masterEpoch {c.master_epoch}, "
                            f"SyncStateSet {_fmt(c.sync_state_set, names)}")
                    xs += [s(c.time_ms), s(stop), None]
                    ys += [rows[i], rows[i], None]
                    texts += [text, text, ""]
        fig.add_trace(go.Scatter(x=xs, y=ys, mode="lines", name=label, line=dict(color=colour, width=14),
                                 text=texts, hoverinfo="text"), row=1, col=1)
    # The epochs, written on the master's bar where each begins.
    elections = [c for c in history if c.event == ELECT and c.master is not None and c.time_ms >= since_ms]
    fig.add_trace(go.Scatter(x=[s(c.time_ms) for c in elections], y=[rows[c.master] - 0.3 for c in elections],
                             mode="text", text=[f"epoch {c.master_epoch}" for c in elections], showlegend=False,
                             textposition="top right", textfont=dict(color=MASTER, size=10), hoverinfo="skip"),
                  row=1, col=1)
    # Faults on the replicas.
    by_node = {n: i for i, n in names.items()}
    xs, ys, texts = [], [], []
    for node, what, start, stop in _intervals(events, set(by_node), end_ms):
        if stop >= since_ms:
            xs += [s(start), s(stop), None]
            ys += [rows[by_node[node]] + 0.3] * 2 + [None]
            texts += [f"{node} {what}"] * 2 + [""]
    fig.add_trace(go.Scatter(x=xs, y=ys, mode="lines", name="down / suspended", text=texts, hoverinfo="text",
                             line=dict(color="#999999", width=4, dash="dot")), row=1, col=1)
    # The masters' proposals, on the row of each replica they would add or drop.
    for change, symbol, colour in (("shrink", "triangle-down", "#cc0000"), ("expand", "triangle-up", MEMBER)):
        xs, ys, texts = [], [], []
        for p in proposals(events):
            if p.change != change or p.time_ms < since_ms:
                continue
            confirmed = next((c.sync_state_set for c in reversed(history) if c.time_ms <= p.time_ms), ())
            for i in sorted(set(confirmed) ^ set(p.sync_state_set)):
                if i in rows:
                    xs.append(s(p.time_ms))
                    ys.append(rows[i] - 0.3)
                    texts.append(html.escape(f"{p.node} proposes {_fmt(p.sync_state_set, names)}: {p.reason}"))
        fig.add_trace(go.Scatter(x=xs, y=ys, mode="markers", name=f"{change} proposed",
                                 marker=dict(symbol=symbol, size=12, color=colour, line=dict(width=1, color="white")),
                                 text=texts, hoverinfo="text"), row=1, col=1)
    fig.update_yaxes(tickmode="array", tickvals=list(range(len(ids))),
                     ticktext=[f"{names.get(i, '?')} (id {i})" for i in ids], range=[len(ids) - 0.4, -0.6],
                     showgrid=False, zeroline=False, row=1, col=1)
    if offsets:
        nodes = sorted(set(names.values()))
        masters = {names.get(c.master) for c in history if c.master is not None}
        # Each replica's log end (as a slave), then the masters' confirm offsets on top (dotted).
        lines = [(node, "written", dict(color=NODE_COLOURS[k % len(NODE_COLOURS)], shape="hv"))
                 for k, node in enumerate(nodes)]
        lines += [(node, "confirmed", dict(color="#000000", dash="dot", width=2.5, shape="hv"))
                  for node in nodes if node in masters]
        for node, which, line in lines:
            pts = [(e.time_ms, e.fields["value"]) for e in events if e.node == node and e.kind == "offset"
                   and e.fields.get("which") == which and e.time_ms >= since_ms]
            if pts:
                xs = [s(t) for t, _ in pts] + [s(end_ms)]
                ys = [v for _, v in pts] + [pts[-1][1]]
                fig.add_trace(go.Scatter(x=xs, y=ys, mode="lines", line=line, name=f"{node} {which}"), row=2, col=1)
        fig.update_yaxes(title="commitlog offset", row=2, col=1)
    fig.update_xaxes(title=axis.label, row=2 if offsets else 1, col=1)
    fig.update_layout(title=title or f"SyncStateSet of {broker_set or 'every broker set'}",
                      height=460 if offsets else 260, margin=dict(l=40, r=20, t=60, b=40),
                      legend=dict(orientation="h", y=-0.15), hovermode="closest")
    return fig


class SyncStateSetView:
    """A live SyncStateSet figure (a FigureWidget): call `update(events)` after each action, e.g.
    `panel.on_change(view.update)` with a FaultPanel."""

    def __init__(self, events: Sequence[TraceEvent], broker_set: str | None = None, **options):
        self.broker_set, self.options = broker_set, options
        self.widget = go.FigureWidget(sync_state_set_figure(events, broker_set, **options))

    def update(self, events: Sequence[TraceEvent]) -> None:
        redraw(self.widget, sync_state_set_figure(events, self.broker_set, **self.options))


__all__ = ["SyncStatePoint", "Proposal", "sync_state_set_history", "proposals", "broker_nodes", "describe_history",
           "sync_state_set_figure", "SyncStateSetView", "ELECT", "ALTER"]
