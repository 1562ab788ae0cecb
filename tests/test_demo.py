"""`rmqlab demo`: the storage walkthrough tells the seed's story and writes its report."""

from __future__ import annotations

from rmqlab.cli import main
from rmqlab.demo.storage_walkthrough import run_walkthrough


def test_walkthrough_outcomes(tmp_path):
    a, b, c = run_walkthrough(str(tmp_path), seed=7)
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


def test_demo_is_deterministic_and_writes_a_report(tmp_path, capsys):
    assert main(["demo", "--out", str(tmp_path / "one")]) == 0
    first = capsys.readouterr().out
    assert main(["demo", "--out", str(tmp_path / "two")]) == 0
    second = capsys.readouterr().out
    assert first.replace(str(tmp_path / "one"), "X") == second.replace(str(tmp_path / "two"), "X")
    report = (tmp_path / "one" / "report.html").read_text()
    assert "<svg" in report and "acknowledged lost" in report and "SYNC_FLUSH" in report
