"""The interface a Cluster runs a Deployment on: the simulator (rmqlab.cluster.sim_backend) or OS
processes (rmqlab.cluster.real_backend). A backend knows roles (name server, controller, broker,
proxy, client), never modes: rmqlab.cluster.deployment says which nodes a mode has and how each is
configured."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, ClassVar

from rmqlab.cluster.deployment import Deployment
from rmqlab.example.benchmark import ClientSpec
from rmqlab.runtime.component import Component

ADMIN_NODE = "mqadmin"  # the admin client of create_topic (a node of its own on the simulator)


@dataclass
class Endpoints:
    """Where a built deployment is reached: the name servers (";" list), the brokers'
    controllerAddr (";" list, controller modes) and the Proxy addresses clients dial."""

    namesrv_addr: str
    controller_addr: str = ""
    proxy_endpoints: list[str] = field(default_factory=list)


class Backend(ABC):
    runtime: ClassVar[str]
    # events() only ever appends to one list (the simulator's trace): a scan of it can go on from
    # where it stopped; otherwise each call gives a new list, read from scratch.
    trace_grows: ClassVar[bool]
    # How often start() looks for the brokers' registrations: every virtual ms on the simulator
    # (start returns at the first ms they are all in, which the recorded traces depend on).
    start_poll_ms: ClassVar[float]

    nemesis: Any              # kill, crash, restart, suspend, partition, ... (rmqlab.runtime.nemesis)
    tracer: Any               # where this process emits events into the trace (rmqlab.trace.Tracer)
    components: dict[str, Component]   # node -> its running component (the simulator's; empty otherwise)

    @classmethod
    def temp_parent(cls) -> str | None:
        """Where a Cluster that is given no root_dir makes its own (None: tempfile's default)."""
        return None

    # -- building -----------------------------------------------------------------------------
    @abstractmethod
    def build(self, deployment: Deployment) -> Endpoints:
        """Add every server node of `deployment`, configured, not started."""

    @abstractmethod
    def add_client(self, name: str, client: ClientSpec | Callable[[], Component], address: str | None) -> None:
        """Add a client node: a description (started from `address`, the name servers or the
        Proxy endpoints) or, where the backend can run one, a factory of its component."""

    # -- processes ----------------------------------------------------------------------------
    @abstractmethod
    def start_servers(self, names: list[str]) -> None:
        """Start these server nodes; returns once each has started."""

    @abstractmethod
    def start(self, name: str) -> None:
        """Start one node (a client); returns once it has started."""

    @abstractmethod
    def stop(self, name: str) -> None:
        """Clean stop (SIGTERM)."""

    @abstractmethod
    def alive(self, name: str) -> bool: ...

    @abstractmethod
    def store_dir(self, name: str) -> str: ...

    # -- time ---------------------------------------------------------------------------------
    @abstractmethod
    def now_ms(self) -> float:
        """Milliseconds on the backend's clock (virtual on the simulator); only differences count."""

    @abstractmethod
    def run_until(self, predicate: Callable[[], bool], timeout_ms: float, poll_ms: float) -> float:
        """Let the nodes run until `predicate()` holds; the ms it took, TimeoutError past `timeout_ms`."""

    @abstractmethod
    def run_for(self, ms: float) -> None: ...

    # -- the trace, the admin tool ----------------------------------------------------------------
    @abstractmethod
    def events(self) -> list:
        """The whole trace, every node's events merged."""

    @abstractmethod
    def node_events(self, name: str) -> list:
        """A trace that holds every event of node `name` (it may hold others: filter by node)."""

    @abstractmethod
    def admin(self, work: Callable, namesrv_addr: str) -> None:
        """Run `await work(admin, now_ms)` with a DefaultMQAdminExt of the name servers."""

    @abstractmethod
    def close(self, keep_events: bool) -> None:
        """Stop every node. `keep_events`: its files are about to be removed, so hold the trace
        in memory for events()."""
