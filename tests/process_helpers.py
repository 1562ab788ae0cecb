"""Stopping what a test started, by its PID: SIGTERM (the servers' clean shutdown), then SIGKILL
if it has not exited within its grace time. Every wait is bounded."""

from __future__ import annotations

import signal
import subprocess


def stop(proc: subprocess.Popen, grace_s: float = 20) -> None:
    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(grace_s)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(10)
