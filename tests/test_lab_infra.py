"""The labs' shared pieces: the committed form of every notebook, the notebook tool, node_states,
FaultPanel, `rmqlab lab` and the demo's failover scenario."""

from __future__ import annotations

import argparse
import glob
import html
import os

import nbformat
import pytest
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook, new_output

from rmqlab.lab import launcher
from rmqlab.lab.notebooks import PRIVATE_POINTER, WIDGET_VIEW, problems, strip
from rmqlab.trace.event import TraceEvent
from rmqlab.viz.trace_views import describe_state, node_states

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
LABS = sorted(glob.glob(os.path.join(ROOT, "labs", "*.ipynb")))


def test_there_are_five_labs():
    names = [os.path.basename(p)[:3] for p in LABS]
    assert names == ["01-", "02-", "03-", "04-", "05-"], LABS


@pytest.mark.parametrize("path", LABS, ids=os.path.basename)
def test_committed_lab_is_in_its_committed_form(path):
    """Under 1 MiB, no widget state, a parameters cell with seed and grading, objectives, a link to a
    public source, and no pointer a student cannot follow."""
    assert problems(path) == []


def _lab_notebook() -> nbformat.NotebookNode:
    widget = new_output("display_data", data={WIDGET_VIEW: {"model_id": "x", "version_major": 2, "version_minor": 0},
                                              "text/plain": "VBox()"})
    text = new_output("stream", name="stdout", text="hello\n")
    more = new_output("stream", name="stdout", text="world\n")
    nb = new_notebook(cells=[
        new_markdown_cell("# Lab\n\n## Learning objectives\n\nThe deployment guide "
                          "(https://rocketmq.apache.org/zh/docs/deploymentOperations/01deploy), heading 「部署方式」."),
        new_code_cell("seed = 7\ngrading = False", metadata={"tags": ["parameters"]}),
        new_code_cell("w", outputs=[widget, text, more], metadata={"execution": {"iopub.status.busy": "2026"}}),
    ])
    nb.metadata["widgets"] = {"application/vnd.jupyter.widget-state+json": {"state": {"x": {}}}}
    return nb


def test_strip_drops_widget_state_and_outputs_and_keeps_the_rest(tmp_path):
    nb = _lab_notebook()
    path = tmp_path / "lab.ipynb"
    nbformat.write(nb, path)
    found = problems(str(path))
    assert "metadata.widgets present (run `python -m rmqlab.lab.notebooks strip`)" in found
    assert "1 widget output(s) left" in found
    nbformat.write(strip(nb), path)
    assert problems(str(path)) == []
    cell = nbformat.read(path, as_version=4).cells[2]
    assert [o.get("text") for o in cell.outputs] == ["hello\nworld\n"] and "execution" not in cell.metadata


def test_problems_name_what_is_missing(tmp_path):
    nb = _lab_notebook()
    nb.cells[0].source = "# Lab"
    nb.cells[1].source = "seed = 7"
    path = tmp_path / "lab.ipynb"
    nbformat.write(strip(nb), path)
    assert problems(str(path)) == ["the parameters cell does not set 'grading'",
                                   "the first cell is not markdown with 'Learning objectives'",
                                   "no link to a public source (RocketMQ's docs site or repository)"]


# What the lab checker must catch; each line is marked as a fixture for
# tests/test_no_private_references.py, which would otherwise take it for a citation.
@pytest.mark.parametrize("pointer", [
    "seed `000_b706e6b38166b767.txt`",  # private-reference-fixture
    "the seeds in shared/seeds/",  # private-reference-fixture
    "reference §2.7",  # private-reference-fixture
    "reference Appendix A item 3",  # private-reference-fixture
    "as issue 8 §4 asks",  # private-reference-fixture
    "seed 003's triggers",  # private-reference-fixture
])
def test_problems_name_a_pointer_a_student_cannot_follow(tmp_path, pointer):
    nb = _lab_notebook()
    nb.cells.append(new_markdown_cell(f"See {pointer}."))
    path = tmp_path / "lab.ipynb"
    nbformat.write(strip(nb), path)
    assert problems(str(path)) == [f"cell 3 points to {PRIVATE_POINTER.search(pointer).group(0)!r}, "
                                   "which a student cannot open"]


def _event(seq, node, kind, **fields):
    return TraceEvent(seq, float(seq), node, kind, fields)


def test_node_states_follow_the_trace():
    events = [_event(0, "broker-a", "node.start", component="broker"),
              _event(1, "broker-a", "role", **{"from": None, "to": "SYNC_MASTER", "component": "broker", "epoch": 1}),
              _event(2, "broker-a", "role", **{"from": None, "to": "MASTER", "component": "ha", "epoch": 1}),
              _event(3, "n0", "node.start", component="controller"),
              _event(4, "n0", "role", **{"from": None, "to": "FOLLOWER", "component": "raft", "term": 0}),
              _event(5, "n0", "raft", term=3, leader="n1"),
              _event(6, "broker-a", "node.crash"),
              _event(7, "n0", "node.suspend"),
              _event(8, "namesrv", "node.start", component="namesrv")]
    states = node_states(events)
    assert states["broker-a"] == {"up": False, "suspended": False, "how": "crash", "role": "SYNC_MASTER",
                                  "epoch": 1, "term": None}
    assert describe_state(states["broker-a"]) == "down: crash (was SYNC_MASTER)"
    assert describe_state(states["n0"]) == "FOLLOWER (term 3), suspended"
    assert describe_state(states["namesrv"]) == "up"


def test_fault_panel_acts_like_a_click_and_shows_refusals():
    from rmqlab.cluster import Cluster
    from rmqlab.viz.controls import FaultPanel

    with Cluster("2m-2s-async", seed=3) as c:
        c.start()
        panel = FaultPanel(c, step_ms=1_000)
        seen = []
        panel.on_change(lambda events: seen.append(len(events)))
        labels = [b.description for row in panel.widget.children[1:-2] for b in row.children[1:]]
        assert "kill broker-a" in labels and "partition broker-b-s" in labels
        before = c.sim.now_ms()
        assert panel.act("kill", "broker-a")
        assert c.sim.now_ms() - before == pytest.approx(1_000)
        assert "down: kill (was ASYNC_MASTER)" in panel.roles.value and "last action: kill broker-a" in panel.status.value
        assert not panel.act("restart", "broker-b")   # running: the nemesis refuses, the panel says why
        assert "restart broker-b: refused" in panel.status.value
        assert not panel.act("explode", "broker-b") and "unknown action 'explode'" in html.unescape(panel.status.value)
        assert panel.act("restart", "broker-a") and panel.act("partition", "broker-b") and panel.act("heal")
        assert len(seen) == 4 and seen == sorted(seen)
        assert "ASYNC_MASTER" in panel.roles.value.split("broker-a</b>")[1].split("</tr>")[0]


def test_rmqlab_lab_serves_the_labs_folder_on_loopback(tmp_path):
    parser = argparse.ArgumentParser()
    launcher.add_arguments(parser)
    argv = launcher.jupyterlab_argv(parser.parse_args(["--no-browser", "--port", "9999"]))
    assert argv[1:3] == ["-m", "jupyterlab"]
    assert f"--ServerApp.root_dir={os.path.join(ROOT, 'labs')}" in argv
    assert "--ServerApp.ip=127.0.0.1" in argv and "--ServerApp.port=9999" in argv and "--no-browser" in argv
    with pytest.raises(SystemExit, match="no notebooks folder"):
        launcher.jupyterlab_argv(parser.parse_args(["--dir", str(tmp_path / "missing")]))


def test_demo_failover_scenario_elects_from_the_sync_state_set_and_loses_nothing():
    from rmqlab.demo.controller_failover import run_failover

    r = run_failover(7)
    try:
        assert r.valid, r.checks
        assert r.new_master not in (None, r.crashed)
        # A machine crash is silent: the controller waits out controllerHeartBeatTimeoutMills (10 s).
        assert 10_000 <= r.elected_after_ms < 12_000 and r.elected_after_ms < r.first_ack_after_ms < 15_000
        assert r.checks["total-queue"].stats["lost"] == 0 and r.acknowledged > 400
    finally:
        r.run.cleanup()
