"""Lab 01's section on transactions and ordered messages: the claims its text makes, checked on
the runs it draws (rmqlab.lab.guarantees, the catalog's workloads)."""

from __future__ import annotations

import pytest

from rmqlab.lab import guarantees as lg
from rmqlab.viz.guarantees import guarantees_figure, transactions, workload_t0

CLASSIC, CONTROLLER, ACTING = (label for label, _, _ in lg.MODES)


@pytest.fixture(scope="module")
def runs():
    return lg.run_guarantees()


@pytest.fixture(scope="module")
def rows(runs):
    return {r.mode: r for r in lg.rows(runs)}


def test_no_transaction_is_lost_or_rolled_back_and_some_are_committed_twice(rows):
    for r in rows.values():
        assert r.transactions >= 199 and r.committed == r.transactions and r.rolled_back == 0 and r.never_ended == 0
        assert r.committed_twice > 0  # the op records and check offsets a killed master forgot


def test_classic_half_messages_wait_for_their_master_and_controller_mode_does_not(runs, rows):
    assert rows[CLASSIC].longest_wait_s > 12 > 7 > rows[CONTROLLER].longest_wait_s
    events = runs["tx-async-kill-master"]
    t0 = workload_t0(events)
    stuck = [t for t in transactions(events) if (t.ended_ms - t.begun_ms) > 10_000]
    restart = next(e.time_ms for e in events if e.kind == "node.restart")
    assert stuck and all(t.ended_by == "broker-a" and t.ended_ms > restart and t.begun_ms - t0 < 5_000 for t in stuck)


def test_the_acting_slave_escapes_half_messages_to_the_other_set(runs):
    events = runs["tx-acting-kill-master"]
    escaped = {e.fields["uniq_key"] for e in events if e.kind == "state" and e.fields.get("to") == "ESCAPED"}
    assert escaped and all(e.node == "broker-a-s1" for e in events if e.kind == "state" and e.fields.get("to") == "ESCAPED")
    committed_at_b = {e.fields["uniq_key"] for e in events if e.kind == "state" and e.node == "broker-b"
                      and e.fields.get("to") == "COMMITTED"}
    assert escaped <= committed_at_b


def test_orderly_consumption_stays_in_order_and_waits_where_the_text_says(rows):
    assert rows[CLASSIC].orderly_consumed is None
    for mode in (CONTROLLER, ACTING):
        assert rows[mode].out_of_order == 0 and rows[mode].orderly_never == 0 and rows[mode].orderly_consumed >= 230
    assert rows[CONTROLLER].orderly_longest_wait_s < 3 < 5 < rows[ACTING].orderly_longest_wait_s < 7


def test_the_figure_has_a_row_per_transactional_run_and_one_for_orderly(runs):
    fig = guarantees_figure(lg.tx_runs(runs), lg.orderly_runs(runs))
    assert len(fig.layout.annotations) >= 4 and {a.text for a in fig.layout.annotations} >= {
        f"{label}: each transaction's wait for its outcome" for label in (CLASSIC, CONTROLLER, ACTING)}
    crosses = [t for t in fig.data if t.marker.symbol == "x"]
    assert {t.legendgroup for t in crosses} == {CLASSIC, CONTROLLER, ACTING}
    assert sum(len(t.x) for t in crosses) == sum(r.committed_twice for r in lg.rows(runs))
