"""The real runtime: Node on asyncio, TCP sockets and the wall clock.

Several nodes can share one process (tests), or `run_process` runs one component as its own OS
process the way RocketMQ's scripts do:

* logs: `<logs_dir>/<log_name>.log`, named after the instance (`rmqlab namesrv` writes
  namesrv-9876.log: RocketMQ's logs are per process, ~/logs/rocketmqlogs/namesrv.log, and two
  instances on one machine must not share a file), rolled over at 16 MiB into namesrv-9876.log.1
  ... .4 (LOG_MAX_BYTES says why). The file is opened once the component has
  started, and held with an advisory lock: a second live process of the same name writes
  `<log_name>-<pid>.log` instead. The boot-success line goes to the log and to stdout ("The
  PingPong node n0 boot success. ...", like "The broker[...] boot success");
* a failed start writes no log file: the cause goes to stderr, which the operator sees (a port
  taken: "rmqlab namesrv: cannot listen on 127.0.0.1:9876: address already in use"), and the
  process exits with code 1;
* clean shutdown on SIGTERM or SIGINT: the component's `shutdown()`, then the node's tasks are
  cancelled, a `node.stop` event is traced and the process exits with code 0;
* the trace: with a `trace_path`, every event is appended to that JSONL file, the lines of one
  event-loop iteration with one write at the start of the next (a buffered
  `rmqlab.trace.jsonl.JsonlWriter`: a SIGKILL loses at most the events of the iteration it
  interrupts; a clean shutdown loses nothing).

Inside a RealCluster (rmqlab.runtime.real_cluster) the process manager describes the node to its
process through RMQLAB_* environment variables (`ProcessSettings`): its name, directories, trace
file, incarnation, its own loopback address and the cluster map (`ClusterView`). With those:

* **source address**: connections to a loopback host are bound to the node's own loopback IP
  (127.0.0.2, 127.0.0.3, ...), so the fault-injecting relay (rmqlab.runtime.relay) knows which node
  is connecting from the peer address alone — no root needed;
* **listeners**: a listener on one of the node's relayed ports binds (node IP, port) instead of the
  address asked for; the relay listens on the asked ("public") address the peers dial;
* **connects** to a relayed address wait for the relay's handshake byte: no byte in time is a
  TimeoutError (a partition, a crashed machine), the relay closing first is ConnectionRefusedError
  (nothing listens behind it) — the simulator's meaning of a connect.

The node's clock. `now_ms()` is the wall clock minus the time this node's clock spent paused;
`monotonic_s()` the same on the monotonic clock (for libraries that read one). The node keeps its
own timers (like SimNode), so `clock_pause()` can freeze them. In a process, SIGUSR1 pauses the
clock and SIGUSR2 resumes it (a real process's clock cannot be paused without root). While
paused:

* paused: `now_ms()` and `monotonic_s()` stand still; no `call_later` timer fires, so `sleep()`
  does not return and periodic tasks stop; on resume the clock continues from where it stopped
  (the skew remains) and timers fire when the node's clock reaches their deadline;
* not paused: network I/O (the node still serves requests), connect timeouts (they run on the
  event loop's clock, as on the simulator where the network, not the node, times a connect), the
  trace's timestamps (the observer's clock), and any code reading `time` directly.

A pause and a resume are traced by the node as `log` events with its `now_ms` and its total
`lag_ms`, so checkers can see the node's own time.

The event loop of a process (`run_process`, `run_loop`) is uvloop's (libuv) when uvloop is
installed, else asyncio's own: the same asyncio code (streams, tasks, signal handlers) at a
fraction of the loop's cost per callback and per socket operation, which a node pays several
times per message. `RMQLAB_EVENT_LOOP=asyncio` picks asyncio's loop (to compare, or for asyncio's
debug mode). uvloop times in whole milliseconds, so a node timer on it is armed for its delay
rounded up (`_CoarseNodeTimer`): like on asyncio's loop it fires at the first millisecond tick at
or after its deadline. Nodes that share a caller's loop (tests, notebooks) run on whatever loop
that is.
"""

from __future__ import annotations

import asyncio
import ipaddress
import json
import logging
import logging.handlers
import math
import os
import random
import signal
import sys
import time
from collections.abc import Callable, Coroutine, Mapping
from dataclasses import dataclass, field
from typing import Any, TypeVar

from rmqlab.runtime.component import Component
from rmqlab.runtime.node import ConnectionHandler, Listener, Node, Timer
from rmqlab.runtime.node_timer import NodeTimer
from rmqlab.runtime.relay import HANDSHAKE
from rmqlab.trace import Tracer

# The environment a RealCluster gives each node process (see ProcessSettings).
ENV_NODE = "RMQLAB_NODE"
ENV_NODE_IP = "RMQLAB_NODE_IP"
ENV_STORE_DIR = "RMQLAB_STORE_DIR"
ENV_LOGS_DIR = "RMQLAB_LOGS_DIR"
ENV_TRACE = "RMQLAB_TRACE"
ENV_INCARNATION = "RMQLAB_INCARNATION"
ENV_CLUSTER = "RMQLAB_CLUSTER"
ENV_CLOCK = "RMQLAB_CLOCK"
ENV_MANAGER_PID = "RMQLAB_MANAGER_PID"
ENV_EVENT_LOOP = "RMQLAB_EVENT_LOOP"  # "asyncio" or "uvloop" (the default, when installed)

CLOCK_PAUSE_SIGNAL = signal.SIGUSR1
CLOCK_RESUME_SIGNAL = signal.SIGUSR2
_ORPHAN_CHECK_S = 0.5


@dataclass(frozen=True)
class ClusterView:
    """What a node knows of its RealCluster: each node's loopback IP (the source address of its
    connections), which public listen addresses the relay serves for which node, and, in a
    cluster without the relay, which node listens where itself (`direct`: only to name peers)."""

    ips: Mapping[str, str] = field(default_factory=dict)                  # node -> its loopback IP
    relayed: Mapping[tuple[str, int], str] = field(default_factory=dict)  # (host, port) -> node behind it
    direct: Mapping[tuple[str, int], str] = field(default_factory=dict)   # (host, port) -> node listening there

    def node_of_ip(self, ip: str) -> str | None:
        for name, node_ip in self.ips.items():
            if node_ip == ip:
                return name
        return None

    def to_json(self) -> str:
        return json.dumps({"ips": dict(self.ips),
                           "relayed": [[host, port, node] for (host, port), node in sorted(self.relayed.items())],
                           "direct": [[host, port, node] for (host, port), node in sorted(self.direct.items())]},
                          sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> ClusterView:
        data = json.loads(text)
        return cls(ips=dict(data["ips"]), relayed={(h, int(p)): n for h, p, n in data["relayed"]},
                   direct={(h, int(p)): n for h, p, n in data.get("direct", [])})


@dataclass(frozen=True)
class ClockState:
    """A node's clock relative to the wall clock: `lag_ms` spent paused, and the reading it is
    frozen at while paused (None when running). A restarted process keeps its machine's clock."""

    lag_ms: float = 0.0
    frozen_ms: float | None = None

    def to_json(self) -> str:
        return json.dumps({"lag_ms": self.lag_ms, "frozen_ms": self.frozen_ms})

    @classmethod
    def from_json(cls, text: str) -> ClockState:
        data = json.loads(text)
        return cls(float(data["lag_ms"]), None if data["frozen_ms"] is None else float(data["frozen_ms"]))


@dataclass(frozen=True)
class ProcessSettings:
    """How a process manager describes a node to its process (the RMQLAB_* environment)."""

    name: str | None = None
    store_dir: str | None = None
    logs_dir: str | None = None
    trace_path: str | None = None
    node_ip: str | None = None
    incarnation: int = 0
    cluster: ClusterView | None = None
    clock: ClockState = ClockState()
    manager_pid: int | None = None

    def to_environ(self) -> dict[str, str]:
        env = {ENV_INCARNATION: str(self.incarnation), ENV_CLOCK: self.clock.to_json()}
        for key, value in ((ENV_NODE, self.name), (ENV_STORE_DIR, self.store_dir), (ENV_LOGS_DIR, self.logs_dir),
                           (ENV_TRACE, self.trace_path), (ENV_NODE_IP, self.node_ip)):
            if value is not None:
                env[key] = value
        if self.cluster is not None:
            env[ENV_CLUSTER] = self.cluster.to_json()
        if self.manager_pid is not None:
            env[ENV_MANAGER_PID] = str(self.manager_pid)
        return env

    @classmethod
    def from_environ(cls, environ: Mapping[str, str] = os.environ) -> ProcessSettings:
        cluster = environ.get(ENV_CLUSTER)
        clock = environ.get(ENV_CLOCK)
        manager = environ.get(ENV_MANAGER_PID)
        return cls(name=environ.get(ENV_NODE), store_dir=environ.get(ENV_STORE_DIR),
                   logs_dir=environ.get(ENV_LOGS_DIR), trace_path=environ.get(ENV_TRACE),
                   node_ip=environ.get(ENV_NODE_IP), incarnation=int(environ.get(ENV_INCARNATION, "0")),
                   cluster=ClusterView.from_json(cluster) if cluster else None,
                   clock=ClockState.from_json(clock) if clock else ClockState(),
                   manager_pid=int(manager) if manager else None)


def _is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


class ListenError(OSError):
    """A listener could not bind (host, port): the address, and why, in the message. An OSError
    with the bind's errno, so callers that catch OSError still do."""

    def __init__(self, host: str, port: int, cause: OSError):
        reason = os.strerror(cause.errno).lower() if cause.errno else str(cause)
        super().__init__(cause.errno, f"cannot listen on {host}:{port}: {reason}")
        self.host, self.port = host, port

    def __str__(self) -> str:
        return self.strerror


def bind_error(host: str, port: int) -> ListenError:
    """Why (host, port) cannot be bound, for a library that reports a failed bind without its
    cause (grpcio, pysyncobj): bind a plain socket there and keep the OSError it raises."""
    import socket

    try:
        with socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET) as probe:
            probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            probe.bind((host, port))
    except OSError as e:
        return ListenError(host, port, e)
    return ListenError(host, port, OSError(0, "the server library could not bind it"))


_T = TypeVar("_T")


def event_loop_factory() -> Callable[[], asyncio.AbstractEventLoop]:
    """How a real process makes its event loop: uvloop's when it is installed (see the module
    docstring) unless $RMQLAB_EVENT_LOOP is "asyncio"."""
    choice = os.environ.get(ENV_EVENT_LOOP, "") or "uvloop"
    if choice not in ("uvloop", "asyncio"):
        raise ValueError(f"${ENV_EVENT_LOOP} must be uvloop or asyncio, not {choice!r}")
    if choice == "uvloop":
        try:
            import uvloop
        except ImportError:  # an install without it runs on asyncio's loop, only slower
            pass
        else:
            return uvloop.new_event_loop
    return asyncio.new_event_loop


def run_loop(main: Coroutine[Any, Any, _T]) -> _T:
    """``asyncio.run(main)`` on a loop from `event_loop_factory`."""
    with asyncio.Runner(loop_factory=event_loop_factory()) as runner:
        return runner.run(main)


class _CoarseNodeTimer(NodeTimer):
    """A node timer on a loop that times in whole milliseconds: uvloop rounds a delay to the
    nearest millisecond of libuv's millisecond clock (``uv_now``), so a timer fires up to ~1.5 ms
    early, and one due in under half a millisecond runs at once (``call_soon``). NodeTimer re-arms
    an early timer for the rest, which would then spin the loop until due. Rounded up to whole
    milliseconds (at least 1), an early timer waits for the clock's next millisecond instead:
    it fires at the first millisecond tick at or after its deadline, as asyncio's loop does (its
    epoll timeout is whole milliseconds, rounded up)."""

    def arm(self) -> None:
        delay_ms = self.deadline_ms - self.clock_ms()
        self.handle = self.loop.call_later(math.ceil(delay_ms) / 1000.0 if delay_ms > 0 else 0.0, self._fire)


_COARSE_LOOPS: dict[type, bool] = {}  # loop class -> whether it times in whole milliseconds


def _timer_class(loop: asyncio.AbstractEventLoop) -> type[NodeTimer]:
    coarse = _COARSE_LOOPS.get(type(loop))
    if coarse is None:
        coarse = _COARSE_LOOPS[type(loop)] = type(loop).__module__.split(".")[0] == "uvloop"
    return _CoarseNodeTimer if coarse else NodeTimer


class _ServerListener:
    def __init__(self, server: asyncio.base_events.Server):
        self._server = server
        self.port = server.sockets[0].getsockname()[1]

    def close(self) -> None:
        self._server.close()


class RealNode(Node):
    def __init__(self, name: str, store_dir: str, *, tracer: Tracer | None = None, seed: int | None = None,
                 node_ip: str | None = None, cluster: ClusterView | None = None, incarnation: int = 0,
                 clock: ClockState = ClockState()):
        self.name = name
        self.store_dir = store_dir
        self.node_ip = node_ip
        self.cluster = cluster or ClusterView()
        self.incarnation = incarnation
        # Seeded when asked (repeatable client choices in tests); else from the OS, like Java.
        self.random = random.Random(seed if seed is not None else os.urandom(16))
        self.log = logging.getLogger(f"rmqlab.{name}")
        self.tracer = tracer or Tracer(lambda: time.time() * 1000.0)
        self._tasks: set[asyncio.Task] = set()
        self._listeners: list[_ServerListener] = []
        self._timers: dict[int, NodeTimer] = {}
        # The clock: wall (and monotonic) time minus the time spent paused; frozen while paused.
        self._lag_ms = clock.lag_ms
        self._frozen_wall_ms: float | None = None
        self._frozen_mono_ms: float | None = None
        self._paused_since: float | None = None  # time.monotonic() when the clock stopped
        if clock.frozen_ms is not None:
            self._paused_since = time.monotonic()
            self._frozen_wall_ms = clock.frozen_ms
            self._frozen_mono_ms = time.monotonic() * 1000.0 - clock.lag_ms
        relayed_ports = {port for (_host, port), node in self.cluster.relayed.items() if node == name}
        self._private_ports = relayed_ports if node_ip else set()
        # Set by run_process: how Node.exit stops this process (None: no process runs this node).
        self.exit_handler: Callable[[str], None] | None = None

    # -- clock -------------------------------------------------------------------------------
    def now_ms(self) -> int:
        if self._frozen_wall_ms is not None:
            return int(self._frozen_wall_ms)
        return int(time.time() * 1000.0 - self._lag_ms)

    def _monotonic_ms(self) -> float:
        if self._frozen_mono_ms is not None:
            return self._frozen_mono_ms
        return time.monotonic() * 1000.0 - self._lag_ms

    def monotonic_s(self) -> float:
        """The node's monotonic clock in seconds (stands still while its clock is paused)."""
        return self._monotonic_ms() / 1000.0

    @property
    def clock_paused(self) -> bool:
        return self._paused_since is not None

    def call_later(self, delay_ms: float, callback: Callable[..., Any], *args: Any) -> Timer:
        loop = asyncio.get_running_loop()
        timer = _timer_class(loop)(self._monotonic_ms, self._timers, loop, self._monotonic_ms() + max(0.0, delay_ms),
                                   callback, args)
        self._timers[id(timer)] = timer
        if not self.clock_paused:
            timer.arm()
        return timer

    def clock_pause(self) -> None:
        """Stop this node's clock and its timers (see module docstring for what keeps running)."""
        if self.clock_paused:
            return
        self._frozen_wall_ms = time.time() * 1000.0 - self._lag_ms
        self._frozen_mono_ms = time.monotonic() * 1000.0 - self._lag_ms
        self._paused_since = time.monotonic()
        for t in self._timers.values():
            if t.handle is not None:
                t.handle.cancel()
                t.handle = None
        self.trace("log", level="INFO", message="clock paused", now_ms=self.now_ms(), lag_ms=round(self._lag_ms, 3))

    def clock_resume(self) -> None:
        """Let the clock run again from where it stopped; due timers fire as it reaches them."""
        if not self.clock_paused:
            return
        frozen = self.now_ms()
        self._lag_ms += (time.monotonic() - self._paused_since) * 1000.0
        self._paused_since = self._frozen_wall_ms = self._frozen_mono_ms = None
        for t in sorted(self._timers.values(), key=lambda t: t.deadline_ms):
            if t.handle is None:
                t.arm()
        self.trace("log", level="INFO", message="clock resumed", now_ms=frozen, lag_ms=round(self._lag_ms, 3))

    # -- tasks -------------------------------------------------------------------------------
    def spawn(self, coro: Coroutine[Any, Any, Any], name: str | None = None) -> asyncio.Task:
        task = asyncio.get_running_loop().create_task(coro, name=name)
        self._tasks.add(task)
        task.add_done_callback(self._task_done)
        return task

    def _task_done(self, task: asyncio.Task) -> None:
        self._tasks.discard(task)
        # A failed task would otherwise vanish silently until garbage collection.
        if not task.cancelled() and task.exception() is not None:
            exc = task.exception()
            self.log.error("%s: task %s failed: %r", self.name, task.get_name(), exc)
            self.trace("log", level="ERROR", message=f"task {task.get_name()} failed: {exc!r}")

    # -- network -----------------------------------------------------------------------------
    def _peer_name(self, host: str, port: int) -> str:
        return self.cluster.node_of_ip(host) or f"{host}:{port}"

    async def listen(self, host: str, port: int, handler: ConnectionHandler) -> Listener:
        def on_connect(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            peer = writer.get_extra_info("peername")
            self.trace("net.accept", peer=self._peer_name(*peer[:2]) if peer else "?", local=f"{host}:{port}")
            # A node task (Node.listen): cancelled with the node's other tasks on close.
            self.spawn(handler(reader, writer), name=f"{self.name} accept {host}:{port}")

        # Behind the relay: bind the private address; the relay serves (host, port) to the peers.
        bind_host = self.node_ip if port in self._private_ports else host
        try:
            server = await asyncio.start_server(on_connect, bind_host, port)
        except OSError as e:  # asyncio's message buries the address in a tuple
            raise ListenError(bind_host, port, e) from e
        listener = _ServerListener(server)
        self._listeners.append(listener)
        return listener

    async def connect(self, host: str, port: int, timeout_ms: float = 3000) -> tuple[asyncio.StreamReader, Any]:
        key = ("127.0.0.1" if host == "localhost" else host, port)
        behind = self.cluster.relayed.get(key)
        local_addr = (self.node_ip, 0) if self.node_ip and _is_loopback(host) else None

        async def open_() -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
            if behind is None:
                return await asyncio.open_connection(host, port, local_addr=local_addr)
            try:
                reader, writer = await asyncio.open_connection(host, port, local_addr=local_addr)
            except ConnectionResetError:  # the relay's RST came before the connect completed
                raise ConnectionRefusedError(f"{self.name}: connect to {host}:{port} ({behind}) refused") from None
            try:
                first = await reader.read(len(HANDSHAKE))
            except (ConnectionError, OSError):
                first = b""
            except BaseException:  # cancelled by the timeout: drop the half-open connection
                writer.transport.abort()
                raise
            if first != HANDSHAKE:
                writer.transport.abort()
                raise ConnectionRefusedError(f"{self.name}: connect to {host}:{port} ({behind}) refused")
            return reader, writer

        try:
            reader, writer = await asyncio.wait_for(open_(), timeout_ms / 1000.0)
        except TimeoutError:
            raise TimeoutError(f"{self.name}: connect to {host}:{port} timed out after {timeout_ms:.0f} ms") from None
        local = writer.get_extra_info("sockname")
        peer = behind or self.cluster.direct.get(key) or f"{host}:{port}"
        self.trace("net.connect", peer=peer, local=f"{local[0]}:{local[1]}")
        return reader, writer

    def exit(self, reason: str = "finished") -> None:
        if self.exit_handler is None:
            raise RuntimeError(f"node {self.name}: exit() needs a process runner (run_process) to stop it")
        self.exit_handler(reason)

    def trace(self, kind: str, **fields: Any) -> None:
        self.tracer.emit(self.name, kind, **fields)

    async def close(self) -> None:
        """Stop listening, stop the timers and cancel this node's tasks (after the component's shutdown)."""
        for listener in self._listeners:
            listener.close()
        for t in list(self._timers.values()):
            t.cancel()
        tasks = [t for t in self._tasks if t is not asyncio.current_task()]
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)


class _StartupBuffer(logging.Handler):
    """Holds the log records of a start until it succeeds: a start that fails opens no log file,
    so it cannot write into the log of a running instance of the same name."""

    def __init__(self) -> None:
        super().__init__()
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


# Log rotation. RocketMQ's rmq.namesrv.logback.xml rolls each log at 100 MB into 5 older files and
# rmq.broker.logback.xml at 100-128 MB into 10 (SizeBasedTriggeringPolicy, FixedWindowRollingPolicy);
# a lab machine or a Binder pod has less disk, so a log here rolls at 16 MiB and keeps 4 older
# files: at most 80 MiB per process, whatever a client makes it log.
LOG_MAX_BYTES = 16 * 1024 * 1024
LOG_BACKUP_COUNT = 4


class _LockedRotatingFileHandler(logging.handlers.RotatingFileHandler):
    """A RotatingFileHandler whose current file stays flock-ed by this process (see _open_log):
    the lock is taken again on the new file after each roll-over."""

    def doRollover(self) -> None:
        super().doRollover()
        if self.stream is not None:
            _try_lock(self.stream)


def _try_lock(stream: Any) -> bool:
    import fcntl

    try:
        fcntl.flock(stream.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return False
    return True


def _open_log(logs_dir: str, log_name: str) -> tuple[logging.FileHandler, str]:
    """A handler on `<log_name>.log`, locked (flock) for as long as this process runs; if a live
    process holds that lock, on `<log_name>-<pid>.log`. The lock dies with the process. The file
    rolls over at LOG_MAX_BYTES into `<log_name>.log.1` ... `.4` (LOG_BACKUP_COUNT)."""
    def handler_on(path: str) -> logging.handlers.RotatingFileHandler:
        return _LockedRotatingFileHandler(path, maxBytes=LOG_MAX_BYTES, backupCount=LOG_BACKUP_COUNT)

    path = os.path.join(logs_dir, f"{log_name}.log")
    handler = handler_on(path)
    if not _try_lock(handler.stream):
        handler.close()
        path = os.path.join(logs_dir, f"{log_name}-{os.getpid()}.log")
        handler = handler_on(path)
        _try_lock(handler.stream)
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s - %(message)s"))
    return handler, path


def run_process(component: Component, name: str | None = None, *, store_dir: str | None = None,
                logs_dir: str | None = None, boot_line: Callable[[], str], trace_path: str | None = None,
                role: str | None = None, log_name: str | None = None) -> int:
    """Run `component` as this OS process until SIGTERM/SIGINT; returns the exit code.

    Arguments left out come from the RMQLAB_* environment a RealCluster sets (`ProcessSettings`);
    the node's IP, cluster map, incarnation and clock come only from there. SIGUSR1 / SIGUSR2
    pause / resume the node's clock. A process whose manager is gone (it was re-parented) stops
    cleanly instead of running on as an orphan.

    `role` is the command that runs it (namesrv, broker, ...: how stderr names the process, with
    the node's name when that differs); `log_name` names the log file (default: the node's name).
    A start that fails prints its cause to stderr and returns 1, without opening the log file.
    """
    settings = ProcessSettings.from_environ()
    name = name or settings.name
    store_dir = store_dir or settings.store_dir
    logs_dir = logs_dir or settings.logs_dir
    trace_path = trace_path or settings.trace_path
    missing = [what for what, value in (("name", name), ("store_dir", store_dir), ("logs_dir", logs_dir)) if not value]
    if missing:
        raise ValueError(f"run_process: {', '.join(missing)} not given (nor set in the RMQLAB_* environment)")
    who = f"rmqlab {role} ({name})" if role and role != name else f"rmqlab {role or name}"
    os.makedirs(store_dir, exist_ok=True)
    buffer = _StartupBuffer()
    root = logging.getLogger("rmqlab")
    root.addHandler(buffer)
    root.setLevel(logging.INFO)
    handlers: list[logging.Handler] = [buffer]
    meta = {"runtime": "real", "source": f"{name}.{settings.incarnation}"}
    # A server process runs for days and traces every frame it reads and writes; its trace is the
    # JSONL file (when it has one) and the subscribers. Kept in memory, the events grew by each
    # frame's header for as long as the process ran (a fuzzed name server: 66 -> 299 MB in 360,000
    # frames), so the tracer keeps none.
    tracer = Tracer(lambda: time.time() * 1000.0, jsonl_path=trace_path, meta=meta, buffered=True, keep=False) \
        if trace_path else Tracer(lambda: time.time() * 1000.0, keep=False)
    node = RealNode(name, store_dir, tracer=tracer, node_ip=settings.node_ip, cluster=settings.cluster,
                    incarnation=settings.incarnation, clock=settings.clock)
    started = False

    def open_log() -> None:
        """Started: the buffered records go to the instance's own log file, and from now on all."""
        os.makedirs(logs_dir, exist_ok=True)
        handler, _path = _open_log(logs_dir, log_name or name)
        for record in buffer.records:
            handler.handle(record)
        root.addHandler(handler)
        root.removeHandler(buffer)
        handlers.append(handler)

    async def main() -> int:
        nonlocal started
        stop = asyncio.Event()
        why: list[str] = []
        loop = asyncio.get_running_loop()

        def on_signal(sig: signal.Signals) -> None:
            why.append(sig.name)
            stop.set()

        def on_exit(reason: str) -> None:  # Node.exit: the component is done
            why.append(reason)
            stop.set()

        node.exit_handler = on_exit

        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, on_signal, sig)
        loop.add_signal_handler(CLOCK_PAUSE_SIGNAL, node.clock_pause)
        loop.add_signal_handler(CLOCK_RESUME_SIGNAL, node.clock_resume)

        def check_orphan() -> None:
            if os.getppid() != settings.manager_pid:
                why.append("manager gone")
                stop.set()
            else:
                loop.call_later(_ORPHAN_CHECK_S, check_orphan)

        if settings.manager_pid is not None:
            check_orphan()
        await component.start(node)
        started = True
        open_log()
        node.trace("node.start", component=component.component_type, pid=os.getpid(), incarnation=node.incarnation)
        line = boot_line()
        root.info(line)
        print(line, flush=True)
        await stop.wait()
        root.info("%s: shutdown hook was invoked (%s)", name, why[0])
        await component.shutdown()
        await node.close()
        node.trace("node.stop", reason=why[0])
        root.info("%s: shutdown complete", name)
        return 0

    try:
        return run_loop(main())
    except Exception as e:
        node.trace("log", level="ERROR", message=f"process failed: {e!r}")
        if started:
            root.exception("%s: failed", name)
            print(f"{who}: failed: {e}, see {handlers[-1].baseFilename}", file=sys.stderr)
        elif isinstance(e, ListenError):  # the cause says it all: no traceback
            print(f"{who}: {e}", file=sys.stderr)
        else:  # no log file was opened: the traceback goes to the console
            import traceback

            traceback.print_exc(file=sys.stderr)
            print(f"{who}: failed to start: {e}", file=sys.stderr)
        return 1
    finally:
        node.tracer.close()
        for handler in handlers:
            root.removeHandler(handler)
            handler.close()
