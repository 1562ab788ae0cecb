"""Orderly consumption as a business sees it: each order's steps, in the order the consumer group
consumed them, from the trace's orderly `consume` operations.

An ordered producer sends the steps of one order (a sharding key) to one queue; an orderly consumer
group promises to consume them one at a time, in that order, once per group. Each message here
carries its order as `keys` and its step as `tags` ("step0", "step1", ...), so a consume operation
says which step of which order it was. Against what the whole group had consumed before it, a
consumption is

* **behind** — a later step of the same order had already been consumed (step 0 after step 2):
  the order, as the business sees it, went backwards;
* **again** — the same step had already been consumed (by this consumer or another): a repeat.

rmqlab.checker.order judges per queue and per consumer from offsets alone; this view adds the
business's question, which needs the orders' keys.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

import plotly.graph_objects as go
from plotly.subplots import make_subplots

from rmqlab.trace import TraceEvent, client_ops

CONSUMER_COLORS = ("#1f77b4", "#ff7f0e", "#2ca02c", "#9467bd")
BEHIND_COLOR = "#d62728"


@dataclass(frozen=True)
class OrderedConsume:
    """One orderly consumption of one step of one order."""
    consumer: str
    order: str
    step: int
    queue_id: int
    time_ms: float
    behind: bool    # the group had already consumed a later step of this order
    again: bool     # this step of this order had been consumed before (by anyone in the group)


def _step(tags: object) -> int | None:
    text = str(tags or "")
    return int(text[4:]) if text.startswith("step") and text[4:].isdigit() else None


def ordered_consumes(events: Iterable[TraceEvent], topic: str) -> list[OrderedConsume]:
    """The group's orderly consumptions of `topic`'s steps, in the order they happened (messages
    whose tags are not "step<n>" are left out)."""
    out: list[OrderedConsume] = []
    latest: dict[str, int] = {}
    seen: set[tuple[str, int]] = set()
    for op in client_ops(list(events)):
        m = op.invoke_value
        if op.f != "consume" or not isinstance(m, dict) or m.get("topic") != topic or not m.get("orderly"):
            continue
        order, step = m.get("keys"), _step(m.get("tags"))
        if order is None or step is None:
            continue
        out.append(OrderedConsume(op.node, order, step, m.get("queue_id"), op.invoke_time_ms,
                                  behind=step < latest.get(order, -1), again=(order, step) in seen))
        latest[order] = max(latest.get(order, -1), step)
        seen.add((order, step))
    return out


def ordered_sends(events: Iterable[TraceEvent], topic: str) -> list[tuple[str, int, float]]:
    """(order, step, invoke time) of every acknowledged ordered send of `topic`."""
    return [(op.invoke_value.get("keys"), _step(op.invoke_value.get("tags")), op.invoke_time_ms)
            for op in client_ops(list(events)) if op.f == "send" and op.type == "ok"
            and isinstance(op.invoke_value, dict) and op.invoke_value.get("topic") == topic
            and _step(op.invoke_value.get("tags")) is not None]


def ordered_consumption_figure(runs: Mapping[str, list[TraceEvent]], topic: str, *,
                               title: str = "Each order's steps, in the order the consumer group consumed them") -> go.Figure:
    """One row per run (label -> trace). For each order (y), its consumptions left to right in the
    order the group made them (x: 1st, 2nd, ...), each marker labelled with the step and coloured by
    the consumer; a red ring where the step came after a later step of its order, a square for a
    repeat; grey crosses after them for steps sent but not consumed within the run. In order, once:
    0 1 2 and nothing else."""
    labels = list(runs)
    fig = make_subplots(rows=len(labels), cols=1, shared_xaxes=True, subplot_titles=labels, vertical_spacing=0.12)
    colors: dict[str, str] = {}
    shown: set[str] = set()
    any_behind = False
    for row, label in enumerate(labels, start=1):
        events = list(runs[label])
        consumes = ordered_consumes(events, topic)
        position: dict[str, int] = {}
        placed: list[tuple[OrderedConsume, int]] = []
        for c in consumes:
            position[c.order] = position.get(c.order, 0) + 1
            placed.append((c, position[c.order]))
            colors.setdefault(c.consumer, CONSUMER_COLORS[len(colors) % len(CONSUMER_COLORS)])
            any_behind |= c.behind
        for name, color in colors.items():
            mine = [(c, x) for c, x in placed if c.consumer == name]
            if not mine:
                continue
            fig.add_trace(go.Scatter(
                x=[x for _, x in mine], y=[c.order for c, _ in mine], mode="markers+text",
                text=[str(c.step) for c, _ in mine], textfont={"color": "white", "size": 11},
                marker={"size": 20, "color": color, "symbol": ["square" if c.again else "circle" for c, _ in mine],
                        "line": {"color": [BEHIND_COLOR if c.behind else color for c, _ in mine],
                                 "width": [4 if c.behind else 1 for c, _ in mine]}},
                name=f"consumer {name}", legendgroup=name, showlegend=False,
                customdata=[f"{c.time_ms / 1000:.2f} s" + ("; after a later step of this order" if c.behind else "")
                            + ("; a repeat" if c.again else "") for c, _ in mine],
                hovertemplate=f"{name}: %{{y}} step %{{text}} (virtual %{{customdata}})<extra></extra>"),
                row=row, col=1)
            if name not in shown:  # a plain legend entry: the data markers vary in shape and ring
                fig.add_trace(go.Scatter(x=[None], y=[None], mode="markers", name=f"consumer {name}",
                                         legendgroup=name, marker={"size": 15, "color": color}), row=row, col=1)
                shown.add(name)
        got = {(c.order, c.step) for c in consumes}
        missing = sorted({(o, s) for o, s, _ in ordered_sends(events, topic)} - got)
        if missing:
            xs = []
            for order, _ in missing:
                position[order] = position.get(order, 0) + 1
                xs.append(position[order])
            fig.add_trace(go.Scatter(
                x=xs, y=[o for o, _ in missing], mode="markers", marker={"symbol": "x", "size": 11, "color": "#777"},
                name="sent, not consumed by the run's end", legendgroup="missing", showlegend="missing" not in shown,
                text=[f"step {s}" for _, s in missing], hovertemplate="%{y} %{text}: not consumed by the run's end<extra></extra>"),
                row=row, col=1)
            shown.add("missing")
        fig.update_yaxes(categoryorder="category descending", row=row, col=1)
    if any_behind:
        fig.add_trace(go.Scatter(x=[None], y=[None], mode="markers", name="after a later step (out of order)",
                                 marker={"size": 17, "color": "white", "line": {"color": BEHIND_COLOR, "width": 4}}))
    if any(c.again for label in labels for c in ordered_consumes(runs[label], topic)):
        fig.add_trace(go.Scatter(x=[None], y=[None], mode="markers", name="a repeat",
                                 marker={"size": 15, "color": "#999", "symbol": "square"}))
    fig.update_xaxes(title_text="the order's n-th consumption in the group", dtick=1, row=len(labels), col=1)
    fig.update_layout(title=title, height=170 + 260 * len(labels), margin={"t": 90, "b": 50},
                      legend={"orientation": "h", "y": -0.12})
    return fig


__all__ = ["OrderedConsume", "ordered_consumes", "ordered_sends", "ordered_consumption_figure"]
