"""Lab 01 (deployment modes): the comparison's numbers tell the deployment guide's story, the figures draw the
right things from a trace, and the same seed gives the same table.

One seeded comparison of every mode (two worker processes) is shared by the module; the figure
tests read its recorded traces, so they need no cluster of their own.
"""

from __future__ import annotations

import plotly.graph_objects as go
import pytest

from rmqlab.demo import mode_comparison as mc
from rmqlab.trace import TraceEvent, trace_hash
from rmqlab.viz.figure_widgets import redraw
from rmqlab.viz.offsets import offset_series, offsets_figure, replication_lag
from rmqlab.viz.sends import (consumption_figure, consumption_sources, pull_rows, send_rows, sends_by_mode_figure,
                              sends_figure)
from rmqlab.viz.topology import topology, topology_figure

SEED = 7


@pytest.fixture(scope="module")
def runs() -> dict[str, mc.ModeRun]:
    return mc.simulate_modes(SEED, workers=2)


def result(runs, mode: str) -> mc.ModeResult:
    return runs[mode].result


# --- the comparison: the deployment guide's pros and cons, measured --------------------------------------------------
def test_single_master_is_unavailable_while_it_is_down(runs):
    r = result(runs, "single-master")
    assert r.sends_during_outage > 0 and r.acked_during_outage == 0
    assert r.set_writable_after_ms >= mc.OUTAGE_MS, "it takes writes again only once it is back"
    assert r.readable_during_outage == 0 and r.read_from == "none"


def test_multi_master_keeps_writing_but_its_messages_wait_and_async_flush_loses_some(runs):
    r = result(runs, "2m-noslave")
    assert r.acked_during_outage >= 0.8 * r.sends_during_outage, "broker-b takes the writes"
    assert r.first_ack_after_crash_ms < 1_000
    assert r.on_broker_a > 0 and r.readable_during_outage == 0, "broker-a's messages wait for it"
    # A machine crash under ASYNC_FLUSH: what was not flushed is gone, though acknowledged.
    assert 0 < r.acknowledged_lost <= r.on_broker_a
    assert r.acknowledged_lost == r.missing_after_recovery


def test_async_replication_lets_consumers_continue_from_the_slave(runs):
    r = result(runs, "2m-2s-async")
    assert r.on_broker_a > 0 and r.readable_during_outage == r.on_broker_a
    assert r.read_from == f"slave broker-a-s ({r.on_broker_a})"
    # Only once the name server expired the silent master (120 s after its last heartbeat).
    assert 90_000 < r.route_dropped_after_ms < mc.READ_AT_MS
    assert r.acknowledged_lost == 0 and r.lost_if_disk_destroyed == 0
    # The restarted master lost its unflushed tail; the slave's copy is not merged back.
    assert r.missing_after_recovery == result(runs, "2m-noslave").acknowledged_lost > 0


def test_sync_double_write_loses_nothing_is_slower_and_does_not_fail_over(runs):
    r, a = result(runs, "2m-2s-sync"), result(runs, "2m-2s-async")
    assert r.acknowledged_lost == 0 and r.readable_during_outage == r.on_broker_a > 0
    assert r.p50_ms > a.p50_ms, "each send also waits for the slave"
    assert r.new_master is None
    assert r.set_writable_after_ms is None or r.set_writable_after_ms >= mc.OUTAGE_MS


@pytest.mark.parametrize("mode", ["controller-embedded", "controller-standalone"])
def test_controller_mode_elects_a_new_master_and_loses_nothing(runs, mode):
    r = result(runs, mode)
    assert r.new_master is not None and r.new_master != r.victim
    # A silent machine: the controllers' heartbeat timeout (10 s) plus at most one scan (5 s).
    assert 10_000 <= r.failover_ms <= 16_000
    assert r.set_writable_after_ms < r.failover_ms + 3_000, "writes resume right after the election"
    assert r.acked_during_outage > 0.8 * r.sends_during_outage
    assert r.acknowledged_lost == 0 and r.missing_after_recovery == 0
    assert r.readable_during_outage == r.on_broker_a > 0 and r.read_from.startswith(f"master {r.new_master}")


def test_a_proxy_in_local_mode_dies_with_its_broker_and_in_cluster_mode_adds_a_hop(runs):
    local, cluster = result(runs, "proxy-local"), result(runs, "proxy-cluster")
    # Local: the client moves to broker-b's Proxy, the only endpoint that acknowledges in the outage.
    assert local.acked_during_outage >= 0.9 * local.sends_during_outage
    assert local.endpoints_during_outage.count("(") == 1
    # Cluster: the one Proxy outlives broker-a and keeps serving; one more hop per send.
    assert cluster.acked_during_outage >= 0.8 * cluster.sends_during_outage
    assert cluster.endpoints_during_outage.count("(") == 1
    assert cluster.p50_ms > local.p50_ms
    # Storage is the brokers' business: broker-a's unflushed messages are gone either way.
    for r in (local, cluster):
        assert 0 < r.acknowledged_lost == r.on_broker_a and r.readable_during_outage == 0


def test_slave_acting_master_serves_reads_from_a_read_only_slave_and_drops_the_master_in_seconds(runs):
    """RIP-32's row: the same crash as 2m-2s-async, but the lightweight heartbeat drops the silent
    master after its 10 s timeout (plus at most one 5 s scan), not 120 s; the smallest-id slave
    serves the group read-only; nobody is elected; the group takes writes only when its master
    is back (after its pre-online)."""
    r, a = result(runs, "acting-master"), result(runs, "2m-2s-async")
    assert 10_000 <= r.route_dropped_after_ms <= 16_000 < a.route_dropped_after_ms
    assert r.on_broker_a > 0 and r.readable_during_outage == r.on_broker_a
    assert r.read_from == f"slave broker-a-s1 ({r.on_broker_a})"
    assert r.new_master is None and r.set_writable_after_ms >= mc.OUTAGE_MS
    assert r.acked_during_outage >= 0.9 * r.sends_during_outage and r.acknowledged_lost == 0
    rows = [c for c in mc.claims({m: run.result for m, run in runs.items()}) if c.mode == "acting-master"]
    assert len(rows) == 3 and all(c.holds and c.source == mc.RIP32 for c in rows)


def test_dledger_mode_elects_a_new_leader_as_master_and_loses_nothing_at_a_replica_round_trip(runs):
    """DLedger mode (Raft in the data path): the same power loss of the master, here the Raft
    leader. The followers elect a leader after missing its heartbeats (3 x 2 s, then a randomised
    election) that becomes master; every acknowledged message was on a majority, so none is lost;
    each send waits for a follower, as 2m-2s-sync's waits for its slave."""
    r, sync, controller = result(runs, "dledger"), result(runs, "2m-2s-sync"), result(runs, "controller-embedded")
    assert r.new_master is not None and r.new_master != r.victim and r.masters_not_raft_leader == 0
    assert 6_000 <= r.failover_ms <= 12_000 and r.set_writable_after_ms < r.failover_ms + 3_000
    assert r.route_dropped_after_ms is None, "the new leader registers as brokerId 0: no expiry to wait for"
    assert r.acknowledged_lost == 0 and r.missing_after_recovery == 0
    assert r.readable_during_outage == r.on_broker_a > 0 and r.read_from == f"master {r.new_master} ({r.on_broker_a})"
    assert r.acked_during_outage > 0.8 * r.sends_during_outage
    assert r.p50_ms > result(runs, "2m-2s-async").p50_ms
    assert 0.75 * sync.p50_ms < r.p50_ms < 1.25 * controller.p50_ms
    rows = [c for c in mc.claims({m: run.result for m, run in runs.items()}) if c.mode == "dledger"]
    assert len(rows) == 3 and all(c.holds and c.source == mc.RAFT_ARTICLE for c in rows)


def test_the_dledger_figure_draws_the_rows_leaders_and_commit_index(runs):
    from rmqlab.viz.dledger import commit_points, role_segments

    run = runs["dledger"]
    victim, new = run.result.victim, run.result.new_master
    segments = role_segments(run.events)
    down = [(a, b) for a, b, role, _ in segments[victim] if role == "DOWN"]
    assert len(down) == 1 and down[0] == (pytest.approx(run.crash_at_ms), pytest.approx(run.restart_at_ms))
    assert [(role, term) for a, b, role, term in segments[new] if a >= run.crash_at_ms][-1] == ("LEADER", 2)
    leaders = [(node, term) for _, node, term, _ in commit_points(run.events)]
    assert leaders[0] == (victim, 1) and leaders[-1] == (new, 2)
    assert set(leaders) == {(victim, 1), (new, 2)}


def test_the_claims_table_marks_what_a_machine_crash_contradicts(runs):
    table = mc.claims({m: run.result for m, run in runs.items()})
    assert {c.mode for c in table} == set(mc.MODES)
    failing = [(c.mode, c.quote) for c in table if not c.holds]
    # 「消息无延迟」 is about replication lag, and sync double write has none while the master is down; but
    # the restarted master, behind its slave, acknowledges sync sends no replica holds (RocketMQ takes the
    # slave's report as an ack), so 「数据…无单点故障」 does not hold. 「大约低10%」 does not either: on the
    # simulator a send costs little but its hops, so the slave's round trip doubles it.
    assert failing == [("2m-2s-sync", "数据与服务都无单点故障,Master宕机情况下,消息无延迟"),
                       ("2m-2s-sync", "性能比异步复制模式略低(大约低10%左右),发送单个消息的RT会略高")]
    assert all(c.criterion for c in table), [c.quote for c in table if not c.criterion]
    html = mc.claims_html(table) + mc.results_html([run.result for run in runs.values()])
    assert html.count("<tr>") == len(table) + 1 + len(runs) + 1 and html.count("✘ no") == 2


def test_the_restart_hazard_is_read_from_the_trace(runs):
    """A classic master that lost its unflushed tail restarts behind its slave (both replication
    modes); under async replication it takes writes at once, at offsets its slave holds with other
    messages. Under sync double write what it does depends on how it treats the slave's report."""
    from rmqlab.lab.deployment_facts import restart_hazard

    for mode in ("2m-2s-async", "2m-2s-sync"):
        run = runs[mode]
        h = restart_hazard(run.events, run.restart_at_ms, mc.TOPIC)
        assert h.master_end is not None and h.slave_end is not None and h.behind == h.slave_end - h.master_end > 0
        assert h.sends_after_restart > 0
        acked = sum(r["outcome"] == "acknowledged" and r["broker_set"] == "broker-a"
                    and r["time_s"] * 1000 >= run.restart_at_ms for r in send_rows(run.events, mc.TOPIC))
        assert h.acked_after_restart == acked
    assert restart_hazard(runs["2m-2s-async"].events, runs["2m-2s-async"].restart_at_ms, mc.TOPIC).acked_after_restart > 0
    # RocketMQ's SYNC_MASTER takes its slave's report, ahead of it, as an ack: the run shows sync
    # sends acknowledged that no replica holds (the hazard lab 01 teaches), within the run's window.
    sync = runs["2m-2s-sync"]
    assert restart_hazard(sync.events, sync.restart_at_ms, mc.TOPIC).acked_after_restart > 0
    assert sync.result.acked_behind_slave > 0
    # single-master has no slave: nothing to be behind.
    single = runs["single-master"]
    assert restart_hazard(single.events, single.restart_at_ms, mc.TOPIC, slave="none").behind == 0


def test_same_seed_same_table_and_trace_in_or_out_of_a_worker(runs):
    again = mc.simulate_mode("single-master", SEED)
    assert again.result == runs["single-master"].result
    assert trace_hash(again.events) == trace_hash(runs["single-master"].events)


def test_unknown_modes_are_refused_and_new_ones_register():
    with pytest.raises(ValueError, match="unknown mode"):
        mc.simulate_mode("3m-nothing", SEED)
    spec = mc.ModeSpec("test-row", "heading", "says", "2m-noslave")
    try:
        assert mc.register_mode(spec) is spec and mc.MODES["test-row"] is spec
    finally:
        del mc.MODES["test-row"]


# --- the figures, from the recorded traces ------------------------------------------------------------------
def _bars(fig: go.Figure, name: str) -> list[tuple[float, int]]:
    return [(x, y) for t in fig.data if t.type == "bar" and t.name == name for x, y in zip(t.x, t.y)]


def test_sends_figure_counts_every_send_by_outcome_and_broker_set(runs):
    run = runs["2m-2s-async"]
    fig = sends_figure(run.events, topic=mc.TOPIC)
    rows = send_rows(run.events, mc.TOPIC)
    assert len(rows) == run.result.sent
    bars = {t.name: sum(t.y) for t in fig.data if t.type == "bar"}
    assert bars == {"acknowledged by broker-a": sum(r["outcome"] == "acknowledged" and r["broker_set"] == "broker-a"
                                                    for r in rows),
                    "acknowledged by broker-b": sum(r["outcome"] == "acknowledged" and r["broker_set"] == "broker-b"
                                                    for r in rows),
                    "unknown": run.result.indeterminate, "failed": 0}
    crash_s, restart_s = run.crash_at_ms / 1000, run.restart_at_ms / 1000
    assert not [x for x, _ in _bars(fig, "acknowledged by broker-a") if crash_s + 1 < x < restart_s], \
        "broker-a acknowledges nothing while its machine is down"
    latency = [t for t in fig.data if t.type == "scatter" and t.name == "acknowledged by broker-b"]
    assert latency and all(y > 0 for y in latency[0].y)
    labels = [a.text for a in fig.layout.annotations]
    assert "crash broker-a" in labels and "restart broker-a" in labels


def test_consumption_figure_shows_the_slave_serving_during_the_outage(runs):
    run = runs["2m-2s-async"]
    sources = consumption_sources(run.events, consumers=[mc.OUTAGE_READER])
    assert sources[("broker-a-s", "slave")] == run.result.on_broker_a
    assert set(sources) == {("broker-a-s", "slave"), ("broker-b", "master")}
    assert sources[("broker-b", "master")] == sum(r["messages"] for r in pull_rows(run.events, [mc.OUTAGE_READER])
                                                  if r["outcome"] == "ok" and r["server"] == "broker-b")
    fig = consumption_figure(run.events, topic=mc.TOPIC)
    slave = [t for t in fig.data if t.name == "read from a slave"][0]
    assert set(slave.y) == {"broker-a-s"} and all(run.crash_at_ms / 1000 < x < run.restart_at_ms / 1000 for x in slave.x)
    failed = [t for t in fig.data if t.name == "pull failed / timed out"][0]
    assert "broker-a: pull failed" in set(failed.y), "the live consumer's pulls to the dead master time out"


def test_offsets_and_lag_show_the_slave_ahead_of_a_restarted_master(runs):
    run = runs["2m-2s-async"]
    series = offset_series(run.events)
    assert {"written"} <= set(series["broker-a-s"]) and {"shipped", "acknowledged"} <= set(series["broker-a"])
    lag = replication_lag(run.events)
    restart_s = run.restart_at_ms / 1000
    # broker-a came back without its unflushed tail: behind its own slave.
    assert max(v for t, v in lag["broker-a"] if t >= restart_s) > 0
    assert all(v == 0 for t, v in lag["broker-a"] if t < run.crash_at_ms / 1000 - 1)
    fig = offsets_figure(run.events)
    assert {t.name for t in fig.data} >= {"broker-a-s written", "broker-a shipped", "broker-a-s lag"}
    # A master without slaves still shows its log growing, from its acknowledged sends' offsetMsgId.
    single = offset_series(runs["single-master"].events)["broker-a"]["acknowledged"]
    assert len(single) == runs["single-master"].result.acknowledged
    before = [v for t, v in single if t < runs["single-master"].crash_at_ms / 1000]
    assert before == sorted(before) and len(set(before)) == len(before) > 10


def test_topology_shows_roles_crashes_and_replication_links(runs):
    run = runs["2m-2s-async"]
    before, after = topology(run.events, run.crash_at_ms - 1), topology(run.events, run.crash_at_ms + 1_000)
    assert before.nodes["broker-a"].category == "master" and before.nodes["broker-a-s"].category == "slave"
    assert after.nodes["broker-a"].category == "down" and after.nodes["broker-a"].label == "down: crash (was ASYNC_MASTER)"
    states = {(link.a, link.b): link.state for link in after.links}
    assert states[("broker-a", "broker-a-s")] == "down" and states[("broker-b", "broker-b-s")] == "ha"
    assert "mqadmin" not in after.nodes and mc.ADMIN not in after.nodes  # tools, not the deployment
    assert {n.broker_set for n in after.nodes.values() if n.component == "broker"} == {"broker-a", "broker-b"}
    fig = topology_figure(run.events, run.crash_at_ms + 1_000)
    down = [t for t in fig.data if t.name == "down"][0]
    assert list(down.text) == ["<b>broker-a</b><br>down: crash (was ASYNC_MASTER)"]


def test_topology_cuts_links_across_an_active_partition():
    def ev(seq, t, node, kind, **fields):
        return TraceEvent(seq, float(t), node, kind, fields)

    events = [ev(0, 0, "namesrv", "node.start", component="namesrv"),
              ev(1, 1, "broker-a", "node.start", component="broker"),
              ev(2, 1, "broker-b", "node.start", component="broker"),
              ev(3, 2, "broker-a", "net.connect", peer="namesrv", local="127.0.0.1:40000"),
              ev(4, 2, "broker-b", "net.connect", peer="namesrv", local="127.0.0.1:40001"),
              ev(5, 3, "nemesis", "fault.partition", groups=[["broker-a"], ["namesrv", "broker-b"]], fault_id=1),
              ev(6, 9, "nemesis", "fault.heal", fault="partition", fault_id=1)]
    cut = topology(events, at_ms=5)
    assert [(link.a, link.b, link.state) for link in cut.links] == [("broker-a", "namesrv", "cut"),
                                                                    ("broker-b", "namesrv", "up")]
    assert cut.partitions == [[["broker-a"], ["namesrv", "broker-b"]]]
    assert {link.state for link in topology(events).links} == {"up"} and topology(events).partitions == []
    assert any("partition" in (a.text or "") for a in topology_figure(events, at_ms=5).layout.annotations)


def test_sends_by_mode_lines_the_runs_up_on_their_crash(runs):
    fig = sends_by_mode_figure({m: run.events for m, run in runs.items()}, topic=mc.TOPIC)
    assert set(runs) <= {a.text for a in fig.layout.annotations}
    single = [t for t in fig.data if t.yaxis == "y" and t.name.startswith("acknowledged")]
    assert single and not [x for t in single for x in t.x if 1 < x < mc.OUTAGE_MS / 1000]


def test_a_live_figure_redraws_in_place_after_a_fault():
    live = mc.start_live("2m-noslave", SEED)
    try:
        widget = go.FigureWidget(topology_figure(live.events()))
        assert [t.name for t in widget.data if t.name == "down" and len(t.x)] == []
        live.nemesis.crash("broker-a")
        live.run_for(2_000)
        redraw(widget, topology_figure(live.events()))
        down = [t for t in widget.data if t.name == "down"][0]
        assert list(down.text) == ["<b>broker-a</b><br>down: crash (was ASYNC_MASTER)"]
        assert widget.layout.title.text.startswith("Cluster at t = ")
        acked = [r for r in send_rows(live.events(), mc.TOPIC) if r["outcome"] == "acknowledged"]
        assert acked, "the live producer sends as virtual time runs"
    finally:
        live.close()


# --- the notebook's exercise: its reference solution (kept here, never in labs/) ------------------------------
def lost_messages(events) -> set[str]:
    """The uniq_keys of acknowledged sends that neither reader-outage nor reader-after pulled."""
    from rmqlab.trace import client_ops

    ops = client_ops(events)
    acked = {op.invoke_value["uniq_key"] for op in ops if op.node == "producer" and op.f == "send"
             and op.type == "ok" and op.value.get("send_status") == "SEND_OK"}
    read = {m["uniq_key"] for op in ops if op.node in ("reader-outage", "reader-after") and op.f == "pull"
            and op.type == "ok" for m in op.value["messages"]}
    return acked - read


def test_the_exercise_as_stated_in_the_notebook_matches_the_judge(runs):
    for mode, run in runs.items():
        assert len(lost_messages(run.events)) == run.result.acknowledged_lost, mode
