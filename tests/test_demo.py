"""`rmqlab demo`: the storage walkthrough and the deployment-mode comparison tell the deployment
guide's story."""

from __future__ import annotations

import logging
import re

from rmqlab.cli import main
from rmqlab.demo.storage_walkthrough import run_walkthrough
from rmqlab.viz import LOGGERS
from tests.private_references import hits_in


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


def test_demo_prints_every_part_and_writes_an_offline_report(tmp_path, capsys):
    """The walkthrough, the controller-mode failover (its checkers valid) and every mode with
    the deployment guide's claims; the report carries the figures with plotly.js inlined once, no
    script fetched from the network; neither points at a document the reader does not have.
    (The comparison's numbers: tests/test_lab_deployment_modes.py.)"""
    levels = {name: logging.getLogger(name).level for name in LOGGERS}
    assert main(["demo", "--out", str(tmp_path)]) == 0
    assert {name: logging.getLogger(name).level for name in LOGGERS} == levels  # quiet only while it ran
    out = capsys.readouterr().out
    assert "what survives a crash?" in out and "controller mode: the master's machine crashes" in out
    assert "checker total-queue: valid" in out and "INVALID" not in out
    for mode in ("single-master", "2m-2s-sync", "controller-standalone", "proxy-local", "proxy-cluster"):
        assert f"\n{mode} " in out
    assert "RocketMQ's deployment guide (部署方式) says 「" in out
    assert not hits_in(out), hits_in(out)
    report = (tmp_path / "report.html").read_text()
    assert "<svg" in report and "Deployment modes under a master machine crash" in report
    assert "Controller mode: the master's machine crashes" in report
    assert "The deployment guide's pros and cons, measured" in report
    # Everything but plotly.js's own source (the figures' data and titles stay in).
    prose = re.sub(r"<script\b[^>]*>.*?</script>", lambda m: "" if "plotly.js v" in m.group(0) else m.group(0),
                   report, flags=re.S)
    assert not hits_in(prose), hits_in(prose)
    assert report.count('class="plotly-graph-div"') == 6  # five failover figures, the modes side by side
    assert report.count("plotly.js v") == 1 and "<script src=" not in report
