"""One time axis per run: where a figure's x = 0 is and what its axis is called.

The trace's `time_ms` means two different things (datasets/README.md, "Time"): on the simulator,
virtual milliseconds since the simulation started; on the real runtime, wall-clock milliseconds
since the Unix epoch. A figure that divided the latter by 1000 would show ticks like 1.79B on an
axis called "virtual time". Every figure of rmqlab.viz therefore asks `time_axis(events)`:

* simulator: x = time_ms / 1000, labelled "virtual time (s)" (0 is the simulation's start, so
  every figure of a run, whatever slice of its trace it draws, shares one origin);
* real runtime: x = seconds since the trace's first event, labelled
  "wall-clock time since the run started (s)".

A list of events does not carry the trace file's `meta.runtime`, so the runtime is read from the
times themselves: no simulation runs for `REAL_CLOCK_MS` of virtual time (three years), and no
real run began before 1973.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import plotly.graph_objects as go

from rmqlab.trace import TraceEvent

# 1e11 ms since the epoch is March 1973; in virtual time it is 3.2 years.
REAL_CLOCK_MS = 1e11
VIRTUAL_LABEL = "virtual time (s)"
WALL_CLOCK_LABEL = "wall-clock time since the run started (s)"


@dataclass(frozen=True)
class TimeAxis:
    origin_ms: float   # the trace time drawn at x = 0
    label: str         # the x axis title
    real: bool         # True: wall-clock times of the real runtime

    def s(self, time_ms: float) -> float:
        """A trace time (ms) as this axis' x (s)."""
        return (time_ms - self.origin_ms) / 1000.0

    def from_trace_s(self, time_s: float) -> float:
        """A trace time already in seconds (time_ms / 1000, as send_rows and offset_series give it)
        as this axis' x (s)."""
        return time_s - self.origin_ms / 1000.0

    def ms(self, time_ms: float) -> float:
        """A trace time (ms) as this axis' x in ms (sequence diagrams: frames are ms apart)."""
        return time_ms - self.origin_ms

    @property
    def label_ms(self) -> str:
        return self.label.replace("(s)", "(ms)")

    @property
    def unit(self) -> str:
        """How a text label names a time on this axis ("12.0 s virtual", "3.1 s wall-clock")."""
        return "s wall-clock" if self.real else "s virtual"


def time_axis(events: Sequence[TraceEvent] | Iterable[TraceEvent]) -> TimeAxis:
    """The time axis of the run `events` come from (see the module docstring)."""
    first = next(iter(events), None)
    if first is not None and first.time_ms >= REAL_CLOCK_MS:
        return TimeAxis(first.time_ms, WALL_CLOCK_LABEL, True)
    return TimeAxis(0.0, VIRTUAL_LABEL, False)


def share_time_range(figures: Iterable[go.Figure], events: Sequence[TraceEvent]) -> None:
    """Give every figure of one run the same x range, the run's whole trace, so that figures drawn
    one above the other line up (a fault at 18 s is at the same place in each). Only figures whose
    x axes are time axes of this run belong here."""
    if not events:
        return
    axis = time_axis(events)
    lo, hi = axis.s(events[0].time_ms), axis.s(events[-1].time_ms)
    pad = max(hi - lo, 1.0) * 0.01
    for fig in figures:
        fig.update_xaxes(range=[lo - pad, hi + pad])


def log_axis(values: Iterable[float | None]) -> dict:
    """Layout of a log-scale value axis (latencies) whose tick labels cannot overlap: one labelled
    tick per decade (dtick=1) and a range of whole decades around the values, so at least two
    labels show even when every value lies within one decade. Plotly's default labels 2 and 5 of
    each decade too, which collide once a decade is shorter than their text."""
    import math

    positive = [v for v in values if v is not None and v > 0]
    lo = math.floor(math.log10(min(positive))) if positive else 0
    hi = math.ceil(math.log10(max(positive))) if positive else 1
    if hi <= lo:
        hi = lo + 1
    return {"type": "log", "dtick": 1, "range": [lo, hi], "tickformat": "~g", "minor": {"showgrid": True}}


__all__ = ["TimeAxis", "time_axis", "share_time_range", "log_axis", "REAL_CLOCK_MS", "VIRTUAL_LABEL",
           "WALL_CLOCK_LABEL"]
