"""simulate_modes reads a comparison back from RMQLAB_MODE_CACHE_DIR when the same sources, seed
and modes computed it before, and simulates otherwise (tests/conftest.py sets the directory for a
test session, so the suite computes lab 01's comparison once)."""

from __future__ import annotations

import os

import pytest

from rmqlab.demo import mode_comparison as mc
from rmqlab.trace import Tracer, trace_hash

MODES = ["single-master", "2m-2s-sync"]


def _fake_runs(seed: int, names: list[str], workers: int) -> dict[str, mc.ModeRun]:
    """ModeRuns as simulate_modes returns them (a result and its trace), without the simulation."""
    runs = {}
    for i, name in enumerate(names):
        tracer = Tracer(lambda: 1.5)
        tracer.emit("broker-a", "role", from_=None, to="SYNC_MASTER", component="broker", epoch=seed)
        tracer.emit("producer", "client", type="invoke", process=0, f="send", op_id=i, value={"topic": mc.TOPIC})
        result = mc.ModeResult(name, 10 + i, 9, 1, 0, 0, 0, 2, 3, 1.25, 4.5, 0, 5, "says", victim="broker-a")
        runs[name] = mc.ModeRun(result, tracer.events, 100.0, 200.0, 50.0)
    return runs


@pytest.fixture
def calls(monkeypatch, tmp_path):
    """The cache in tmp_path; simulate_modes' own runs recorded (seed, names) and faked."""
    monkeypatch.setenv(mc.MODE_CACHE_ENV, str(tmp_path / "cache"))
    made: list[tuple[int, list[str]]] = []

    def simulate(seed, names, workers):
        made.append((seed, list(names)))
        return _fake_runs(seed, names, workers)

    monkeypatch.setattr(mc, "_simulate_modes", simulate)
    return made


def test_a_comparison_is_simulated_once_and_read_back_the_same(calls, tmp_path):
    first = mc.simulate_modes(7, MODES, workers=2)
    again = mc.simulate_modes(7, MODES, workers=1)  # workers do not change the result
    assert calls == [(7, MODES)]
    assert again == first and list(again) == MODES
    assert {m: trace_hash(r.events) for m, r in again.items()} == {m: trace_hash(r.events) for m, r in first.items()}
    assert [p for p in os.listdir(tmp_path / "cache") if not p.endswith(".pickle")] == []  # no temporary file left


def test_another_seed_modes_or_sources_are_simulated(calls, monkeypatch):
    mc.simulate_modes(7, MODES)
    mc.simulate_modes(8, MODES)
    mc.simulate_modes(7, MODES[:1])
    monkeypatch.setattr(mc, "_sources_digest", lambda: "other sources")
    mc.simulate_modes(7, MODES)
    assert calls == [(7, MODES), (8, MODES), (7, MODES[:1]), (7, MODES)]


def test_without_the_directory_or_with_a_mode_the_sources_do_not_describe_nothing_is_cached(calls, monkeypatch):
    spec = mc.register_mode(mc.ModeSpec("test-row", "heading", "says", "2m-noslave"))
    try:
        mc.simulate_modes(7, ["test-row"])
        mc.simulate_modes(7, ["test-row"])
    finally:
        del mc.MODES["test-row"]
    assert spec not in mc.MODES.values()
    monkeypatch.setattr(mc, "simulate_mode", lambda name, seed: None)  # a test's stand-in
    mc.simulate_modes(7, MODES)
    mc.simulate_modes(7, MODES)
    monkeypatch.delenv(mc.MODE_CACHE_ENV)
    mc.simulate_modes(9, MODES)
    mc.simulate_modes(9, MODES)
    assert calls == [(7, ["test-row"])] * 2 + [(7, MODES)] * 2 + [(9, MODES)] * 2


def test_the_sources_digest_changes_with_any_source_file_not_with_bytecode(tmp_path):
    pkg, conf = tmp_path / "rmqlab", tmp_path / "conf"
    (pkg / "store" / "__pycache__").mkdir(parents=True)
    conf.mkdir()
    (pkg / "store" / "commit_log.py").write_text("A = 1\n")
    (conf / "broker-a.properties").write_text("brokerRole=ASYNC_MASTER\n")
    digest = lambda: mc._tree_digest([str(pkg), str(conf)], "3.11")  # noqa: E731
    before = digest()
    (pkg / "store" / "__pycache__" / "commit_log.cpython-311.pyc").write_bytes(b"\0")
    assert digest() == before
    (conf / "broker-a.properties").write_text("brokerRole=SYNC_MASTER\n")
    assert digest() != before
    (conf / "broker-a.properties").write_text("brokerRole=ASYNC_MASTER\n")
    assert digest() == before
    (pkg / "store" / "commit_log.py").write_text("A = 2\n")
    assert digest() != before
    assert mc._tree_digest([str(pkg), str(conf)], "3.12") != digest()
    real = mc._sources_digest()
    assert len(real) == 64 and real == mc._sources_digest()
