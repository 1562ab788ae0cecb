"""Session-wide settings and shared fixtures of the test suite.

Builders and helpers that several test modules share live in helper modules beside this file
(tests/*_helpers.py, tests/fuzz_frames.py, tests/oracles/); no test module imports another.
Fixtures here: ``_close_worlds`` (autouse) closes what the builders tracked (tests/sim_helpers.py),
``lab`` builds client scenarios on the simulator (tests/client_helpers.py). Every run carries the
guard of tests/process_guard.py: a test that starts an OS process must be marked ``real``,
``browser`` or ``spark`` (the markers are registered in pyproject.toml).

The deployment-mode comparison (rmqlab.demo.mode_comparison.simulate_modes: ten modes, ~160
virtual s each) is deterministic, and several tests and notebooks need the same one (seed 7, every
mode): tests/test_lab_deployment_modes.py, `rmqlab demo` in tests/test_demo.py, lab 01 under nbval
and in the browser test. RMQLAB_MODE_CACHE_DIR points them at one directory for the whole pytest
run (removed at its end), so the first computes it and the others read it back (keyed by a hash of
the rmqlab sources, the seed and the modes). Notebook kernels and subprocesses inherit the variable; a test that needs a fresh
run (tests/test_leftovers.py's demo, whose point is what a run leaves behind) drops RMQLAB_*
variables from its subprocess's environment.
"""

from __future__ import annotations

import os
import shutil
import tempfile

import pytest

from tests import process_guard
from tests.sim_helpers import close_tracked

# rmqlab.demo.mode_comparison.MODE_CACHE_ENV, spelled out: importing the simulator here would load
# it before every test run, also those that never use it.
MODE_CACHE_ENV = "RMQLAB_MODE_CACHE_DIR"
_made: list[str] = []


def pytest_configure(config):
    process_guard.register(config)
    if not os.environ.get(MODE_CACHE_ENV):
        _made.append(tempfile.mkdtemp(prefix="rmqlab-mode-cache-"))
        os.environ[MODE_CACHE_ENV] = _made[-1]


def pytest_unconfigure(config):
    for path in _made:
        shutil.rmtree(path, ignore_errors=True)
        if os.environ.get(MODE_CACHE_ENV) == path:
            del os.environ[MODE_CACHE_ENV]
    _made.clear()


@pytest.fixture(autouse=True)
def _close_worlds():
    """Close every Simulation and Cluster a builder tracked during the test (tests/sim_helpers.py)."""
    yield
    close_tracked()


@pytest.fixture
def lab():
    """``lab(brokers, seed, namesrvs, **kwargs)`` builds a client_helpers.Lab; after the test each is
    closed, and the test fails if a task of a client process died of an exception."""
    # Imported here: the simulator is not loaded for the runs that never use it.
    from rmqlab.client import ClientProcess
    from tests.client_helpers import TWO_MASTERS, Lab

    labs: list[Lab] = []

    def make(brokers=TWO_MASTERS, seed: int = 7, namesrvs: dict[str, int] | None = None, **kwargs) -> Lab:
        created = Lab(brokers, seed, namesrvs, **kwargs)
        labs.append(created)
        return created

    yield make
    for created in labs:
        # No task of a client process died of an exception (the node traces those as ERROR).
        clients = {name for name, c in created.sim.components.items() if isinstance(c, ClientProcess)}
        errors = [e for e in created.sim.tracer.events
                  if e.kind == "log" and e.node in clients and e.fields["level"] == "ERROR"]
        created.close()
        assert not errors, errors
