"""Lab 02 (the Raft controller): the `controller.event` trace kind, the figures and tables
of rmqlab.viz.controller built from a trace, their determinism, and the notebook's exercise check
(with the reference solution, which lives here and never in labs/).

The cluster runs are seeded simulator runs of controller mode (three controllers, broker set
broker-a of three replicas), a few virtual minutes each, about a second of wall time.
"""

from __future__ import annotations

import itertools
import json
from pathlib import Path

import nbformat
import plotly.graph_objects as go
import pytest

from rmqlab.checker.checkers import sync_state_sets
from rmqlab.cluster import Cluster
from rmqlab.common.manual_clock import ManualClock
from rmqlab.config.controller import ControllerConfig
from rmqlab.controller.impl.controller_state_machine import ControllerStateMachine
from rmqlab.controller.impl.event import (AlterSyncStateSetEvent, ApplyBrokerIdEvent, CleanBrokerDataEvent,
                                          ElectMasterEvent, ListEventSerializer, UpdateBrokerAddressEvent)
from rmqlab.controller.impl.manager.replicas_info_manager import ReplicasInfoManager
from rmqlab.lab.notebooks import problems
from rmqlab.trace import KINDS, Tracer, TraceEvent, trace_hash
from rmqlab.viz.controller import (RAFT_STATES, TRIGGERS, ControllerView, broker_nodes, controller_nodes,
                                   elections, elections_text, event_log, event_log_figure, event_log_text,
                                   log_conflicts, metadata_rows, metadata_text, raft_figure, raft_leaders,
                                   raft_spans, raft_status, raft_text, replay, sync_state_figure,
                                   sync_state_history)
from rmqlab.viz.figure_widgets import redraw

NOTEBOOK = Path(__file__).resolve().parent.parent / "labs" / "02-raft-controller.ipynb"


# --- running a controller-mode cluster ----------------------------------------------------------------
def sync_state(c: Cluster):
    history = sync_state_history(c.events(), "broker-a")
    return history[-1] if history else None


def settle(c: Cluster, replicas: int = 3) -> None:
    def ready():
        s = sync_state(c)
        return s is not None and s.master is not None and len(s.sync_state_set) == replicas
    c.run_until(ready, 60_000)


def failover_run(seed: int, root_dir: Path) -> tuple[list[TraceEvent], dict]:
    """Start-up, the master killed and restarted, the controller leader killed; the trace and what
    the running components hold at the end (for comparison with what the figures read)."""
    c = Cluster("controller-standalone", seed=seed, root_dir=str(root_dir))
    try:
        c.start()
        settle(c)
        master = c.master()
        c.nemesis.kill(master)
        c.run_until(lambda: c.master() not in (None, master), 30_000)
        c.nemesis.restart(master)
        settle(c)
        leader = c.controller_leader()
        c.nemesis.kill(leader)
        c.run_for(10_000)
        live = {n: c.components[n].controller.replicas_info_manager.serialize()
                for n in c.controller_nodes if n != leader}
        ids = {n: c.components[n].replicas_manager.broker_controller_id for n in c.brokers}
        return list(c.events()), {"killed_master": master, "killed_leader": leader, "master": c.master(),
                                  "leader": c.controller_leader(), "tables": live, "ids": ids}
    finally:
        c.close()


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    return failover_run(7, tmp_path_factory.mktemp("failover"))


# --- the trace kind -------------------------------------------------------------------------------------
def test_controller_event_kind_is_in_the_catalog():
    spec = KINDS["controller.event"]
    assert [f.name for f in spec.required] == ["event", "index", "term", "writer", "applied"]
    assert {f.name for f in spec.optional} == {"broker_set", "body", "position"}
    assert set(spec.required[0].choices) == {"ApplyBrokerIdEvent", "ElectMasterEvent", "AlterSyncStateSetEvent",
                                             "CleanBrokerDataEvent", "UpdateBrokerAddressEvent", "OpenTerm"}


class _StubSyncObj:
    raftLastApplied = 6


def test_the_state_machine_traces_each_applied_entry_and_fenced_ones():
    """OpenTerm, then a batch of the current writer (applied, one event per position), then a batch
    of a stale writer (fenced: traced with applied false, the tables unchanged)."""
    tracer = Tracer(ManualClock(start_ms=0))
    manager = ReplicasInfoManager(ControllerConfig())
    sm = ControllerStateMachine(manager)
    sm._syncObj = _StubSyncObj()
    sm.trace = lambda kind, **fields: tracer.emit("controller-n0", kind, **fields)
    sm.open_term("n0", 2, _doApply=True)
    batch = ListEventSerializer.serialize([ApplyBrokerIdEvent("C", "broker-a", "127.0.0.1:1", 1, "127.0.0.1:1;0"),
                                           ElectMasterEvent("broker-a", 1)])
    _StubSyncObj.raftLastApplied = 7
    assert sm.apply_event_batch("n0", 2, batch, _doApply=True) is True
    stale = ListEventSerializer.serialize([AlterSyncStateSetEvent("broker-a", {1, 2})])
    _StubSyncObj.raftLastApplied = 8
    before = manager.serialize()
    assert sm.apply_event_batch("n1", 1, stale, _doApply=True) is False
    assert manager.serialize() == before
    got = [(e.fields["event"], e.fields["index"], e.fields.get("position"), e.fields["applied"], e.fields["writer"],
            e.fields["term"]) for e in tracer.events]
    assert got == [("OpenTerm", 7, None, True, "n0", 2), ("ApplyBrokerIdEvent", 8, 0, True, "n0", 2),
                   ("ElectMasterEvent", 8, 1, True, "n0", 2), ("AlterSyncStateSetEvent", 9, 0, False, "n1", 1)]
    assert tracer.events[2].fields["body"] == {"brokerName": "broker-a", "eventType": "ELECT_MASTER_EVENT",
                                               "newMasterBrokerId": 1, "newMasterElected": True}
    assert tracer.events[1].fields["broker_set"] == "broker-a"


def test_without_a_tracer_the_state_machine_applies_silently():
    sm = ControllerStateMachine(ReplicasInfoManager(ControllerConfig()))
    sm._syncObj = _StubSyncObj()
    sm.open_term("n0", 1, _doApply=True)
    batch = ListEventSerializer.serialize([ApplyBrokerIdEvent("C", "broker-a", "127.0.0.1:1", 1, "x;0")])
    assert sm.apply_event_batch("n0", 1, batch, _doApply=True) is True
    assert "broker-a" in sm.replicas_info_manager.replica_info_table


def test_every_controller_traces_the_same_log(run):
    events, _ = run
    controllers = controller_nodes(events)
    assert controllers == ["controller-n0", "controller-n1", "controller-n2"]
    applied = [e for e in events if e.kind == "controller.event"]
    assert {e.node for e in applied} == set(controllers)
    assert log_conflicts(events) == []
    log = event_log(events)
    assert [(entry.index, entry.position) for entry in log] == sorted({(e.index, e.position) for e in log})
    assert log[0].event == "OpenTerm" and log[0].index == 3  # pysyncobj's own entries come first
    assert [entry.event for entry in log[1:3]] == ["ApplyBrokerIdEvent", "ElectMasterEvent"]
    # Entries committed before the leader died were applied by all three controllers.
    first_term = [entry for entry in log if entry.term == log[0].term]
    assert all(set(entry.applied_on) == set(controllers) for entry in first_term)
    # Within one controller incarnation the indexes it applies only grow.
    for node in controllers:
        mine = [e.fields["index"] for e in applied if e.node == node]
        assert mine == sorted(mine)


# --- figures and tables ------------------------------------------------------------------------------------
def test_replaying_the_log_gives_the_tables_every_controller_holds(run):
    events, facts = run
    rebuilt = replay(events).serialize()
    assert facts["tables"] and all(held == rebuilt for held in facts["tables"].values())
    replicas, syncs = metadata_rows(replay(events))
    assert [r["broker_id"] for r in replicas] == [1, 2, 3]
    assert len(syncs) == 1 and syncs[0]["sync_state_set"] == [1, 2, 3]
    # A prefix of the log gives the state at that point: right after the first election.
    first_election = next(e.index for e in event_log(events) if e.event == "ElectMasterEvent")
    _, early = metadata_rows(replay(events, upto_index=first_election))
    assert early == [{"broker_set": "broker-a", "master_broker_id": 1, "master_epoch": 1, "sync_state_set": [1],
                      "sync_state_set_epoch": 1}]
    text = metadata_text(events)
    assert "replicaInfoTable" in text and "syncStateSetInfoTable" in text and "{1, 2, 3}" in text


def test_sync_state_history_follows_the_masters_the_brokers_took(run):
    events, facts = run
    history = sync_state_history(events, "broker-a")
    masters = []
    for point in history:
        if point.master is not None and (not masters or masters[-1] != (point.master, point.master_epoch)):
            masters.append((point.master, point.master_epoch))
    ids = facts["ids"]
    assert masters[0] == (ids[facts["killed_master"]], 1)
    assert masters[-1] == (ids[facts["master"]], 2)
    assert [p.master_epoch for p in history] == sorted(p.master_epoch for p in history)
    assert broker_nodes(events) == {("broker-a", i): node for node, i in ids.items()}


def _manager_view(manager: ReplicasInfoManager, broker_set: str) -> tuple:
    info = manager.sync_state_set_info_table.get(broker_set)
    replicas = manager.replica_info_table.get(broker_set)
    return (info.master_broker_id if info else None, info.master_epoch if info else 0,
            tuple(sorted(info.sync_state_set)) if info else (), info.sync_state_set_epoch if info else 0,
            tuple(sorted(replicas.broker_id_info)) if replicas else ())


def _point_view(p) -> tuple:
    return (p.master, p.master_epoch, p.sync_state_set, p.sync_state_set_epoch, p.broker_ids)


def test_the_checkers_replay_agrees_with_the_controllers_state_machine(run):
    """sync_state_history (the election checker's own model of the log, also behind these figures)
    and ReplicasInfoManager.apply_event give the same replica info after every entry: on the run,
    and on a hand-written log with what the run lacks (an election finding nobody, partial and
    whole cleans, a set started afresh, a second set, fenced and OpenTerm entries)."""
    events, _ = run
    last_per_index = {p.index: p for p in sync_state_history(events)}
    assert len(last_per_index) > 5
    for index, p in last_per_index.items():
        assert _point_view(p) == _manager_view(replay(events, upto_index=index), p.broker_set), index

    a, b = "broker-a", "broker-b"
    log = [ApplyBrokerIdEvent("C", a, "127.0.0.1:1", 1, "x;1"), ApplyBrokerIdEvent("C", a, "127.0.0.1:2", 2, "x;2"),
           ApplyBrokerIdEvent("C", a, "127.0.0.1:3", 3, "x;3"), ElectMasterEvent(a, 1),
           AlterSyncStateSetEvent(a, {1, 2, 3}), ApplyBrokerIdEvent("C", b, "127.0.0.1:4", 1, "x;4"),
           ElectMasterEvent(b, 1), UpdateBrokerAddressEvent("C", a, "127.0.0.1:9", 3), CleanBrokerDataEvent(a, {3}),
           ElectMasterEvent(a, None, False), AlterSyncStateSetEvent(a, {2}), ElectMasterEvent(a, 2),
           CleanBrokerDataEvent(a, {2}),  # the SyncStateSet left empty: that table is dropped
           ElectMasterEvent(a, 1),        # so the set is not contained: ignored
           ApplyBrokerIdEvent("C", a, "127.0.0.1:5", 4, "x;5"), ElectMasterEvent(a, 4), CleanBrokerDataEvent(b),
           ApplyBrokerIdEvent("C", b, "127.0.0.1:6", 7, "x;6")]
    tracer, manager = Tracer(ManualClock(start_ms=0)), ReplicasInfoManager(ControllerConfig())
    expected, indexes = [], itertools.count(10)
    for k, event in enumerate(log):
        body = event.to_json_dict()
        if k % 4 == 0:  # a stale writer's entry, and a new leader's OpenTerm: neither changes anything
            tracer.emit("controller-n1", "controller.event", event=type(event).__name__, index=next(indexes),
                        term=1, writer="n1", applied=False, broker_set=event.broker_name, body=body, position=0)
            tracer.emit("controller-n0", "controller.event", event="OpenTerm", index=next(indexes), term=2,
                        writer="n0", applied=True)
        index = next(indexes)
        for node in ("controller-n0", "controller-n2"):
            tracer.emit(node, "controller.event", event=type(event).__name__, index=index, term=2, writer="n0",
                        applied=True, broker_set=event.broker_name, body=body, position=0)
        manager.apply_event(event)
        expected.append((type(event).__name__, event.broker_name, _manager_view(manager, event.broker_name)))
    got = [(p.event, p.broker_set, _point_view(p)) for p in sync_state_history(tracer.events)]
    assert got == expected
    assert got[-6][2] == (None, 0, (), 0, (1,)) and got[-1][2] == (None, 0, (), 0, (7,))
    assert sync_state_sets(tracer.events) == {a: [4]}  # broker-b registered again, none in sync yet


def test_raft_spans_and_leaders(run):
    events, facts = run
    spans = raft_spans(events)
    end = events[-1].time_ms
    leaders = raft_leaders(events)
    assert all(len(nodes) == 1 for nodes in leaders.values()), leaders  # Election Safety
    assert leaders[min(leaders)] == [facts["killed_leader"]]
    assert leaders[max(leaders)] == [facts["leader"]]
    for node in controller_nodes(events):
        mine = [s for s in spans if s.node == node]
        assert all(a.end_ms == b.start_ms for a, b in zip(mine, mine[1:])), f"{node}: gaps between spans"
        assert mine[-1].end_ms == end and {s.state for s in mine} <= set(RAFT_STATES)
    assert [s.state for s in spans if s.node == facts["killed_leader"]][-1] == "down"
    # Never two leaders at once.
    lead = sorted((s.start_ms, s.end_ms) for s in spans if s.state == "LEADER")
    assert all(a[1] <= b[0] for a, b in zip(lead, lead[1:]))
    status = raft_status(events)
    assert status[facts["leader"]]["state"] == "LEADER"
    assert status[facts["killed_leader"]]["state"] == "down"
    assert f"{facts['leader']:<15}LEADER" in raft_text(events)


def test_the_figures_show_the_trace(run):
    events, facts = run
    fig = raft_figure(events)
    bars = {t.name: t for t in fig.data if t.type == "bar"}
    assert list(bars) == list(RAFT_STATES)
    assert len([t for t in fig.data if t.type == "scatter"]) == 3
    assert facts["killed_leader"] in bars["down"].y and "term 1" in bars["LEADER"].text
    sfig = sync_state_figure(events, "broker-a")
    names = [t.name for t in sfig.data]
    assert names == ["master", "in SyncStateSet", "registered", "process killed / crashed", "restarted",
                     "masterEpoch", "syncStateSetEpoch"]
    killed = sfig.data[3]
    assert len(killed.x) == 1 and killed.y[0].endswith(f"({facts['killed_master']})")
    assert sfig.data[5].y[-1] == 2  # masterEpoch after one failover
    table = event_log_figure(events)
    assert list(table.data[0].cells.values[4][:3]) == ["OpenTerm", "ApplyBrokerIdEvent", "ElectMasterEvent"]
    text = event_log_text(events)
    assert "ElectMasterEvent" in text and "master := 1, SyncStateSet := {1}" in text


def test_elections_name_their_triggers(run):
    events, facts = run
    found = elections(events)
    assert [e.trigger for e in found] == ["b.ii", "a.i"]
    first, second = found
    assert first.requested_by == facts["killed_master"] and first.new_master == 1
    assert second.cause.kind == "controller.master_inactive" and second.master_epoch == 2
    assert "b.ii" in elections_text(events) and set(TRIGGERS) >= {"a.i", "a.ii", "b.i", "b.ii", "c"}


def test_the_same_seed_gives_the_same_figures_and_tables(run, tmp_path):
    events, _ = run
    again, _ = failover_run(7, tmp_path)
    assert trace_hash(again) == trace_hash(events)
    assert raft_figure(again).to_json() == raft_figure(events).to_json()
    assert sync_state_figure(again).to_json() == sync_state_figure(events).to_json()
    assert event_log_text(again) == event_log_text(events) and elections_text(again) == elections_text(events)


def test_the_live_view_redraws_in_place(run):
    events, _ = run
    half = events[:len(events) // 2]
    view = ControllerView(half)
    roles_before = view.roles.data[0].x
    view.update(events)
    assert view.roles.data[0].x == raft_figure(events).data[0].x != roles_before
    assert "down" in view.status.value and "applied up to index" in view.status.value
    assert "ElectMasterEvent" in view.log.value
    # Another controller count means other traces: the widget takes the new ones.
    three = len(view.roles.data)
    view.update([e for e in events if e.node != "controller-n2"])
    assert len(view.roles.data) == three - 1


def test_redraw_leaves_the_widget_equal_to_the_figure(run):
    """rmqlab.viz.figure_widgets.redraw, behind every live figure of the labs: the same traces are
    updated in place (the widget keeps its trace objects), other traces replace them, and whatever
    the new figure leaves out is reset rather than left over."""
    events, _ = run

    def set_(value):  # what is set: a property reset to None reads back as {} (or [] for shapes)
        if isinstance(value, dict):
            value = {k: set_(v) for k, v in value.items() if k != "uid"}
            return {k: v for k, v in value.items() if v not in ({}, [], None)}
        return [set_(v) for v in value] if isinstance(value, (list, tuple)) else value

    def content(fig) -> dict:
        return set_(fig.to_dict())

    widget = go.FigureWidget(sync_state_figure(events[:len(events) // 3]))
    kept = list(widget.data)
    redraw(widget, sync_state_figure(events))
    assert content(widget) == content(sync_state_figure(events))
    assert all(a is b for a, b in zip(widget.data, kept)), "the same traces: updated in place"
    redraw(widget, raft_figure(events))
    assert content(widget) == content(raft_figure(events)) and widget.data[0] is not kept[0]
    marked = go.Figure(go.Scatter(x=[1], y=[2], name="n", text=["t"], marker_color="red"),
                       layout=dict(title="with", shapes=[dict(type="line", x0=0, x1=1, y0=0, y1=1)]))
    plain = go.Figure(go.Scatter(x=[1], y=[3], name="n"))
    redraw(widget, marked)
    redraw(widget, plain)
    assert content(widget) == content(plain)
    assert widget.data[0].text is None and widget.data[0].marker.color is None and not widget.layout.shapes
    assert widget.layout.title.text is None


def triggers_run(seed: int, root_dir: Path) -> list[TraceEvent]:
    """The Raft article's election triggers one after the other (lab 02 section 5): start-up (b.ii), the master killed
    (a.i), mqadmin electMaster (c), the master and the controller leader killed together (a.ii), the
    slaves cut off from the controllers before the master dies (a.i finds nobody, then b.i)."""
    from rmqlab.client import ClientProcess, DefaultMQAdminExt

    c = Cluster("controller-standalone", seed=seed, root_dir=str(root_dir))
    try:
        c.start()
        settle(c)
        c.add_client("admin", lambda: ClientProcess(admin=DefaultMQAdminExt(c.namesrv_addr)))
        master = c.master()
        c.nemesis.kill(master)
        c.run_until(lambda: c.master() not in (None, master), 30_000)
        c.nemesis.restart(master)
        settle(c)
        target = sorted(n for n in c.brokers if n != c.master())[0]
        ids = {node: i for (_, i), node in broker_nodes(c.events()).items()}
        c.sim.run(c.sim.components["admin"]["admin"].elect_master(c.controller_addr, "DefaultCluster", "broker-a",
                                                                   ids[target]))
        c.run_until(lambda: c.master() == target, 30_000)
        settle(c)
        leader, master = c.controller_leader(), c.master()
        c.nemesis.kill(leader)
        c.nemesis.kill(master)
        c.run_until(lambda: c.master() not in (None, master), 60_000)
        c.nemesis.restart(leader)
        c.nemesis.restart(master)
        settle(c)
        master = c.master()
        c.nemesis.partition([n for n in c.brokers if n != master], c.controller_nodes)
        c.run_for(20_000)
        c.nemesis.kill(master)
        c.run_for(10_000)
        c.nemesis.heal()
        c.run_until(lambda: c.master() is not None, 30_000)
        return list(c.events())
    finally:
        c.close()


def test_every_trigger_of_seed_003_is_found_in_a_run(tmp_path):
    events = triggers_run(7, tmp_path)
    found = elections(events)
    assert [(e.trigger, e.retry, e.new_master is not None) for e in found] == [
        ("b.ii", 0, True), ("a.i", 0, True), ("c", 0, True), ("a.ii", 0, True),
        ("a.i", 0, False), ("a.i", 1, False), ("a.i", 2, False), ("b.i", 0, True)]
    assert found[2].requested_by == "admin"
    assert [e.master_epoch for e in found] == list(range(1, 9))
    # The exercise check on this trace (failed elections included) passes the reference only.
    _check((events, None), reference_apply_entry)

    def forgets_the_epoch_of_a_failed_election(state, entry):
        if entry["event"] == "ElectMasterEvent" and not entry["body"]["newMasterElected"]:
            state[entry["body"]["brokerName"]]["master"] = None
        else:
            reference_apply_entry(state, entry)

    with pytest.raises(AssertionError, match="master_epoch"):
        _check((events, None), forgets_the_epoch_of_a_failed_election)


# --- synthetic traces: the triggers the runs above do not produce -------------------------------------
def _trace(rows) -> list[TraceEvent]:
    return [TraceEvent(i, float(t), node, kind, fields) for i, (t, node, kind, fields) in enumerate(rows)]


def _applied(t, index, event, body, node="controller-n0"):
    return (t, node, "controller.event", {"event": event, "index": index, "term": 1, "writer": "n0", "applied": True,
                                          "broker_set": "broker-a", "body": body, "position": 0})


def test_register_and_retries_from_a_hand_written_trace():
    """A recorded master registering again is taken as gone (rmqlab's deviation); a controller
    election that finds nobody is retried; a CONTROLLER_REGISTER_BROKER of another broker is no
    cause."""
    apply1 = {"brokerName": "broker-a", "brokerAddress": "a:1", "clusterName": "C", "newBrokerId": 1,
              "registerCheckCode": "a:1;0"}
    apply2 = dict(apply1, brokerAddress="a:2", newBrokerId=2, registerCheckCode="a:2;0")
    elected = {"brokerName": "broker-a", "newMasterBrokerId": 1, "newMasterElected": True}
    gone = {"brokerName": "broker-a", "newMasterElected": False}
    register = {"proto": "remoting", "peer": "b", "size": 1, "code": 1003, "flag": 0}
    events = _trace([
        (0, "controller-n0", "role", {"from": "CANDIDATE", "to": "LEADER", "component": "raft", "term": 1}),
        _applied(1, 3, "ApplyBrokerIdEvent", apply1),
        _applied(2, 4, "ApplyBrokerIdEvent", apply2),
        (3, "controller-n0", "frame.recv", dict(register, ext_fields={"brokerName": "broker-a", "brokerId": "1"})),
        _applied(4, 5, "ElectMasterEvent", elected),
        (5, "controller-n0", "frame.recv", dict(register, ext_fields={"brokerName": "broker-a", "brokerId": "2"})),
        (6, "controller-n0", "frame.recv", dict(register, ext_fields={"brokerName": "broker-a", "brokerId": "1"})),
        _applied(7, 6, "ElectMasterEvent", gone),
        (8, "controller-n0", "controller.master_inactive", {"broker_set": "broker-a", "broker_id": 1}),
        _applied(9, 7, "ElectMasterEvent", gone),
        _applied(10, 8, "ElectMasterEvent", gone),
    ])
    found = elections(events)
    # The first election has no cause in this trace: a register of a set without a master is none.
    assert [(e.trigger, e.retry, e.new_master, e.master_epoch) for e in found] == [
        (None, 0, 1, 1), ("register", 0, None, 2), (None, 0, None, 3), (None, 0, None, 4)]
    assert found[1].cause.seq == 6
    # The heartbeat line names master 1, but the set had none recorded any more: not a.i.
    events[8] = TraceEvent(8, 8.0, "controller-n0", "controller.need_reelect", {"broker_set": "broker-a"})
    found = elections(events)
    assert [(e.trigger, e.retry) for e in found[2:]] == [("a.ii", 0), ("a.ii", 1)]


# --- the notebook and its exercise -------------------------------------------------------------------------
def reference_apply_entry(state: dict, entry: dict) -> None:
    """The reference solution of the notebook's exercise (RIP-44 "Event"; ReplicasInfoManager)."""
    body = entry["body"]
    name = body["brokerName"]
    if entry["event"] == "ApplyBrokerIdEvent":
        state.setdefault(name, {"master": None, "master_epoch": 0, "sync_state_set": set(), "sync_state_set_epoch": 0})
    elif entry["event"] == "ElectMasterEvent" and name in state:
        info = state[name]
        info["master_epoch"] += 1
        if body["newMasterElected"]:
            info["master"] = body["newMasterBrokerId"]
            info["sync_state_set"] = {body["newMasterBrokerId"]}
            info["sync_state_set_epoch"] += 1
        else:
            info["master"] = None
    elif entry["event"] == "AlterSyncStateSetEvent" and name in state:
        state[name]["sync_state_set"] = set(body["newSyncStateSet"])
        state[name]["sync_state_set_epoch"] += 1


def _cell(marker: str) -> str:
    nb = nbformat.read(NOTEBOOK, as_version=4)
    return next(c.source for c in nb.cells if c.cell_type == "code" and marker in c.source)


def _check(run, apply_entry, grading=False):
    events, _ = run
    namespace = {"apply_entry": apply_entry, "traces": {"run": events}, "grading": grading,
                 "event_log": event_log, "sync_state_history": sync_state_history}
    exec(_cell("def check_apply_entry"), namespace)
    return namespace


def test_the_exercise_check_passes_the_reference_and_fails_a_wrong_answer(run, capsys):
    _check(run, reference_apply_entry)
    assert "apply_entry agrees with the controllers on all" in capsys.readouterr().out

    def forgets_new_broker_sets(state, entry):
        if entry["event"] != "ApplyBrokerIdEvent":
            reference_apply_entry(state, entry)

    def keeps_the_old_set_on_election(state, entry):
        old = set(state.get(entry["body"]["brokerName"], {}).get("sync_state_set", ()))
        reference_apply_entry(state, entry)
        if entry["event"] == "ElectMasterEvent" and entry["body"]["newMasterElected"]:
            state[entry["body"]["brokerName"]]["sync_state_set"] |= old

    with pytest.raises(AssertionError, match="sync_state_set"):
        _check(run, keeps_the_old_set_on_election)
    with pytest.raises(AssertionError, match="missing from state"):
        _check(run, forgets_new_broker_sets)


def test_the_exercise_stub_is_skipped_unless_grading(run, capsys):
    namespace: dict = {}
    exec(_cell("def apply_entry"), namespace)
    with pytest.raises(NotImplementedError):
        namespace["apply_entry"]({}, {})
    _check(run, namespace["apply_entry"])
    assert "still the TODO stub" in capsys.readouterr().out
    with pytest.raises(NotImplementedError):
        _check(run, namespace["apply_entry"], grading=True)


def test_the_committed_notebook_is_a_lab_notebook():
    assert problems(str(NOTEBOOK)) == []
    nb = nbformat.read(NOTEBOOK, as_version=4)
    # The exercise ships as the student's TODO version.
    assert "raise NotImplementedError" in _cell("def apply_entry")
    outputs = json.dumps([c.get("outputs", []) for c in nb.cells])
    assert "still the TODO stub" in outputs and "/tmp/" not in outputs
