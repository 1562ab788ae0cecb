"""Sequence (Lamport) diagrams of the frames between nodes, read from frame.send / frame.recv events.

Generic over the wire protocol (`proto` "ha", "remoting", "raft"): each node is a vertical
lifeline, each frame an arrow from its sender's `frame.send` to its receiver's `frame.recv`, and
time runs downwards. By default the vertical axis is the *order* of the events (a Lamport
diagram: what happened before what), so a handshake a millisecond long is as readable as a
heartbeat five seconds later; `y="time"` plots virtual (or wall) milliseconds instead. State
changes of chosen machines (an HA client going HANDSHAKE → TRANSFER) can sit on the lifelines.

Frames name their peer by address ("127.0.0.1:30912") where the sender does not know the node's
name; `address_book` maps addresses to nodes from the `net.connect` / `net.accept` events (and
`node.start`'s `addr`). A receive is matched to the earliest unmatched send between the same two
nodes that carries the same frame: the same `hex` bytes (HA), the same code/opaque/flag
(remoting), or the same decoded fields (Raft). A send left unmatched is in flight, or was lost
with its connection.
"""

from __future__ import annotations

import html
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import plotly.graph_objects as go

from rmqlab.trace.event import TraceEvent
from rmqlab.viz.timeaxis import time_axis

FRAME_KINDS = ("frame.send", "frame.recv")
# Fields that say where a frame went rather than what it was (left out of the matching key).
_ROUTING = {"peer", "conn_id", "local", "size", "body_size", "cut_at_epoch_end", "entries"}
# One colour per frame name, the same in every figure: the HA frames' own, others by their letters.
PALETTE = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#17becf", "#bcbd22")
COLOURS = {"handshake": "#9467bd", "ack": "#ff7f0e", "report": "#ff7f0e", "transfer": "#1f77b4",
           "heartbeat": "#8c8c8c"}


def colour(name: str) -> str:
    return COLOURS.get(name) or PALETTE[sum(name.encode()) % len(PALETTE)]


@dataclass(frozen=True)
class FrameHop:
    """One frame: its send and its receive (either may be missing) and the nodes at both ends."""

    src: str
    dst: str
    proto: str
    name: str
    send: TraceEvent | None
    recv: TraceEvent | None

    @property
    def delivered(self) -> bool:
        return self.recv is not None

    @property
    def fields(self) -> dict:
        """The decoded fields, the receiver's over the sender's (the sender adds some of its own)."""
        out = dict(self.send.fields) if self.send is not None else {}
        if self.recv is not None:
            out.update(self.recv.fields)
        out.pop("peer", None)
        return out

    @property
    def event(self) -> TraceEvent:
        """The receive if the frame arrived, else its send."""
        return self.recv if self.recv is not None else self.send  # type: ignore[return-value]

    @property
    def seq(self) -> int:
        return self.event.seq

    def label(self) -> str:
        state = "" if self.delivered else " (in flight or lost)"
        return f"{self.src} → {self.dst}: {self.name}{state}"


def address_book(events: Iterable[TraceEvent]) -> dict[str, str]:
    """"host:port" -> node name, from every address a node was seen to own: the local end of its
    outgoing connections (net.connect), the listening address of its accepted ones (net.accept),
    and the `addr` of its node.start."""
    book: dict[str, str] = {}
    for e in events:
        if e.kind in ("net.connect", "net.accept") and e.fields.get("local"):
            book[e.fields["local"]] = e.node
        elif e.kind == "node.start" and e.fields.get("addr"):
            book[e.fields["addr"]] = e.node
    return book


def frame_name(fields: dict, proto: str) -> str:
    return str(fields.get("name") or fields.get("type") or fields.get("code") or proto)


def _key(fields: dict, proto: str) -> tuple:
    """What identifies a frame on both of its ends (see the module docstring)."""
    if "hex" in fields:
        return ("hex", fields["hex"])
    if proto == "remoting":
        return ("remoting", fields.get("code"), fields.get("opaque"), fields.get("flag"))
    return ("fields", tuple(sorted((k, repr(v)) for k, v in fields.items() if k not in _ROUTING)))


def match_frames(events: Sequence[TraceEvent], proto: str | None = None,
                 nodes: Iterable[str] | None = None, book: dict[str, str] | None = None) -> list[FrameHop]:
    """Every frame of `proto` (all protocols if None) between `nodes` (all if None), in the order
    of their first event (the send, or the receive when no send was traced)."""
    book = address_book(events) if book is None else book
    wanted = set(nodes) if nodes is not None else None
    pending: dict[tuple[str, str, str], list[tuple[tuple, TraceEvent]]] = {}
    hops: list[tuple[int, FrameHop]] = []
    for e in events:
        if e.kind not in FRAME_KINDS:
            continue
        p = e.fields.get("proto", "")
        if proto is not None and p != proto:
            continue
        peer = book.get(e.fields.get("peer", ""), e.fields.get("peer", "?"))
        src, dst = (e.node, peer) if e.kind == "frame.send" else (peer, e.node)
        if wanted is not None and not (src in wanted and dst in wanted):
            continue
        key = _key(e.fields, p)
        queue = pending.setdefault((src, dst, p), [])
        if e.kind == "frame.send":
            queue.append((key, e))
            continue
        match = next((i for i, (k, _) in enumerate(queue) if k == key), None)
        send = queue.pop(match)[1] if match is not None else None
        hops.append(((send or e).seq, FrameHop(src, dst, p, frame_name(e.fields, p), send, e)))
    for (src, dst, p), queue in pending.items():
        for _, send in queue:
            hops.append((send.seq, FrameHop(src, dst, p, frame_name(send.fields, p), send, None)))
    hops.sort(key=lambda item: item[0])
    return [hop for _, hop in hops]


def _describe(fields: dict) -> str:
    shown = {k: v for k, v in fields.items() if k not in ("proto", "hex", "ext_fields")}
    return "<br>".join(f"{html.escape(str(k))}: {html.escape(str(v))}" for k, v in shown.items())


def lamport_figure(events: Sequence[TraceEvent], proto: str | None = "ha", nodes: Sequence[str] | None = None, *,
                   machines: Iterable[str] = (), last: int | None = None, since_seq: int = 0, y: str = "order",
                   title: str | None = None, height: int | None = None) -> go.Figure:
    """The sequence diagram of the frames of `proto` between `nodes` (lifelines in that order;
    default: every node that sent or received one). `machines`: `state` events of these
    machines on the lifelines. `last`: only the most recent frames; `since_seq`: only frames
    sent or received from that event on. `y`: "order" or "time"."""
    if y not in ("order", "time"):
        raise ValueError(f"y must be 'order' or 'time', not {y!r}")
    axis = time_axis(events)  # y="time": ms on the run's time axis, not epoch ms on the real runtime
    hops = [h for h in match_frames(events, proto, nodes) if h.event.seq >= since_seq]
    dropped = last is not None and len(hops) > max(last, 0)
    if last is not None:
        hops = hops[-last:] if last > 0 else []
    lanes = list(nodes) if nodes is not None else sorted({n for h in hops for n in (h.src, h.dst)})
    x_of = {n: i for i, n in enumerate(lanes)}
    machines = set(machines)
    # State changes from where the diagram starts: its first frame if older ones were left out.
    lower = (hops[0].send or hops[0].recv).seq if dropped and hops else since_seq
    states = [e for e in events if e.kind == "state" and e.fields.get("machine") in machines and e.node in x_of
              and e.seq >= lower]
    # Every shown event gets a row: its rank in trace order (or its time).
    shown = sorted(({e.seq: e for h in hops for e in (h.send, h.recv) if e is not None}
                    | {e.seq: e for e in states}).items())
    rank = {seq: i for i, (seq, _) in enumerate(shown)}

    def row(e: TraceEvent) -> float:
        return rank[e.seq] if y == "order" else axis.ms(e.time_ms)

    fig = go.Figure()
    bottom = (len(shown) if y == "order" else max((axis.ms(e.time_ms) for _, e in shown), default=0.0))
    top = -1 if y == "order" else min((axis.ms(e.time_ms) for _, e in shown), default=0.0)
    for i in x_of.values():
        fig.add_trace(go.Scatter(x=[i, i], y=[top, bottom], mode="lines", line=dict(color="#bbbbbb", width=1),
                                 hoverinfo="skip", showlegend=False))
    by_name: dict[str, list[FrameHop]] = {}
    for hop in hops:
        by_name.setdefault(hop.name, []).append(hop)
    for name, group in by_name.items():
        xs: list = []
        ys: list = []
        symbols: list = []
        texts: list = []
        label_x: list = []
        label_y: list = []
        for hop in group:
            x0, x1 = x_of.get(hop.src), x_of.get(hop.dst)
            if x0 is None or x1 is None:
                continue
            y0 = row(hop.send) if hop.send is not None else row(hop.recv) - (0.5 if y == "order" else 0.0)
            if hop.recv is not None:
                y1 = row(hop.recv)
            else:  # in flight or lost: half way across
                x1 = x0 + (x1 - x0) / 2
                y1 = y0 + (0.5 if y == "order" else 0.0)
            hover = (f"<b>{html.escape(hop.label())}</b><br>"
                     + (f"sent t={axis.ms(hop.send.time_ms):.1f} ms<br>" if hop.send else "")
                     + (f"received t={axis.ms(hop.recv.time_ms):.1f} ms<br>" if hop.recv else "")
                     + _describe(hop.fields))
            xs += [x0, x1, None]
            ys += [y0, y1, None]
            symbols += ["circle", "arrow" if hop.delivered else "arrow-open", "circle"]
            texts += [hover, hover, ""]
            label_x.append((x0 + x1) / 2)
            label_y.append((y0 + y1) / 2)
        fig.add_trace(go.Scatter(
            x=xs, y=ys, mode="lines+markers", name=name, legendgroup=name, text=texts, hoverinfo="text",
            line=dict(color=colour(name), width=2),
            marker=dict(symbol=symbols, size=[5, 12, 0] * (len(xs) // 3), angleref="previous", color=colour(name))))
        fig.add_trace(go.Scatter(x=label_x, y=label_y, mode="text", text=[name] * len(label_x), legendgroup=name,
                                 showlegend=False, hoverinfo="skip", textposition="top center",
                                 textfont=dict(size=10, color=colour(name))))
    if states:
        fig.add_trace(go.Scatter(
            x=[x_of[e.node] for e in states], y=[row(e) for e in states], mode="markers+text", name="state",
            text=[str(e.fields.get("to")) for e in states], textposition="middle right",
            textfont=dict(size=9, color="#555555"), marker=dict(symbol="diamond", size=8, color="#555555"),
            hovertext=[f"{html.escape(e.node)} {html.escape(str(e.fields.get('machine')))}: "
                       f"{html.escape(str(e.fields.get('from')))} → {html.escape(str(e.fields.get('to')))}"
                       f"<br>{html.escape(str(e.fields.get('reason', '')))}<br>t={axis.ms(e.time_ms):.1f} ms" for e in states],
            hoverinfo="text"))
    fig.update_layout(
        title=title or f"{proto or 'all'} frames" + (f" (last {last})" if last else ""),
        xaxis=dict(tickmode="array", tickvals=list(range(len(lanes))), ticktext=lanes, side="top",
                   range=[-0.5, max(len(lanes) - 0.5, 0.5)], showgrid=False, zeroline=False),
        yaxis=dict(autorange="reversed", title="event order" if y == "order" else axis.label_ms,
                   showgrid=False, zeroline=False),
        height=height or max(320, 40 + 22 * len(shown)), margin=dict(l=50, r=20, t=80, b=20),
        legend=dict(orientation="h", y=-0.02, yanchor="top"), hovermode="closest")
    return fig


__all__ = ["FrameHop", "address_book", "frame_name", "match_frames", "lamport_figure", "colour"]
