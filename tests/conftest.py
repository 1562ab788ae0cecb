"""Session-wide settings of the test suite.

The deployment-mode comparison (rmqlab.demo.mode_comparison.simulate_modes: eight modes, ~160
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

# rmqlab.demo.mode_comparison.MODE_CACHE_ENV, spelled out: importing the simulator here would load
# it before every test run, also those that never use it.
MODE_CACHE_ENV = "RMQLAB_MODE_CACHE_DIR"
_made: list[str] = []


def pytest_configure(config):
    if not os.environ.get(MODE_CACHE_ENV):
        _made.append(tempfile.mkdtemp(prefix="rmqlab-mode-cache-"))
        os.environ[MODE_CACHE_ENV] = _made[-1]


def pytest_unconfigure(config):
    for path in _made:
        shutil.rmtree(path, ignore_errors=True)
        if os.environ.get(MODE_CACHE_ENV) == path:
            del os.environ[MODE_CACHE_ENV]
    _made.clear()
