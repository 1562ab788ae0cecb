"""The invariant panel: the four promises of controller mode, each shown as holding or
as FIRST broken at (seq, time, node, what) — from the trace alone, plus the replicas' store files
when the byte-for-byte comparison is asked for.

The quotations are from RocketMQ's controller design document and RIP-44 (RocketMQ's docs).

1. At most one master per broker set and epoch ("Algorithm Consistency Proof": "During
   each epoch, the controller assigns only one broker to be the master") — check_single_master.
2. The elected master is in the SyncStateSet, unless the election is unclean
   (enableElectUncleanMaster) — check_elections on the controllers' replicated log.
3. Replicas truncate to the consistent point (「截断算法」), never below what they had
   confirmed — check_truncations; with store files also check_replicas (equal byte for byte up to
   the committed offset).
4. No acknowledged message is lost (allAckInSyncStateSet=true, clean elections: "可以保证
   消息不丢失") — check_total_queue, Jepsen's total queue over the client operations.

The checkers are rmqlab.checker's; this module words their verdicts. `evaluate` gives the
statuses, `invariant_table_html` and `invariant_figure` show them (the figure is a timeline with a
mark where each invariant first broke, the faults drawn behind), `InvariantPanel` is the live widget
a lab redraws after each FaultPanel action (`fault_panel.on_change(panel.update)`).
"""

from __future__ import annotations

import html
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass

import plotly.graph_objects as go

from rmqlab.checker.checkers import (check_elections, check_replicas, check_single_master, check_total_queue,
                                     check_truncations)
from rmqlab.checker.result import CheckResult, Violation
from rmqlab.trace.event import TraceEvent
from rmqlab.viz.figure_widgets import redraw
from rmqlab.viz.timeaxis import TimeAxis, time_axis


@dataclass(frozen=True)
class Invariant:
    key: str
    title: str
    short: str  # the figure's row label


INVARIANTS = (
    Invariant("single-master", "At most one master per broker set and epoch", "one master per epoch"),
    Invariant("elections", "The elected master is in the SyncStateSet (unless unclean)",
              "elected from the SyncStateSet"),
    Invariant("truncation", "Replicas truncate to the consistent point", "truncate to the consistent point"),
    Invariant("no-loss", "No acknowledged message lost (allAckInSyncStateSet=true)", "no acknowledged loss"),
)
# The states: pass (holds); broken (the first violation names where); allowed (an unclean
# election the lab enabled); pending (nothing to judge yet).
_BADGE = {"pass": ("✓ holds", "#1a7f37"), "broken": ("✗ broken", "#B22222"),
          "allowed": ("! unclean election (allowed)", "#b35900"), "pending": ("… not judged yet", "#666666")}
_FAULTS = ("node.kill", "node.crash", "node.suspend", "fault.partition")
FAULT_ROW = "faults injected"


@dataclass(frozen=True)
class InvariantStatus:
    invariant: Invariant
    state: str
    first: Violation | None
    detail: str
    results: tuple[CheckResult, ...]

    @property
    def key(self) -> str:
        return self.invariant.key


def evaluate(events: Iterable[TraceEvent], stores: Mapping[str, str] | None = None, *,
             unclean_allowed: bool = False) -> list[InvariantStatus]:
    """The four invariants on `events`. `stores` (broker node -> storePathRootDir) adds the
    byte-for-byte replica check to (3): pass it once the replicas have converged (mid-run, a
    replica still catching up or just crashed is legitimately short). `unclean_allowed`: the
    controllers run with enableElectUncleanMaster=true (the trace does not say so)."""
    events = list(events)
    inv = {i.key: i for i in INVARIANTS}
    single = check_single_master(events)
    out = [_status(inv["single-master"], (single,),
                   f"{single.stats['elections']} master elections, epochs {single.stats['epochs']}")]

    elections = check_elections(events, unclean_allowed=unclean_allowed)
    unclean = elections.stats["unclean"]
    detail = f"{elections.stats['elections']} elections, {len(unclean)} from outside the SyncStateSet"
    if unclean_allowed and unclean:
        u = unclean[0]
        first = Violation("unclean-election", f"{u['node'] or 'broker id ' + str(u['broker_id'])} elected master of "
                          f"{u['broker_set']} in epoch {u['epoch']} from outside its SyncStateSet "
                          f"{u['sync_state_set']} (enableElectUncleanMaster=true)", u["node"], u["seq"],
                          u["time_ms"], u)
        out.append(InvariantStatus(inv["elections"], "allowed", first, detail, (elections,)))
    else:
        out.append(_status(inv["elections"], (elections,), detail))

    trunc = check_truncations(events)
    checks = (trunc,)
    detail = (f"{trunc.stats['handshakes']} handshakes, {trunc.stats['truncated']} truncations, "
              f"{trunc.stats['refused']} refused (no consistent point)")
    if stores:
        replicas = check_replicas(events, stores)
        checks += (replicas,)
        committed = {name: st["committed_offset"] for name, st in replicas.stats.items()}
        detail += "; files compared up to the committed offset " + ", ".join(f"{k} {v}" for k, v in committed.items())
    out.append(_status(inv["truncation"], checks, detail))

    queue = check_total_queue(events)
    q = queue.stats
    detail = (f"{q['acknowledged']} sends acknowledged, {q['read']} messages read, {q['lost']} lost, "
              f"{q['indeterminate']} indeterminate")
    if q["read"] == 0 and q["acknowledged"] > 0:
        out.append(InvariantStatus(inv["no-loss"], "pending", None,
                                   f"{q['acknowledged']} sends acknowledged, nothing read yet: read every queue "
                                   "to judge", (queue,)))
    else:
        out.append(_status(inv["no-loss"], (queue,), detail))
    return out


def _status(invariant: Invariant, results: tuple[CheckResult, ...], detail: str) -> InvariantStatus:
    violations = [v for r in results for v in r.violations]
    if not violations:
        return InvariantStatus(invariant, "pass", None, detail, results)
    first = min(violations, key=lambda v: (v.seq is None, v.seq if v.seq is not None else 0))
    return InvariantStatus(invariant, "broken", first, detail + f"; {len(violations)} violation(s)", results)


def describe_first(v: Violation | None, axis: TimeAxis | None = None) -> str:
    """"seq 2533 · 92.4 s · broker-n1 · cut-committed: ..." (files-only violations have no seq).
    The time is on `axis` (the run's time axis) when given, else trace time / 1000."""
    if v is None:
        return ""
    at = [f"seq {v.seq}" if v.seq is not None else "in the files"]
    if v.time_ms is not None:
        at.append(f"{axis.s(v.time_ms):.1f} {axis.unit}" if axis is not None else f"{v.time_ms / 1000:.1f} s")
    if v.node:
        at.append(v.node)
    return " · ".join(at + [f"{v.what}: {v.message}"])


def invariant_table_html(statuses: Iterable[InvariantStatus]) -> str:
    """The panel as an HTML table (class rmqlab-invariant-table)."""
    rows = []
    for s in statuses:
        badge, colour = _BADGE[s.state]
        rows.append(
            "<tr>"
            f"<td style='padding:2px 10px 2px 0'><b>{html.escape(s.invariant.title)}</b></td>"
            f"<td style='padding:2px 10px 2px 0;color:{colour};white-space:nowrap'><b>{html.escape(badge)}</b></td>"
            f"<td style='padding:2px 10px 2px 0'>{html.escape(describe_first(s.first) or '—')}"
            f"<br><span style='color:#666'>{html.escape(s.detail)}</span></td></tr>")
    head = ("<tr><th style='text-align:left'>invariant</th><th style='text-align:left'>status</th>"
            "<th style='text-align:left'>first broken at (seq · time · node · what)</th></tr>")
    return f"<table class='rmqlab-invariant-table'>{head}{''.join(rows)}</table>"


def invariant_text(statuses: Iterable[InvariantStatus]) -> str:
    """The panel as plain text (what a headless run prints)."""
    lines = []
    for s in statuses:
        lines.append(f"{_BADGE[s.state][0]:<30} {s.invariant.title}")
        if s.first is not None:
            lines.append(f"{'':<30}   first: {describe_first(s.first)}")
        lines.append(f"{'':<30}   {s.detail}")
    return "\n".join(lines)


def invariant_figure(statuses: Iterable[InvariantStatus], events: Iterable[TraceEvent],
                     title: str | None = "Invariants over the run") -> go.Figure:
    """A timeline (the run's time axis, rmqlab.viz.timeaxis): one row per invariant, green while it holds and red from where
    it first broke (an ✗ with the violation on hover); dotted lines mark the faults injected."""
    statuses = list(statuses)
    events = list(events)
    axis = time_axis(events)
    end = axis.s(events[-1].time_ms) if events else 0.0
    fig = go.Figure()
    labels = [s.invariant.short for s in statuses]
    for s in statuses:
        y = s.invariant.short
        broke = axis.s(s.first.time_ms) if s.first is not None and s.first.time_ms is not None else None
        if s.state == "pending":
            fig.add_trace(go.Scatter(x=[0, end], y=[y, y], mode="lines", showlegend=False,
                                     line={"color": "#BBBBBB", "width": 6, "dash": "dot"},
                                     hovertemplate=f"{html.escape(s.detail)}<extra></extra>"))
            continue
        good_until = broke if broke is not None else end
        fig.add_trace(go.Scatter(x=[0, good_until], y=[y, y], mode="lines", line={"color": "#2ca02c", "width": 6},
                                 showlegend=False, hovertemplate="holds<extra></extra>"))
        if broke is not None:
            colour = "#b35900" if s.state == "allowed" else "#d62728"
            fig.add_trace(go.Scatter(x=[broke, end], y=[y, y], mode="lines", line={"color": colour, "width": 6},
                                     showlegend=False, hoverinfo="skip"))
            fig.add_trace(go.Scatter(
                x=[broke], y=[y], mode="markers", showlegend=False,
                marker={"symbol": "x", "size": 16, "color": colour, "line": {"color": "black", "width": 1}},
                customdata=[describe_first(s.first, axis)], hovertemplate="%{customdata}<extra></extra>"))
    faults = [e for e in events if e.kind in _FAULTS]
    if faults:
        for e in faults:
            fig.add_vline(x=axis.s(e.time_ms), line={"color": "#999999", "width": 1, "dash": "dot"})
        names = [_fault_name(e) for e in faults]
        fig.add_trace(go.Scatter(
            x=[axis.s(e.time_ms) for e in faults], y=[FAULT_ROW] * len(faults), mode="markers+text", showlegend=False,
            text=names, textposition=["top center" if i % 2 == 0 else "bottom center" for i in range(len(faults))],
            textfont={"size": 10, "color": "#555555"},
            marker={"symbol": "triangle-down", "size": 10, "color": "#555555"},
            hovertemplate="%{text} at %{x:.1f} s<extra></extra>"))
        labels.append(FAULT_ROW)
    fig.update_layout(title=title, height=140 + 45 * len(labels), margin={"l": 10, "r": 10, "t": 50, "b": 40},
                      xaxis={"title": axis.label, "range": [0, max(end, 1.0)]},
                      yaxis={"categoryorder": "array", "categoryarray": labels, "autorange": "reversed"})
    return fig


def _fault_name(e: TraceEvent) -> str:
    if e.kind == "fault.partition":
        groups = e.fields.get("groups") or []
        alone = min(groups, key=len) if groups else []
        return "partition " + (", ".join(alone) if len(alone) <= 2 else f"{len(alone)} nodes")
    return f"{e.kind.split('.', 1)[1]} {e.node}"


replace_figure = redraw  # the name lab 04 imports


class InvariantPanel:
    """The live panel: an HTML table (class rmqlab-invariants) and the timeline as a FigureWidget,
    redrawn by `update(events)`. `stores`: a function giving the store directories to compare
    byte for byte (called at each update), or None for the trace-only checks."""

    def __init__(self, stores: Callable[[], Mapping[str, str]] | None = None, *, unclean_allowed: bool = False):
        import ipywidgets as widgets

        self.stores, self.unclean_allowed = stores, unclean_allowed
        self.table = widgets.HTML()
        self.table.add_class("rmqlab-invariants")
        self.figure = go.FigureWidget()
        self.widget = widgets.VBox([self.table, self.figure])
        self.statuses: list[InvariantStatus] = []

    def update(self, events: Iterable[TraceEvent]) -> list[InvariantStatus]:
        events = list(events)
        self.statuses = evaluate(events, self.stores() if self.stores else None, unclean_allowed=self.unclean_allowed)
        self.table.value = invariant_table_html(self.statuses)
        redraw(self.figure, invariant_figure(self.statuses, events))
        return self.statuses
