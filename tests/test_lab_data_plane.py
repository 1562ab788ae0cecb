"""Lab 02's data-plane contrast (section 4, "Raft in the commitlog, or a SyncStateSet"): the claims
its text makes, checked on the runs it draws (rmqlab.demo.data_plane, seed 7 as the lab's)."""

from __future__ import annotations

import pytest

from rmqlab.demo import data_plane as dp

DLEDGER, CONTROLLER = "dledger", "controller"
NO_ALL_ACK, MIN_TWO = "controller, allAckInSyncStateSet=false", "controller, minInSyncReplicas=2"
SHRINK_MS = 15_000   # haMaxTimeSlaveNotCatchup's default


@pytest.fixture(scope="module")
def failures():
    return {v: dp.failure_run(v, seed=7) for v in dp.VARIANTS}


@pytest.fixture(scope="module")
def costs():
    return {v: dp.cost_run(v, seed=7) for v in (DLEDGER, CONTROLLER, NO_ALL_ACK)}


def test_every_variant_took_every_write_before_the_failure(failures):
    for r in failures.values():
        assert r.sent(-dp.WARM_MS, 0) >= 40 and r.acked(-dp.WARM_MS, 0) >= r.sent(-dp.WARM_MS, 0) - 1, r.variant
        assert len(r.killed) == 2 and r.master not in r.killed


def test_dledger_and_min_in_sync_replicas_2_stop_writes_with_one_replica_of_three(failures):
    for v in (DLEDGER, MIN_TWO):
        r = failures[v]
        assert r.sent(0) > 0 and r.acked(0) == 0 and r.first_ack_after_failure() is None, (v, r.errors())


def test_controller_mode_with_all_ack_waits_for_the_shrink_then_takes_every_write(failures):
    r = failures[CONTROLLER]
    shrunk = [t for t, s in r.sync_state_sets if len(s) == 1]
    assert shrunk and SHRINK_MS <= shrunk[0] < SHRINK_MS + 5_000, r.sync_state_sets
    first = r.first_ack_after_failure()
    assert first is not None and first >= shrunk[0], (first, shrunk)
    last10 = dp.AFTER_MS - 10_000
    assert r.sent(last10) > 0 and r.acked(last10) == r.sent(last10)


def test_controller_mode_with_rocketmqs_default_never_pauses(failures):
    r = failures[NO_ALL_ACK]
    assert r.acked(0) == r.sent(0) > 300 and r.first_ack_after_failure() < 1_000


def test_dledger_ships_more_than_twice_controller_modes_bytes_per_message(costs):
    d, c = costs[DLEDGER], costs[CONTROLLER]
    assert d.acked == c.acked == dp.COST_MESSAGES
    assert d.bytes_per_message > 2 * c.bytes_per_message
    # Its largest part: the push requests, larger than the HA transfer frames with the same messages.
    assert d.replica_bytes_by_frame["remoting PUSH"] > c.replica_bytes_by_frame["ha transfer"]
    assert costs[NO_ALL_ACK].bytes_per_message == pytest.approx(c.bytes_per_message, rel=0.05)


def test_latency_dledger_is_close_to_all_ack_and_not_waiting_is_faster(costs):
    d, c, n = costs[DLEDGER], costs[CONTROLLER], costs[NO_ALL_ACK]
    for p in (50, 99):
        assert abs(d.percentile(p) - c.percentile(p)) < 0.5 * c.percentile(p)
        assert n.percentile(p) < min(d.percentile(p), c.percentile(p))


def test_the_figure_has_a_line_per_variant(failures):
    fig = dp.figure(list(failures.values()))
    assert [t.name for t in fig.data] == list(dp.VARIANTS)
    dledger = next(t for t in fig.data if t.name == DLEDGER)
    assert all(y == 0 for x, y in zip(dledger.x, dledger.y) if x >= 1) and max(dledger.y) > 0
    controller = next(t for t in fig.data if t.name == CONTROLLER)
    by_second = dict(zip(controller.x, controller.y))
    first = failures[CONTROLLER].first_ack_after_failure() // 1000
    assert all(by_second[x] == 0 for x in range(1, int(first))) and by_second[first] > 0, by_second


def test_unknown_variant_is_refused():
    with pytest.raises(ValueError, match="variant must be one of"):
        dp.failure_run("sideways")


def test_percentile_is_nearest_rank():
    assert dp.percentile([5, 1, 3, 2, 4], 50) == 3
    assert dp.percentile(list(range(1, 101)), 99) == 99
    with pytest.raises(ValueError):
        dp.percentile([], 50)
