"""Figures that say what the trace says: every send a table counts has its bar, the real runtime's
wall-clock times are shown as seconds since the run started, an operation still in flight when the
trace ends is no failure, one run has one time axis, log axes label whole decades, and the report
and the labs name a CJK font.

The traces are small and written by hand (the schema of datasets/README.md), so each test says
exactly which events a figure must draw and how.
"""

from __future__ import annotations

import math
import types

import plotly.graph_objects as go
import pytest

from rmqlab.trace import TraceEvent
from rmqlab.viz.timeaxis import VIRTUAL_LABEL, WALL_CLOCK_LABEL, log_axis, time_axis

# A real run's first event: wall-clock ms since the epoch (27 Nov 2026).
WALL_T0_MS = 1_795_749_303_000.0


class Trace:
    """Builds a trace event by event (seq in order)."""

    def __init__(self, t0_ms: float = 0.0):
        self.t0, self.events, self.op_ids = t0_ms, [], {}

    def add(self, t_s: float, node: str, kind: str, **fields) -> TraceEvent:
        e = TraceEvent(len(self.events), self.t0 + t_s * 1000.0, node, kind, fields)
        self.events.append(e)
        return e

    def invoke(self, t_s: float, node: str, f: str, value) -> int:
        op_id = self.op_ids[node] = self.op_ids.get(node, -1) + 1
        self.add(t_s, node, "client", type="invoke", process=0, f=f, op_id=op_id, value=value)
        return op_id

    def complete(self, t_s: float, node: str, op_id: int, f: str, type_: str, value=None) -> None:
        self.add(t_s, node, "client", type=type_, process=0, f=f, op_id=op_id, value=value)

    def send(self, t_s: float, latency_s: float, key: str, type_: str = "ok", value: dict | None = None,
             node: str = "producer") -> None:
        op = self.invoke(t_s, node, "send", {"topic": "T", "uniq_key": key})
        result = {"send_status": "SEND_OK", "msg_id": key, **(value or {})} if type_ == "ok" else None
        self.complete(t_s + latency_s, node, op, "send", type_, result)

    def pull(self, t_s: float, latency_s: float, messages: list[dict], broker_set: str = "broker-a") -> None:
        op = self.invoke(t_s, "consumer", "pull", {"topic": "T", "broker_name": broker_set, "queue_id": 0})
        self.complete(t_s + latency_s, "consumer", op, "pull", "ok",
                      {"messages": messages, "broker_addr": "127.0.0.1:10911"})


def _bars(fig: go.Figure) -> dict[str, int]:
    out: dict[str, int] = {}
    for t in fig.data:
        if t.type == "bar":
            out[t.name] = out.get(t.name, 0) + int(sum(t.y))
    return out


def _xs(fig: go.Figure) -> list[float]:
    """Every time-axis x a figure draws: its traces' x (bars: their base and end), its vertical lines."""
    out: list[float] = []
    for t in fig.data:
        if t.orientation == "h" and t.base is not None:
            out += [b + w for b, w in zip(t.base, t.x)] + list(t.base)
        elif t.x is not None:
            out += [x for x in t.x if x is not None]
    out += [s.x0 for s in fig.layout.shapes if s.x0 is not None]
    return out


def _x_axes(fig: go.Figure) -> dict[str, dict]:
    return {k: v for k, v in fig.layout.to_plotly_json().items() if k.startswith("xaxis")}


def _time_axis_titles(fig: go.Figure) -> set[str]:
    return {ax["title"]["text"] for ax in _x_axes(fig).values() if ax.get("title", {}).get("text")}


# --- 1. every acknowledged send has its bar ------------------------------------------------------------------
def _proxy_trace() -> Trace:
    """Sends through a Cluster-mode Proxy: the result names no broker set (the Proxy chose it).
    m0..m2 are read back from broker-a, m3 never is; m4 fails."""
    tr = Trace()
    tr.add(0.0, "producer", "node.start")
    for i in range(4):
        tr.send(1.0 + i, 0.005, f"m{i}", value={"endpoint": "127.0.0.1:8081"})
    tr.send(5.0, 0.005, "m4", type_="fail")
    tr.pull(6.0, 0.01, [{"uniq_key": f"m{i}", "broker_name": "broker-a"} for i in range(3)])
    return tr


def test_sends_through_a_proxy_are_drawn_as_acknowledged():
    from rmqlab.viz.sends import send_rows, sends_by_mode_figure, sends_figure

    events = _proxy_trace().events
    rows = send_rows(events)
    assert [r["broker_set"] for r in rows if r["outcome"] == "acknowledged"] == ["broker-a"] * 3 + [None]
    for fig in (sends_by_mode_figure({"proxy-cluster": events}), sends_figure(events)):
        bars = _bars(fig)
        acknowledged = sum(n for name, n in bars.items() if name.startswith("acknowledged"))
        assert acknowledged == 4, f"the table says 4 acknowledged, the figure draws {bars}"
        assert bars["acknowledged by broker-a"] == 3 and bars["acknowledged (broker set not reported)"] == 1 and bars["failed"] == 1
        assert bars.get("unknown", 0) == 0
    latency = [t for t in sends_figure(events).data if t.type == "scatter" and t.name.startswith("acknowledged")]
    assert sum(len(t.x) for t in latency) == 4, "every acknowledged send has its latency point"


def test_every_send_of_the_mode_comparison_table_is_drawn():
    """The per-mode row sums to the table's acknowledged and sent counts, whatever the mode."""
    from rmqlab.viz.sends import send_rows, sends_by_mode_figure

    traces = {"direct": Trace(), "proxy": _proxy_trace()}
    traces["direct"].send(1.0, 0.002, "d0", value={"broker_name": "broker-b"})
    traces["direct"].send(2.0, 3.0, "d1", type_="info")
    fig = sends_by_mode_figure({k: t.events for k, t in traces.items()})
    for row, (label, tr) in enumerate(traces.items(), start=1):
        axis = "y" if row == 1 else f"y{row}"
        drawn = sum(sum(t.y) for t in fig.data if t.type == "bar" and t.yaxis == axis)
        assert drawn == len(send_rows(tr.events)), f"{label}: {drawn} sends drawn"


# --- 2. wall-clock times as seconds since the run started ----------------------------------------------------
def _run_trace(t0_ms: float) -> Trace:
    """A small run: controllers elect, a broker registers, sends, a crash at 4 s, pulls."""
    tr = Trace(t0_ms)
    tr.add(0.0, "controller-n0", "node.start")
    tr.add(0.5, "controller-n0", "raft", term=1, leader="controller-n0")
    tr.add(0.6, "controller-n1", "raft", term=1, leader="controller-n0")
    tr.add(0.9, "broker-a", "frame.send", proto="remoting", code=1003, name="CONTROLLER_REGISTER_BROKER", flag=0,
           ext_fields={"brokerName": "broker-a", "brokerId": "1"})
    tr.add(1.0, "broker-a", "role", component="broker", to="SYNC_MASTER", epoch=1)
    tr.add(1.0, "broker-a", "offset", which="written", value=0)
    for i in range(6):
        tr.send(2.0 + 0.5 * i, 0.002, f"k{i}", value={"broker_name": "broker-a"})
    tr.add(3.0, "broker-a", "offset", which="written", value=600)
    tr.add(4.0, "broker-a", "node.crash")
    tr.pull(4.5, 0.01, [{"uniq_key": "k0", "broker_name": "broker-a"}])
    tr.add(6.0, "broker-a", "node.restart")
    return tr


def _figures(events: list[TraceEvent]) -> dict[str, go.Figure]:
    from rmqlab.viz.controller import raft_figure, sync_state_figure
    from rmqlab.viz.invariants import invariant_figure
    from rmqlab.viz.offsets import offsets_figure
    from rmqlab.viz.sends import consumption_figure, sends_figure
    from rmqlab.viz.sync_state_set import sync_state_set_figure

    return {"sends": sends_figure(events), "consumption": consumption_figure(events),
            "offsets": offsets_figure(events), "raft": raft_figure(events),
            "controller sync state": sync_state_figure(events), "sync state set": sync_state_set_figure(events),
            "invariants": invariant_figure([], events)}


def test_real_runtime_figures_show_wall_clock_seconds_since_the_run_started():
    events = _run_trace(WALL_T0_MS).events
    assert time_axis(events).real
    for name, fig in _figures(events).items():
        assert _time_axis_titles(fig) == {WALL_CLOCK_LABEL}, f"{name}: {_time_axis_titles(fig)}"
        xs = _xs(fig)
        # (the controllers' view of broker-a needs their replicated log, which this trace has not)
        assert xs or name == "controller sync state", f"{name}: draws nothing"
        assert all(-0.01 <= x <= 6.01 for x in xs), f"{name}: x from {min(xs, default=None)} to {max(xs, default=None)}, not 0..6 s"
    from rmqlab.viz.topology import topology_figure

    assert topology_figure(events).layout.title.text == "Cluster at t = 6.0 s wall-clock"


def test_real_runtime_sequence_diagram_and_invariant_hover_use_the_runs_time_axis():
    from rmqlab.checker.result import Violation
    from rmqlab.viz.invariants import Invariant, InvariantStatus, invariant_figure
    from rmqlab.viz.lamport import lamport_figure

    tr = _run_trace(WALL_T0_MS)
    tr.add(2.0, "broker-a", "frame.send", proto="ha", name="transfer", peer="broker-b", offset=0)
    tr.add(2.003, "broker-b", "frame.recv", proto="ha", name="transfer", peer="broker-a", offset=0)
    fig = lamport_figure(tr.events, y="time")
    assert fig.layout.yaxis.title.text == "wall-clock time since the run started (ms)"
    ys = [y for t in fig.data if t.y is not None for y in t.y if y is not None]
    assert ys and all(0 <= y <= 6_000 for y in ys), f"y from {min(ys)} to {max(ys)}: epoch ms"
    first = Violation("cut-committed", "a message", node="broker-a", seq=3, time_ms=WALL_T0_MS + 4_000)
    status = InvariantStatus(Invariant("replicas", "Replicas agree", "replicas agree"), "broken", first, "", ())
    hover = [c for t in invariant_figure([status], tr.events).data if t.customdata is not None for c in t.customdata]
    assert hover and "4.0 s wall-clock" in hover[0], hover


def test_simulator_figures_keep_virtual_time_from_the_simulation_start():
    events = _run_trace(0.0).events
    later = [e for e in events if e.time_ms >= 500]  # a slice of the run: its figures keep x = trace time
    for name, fig in {**_figures(events), **{f"{k} (slice)": v for k, v in _figures(later).items()}}.items():
        assert _time_axis_titles(fig) == {VIRTUAL_LABEL}, f"{name}: {_time_axis_titles(fig)}"
    raft = _figures(later)["raft"]
    followers = [t for t in raft.data if t.name == "FOLLOWER"][0]
    assert sorted(followers.base) == [0.5, 0.6], "term 1 began at 0.5 s virtual: drawn there, not at the slice's start"


# --- 3. in flight is its own outcome ------------------------------------------------------------------------
def _in_flight_trace() -> Trace:
    tr = _run_trace(0.0)
    tr.add(6.5, "consumer", "node.start")
    # A long-polling pull the broker still holds when the trace ends.
    tr.invoke(9.8, "consumer", "pull", {"topic": "T", "broker_name": "broker-b", "queue_id": 1})
    # A send still waiting for its answer when the trace ends.
    tr.invoke(9.9, "producer", "send", {"topic": "T", "uniq_key": "late"})
    # A send whose client crashed before the answer: that one's outcome is unknown for good.
    tr.invoke(7.0, "p2", "send", {"topic": "T", "uniq_key": "lost-answer"})
    tr.add(7.5, "p2", "node.crash")
    tr.add(10.0, "nemesis", "log", level="INFO", message="end")
    return tr


def test_an_operation_in_flight_at_the_end_is_no_failure():
    from rmqlab.viz.sends import consumption_figure, pull_rows, sends_figure

    IN_FLIGHT = "in flight"

    events = _in_flight_trace().events
    bars = _bars(sends_figure(events))
    assert bars[IN_FLIGHT] == 1 and bars["unknown"] == 1, bars
    in_flight = [t for t in sends_figure(events).data if t.name == IN_FLIGHT][0]
    assert in_flight.marker.pattern.shape == "/", "drawn distinctly from the answered outcomes"
    assert [r["outcome"] for r in pull_rows(events) if r["broker_set"] == "broker-b"] == [IN_FLIGHT]
    fig = consumption_figure(events)
    failed = [y for t in fig.data if t.name == "pull failed / timed out" for y in t.y]
    assert "broker-b: pull failed" not in failed and "broker-b: pull failed" not in (fig.layout.yaxis.categoryarray or ())


def test_the_demo_table_counts_in_flight_sends_apart():
    from rmqlab.demo.report import failover_section

    f = types.SimpleNamespace(seed=7, crashed="broker-n0", new_master="broker-n1", elected_after_ms=10_100.0,
                              first_ack_after_ms=12_000.0, acknowledged=498, unknown=1, in_flight=1, checks={})
    section = failover_section(f)
    assert "<th>in flight at the end</th>" in section and "<td>1</td><td>1</td></tr>" in section


# --- 4. one time axis per run ------------------------------------------------------------------------------
def test_a_runs_figures_in_the_report_share_one_time_axis(tmp_path):
    from rmqlab.demo.report import write_report

    events = _run_trace(0.0).events
    figures = list(_figures(events).values())
    f = types.SimpleNamespace(seed=7, crashed="broker-a", new_master=None, elected_after_ms=None,
                              first_ack_after_ms=None, acknowledged=6, unknown=0, in_flight=0, checks={},
                              run=types.SimpleNamespace(events=events))
    write_report([], str(tmp_path / "report.html"), failover=f, failover_figures=figures)
    titles = set().union(*(_time_axis_titles(fig) for fig in figures))
    assert titles == {VIRTUAL_LABEL}
    ranges = {tuple(ax.get("range") or ()) for fig in figures for ax in _x_axes(fig).values()}
    assert len(ranges) == 1, f"the failover figures span different seconds: {ranges}"
    (lo, hi), = ranges
    assert lo <= 0.0 and hi >= 6.0


# --- 5. log axes ------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("latencies_s, decades", [((0.0015, 0.002, 0.004), (0, 1)),  # 1.5..4 ms: one decade
                                                    ((0.0003, 0.25), (-1, 3))])
def test_latency_log_axis_labels_whole_decades(latencies_s, decades):
    from rmqlab.viz.sends import sends_figure

    tr = Trace()
    for i, latency in enumerate(latencies_s):
        tr.send(1.0 + i, latency, f"m{i}", value={"broker_name": "broker-a"})
    y = sends_figure(tr.events).layout.yaxis2
    assert y.type == "log" and y.dtick == 1, "one labelled tick per decade: 2 and 5 labels collide"
    assert tuple(y.range) == decades and y.range[1] - y.range[0] >= 1, "at least two labelled ticks"
    assert all(10 ** y.range[0] <= latency * 1000 <= 10 ** y.range[1] for latency in latencies_s)


def test_log_axis_of_nothing_is_still_a_decade():
    assert log_axis([])["range"] == [0, 1] and log_axis([None, 10.0])["range"] == [1, 2]
    assert all(isinstance(v, int) for v in log_axis([0.37, 5.2])["range"]) and not math.isnan(log_axis([1.0])["range"][0])


# --- 6. a font stack with a CJK font --------------------------------------------------------------------------
def test_report_and_lab_figures_declare_a_cjk_font(tmp_path):
    import plotly.io as pio

    from rmqlab.demo.report import write_report
    from rmqlab.viz import notebook_setup, quiet_logs

    fig = go.Figure(go.Scatter(x=[0], y=[0]), layout={"title": "消息无延迟"})
    f = types.SimpleNamespace(seed=7, crashed="a", new_master=None, elected_after_ms=None, first_ack_after_ms=None,
                              acknowledged=0, unknown=0, in_flight=0, checks={}, run=types.SimpleNamespace(events=[]))
    report = open(write_report([], str(tmp_path / "r.html"), failover=f, failover_figures=[fig]),
                  encoding="utf-8").read()
    css = report[report.index("<style>"):report.index("</style>")]
    assert '"Noto Sans CJK SC"' in css[css.index("body{font-family:"):].split(";")[0]
    assert '"Noto Sans CJK SC"' in (fig.layout.font.family or ""), "plotly draws SVG text in its own font"
    saved = pio.renderers.default, pio.templates.default
    try:
        with quiet_logs():  # notebook_setup quiets the loggers for good: give the test session its levels back
            notebook_setup()
        assert '"Noto Sans CJK SC"' in (pio.templates[pio.templates.default].layout.font.family or "")
    finally:
        pio.renderers.default, pio.templates.default = saved


@pytest.mark.browser
@pytest.mark.real
def test_bootstrap_installs_a_cjk_font_beside_chromium(monkeypatch, tmp_path):
    from rmqlab import bootstrap

    calls = []
    chromium = tmp_path / "chromium"
    chromium.write_text("")
    monkeypatch.setenv("RMQLAB_CHROMIUM", str(chromium))
    monkeypatch.setattr(bootstrap.os, "geteuid", lambda: 0)
    monkeypatch.setattr(bootstrap.shutil, "which", lambda name: f"/usr/bin/{name}")
    fonts = {"installed": False}

    def run(argv, **kwargs):
        calls.append(list(argv))
        if argv[0].endswith("fc-list"):  # fontconfig's answer: a Chinese font once the package is in
            return types.SimpleNamespace(returncode=0, stdout="Noto Sans CJK SC\n" if fonts["installed"] else "")
        fonts["installed"] = fonts["installed"] or "fonts-noto-cjk" in argv
        return types.SimpleNamespace(returncode=0, stdout="")

    monkeypatch.setattr(bootstrap.subprocess, "run", run)
    monkeypatch.setattr(bootstrap.subprocess, "call", lambda argv, **kw: run(argv, **kw).returncode)
    bootstrap.ensure_chromium()
    installs = [c for c in calls if c[0].endswith("apt-get") and "install" in c]
    assert installs and "fonts-noto-cjk" in installs[0] and "chromium" not in installs[0]
    assert bootstrap.cjk_font_installed()


# --- orderly consumption: each order's steps as the group consumed them ----------------------------------
def test_orderly_figure_marks_a_step_after_a_later_one_a_repeat_and_a_step_never_consumed():
    from rmqlab.viz.orderly import ordered_consumes, ordered_consumption_figure
    tr = Trace()
    for step in range(3):
        for order in ("o-1", "o-2"):
            op = tr.invoke(1.0, "producer", "send", {"topic": "T", "keys": order, "tags": f"step{step}"})
            tr.complete(1.01, "producer", op, "send", "ok", {"send_status": "SEND_OK"})

    def consume(t_s, node, order, step):
        op = tr.invoke(t_s, node, "consume", {"topic": "T", "keys": order, "tags": f"step{step}", "queue_id": 1,
                                              "orderly": True})
        tr.complete(t_s, node, op, "consume", "ok", "SUCCESS")

    for t_s, node, step in ((2.0, "c2", 0), (2.1, "c2", 1), (2.2, "c1", 0), (2.3, "c2", 2), (2.4, "c1", 1)):
        consume(t_s, node, "o-1", step)
    consume(2.5, "c2", "o-2", 0)  # o-2's steps 1 and 2 never consumed
    seen = [(c.consumer, c.step, c.behind, c.again) for c in ordered_consumes(tr.events, "T") if c.order == "o-1"]
    assert seen == [("c2", 0, False, False), ("c2", 1, False, False), ("c1", 0, True, True),
                    ("c2", 2, False, False), ("c1", 1, True, True)]
    fig = ordered_consumption_figure({"run": tr.events}, "T")
    drawn = {}
    for t in fig.data:
        for x, y, text in zip(t.x or (), t.y or (), t.text or ()):
            if x is not None:
                drawn[(y, x)] = (t.name, text)
    assert drawn[("o-1", 3)] == ("consumer c1", "0") and drawn[("o-1", 5)] == ("consumer c1", "1")
    rings = [t for t in fig.data if t.name == "consumer c1" and t.x and t.x[0] is not None][0].marker.line.color
    assert list(rings) == ["#d62728", "#d62728"]  # both of c1's consumptions came after a later step
    assert {k: v for k, v in drawn.items() if v[0].startswith("sent, not consumed")} == {
        ("o-2", 2): ("sent, not consumed by the run's end", "step 1"),
        ("o-2", 3): ("sent, not consumed by the run's end", "step 2")}
    assert "after a later step (out of order)" in {t.name for t in fig.data}


# --- DLedger: roles over time and the commit index --------------------------------------------------------
def test_dledger_figure_greys_a_dead_member_and_holds_a_commit_index_only_while_its_leader_leads():
    from rmqlab.viz.dledger import dledger_figure, role_segments

    tr = Trace()

    def role(t_s, node, role_, term, leader):
        tr.add(t_s, node, "dledger.role", group="g", self_id=node, role=role_, term=term, leader=leader,
               ledger_end_index=-1, ledger_end_term=-1)

    for node in ("n0", "n1", "n2"):
        role(0.0, node, "CANDIDATE", 0, None)
    role(1.0, "n0", "LEADER", 1, "n0")
    role(1.0, "n1", "FOLLOWER", 1, "n0")
    role(1.0, "n2", "FOLLOWER", 1, "n0")
    tr.add(1.5, "n0", "dledger.commit", group="g", self_id="n0", term=1, commit_index=4, previous=-1, acked=5,
           ledger_end_index=4)
    tr.add(2.0, "n0", "node.kill")
    role(8.0, "n1", "LEADER", 2, "n1")
    tr.add(9.0, "n1", "dledger.commit", group="g", self_id="n1", term=2, commit_index=9, previous=-1, acked=5,
           ledger_end_index=9)
    tr.add(12.0, "n2", "log", level="INFO", message="end")
    segs = role_segments(tr.events)
    assert [(s / 1000, e / 1000, r) for s, e, r, _ in segs["n0"]] == [(0.0, 1.0, "CANDIDATE"), (1.0, 2.0, "LEADER"),
                                                                       (2.0, 12.0, "DOWN")]
    fig = dledger_figure(tr.events)
    lines = {t.name: (list(t.x), list(t.y)) for t in fig.data if t.type == "scatter"}
    assert lines["commit index at n0"] == ([1.5, 2.0], [4, 4])      # ends with n0's leadership, at its death
    assert lines["commit index at n1"] == ([9.0, 12.0], [9, 9])     # held to the end: n1 still leads
    down = [t for t in fig.data if t.type == "bar" and t.name == "down"]
    assert [(t.y[0], t.base[0], t.x[0]) for t in down] == [("n0", 2.0, 10.0)]
