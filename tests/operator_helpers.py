"""What the real-process upgrade tests share: the operator's `rmqlab admin` commands as a subprocess,
and waiting on a cluster's clients."""

from __future__ import annotations

import subprocess
import sys
import time

from rmqlab.cluster import Cluster


def admin(*args: str) -> str:
    """`rmqlab admin ...` as the operator types it; its output (it must succeed)."""
    done = subprocess.run([sys.executable, "-m", "rmqlab.cli", "admin", *args], capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 0, (args, done.stdout, done.stderr)
    return done.stdout


def finished(c: Cluster, node: str) -> bool:
    """The benchmark producer `node` printed its last line ([Complete])."""
    return any(e.node == node and e.kind == "log" and e.fields["message"].startswith("[Complete]")
               for e in c.events())


def wait(predicate, timeout_s: float, what: str) -> None:
    deadline = time.monotonic() + timeout_s
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"not within {timeout_s} s: {what}")
        time.sleep(0.5)


def properties(path: str) -> dict[str, str]:
    """A broker's .properties file as the operator edits it."""
    with open(path) as f:
        return dict(line.strip().split("=", 1) for line in f if "=" in line and not line.startswith("#"))
