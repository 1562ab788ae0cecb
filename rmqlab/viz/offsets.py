"""Per-broker commit-log offsets over time, and each replica's replication lag, from the trace.

    offsets_figure(events)      top: every broker's commit-log offsets (bytes) over time;
                                bottom: each broker's lag behind the furthest replica of its set
    offset_series(events)       the same as data: node -> which -> [(time s, offset)]
    replication_lag(events)     node -> [(time s, lag in bytes)]

What the trace says about offsets (datasets/README.md):

* `offset` events: `written` (the end of the appended data; replicas trace it after each batch
  they append), `confirmed` (a controller-mode master's confirm offset), and `flushed` /
  `dispatched` where a store traces them;
* a master's own appends show in what it ships: every HA `transfer` frame (`frame.send`, proto
  "ha") carries the batch's start `offset` and `body_size`, so offset + body_size is the end of
  the master's log as far as it shipped it ("shipped");
* every acknowledged send names, in its `offset_msg_id`, the store host and the commit-log offset
  where the message starts ("acknowledged"): a master without slaves shows its growth this way.

A broker's log end is the furthest of its latest written, shipped and acknowledged offsets since
it last (re)started; a broker's lag is how far its log end is behind the furthest log end of the
running members of its set. A slave that is suspended or partitioned stops moving, so its lag
grows with every message the master takes; a crashed broker has no lag until it is back.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterable

import plotly.graph_objects as go
from plotly.subplots import make_subplots

from rmqlab.checker.checkers import send_acknowledged
from rmqlab.common.message.message_decoder import decode_message_id
from rmqlab.trace import TraceEvent, client_ops
from rmqlab.viz.sends import add_fault_lines, broker_nodes_by_addr, broker_sets
from rmqlab.viz.timeaxis import time_axis

WHICH_DASH = {"written": "solid", "shipped": "dot", "acknowledged": "dot", "confirmed": "dash",
              "flushed": "longdash", "dispatched": "dashdot"}
NODE_COLORS = ("#2ca02c", "#1f77b4", "#9467bd", "#8c564b", "#17becf", "#e377c2", "#bcbd22", "#7f7f7f")
# Which series make a broker set's log end (confirmed, flushed and dispatched trail it).
END_SERIES = ("written", "shipped", "acknowledged")


def offset_series(events: Iterable[TraceEvent]) -> dict[str, dict[str, list[tuple[float, int]]]]:
    """node -> which -> [(time in s, offset)], in trace order (see the module docstring for `which`)."""
    events = list(events)
    out: dict[str, dict[str, list[tuple[float, int]]]] = {}

    def add(node: str, which: str, t_ms: float, value: int) -> None:
        # Millisecond precision is plenty for a figure and keeps a notebook's JSON small.
        out.setdefault(node, {}).setdefault(which, []).append((round(t_ms / 1000.0, 3), value))

    for e in events:
        if e.kind == "offset":
            add(e.node, e.fields["which"], e.time_ms, e.fields["value"])
        elif e.kind == "frame.send" and e.fields.get("proto") == "ha" and e.fields.get("name") == "transfer":
            add(e.node, "shipped", e.time_ms, e.fields["offset"] + e.fields.get("body_size", 0))
    by_addr = broker_nodes_by_addr(events)
    for op in client_ops(events):
        if op.f == "send" and send_acknowledged(op) and op.value.get("offset_msg_id"):
            try:
                (ip, port), offset = decode_message_id(op.value["offset_msg_id"])
            except ValueError:
                continue
            node = by_addr.get(f"{ip}:{port}")
            if node is not None:
                add(node, "acknowledged", op.complete_time_ms, offset)
    return {n: {w: sorted(s) for w, s in sorted(series.items())} for n, series in sorted(out.items())}


def log_ends(events: Iterable[TraceEvent]) -> dict[str, list[tuple[float, int | None]]]:
    """Broker node -> its log end over time [(time in s, end)]: the furthest of its latest
    written, shipped and acknowledged offsets in its current incarnation; None while it is down
    (a restarted broker starts from what it recovers, shown by its next offsets)."""
    events = list(events)
    points: list[tuple[float, int, str, str, int | None]] = []   # (t, order, node, which, value)
    for node, kinds in offset_series(events).items():
        for which in END_SERIES:
            points += [(t, 1, node, which, v) for t, v in kinds.get(which, [])]
    nodes = {p[2] for p in points}
    points += [(e.time_ms / 1000.0, 0, e.node, "", None) for e in events
               if e.node in nodes and e.kind in ("node.kill", "node.crash", "node.stop", "node.restart")]
    latest: dict[str, dict[str, int]] = {}
    out: dict[str, list[tuple[float, int | None]]] = {}
    for t, _, node, which, value in sorted(points, key=lambda p: (p[0], p[1])):
        mine = latest.setdefault(node, {})
        if value is None:
            mine.clear()
        else:
            mine[which] = value
        end = max(mine.values()) if mine else None
        series = out.setdefault(node, [])
        if not series or series[-1][1] != end:
            series.append((t, end))
    return out


def replication_lag(events: Iterable[TraceEvent]) -> dict[str, list[tuple[float, int]]]:
    """Broker node -> [(time in s, bytes behind the furthest running member of its broker set)],
    for the brokers of sets with replicas, while they are up (see the module docstring)."""
    events = list(events)
    ends = log_ends(events)
    sets = broker_sets(events)
    lag: dict[str, list[tuple[float, int]]] = {}
    for node in sorted(ends):
        members = sorted(n for n in ends if sets.get(n) is not None and sets.get(n) == sets.get(node))
        if len(members) < 2:
            continue
        times = {n: [t for t, _ in ends[n]] for n in members}
        points = []
        for t in sorted({t for n in members for t in times[n]}):
            now = {}
            for n in members:
                i = bisect.bisect_right(times[n], t)
                if i and ends[n][i - 1][1] is not None:
                    now[n] = ends[n][i - 1][1]
            if node in now:
                points.append((t, max(now.values()) - now[node]))
        lag[node] = points
    return lag


def offsets_figure(events: list[TraceEvent], *, title: str = "Commit-log offsets and replication lag") -> go.Figure:
    """Top: each broker's offset series (color per node, dash per kind of offset). Bottom: each
    replica's lag. x: the run's time axis (rmqlab.viz.timeaxis); faults as dotted lines."""
    events = list(events)
    axis = time_axis(events)
    series = offset_series(events)
    lags = replication_lag(events)
    fig = make_subplots(rows=2, cols=1, shared_xaxes=True, vertical_spacing=0.08, row_heights=[0.6, 0.4],
                        subplot_titles=("commit-log offset (bytes)", "behind the furthest replica of its set (bytes)"))
    colors = {n: NODE_COLORS[i % len(NODE_COLORS)] for i, n in enumerate(sorted(set(series) | set(lags)))}
    for node, kinds in series.items():
        for which, points in kinds.items():
            fig.add_trace(go.Scatter(x=[axis.from_trace_s(t) for t, _ in points], y=[v for _, v in points],
                                     name=f"{node} {which}",
                                     mode="lines", line={"color": colors[node], "dash": WHICH_DASH.get(which, "solid"),
                                                         "shape": "hv", "width": 2 if which == "written" else 1.5},
                                     legendgroup=node), row=1, col=1)
    for node, points in sorted(lags.items()):
        fig.add_trace(go.Scatter(x=[axis.from_trace_s(t) for t, _ in points], y=[v for _, v in points], name=f"{node} lag",
                                 mode="lines", line={"color": colors[node], "shape": "hv"}, legendgroup=node,
                                 showlegend=False), row=2, col=1)
    fig.update_layout(title=title, height=520, margin={"t": 70, "b": 40}, legend={"font": {"size": 10}})
    fig.update_xaxes(title_text=axis.label, row=2, col=1)
    add_fault_lines(fig, events, rows=(1, 2))
    return fig
