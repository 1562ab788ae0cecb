"""A Spark standalone cluster on 127.0.0.1, for running the grader and chaos campaigns against a
non-local master (`spark://...`) the way an instructor's cluster runs them.

    with SparkStandalone(workers=2) as cluster:      # one master, two workers, all on loopback
        grade(GradeConfig(..., master=cluster.master_url))

pyspark's pip package has no sbin/start-master.sh; its own launcher, bin/spark-class, starts the
daemons exactly as those scripts do (`spark-class org.apache.spark.deploy.master.Master ...`, see
Spark's "Spark Standalone Mode" page, "Starting a Cluster Manually"). Each daemon is an OS process
of its own session, started here and stopped here by PID (its process group: a worker's executors
are its children). Ports are free ones picked at start; every address is 127.0.0.1
(SPARK_LOCAL_IP and --host), and the daemons' logs, work directories and local directories live
under `root_dir`. Ready means the master's JSON page (`/json/`) counts every worker ALIVE.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from dataclasses import dataclass

LOOPBACK = "127.0.0.1"


class SparkStandaloneError(RuntimeError):
    pass


def spark_home() -> str:
    """pyspark's installation directory (it is SPARK_HOME for its bin/ scripts)."""
    import pyspark
    return os.path.dirname(os.path.abspath(pyspark.__file__))


def _free_port() -> int:
    with socket.socket() as s:
        s.bind((LOOPBACK, 0))
        return s.getsockname()[1]


@dataclass
class _Daemon:
    name: str
    proc: subprocess.Popen
    log_path: str


class SparkStandalone:
    """One master and `workers` workers of `cores` cores and `memory` each. An application's
    executors ask 1g by default (spark.executor.memory), so a worker offers at least that."""

    def __init__(self, workers: int = 2, cores: int = 1, memory: str = "1g", root_dir: str | None = None,
                 daemon_memory: str = "256m"):
        if workers < 1 or cores < 1:
            raise ValueError(f"a cluster needs at least one worker of one core, got {workers} x {cores}")
        self.workers, self.cores, self.memory, self.daemon_memory = workers, cores, memory, daemon_memory
        self._own_root = root_dir is None
        self.root_dir = root_dir or tempfile.mkdtemp(prefix="rmqlab-spark-")
        self.daemons: list[_Daemon] = []
        self.master_port = self.master_webui_port = 0

    @property
    def master_url(self) -> str:
        return f"spark://{LOOPBACK}:{self.master_port}"

    @property
    def pids(self) -> list[int]:
        return [d.proc.pid for d in self.daemons]

    def _env(self) -> dict:
        env = dict(os.environ)
        env.update(SPARK_HOME=spark_home(), SPARK_LOCAL_IP=LOOPBACK, SPARK_DAEMON_MEMORY=self.daemon_memory,
                   SPARK_LOG_DIR=os.path.join(self.root_dir, "logs"),
                   SPARK_LOCAL_DIRS=os.path.join(self.root_dir, "local"),
                   PYSPARK_PYTHON=env.get("PYSPARK_PYTHON", sys.executable))
        return env

    def _spawn(self, name: str, args: list[str]) -> None:
        os.makedirs(os.path.join(self.root_dir, "logs"), exist_ok=True)
        log_path = os.path.join(self.root_dir, "logs", f"{name}.out")
        with open(log_path, "wb") as log:
            proc = subprocess.Popen([os.path.join(spark_home(), "bin", "spark-class"), *args], env=self._env(),
                                    stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                                    start_new_session=True, cwd=self.root_dir)
        self.daemons.append(_Daemon(name, proc, log_path))

    def start(self, timeout_s: float = 120.0) -> str:
        """Start the master, then the workers; return the master URL once every worker is ALIVE."""
        self.master_port, self.master_webui_port = _free_port(), _free_port()
        try:
            self._spawn("master", ["org.apache.spark.deploy.master.Master", "--host", LOOPBACK,
                                   "--port", str(self.master_port), "--webui-port", str(self.master_webui_port)])
            for i in range(self.workers):
                work = os.path.join(self.root_dir, f"worker-{i}")
                os.makedirs(work, exist_ok=True)
                self._spawn(f"worker-{i}", ["org.apache.spark.deploy.worker.Worker", "--host", LOOPBACK,
                                            "--port", str(_free_port()), "--webui-port", str(_free_port()),
                                            "--cores", str(self.cores), "--memory", self.memory,
                                            "--work-dir", work, self.master_url])
            self._wait_ready(timeout_s)
        except BaseException:
            self.stop()
            raise
        return self.master_url

    def state(self) -> dict:
        """The master's JSON status page (workers, cores, applications)."""
        with urllib.request.urlopen(f"http://{LOOPBACK}:{self.master_webui_port}/json/", timeout=2) as r:
            return json.loads(r.read().decode())

    def alive_workers(self) -> int:
        try:
            return int(self.state().get("aliveworkers", 0))
        except (OSError, ValueError):
            return 0

    def _wait_ready(self, timeout_s: float) -> None:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            for d in self.daemons:
                if d.proc.poll() is not None:
                    raise SparkStandaloneError(f"Spark {d.name} exited with {d.proc.returncode} while starting; "
                                               f"its output:\n{self._tail(d)}")
            if self.alive_workers() == self.workers:
                return
            time.sleep(0.25)
        raise SparkStandaloneError(f"{self.alive_workers()} of {self.workers} Spark workers registered with "
                                   f"{self.master_url} within {timeout_s:.0f} s; the master's output:\n"
                                   f"{self._tail(self.daemons[0])}")

    @staticmethod
    def _tail(d: _Daemon, lines: int = 20) -> str:
        try:
            with open(d.log_path, errors="replace") as f:
                return "".join(f.readlines()[-lines:])
        except OSError:
            return "(no output)"

    def stop(self) -> None:
        """SIGTERM each daemon's process group (workers first: their executors are children), then
        SIGKILL what is left after a grace period; the directory goes if this object made it."""
        for d in reversed(self.daemons):
            if d.proc.poll() is None:
                try:
                    os.killpg(d.proc.pid, signal.SIGTERM)
                except ProcessLookupError:
                    pass
        deadline = time.monotonic() + 10
        for d in reversed(self.daemons):
            try:
                d.proc.wait(max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                pass
            try:
                os.killpg(d.proc.pid, signal.SIGKILL)  # the group: executors a worker left behind
            except ProcessLookupError:
                pass
            d.proc.wait()
        self.daemons = []
        if self._own_root:
            shutil.rmtree(self.root_dir, ignore_errors=True)

    def __enter__(self) -> SparkStandalone:
        self.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stop()
