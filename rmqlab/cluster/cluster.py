"""Cluster: a deployment mode run on a backend (rmqlab.cluster's docstring shows its use)."""

from __future__ import annotations

import asyncio
import atexit
import shutil
import tempfile
from collections.abc import Callable

from rmqlab.cluster.backend import Backend
from rmqlab.cluster.deployment import Deployment
from rmqlab.cluster.leader_scan import LeaderScan
from rmqlab.cluster.modes import CONTROLLER_COUNTS, MODES, DeploymentMode, controller_modes
from rmqlab.cluster.real_backend import RealBackend
from rmqlab.cluster.sim_backend import SimBackend, owned_prefix
from rmqlab.common.decision_points import DecisionPoints
from rmqlab.example.benchmark import ClientSpec, ConsumerSpec, ProducerSpec
from rmqlab.runtime.component import Component

BACKENDS: dict[str, type[Backend]] = {"sim": SimBackend, "real": RealBackend}
MASTER_ROLES = ("SYNC_MASTER", "ASYNC_MASTER")


class Cluster:
    def __init__(self, mode: str | DeploymentMode, runtime: str = "sim", *, seed: int = 0, root_dir: str | None = None,
                 overrides: dict[str, dict[str, object]] | None = None, mapped_file_size: int = 1024 * 1024,
                 relay: bool = True, controllers: int = 3,
                 controller_overrides: dict[str, object] | None = None, proxy: str | None = None,
                 proxy_overrides: dict[str, object] | None = None, decision_points: DecisionPoints | None = None):
        """`mode`: a name of MODES, or a DeploymentMode (rmqlab.cluster.modes). `overrides` maps a
        node name (or "*" for every broker) to extra broker settings; the commitlog file size
        defaults to 1 MiB so rolling is visible in a lab. `relay=False` (real runtime only)
        connects the processes directly, without the fault relay: kill, crash and restart still
        work, link faults do not (benchmarks use it: an operator has no relay).
        Controller modes only: `controllers` (1, 3 or 5) and `controller_overrides`, settings for
        every controller (e.g. enableElectUncleanMaster).

        `proxy` (see the module docstring): "cluster" adds a node "proxy" (`rmqlab proxy -n ...
        -pc rmq-proxy.json`), "local" runs every broker with `--enable-proxy`; `proxy_overrides`
        are rmq-proxy.json settings. `proxy_endpoints` lists the addresses clients use.

        Without `root_dir` the Cluster makes a temporary one (on the simulator in memory, /dev/shm,
        when there is room: rmqlab.cluster.sim_backend.memory_dir) and removes it at close().

        `decision_points` (simulator only): the rules the name servers, brokers and controllers use
        at the named points of rmqlab.common.decision_points instead of RocketMQ's (how an exercise
        runs a student's function)."""
        if isinstance(mode, str):
            if mode not in MODES:
                raise ValueError(f"unknown mode {mode!r}; expected one of {', '.join(MODES)}")
            mode = MODES[mode]
        elif not isinstance(mode, DeploymentMode):
            raise TypeError(f"mode: expected a mode name or a DeploymentMode, not {type(mode).__name__}")
        if runtime not in BACKENDS:
            raise ValueError(f"runtime must be 'sim' or 'real', not {runtime!r}")
        if mode.controllers:
            if controllers not in CONTROLLER_COUNTS:
                raise ValueError(f"controllers must be one of {CONTROLLER_COUNTS} (a Raft group of an odd size), "
                                 f"not {controllers!r}")
        elif controllers != 3 or controller_overrides:
            raise ValueError(f"controllers / controller_overrides: mode {mode.name!r} has no controllers "
                             f"(controller modes: {', '.join(controller_modes())})")
        if proxy not in (None, "cluster", "local"):
            raise ValueError(f"proxy must be None, 'cluster' or 'local', not {proxy!r}")
        self.proxy, self.proxy_overrides = proxy, dict(proxy_overrides or {})
        self.mode, self.runtime, self.seed = mode.name, runtime, seed
        self.deployment = Deployment(mode, controllers, proxy, overrides or {}, dict(controller_overrides or {}),
                                     self.proxy_overrides, mapped_file_size)
        self.brokers = dict(mode.brokers)
        self.overrides = self.deployment.overrides
        self.controller_overrides = self.deployment.controller_overrides
        self.mapped_file_size = mapped_file_size
        # Name servers and controllers: node name -> template under conf/ (None: the defaults,
        # `rmqlab namesrv` without -c). Embedded: the controllers are the name servers.
        self.namesrvs: dict[str, str | None] = {n.name: n.template for n in self.deployment.namesrvs}
        self.controllers: dict[str, str] = {n.name: n.template for n in self.deployment.standalone_controllers}
        self.controller_nodes = [n.name for n in self.deployment.controller_nodes]
        self.clients: dict[str, ClientSpec | None] = {}   # client node -> its description (None: a factory)
        self._start_with_cluster: list[str] = []           # clients added with start=True before start()
        self._started = False
        self._master_scans: dict[str | None, LeaderScan] = {}
        self._controller_scan = LeaderScan(self.controller_nodes, lambda e: e.fields.get("component") == "raft",
                                           lambda e: e.fields.get("to") == "LEADER", "term")
        # A root of our own making is removed by close() (also at interpreter exit, e.g. after
        # Ctrl-C); a root_dir given by the caller is the caller's, and is left as it is.
        backend_type = BACKENDS[runtime]
        self._own_root = root_dir is None
        self.root_dir = root_dir or tempfile.mkdtemp(prefix=owned_prefix(f"rmqlab-{mode.name}-"),
                                                         dir=backend_type.temp_parent())
        self._closed = False
        self.backend: Backend | None = None
        if self._own_root:
            atexit.register(self.close)
        try:
            self.backend = backend_type(self.root_dir, seed=seed, relay=relay, proxy=proxy,
                                        decision_points=decision_points)
            ends = self.backend.build(self.deployment)
        except BaseException:  # nothing to close later: remove what was made
            self.close()
            raise
        self.namesrv_addr, self.controller_addr = ends.namesrv_addr, ends.controller_addr
        self.proxy_endpoints: list[str] = ends.proxy_endpoints
        self.nemesis = self.backend.nemesis
        self.components: dict[str, Component] = self.backend.components

    # -- the runtime's own objects, for what only it can do -----------------------------------------
    @property
    def sim(self):
        """The rmqlab.runtime.sim.Simulation (simulator only): its components, `run(coro)`, `at`."""
        if not isinstance(self.backend, SimBackend):
            raise AttributeError(f"a Cluster on the {self.runtime!r} runtime has no simulation")
        return self.backend.sim

    @property
    def real(self):
        """The rmqlab.runtime.real_cluster.RealCluster (real runtime only): PIDs, add_node, ..."""
        if not isinstance(self.backend, RealBackend):
            raise AttributeError(f"a Cluster on the {self.runtime!r} runtime has no real cluster")
        return self.backend.real

    @property
    def tracer(self):
        """Where this process emits events into the cluster's trace (a workload's own marks)."""
        return self.backend.tracer

    def store_dir(self, name: str) -> str:
        return self.backend.store_dir(name)

    def alive(self, name: str) -> bool:
        return self.backend.alive(name)

    def now_ms(self) -> float:
        """Milliseconds on the cluster's clock: virtual on the simulator, monotonic wall time on
        the real runtime; only differences count."""
        return self.backend.now_ms()

    # -- running -------------------------------------------------------------------------------
    def start(self, timeout_ms: float = 30_000) -> None:
        """Start the name servers, the controllers and the brokers, wait until every name server
        has registered every broker (a broker's boot line comes before its first registration, and
        a client that asks for a route earlier gets "no route info"; in controller mode a broker
        registers only once the controllers gave it a role), then start the clients added with
        start=True."""
        self.backend.start_servers([n.name for n in self.deployment.nodes])
        try:
            self.backend.run_until(lambda: self.registered() >= len(self.brokers), timeout_ms,
                                   self.backend.start_poll_ms)
        except TimeoutError:
            raise TimeoutError(f"only {self.registered()} of {len(self.brokers)} brokers registered "
                               f"with the name server within {timeout_ms:.0f} ms") from None
        self._started = True
        for name in self._start_with_cluster:
            self.start_client(name)
        self._start_with_cluster.clear()

    def registered(self) -> int:
        """How many brokers the name server has registered so far (read from the trace); with
        several name servers, the fewest any of them has registered."""
        counts = []
        for namesrv in self.namesrvs:
            events = self.backend.node_events(namesrv)
            counts.append(sum(1 for e in events if e.node == namesrv and e.kind == "namesrv.broker_register"))
        return min(counts)

    # -- controller mode: who leads, from the trace ----------------------------------------------
    def master_changes(self) -> list[tuple[float, str, int]]:
        """Every time a broker became master: (time_ms, broker node, master epoch), in trace order
        (the brokers' `role` events; a classic master's carry no epoch: 0)."""
        return [(e.time_ms, e.node, int(e.fields.get("epoch") or 0)) for e in self.events()
                if e.kind == "role" and e.node in self.brokers and e.fields.get("to") in MASTER_ROLES]

    def master(self, broker_name: str | None = None) -> str | None:
        """The broker node that is master now: of the running brokers (of set `broker_name`, if
        given) whose last role in their current incarnation is a master role, the one of the
        highest epoch — a stale master cut off from the controllers may still think it leads, the
        controllers moved on with a higher epoch. None if none is."""
        if broker_name not in self._master_scans:
            names = [n for n in self.brokers
                     if broker_name is None or self.broker_template(n).brokerName == broker_name]
            self._master_scans[broker_name] = LeaderScan(
                names, lambda e: e.fields.get("component", "broker") == "broker",
                lambda e: e.fields.get("to") in MASTER_ROLES, "epoch")
        return self._master_scans[broker_name](self.events(), self.backend.trace_grows)

    def controller_leader(self) -> str | None:
        """The controller node that leads the controllers' Raft group now (its last `role` event
        is LEADER, the highest term among the running ones), or None (no majority, or an election
        under way). Read from the trace; the leader serves requests once its first entry of the
        term is applied, a few ms later."""
        return self._controller_scan(self.events(), self.backend.trace_grows)

    def controller_addr_of(self, node: str) -> str:
        """The peer address controller `node` serves brokers and mqadmin on."""
        return self.controller_addr.split(";")[self.controller_nodes.index(node)]

    # -- clients -------------------------------------------------------------------------------
    def add_client(self, name: str, client: ClientSpec | Callable[[], Component], start: bool = True) -> None:
        """A client node. `client` is a description (ProducerSpec, ConsumerSpec: either runtime)
        or, on the simulator only, a factory of the component (a new one per start). On the real
        runtime add clients before `start()` (every process gets the cluster map when it spawns).
        `start`: now, or with the cluster when it has not started yet; else `start_client` later."""
        spec = client if isinstance(client, (ProducerSpec, ConsumerSpec)) else None
        if spec is None and not callable(client):
            raise TypeError(f"add_client {name!r}: expected a ProducerSpec, a ConsumerSpec or (on the simulator) "
                            f"a component factory, not {type(client).__name__}")
        address = self.client_address(name, spec) if spec is not None else None
        self.backend.add_client(name, client, address)
        self.clients[name] = spec
        if start:
            if self._started:
                self.start_client(name)
            else:
                self._start_with_cluster.append(name)

    def client_address(self, name: str, spec: ClientSpec) -> str:
        """Where a described client starts from: the name servers (remoting), or the Proxy
        endpoints, all of them, as its access point (protocol="grpc")."""
        if spec.protocol != "grpc":
            return self.namesrv_addr
        if self.proxy is None:
            raise ValueError(f"add_client {name!r}: a protocol='grpc' client talks to a Proxy; build the Cluster "
                             "with proxy='cluster' or proxy='local'")
        return ";".join(self.proxy_endpoints)

    def add_producer(self, name: str, spec: ProducerSpec | None = None, *, start: bool = True, **fields) -> ProducerSpec:
        """A benchmark producer (`rmqlab producer`): `spec`, or a ProducerSpec of `fields`
        (protocol="grpc": rmqlab's 5.x Producer, through the Proxy)."""
        spec = _spec(ProducerSpec, spec, fields)
        self.add_client(name, spec, start)
        return spec

    def add_consumer(self, name: str, spec: ConsumerSpec | None = None, *, start: bool = True, **fields) -> ConsumerSpec:
        """A benchmark consumer (`rmqlab consumer`): `spec`, or a ConsumerSpec of `fields`
        (protocol="grpc": rmqlab's 5.x SimpleConsumer, through the Proxy)."""
        spec = _spec(ConsumerSpec, spec, fields)
        self.add_client(name, spec, start)
        return spec

    def start_client(self, name: str) -> None:
        """Start a client node's process (returns once it has started)."""
        self._client(name)
        self.backend.start(name)

    def stop_client(self, name: str) -> None:
        """Clean stop of a client (SIGTERM): it writes its offsets and unregisters."""
        self._client(name)
        self.backend.stop(name)

    def _client(self, name: str) -> None:
        if name not in self.clients:
            raise ValueError(f"unknown client {name!r} (clients: {', '.join(self.clients) or 'none'})")

    # -- mqadmin -------------------------------------------------------------------------------
    def create_topic(self, topic: str, queues: int = 4, timeout_ms: float = 10_000,
                     message_type: str | None = None) -> None:
        """`mqadmin updateTopic -c <cluster> -t topic -r queues -w queues [-a +message.type=FIFO]`,
        then wait until the name server routes the topic to every master (clients learn of a topic
        created later only at their next 30 s route refresh). `message_type`: NORMAL, FIFO, DELAY
        or TRANSACTION, what a 5.x Proxy lets clients send to the topic."""
        from rmqlab.common.topic_config import TopicConfig
        from rmqlab.client import DefaultMQAdminExt, MQClientException

        # Controller mode: every set has a master once start() returned (the controllers elected it).
        templates = [self.broker_template(n) for n in self.brokers]
        # DLedger mode: brokerId -1 in every template; the group's leader is master once elected.
        masters = {c.brokerName for c in templates if c.brokerId in (0, -1) or c.enableControllerMode}
        clusters = sorted({c.brokerClusterName for c in templates})

        async def create(admin: DefaultMQAdminExt, now_ms: Callable[[], float]) -> None:
            for cluster_name in clusters:
                await admin.create_and_update_topic_config_by_cluster(cluster_name, TopicConfig(
                    topic, queues, queues, attributes={"message.type": message_type} if message_type else {}))
            deadline = now_ms() + timeout_ms
            while True:
                try:
                    route = await admin.examine_topic_route_info(topic)
                    if {q.broker_name for q in route.queue_datas} >= masters:
                        return
                except MQClientException:
                    pass  # the name server does not know it yet
                if now_ms() > deadline:
                    raise TimeoutError(f"topic {topic} not routed to {', '.join(sorted(masters))} "
                                       f"within {timeout_ms:.0f} ms")
                await asyncio.sleep(0.05)

        self.admin(create)

    def create_group(self, group: str, orderly: bool = False) -> None:
        """`mqadmin updateSubGroup -c <cluster> -g group [-o true]` on every master: with `orderly`
        (consumeMessageOrderly) a 5.x Proxy serves the group as FIFO."""
        from rmqlab.remoting.protocol.subscription.subscription_group_config import SubscriptionGroupConfig

        clusters = sorted({self.broker_template(n).brokerClusterName for n in self.brokers})

        async def create(admin, now_ms) -> None:
            for cluster_name in clusters:
                await admin.create_and_update_subscription_group_config_by_cluster(
                    cluster_name, SubscriptionGroupConfig(group, consume_message_orderly=orderly))

        self.admin(create)

    def admin(self, work: Callable) -> None:
        """Run `await work(admin, now_ms)` with a DefaultMQAdminExt: a node of its own on the
        simulator, an operator's tool run from this process on the real runtime."""
        self.backend.admin(work, self.namesrv_addr)

    def broker_template(self, name: str):
        """Broker `name`'s BrokerConfig from its template and the overrides (brokerName, brokerId,
        brokerClusterName, ...)."""
        return self.deployment.broker_template(name)

    # -- time and the trace ------------------------------------------------------------------------
    def run_until(self, predicate: Callable[[], bool], timeout_ms: float, poll_ms: float = 100) -> float:
        """Let the cluster run until `predicate()` holds (virtual ms on the simulator, wall ms on the
        real runtime); returns the ms it took, TimeoutError past `timeout_ms`."""
        return self.backend.run_until(predicate, timeout_ms, poll_ms)

    def run_for(self, ms: float) -> None:
        """Let the cluster run: virtual ms on the simulator, wall ms on the real runtime."""
        self.backend.run_for(ms)

    def events(self):
        return self.backend.events()

    def close(self) -> None:
        """Stop every node; a root directory this Cluster made (no root_dir given) is removed, so
        nothing is left under the temporary directory. events() still answers afterwards. Idempotent."""
        if self._closed:
            return
        self._closed = True
        try:
            if self.backend is not None:  # (None: the constructor failed before making one)
                self.backend.close(keep_events=self._own_root)
        finally:
            if self._own_root:
                shutil.rmtree(self.root_dir, ignore_errors=True)
                atexit.unregister(self.close)

    def __enter__(self) -> Cluster:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _spec(cls: type, spec, fields: dict):
    if spec is not None and fields:
        raise TypeError(f"give a {cls.__name__} or its fields, not both ({', '.join(fields)})")
    if spec is not None and not isinstance(spec, cls):
        raise TypeError(f"expected a {cls.__name__}, not {type(spec).__name__}")
    return spec if spec is not None else cls(**fields)
