"""Lab 04 (log truncation): the exercise checker (rmqlab.lab.exercises.truncation), the epoch/offset
diagram (rmqlab.viz.epochs), the invariant panel (rmqlab.viz.invariants) and the checkers they add
(rmqlab.checker.checkers: check_elections, check_truncations, commitlog_end, ...).

The reference solution of the exercise lives here, never in labs/.
"""

from __future__ import annotations

import json
import time

import plotly.graph_objects as go
import pytest

from rmqlab.checker.checkers import (check_elections, check_truncations, commitlog_end, consistent_point, replay_epochs,
                                     sync_state_sets, truncations)
from rmqlab.common.checkpoint_file import LONG_MAX
from rmqlab.lab.exercises.truncation import PUBLIC_EXAMPLES, Example, check, load_examples
from rmqlab.remoting.protocol.epoch_entry import EpochEntry
from rmqlab.store.epoch_file_cache import EpochFileCache
from rmqlab.trace import Tracer
from rmqlab.viz.epochs import EpochRow, epoch_figure, rows_from_stores, rows_from_trace, truncation_figure
from rmqlab.viz.invariants import InvariantPanel, evaluate, invariant_figure, invariant_table_html, invariant_text
from tests.controller_mode_helpers import BROKERS, readable_keys, unclean_schedule, wait_writable


# --- the reference solution and wrong ones ------------------------------------------------------------
def reference(local, local_max, master, master_max):
    """findConsistentPoint on the scratch caches AutoSwitchHAClient.doTruncate builds (EpochFileCache.findConsistentPoint)."""
    def ends(entries, log_end):
        out = {}
        for i, (epoch, start) in enumerate(entries):
            if i + 1 < len(entries):
                out[epoch] = (start, entries[i + 1][1])
            else:  # setLastEpochEntryEndOffset: only when the log does not end before the epoch starts
                out[epoch] = (start, log_end if start <= log_end else LONG_MAX)
        return out

    mine, theirs = ends(local, local_max), ends(master, master_max)
    for epoch in sorted(mine, reverse=True):
        if epoch in theirs and theirs[epoch][0] == mine[epoch][0]:
            return min(mine[epoch][1], theirs[epoch][1])
    return -1


def epoch_number_only(local, local_max, master, master_max):
    """Wrong: an epoch matches by its number alone."""
    starts = dict(master)
    for i in range(len(local) - 1, -1, -1):
        epoch = local[i][0]
        if epoch in starts:
            mine = local[i + 1][1] if i + 1 < len(local) else local_max
            theirs = next((m[1] for m in master if m[0] > epoch), master_max)
            return min(mine, theirs)
    return -1


def larger_end(local, local_max, master, master_max):
    """Wrong: the larger of the two ends of the consistent epoch."""
    def end(entries, log_end, i):
        return entries[i + 1][1] if i + 1 < len(entries) else log_end

    theirs = {e: (s, i) for i, (e, s) in enumerate(master)}
    for i in range(len(local) - 1, -1, -1):
        epoch, start = local[i]
        if epoch in theirs and theirs[epoch][0] == start:
            return max(end(local, local_max, i), end(master, master_max, theirs[epoch][1]))
    return -1


def oldest_first(local, local_max, master, master_max):
    """Wrong: walks the epochs from the oldest up."""
    for k in range(1, len(local) + 1):
        point = reference(local[:k], local[k][1] if k < len(local) else local_max, master, master_max)
        if point >= 0:
            return point
    return -1


def zero_when_none(local, local_max, master, master_max):
    """Wrong: 0 instead of -1 without a consistent point."""
    return max(reference(local, local_max, master, master_max), 0)


def ends_only(local, local_max, master, master_max):
    """Wrong: ignores the epochs."""
    return min(local_max, master_max)


def _cache(entries, end):
    cache = EpochFileCache()
    cache.init_cache_from_entries([EpochEntry(e, s) for e, s in entries])
    cache.set_last_epoch_entry_end_offset(end)
    return cache


def test_every_public_example_agrees_with_rocketmqs_algorithm_and_the_reference_passes_them_all():
    names = [ex.name for ex in PUBLIC_EXAMPLES]
    assert len(names) == len(set(names)) >= 15
    for ex in PUBLIC_EXAMPLES:
        real = _cache(ex.local, ex.local_max).find_consistent_point(_cache(ex.master, ex.master_max))
        assert real == ex.expected == reference(ex.local, ex.local_max, ex.master, ex.master_max), ex.name
    assert {ex.expected for ex in PUBLIC_EXAMPLES} >= {-1}
    report = check(reference)
    assert report.passed and not report.todo and report.n_passed == len(PUBLIC_EXAMPLES), str(report)
    assert str(report).startswith(f"reference: {len(PUBLIC_EXAMPLES)}/{len(PUBLIC_EXAMPLES)} examples pass")
    assert report.to_dict()["passed"] is True


@pytest.mark.parametrize("wrong, must_fail", [
    (epoch_number_only, "same epoch number, different start"),
    (larger_end, "old master with an unreplicated tail"),
    (oldest_first, "successive failovers, nothing to cut"),
    (zero_when_none, "no epoch in common"),
    (ends_only, "slave wrote under an epoch the master never saw"),
])
def test_a_wrong_solution_fails_with_a_message_naming_the_example(wrong, must_fail):
    report = check(wrong)
    assert not report.passed and not report.todo
    failed = {r.name: r for r in report.results if not r.passed}
    assert must_fail in failed, str(report)
    r = failed[must_fail]
    ex = next(e for e in PUBLIC_EXAMPLES if e.name == must_fail)
    assert r.status == "fail" and r.got != ex.expected
    assert f"example '{must_fail}'" in r.message and f"expected {ex.expected}, got {r.got}" in r.message
    assert "Hint:" in r.message
    assert f"FAIL {must_fail}: " in str(report)
    assert report.first_failure is not None and not report.first_failure.passed


def test_the_todo_stub_is_reported_as_such():
    def truncation_point(local, local_max, master, master_max):
        raise NotImplementedError

    report = check(truncation_point)
    assert report.todo and not report.passed
    assert str(report).startswith("truncation_point is still the TODO stub")


def test_a_slow_child_start_is_not_the_students_time(monkeypatch):
    """A loaded machine may take longer to start a sandboxed child than an example's time limit: a
    callable's start-up is not the student's code, so it is not reported as the student's timeout
    (a submitted source's module-level code is, and keeps the budget's limit)."""
    from rmqlab.lab.exercises.sandbox import SandboxedFunction

    receive_frame = SandboxedFunction._receive_frame

    def slow_start(self, deadline, starting):
        if starting:
            time.sleep(1.0)  # as a child on a machine busy with other work
        return receive_frame(self, deadline, starting)

    monkeypatch.setattr(SandboxedFunction, "_receive_frame", slow_start)
    r = check(reference, PUBLIC_EXAMPLES[:2], time_limit_s=0.3, budget_s=0.7)
    assert [x.status for x in r.results] == ["pass", "pass"], [x.message for x in r.results]


def test_hostile_code_gives_a_clear_result_within_the_time_limit():
    two = PUBLIC_EXAMPLES[:2]

    def raises(*_):
        raise ValueError("nope")

    def returns_str(*_):
        return "900"

    def returns_bool(*_):
        return True

    def loops(*_):
        while True:
            pass

    def exits(*_):
        raise SystemExit(3)

    def dies(*_):
        import os
        os._exit(7)

    def prints(*args):
        print("local was", args[0])
        return reference(*args)

    def greedy(*_):
        return len(bytearray(1 << 40))  # a terabyte: refused by the child's memory limit

    r = check(raises, two)
    assert [x.status for x in r.results] == ["error", "error"]
    assert "raised ValueError: nope" in r.results[0].message and "example 'in step'" in r.results[0].message
    assert "in raises" in r.results[0].message  # the student's frame is quoted

    r = check(returns_str, two)
    assert r.results[0].status == "wrong-type" and "returned '900' (a str), expected an int" in r.results[0].message
    assert check(returns_bool, two).results[0].status == "wrong-type"

    t0 = time.monotonic()
    r = check(loops, two, time_limit_s=0.3)
    took = time.monotonic() - t0
    assert [x.status for x in r.results] == ["timeout", "timeout"] and took < 5, took
    assert "no answer within 0.3 s" in r.results[0].message

    t0 = time.monotonic()
    r = check(loops, PUBLIC_EXAMPLES, time_limit_s=0.3, budget_s=0.7)
    assert time.monotonic() - t0 < 5
    assert [x.status for x in r.results[:3]] == ["timeout", "timeout", "timeout"]
    assert {x.status for x in r.results[3:]} == {"skipped"}

    assert "raised SystemExit: 3" in check(exits, two).results[0].message
    r = check(dies, two)
    assert r.results[0].status == "crashed" and "exit status 7" in r.results[0].message

    r = check(prints, two)
    assert r.passed and r.results[0].output == "local was [EpochStart(epoch=1, start_offset=0)]\n"

    r = check(greedy, two)
    assert r.results[0].status == "error" and "MemoryError" in r.results[0].message


def test_examples_are_data_and_round_trip_through_json(tmp_path):
    path = tmp_path / "hidden.json"
    path.write_text(json.dumps([ex.to_dict() for ex in PUBLIC_EXAMPLES]))
    loaded = load_examples(str(path))
    assert loaded == PUBLIC_EXAMPLES
    custom = (Example.from_dict({"name": "mine", "local": [[1, 0]], "local_max": 10, "master": [[1, 0]],
                                 "master_max": 5, "expected": 5}),)
    assert check(reference, custom).passed
    assert not check(ends_only, custom[:0]).passed  # nothing ran: not a pass


# --- the checkers, on synthetic traces ---------------------------------------------------------------------
def _controller_event(tracer, index, event, body):
    tracer.emit("controller-n0", "controller.event", event=event, index=index, term=1, writer="n0", applied=True,
                broker_set="broker-a", body=body, position=0)
    tracer.emit("controller-n1", "controller.event", event=event, index=index, term=1, writer="n0", applied=True,
                broker_set="broker-a", body=body, position=0)  # every replica applies it: counted once


def test_election_checker_follows_the_replicated_sync_state_set():
    tracer = Tracer(lambda: 0.0)
    for node, broker_id in (("broker-n0", 1), ("broker-n1", 2), ("broker-n2", 3)):
        tracer.emit(node, "node.start", component="broker")
        tracer.emit(node, "frame.send", proto="remoting", peer="controller-n0", size=10, code=1003, flag=0,
                    ext_fields={"brokerName": "broker-a", "brokerId": str(broker_id)})  # CONTROLLER_REGISTER_BROKER
    elect = lambda i, b: _controller_event(tracer, i, "ElectMasterEvent", {"brokerName": "broker-a",  # noqa: E731
                                                                            "newMasterBrokerId": b,
                                                                            "newMasterElected": True})
    alter = lambda i, s: _controller_event(tracer, i, "AlterSyncStateSetEvent", {"brokerName": "broker-a",  # noqa: E731
                                                                                 "newSyncStateSet": s})
    elect(1, 1)              # the first election: no SyncStateSet yet
    alter(2, [1, 2, 3])
    alter(3, [1, 2])         # broker-n2 falls behind
    elect(4, 2)              # clean: 2 was in {1, 2}
    assert check_elections(tracer.events).valid and sync_state_sets(tracer.events) == {"broker-a": [2]}
    elect(5, 3)              # unclean: 3 is not in {2}
    bad = tracer.events[-2]
    r = check_elections(tracer.events)
    assert not r.valid and r.first.what == "unclean-election"
    assert (r.first.node, r.first.seq) == ("broker-n2", bad.seq)
    assert r.first.details["sync_state_set"] == [2] and r.first.details["epoch"] == 3
    allowed = check_elections(tracer.events, unclean_allowed=True)
    assert allowed.valid and [u["node"] for u in allowed.stats["unclean"]] == ["broker-n2"]
    _controller_event(tracer, 6, "ElectMasterEvent", {"brokerName": "broker-a", "newMasterBrokerId": None,
                                                      "newMasterElected": False})
    assert check_elections(tracer.events).stats["elections"] == 3


def test_truncation_checker_recomputes_the_point_and_follows_the_cut():
    def handshake(point, written, confirmed=None):
        tracer = Tracer(lambda: 0.0)
        tracer.emit("m", "net.accept", peer="s", local="127.0.0.1:30912")
        for node in ("m", "s"):
            tracer.emit(node, "epoch", broker_set="broker-a", epoch=1, start_offset=0)
        tracer.emit("s", "epoch", broker_set="broker-a", epoch=2, start_offset=500)  # s led epoch 2 alone
        tracer.emit("m", "epoch", broker_set="broker-a", epoch=3, start_offset=400)
        if confirmed is not None:
            tracer.emit("s", "offset", which="confirmed", value=confirmed)
        tracer.emit("s", "frame.recv", proto="ha", peer="127.0.0.1:30912", size=44, name="handshake", offset=800,
                    epoch=3, entries=2, epoch_entries=[[1, 0], [3, 400]])
        log = tracer.emit("s", "ha.truncate", ok=True, truncate_offset=point, consistent_epoch=1, local_max_offset=900,
                          master_max_offset=800,
                          reason=f"consistent epoch 1: truncate to {point} (local max 900, master max 800)")
        tracer.emit("s", "offset", which="confirmed", value=min(point, confirmed or point))  # the cut clamps it
        tracer.emit("s", "offset", which="written", value=written)
        return tracer.events, log

    events, log = handshake(400, 400)
    [t] = truncations(events)
    assert (t.node, t.master, t.point, t.local_entries, t.master_entries) == ("s", "m", 400, ((1, 0), (2, 500)),
                                                                             ((1, 0), (3, 400)))
    assert (t.ok, t.epoch, t.local_max, t.master_max, t.reason) == (
        True, 1, 900, 800, "consistent epoch 1: truncate to 400 (local max 900, master max 800)")
    assert check_truncations(events).valid
    assert replay_epochs(events) == {"m": [(1, 0), (3, 400)], "s": [(1, 0)]}

    events, log = handshake(500, 500)
    r = check_truncations(events)
    assert [v.what for v in r.violations] == ["wrong-truncation-point"] and r.first.seq == log.seq
    assert r.first.details["consistent_point"] == 400

    events, _ = handshake(400, 600)
    assert [v.what for v in check_truncations(events).violations] == ["not-truncated"]

    events, _ = handshake(400, 400, confirmed=700)
    r = check_truncations(events)
    assert [v.what for v in r.violations] == ["cut-committed"] and "300 committed bytes discarded" in r.first.message


def test_epoch_figure_marks_the_consistent_point_and_the_tail_or_why_there_is_none():
    master = EpochRow("m", ((1, 0), (3, 400)), 800)
    rows = [master, EpochRow("x", ((1, 0), (2, 500)), 900), EpochRow("new", (), 0),
            EpochRow("stranger", ((4, 0),), 300)]
    fig = epoch_figure(rows, master="m")
    by_name = {t.name: t for t in fig.data if t.name}
    assert {"epoch 1", "epoch 2", "epoch 3", "epoch 4", "cut by the handshake", "consistent point"} <= set(by_name)
    tail = by_name["cut by the handshake"]
    assert list(tail.y) == ["x"] and list(tail.base) == [400] and list(tail.x) == [500]
    assert list(by_name["consistent point"].x) == [400]
    notes = [a.text for a in fig.layout.annotations]
    assert any("new replica" in n for n in notes) and any("no consistent point" in n for n in notes)
    assert list(fig.layout.yaxis.categoryarray)[0] == "m (master)"
    assert EpochRow("r", ((1, 0), (2, 50)), 40).segments() == [(1, 0, 50), (2, 50, 50)]


# --- on a live cluster ----------------------------------------------------------------------------------
def _story(seed: int, unclean: bool):
    """Test e's schedule (tests/test_controller_modes.py), then the dead replicas return and a fresh
    consumer reads everything."""
    c, s = unclean_schedule(seed, unclean=unclean)
    stores = {n: c.sim.store_dir(n) for n in BROKERS}
    before = rows_from_stores(stores)
    master_before = c.master()
    c.nemesis.heal()
    if not unclean:
        c.nemesis.restart(s["x"])
        c.run_until(lambda: c.master() == s["x"], 60_000)
    wait_writable(c, "after")
    c.nemesis.restart(s["a"])
    if unclean:
        c.nemesis.restart(s["x"])
    c.run_until(lambda: len({c.components[n].message_store.get_max_phy_offset() for n in BROKERS}) == 1
                and all(c.sim.nodes[n].alive for n in BROKERS), 60_000)
    c.run_for(1_000)
    readable_keys(c, "reader")
    return c, s, stores, before, master_before


def _decisions_say_what_their_text_says(events) -> int:
    """Every traced doTruncate decision: its ha.truncate event (what the checkers read) agrees with
    the log line just before it and with the decision recomputed from the epoch files it names.
    Returns how many."""
    found = truncations(events)
    lines = {e.seq: e.fields for e in events if e.kind == "log"}
    for t in found:
        line = lines[t.seq - 1]
        assert line["message"] == f"doTruncate: {t.reason}"
        assert t.ok == (line["level"] == "INFO") and t.local_max is not None and t.master_max is not None
        if t.epoch is not None:
            assert t.reason == (f"consistent epoch {t.epoch}: truncate to {t.point} (local max {t.local_max}, "
                                f"master max {t.master_max})")
        elif t.point is not None:
            assert t.point == t.local_max
            assert t.reason.startswith(f"the local epochs hold no data (local max {t.point})")
        else:
            assert ("epoch cache is empty" in t.reason) if t.ok else t.reason.startswith("no consistent point")
        decision = consistent_point(list(t.local_entries), t.local_max, list(t.master_entries), t.master_max)
        assert (decision.ok, decision.truncate_offset, decision.consistent_epoch) == (t.ok, t.point, t.epoch)
    return len(found)


def test_unclean_election_story_diagram_truncations_and_invariant_panel():
    c, s, stores, before, master_before = _story(17, unclean=True)
    x, y, a = s["x"], s["y"], s["a"]
    assert master_before == y
    rows = {r.node: r for r in before}
    # x led epoch 2 alone; y leads epoch 3, starting where its log ended when it was cut off.
    assert [e for e, _ in rows[x].entries] == [1, 2] and [e for e, _ in rows[y].entries] == [1, 3]
    cut = rows[y].entries[-1][1]
    assert rows[y].end == cut < rows[a].end < rows[x].end
    fig = epoch_figure(before, master=y)
    tail = next(t for t in fig.data if t.name == "cut by the handshake")
    assert dict(zip(tail.y, tail.base)) == {a: cut, x: cut}
    assert dict(zip(tail.y, (b + w for b, w in zip(tail.base, tail.x)))) == {a: rows[a].end, x: rows[x].end}
    # What the replicas then did, from the trace: exactly the cut the diagram predicted.
    events = c.events()
    assert _decisions_say_what_their_text_says(events) >= 2
    done = {t.node: t for t in truncations(events) if t.point is not None}
    assert done[x].point == done[a].point == cut and done[x].master == done[a].master == y
    assert done[x].local_entries == rows[x].entries and done[x].local_max == rows[x].end
    handshake = truncation_figure(done[x])
    assert handshake.layout.title.text.startswith(f"{x}'s handshake with {y} at ")
    assert [t.base[0] for t in handshake.data if t.name == "cut by the handshake"] == [cut]
    # Files and trace agree: the epoch files as replayed from the trace, the log ends as recovered.
    after = rows_from_stores(stores)
    assert {r.node: (r.entries, r.end) for r in after} == {r.node: (r.entries, r.end) for r in rows_from_trace(events)}
    assert {r.end for r in after} == {c.components[n].message_store.get_max_phy_offset() for n in BROKERS}

    statuses = {st.key: st for st in evaluate(events, stores, unclean_allowed=True)}
    assert statuses["single-master"].state == "pass"
    assert statuses["elections"].state == "allowed" and statuses["elections"].first.node == y
    assert statuses["truncation"].state == "broken" and statuses["truncation"].first.what == "cut-committed"
    assert statuses["no-loss"].state == "broken" and statuses["no-loss"].first.what == "lost"
    assert statuses["no-loss"].first.details["master"] in (a, x)
    strict = {st.key: st for st in evaluate(events)}
    assert strict["elections"].state == "broken" and strict["elections"].first.what == "unclean-election"
    order = [statuses[k].first.seq for k in ("no-loss", "elections", "truncation")]
    assert order == sorted(order), "acknowledged, then elected uncleanly, then cut"
    text = invariant_text(statuses.values())
    assert "✗ broken" in text and "! unclean election (allowed)" in text
    html = invariant_table_html(statuses.values())
    assert html.count("<tr>") == 5 and "cut-committed" in html
    fig = invariant_figure(list(statuses.values()), events)
    marks = [t for t in fig.data if t.mode == "markers" and t.marker.symbol == "x"]
    assert sorted(m.x[0] for m in marks) == sorted(statuses[k].first.time_ms / 1000
                                                    for k in ("elections", "truncation", "no-loss"))
    faults = next(t for t in fig.data if t.mode == "markers+text")
    assert {f"kill {a}", f"kill {x}"} <= set(faults.text)

    panel = InvariantPanel(lambda: stores, unclean_allowed=True)
    assert [st.state for st in panel.update(events)] == ["pass", "allowed", "broken", "broken"]
    assert "rmqlab-invariants" in panel.table._dom_classes and isinstance(panel.figure, go.FigureWidget)
    assert len(panel.figure.data) == len(fig.data)


def test_clean_elections_keep_every_invariant():
    c, s, stores, before, master_before = _story(17, unclean=False)
    assert master_before is None  # nobody outside the SyncStateSet is elected
    statuses = evaluate(c.events(), stores)
    assert [st.state for st in statuses] == ["pass"] * 4, invariant_text(statuses)
    assert _decisions_say_what_their_text_says(c.events()) >= 2
    assert statuses[3].results[0].stats["lost"] == 0 and statuses[3].results[0].stats["acknowledged"] > 0


def test_the_no_loss_invariant_waits_for_reads():
    tracer = Tracer(lambda: 0.0)
    msg = {"topic": "T", "uniq_key": "K", "keys": None, "tags": None, "body_crc": 1}
    tracer.emit("p", "client", type="invoke", process=0, f="send", op_id=1, value=msg)
    tracer.emit("p", "client", type="ok", process=0, f="send", op_id=1, value={"send_status": "SEND_OK"})
    statuses = {st.key: st for st in evaluate(tracer.events)}
    assert statuses["no-loss"].state == "pending" and "nothing read yet" in statuses["no-loss"].detail


def test_commitlog_end_stops_at_the_first_invalid_record(tmp_path):
    assert commitlog_end(str(tmp_path)) == 0
    d = tmp_path / "commitlog"
    d.mkdir()
    (d / ("0" * 20)).write_bytes(b"\0" * 4096)
    assert commitlog_end(str(tmp_path)) == 0
