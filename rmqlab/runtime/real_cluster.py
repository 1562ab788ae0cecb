"""RealCluster: the process manager of the real runtime, and RealNemesis, its faults.

    cluster = RealCluster("/tmp/lab")                 # starts the relay thread and the manager's trace
    cluster.add_node("n0", [sys.executable, "-m", "rmqlab.runtime.real_pingpong", ...], ports=[20000])
    cluster.start_all()                               # one OS process per node; waits for each node.start
    cluster.nemesis.partition(["n0"], ["n1", "n2"])   # the fault API of rmqlab.runtime.nemesis
    cluster.nemesis.heal()
    cluster.nemesis.kill("n1"); cluster.nemesis.restart("n1"); cluster.wait_started("n1")
    cluster.at(5_000, cluster.nemesis.heal)           # or at a scheduled time (ms since the cluster began)
    cluster.merged_events()                           # merge_traces of the processes' files and the manager's
    cluster.close()                                   # SIGKILL what it started, by PID; stop the relay

Layout of `root_dir`:

    nemesis.jsonl                  the manager's trace: node.kill / crash / restart / suspend / resume
                                   about the nodes, fault.* by "nemesis"
    <node>/store/                  the node's store_dir: kept across restarts, cut back by crash()
    <node>/logs/<node>.log         the node's log (run_process), <node>.out its stdout and stderr
    <node>/trace/<node>.<k>.jsonl  the trace of incarnation k: each process writes a file of its own

Addresses. The i-th node added gets its own loopback address, `first_ip` + i (127.0.0.2, 127.0.0.3,
...), and binds its outgoing connections to it, so the relay (rmqlab.runtime.relay) knows who is
connecting. For each of a node's `ports`, the relay listens on (`listen_host`, port) — the address
peers dial — and forwards to the node's listener at (node IP, port). Every process is given the
whole map at spawn (`ClusterView` in the RMQLAB_CLUSTER variable), so all nodes are added before
the first one starts.

The faults, against the simulator's meaning (rmqlab.runtime.sim.simulation.SimNemesis):

  kill          SIGKILL. The kernel closes the sockets (peers read EOF, later writes meet a
                reset), the page cache keeps every write, connects are refused.
  crash         The relay silences the node's connections, then SIGKILL, then
                rmqlab.runtime.page_cache.crash_machine_disk: crash_machine on every store root
                (a directory holding a durability ledger) under its store dir: unflushed bytes are
                lost. Peers hear nothing, connects time out, until restart resets the old connections.
  restart       A new process from the same command line and store dir: incarnation k+1, a new
                trace file; returns at once (`wait_started` waits for its node.start). The node
                keeps its machine's clock (pause lag, or a pause still in force).
  suspend       SIGSTOP, returning once /proc shows the process stopped. Timers and input freeze
                for real; connections stay open; the kernel buffers what peers send.
  resume        SIGCONT.
  clock_pause   SIGUSR1: the node's RealNode clock stands still and its timers stop (see
  clock_resume  rmqlab.runtime.real for what is and is not paused); SIGUSR2 resumes it.
  partition, partition_one_way, ring, bridge, heal, set_loss, set_delay
                Knobs of the relay per directed link, with the simulator's meaning. `heal` removes
                partitions only, as on the simulator; loss and delay stay until set again (0).

Without the relay (`RealCluster(..., relay=False)`, what a benchmark wants: an operator runs no
relay) every node still gets its loopback address and binds its outgoing connections to it (the
peers' traces still name it), but listeners bind the address asked for and peers dial them
directly, so a broker's advertised brokerIP1:listenPort is where its clients connect. The process
faults (kill, crash, restart, stop, suspend, resume, clock_pause/resume) work as above, except that
a crash cannot be silent on the network: the kernel closes the dead process's connections as a
kill does (peers read EOF), and only the unflushed bytes are lost. The link faults (partition,
partition_one_way, ring, bridge, heal, set_loss, set_delay) raise RuntimeError saying the cluster
was built without the relay.

Every action is traced into the manager's trace, `node.*` events about the node and `fault.*`
events by "nemesis", with the same fields as the simulator's. A process's own events (its
node.start, node.stop, client operations, ...) are in its trace file; `merged_events` combines
them all with rmqlab.trace.merge_traces.

Processes are stopped by PID only: `close()` (also registered with atexit) kills the processes
this cluster started; a node process whose manager is gone stops by itself (run_process).
"""

from __future__ import annotations

import atexit
import ipaddress
import logging
import os
import random
import signal
import socket
import subprocess
import threading
import time
import warnings
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import rmqlab
from rmqlab.runtime.nemesis import Link, Nemesis
from rmqlab.runtime.page_cache import crash_machine_disk
from rmqlab.runtime.real import CLOCK_PAUSE_SIGNAL, CLOCK_RESUME_SIGNAL, ClockState, ClusterView, ProcessSettings
from rmqlab.runtime.relay import MAX_RETRIES, RTO_MS, Relay
from rmqlab.trace import TraceEvent, TraceWarning, Tracer, load_jsonl, merge_traces

log = logging.getLogger("rmqlab.real_cluster")

_POLL_S = 0.02
_PROJECT_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(rmqlab.__file__)))


LISTEN_PORTS_FROM = 10_000  # free_ports picks below the ephemeral range, from here


def _ephemeral_low() -> int | None:
    """Where the OS's ephemeral ports (outgoing connections, bind to 0) start; None when unknown."""
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
            return int(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        return None


# A port free_ports handed out stays claimed this long against every other caller of this machine:
# two processes looking for free ports at once (two test workers starting clusters) would otherwise
# both find the same one free before either server binds it. A claim is an abstract Unix socket
# (Linux; nothing on disk) named after the port, held by the claiming process until the claim is
# PORT_CLAIM_TTL_S old or the process exits.
PORT_CLAIM_TTL_S = 120.0
_claims: dict[int, tuple[socket.socket, float]] = {}
_claims_lock = threading.Lock()


def _claim_port(port: int) -> bool:
    """True if no process holds a live claim on `port`; it is this process's then."""
    now = time.monotonic()
    with _claims_lock:
        for held, (s, at) in list(_claims.items()):
            if now - at > PORT_CLAIM_TTL_S:
                s.close()
                del _claims[held]
        if port in _claims:
            return False
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            s.bind(f"\0rmqlab-port-claim-{port}")
        except OSError:  # another process holds it
            s.close()
            return False
        _claims[port] = (s, now)
        return True


def free_ports(n: int, host: str = "127.0.0.1") -> list[int]:
    """`n` distinct TCP ports free on `host` right now, all held until all are known.

    Taken below the ephemeral range when the OS says where it starts (Linux): a port found free
    there is not handed to some process's outgoing connection before the server that was given it
    binds it, as an ephemeral one can be (a broker of a freshly started cluster then failed to
    bind); and not one another caller of this machine was given in the last PORT_CLAIM_TTL_S.
    Elsewhere the OS picks them (bind to port 0)."""
    low = _ephemeral_low()
    socks: list[socket.socket] = []
    rng = random.SystemRandom()
    try:
        tries = 0
        while len(socks) < n:
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            port = rng.randrange(LISTEN_PORTS_FROM, low) if low and low > LISTEN_PORTS_FROM + 1000 and tries < 50 * n else 0
            try:
                s.bind((host, port))
            except OSError:
                s.close()
                tries += 1
                continue
            if port and not _claim_port(port):
                s.close()
                tries += 1
                continue
            socks.append(s)
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


def _check_loopback_address(ip: str) -> None:
    """RuntimeError unless this host can bind `ip` (Linux routes all of 127.0.0.0/8 to loopback)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        try:
            s.bind((ip, 0))
        except OSError as e:
            raise RuntimeError(f"cannot bind the node address {ip} ({e}): the real runtime gives each node a "
                               "loopback address of its own; on macOS add it first with "
                               f"`sudo ifconfig lo0 alias {ip}`") from None


def read_trace_file(path: str) -> list[TraceEvent]:
    """The events of a trace file that may still be written: an unfinished last line is left out."""
    try:
        with open(path, "rb") as f:
            if b"\n" not in f.read(1 << 16):
                return []  # not even the header yet
    except FileNotFoundError:
        return []
    with warnings.catch_warnings():
        # A live writer's last line is unfinished, not torn.
        warnings.simplefilter("ignore", TraceWarning)
        return load_jsonl(path).events


@dataclass
class _NodeProcess:
    name: str
    argv: list[str]
    ports: tuple[int, ...]
    ip: str
    env: dict[str, str]
    incarnation: int = -1                       # of the current (or last) process; -1: never started
    proc: subprocess.Popen | None = None
    out: Any = None                             # the file receiving stdout and stderr
    started: bool = False                       # its node.start was seen
    suspended: bool = False
    # The machine's clock, which a restart keeps: pauses completed, and the one in force.
    clock_lag_ms: float = 0.0
    clock_paused_at: float | None = None        # time.monotonic() at the pause
    clock_frozen_ms: float | None = None        # the node's now_ms at the pause
    trace_paths: list[str] = field(default_factory=list)


class RealCluster:
    """Runs each node as an OS process behind the fault-injecting relay (see module docstring).

    `relay`: False runs the processes without the fault relay (see the module docstring).
    `rto_ms` / `max_retries`: the relay's TCP constants for loss (the simulator's by default).
    `env`: extra environment for every process. `startup_timeout_s` bounds `start` / `wait_started`.
    """

    def __init__(self, root_dir: str, *, listen_host: str = "127.0.0.1", first_ip: str = "127.0.0.2",
                 rto_ms: float = RTO_MS, max_retries: int = MAX_RETRIES, env: Mapping[str, str] | None = None,
                 startup_timeout_s: float = 15.0, seed: int | None = None, relay: bool = True):
        self.root_dir = os.path.abspath(root_dir)
        os.makedirs(self.root_dir, exist_ok=True)
        self.listen_host = listen_host
        self._next_ip = ipaddress.ip_address(first_ip)
        self._rto_ms, self._max_retries, self._seed = rto_ms, max_retries, seed
        self.env = dict(env or {})
        self.startup_timeout_s = startup_timeout_s
        self.nodes: dict[str, _NodeProcess] = {}
        self.use_relay = relay
        self.relay: Relay | None = None
        self._prepared = False  # the addresses were checked (and the relay started): no more add_node
        self._lock = threading.RLock()
        self._timers: list[threading.Timer] = []
        self.errors: list[BaseException] = []  # exceptions of scheduled actions (`at`)
        self._t0 = time.monotonic()
        self.trace_path = os.path.join(self.root_dir, "nemesis.jsonl")
        self.tracer = Tracer(lambda: time.time() * 1000.0, jsonl_path=self.trace_path,
                             meta={"runtime": "real", "source": "nemesis"})
        self.nemesis = RealNemesis(self)
        self._closed = False
        atexit.register(self.close)

    # -- building the cluster ------------------------------------------------------------------
    def add_node(self, name: str, argv: Sequence[str], *, ports: Iterable[int] = (),
                 env: Mapping[str, str] | None = None) -> str:
        """Add a node: the command line of its process and the ports it listens on (relayed).
        Returns the node's loopback address."""
        with self._lock:
            if self._prepared:
                raise RuntimeError("add every node before the first start: each process gets the whole cluster map")
            if name in self.nodes or name == "nemesis":
                raise ValueError(f"node name {name!r} is taken")
            ip = str(self._next_ip)
            if not ipaddress.ip_address(ip).is_loopback:
                raise ValueError(f"no loopback address left for {name!r} ({ip})")
            self._next_ip += 1
            self.nodes[name] = _NodeProcess(name, list(argv), tuple(ports), ip, dict(env or {}))
            return ip

    def store_dir(self, name: str) -> str:
        return os.path.join(self.root_dir, name, "store")

    def logs_dir(self, name: str) -> str:
        return os.path.join(self.root_dir, name, "logs")

    def node_ip(self, name: str) -> str:
        return self._node(name).ip

    def view(self) -> ClusterView:
        listeners = {(self.listen_host, p): n.name for n in self.nodes.values() for p in n.ports}
        ips = {n.name: n.ip for n in self.nodes.values()}
        if self.use_relay:
            return ClusterView(ips=ips, relayed=listeners)
        return ClusterView(ips=ips, direct=listeners)

    def _node(self, name: str) -> _NodeProcess:
        try:
            return self.nodes[name]
        except KeyError:
            raise ValueError(f"unknown node {name!r} (nodes: {', '.join(self.nodes)})") from None

    def _prepare(self) -> None:
        """Before the first spawn: check the node addresses, start the relay if there is one."""
        if self._prepared:
            return
        for n in self.nodes.values():
            _check_loopback_address(n.ip)
        if self.use_relay:
            relay = Relay({n.name: n.ip for n in self.nodes.values()}, rto_ms=self._rto_ms,
                          max_retries=self._max_retries, seed=self._seed)
            try:
                for n in self.nodes.values():
                    for port in n.ports:
                        relay.add_listener(n.name, (self.listen_host, port), (n.ip, port))
            except BaseException:
                relay.close()
                raise
            self.relay = relay
        self._prepared = True

    # -- processes -----------------------------------------------------------------------------
    def _spawn(self, name: str) -> None:
        n = self._node(name)
        if self.alive(name):
            raise RuntimeError(f"{name} is running (pid {n.proc.pid})")
        self._prepare()
        n.incarnation += 1
        trace_dir = os.path.join(self.root_dir, name, "trace")
        os.makedirs(trace_dir, exist_ok=True)
        os.makedirs(self.logs_dir(name), exist_ok=True)
        trace_path = os.path.join(trace_dir, f"{name}.{n.incarnation}.jsonl")
        n.trace_paths.append(trace_path)
        if n.clock_paused_at is not None:
            clock = ClockState(n.clock_lag_ms + (time.monotonic() - n.clock_paused_at) * 1000.0, n.clock_frozen_ms)
        else:
            clock = ClockState(n.clock_lag_ms)
        settings = ProcessSettings(name=name, store_dir=self.store_dir(name), logs_dir=self.logs_dir(name),
                                   trace_path=trace_path, node_ip=n.ip, incarnation=n.incarnation,
                                   cluster=self.view(), clock=clock, manager_pid=os.getpid())
        env = dict(os.environ)
        env.update(self.env)
        env.update(n.env)
        env.update(settings.to_environ())
        # `python -m rmqlab...` works from a checkout that is not installed.
        env["PYTHONPATH"] = os.pathsep.join(p for p in (_PROJECT_ROOT, env.get("PYTHONPATH")) if p)
        if n.out is None:
            n.out = open(os.path.join(self.logs_dir(name), f"{name}.out"), "ab")
        n.out.write(f"--- incarnation {n.incarnation}: {' '.join(n.argv)}\n".encode())
        n.out.flush()
        n.started, n.suspended = False, False
        n.proc = subprocess.Popen(n.argv, env=env, stdin=subprocess.DEVNULL, stdout=n.out, stderr=subprocess.STDOUT,
                                  cwd=self.root_dir)

    def start(self, name: str, timeout_s: float | None = None) -> None:
        """Start a node's process and wait for its node.start."""
        with self._lock:
            self._spawn(name)
        self.wait_started(name, timeout_s)

    def start_all(self, timeout_s: float | None = None) -> None:
        """Start every node's process at once, then wait for all of them."""
        with self._lock:
            for name in self.nodes:
                if not self.alive(name):
                    self._spawn(name)
        for name in self.nodes:
            self.wait_started(name, timeout_s)

    def wait_started(self, name: str, timeout_s: float | None = None) -> None:
        """Wait until the node's current process has traced node.start; RuntimeError if it exits first."""
        n = self._node(name)
        if n.proc is None:
            raise RuntimeError(f"{name} was never started")
        deadline = time.monotonic() + (timeout_s or self.startup_timeout_s)
        path = n.trace_paths[-1]
        while not n.started:
            try:
                with open(path, "rb") as f:
                    n.started = b'"kind":"node.start"' in f.read()
            except FileNotFoundError:
                pass
            if n.started:
                break
            if n.proc.poll() is not None:
                raise RuntimeError(f"{name} exited with code {n.proc.returncode} before it started; "
                                   f"its output:\n{self._tail(name)}")
            if time.monotonic() > deadline:
                raise TimeoutError(f"{name} did not start within {timeout_s or self.startup_timeout_s} s; "
                                   f"its output:\n{self._tail(name)}")
            time.sleep(_POLL_S)

    def _tail(self, name: str, lines: int = 20) -> str:
        path = os.path.join(self.logs_dir(name), f"{name}.out")
        try:
            with open(path, "rb") as f:
                return b"\n".join(f.read().splitlines()[-lines:]).decode(errors="replace")
        except FileNotFoundError:
            return "(no output)"

    def alive(self, name: str) -> bool:
        n = self._node(name)
        return n.proc is not None and n.proc.poll() is None

    def pid(self, name: str) -> int | None:
        """The PID of the node's current process (None if it is not running)."""
        n = self._node(name)
        return n.proc.pid if self.alive(name) else None

    def stop(self, name: str, timeout_s: float = 10.0) -> int:
        """Clean shutdown (SIGTERM); returns the exit code. A suspended process is resumed to hear it."""
        with self._lock:
            n = self._node(name)
            if not self.alive(name):
                raise RuntimeError(f"{name} is not running")
            n.proc.send_signal(signal.SIGTERM)
            if n.suspended:
                n.proc.send_signal(signal.SIGCONT)
                n.suspended = False
        try:
            return n.proc.wait(timeout_s)
        except subprocess.TimeoutExpired:
            raise TimeoutError(f"{name} (pid {n.proc.pid}) did not stop within {timeout_s} s of SIGTERM") from None

    # -- time and scheduling -------------------------------------------------------------------
    def now_ms(self) -> float:
        """Milliseconds since the cluster was created (the time base of `at`)."""
        return (time.monotonic() - self._t0) * 1000.0

    def at(self, time_ms: float, action: Callable[[], Any]) -> threading.Timer:
        """Run `action()` at `time_ms` after the cluster was created (now, if that is past), on a
        timer thread. An exception is logged, traced and kept in `errors`. Returns the timer."""

        def run() -> None:
            try:
                action()
            except BaseException as e:  # a fault schedule must not die silently on its thread
                self.errors.append(e)
                log.exception("scheduled action %r failed", action)
                if not self._closed:
                    self.tracer.emit("nemesis", "log", level="ERROR", message=f"scheduled action failed: {e!r}")

        timer = threading.Timer(max(0.0, time_ms - self.now_ms()) / 1000.0, run)
        timer.daemon = True
        with self._lock:
            self._timers.append(timer)
        timer.start()
        return timer

    # -- traces ----------------------------------------------------------------------------------
    def trace_files(self) -> dict[str, str]:
        """Source name -> trace file: "nemesis", then "<node>.<incarnation>" for every process."""
        files = {"nemesis": self.trace_path}
        for n in self.nodes.values():
            for k, path in enumerate(n.trace_paths):
                files[f"{n.name}.{k}"] = path
        return files

    def events(self, name: str, incarnation: int | None = None) -> list[TraceEvent]:
        """The events a node's processes traced, incarnation after incarnation (or of one)."""
        paths = self._node(name).trace_paths
        if incarnation is not None:
            paths = paths[incarnation:incarnation + 1]
        return [e for path in paths for e in read_trace_file(path)]

    def manager_events(self) -> list[TraceEvent]:
        return list(self.tracer.events)

    def merged_events(self) -> list[TraceEvent]:
        """One trace: the manager's and every process's, by merge_traces (sources as in trace_files)."""
        files = self.trace_files()
        traces = [self.manager_events() if src == "nemesis" else read_trace_file(path) for src, path in files.items()]
        return merge_traces(traces, sources=list(files))

    # -- closing ---------------------------------------------------------------------------------
    def close(self) -> None:
        """SIGKILL every process this cluster started (by PID), stop the relay, close the trace. Idempotent."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            for timer in self._timers:
                timer.cancel()
            for n in self.nodes.values():
                if n.proc is not None and n.proc.poll() is None:
                    n.proc.kill()
                if n.proc is not None:
                    try:
                        n.proc.wait(10)
                    except subprocess.TimeoutExpired:
                        log.error("%s (pid %d) survived SIGKILL for 10 s", n.name, n.proc.pid)
                if n.out is not None:
                    n.out.close()
                    n.out = None
            if self.relay is not None:
                self.relay.close()
            self.tracer.close()
        atexit.unregister(self.close)

    def __enter__(self) -> RealCluster:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _process_state(pid: int) -> str | None:
    """The state letter of /proc/<pid>/stat (R, S, T, ...), or None where /proc is not available."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            stat = f.read()
    except OSError:
        return None
    # "pid (comm) state ...": comm may hold spaces and parentheses; the state follows the last ")".
    return stat[stat.rindex(b")") + 2:stat.rindex(b")") + 3].decode()


class RealNemesis(Nemesis):
    """The fault API on OS processes and the relay (the table in the module docstring)."""

    def __init__(self, cluster: RealCluster):
        self.cluster = cluster

    def node_names(self) -> list[str]:
        return list(self.cluster.nodes)

    def _emit(self, kind: str, **fields: Any) -> None:
        """A fault.* event, by the injector."""
        self.cluster.tracer.emit("nemesis", kind, **fields)

    def _about(self, node: str, kind: str, **fields: Any) -> None:
        """A node.* event: `node` is the node it is about (rmqlab.trace.kinds)."""
        self.cluster.tracer.emit(node, kind, **fields)

    def _running(self, name: str) -> _NodeProcess:
        n = self.cluster._node(name)
        if not self.cluster.alive(name):
            raise RuntimeError(f"{name} is not running")
        return n

    def _relay(self) -> Relay:
        if not self.cluster.use_relay:
            raise RuntimeError("this cluster was built without the fault relay (RealCluster(relay=False)): "
                               "its processes connect directly, so link faults (partition, loss, delay, heal) "
                               "are not available; kill, crash, restart, stop and suspend are")
        if self.cluster.relay is None:
            raise RuntimeError("the cluster has not started yet")
        return self.cluster.relay

    # -- processes and machines --------------------------------------------------------------
    def kill(self, node: str) -> None:
        with self.cluster._lock:
            n = self._running(node)
            pid = n.proc.pid
            n.proc.send_signal(signal.SIGKILL)
            self._about(node, "node.kill", pid=pid, signal=int(signal.SIGKILL))
            n.proc.wait(10)  # gone: the kernel has closed its sockets
            n.suspended = False

    def crash(self, node: str, torn_bytes=None) -> None:
        with self.cluster._lock:
            n = self._running(node)
            if self.cluster.use_relay:  # without it the kernel's FINs reach the peers, as on a kill
                self._relay().node_down(node)  # first: the dying process's FINs must go nowhere
            n.proc.send_signal(signal.SIGKILL)
            n.proc.wait(10)
            n.suspended = False
            lost = crash_machine_disk(self.cluster.store_dir(node), torn_bytes)
            self._about(node, "node.crash", lost_bytes=lost, torn=torn_bytes is not None)

    def restart(self, node: str) -> None:
        with self.cluster._lock:
            n = self.cluster._node(node)
            if self.cluster.alive(node):
                raise RuntimeError(f"{node} is running; kill, crash or stop it first")
            if n.proc is None:
                raise RuntimeError(f"{node} was never started; use RealCluster.start")
            if self.cluster.use_relay:
                self._relay().node_up(node)  # after a machine crash, the old connections are reset
            self._about(node, "node.restart", incarnation=n.incarnation + 1)
            self.cluster._spawn(node)

    def suspend(self, node: str) -> None:
        with self.cluster._lock:
            n = self._running(node)
            n.proc.send_signal(signal.SIGSTOP)
            deadline = time.monotonic() + 2.0
            while _process_state(n.proc.pid) not in ("T", None) and time.monotonic() < deadline:
                time.sleep(0.001)
            n.suspended = True
            self._about(node, "node.suspend", pid=n.proc.pid)

    def resume(self, node: str) -> None:
        with self.cluster._lock:
            n = self._running(node)
            # Traced first: in the merged trace, node.resume precedes whatever the process does next.
            self._about(node, "node.resume", pid=n.proc.pid)
            n.proc.send_signal(signal.SIGCONT)
            n.suspended = False

    def clock_pause(self, node: str) -> None:
        self.cluster.wait_started(node)  # the signal handlers are installed before node.start
        with self.cluster._lock:
            n = self._running(node)
            if n.clock_paused_at is None:
                n.proc.send_signal(CLOCK_PAUSE_SIGNAL)
                n.clock_paused_at = time.monotonic()
                n.clock_frozen_ms = time.time() * 1000.0 - n.clock_lag_ms
            self._emit("fault.clock", target=node, action="pause")

    def clock_resume(self, node: str) -> None:
        self.cluster.wait_started(node)
        with self.cluster._lock:
            n = self._running(node)
            if n.clock_paused_at is not None:
                n.proc.send_signal(CLOCK_RESUME_SIGNAL)
                n.clock_lag_ms += (time.monotonic() - n.clock_paused_at) * 1000.0
                n.clock_paused_at = n.clock_frozen_ms = None
            self._emit("fault.clock", target=node, action="resume")

    # -- network ---------------------------------------------------------------------------------
    def _block(self, links: list[Link], shape: str, detail: dict) -> None:
        self._relay().block(links)
        self._emit("fault.partition", groups=detail.pop("groups"), shape=shape,
                   links=[list(link) for link in links], **detail)

    def heal(self) -> None:
        self._relay().heal()
        self._emit("fault.heal", fault="partition")

    def set_loss(self, srcs: Iterable[str], dsts: Iterable[str], p: float) -> None:
        srcs, dsts = sorted(srcs), sorted(dsts)
        links = [(s, d) for s in srcs for d in dsts if s != d]
        self._relay().set_loss(links, p)
        self._emit("fault.loss", rate=p, links=[list(link) for link in links])

    def set_delay(self, srcs: Iterable[str], dsts: Iterable[str], lo_ms: float, hi_ms: float) -> None:
        srcs, dsts = sorted(srcs), sorted(dsts)
        links = [(s, d) for s in srcs for d in dsts if s != d]
        self._relay().set_latency(links, lo_ms, hi_ms)
        self._emit("fault.delay", delay_ms=lo_ms, jitter_ms=hi_ms - lo_ms, links=[list(link) for link in links])
