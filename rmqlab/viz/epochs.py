"""The epoch/offset diagram (RocketMQ's controller design document, 「截断算法」 / "Truncation
algorithm"; EpochFileCache in RocketMQ's source): each replica's epoch file as a row of segments [start, end) along the
commit-log offset axis — every epoch from where its master started writing to where the next epoch
starts, the last one to the end of the replica's log — with, for each replica beside the master,
the point where its handshake would cut (the consistent point) and the tail it would lose.

Where the rows come from:

* `rows_from_stores(stores)`: the replicas as they are now, from their files: the epoch file
  (`epochFileCheckpoint`, through rmqlab.checker.read_epochs) and the end of the commit log
  (rmqlab.checker.checkers.commitlog_end). Exact; readable while a node is down.
* `rows_from_trace(events)`: the `epoch` events and the handshake truncations replayed; a log's
  end is the last the trace shows (a slave's `offset` events and handshakes; a master's appends
  only as far as its transfers, handshakes and heartbeats reveal them).
* `handshake_rows(truncation)`: both epoch files and both log ends exactly as a slave compared
  them in one traced handshake (`truncation_figure` draws it).

The consistent point is computed by rmqlab's own doTruncate (rmqlab.ha.autoswitch), the code the
replicas run. Figures are static `go.Figure`s: deterministic for a seed, so nbval can compare them.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

import plotly.graph_objects as go

from rmqlab.checker.checkers import (Truncation, commitlog_end, consistent_point, read_epochs, replay_epochs,
                                     truncations)
from rmqlab.trace.event import TraceEvent

# One colour per epoch number, the same in every figure (plotly's qualitative "Plotly" palette).
PALETTE = ("#636EFA", "#EF553B", "#00CC96", "#AB63FA", "#FFA15A", "#19D3F3", "#FF6692", "#B6E880", "#FF97FF",
           "#FECB52")
TAIL_COLOUR = "rgba(214, 39, 40, 0.30)"


def epoch_colour(epoch: int) -> str:
    return PALETTE[(epoch - 1) % len(PALETTE)]


@dataclass(frozen=True)
class EpochRow:
    """One replica: its epoch file, (epoch, start offset) ascending, and where its log ends
    (None when unknown)."""

    node: str
    entries: tuple[tuple[int, int], ...]
    end: int | None

    def segments(self) -> list[tuple[int, int, int]]:
        """(epoch, start, end) per entry: each ends where the next starts, the last at the log's
        end (never before its own start: an epoch that holds no data yet is empty)."""
        out = []
        for i, (epoch, start) in enumerate(self.entries):
            if i + 1 < len(self.entries):
                stop = self.entries[i + 1][1]
            else:
                stop = max(start, self.end) if self.end is not None else start
            out.append((epoch, start, stop))
        return out


def rows_from_stores(stores: Mapping[str, str]) -> list[EpochRow]:
    """One row per replica (node -> its storePathRootDir), in node order, from its files."""
    return [EpochRow(node, tuple(read_epochs(root)), commitlog_end(root)) for node, root in sorted(stores.items())]


def rows_from_trace(events: Iterable[TraceEvent], until_seq: int | None = None,
                    nodes: Iterable[str] | None = None) -> list[EpochRow]:
    """One row per node with an epoch file in the trace (or each of `nodes`), as the trace up to
    `until_seq` leaves it; ends as the trace last showed them (see the module docstring)."""
    events = [e for e in events if until_seq is None or e.seq <= until_seq]
    files = replay_epochs(events)
    ends = _trace_ends(events)
    names = sorted(files) if nodes is None else list(nodes)
    return [EpochRow(n, tuple(files.get(n, ())), ends.get(n)) for n in names]


def _trace_ends(events: list[TraceEvent]) -> dict[str, int]:
    listening = {e.fields["local"]: e.node for e in events if e.kind == "net.accept" and e.fields.get("local")}
    handshakes = {t.seq: t for t in truncations(events) if t.local_max is not None}
    ends: dict[str, int] = {}
    for e in events:
        f = e.fields
        if e.seq in handshakes:
            ends[e.node] = handshakes[e.seq].local_max  # what the slave compared (a cut follows as `offset`)
        elif e.kind == "offset" and f.get("which") == "written":
            ends[e.node] = f["value"]
        elif e.kind == "frame.recv" and f.get("proto") == "ha" and f.get("name") == "handshake" and "offset" in f:
            master = listening.get(f.get("peer"))
            if master is not None:
                ends[master] = f["offset"]  # the master's maxPhyOffset, in its handshake
        elif e.kind == "frame.send" and f.get("proto") == "ha" and f.get("name") in ("transfer", "heartbeat") \
                and "offset" in f:
            ends[e.node] = max(ends.get(e.node, 0), f["offset"] + (f.get("body_size") or 0))
    return ends


def handshake_rows(t: Truncation) -> list[EpochRow]:
    """The master's row then the slave's, as the slave compared them in handshake `t`."""
    return [EpochRow(t.master or "master", tuple(t.master_entries or ()), t.master_max),
            EpochRow(t.node, t.local_entries, t.local_max)]


def epoch_figure(rows: Sequence[EpochRow], master: str | None = None, title: str | None = None) -> go.Figure:
    """The diagram: one row per replica (the master's on top, marked), one colour per epoch; for
    every other row the consistent point with the master (a diamond) and the tail a handshake would
    cut (hatched red), or why there is none."""
    ordered = sorted(rows, key=lambda r: (r.node != master,))
    label = {r.node: f"{r.node} (master)" if r.node == master else r.node for r in ordered}
    fig = go.Figure()
    by_epoch: dict[int, list[tuple[str, int, int]]] = {}
    for row in ordered:
        for epoch, start, stop in row.segments():
            by_epoch.setdefault(epoch, []).append((label[row.node], start, stop))
    for epoch in sorted(by_epoch):
        segs = by_epoch[epoch]
        colour = epoch_colour(epoch)
        fig.add_trace(go.Bar(
            name=f"epoch {epoch}", legendgroup=f"epoch {epoch}", orientation="h",
            y=[s[0] for s in segs], base=[s[1] for s in segs], x=[s[2] - s[1] for s in segs],
            marker={"color": colour, "line": {"color": "white", "width": 1}}, text=[f"epoch {epoch}"] * len(segs),
            textposition="inside", insidetextanchor="start",
            customdata=[[s[1], s[2]] for s in segs],
            hovertemplate=f"%{{y}} · epoch {epoch}<br>[%{{customdata[0]}}, %{{customdata[1]}})<extra></extra>"))
        # The start of every entry, visible even for an epoch that holds no data yet.
        fig.add_trace(go.Scatter(
            x=[s[1] for s in segs], y=[s[0] for s in segs], mode="markers", legendgroup=f"epoch {epoch}",
            showlegend=False, marker={"symbol": "line-ns-open", "size": 22, "color": colour, "line": {"width": 3}},
            hovertemplate=f"%{{y}}: epoch {epoch} starts at %{{x}}<extra></extra>"))
    ends = [r for r in ordered if r.end is not None]
    if ends:
        fig.add_trace(go.Scatter(
            x=[r.end for r in ends], y=[label[r.node] for r in ends], mode="markers", name="log end",
            marker={"symbol": "line-ns", "size": 26, "color": "black", "line": {"width": 2, "color": "black"}},
            hovertemplate="%{y}: log ends at %{x}<extra></extra>"))
    masters = [r for r in ordered if r.node == master]
    if masters:
        _mark_truncations(fig, masters[0], [r for r in ordered if r.node != master], label)
    fig.update_layout(
        title=title, barmode="overlay", bargap=0.35, height=max(300, 130 + 60 * len(ordered)),
        margin={"l": 10, "r": 10, "t": 50 if title else 20, "b": 40},
        xaxis={"title": "commit-log offset (bytes)", "rangemode": "tozero"},
        yaxis={"categoryorder": "array", "categoryarray": [label[r.node] for r in ordered], "autorange": "reversed"},
        legend={"orientation": "v", "x": 1.02, "y": 1, "yanchor": "top"})
    return fig


def _mark_truncations(fig: go.Figure, master: EpochRow, others: list[EpochRow], label: dict[str, str]) -> None:
    points, tails = [], []
    for row in others:
        y = label[row.node]
        if row.end is None or master.end is None:
            continue
        decision = consistent_point(list(row.entries), row.end, list(master.entries), master.end)
        if not decision.ok:
            fig.add_annotation(x=row.end, y=y, text="no consistent point: refuses to replicate", showarrow=False,
                               xanchor="left", font={"color": "#B22222"})
        elif decision.truncate_offset is None:
            fig.add_annotation(x=row.end, y=y, text="empty epoch file: a new replica, nothing to cut",
                               showarrow=False, xanchor="left")
        else:
            points.append((decision.truncate_offset, y, decision.reason))
            if decision.truncate_offset < row.end:
                tails.append((y, decision.truncate_offset, row.end))
    if tails:
        fig.add_trace(go.Bar(
            name="cut by the handshake", orientation="h", y=[t[0] for t in tails], base=[t[1] for t in tails],
            x=[t[2] - t[1] for t in tails], customdata=[[t[1], t[2]] for t in tails],
            marker={"color": TAIL_COLOUR, "pattern": {"shape": "x", "fgcolor": "#B22222"},
                    "line": {"color": "#B22222", "width": 2}},
            hovertemplate="%{y}: [%{customdata[0]}, %{customdata[1]}) is cut<extra></extra>"))
    if points:
        fig.add_trace(go.Scatter(
            x=[p[0] for p in points], y=[p[1] for p in points], mode="markers", name="consistent point",
            marker={"symbol": "diamond", "size": 14, "color": "black", "line": {"color": "white", "width": 1}},
            customdata=[p[2] for p in points],
            hovertemplate="%{y}: truncate to %{x}<br>%{customdata}<extra></extra>"))


def truncation_figure(t: Truncation) -> go.Figure:
    """One traced handshake: the master's and the slave's epoch files and log ends as the slave
    compared them, the point it computed and what it cut."""
    when = f"{t.time_ms / 1000:.1f} s"
    title = f"{t.node}'s handshake with {t.master or 'the master'} at {when}: {t.reason.split(' (')[0]}"
    return epoch_figure(handshake_rows(t), master=t.master or "master", title=title)


def last_truncations(events: Iterable[TraceEvent], with_point: bool = True) -> dict[str, Truncation]:
    """node -> its latest traced handshake decision (only those that cut, by default)."""
    out: dict[str, Truncation] = {}
    for t in truncations(events):
        if t.point is not None or not with_point:
            out[t.node] = t
    return out
