"""The simulator backend: every node of a Deployment in this process, on rmqlab.runtime.sim's
virtual clock, seeded. Each node listens where its template says (name server 9876, brokers'
listenPort, controllers' peers 9877 + i), since no two simulated nodes share a port's host."""

from __future__ import annotations

import os
import re
import shutil
from collections.abc import Callable

from rmqlab.cluster.backend import ADMIN_NODE, Backend, Endpoints
from rmqlab.cluster.deployment import Deployment
from rmqlab.cluster.modes import BROKER, CONTROLLER, NAMESRV, PROXY, ServerNode
from rmqlab.common.decision_points import DecisionPoints
from rmqlab.example.benchmark import ClientSpec, build_client
from rmqlab.runtime.component import Component

NAMESRV_PORT = 9876
CONTROLLER_PEER_PORT = 9877      # controller n<i> serves on 9877 + i (conf/controller/, conf/README.md)
EMBEDDED_NAMESRV_PORT_STEP = 10  # name server i listens on 9876 + 10 i (embedded: 9876, 9886, 9896)
SIM_LOCAL_PROXY_NET = "127.0.0"  # proxy="local": broker i on host 127.0.0.(2 + i)
SHM = "/dev/shm"
SHM_MIN_FREE = 512 * 1024 * 1024


def memory_dir() -> str | None:
    """/dev/shm when there is one: a simulated run's store files live for one run, and on a disk
    their flushes cost fsyncs (about a fifth of a short cluster test's wall time). The simulator's
    crash model does not rely on the OS (rmqlab.runtime.page_cache keeps its own ledger of what was
    flushed), so a RAM file system changes nothing in the run."""
    if not (os.path.isdir(SHM) and os.access(SHM, os.W_OK | os.X_OK)):
        return None
    # A container's /dev/shm is often 64 MiB (Docker's default) and a controller-mode replay writes
    # about 25 MB, two at a time under Spark: use it only with room to spare.
    sweep_orphans(SHM)
    st = os.statvfs(SHM)
    return SHM if st.f_bavail * st.f_frsize >= SHM_MIN_FREE else None


def owned_prefix(prefix: str) -> str:
    """A temporary directory's prefix naming this process as its owner ("<prefix>p<pid>-"), so a
    later run can remove it if this process dies without cleaning up (sweep_orphans)."""
    return f"{prefix}p{os.getpid()}-"


_OWNED = re.compile(r"^rmqlab-.*-p(\d+)-[A-Za-z0-9_]{8}$")


def sweep_orphans(parent: str) -> list[str]:
    """Remove the run directories under `parent` whose owner process is gone, and return their
    names. A run removes its directory when it closes, or at exit (atexit); a process that is
    killed (a kernel restarted, a test worker timed out) cannot, and /dev/shm is memory: on a
    2 GiB Binder pod such leftovers would pile up until the pod restarts."""
    removed = []
    try:
        names = os.listdir(parent)
    except OSError:
        return removed
    for name in names:
        m = _OWNED.match(name)
        if m is None or _alive(int(m.group(1))):
            continue
        shutil.rmtree(os.path.join(parent, name), ignore_errors=True)
        removed.append(name)
    return removed


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # someone else's live process
        return True
    return True


class SimBackend(Backend):
    runtime = "sim"
    trace_grows = True
    start_poll_ms = 1.0

    def __init__(self, root_dir: str, *, seed: int, relay: bool = True, proxy: str | None = None,
                 decision_points: DecisionPoints | None = None):
        """Nodes under <root_dir>/nodes. `relay` is the real runtime's: the simulator's network
        carries every fault; `proxy` needs nothing of it before build(). `decision_points` go to
        the components that decide (name servers, brokers, controllers), only when given."""
        from rmqlab.runtime.sim import Simulation

        self.sim = Simulation(seed=seed, root_dir=os.path.join(root_dir, "nodes"))
        self.nemesis = self.sim.nemesis
        self.tracer = self.sim.tracer
        self.components: dict[str, Component] = {}
        self._deployment: Deployment | None = None
        self._options = {} if decision_points is None else {"decision_points": decision_points}

    @classmethod
    def temp_parent(cls) -> str | None:
        return memory_dir()  # removed at close, or at exit (atexit); a root_dir given is the caller's

    # -- building -----------------------------------------------------------------------------
    def build(self, deployment: Deployment) -> Endpoints:
        self._deployment = d = deployment
        peers = {f"n{n.controller_index}": f"127.0.0.1:{CONTROLLER_PEER_PORT + n.controller_index}"
                 for n in d.controller_nodes}
        ns_ports = {n.name: NAMESRV_PORT + EMBEDDED_NAMESRV_PORT_STEP * i for i, n in enumerate(d.namesrvs)}
        ends = Endpoints(";".join(f"127.0.0.1:{p}" for p in ns_ports.values()), ";".join(peers.values()))
        builders = {NAMESRV: lambda n: self._namesrv(n, ns_ports[n.name], peers),
                    CONTROLLER: lambda n: self._controller(n, peers),
                    BROKER: lambda n: self._broker(n, ends),
                    PROXY: lambda n: self._proxy(n, ends.namesrv_addr)}
        for node in d.nodes:
            self.sim.add_node(node.name, lambda node=node: builders[node.role](node))
        if d.proxy == "local":
            port = self._proxy_config(ends.namesrv_addr).grpcServerPort
            ends.proxy_endpoints = [f"{self._local_host(n.name)}:{port}" for n in d.brokers]
        elif d.proxy == "cluster":
            config = self._proxy_config(ends.namesrv_addr)
            ends.proxy_endpoints = [f"{config.localServeAddr}:{config.grpcServerPort}"]
        return ends

    def _namesrv(self, node: ServerNode, port: int, peers: dict[str, str]) -> Component:
        from rmqlab.config import load_namesrv_config
        from rmqlab.namesrv import NamesrvController

        overrides: dict[str, object] = {"listenPort": port}
        if node.controller_index is not None:  # enableControllerInNamesrv: the template is a controller's too
            overrides.update(self._deployment.controller_settings(node, peers, self.sim.store_dir(node.name)))
        config = load_namesrv_config(self._deployment.template_path(node.template) if node.template else None,
                                     overrides=overrides)
        c = self.components[node.name] = NamesrvController.from_startup_config(config, **self._options)
        return c

    def _controller(self, node: ServerNode, peers: dict[str, str]) -> Component:
        from rmqlab.config import load_controller_config
        from rmqlab.controller.controller_manager import ControllerManager

        config = load_controller_config(self._deployment.template_path(node.template),
                                        overrides=self._deployment.controller_settings(node, peers,
                                                                                       self.sim.store_dir(node.name)))
        c = self.components[node.name] = ControllerManager.from_startup_config(config, **self._options)
        return c

    def _broker(self, node: ServerNode, ends: Endpoints) -> Component:
        from rmqlab.broker import BrokerController
        from rmqlab.config import load_broker_config
        from rmqlab.proxy.proxy_controller import ProxyController

        d = self._deployment
        host: dict[str, object] = {}
        if d.proxy == "local":  # a host of its own, as on its own machine
            ip = self._local_host(node.name)
            host = {"brokerIP1": ip, "brokerIP2": ip, "bindAddress": ip}
        config = load_broker_config(d.template_path(node.template), overrides=d.broker_settings(
            node.name, self.sim.store_dir(node.name), ends.namesrv_addr, ends.controller_addr, host))
        broker = self.components[node.name] = BrokerController(config, **self._options)
        if d.proxy == "local":  # the node runs the Proxy, which runs its broker
            return ProxyController(self._proxy_config(ends.namesrv_addr), broker=broker, transport="framed")
        return broker

    def _proxy(self, node: ServerNode, namesrv_addr: str) -> Component:
        from rmqlab.proxy.proxy_controller import ProxyController

        c = self.components[node.name] = ProxyController(self._proxy_config(namesrv_addr), transport="framed")
        return c

    def _local_host(self, broker: str) -> str:
        """proxy="local": the host of a broker and its Proxy (rmqlab.cluster's docstring)."""
        return f"{SIM_LOCAL_PROXY_NET}.{2 + [n.name for n in self._deployment.brokers].index(broker)}"

    def _proxy_config(self, namesrv_addr: str):
        """conf/rmq-proxy.json with the overrides and -n, as `rmqlab proxy -n ... -pc` (or the
        Local-mode Proxy of `rmqlab broker --enable-proxy -pc`) loads it."""
        from rmqlab.config import load_proxy_config

        d = self._deployment
        return load_proxy_config(d.proxy_template_path, namesrv_addr=namesrv_addr, overrides=d.proxy_overrides,
                                 local=d.proxy == "local").proxyConfig

    def add_client(self, name: str, client: ClientSpec | Callable[[], Component], address: str | None) -> None:
        factory = client if address is None else (lambda: build_client(client, address))

        def build() -> Component:
            c = factory()
            self.components[name] = c
            return c

        self.sim.add_node(name, build)

    # -- processes ----------------------------------------------------------------------------
    def start_servers(self, names: list[str]) -> None:
        for name in names:
            self.sim.start(name)

    def start(self, name: str) -> None:
        self.sim.start(name)

    def stop(self, name: str) -> None:
        self.sim.stop(name)

    def alive(self, name: str) -> bool:
        return self.sim.nodes[name].alive

    def store_dir(self, name: str) -> str:
        return self.sim.store_dir(name)

    # -- time ---------------------------------------------------------------------------------
    def now_ms(self) -> float:
        return self.sim.now_ms()

    def run_until(self, predicate: Callable[[], bool], timeout_ms: float, poll_ms: float) -> float:
        return self.sim.run_until(predicate, timeout_ms, poll_ms)

    def run_for(self, ms: float) -> None:
        self.sim.run_for(ms)

    # -- the trace, the admin tool ----------------------------------------------------------------
    def events(self) -> list:
        return self.sim.tracer.events

    def node_events(self, name: str) -> list:
        return self.sim.tracer.events

    def admin(self, work: Callable, namesrv_addr: str) -> None:
        """A node of its own, added at the first call."""
        from rmqlab.client import ClientProcess, DefaultMQAdminExt

        if ADMIN_NODE not in self.sim.components:
            self.sim.add_node(ADMIN_NODE, lambda: ClientProcess(admin=DefaultMQAdminExt(namesrv_addr)))
            self.sim.start(ADMIN_NODE)
        self.sim.run(work(self.sim.components[ADMIN_NODE]["admin"], self.sim.now_ms))

    def close(self, keep_events: bool) -> None:
        self.sim.close()  # its trace is in memory: events() still answers
