"""A DLedger group over time, from the trace: each member's role and term, and the leader's commit
index (DLedger CommitLog mode: the index below which a majority holds every entry, i.e. every
message — what a consumer may read and what a producer's SEND_OK waited for).

Facts used: `dledger.role` events (role, term and known leader of one member, at each change) and
`dledger.commit` events (a leader's commit index, at each QuorumAckChecker pass that moved it);
`node.*` events for a member that is down (a dead member emits nothing, so its last role would
otherwise look current).
"""

from __future__ import annotations

from collections.abc import Iterable

import plotly.graph_objects as go
from plotly.subplots import make_subplots

from rmqlab.trace import TraceEvent
from rmqlab.viz.sends import add_fault_lines
from rmqlab.viz.timeaxis import time_axis

ROLE_COLORS = {"LEADER": "#2ca02c", "FOLLOWER": "#1f77b4", "CANDIDATE": "#ff7f0e", "DOWN": "#bbbbbb"}
COMMIT_COLORS = ("#9467bd", "#8c564b", "#e377c2", "#17becf", "#7f7f7f")  # none of the role colours
_DOWN = ("node.kill", "node.crash", "node.stop")
_UP = ("node.restart", "node.start")


def role_segments(events: Iterable[TraceEvent]) -> dict[str, list[tuple[float, float, str, int | None]]]:
    """member node -> [(start_ms, end_ms, role or "DOWN", term)], covering from its first role event
    (or its death) to the trace's end."""
    events = list(events)
    end_ms = events[-1].time_ms if events else 0.0
    members = {e.node for e in events if e.kind == "dledger.role"}
    state: dict[str, tuple[float, str, int | None]] = {}
    out: dict[str, list[tuple[float, float, str, int | None]]] = {m: [] for m in sorted(members)}

    def change(node: str, t: float, role: str, term: int | None) -> None:
        prev = state.get(node)
        if prev is not None and (prev[1], prev[2]) == (role, term):
            return
        if prev is not None and t > prev[0]:
            out[node].append((prev[0], t, prev[1], prev[2]))
        state[node] = (t, role, term)

    for e in events:
        if e.node not in members:
            continue
        if e.kind == "dledger.role":
            change(e.node, e.time_ms, e.fields["role"], e.fields["term"])
        elif e.kind in _DOWN:
            change(e.node, e.time_ms, "DOWN", None)
    for node, (t, role, term) in state.items():
        if end_ms > t:
            out[node].append((t, end_ms, role, term))
    return out


def commit_points(events: Iterable[TraceEvent]) -> list[tuple[float, str, int, int]]:
    """(time_ms, leader node, term, commit index) of every commit-index advance."""
    return [(e.time_ms, e.node, e.fields["term"], e.fields["commit_index"]) for e in events if e.kind == "dledger.commit"]


def dledger_figure(events: list[TraceEvent], *, title: str = "The DLedger group: each member's role and term, "
                   "and the commit index") -> go.Figure:
    """Row 1: a bar per member, coloured by role (grey: the member is down), labelled with its term.
    Row 2: the commit index each leader reached, a step line per leader node (hover: its term),
    held until that leadership ends."""
    events = list(events)
    axis = time_axis(events)
    segments = role_segments(events)
    fig = make_subplots(rows=2, cols=1, shared_xaxes=True, row_heights=[0.45, 0.55], vertical_spacing=0.08,
                        subplot_titles=("role and term per member", "commit index (entries a majority holds)"))
    shown: set[str] = set()
    for node, segs in segments.items():
        for start, stop, role, term in segs:
            label = "down" if role == "DOWN" else role.lower()
            fig.add_trace(go.Bar(
                x=[axis.s(stop) - axis.s(start)], base=[axis.s(start)], y=[node], orientation="h",
                marker={"color": ROLE_COLORS.get(role, "#999")}, name=label, legendgroup=label,
                showlegend=label not in shown, text=[f"t{term}" if term is not None and role == "LEADER" else ""],
                textposition="inside", insidetextanchor="middle",
                hovertemplate=f"{node}: {label}" + (f", term {term}" if term is not None else "")
                              + "<br>%{base:.2f} s for %{x:.2f} s<extra></extra>"), row=1, col=1)
            shown.add(label)
    points = commit_points(events)
    for k, node in enumerate(sorted({n for _, n, _, _ in points})):
        mine = [p for p in points if p[1] == node]
        # The index holds until that leadership ends (the segment around the last advance), not
        # beyond: a leader that died or stepped down knows nothing after.
        last_t = mine[-1][0]
        until = next((stop for start, stop, role, _ in segments.get(node, []) if role == "LEADER" and start <= last_t <= stop),
                     last_t)
        mine = mine + [(until, node, mine[-1][2], mine[-1][3])]
        fig.add_trace(go.Scatter(
            x=[axis.s(t) for t, _, _, _ in mine], y=[i for _, _, _, i in mine], mode="lines+markers",
            line={"shape": "hv", "color": COMMIT_COLORS[k % len(COMMIT_COLORS)]}, marker={"size": 4},
            name=f"commit index at {node}",
            customdata=[term for _, _, term, _ in mine],
            hovertemplate=f"{node} (term %{{customdata}}): commit index %{{y}}<br>at %{{x:.3f}} s<extra></extra>"),
            row=2, col=1)
    if not points:
        fig.add_annotation(x=0.5, y=0.2, xref="paper", yref="paper", showarrow=False,
                           text="no commit-index advance in this trace", font={"size": 11, "color": "#555"})
    fig.update_layout(barmode="overlay", title=title, height=200 + 40 * len(segments) + 260,
                      margin={"t": 80, "b": 40, "l": 120}, legend={"orientation": "h", "y": -0.12})
    fig.update_yaxes(categoryorder="category descending", row=1, col=1)
    fig.update_yaxes(title_text="index", rangemode="tozero", row=2, col=1)
    fig.update_xaxes(title_text=axis.label, row=2, col=1)
    add_fault_lines(fig, events, rows=(1, 2))
    return fig


__all__ = ["ROLE_COLORS", "role_segments", "commit_points", "dledger_figure"]
