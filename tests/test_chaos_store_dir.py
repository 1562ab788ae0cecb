"""A chaos run keeps its replicas' store files where a workload replay keeps its own: in memory
(/dev/shm) when there is room, since the simulator's crash model does not rely on the OS."""

from __future__ import annotations

import os

from rmqlab.checker import FaultSchedule, check_all, run_chaos


def test_a_chaos_run_keeps_its_stores_in_the_memory_directory_and_removes_them(monkeypatch, tmp_path):
    import rmqlab.cluster.sim_backend as sim_backend

    memory = tmp_path / "shm"
    memory.mkdir()
    monkeypatch.setattr(sim_backend, "memory_dir", lambda: str(memory))
    run = run_chaos(3, schedule=FaultSchedule(3, (), 2_000, 2_000))
    try:
        assert os.path.dirname(run.root_dir) == str(memory)
        assert all(os.path.isdir(os.path.join(d, "commitlog")) and d.startswith(run.root_dir)
                   for d in run.stores.values())
        assert check_all(run)["replicas"].valid  # the checkers read the files there
    finally:
        run.cleanup()
    assert os.listdir(memory) == []


def test_without_room_in_memory_a_chaos_run_uses_the_temporary_directory(monkeypatch, tmp_path):
    import tempfile

    import rmqlab.cluster.sim_backend as sim_backend

    monkeypatch.setattr(sim_backend, "memory_dir", lambda: None)
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    run = run_chaos(3, schedule=FaultSchedule(3, (), 2_000, 2_000))
    run.cleanup()
    assert os.path.dirname(run.root_dir) == str(tmp_path) and os.listdir(tmp_path) == []
