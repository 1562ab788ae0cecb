"""`bootstrap.py test` runs pytest in two workers where two CPUs are there, unless told otherwise."""

from __future__ import annotations

import pytest

from rmqlab import bootstrap


@pytest.mark.parametrize("cpus, args, expected", [
    ({0, 1}, [], ["-n", "2", "--dist", "loadfile"]),
    ({0, 1, 2, 3}, ["-k", "broker", "tests/test_broker.py"], ["-n", "2", "--dist", "loadfile"]),
    ({0}, [], []),                                  # Binder's one CPU: no workers
    ({0, 1}, ["-n", "4"], []),                      # the caller chose
    ({0, 1}, ["-n0"], []),
    ({0, 1}, ["--numprocesses=3"], []),
    ({0, 1}, ["-p", "no:xdist"], []),
    ({0, 1}, ["--dist", "load"], []),
    ({0, 1}, ["--nbval-lax"], ["-n", "2", "--dist", "loadfile"]),
])
def test_pytest_workers(monkeypatch, cpus, args, expected):
    monkeypatch.setattr(bootstrap.os, "sched_getaffinity", lambda pid: cpus)
    assert bootstrap.pytest_workers(args) == expected
