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

from rmqlab.common.manual_clock import ManualClock
from tests.store_helpers import open_store, read_queue

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
