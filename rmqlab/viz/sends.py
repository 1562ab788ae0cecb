"""Send results and consumption sources over time, from the trace's client operations.

    sends_figure(events)         acknowledged / failed / unknown / in-flight sends per second, by the
                                 broker set that stored them, and the latency of each acknowledged send
    consumption_figure(events)   every pull that returned messages: which broker node served it and
                                 whether that node was a master or a slave then (RocketMQ's
                                 「部署方式」 docs: "Master宕机后，消费者仍然可以从Slave消费");
                                 failed pulls by broker set

Sends are `client` operations f="send" (rmqlab.trace.client_ops); "acknowledged" is
rmqlab.checker's `send_acknowledged` (ok with SEND_OK), any other ok (FLUSH_SLAVE_TIMEOUT,
SLAVE_NOT_AVAILABLE) counts as unknown, as RocketMQ promises nothing for it. An operation still
waiting for its answer when the trace ends is "in flight": not a failure, not a lost answer,
only a question the run ended before (its client was neither stopped nor restarted after it).
The broker set that stored an acknowledged send is the one its result names (`broker_name`);
a send through a Proxy is not told, so the set comes from any pull that returned the message
(its `broker_name`); failing both, the send is counted as acknowledged by an unknown set.

A pull names the broker address that answered (`broker_addr`); the address becomes a node through
the brokers' own REGISTER_BROKER frames, and the node's role at that moment comes from its `role`
events. A pull still in flight when the trace ends (a long poll the broker holds) is no failure.

Faults (`node.*` and `fault.*` events) are drawn as vertical lines so cause and effect line up.
x is rmqlab.viz.timeaxis's: virtual seconds on the simulator, wall-clock seconds since the run
started on the real runtime.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterable

import plotly.graph_objects as go
from plotly.subplots import make_subplots

from rmqlab.checker.checkers import send_acknowledged
from rmqlab.trace import TraceEvent, client_ops
from rmqlab.viz.timeaxis import log_axis, time_axis

MASTER_ROLES = ("SYNC_MASTER", "ASYNC_MASTER", "MASTER")
IN_FLIGHT = "in flight"
# Outcomes other than acknowledged, in the order they stack above the acknowledged bars.
OTHER_OUTCOMES = ("unknown", "failed", IN_FLIGHT)
# A client node's lifecycle events: an operation left pending before one of them was abandoned
# (indeterminate), not in flight.
_LIFECYCLE = ("node.start", "node.stop", "node.kill", "node.crash", "node.restart")
# "in flight" is light and hatched: a question still open, not an answer.
OUTCOME_COLORS = {"unknown": "#ff7f0e", "failed": "#d62728", IN_FLIGHT: "#c7c7c7"}
UNKNOWN_SET = "acknowledged (broker set not reported)"
UNKNOWN_SET_COLOR = "#7f7f7f"
# Broker sets in a fixed color order (broker-a, broker-b, ...), so every figure of a lab agrees.
SET_COLORS = ("#2ca02c", "#1f77b4", "#9467bd", "#8c564b", "#17becf")
FAULT_KINDS = {"node.crash": "crash", "node.kill": "kill", "node.restart": "restart", "node.suspend": "suspend",
               "node.resume": "resume", "fault.partition": "partition", "fault.heal": "heal"}


# --- who is who, from the trace --------------------------------------------------------------------------
def register_frames(events: Iterable[TraceEvent], node: str | None = None) -> list[dict]:
    """The fields of every REGISTER_BROKER request a broker sent (of `node` only, if given)."""
    return [e.fields for e in events if e.kind == "frame.send" and e.fields.get("name") == "REGISTER_BROKER"
            and (node is None or e.node == node)]


def broker_nodes_by_addr(events: Iterable[TraceEvent]) -> dict[str, str]:
    """Broker address (remoting and HA, "host:port") -> node, from the brokers' REGISTER_BROKER frames."""
    out: dict[str, str] = {}
    for e in events:
        if e.kind == "frame.send" and e.fields.get("name") == "REGISTER_BROKER":
            ext = e.fields.get("ext_fields") or {}
            for key in ("brokerAddr", "haServerAddr"):
                if ext.get(key):
                    out[ext[key]] = e.node
    return out


def broker_sets(events: Iterable[TraceEvent]) -> dict[str, str]:
    """Broker node -> its broker set (brokerName), from REGISTER_BROKER frames and `epoch` events."""
    out: dict[str, str] = {}
    for e in events:
        if e.kind == "epoch":
            out[e.node] = e.fields["broker_set"]
        elif e.kind == "frame.send" and e.fields.get("name") == "REGISTER_BROKER":
            name = (e.fields.get("ext_fields") or {}).get("brokerName")
            if name:
                out[e.node] = name
    return out


class Roles:
    """Each broker's role over time (its `role` events of component broker): `at(node, t)` is the
    role it held at virtual time t, None before its first role or while it is down."""

    def __init__(self, events: Iterable[TraceEvent]):
        self._times: dict[str, list[float]] = {}
        self._roles: dict[str, list[str | None]] = {}
        for e in events:
            if e.kind in ("node.kill", "node.crash", "node.stop", "node.restart"):
                self._add(e.node, e.time_ms, None)
            elif e.kind == "role" and e.fields.get("component", "broker") == "broker":
                self._add(e.node, e.time_ms, e.fields.get("to"))

    def _add(self, node: str, t: float, role: str | None) -> None:
        self._times.setdefault(node, []).append(t)
        self._roles.setdefault(node, []).append(role)

    def at(self, node: str, t: float) -> str | None:
        i = bisect.bisect_right(self._times.get(node, []), t)
        return self._roles[node][i - 1] if i else None


def fault_marks(events: Iterable[TraceEvent]) -> list[tuple[float, str]]:
    """(x on the run's time axis (s), label) of every fault and restart, for vertical lines."""
    events = list(events)
    axis = time_axis(events)
    marks = []
    for e in events:
        what = FAULT_KINDS.get(e.kind)
        if what is None:
            continue
        if e.kind.startswith("fault."):
            label = what if e.kind == "fault.heal" else f"partition {' | '.join(','.join(g) for g in e.fields['groups'])}"
        else:
            label = f"{what} {e.node}"
        marks.append((axis.s(e.time_ms), label))
    return marks


def add_fault_lines(fig: go.Figure, events: Iterable[TraceEvent], rows: Iterable[int] = (1,)) -> None:
    """Dotted vertical lines at every fault in each of `rows` (subplot rows; a plain figure: 1), each
    labelled once, at the top of the figure."""
    rows = list(rows)
    for i, (t, label) in enumerate(fault_marks(events)):
        for row in rows:
            kwargs = {"row": row, "col": 1} if len(rows) > 1 or row != 1 else {}
            fig.add_vline(x=t, line_dash="dot", line_color="#555", line_width=1, **kwargs)
        # Labels staggered vertically so faults close in time stay readable.
        fig.add_annotation(x=t, y=1.0 - 0.07 * (i % 3), xref="x", yref="paper", text=label, showarrow=False,
                           xanchor="left", font={"size": 10, "color": "#555"}, bgcolor="rgba(255,255,255,0.7)")


# --- sends -------------------------------------------------------------------------------------------------
def in_flight_ops(events: Iterable[TraceEvent]) -> set[tuple[str, int, int, float]]:
    """The client operations still in flight when the trace ends, as (node, process, op_id,
    invoke time ms): no completion, and their node neither stopped nor restarted after the invoke
    (an operation its client abandoned that way stays indeterminate, rmqlab.trace.history)."""
    events = list(events)
    last_lifecycle: dict[str, float] = {}
    for e in events:
        if e.kind in _LIFECYCLE:
            last_lifecycle[e.node] = e.time_ms
    return {(op.node, op.process, op.op_id, op.invoke_time_ms) for op in client_ops(events)
            if op.complete_time_ms is None and last_lifecycle.get(op.node, float("-inf")) < op.invoke_time_ms}


def send_outcome(op, in_flight: bool = False) -> str:
    """acknowledged, failed, unknown, or (`in_flight`: no answer yet when the trace ends) in flight."""
    if send_acknowledged(op):
        return "acknowledged"
    if op.type == "fail":
        return "failed"
    return IN_FLIGHT if in_flight and op.complete_time_ms is None else "unknown"


def stored_sets(events: Iterable[TraceEvent]) -> dict[str, str]:
    """uniq_key -> the broker set a pull found the message in (its `broker_name`)."""
    out: dict[str, str] = {}
    for op in client_ops(events):
        if op.f == "pull" and op.type == "ok" and isinstance(op.value, dict):
            for m in op.value.get("messages") or []:
                if m.get("uniq_key") and m.get("broker_name"):
                    out.setdefault(m["uniq_key"], m["broker_name"])
    return out


def send_rows(events: Iterable[TraceEvent], topic: str | None = None) -> list[dict]:
    """One row per send: invoke time (s of trace time, time_ms / 1000), outcome, the broker set
    that stored it (None when neither its result nor a pull says), latency (ms)."""
    events = list(events)
    pending = in_flight_ops(events)
    found_in = stored_sets(events)
    rows = []
    for op in client_ops(events):
        if op.f != "send" or not isinstance(op.invoke_value, dict):
            continue
        if topic is not None and op.invoke_value.get("topic") != topic:
            continue
        value = op.value if isinstance(op.value, dict) else {}
        outcome = send_outcome(op, (op.node, op.process, op.op_id, op.invoke_time_ms) in pending)
        uniq_key = op.invoke_value.get("uniq_key")
        broker_set = value.get("broker_name")
        if broker_set is None and outcome == "acknowledged":
            broker_set = found_in.get(uniq_key)
        rows.append({"node": op.node, "time_s": op.invoke_time_ms / 1000.0, "outcome": outcome,
                     "broker_set": broker_set, "uniq_key": uniq_key,
                     "latency_ms": None if op.complete_time_ms is None else op.complete_time_ms - op.invoke_time_ms})
    return rows


def send_series(rows: list[dict], colors: dict[str, str]) -> list[tuple[str, str, list[dict]]]:
    """(legend name, color, rows) for every outcome a send can have, acknowledged ones split by
    broker set (`colors`: set -> color): together they hold every row exactly once, so a figure
    drawing all of them shows what a table of the same rows counts."""
    acked = [r for r in rows if r["outcome"] == "acknowledged"]
    series = [(f"acknowledged by {s}", colors[s], [r for r in acked if r["broker_set"] == s]) for s in colors]
    series.append((UNKNOWN_SET, UNKNOWN_SET_COLOR, [r for r in acked if r["broker_set"] not in colors]))
    series += [(o, OUTCOME_COLORS[o], [r for r in rows if r["outcome"] == o]) for o in OTHER_OUTCOMES]
    return series


def _bar_style(name: str) -> dict:
    """In-flight bars hatched, so they never read as one of the answered outcomes."""
    return {"pattern": {"shape": "/", "fgcolor": "#7f7f7f"}} if name == IN_FLIGHT else {}


def _bins(times: list[float], width: float) -> dict[float, int]:
    out: dict[float, int] = {}
    for t in times:
        b = int(t // width) * width
        out[b] = out.get(b, 0) + 1
    return out


def sends_figure(events: list[TraceEvent], *, topic: str | None = None, bin_s: float = 1.0,
                 title: str = "Send results") -> go.Figure:
    """Top: sends per `bin_s` by outcome (acknowledged ones by the broker set that stored them).
    Bottom: the latency of every acknowledged send (ms, log scale). x: the run's time axis."""
    events = list(events)
    axis = time_axis(events)
    rows = send_rows(events, topic)
    fig = make_subplots(rows=2, cols=1, shared_xaxes=True, vertical_spacing=0.08, row_heights=[0.55, 0.45],
                        subplot_titles=(f"sends per {bin_s:g} s, by outcome", "latency of acknowledged sends"))
    sets = sorted({r["broker_set"] for r in rows if r["outcome"] == "acknowledged" and r["broker_set"]})
    colors = {s: SET_COLORS[i % len(SET_COLORS)] for i, s in enumerate(sets)}
    for name, color, rs in send_series(rows, colors):
        if not rs and name in (UNKNOWN_SET, IN_FLIGHT):
            continue  # the rare outcomes get a trace only when they happened; the others always do
        counts = _bins([axis.from_trace_s(r["time_s"]) for r in rs], bin_s)
        xs = sorted(counts)
        fig.add_trace(go.Bar(x=[x + bin_s / 2 for x in xs], y=[counts[x] for x in xs], name=name, width=bin_s,
                             marker={"color": color, **_bar_style(name)}, legendgroup=name, showlegend=bool(rs)),
                      row=1, col=1)
    acked = [r for r in rows if r["outcome"] == "acknowledged"]
    for name, color, rs in send_series(acked, colors):
        if not rs:
            continue
        fig.add_trace(go.Scatter(x=[axis.from_trace_s(r["time_s"]) for r in rs], y=[r["latency_ms"] for r in rs],
                                 mode="markers", marker={"size": 4, "color": color}, name=name,
                                 legendgroup=name, showlegend=False), row=2, col=1)
    fig.update_layout(barmode="stack", bargap=0, title=title, height=480, margin={"t": 70, "b": 40},
                      legend={"orientation": "h", "y": -0.12})
    fig.update_yaxes(title_text="sends", row=1, col=1)
    fig.update_yaxes(title_text="ms", row=2, col=1, **log_axis(r["latency_ms"] for r in acked))
    fig.update_xaxes(title_text=axis.label, row=2, col=1)
    add_fault_lines(fig, events, rows=(1, 2))
    return fig


# --- consumption ---------------------------------------------------------------------------------------------
def pull_rows(events: list[TraceEvent], consumers: Iterable[str] | None = None,
              topic: str | None = None) -> list[dict]:
    """One row per pull: consumer node, time (s of trace time), outcome (ok/fail/info, or "in
    flight": no answer yet when the trace ends), messages found, the broker set pulled, the node
    that answered and its role then ("master"/"slave", None if unknown)."""
    events = list(events)
    wanted = set(consumers) if consumers is not None else None
    by_addr = broker_nodes_by_addr(events)
    roles = Roles(events)
    pending = in_flight_ops(events)
    rows = []
    for op in client_ops(events):
        if op.f != "pull" or (wanted is not None and op.node not in wanted):
            continue
        args = op.invoke_value if isinstance(op.invoke_value, dict) else {}
        if topic is not None and args.get("topic") != topic:
            continue
        value = op.value if isinstance(op.value, dict) else {}
        addr = value.get("broker_addr")
        server = by_addr.get(addr, addr) if addr else None
        t = op.complete_time_ms if op.complete_time_ms is not None else op.invoke_time_ms
        role = roles.at(server, t) if server else None
        outcome = IN_FLIGHT if (op.node, op.process, op.op_id, op.invoke_time_ms) in pending else op.type
        rows.append({"node": op.node, "time_s": t / 1000.0, "outcome": outcome, "broker_set": args.get("broker_name"),
                     "messages": len(value.get("messages") or []), "server": server,
                     "server_role": None if role is None else ("master" if role in MASTER_ROLES else "slave")})
    return rows


def consumption_sources(events: list[TraceEvent], consumers: Iterable[str] | None = None,
                        topic: str | None = None) -> dict[tuple[str, str], int]:
    """(server node, "master"/"slave") -> messages consumers got from it."""
    out: dict[tuple[str, str], int] = {}
    for r in pull_rows(events, consumers, topic):
        if r["outcome"] == "ok" and r["messages"] and r["server"]:
            key = (r["server"], r["server_role"] or "unknown")
            out[key] = out.get(key, 0) + r["messages"]
    return out


def consumption_figure(events: list[TraceEvent], *, consumers: Iterable[str] | None = None,
                       topic: str | None = None, title: str = "Where consumers read from") -> go.Figure:
    """One marker per pull that found messages, on the row of the broker node that served it,
    colored master/slave (its role at that moment), sized by the messages it returned; pulls that
    failed or timed out on a row of their own per broker set. Pulls still in flight when the trace
    ends are no failure: they are left out (a long-polling pull waits at the broker by design)."""
    events = list(events)
    axis = time_axis(events)
    rows = pull_rows(events, consumers, topic)
    found = [r for r in rows if r["outcome"] == "ok" and r["messages"]]
    failed = [r for r in rows if r["outcome"] in ("fail", "info")]
    fig = go.Figure()
    styles = {"master": ("#2ca02c", "circle"), "slave": ("#1f77b4", "diamond"), "unknown": ("#7f7f7f", "circle")}
    for role, (color, symbol) in styles.items():
        rs = [r for r in found if (r["server_role"] or "unknown") == role]
        if not rs:
            continue
        fig.add_trace(go.Scatter(
            x=[axis.from_trace_s(r["time_s"]) for r in rs], y=[r["server"] for r in rs], mode="markers",
            name=f"read from a {role}",
            marker={"color": color, "symbol": symbol, "size": [min(4 + r["messages"], 16) for r in rs]},
            customdata=[[r["node"], r["messages"]] for r in rs],
            hovertemplate="%{customdata[0]}: %{customdata[1]} messages from %{y} at %{x:.1f} s<extra></extra>"))
    if failed:
        fig.add_trace(go.Scatter(
            x=[axis.from_trace_s(r["time_s"]) for r in failed], y=[f"{r['broker_set']}: pull failed" for r in failed],
            mode="markers", name="pull failed / timed out",
            marker={"color": OUTCOME_COLORS["failed"], "symbol": "x", "size": 7}))
    servers = sorted({r["server"] for r in found})
    fails = sorted({f"{r['broker_set']}: pull failed" for r in failed})
    fig.update_yaxes(categoryorder="array", categoryarray=list(reversed(servers + fails)), title_text="served by")
    fig.update_xaxes(title_text=axis.label)
    fig.update_layout(title=title, height=max(260, 80 + 40 * (len(servers) + len(fails))),
                      margin={"t": 60, "b": 40}, legend={"orientation": "h", "y": -0.25})
    add_fault_lines(fig, events)
    return fig


def sends_by_mode_figure(traces: dict[str, list[TraceEvent]], *, topic: str | None = None, bin_s: float = 2.0,
                         title: str | None = None) -> go.Figure:
    """Several runs of the same schedule side by side, one row per run (label -> its trace):
    sends per `bin_s` by outcome, acknowledged ones by broker set, x measured from the run's first
    `node.crash` (0 = the crash; its node.restart is marked)."""
    labels = list(traces)
    fig = make_subplots(rows=len(labels), cols=1, shared_xaxes=True, vertical_spacing=0.02,
                        row_titles=labels)
    shown: set[str] = set()
    sends = {label: send_rows(events, topic) for label, events in traces.items()}
    all_sets = sorted({r["broker_set"] for rows in sends.values() for r in rows
                       if r["outcome"] == "acknowledged" and r["broker_set"]})
    colors = {s: SET_COLORS[i % len(SET_COLORS)] for i, s in enumerate(all_sets)}
    for row, label in enumerate(labels, start=1):
        events = traces[label]
        crash = next((e for e in events if e.kind == "node.crash"), None)
        zero = crash.time_ms / 1000.0 if crash else 0.0
        restart = next((e for e in events if e.kind == "node.restart" and crash and e.node == crash.node), None)
        rows = sends[label]
        for name, color, rs in send_series(rows, colors):
            if not rs:
                continue
            counts = _bins([r["time_s"] - zero for r in rs], bin_s)
            xs = sorted(counts)
            fig.add_trace(go.Bar(x=[x + bin_s / 2 for x in xs], y=[counts[x] for x in xs], name=name, width=bin_s,
                                 marker={"color": color, **_bar_style(name)}, legendgroup=name,
                                 showlegend=name not in shown), row=row, col=1)
            shown.add(name)
        if crash:
            fig.add_vline(x=0, line_dash="dot", line_color="#d62728", row=row, col=1)
        if restart:
            fig.add_vline(x=restart.time_ms / 1000.0 - zero, line_dash="dot", line_color="#2ca02c", row=row, col=1)
    height = 110 * len(labels) + 160
    # The legend a fixed 60 px under the plot, below the x axis' title, whatever the number of rows.
    fig.update_layout(barmode="stack", bargap=0, title=title, height=height, margin={"t": 60, "b": 80, "r": 150},
                      legend={"orientation": "h", "yanchor": "top", "y": -60 / (height - 140)})
    fig.update_annotations(font_size=10)
    # Row titles written across, beside their row: plotly's default (rotated 90°) makes the long
    # labels of neighbouring rows run into each other.
    fig.for_each_annotation(lambda a: a.update(textangle=0, xanchor="left", xshift=4),
                            selector=lambda a: a.text in labels)
    clock = "wall-clock" if any(time_axis(events).real for events in traces.values()) else "virtual"
    fig.update_layout(title=title or f"Sends per {bin_s:g} s around the crash, by outcome")
    fig.update_xaxes(title_text=f"{clock} seconds since the master's machine crashed (red); green: it is back",
                     row=len(labels), col=1)
    return fig
