"""Real RocketMQ clients nobody here wrote, run from their own virtualenvs as subprocesses.

The C++ client (PyPI `rocketmq` 0.4.4, which
bundles librocketmq.so) and the official 5.x gRPC client (PyPI `rocketmq-python-client` 5.1.2)
share the top-level module name `rocketmq`, and the gRPC client's generated protobuf classes would
clash with rmqlab's own in one process, so neither ever enters rmqlab's process:
`cpp_client_python()` and `python5_client_python()` return the interpreter of a dedicated venv
under `.venv-oracles/`, created on first use (pinned version, bounded in time, guarded by a file
lock so parallel test runs create it once).
"""

from __future__ import annotations

import fcntl
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
ORACLES = os.path.join(ROOT, ".venv-oracles")
SCRIPTS = os.path.dirname(os.path.abspath(__file__))
CPP_CLIENT = "rocketmq==0.4.4"
PYTHON5_CLIENT = "rocketmq-python-client==5.1.2"


def _venv_python(name: str, requirement: str, probe: str) -> str:
    venv = os.path.join(ORACLES, name)
    python = os.path.join(venv, "bin", "python")
    os.makedirs(ORACLES, exist_ok=True)
    with open(os.path.join(ORACLES, f".{name}.lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        ok = os.path.exists(python) and subprocess.run([python, "-c", probe], capture_output=True,
                                                       timeout=60).returncode == 0
        if not ok:
            subprocess.run([sys.executable, "-m", "venv", "--clear", venv], check=True, timeout=120)
            subprocess.run([python, "-m", "pip", "install", "-q", requirement], check=True, timeout=600)
    return python


def cpp_client_python() -> str:
    """The interpreter of the venv holding the Apache RocketMQ C++ client (PyPI rocketmq 0.4.4)."""
    return _venv_python("rocketmq-cpp-0.4.4", CPP_CLIENT, "import rocketmq.client")


def oracle_env(home: str) -> dict[str, str]:
    """An oracle's environment: PATH only, and HOME a temp dir (the clients write logs under it)."""
    return {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": home}


def run_cpp(script: str, *args: str, home: str, timeout: float = 90) -> subprocess.CompletedProcess:
    """Run tests/oracles/<script> with the C++ client."""
    return subprocess.run([cpp_client_python(), os.path.join(SCRIPTS, script), *args], capture_output=True,
                          text=True, timeout=timeout, env=oracle_env(home))


def python5_client_python() -> str:
    """The interpreter of the venv holding Apache's 5.x gRPC client (PyPI rocketmq-python-client 5.1.2)."""
    return _venv_python("rocketmq-python-5.1.2", PYTHON5_CLIENT, "from rocketmq import Producer, SimpleConsumer")
