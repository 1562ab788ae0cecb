"""Figures of a chaos campaign, drawn from its result rows (rmqlab.chaos.results' schemas).

    rto_figure(fault_rows)              RTO to the first acknowledged send after each fault, per
                                        fault kind (x) and mode (colour); the faults after which no
                                        send was acknowledged in the run are counted in the legend,
                                        never drawn as a value
    loss_by_config_figure(loss_rows)    acknowledged messages lost per mode and configuration (the
                                        report's `loss` table), each bar labelled, zeros included
"""

from __future__ import annotations

from collections import defaultdict

import plotly.graph_objects as go

MODE_COLORS = ("#1f77b4", "#ff7f0e", "#2ca02c", "#9467bd", "#8c564b", "#e377c2", "#17becf", "#7f7f7f")


def rto_figure(fault_rows: list[dict], *, title: str = "Recovery time after each fault") -> go.Figure:
    by_mode: dict[str, list[dict]] = defaultdict(list)
    for f in fault_rows:
        by_mode[f["mode"]].append(f)
    fig = go.Figure()
    for i, (mode, rows) in enumerate(sorted(by_mode.items())):
        recovered = [f for f in rows if f["rto_send_ms"] is not None]
        missing = len(rows) - len(recovered)
        name = f"{mode} ({len(recovered)} faults" + (f"; {missing} not recovered in the run)" if missing else ")")
        fig.add_trace(go.Box(x=[f["kind"] for f in recovered], y=[f["rto_send_ms"] / 1000 for f in recovered],
                             name=name, marker_color=MODE_COLORS[i % len(MODE_COLORS)], boxpoints="outliers"))
    fig.update_layout(title=title, boxmode="group", height=420, legend_title_text="mode",
                      xaxis_title="fault kind", yaxis_title="fault → first acknowledged send (s)")
    return fig


def loss_by_config_figure(loss_rows: list[dict], *, title: str = "Acknowledged messages lost") -> go.Figure:
    labels = [f"{r['mode']} / {r['config']}" for r in loss_rows]
    lost = [int(r["lost"] or 0) for r in loss_rows]
    text = [f"{n} lost in {int(r['runs_with_loss'] or 0)} of {int(r['runs'])} runs" for n, r in zip(lost, loss_rows)]
    colors = ["#2ca02c" if r["promises_no_loss"] else "#7f7f7f" for r in loss_rows]
    fig = go.Figure(go.Bar(x=labels, y=lost, text=text, textposition="outside", marker_color=colors,
                           hovertext=[f"{int(r['acknowledged'] or 0)} acknowledged" for r in loss_rows]))
    fig.update_layout(title=title + " (green: configurations that promise none)", height=420,
                      xaxis_title="mode / configuration", yaxis_title="acknowledged, never read",
                      yaxis_rangemode="tozero")
    return fig
