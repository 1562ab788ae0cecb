"""What a transactional producer and an orderly consumer keep through a master failure, per mode,
from the traces of workloads run under the same fault (lab 01).

Transactions: a producer's `transaction` operation names its half message (`uniq_key`, the
transaction id); the brokers' ``state`` events of machine ``TransactionalMessage.half`` say when it
was ended (COMMITTED / ROLLED_BACK by END_TRANSACTION — the producer's, or its answer to a check —
or DISCARDED when the checks ran out). Between the two the transaction is *waiting*: its message is
stored but no consumer can see it. A transaction COMMITTED twice (by two brokers: RIP-32's escape
sends a half message a returning master still holds) is delivered twice.

Orderly consumption: the consumers' orderly `consume` operations (rmqlab.checker.order judges
their order). Times are seconds since the workload's t=0 (its ``workload.start`` event), so runs
whose clusters took different times to start share one axis.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

import plotly.graph_objects as go
from plotly.subplots import make_subplots

from rmqlab.trace import TraceEvent, client_ops
from rmqlab.viz.sends import FAULT_KINDS, SET_COLORS

HALF_MACHINE = "TransactionalMessage.half"
ENDED = ("COMMITTED", "ROLLED_BACK", "DISCARDED")


def workload_t0(events: list[TraceEvent]) -> float:
    return next((e.time_ms for e in events if e.kind == "workload.start"), events[0].time_ms if events else 0.0)


@dataclass(frozen=True)
class Transaction:
    uniq_key: str
    begun_ms: float
    ended_ms: float | None     # the first COMMITTED / ROLLED_BACK / DISCARDED, None: never in the run
    outcome: str | None
    commits: int               # COMMITTED events (2: delivered twice)
    ended_by: str | None       # the broker node that ended it


def transactions(events: Iterable[TraceEvent]) -> list[Transaction]:
    events = list(events)
    ends: dict[str, list[TraceEvent]] = {}
    for e in events:
        if e.kind == "state" and e.fields.get("machine") == HALF_MACHINE and e.fields.get("to") in ENDED:
            ends.setdefault(e.fields.get("uniq_key"), []).append(e)
    out = []
    for op in client_ops(events):
        if op.f != "transaction" or not isinstance(op.invoke_value, dict) or op.type not in ("ok", "info"):
            continue
        if not isinstance(op.value, dict) or op.value.get("send_status") != "SEND_OK":
            continue  # the half message was not stored: no transaction to wait for
        key = op.invoke_value.get("uniq_key")
        mine = ends.get(key, [])
        first = mine[0] if mine else None
        out.append(Transaction(key, op.invoke_time_ms, first.time_ms if first else None,
                               first.fields.get("to") if first else None,
                               sum(e.fields.get("to") == "COMMITTED" for e in mine), first.node if first else None))
    return out


def waiting_series(txs: list[Transaction], t0_ms: float, end_ms: float) -> tuple[list[float], list[int]]:
    """A step series: transactions begun and not yet ended, at every change (seconds since t0)."""
    changes: list[tuple[float, int]] = [(t.begun_ms, 1) for t in txs]
    changes += [(t.ended_ms, -1) for t in txs if t.ended_ms is not None]
    xs, ys, n = [0.0], [0], 0
    for t, d in sorted(changes):
        n += d
        xs.append((t - t0_ms) / 1000)
        ys.append(n)
    xs.append((end_ms - t0_ms) / 1000)
    ys.append(n)
    return xs, ys


def orderly_consume_times(events: Iterable[TraceEvent]) -> list[float]:
    return [op.invoke_time_ms for op in client_ops(list(events)) if op.f == "consume" and op.type == "ok"
            and isinstance(op.invoke_value, dict) and op.invoke_value.get("orderly")]


def orderly_waits(events: Iterable[TraceEvent]) -> dict[str, float | None]:
    """uniq_key -> seconds from its acknowledged send to its first orderly consumption (None: not
    consumed in the run), for every message an orderly consumer consumed or could have."""
    ops = client_ops(list(events))
    sent = {op.invoke_value.get("uniq_key"): op.invoke_time_ms for op in ops if op.f == "send" and op.type == "ok"
            and isinstance(op.invoke_value, dict) and isinstance(op.value, dict) and op.value.get("send_status") == "SEND_OK"}
    first: dict[str, float] = {}
    for op in ops:
        if op.f == "consume" and isinstance(op.invoke_value, dict) and op.invoke_value.get("orderly"):
            first.setdefault(op.invoke_value.get("uniq_key"), op.invoke_time_ms)
    return {k: ((first[k] - t) / 1000 if k in first else None) for k, t in sent.items()}


def guarantees_figure(tx_runs: Mapping[str, list[TraceEvent]], orderly_runs: Mapping[str, list[TraceEvent]], *,
                      bin_s: float = 1.0) -> go.Figure:
    """On one time axis (seconds since each workload's t=0): a row per transactional run (label ->
    trace), one marker per transaction at the time its half message was stored, as high as it waited
    for its outcome (a cross: committed more than once; a triangle: not ended by the run's end, drawn
    at its wait so far); then one row of orderly consumptions per `bin_s`, a line per orderly run. A
    label keeps its colour in every row. Fault lines: each row's own run's kills and restarts (the
    orderly row: the first orderly run's, unnamed, as the runs share the schedule)."""
    labels = list(dict.fromkeys([*tx_runs, *orderly_runs]))
    colors = {label: SET_COLORS[i % len(SET_COLORS)] for i, label in enumerate(labels)}
    titles = [f"{label}: each transaction's wait for its outcome" for label in tx_runs]
    titles.append(f"orderly consumptions per {bin_s:g} s")
    n = len(titles)
    fig = make_subplots(rows=n, cols=1, shared_xaxes=True, vertical_spacing=0.06, subplot_titles=titles)
    shown: set[str] = set()

    def faults(events: list[TraceEvent], t0: float, row: int, name_nodes: bool = True) -> None:
        for e in events:
            what = {"node.kill": "master killed", "node.restart": "restarted"}.get(e.kind) or FAULT_KINDS.get(e.kind)
            if what and e.time_ms >= t0:
                fig.add_vline(x=(e.time_ms - t0) / 1000, line_dash="dot", line_color="#555", line_width=1, row=row, col=1)
                fig.add_annotation(x=(e.time_ms - t0) / 1000, y=1, xref=f"x{row if row > 1 else ''}",
                                   yref=f"y{row if row > 1 else ''} domain", text=f"{what} ({e.node})" if name_nodes else what,
                                   showarrow=False, xanchor="left", yanchor="top", font={"size": 10, "color": "#555"})

    for row, (label, events) in enumerate(tx_runs.items(), start=1):
        events = list(events)
        t0, end = workload_t0(events), events[-1].time_ms
        txs = transactions(events)
        for kind, pick, symbol in (("ended once", lambda t: t.ended_ms is not None and t.commits <= 1, "circle"),
                                   ("committed more than once", lambda t: t.commits > 1, "x"),
                                   ("not ended by the run's end", lambda t: t.ended_ms is None, "triangle-up")):
            mine = [t for t in txs if pick(t)]
            if not mine:
                continue
            fig.add_trace(go.Scatter(
                x=[(t.begun_ms - t0) / 1000 for t in mine],
                y=[((t.ended_ms if t.ended_ms is not None else end) - t.begun_ms) / 1000 for t in mine],
                mode="markers", marker={"symbol": symbol, "size": 6 if symbol == "circle" else 8, "color": colors[label]},
                name=f"{label}: {kind}" if kind != "ended once" else label, legendgroup=label,
                showlegend=kind != "ended once" or label not in shown,
                customdata=[t.ended_by or "-" for t in mine],
                hovertemplate=f"{label}<br>stored at %{{x:.2f}} s, waited %{{y:.2f}} s ({kind}; ended by %{{customdata}})"
                              "<extra></extra>"), row=row, col=1)
            shown.add(label)
        fig.update_yaxes(title_text="wait (s)", rangemode="tozero", row=row, col=1)
        faults(events, t0, row)
    for label, events in orderly_runs.items():
        events = list(events)
        t0 = workload_t0(events)
        bins: dict[int, int] = {}
        for t in orderly_consume_times(events):
            b = int((t - t0) / 1000 // bin_s)
            bins[b] = bins.get(b, 0) + 1
        last = int((events[-1].time_ms - t0) / 1000 // bin_s)
        fig.add_trace(go.Scatter(x=[b * bin_s for b in range(last + 1)], y=[bins.get(b, 0) for b in range(last + 1)],
                                 mode="lines", line={"shape": "hv", "color": colors[label], "width": 2}, name=label,
                                 legendgroup=label, showlegend=label not in shown,
                                 hovertemplate=f"{label}<br>%{{x:.0f}} s: %{{y}} consumed<extra></extra>"), row=n, col=1)
        shown.add(label)
    first_orderly = next(iter(orderly_runs.values()), None)
    if first_orderly:
        # The orderly runs share the schedule (kill at 5 s, restart at 13 s), not the node names.
        faults(list(first_orderly), workload_t0(list(first_orderly)), n, name_nodes=False)
    fig.update_yaxes(title_text="consumed", rangemode="tozero", row=n, col=1)
    fig.update_xaxes(title_text="virtual seconds since the workload began (x of a transaction: its half message stored)",
                     row=n, col=1)
    fig.update_layout(title="A transactional producer and an orderly consumer through a master's death, per mode",
                      height=200 + 200 * n, margin={"t": 90, "b": 50}, legend={"orientation": "h", "y": -0.08})
    return fig


__all__ = ["Transaction", "transactions", "waiting_series", "orderly_consume_times", "orderly_waits",
           "guarantees_figure", "workload_t0"]
