"""The cluster's topology at a moment of its trace: every node with its role and state, the links
between them, network partitions visible as cut links.

    topology_figure(events)            a static go.Figure (the end of the trace; or at=...)
    topology(events)                   the same as data: Topology(nodes, links)
    redraw(widget, figure)             replace a go.FigureWidget's content in place (live sections)

From the trace only: `node.*` events say who is up, crashed, killed, suspended; `role` events a
broker's role (SYNC_MASTER, SLAVE ...) and a controller's Raft role; REGISTER_BROKER frames and
`epoch` events which broker set a broker belongs to; `net.connect` / `net.accept` events who has
talked to whom (a link is drawn once two nodes had a connection); `fault.partition` /
`fault.heal` events which links a partition cuts.

Layout: the control plane (name servers, controllers) on top, the broker sets in the middle (a
box per set, named after its brokerName), clients and proxies at the bottom; every row in name
order, so the same trace always gives the same picture.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

import plotly.graph_objects as go

from rmqlab.trace import TraceEvent
from rmqlab.viz.sends import MASTER_ROLES, broker_sets
from rmqlab.viz.timeaxis import time_axis
from rmqlab.viz.trace_views import describe_state, node_states

ROWS = {"namesrv": 2, "controller": 2, "broker": 1, "proxy": 0, "client": 0}
# Node categories, in legend order: (name, color, marker symbol).
CATEGORIES = {
    "master": ("#2ca02c", "circle"),
    "slave": ("#1f77b4", "circle"),
    "controller leader": ("#ffbf00", "star"),
    "controller": ("#bcbd22", "circle"),
    "name server": ("#7f7f7f", "square"),
    "proxy": ("#e377c2", "square"),
    "client": ("#9467bd", "triangle-up"),
    "suspended": ("#ff7f0e", "diamond"),
    "down": ("#c7c7c7", "x"),
}
HIDDEN = ("mqadmin",)   # rmqlab.cluster.ADMIN_NODE: `create_topic`'s admin tool, not part of the deployment
LINK_STYLES = {"up": ("#b0b0b0", "solid", 1.2), "ha": ("#2ca02c", "solid", 2.5),
               "down": ("#dddddd", "dot", 1.0), "cut": ("#d62728", "dash", 2.0)}


@dataclass(frozen=True)
class NodeView:
    name: str
    component: str            # namesrv, controller, broker, proxy, client
    broker_set: str | None
    category: str             # a key of CATEGORIES
    label: str                # its state in words ("SYNC_MASTER", "down: crash (was SLAVE)")
    x: float
    y: float


@dataclass(frozen=True)
class Link:
    a: str
    b: str
    state: str                # "up", "ha" (a replication link), "down" (an end is down), "cut" (partitioned)


@dataclass(frozen=True)
class Topology:
    time_ms: float
    nodes: dict[str, NodeView]
    links: list[Link]
    partitions: list[list[list[str]]]   # the active partitions' groups


def _addresses(events: list[TraceEvent]) -> dict[str, str]:
    """"host:port" -> node: a listener's address (net.accept `local`) and a connector's own end."""
    out: dict[str, str] = {}
    for e in events:
        if e.kind in ("net.accept", "net.connect") and e.fields.get("local"):
            out[e.fields["local"]] = e.node
    return out


def _active_partitions(events: list[TraceEvent]) -> list[list[list[str]]]:
    active: dict[int, list[list[str]]] = {}
    for i, e in enumerate(events):
        if e.kind == "fault.partition":
            active[e.fields.get("fault_id", -1 - i)] = e.fields["groups"]
        elif e.kind == "fault.heal" and e.fields.get("fault") in ("partition", "all"):
            if "fault_id" in e.fields and e.fields["fault_id"] in active:
                del active[e.fields["fault_id"]]
            else:
                active.clear()
    return [active[k] for k in sorted(active)]


def _cut(partitions: list[list[list[str]]], a: str, b: str) -> bool:
    for groups in partitions:
        side = {n: i for i, g in enumerate(groups) for n in g}
        if a in side and b in side and side[a] != side[b]:
            return True
    return False


def _category(component: str, state: dict) -> str:
    if not state["up"]:
        return "down"
    if state["suspended"]:
        return "suspended"
    role = state["role"] or ""
    if component == "broker":
        return "master" if role in MASTER_ROLES else "slave"
    if component in ("controller", "namesrv") and role:
        return "controller leader" if role == "LEADER" else "controller"
    if component == "namesrv":
        return "name server"
    return component if component in CATEGORIES else "client"


def topology(events: Iterable[TraceEvent], at_ms: float | None = None, hide: Iterable[str] = HIDDEN) -> Topology:
    """The topology after the events up to `at_ms` (default: all of them). Clients that finished
    or were stopped (`node.stop`) are left out: they are gone, not failed; so are the nodes in
    `hide` (by default the Cluster's admin tool)."""
    hidden = set(hide)
    events = [e for e in events if at_ms is None or e.time_ms <= at_ms]
    states = node_states(events)
    components: dict[str, str] = {}
    stopped: set[str] = set()
    for e in events:
        if e.kind == "node.start":
            components[e.node] = e.fields.get("component", "client")
            stopped.discard(e.node)
        elif e.kind == "node.stop":
            stopped.add(e.node)
    sets = broker_sets(events)
    names = [n for n in sorted(components) if n in states and n not in hidden
             and not (components[n] in ("client", "proxy") and n in stopped)]
    rows: dict[int, list[str]] = {}
    for n in names:
        rows.setdefault(ROWS.get(components[n], 0), []).append(n)
    # Brokers: by broker set, then name.
    if 1 in rows:
        rows[1].sort(key=lambda n: (sets.get(n, "~"), n))
    width = max((len(r) for r in rows.values()), default=1)
    nodes = {}
    for y, members in rows.items():
        offset = (width - len(members)) / 2
        for i, n in enumerate(members):
            nodes[n] = NodeView(n, components[n], sets.get(n) if components[n] == "broker" else None,
                                _category(components[n], states[n]), describe_state(states[n]), offset + i, float(y))
    partitions = _active_partitions(events)
    addrs = _addresses(events)
    pairs: set[tuple[str, str]] = set()
    ha: set[tuple[str, str]] = set()
    for e in events:
        if e.kind in ("net.connect", "net.accept") or (e.kind == "frame.send" and e.fields.get("proto") == "ha"):
            peer = e.fields.get("peer")
            peer = addrs.get(peer, peer)
            if peer in nodes and e.node in nodes and peer != e.node:
                pair = tuple(sorted((e.node, peer)))
                pairs.add(pair)
                if e.kind == "frame.send":
                    ha.add(pair)
    links = []
    for a, b in sorted(pairs):
        if _cut(partitions, a, b):
            state = "cut"
        elif nodes[a].category in ("down", "suspended") or nodes[b].category in ("down", "suspended"):
            state = "down"
        else:
            state = "ha" if (a, b) in ha else "up"
        links.append(Link(a, b, state))
    return Topology(events[-1].time_ms if events else 0.0, nodes, links, partitions)


def topology_figure(events: Iterable[TraceEvent], at_ms: float | None = None, *, title: str | None = None,
                    height: int = 380, hide: Iterable[str] = HIDDEN) -> go.Figure:
    """The topology as a figure: nodes colored by role and state, links (green: replication;
    dotted: an end is down or suspended; red dashed: cut by a partition), a box per broker set."""
    events = list(events)
    topo = topology(events, at_ms, hide)
    fig = go.Figure()
    for state in ("up", "ha", "down", "cut"):
        xs: list[float | None] = []
        ys: list[float | None] = []
        for link in topo.links:
            if link.state == state:
                a, b = topo.nodes[link.a], topo.nodes[link.b]
                xs += [a.x, b.x, None]
                ys += [a.y, b.y, None]
        color, dash, width = LINK_STYLES[state]
        names = {"up": "link", "ha": "replication link", "down": "link to a node that is down",
                 "cut": "cut by a partition"}
        fig.add_trace(go.Scatter(x=xs, y=ys, mode="lines", line={"color": color, "dash": dash, "width": width},
                                 name=names[state], hoverinfo="skip", showlegend=bool(xs)))
    for category, (color, symbol) in CATEGORIES.items():
        members = [n for n in topo.nodes.values() if n.category == category]
        fig.add_trace(go.Scatter(
            x=[n.x for n in members], y=[n.y for n in members], mode="markers+text", name=category,
            marker={"color": color, "symbol": symbol, "size": 22, "line": {"color": "#333", "width": 1}},
            text=[f"<b>{n.name}</b><br>{n.label}" for n in members], textposition="bottom center",
            textfont={"size": 10}, hovertext=[f"{n.name}: {n.label}" for n in members], hoverinfo="text",
            showlegend=bool(members)))
    by_set: dict[str, list[NodeView]] = {}
    for n in topo.nodes.values():
        if n.broker_set:
            by_set.setdefault(n.broker_set, []).append(n)
    for name in sorted(by_set):
        xs = [n.x for n in by_set[name]]
        fig.add_shape(type="rect", x0=min(xs) - 0.45, x1=max(xs) + 0.45, y0=0.5, y1=1.3, line={"color": "#999",
                      "dash": "dot"}, fillcolor="rgba(200,200,200,0.12)", layer="below")
        fig.add_annotation(x=(min(xs) + max(xs)) / 2, y=1.3, text=f"broker set {name}", showarrow=False,
                           yanchor="bottom", font={"size": 11, "color": "#555"})
    if topo.partitions:
        text = "; ".join(" | ".join(",".join(g) for g in groups) for groups in topo.partitions)
        fig.add_annotation(x=0, y=-0.55, xref="paper", yref="y", text=f"partition: {text}", showarrow=False,
                           xanchor="left", font={"color": LINK_STYLES["cut"][0]})
    xs = [n.x for n in topo.nodes.values()] or [0.0]
    fig.update_xaxes(visible=False, range=[min(xs) - 0.8, max(xs) + 0.8])
    fig.update_yaxes(visible=False, range=[-0.7, 2.5])
    axis = time_axis(events)
    fig.update_layout(title=title or f"Cluster at t = {axis.s(topo.time_ms):.1f} {axis.unit}", height=height,
                      margin={"t": 50, "b": 10, "l": 10, "r": 10}, plot_bgcolor="white",
                      legend={"orientation": "h", "y": -0.02})
    return fig
