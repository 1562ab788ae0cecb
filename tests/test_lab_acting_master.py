"""Lab 05's claims (slave acting master, RIP-32), each read from the trace of rmqlab.demo.acting_master's
runs: the route lists the smallest live slave as a read-only master, that slave runs the special
services until the master returns, delayed messages that fall due in the outage are escaped to the
other group's master on time (and wait the outage out without RIP-32), pre-online prevents the
re-consumption that skipPreOnline causes, and strict-mode locks need a quorum."""

from __future__ import annotations

import functools

import pytest

from rmqlab.demo import acting_master as am
from rmqlab.viz import acting_master as va
from rmqlab.viz import quiet_logs

SEED = 5


@functools.cache
def outage(acting: bool, pre_online: bool = True) -> am.OutageRun:
    with quiet_logs():
        return am.run_outage(SEED, acting=acting, pre_online=pre_online)


def after_kill(run: am.OutageRun, changes):
    return [c for c in changes if run.kill_ms <= c[0] < run.restart_ms]


def test_the_route_lists_the_smallest_live_slave_as_a_read_only_master_until_the_master_returns():
    run = outage(True)
    changes = va.route_changes(run.events)
    assert changes[0][1:] == ("broker-a", 6)
    during = after_kill(run, changes)
    assert [c[1:] for c in during] == [("broker-a-s1", 4)]
    assert during[0][0] - run.kill_ms < 2 * am.ROUTE_EVERY_MS
    assert changes[-1][1:] == ("broker-a", 6) and changes[-1][0] > run.restart_ms


def test_without_rip32_the_group_has_no_master_in_the_route():
    run = outage(False)
    assert [c[1:] for c in after_kill(run, va.route_changes(run.events))] == [(None, 6)]
    assert va.service_changes(run.events) == []


def test_the_smallest_slave_runs_the_special_services_while_the_master_is_away():
    run = outage(True)
    moves = [(node, state) for t, node, state in va.service_changes(run.events) if t >= run.kill_ms]
    # broker-a-s1 takes them at the kill; the returning master runs them once its pre-online is
    # done, and broker-a-s1 stops them when it learns of it.
    assert moves == [("broker-a-s1", "RUNNING"), ("broker-a", "RUNNING"), ("broker-a-s1", "STOPPED")]
    assert not any(node == "broker-a-s2" for node, _ in moves)
    notices = [(node, fields.get("minBrokerId")) for t, node, fields in va.notices(run.events) if t >= run.kill_ms]
    assert ("broker-a-s1", "1") in notices and ("broker-a-s2", "1") in notices
    assert ("broker-a-s1", "0") in notices


def test_delayed_messages_due_in_the_outage_are_escaped_on_time_only_with_rip32():
    on, off = va.delayed_deliveries(outage(True).events), va.delayed_deliveries(outage(False).events)
    assert len(on) == len(off) == am.DELAYED_SENDS
    assert all(d.consumed_ms is not None and d.consumed_ms - d.due_ms < 2_000 for d in on)
    run = outage(False)
    late = [d for d in off if d.consumed_ms is None or d.consumed_ms > run.restart_ms]
    assert late, "without RIP-32 broker-a's delayed messages should wait for its master"
    assert all(d.due_ms < run.restart_ms for d in late)


def test_pre_online_prevents_the_reconsumption_that_skipping_it_causes():
    """What lab 05 says of it: the messages consumed twice are delayed ones, delivered by the acting
    slave through broker-b, then again by the returning master from its older delay offsets."""
    from collections import Counter

    from rmqlab.trace import client_ops

    assert va.consumed_twice(outage(True).events) == 0
    events = outage(True, pre_online=False).events
    assert va.consumed_twice(events) > 0
    consumed = [op.invoke_value for op in client_ops(events) if op.f == "consume" and op.type == "ok"]
    twice = {k for k, n in Counter(v["uniq_key"] for v in consumed).items() if n > 1}
    copies = [v for v in consumed if v["uniq_key"] in twice]
    assert all(v["keys"].startswith("delayed-") for v in copies)
    assert {v["broker_name"] for v in copies} == {"broker-a", "broker-b"}


@pytest.mark.parametrize("strict, expected", [(True, [[0, 1, 2, 3], [0, 1, 2, 3], []]),
                                              (False, [[0, 1, 2, 3]] * 3)])
def test_strict_mode_locks_need_a_quorum_of_the_group(strict, expected):
    from rmqlab.trace import client_ops

    with quiet_logs():
        ops = client_ops(am.run_lock_quorum(SEED, strict=strict))
    assert [op.value["case"] for op in ops] == [case for case, _ in am.LOCK_CASES]
    assert [op.value["locked"] for op in ops] == expected


def test_the_figures_draw_what_the_readers_read():
    run = outage(True)
    fig = va.acting_timeline_figure(run.events)
    names = {t.name for t in fig.data}
    assert {"broker-a (queues RW-)", "broker-a-s1 (queues R--)", "NOTIFY_MIN_BROKER_ID_CHANGE"} <= names
    delayed = va.delayed_figure({"on": run.events})
    assert sum(1 for y in delayed.data[0].y if y) == 2 * am.DELAYED_SENDS
