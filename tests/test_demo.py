"""`rmqlab demo`: the storage walkthrough and the deployment-mode comparison tell the seed's story."""

from __future__ import annotations

from rmqlab.cli import main
from rmqlab.demo.mode_comparison import run_comparison, run_mode
from rmqlab.demo.storage_walkthrough import run_walkthrough


def test_walkthrough_outcomes_are_deterministic(tmp_path):
    a, b, c = run_walkthrough(str(tmp_path / "one"), seed=7)
    # A: kill -9 keeps the page cache.
    assert a.acknowledged == a.survivors == 120 and a.acknowledged_lost == 0 and a.recovery_mode == "abnormal"
    # B: power loss under ASYNC_FLUSH loses acknowledged messages, exactly the unflushed ones.
    assert b.acknowledged == 120 and b.acknowledged_lost > 0
    assert b.recovered_offset == b.flushed_offset < b.written_offset
    assert b.survivors + b.acknowledged_lost == 120
    # C: SYNC_FLUSH loses nothing acknowledged; the torn in-flight message is cut.
    assert c.acknowledged == 119 and c.acknowledged_lost == 0 and c.survivors == 119
    assert c.discarded_bytes > 0 and "invalid record" in c.stop_reason
    assert len(a.commitlog_files) >= 3  # 64 KiB files rolled
    again = run_walkthrough(str(tmp_path / "two"), seed=7)
    assert [r.explanation for r in again] == [r.explanation for r in (a, b, c)]


def test_mode_comparison_reproduces_the_seeds_pros_and_cons():
    modes = {m.mode: m for m in run_comparison(seed=7)}
    single, noslave, async_, sync = (modes[m] for m in ("single-master", "2m-noslave", "2m-2s-async", "2m-2s-sync"))
    assert single.acked_during_outage == 0  # one broker: unavailable while it is down
    for m in (noslave, async_, sync):
        assert m.acked_during_outage > 0  # "单个Master宕机...对应用无影响": sends go on elsewhere
    assert noslave.on_broker_a > 0 and noslave.readable_during_outage == 0  # its messages wait for it
    assert noslave.acknowledged_lost > 0  # ASYNC_FLUSH machine crash: a few acknowledged messages gone
    assert async_.readable_during_outage == async_.on_broker_a > 0  # consumers continue from the slave
    assert sync.acknowledged_lost == 0 and sync.readable_during_outage == sync.on_broker_a
    assert sync.p50_ms > async_.p50_ms  # each send also waits for the slave


def test_mode_runs_are_deterministic():
    assert run_mode("2m-noslave", seed=3) == run_mode("2m-noslave", seed=3)


def test_demo_prints_both_parts_and_writes_the_report(tmp_path, capsys):
    assert main(["demo", "--out", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "what survives a crash?" in out and "2m-2s-sync" in out and "seed 000 says" in out
    report = (tmp_path / "report.html").read_text()
    assert "<svg" in report and "Deployment modes under a master machine crash" in report
