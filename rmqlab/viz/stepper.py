"""FrameStepper: walk a protocol one frame at a time — "deliver next", in the spirit of DSLabs.

    stepper = FrameStepper(cluster, ["broker-n2", "broker-n0"])   # an HA slave and its master
    hop = stepper.deliver_next()     # the next frame between them that was *received*
    print(stepper.describe())        # that frame, field by field, and both sides' states
    stepper.widget                   # buttons "deliver next", "deliver 10", "run 1 s", the same views

Stepping reads the trace only. The stepper keeps a cursor into the trace (it starts at the end:
what happened before it was made is history); "deliver next" moves the cursor to the next
`frame.recv` of `proto` between the chosen nodes, and past what the receiver did at that instant
(its state changes, the frames it sent back). When the trace holds no such receive yet, it lets
the simulator run until one is emitted — exactly then, through a subscription to the tracer, not
by polling — so the same seed and the same clicks give the same frames at the same virtual times.
Everything shown is the trace up to the cursor: the frame (its bytes and decoded fields,
rmqlab.viz.frames), both sides' roles, HAConnectionStates, offsets and the slave's latest
truncation decision, and a sequence diagram of the frames since the stepper was made
(rmqlab.viz.lamport), which grows with each step; a frame sent but not yet received is drawn in
flight, half way.

"run 1 s" lets virtual time pass and moves the cursor to the end of the trace (as `catch_up`
does, e.g. after a FaultPanel action: `panel.on_change(stepper.catch_up)`). Only the simulator can
be stepped; a real cluster's time does not wait.
"""

from __future__ import annotations

import asyncio
import html
from collections.abc import Iterable, Sequence

import ipywidgets as widgets
import plotly.graph_objects as go

from rmqlab.trace.event import TraceEvent
from rmqlab.viz.figure_widgets import redraw
from rmqlab.viz.frames import format_frame, frame_html
from rmqlab.viz.lamport import FrameHop, address_book, lamport_figure, match_frames
from rmqlab.viz.trace_views import describe_state, node_states

HA_MACHINES = ("AutoSwitchHAClient", "AutoSwitchHAConnection", "DefaultHAClient", "DefaultHAConnection")
STEP_TIMEOUT_MS = 30_000  # "deliver next" gives up after this much virtual time without a frame
_GONE = ("node.kill", "node.crash", "node.stop", "node.restart")


def endpoint_states(events: Sequence[TraceEvent], nodes: Sequence[str], machines: Iterable[str] = HA_MACHINES,
                    book: dict[str, str] | None = None) -> dict[str, dict]:
    """node -> what the stepper shows of it after `events`: "node" (trace_views.node_states),
    "machines" ({label: state}: a client's state, and a connection's per peer among `nodes`),
    "written" / "confirmed" (its latest offsets), "epoch" (the last epoch entry it recorded),
    "truncate" (its latest doTruncate decision)."""
    book = address_book(events) if book is None else book
    machines, wanted = set(machines), set(nodes)
    out = {n: {"machines": {}, "written": None, "confirmed": None, "epoch": None, "truncate": None} for n in nodes}
    for e in events:
        st = out.get(e.node)
        if st is None:
            continue
        f = e.fields
        if e.kind in _GONE:  # a new process: its HA services start afresh (its store stays)
            st["machines"].clear()
            st["truncate"] = None
        elif e.kind == "state" and f.get("machine") in machines:
            peer = f.get("peer")
            if peer is not None:
                peer = book.get(peer, peer)
                if peer not in wanted:
                    continue
            st["machines"][f["machine"] + (f" ← {peer}" if peer else "")] = f["to"]
        elif e.kind == "offset" and f.get("which") in ("written", "confirmed"):
            st[f["which"]] = f["value"]
        elif e.kind == "epoch":
            st["epoch"] = (f["epoch"], f["start_offset"])
        elif e.kind == "ha.truncate":
            st["truncate"] = f["reason"]
    roles = node_states(events)
    for n in nodes:
        out[n]["node"] = roles.get(n, {"up": False, "suspended": False, "how": None, "role": None, "epoch": None,
                                       "term": None})
    return out


def _rows(states: dict[str, dict], nodes: Sequence[str]) -> list[tuple[str, list[str]]]:
    def cell(n: str, key: str) -> str:
        v = states[n][key]
        return "—" if v is None else str(v)

    rows = [("role", [describe_state(states[n]["node"]) for n in nodes]),
            ("HA state", ["; ".join(f"{m} {s}" for m, s in states[n]["machines"].items()) or "—" for n in nodes]),
            ("log end (slave)", [cell(n, "written") for n in nodes]),
            ("confirm offset", [cell(n, "confirmed") for n in nodes]),
            ("last epoch entry", ["—" if states[n]["epoch"] is None else "(epoch %d, start %d)" % states[n]["epoch"]
                                  for n in nodes])]
    if any(states[n]["truncate"] for n in nodes):
        rows.append(("doTruncate", [cell(n, "truncate") for n in nodes]))
    return rows


class FrameStepper:
    def __init__(self, cluster, nodes: Sequence[str], proto: str = "ha", *, machines: Iterable[str] = HA_MACHINES,
                 window: int = 24, timeout_ms: float = STEP_TIMEOUT_MS, title: str | None = None):
        """`nodes`: the nodes whose frames are stepped (each frame between two of them); the first
        is drawn leftmost. `window`: frames in the diagram. `timeout_ms`: virtual time "deliver
        next" waits for a frame."""
        if cluster.runtime != "sim":
            raise ValueError("the stepper needs the simulator: a real cluster's time does not wait for a click")
        if len(nodes) < 2:
            raise ValueError(f"step the frames between two nodes or more, not {list(nodes)}")
        self.cluster, self.nodes, self.proto = cluster, list(nodes), proto
        self.machines, self.window, self.timeout_ms = tuple(machines), window, timeout_ms
        self.title = title or f"{proto} frames between {' and '.join(self.nodes)}"
        self.cursor = len(cluster.events())  # stepping starts now
        self.start = self.cursor
        self.current: FrameHop | None = None
        self.delivered = 0
        self.note = "ready: nothing delivered yet"
        self.roles = widgets.HTML()
        self.roles.add_class("rmqlab-roles")
        self.frame_view = widgets.HTML()
        self.status = widgets.HTML()
        self.status.add_class("rmqlab-status")
        self.figure = go.FigureWidget(self._diagram(cluster.events()[:self.cursor]))
        buttons = []
        for label, action, tip in (("deliver next", lambda: self.deliver_next(), "run until the next frame arrives"),
                                   ("deliver 10", lambda: self.deliver(10), "ten frames, one after the other"),
                                   ("run 1 s", lambda: self.run(1_000), "let a virtual second pass, then show "
                                                                        "where things are")):
            b = widgets.Button(description=label, tooltip=tip, layout=widgets.Layout(width="auto"))
            b.on_click(lambda _b, action=action: action())
            buttons.append(b)
        self.widget = widgets.VBox([widgets.HBox(buttons), self.status, self.roles, self.frame_view, self.figure])
        self.refresh()

    # -- stepping ------------------------------------------------------------------------------
    def _book(self) -> dict[str, str]:
        return address_book(self.cluster.events())

    def _next_index(self, events: Sequence[TraceEvent], start: int, book: dict[str, str]) -> int | None:
        wanted = set(self.nodes)
        for i in range(start, len(events)):
            e = events[i]
            if e.kind == "frame.recv" and e.fields.get("proto") == self.proto and e.node in wanted:
                peer = e.fields.get("peer", "")
                if book.get(peer, peer) in wanted:
                    return i
        return None

    def _run_until_recv(self, deadline_ms: float) -> bool:
        """Run the simulator until one of the nodes receives a frame of `proto` (True) or until
        `deadline_ms` (False)."""
        sim = self.cluster.sim
        remaining = deadline_ms - sim.now_ms()
        if remaining <= 0:
            return False
        wanted, proto = set(self.nodes), self.proto
        found = sim.loop.create_future()

        def watch(e: TraceEvent) -> None:
            if not found.done() and e.kind == "frame.recv" and e.node in wanted and e.fields.get("proto") == proto:
                found.set_result(e.seq)

        unsubscribe = sim.tracer.subscribe(watch)
        try:
            sim.run(asyncio.wait([found], timeout=remaining / 1000.0))
        finally:
            unsubscribe()
        return found.done()

    def deliver_next(self, refresh: bool = True) -> FrameHop | None:
        """Move to the next frame received between the nodes (running the simulator if the trace
        holds none yet); returns it, or None if none came within `timeout_ms`."""
        deadline = self.cluster.sim.now_ms() + self.timeout_ms
        while True:
            events = self.cluster.events()
            book = self._book()
            index = self._next_index(events, self.cursor, book)
            if index is not None or not self._run_until_recv(deadline):
                break
        if index is None:
            self.cursor = len(self.cluster.events())
            self.note = (f"no {self.proto} frame between {' and '.join(self.nodes)} within "
                         f"{self.timeout_ms / 1000:g} s of virtual time")
        else:
            self.cursor = self._reaction_end(events, index)
            self.current = self._hop_of(index, events, book)
            self.delivered += 1
            self.note = f"delivered frame {self.delivered}"
        if refresh:
            self.refresh()
        return None if index is None else self.current

    def deliver(self, n: int) -> list[FrameHop]:
        """`n` frames, one after the other (fewer if the protocol falls silent)."""
        out = []
        for _ in range(n):
            hop = self.deliver_next(refresh=False)
            if hop is None:
                break
            out.append(hop)
        self.refresh()
        return out

    def run(self, ms: float) -> None:
        """Let `ms` of virtual time pass, then show the end of the trace."""
        self.cluster.run_for(ms)
        self._to_end(f"ran {ms / 1000:g} s")

    def catch_up(self, _events: Sequence[TraceEvent] | None = None) -> None:
        """Move the cursor to the end of the trace and redraw; fits FaultPanel.on_change."""
        self._to_end("caught up with the cluster")

    def _to_end(self, note: str) -> None:
        """The cursor at the end of the trace; its latest frame between the nodes is the current one."""
        events = self.cluster.events()
        self.cursor = len(events)
        hops = [h for h in match_frames(events, self.proto, self.nodes, self._book()) if h.recv is not None]
        if hops:
            self.current = hops[-1]
        self.note = note
        self.refresh()

    @staticmethod
    def _reaction_end(events: Sequence[TraceEvent], index: int) -> int:
        """Past what the receiver did on receiving events[index]: its events at the same instant
        (its state changes, the frames it sent back), up to the next frame it received."""
        recv, end = events[index], index + 1
        while end < len(events) and events[end].node == recv.node and events[end].time_ms == recv.time_ms \
                and events[end].kind != "frame.recv":
            end += 1
        return end

    def _hop_of(self, index: int, events: Sequence[TraceEvent], book: dict[str, str]) -> FrameHop:
        """The frame whose receive is events[index], matched against the sends before it."""
        recv = events[index]
        return next(hop for hop in reversed(match_frames(events[:index + 1], self.proto, self.nodes, book))
                    if hop.recv is recv)

    # -- views ---------------------------------------------------------------------------------
    def _diagram(self, events: Sequence[TraceEvent]) -> go.Figure:
        return lamport_figure(events, self.proto, self.nodes, machines=self.machines, last=self.window,
                              since_seq=self.start, title=self.title, height=420)

    def states(self) -> dict[str, dict]:
        """endpoint_states at the cursor."""
        events = self.cluster.events()[:self.cursor]
        return endpoint_states(events, self.nodes, self.machines, address_book(events))

    def describe(self) -> str:
        """The current frame and both sides' states, as plain text (what the widget shows)."""
        lines = []
        if self.current is not None:
            hop = self.current
            sent = f"sent t={hop.send.time_ms / 1000:.3f} s, " if hop.send is not None else ""
            lines += [f"frame {self.delivered}: {sent}received t={hop.recv.time_ms / 1000:.3f} s",
                      format_frame(hop, meanings=False)]
        else:
            lines.append(self.note)
        states = self.states()
        width = max(34, *(len(c) + 2 for _, cells in _rows(states, self.nodes) for c in cells))
        lines.append(f"{'':<17}" + "".join(f"{n:<{width}}" for n in self.nodes).rstrip())
        for label, cells in _rows(states, self.nodes):
            lines.append(f"{label:<17}" + "".join(f"{c:<{width}}" for c in cells).rstrip())
        return "\n".join(lines)

    def refresh(self) -> None:
        events = self.cluster.events()[:self.cursor]
        states = endpoint_states(events, self.nodes, self.machines, address_book(events))
        head = "".join(f"<th style='text-align:left;padding-right:2em'>{html.escape(n)}</th>" for n in self.nodes)
        body = "".join(f"<tr><td style='padding-right:1em'><b>{html.escape(label)}</b></td>"
                       + "".join(f"<td style='padding-right:2em'>{html.escape(c)}</td>" for c in cells) + "</tr>"
                       for label, cells in _rows(states, self.nodes))
        hop = self.current
        what = (f"frame {self.delivered}: {html.escape(hop.label())}, received t = {hop.recv.time_ms / 1000:.3f} s"
                if hop is not None and hop.recv is not None else html.escape(self.note))
        self.roles.value = (f"<div><b>{what}</b></div><table class='rmqlab-role-table'><tr><th></th>{head}</tr>"
                            f"{body}</table>")
        now = events[-1].time_ms if events else 0.0
        self.status.value = (f"<span>t = {now / 1000:.3f} s virtual · {self.delivered} frames delivered · "
                             f"{html.escape(self.note)}</span>")
        self.frame_view.value = frame_html(hop) if hop is not None else ""
        redraw(self.figure, self._diagram(events))


__all__ = ["FrameStepper", "endpoint_states", "HA_MACHINES", "STEP_TIMEOUT_MS"]
