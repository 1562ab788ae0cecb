"""Lab 05's figures: slave acting master (RIP-32), from the trace (rmqlab.demo.acting_master's readers).

    acting_timeline_figure(events)   one group's story on one time axis: which node the name server's
                                     route lists as brokerId 0 and whether its queues are writeable,
                                     the NOTIFY_MIN_BROKER_ID_CHANGE notices, and which broker runs the
                                     special services (delay levels, timer dequeue, POP revive)
    delayed_figure(runs)             each delayed message: when it was due and when the consumer got
                                     it, for runs with RIP-32 on and off

x is rmqlab.viz.timeaxis's (virtual seconds on the simulator); faults are dotted vertical lines.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass

import plotly.graph_objects as go

from rmqlab.common.constant.perm_name import PermName
from rmqlab.remoting.request_code import RequestCode
from rmqlab.trace import TraceEvent, client_ops
from rmqlab.viz.sends import SET_COLORS, add_fault_lines, broker_nodes_by_addr
from rmqlab.viz.timeaxis import time_axis

ROUTE_OP = "route"        # rmqlab.demo.route_watcher's operations
DELAYED_KEYS = "delayed-"  # the keys of rmqlab.demo.acting_master's delayed messages: "delayed-<i>"
DELAY_MS = 10_000          # their delay level 3 (messageDelayLevel "1s 5s 10s ...")
SPECIAL_MACHINE, MIN_MACHINE = "BrokerController.specialService", "BrokerController.minBrokerIdInGroup"
NO_MASTER = "no brokerId 0"
_PROCESS_ENDS = ("node.kill", "node.crash", "node.stop")
NOBODY_COLOR = "#d62728"


@dataclass(frozen=True)
class RouteView:
    """One answer: at `t_ms`, group `broker_name` listed `ids` (broker id -> address) with `perm`."""

    t_ms: float
    node: str
    broker_name: str
    ids: dict[int, str]
    perm: int | None

    @property
    def master_addr(self) -> str | None:
        """The address clients take for the group's master (id 0), if any."""
        return self.ids.get(0)


def routes(events, node: str | None = None) -> list[RouteView]:
    """Every group of every successful route answer in `events` (of watcher `node`, or all), in
    trace order."""
    out: list[RouteView] = []
    for op in client_ops(events):
        if op.f != ROUTE_OP or op.type != "ok" or (node is not None and op.node != node):
            continue
        for name, group in op.value["groups"].items():
            out.append(RouteView(op.complete_time_ms, op.node, name, {int(i): a for i, a in group["ids"].items()}, group["perm"]))
    return out


# --- readers: facts from a trace --------------------------------------------------------------------------------
def node_names(events: list[TraceEvent]) -> dict[str, str]:
    """broker address -> node name (from the brokers' REGISTER_BROKER frames)."""
    return broker_nodes_by_addr(events)


def route_changes(events: list[TraceEvent], broker_name: str = "broker-a") -> list[tuple[float, str | None, int | None]]:
    """(time, node listed as brokerId 0 or None, queue perm) each time the watcher's answer for
    `broker_name` changed."""
    names = node_names(events)
    out: list[tuple[float, str | None, int | None]] = []
    last = object()
    for view in routes(events):
        if view.broker_name != broker_name:
            continue
        key = (view.master_addr, view.perm)
        if key != last:
            out.append((view.t_ms, names.get(view.master_addr, view.master_addr), view.perm))
            last = key
    return out


def notices(events: list[TraceEvent]) -> list[tuple[float, str, dict]]:
    """The name server's NOTIFY_MIN_BROKER_ID_CHANGE frames: (time, target node, header fields)."""
    names = node_names(events)
    return [(e.time_ms, names.get(e.fields["peer"], e.fields["peer"]), e.fields.get("ext_fields", {}))
            for e in events if e.kind == "frame.send" and e.fields.get("code") == RequestCode.NOTIFY_MIN_BROKER_ID_CHANGE
            and not e.fields.get("flag", 0) & 1]


def service_changes(events: list[TraceEvent]) -> list[tuple[float, str, str]]:
    """(time, broker node, RUNNING or STOPPED) for each start or stop of the special services
    (delay-level delivery, timer dequeue, POP revive) that slave acting master moved."""
    return [(e.time_ms, e.node, e.fields["to"]) for e in events
            if e.kind == "state" and e.fields.get("machine") == SPECIAL_MACHINE]


@dataclass(frozen=True)
class DelayedDelivery:
    keys: str
    acked_ms: float            # the send's acknowledgement
    due_ms: float              # acked_ms + DELAY_MS
    consumed_ms: float | None  # the first consumption, or None


def delayed_deliveries(events: list[TraceEvent]) -> list[DelayedDelivery]:
    """Each acknowledged delayed message (keys "delayed-<i>"): when it was due and when the
    consumer first got it."""
    ops = client_ops(events)
    first: dict[str, float] = {}
    for op in ops:
        if op.f == "consume" and op.type == "ok":
            keys = (op.invoke_value or {}).get("keys") or ""
            if keys.startswith(DELAYED_KEYS) and keys not in first:
                first[keys] = op.invoke_time_ms
    out = []
    for op in ops:
        if op.f == "send" and op.type == "ok" and ((op.invoke_value or {}).get("keys") or "").startswith(DELAYED_KEYS):
            keys = op.invoke_value["keys"]
            out.append(DelayedDelivery(keys, op.complete_time_ms, op.complete_time_ms + DELAY_MS, first.get(keys)))
    return sorted(out, key=lambda d: d.keys)


def consumed_twice(events: list[TraceEvent]) -> int:
    """Messages (by UNIQ_KEY) the consumer group consumed more than once: what rolled-back
    metadata costs (a returning master's older delay offsets deliver delayed messages again; its
    older consumer offsets make a consumer that reads them consume again)."""
    counts = Counter((op.invoke_value or {}).get("uniq_key") for op in client_ops(events)
                     if op.f == "consume" and op.type == "ok")
    counts.pop(None, None)
    return sum(1 for n in counts.values() if n > 1)


# --- figures ---------------------------------------------------------------------------------------------------
def _segments(changes: list[tuple[float, object]], end_ms: float) -> list[tuple[float, float, object]]:
    """[(from, to, value)] of a step function given as (time, value) changes."""
    out = []
    for i, (t, value) in enumerate(changes):
        until = changes[i + 1][0] if i + 1 < len(changes) else end_ms
        if until > t:
            out.append((t, until, value))
    return out


def acting_timeline_figure(events: list[TraceEvent], *, broker_name: str = "broker-a",
                           members: tuple[str, ...] = ("broker-a", "broker-a-s1", "broker-a-s2"),
                           title: str | None = None) -> go.Figure:
    """Rows, top to bottom: "route: brokerId 0" (which node clients take for `broker_name`'s master,
    labelled with the queue perm they were given, R/W), then one row per member with the time its
    special services ran, and a marker for each NOTIFY_MIN_BROKER_ID_CHANGE it was sent."""
    events = list(events)
    axis = time_axis(events)
    end_ms = events[-1].time_ms if events else 0.0
    colors = {m: SET_COLORS[i % len(SET_COLORS)] for i, m in enumerate(members)}
    route_row, rows = "route: brokerId 0", [f"{m}: special services" for m in members]
    fig = go.Figure()
    shown: set[str] = set()
    for start, stop, (node, perm) in _segments([(t, (n, p)) for t, n, p in route_changes(events, broker_name)], end_ms):
        name = node or NO_MASTER
        perm_text = PermName.perm2string(perm) if perm is not None else "?"
        fig.add_trace(go.Bar(
            x=[axis.s(stop) - axis.s(start)], base=[axis.s(start)], y=[route_row], orientation="h",
            marker={"color": colors.get(node, NOBODY_COLOR), "pattern": {"shape": "" if PermName.is_writeable(perm or 0)
                                                                           else "/"}},
            name=f"{name} (queues {perm_text})", legendgroup=name, showlegend=name not in shown,
            hovertemplate=f"{name}, perm {perm_text}<br>%{{base:.2f}} s for %{{x:.2f}} s<extra></extra>"))
        shown.add(name)
    # Special services: RUNNING intervals per member; a process that dies stops them without a
    # state event of its own.
    running: dict[str, float] = {}
    gone = [(e.time_ms, e.node, "STOPPED") for e in events if e.kind in _PROCESS_ENDS and e.node in colors]
    changes = sorted(service_changes(events) + gone, key=lambda c: c[0])
    for t, node, to in changes + [(end_ms, m, "END") for m in members]:
        if node not in colors:
            continue
        if to == "RUNNING" and node not in running:
            running[node] = t
        elif to in ("STOPPED", "END") and node in running:
            start = running.pop(node)
            fig.add_trace(go.Bar(x=[axis.s(t) - axis.s(start)], base=[axis.s(start)], y=[f"{node}: special services"],
                                 orientation="h", marker={"color": colors[node]}, name=f"{node} runs them",
                                 showlegend=False,
                                 hovertemplate=f"{node} runs the special services<br>%{{base:.2f}} s for "
                                               f"%{{x:.2f}} s<extra></extra>"))
    # Only brokers with enableSlaveActingMaster trace their starts and stops; without it the master
    # runs the services while it is up, which no event says: the figure says so rather than
    # showing empty rows as "nobody".
    if not any(node in colors for _, node, _ in service_changes(events)):
        fig.add_annotation(x=0.5, y=0.45, xref="paper", yref="paper", showarrow=False,
                           text="no start or stop of the special services in this trace (without slave acting "
                                "master, the master runs them while it is up)",
                           font={"size": 11, "color": "#555"}, bgcolor="rgba(255,255,255,0.8)")
    sent = [(t, node, fields) for t, node, fields in notices(events) if node in colors]
    if sent:
        fig.add_trace(go.Scatter(
            x=[axis.s(t) for t, _, _ in sent], y=[f"{node}: special services" for _, node, _ in sent], mode="markers",
            marker={"symbol": "triangle-down", "size": 11, "color": "#333"}, name="NOTIFY_MIN_BROKER_ID_CHANGE",
            text=[f"minBrokerId {f.get('minBrokerId')}, offline {f.get('offlineBrokerAddr') or '-'}" for _, _, f in sent],
            hovertemplate="%{text}<br>at %{x:.3f} s<extra></extra>"))
    fig.update_layout(barmode="overlay", title=title or f"{broker_name}: who clients take for its master, and "
                      "who runs its special services", height=330, margin={"t": 70, "b": 40, "l": 200},
                      legend={"orientation": "h", "y": -0.25})
    fig.update_yaxes(categoryorder="array", categoryarray=list(reversed([route_row, *rows])))
    fig.update_xaxes(title_text=axis.label)
    add_fault_lines(fig, events)
    return fig


def delayed_figure(runs: Mapping[str, list[TraceEvent]], *, title: str = "Delayed messages: due, and consumed") -> go.Figure:
    """For each run (label -> trace) and each delayed message: a line from when it was due (send
    acknowledged + the level's delay) to when the consumer first got it; a message never consumed
    in the run ends in a cross at the run's end."""
    fig = go.Figure()
    for i, (label, events) in enumerate(runs.items()):
        events = list(events)
        axis = time_axis(events)
        end_s = axis.s(events[-1].time_ms) if events else 0.0
        color = SET_COLORS[i % len(SET_COLORS)]
        xs, ys, late = [], [], []
        for d in delayed_deliveries(events):
            y = f"{d.keys} ({label})"
            got = axis.s(d.consumed_ms) if d.consumed_ms is not None else end_s
            xs += [axis.s(d.due_ms), got, None]
            ys += [y, y, None]
            late.append((y, got, d.consumed_ms is None, axis.s(d.due_ms)))
        fig.add_trace(go.Scatter(x=xs, y=ys, mode="lines", line={"color": color, "width": 3}, name=label,
                                 legendgroup=label, hoverinfo="skip"))
        fig.add_trace(go.Scatter(x=[g for _, g, _, _ in late], y=[y for y, _, _, _ in late], mode="markers",
                                 marker={"symbol": ["x" if never else "circle" for _, _, never, _ in late],
                                         "size": 9, "color": color}, legendgroup=label, showlegend=False,
                                 text=[("not consumed by the end" if never else f"{g - due:.1f} s after due")
                                       for _, g, never, due in late],
                                 hovertemplate="%{y}: %{text}<extra></extra>"))
    first = next(iter(runs.values()), [])
    fig.update_layout(title=title, height=120 + 22 * sum(len(delayed_deliveries(list(e))) for e in runs.values()),
                      margin={"t": 70, "b": 40, "l": 230}, legend={"orientation": "h", "y": -0.15})
    fig.update_xaxes(title_text=time_axis(list(first)).label if first else "time (s)")
    fig.update_yaxes(autorange="reversed")
    if first:
        add_fault_lines(fig, first)
    return fig


__all__ = ["ROUTE_OP", "RouteView", "routes", "route_changes", "notices", "service_changes", "DelayedDelivery",
           "delayed_deliveries", "consumed_twice", "acting_timeline_figure", "delayed_figure"]
