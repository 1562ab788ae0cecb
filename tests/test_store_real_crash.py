"""A real process crash: SIGKILL a process that is appending, then recover its store.

Not an emulation: the child writes through mmap and is killed by the kernel mid-run, so this
shows the OS page cache keeping every acknowledged append of an ASYNC_FLUSH store.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap

import pytest

from rmqlab.common.manual_clock import ManualClock
from tests.store_helpers import open_store, read_queue

pytestmark = pytest.mark.real

CHILD = textwrap.dedent("""
    import sys, time
    from rmqlab.common.manual_clock import ManualClock
    from tests.store_helpers import make_message, open_store
    clock = ManualClock()
    store, _ = open_store(sys.argv[1], clock)
    i = 0
    while True:
        clock.advance(1)
        assert store.put_message(make_message(clock, i)).is_ok()
        print(i, flush=True)  # acknowledged
        i += 1
        if i >= 200:
            time.sleep(60)  # wait to be killed; never flushes, never shuts down
""")


def test_sigkill_keeps_every_acknowledged_append(tmp_path):
    root = tmp_path / "store"
    env = dict(os.environ, PYTHONPATH=os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    child = subprocess.Popen([sys.executable, "-c", CHILD, str(root)], stdout=subprocess.PIPE, text=True, env=env)
    try:
        acked = -1
        for line in child.stdout:
            acked = int(line)
            if acked >= 150:
                break
        os.kill(child.pid, signal.SIGKILL)  # mid-run: the child may be between two appends
    finally:
        child.kill()
        child.wait(timeout=30)
        child.stdout.close()
    assert acked >= 150
    store, report = open_store(root, ManualClock())
    assert not report.last_exit_ok and report.recovery.mode == "abnormal"
    keys = [m.keys for m in read_queue(store, "TopicTest", 0)]
    assert len(keys) >= acked + 1
    assert keys == [f"key-{i}" for i in range(len(keys))]
    store.shutdown()


# A workload over many small files: three queues, 10-unit consume-queue files, dispatch and
# consume-queue flushes between puts (so files are created, filled, flushed and rolled all the
# time), SYNC_FLUSH or ASYNC_FLUSH. A line is printed once a put is acknowledged.
WORKLOAD = textwrap.dedent("""
    import sys, time
    from rmqlab.common.manual_clock import ManualClock
    from tests.store_helpers import make_message, open_store, store_config
    root, sync = sys.argv[1], sys.argv[2] == "1"
    overrides = dict(mappedFileSizeConsumeQueue=200, flushConsumeQueueThoroughInterval=500)
    if sync:
        overrides["flushDiskType"] = type(store_config(root).flushDiskType)["SYNC_FLUSH"]
    clock = ManualClock()
    store, _ = open_store(root, clock, **overrides)
    i = 0
    while True:
        clock.advance(37)
        q = i % 3
        assert store.put_message(make_message(clock, i, queue_id=q, body_size=40 + 97 * (i % 11))).is_ok()
        print(i, flush=True)  # acknowledged
        store.reput_message_service.do_reput()
        if i % 4 == 0:
            store.flush_consume_queue_service.do_flush()
        i += 1
        if i >= 3000:
            time.sleep(60)
""")

RECOVER = textwrap.dedent("""
    import sys
    from rmqlab.common.manual_clock import ManualClock
    from tests.store_helpers import open_store
    print("recovering", flush=True)
    open_store(sys.argv[1], ManualClock(), mappedFileSizeConsumeQueue=200)
    print("recovered", flush=True)
    import time; time.sleep(60)
""")


def _run_and_kill(script, args, stop_after_lines, env):
    """Start a child, SIGKILL it once it printed `stop_after_lines` lines; return the lines."""
    child = subprocess.Popen([sys.executable, "-c", script, *args], stdout=subprocess.PIPE, text=True, env=env)
    lines = []
    try:
        for line in child.stdout:
            lines.append(line.strip())
            if len(lines) >= stop_after_lines:
                break
        os.kill(child.pid, signal.SIGKILL)
    finally:
        child.kill()
        child.wait(timeout=30)
        child.stdout.close()
    return lines


@pytest.mark.parametrize("sync,kill_after", [(False, 40), (True, 233), (False, 517)])
def test_sigkill_in_a_small_file_workload_and_again_in_recovery(tmp_path, sync, kill_after):
    """SIGKILL mid-workload, then SIGKILL the restarted process as it recovers, then recover: every
    acknowledged message of every queue is served, in order, and nothing else."""
    root = tmp_path / "store"
    env = dict(os.environ, PYTHONPATH=os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    acked = len(_run_and_kill(WORKLOAD, [str(root), "1" if sync else "0"], kill_after, env))
    assert acked == kill_after
    _run_and_kill(RECOVER, [str(root)], 1, env)  # killed somewhere in (or just before) its recovery
    store, report = open_store(root, ManualClock(), mappedFileSizeConsumeQueue=200)
    assert not report.last_exit_ok
    for q in range(3):
        keys = [m.keys for m in read_queue(store, "TopicTest", q)]
        expected = [f"key-{i}" for i in range(q, 3000, 3)]
        assert keys == expected[:len(keys)]
        assert len(keys) >= len([i for i in range(q, acked, 3)])
    store.shutdown()
