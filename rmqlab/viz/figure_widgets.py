"""Live figures: give a plotly FigureWidget the content of a freshly drawn go.Figure.

The labs' widgets redraw from the trace after every action: a figure function builds a new
go.Figure from `cluster.events()` and `redraw(widget, figure)` puts it into the FigureWidget on
screen. When the figure has the same traces as the widget (same types and names, in order: the
usual case, where only the data grew), they are updated in place, so the browser restyles the plot
it has instead of deleting and re-adding every trace; otherwise the traces are replaced. Either
way the widget ends up equal to `figure` (a property the new figure leaves out is reset, not left
over from the previous drawing), in one batch of messages to the front end.
"""

from __future__ import annotations

import plotly.graph_objects as go

_OWN = ("type", "uid")  # what a trace keeps across a redraw: its type, and the widget's id for it


def redraw(widget: go.FigureWidget, figure: go.Figure) -> None:
    """Make `widget` show `figure`: its traces and layout (see the module docstring)."""
    new = [trace.to_plotly_json() for trace in figure.data]
    same = len(widget.data) == len(new) and all(old.type == n["type"] and old.name == n.get("name")
                                                 for old, n in zip(widget.data, new))
    with widget.batch_update():
        if same:
            for old, values in zip(widget.data, new):
                old.update(_replacing(old.to_plotly_json(), values), overwrite=True)
        else:
            widget.data = ()
            widget.add_traces(list(figure.data))
        widget.layout.update(_replacing(widget.layout.to_plotly_json(), figure.layout.to_plotly_json()),
                             overwrite=True)


def _replacing(old: dict, new: dict) -> dict:
    """The update that turns properties `old` into `new`: new's values, None for what only old has."""
    out = {k: None for k in old if k not in new and k not in _OWN}
    out.update((k, v) for k, v in new.items() if k not in _OWN)
    return out


__all__ = ["redraw"]
