"""Nothing is left in the temporary directory: after `rmqlab demo`, an `rmqlab admin` call and a
lab's real cluster (rmqlab.cluster, runtime="real"), whether they end normally, with an exception
or with Ctrl-C (SIGINT).

Each case runs as a subprocess with TMPDIR set to a fresh directory of its own, which
tempfile.gettempdir() answers in that process; the directory is listed before and after.
"""

from __future__ import annotations

import os
import select
import signal
import socket
import subprocess
import sys
import textwrap
import time

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def env_with_tmpdir(tmpdir, home) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("RMQLAB_") and k != "NAMESRV_ADDR"}
    env.update(TMPDIR=str(tmpdir), HOME=str(home),
               PYTHONPATH=os.pathsep.join(p for p in (ROOT, os.environ.get("PYTHONPATH")) if p))
    return env


@pytest.fixture
def tmpdir_env(tmp_path):
    """(the fresh TMPDIR, the environment that sets it, a working directory outside it)."""
    tmpdir, work = tmp_path / "tmp", tmp_path / "work"
    tmpdir.mkdir()
    work.mkdir()
    return tmpdir, env_with_tmpdir(tmpdir, tmp_path / "home"), work


def interrupt_when(proc: subprocess.Popen, ready, timeout_s: float = 120) -> None:
    """SIGINT `proc` (a Ctrl-C) once `ready()` holds; fails if it exits or takes too long first."""
    deadline = time.monotonic() + timeout_s
    while not ready():
        assert proc.poll() is None, f"exited with {proc.returncode} before it was interrupted: {proc.communicate()}"
        assert time.monotonic() < deadline, "not ready in time"
        time.sleep(0.1)
    proc.send_signal(signal.SIGINT)


@pytest.mark.real
def test_demo_leaves_nothing(tmpdir_env):
    tmpdir, env, work = tmpdir_env
    assert os.listdir(tmpdir) == []
    result = subprocess.run([sys.executable, "-m", "rmqlab.cli", "demo", "--out", str(work / "out")], env=env,
                            cwd=str(work), capture_output=True, text=True, timeout=1200)
    assert result.returncode == 0, result.stderr[-3000:]
    assert os.listdir(tmpdir) == []
    assert os.path.exists(work / "out" / "report.html")  # what the demo is asked to keep, it keeps


@pytest.mark.real
def test_admin_call_leaves_nothing_after_a_failure_or_ctrl_c(tmpdir_env):
    tmpdir, env, work = tmpdir_env
    with socket.socket() as s:  # a port nothing listens on: the request fails
        s.bind(("127.0.0.1", 0))
        dead = s.getsockname()[1]
    failed = subprocess.run([sys.executable, "-m", "rmqlab.cli", "admin", "clusterList", "-n", f"127.0.0.1:{dead}"],
                            env=env, cwd=str(work), capture_output=True, text=True, timeout=60)
    assert failed.returncode == 1
    assert os.listdir(tmpdir) == []

    # A "name server" that accepts and never answers: the admin call waits, and is interrupted.
    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen()
        proc = subprocess.Popen([sys.executable, "-m", "rmqlab.cli", "admin", "clusterList", "-n",
                                 f"127.0.0.1:{silent.getsockname()[1]}"], env=env, cwd=str(work),
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            interrupt_when(proc, lambda: os.listdir(tmpdir) != [])  # its node's directory exists
            proc.wait(30)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait(10)
    assert proc.returncode == 130, proc.stderr.read()
    assert os.listdir(tmpdir) == []


REAL_CLUSTER = textwrap.dedent("""
    import sys, time
    from rmqlab.cluster import Cluster

    c = Cluster("single-master", runtime="real")
    c.start(60_000)
    print("pids", *(c.real.pid(n) for n in c.real.nodes), flush=True)
    if sys.argv[1] == "close":
        c.close()
    elif sys.argv[1] == "raise":
        raise RuntimeError("a lab cell failed")
    else:  # wait for Ctrl-C
        time.sleep(600)
""")


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    with open(f"/proc/{pid}/stat") as f:  # a zombie is gone but for its exit status
        return f.read().rsplit(")", 1)[1].split()[0] != "Z"


@pytest.mark.real
@pytest.mark.parametrize("end", ["close", "raise", "ctrl-c"])
def test_a_lab_real_cluster_leaves_nothing(tmpdir_env, end):
    tmpdir, env, work = tmpdir_env
    proc = subprocess.Popen([sys.executable, "-c", REAL_CLUSTER, end], env=env, cwd=str(work),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        ready, _, _ = select.select([proc.stdout], [], [], 120)  # bounded: a hung start fails the test
        line = proc.stdout.readline() if ready else ""
        assert line.startswith("pids"), proc.communicate()
        pids = [int(p) for p in line.split()[1:]]
        if end == "ctrl-c":
            interrupt_when(proc, lambda: True)
        proc.wait(60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)
    # Python ends a KeyboardInterrupt it did not catch by the signal itself: -SIGINT.
    assert proc.returncode == {"close": 0, "raise": 1, "ctrl-c": -signal.SIGINT}[end], proc.stderr.read()
    assert os.listdir(tmpdir) == []
    assert not [pid for pid in pids if _pid_alive(pid)]


@pytest.mark.real
def test_a_simulator_cluster_never_closed_is_removed_at_exit(tmpdir_env):
    tmpdir, env, work = tmpdir_env
    script = "from rmqlab.cluster import Cluster\nc = Cluster('single-master')\nc.start()\nprint(c.root_dir)\n"
    result = subprocess.run([sys.executable, "-c", script], env=env, cwd=str(work), capture_output=True, text=True,
                            timeout=120)
    assert result.returncode == 0, result.stderr
    from rmqlab.cluster.sim_backend import memory_dir

    root = result.stdout.strip()
    assert os.path.dirname(root) == (memory_dir() or str(tmpdir))  # it was made there (in memory if there is room)
    assert not os.path.exists(root)
    assert os.listdir(tmpdir) == []


def test_a_simulation_removes_only_the_root_it_made(tmp_path):
    from rmqlab.runtime.sim import Simulation

    made = Simulation()
    os.makedirs(made.store_dir("n0"))
    made.close()
    assert not os.path.exists(made.root_dir)
    given = Simulation(root_dir=str(tmp_path / "sim"))
    os.makedirs(given.store_dir("n0"))
    given.close()
    assert os.path.isdir(tmp_path / "sim" / "n0")  # the caller's directory is the caller's


@pytest.mark.real
@pytest.mark.spark
def test_the_grader_archive_shipped_to_a_cluster_master_is_removed_when_the_driver_exits(tmpdir_env):
    """ship_package (grading on a spark:// master) packs rmqlab into a temporary directory that
    Spark's driver serves to executors; it must not outlive the driver's process."""
    tmpdir, env, work = tmpdir_env
    code = textwrap.dedent("""
        import os
        from rmqlab.spark.session import ship_package

        class Context:  # what ship_package uses of a SparkContext
            def addArchive(self, path):
                assert os.path.exists(path.split("#")[0])

        path = ship_package(Context(), "spark://127.0.0.1:7077")
        assert os.path.exists(path)
        print(path)
    """)
    result = subprocess.run([sys.executable, "-c", code], env=env, cwd=str(work), capture_output=True, text=True,
                            timeout=120)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip().startswith(str(tmpdir))
    assert os.listdir(tmpdir) == []


def test_run_directories_of_dead_processes_are_swept_from_memory(tmp_path):
    """A run directory in /dev/shm names its owner process (owned_prefix); one whose owner died
    without cleaning up (killed) is removed by the next run's sweep, a live owner's is kept, and
    other names are left alone."""
    import tempfile

    from rmqlab.cluster.sim_backend import owned_prefix, sweep_orphans

    with open("/proc/sys/kernel/pid_max") as f:
        pid_max = int(f.read())
    dead_pid = next(p for p in range(pid_max - 1, 1, -1) if not os.path.exists(f"/proc/{p}"))
    orphan = tmp_path / f"rmqlab-2m-2s-async-p{dead_pid}-abcd1234"
    orphan.mkdir()
    (orphan / "commitlog").write_bytes(b"x")
    mine = tempfile.mkdtemp(prefix=owned_prefix("rmqlab-dledger-"), dir=tmp_path)
    other = tmp_path / "rmqlab-sim-unrelated"
    other.mkdir()
    assert sweep_orphans(str(tmp_path)) == [orphan.name]
    assert not orphan.exists() and (tmp_path / mine).exists() and other.exists()
