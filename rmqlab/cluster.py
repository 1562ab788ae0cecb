"""rmqlab.cluster: a deployment mode of seed 000 as running software, on either runtime (issue 4 §5).

    c = Cluster("2m-2s-async")                      # the simulator, seeded
    c.start()
    c.nemesis.crash("broker-a")                       # kill / crash / restart / suspend / partition ...
    c.run_for(5_000)                                  # virtual ms (simulator); a sleep on the real runtime
    c.events()                                        # the event trace

    c = Cluster("2m-2s-sync", runtime="real", root_dir="/tmp/lab")   # the same, as OS processes

Clients are described once for both runtimes (rmqlab.example.benchmark: plain, serializable values):

    c.add_consumer("consumer", topic="TopicTest", group="CG", start=False)
    c.add_producer("producer", topic="TopicTest", count=100, interval_ms=10, start=False)
    c.start()
    c.create_topic("TopicTest")                       # mqadmin updateTopic -c, then wait for the route
    c.start_client("consumer"); c.start_client("producer")
    c.run_until(lambda: ..., 30_000)                  # e.g. on c.events()

On the simulator the description builds the client component on a node; on the real runtime it
is a `rmqlab producer|consumer` process (a RealCluster node: kill, crash, restart, stop, and its
trace merged into `events()`), so the same code drives either runtime and the trace holds the
same kinds of client operations. A real cluster is given every node before its first process
starts, so there clients are added before `start()`. `add_client(name, factory)` still runs any
component on the simulator.

A cluster is one NameServer ("namesrv", listening on 127.0.0.1:9876 on the simulator) and the
brokers of the mode, each configured from its conf/ template exactly as an operator would start
it (`rmqlab broker -c conf/2m-2s-async/broker-a.properties`): only the store directory — and on
the real runtime the ports, which must be free on this machine — are changed. Node names are the
template names: broker-a, broker-a-s, broker-b, broker-b-s.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import os
import sys
import tempfile
import time
from collections.abc import Callable

from rmqlab.config import load_broker_config, load_namesrv_config
from rmqlab.example.benchmark import ClientSpec, ConsumerSpec, ProducerSpec, build_client
from rmqlab.runtime.component import Component

CONF_DIR = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "conf")

# mode -> {node name: template under conf/}
MODES: dict[str, dict[str, str]] = {
    "single-master": {"broker-a": "broker.conf"},
    "2m-noslave": {"broker-a": "2m-noslave/broker-a.properties", "broker-b": "2m-noslave/broker-b.properties"},
    "2m-2s-async": {n: f"2m-2s-async/{n}.properties" for n in ("broker-a", "broker-a-s", "broker-b", "broker-b-s")},
    "2m-2s-sync": {n: f"2m-2s-sync/{n}.properties" for n in ("broker-a", "broker-a-s", "broker-b", "broker-b-s")},
}
NAMESRV_PORT = 9876
ADMIN_NODE = "mqadmin"  # the admin client of create_topic (a node of its own on the simulator)


class Cluster:
    def __init__(self, mode: str, runtime: str = "sim", *, seed: int = 0, root_dir: str | None = None,
                 overrides: dict[str, dict[str, object]] | None = None, mapped_file_size: int = 1024 * 1024,
                 relay: bool = True):
        """`overrides` maps a node name (or "*" for every broker) to extra broker settings; the
        commitlog file size defaults to 1 MiB so rolling is visible in a lab. `relay=False` (real
        runtime only) connects the processes directly, without the fault relay: kill, crash and
        restart still work, link faults do not (benchmarks use it: an operator has no relay)."""
        if mode not in MODES:
            raise ValueError(f"unknown mode {mode!r}; expected one of {', '.join(MODES)}")
        if runtime not in ("sim", "real"):
            raise ValueError(f"runtime must be 'sim' or 'real', not {runtime!r}")
        self.mode, self.runtime, self.seed = mode, runtime, seed
        self.root_dir = root_dir or tempfile.mkdtemp(prefix=f"rmqlab-{mode}-")
        self.brokers = dict(MODES[mode])
        self.overrides = overrides or {}
        self.mapped_file_size = mapped_file_size
        self.components: dict[str, Component] = {}
        self.clients: dict[str, ClientSpec | None] = {}   # client node -> its description (None: a factory)
        self._start_with_cluster: list[str] = []           # clients added with start=True before start()
        self._started = False
        if runtime == "sim":
            from rmqlab.runtime.sim import Simulation

            self.sim = Simulation(seed=seed, root_dir=os.path.join(self.root_dir, "nodes"))
            self.namesrv_addr = f"127.0.0.1:{NAMESRV_PORT}"
            self._build_sim()
            self.nemesis = self.sim.nemesis
        else:
            from rmqlab.runtime.real_cluster import RealCluster

            self.real = RealCluster(os.path.join(self.root_dir, "nodes"), seed=seed, relay=relay)
            self._build_real()
            self.nemesis = self.real.nemesis

    # -- configuration -------------------------------------------------------------------------
    def _broker_overrides(self, name: str, store_dir: str, namesrv_addr: str) -> dict[str, object]:
        return {"storePathRootDir": store_dir, "namesrvAddr": namesrv_addr,
                "mappedFileSizeCommitLog": self.mapped_file_size,
                **self.overrides.get("*", {}), **self.overrides.get(name, {})}

    def broker_config(self, name: str, store_dir: str, namesrv_addr: str):
        return load_broker_config(os.path.join(CONF_DIR, self.brokers[name]),
                                  overrides=self._broker_overrides(name, store_dir, namesrv_addr))

    def _build_sim(self) -> None:
        from rmqlab.broker import BrokerController
        from rmqlab.namesrv import NamesrvController

        sim = self.sim

        def namesrv() -> Component:
            c = NamesrvController.from_startup_config(load_namesrv_config(overrides={"listenPort": NAMESRV_PORT}))
            self.components["namesrv"] = c
            return c

        sim.add_node("namesrv", namesrv)
        for name in self.brokers:
            def broker(name: str = name) -> Component:
                c = BrokerController(self.broker_config(name, sim.store_dir(name), self.namesrv_addr))
                self.components[name] = c
                return c

            sim.add_node(name, broker)

    def _build_real(self) -> None:
        from rmqlab.runtime.real_cluster import free_ports

        real = self.real
        ns_port, *ports = free_ports(1 + 2 * len(self.brokers))
        self.namesrv_addr = f"127.0.0.1:{ns_port}"
        conf_dir = os.path.join(self.root_dir, "conf")
        os.makedirs(conf_dir, exist_ok=True)
        ns_conf = _write_properties(os.path.join(conf_dir, "namesrv.conf"), {"listenPort": ns_port})
        real.add_node("namesrv", [sys.executable, "-m", "rmqlab.cli", "namesrv", "-c", ns_conf], ports=[ns_port])
        for i, name in enumerate(self.brokers):
            listen, ha = ports[2 * i], ports[2 * i + 1]
            values = _read_properties(os.path.join(CONF_DIR, self.brokers[name]))
            values.update({"listenPort": listen, "haListenPort": ha})
            values.update(self._broker_overrides(name, real.store_dir(name), self.namesrv_addr))
            conf = _write_properties(os.path.join(conf_dir, f"{name}.properties"), values)
            real.add_node(name, [sys.executable, "-m", "rmqlab.cli", "broker", "-c", conf], ports=[listen, ha])

    # -- running -------------------------------------------------------------------------------
    def start(self, timeout_ms: float = 30_000) -> None:
        """Start the name server and the brokers, wait until the name server has registered every
        broker (a broker's boot line comes before its first registration, and a client that asks
        for a route earlier gets "no route info"), then start the clients added with start=True."""
        servers = ["namesrv", *self.brokers]
        if self.runtime == "sim":
            for name in servers:
                self.sim.start(name)
            self.sim.run_until(lambda: self.registered() >= len(self.brokers), timeout_ms)
        else:
            # In parallel, each waited for until its node.start (RealCluster.start).
            with concurrent.futures.ThreadPoolExecutor(len(servers)) as pool:
                for f in [pool.submit(self.real.start, name, 60) for name in servers]:
                    f.result()
            deadline = time.monotonic() + timeout_ms / 1000.0
            while self.registered() < len(self.brokers):
                if time.monotonic() > deadline:
                    raise TimeoutError(f"only {self.registered()} of {len(self.brokers)} brokers registered "
                                       f"with the name server within {timeout_ms:.0f} ms")
                time.sleep(0.05)
        self._started = True
        for name in self._start_with_cluster:
            self.start_client(name)
        self._start_with_cluster.clear()

    def registered(self) -> int:
        """How many brokers the name server has registered so far (read from the trace)."""
        events = self.sim.tracer.events if self.runtime == "sim" else self.real.events("namesrv")
        return sum(1 for e in events if e.node == "namesrv" and e.kind == "log"
                   and e.fields.get("message", "").startswith("new broker registered"))

    def add_client(self, name: str, client: ClientSpec | Callable[[], Component], start: bool = True) -> None:
        """A client node. `client` is a description (ProducerSpec, ConsumerSpec: either runtime)
        or, on the simulator only, a factory of the component (a new one per start). On the real
        runtime add clients before `start()` (every process gets the cluster map when it spawns).
        `start`: now, or with the cluster when it has not started yet; else `start_client` later."""
        spec = client if isinstance(client, (ProducerSpec, ConsumerSpec)) else None
        if spec is None and not callable(client):
            raise TypeError(f"add_client {name!r}: expected a ProducerSpec, a ConsumerSpec or (on the simulator) "
                            f"a component factory, not {type(client).__name__}")
        if self.runtime == "sim":
            factory = (lambda: build_client(spec, self.namesrv_addr)) if spec is not None else client

            def build() -> Component:
                c = factory()
                self.components[name] = c
                return c

            self.sim.add_node(name, build)
        else:
            if spec is None:
                raise TypeError(f"add_client {name!r}: on the real runtime a client is a process, so give a "
                                "description (ProducerSpec or ConsumerSpec), not a factory of this process's objects")
            if self._started:
                raise RuntimeError(f"add_client {name!r}: on the real runtime add clients before Cluster.start() "
                                   "(each process is given the whole cluster map when it spawns); add it with "
                                   "start=False and start it later with start_client")
            argv = [sys.executable, "-m", "rmqlab.cli", spec.kind, "-n", self.namesrv_addr, *spec.to_argv()]
            self.real.add_node(name, argv)
        self.clients[name] = spec
        if start:
            if self._started:
                self.start_client(name)
            else:
                self._start_with_cluster.append(name)

    def add_producer(self, name: str, spec: ProducerSpec | None = None, *, start: bool = True, **fields) -> ProducerSpec:
        """A benchmark producer (`rmqlab producer`): `spec`, or a ProducerSpec of `fields`."""
        spec = _spec(ProducerSpec, spec, fields)
        self.add_client(name, spec, start)
        return spec

    def add_consumer(self, name: str, spec: ConsumerSpec | None = None, *, start: bool = True, **fields) -> ConsumerSpec:
        """A benchmark consumer (`rmqlab consumer`): `spec`, or a ConsumerSpec of `fields`."""
        spec = _spec(ConsumerSpec, spec, fields)
        self.add_client(name, spec, start)
        return spec

    def start_client(self, name: str) -> None:
        """Start a client node's process (returns once it has started)."""
        self._client(name)
        if self.runtime == "sim":
            self.sim.start(name)
        else:
            self.real.start(name)

    def stop_client(self, name: str) -> None:
        """Clean stop of a client (SIGTERM): it writes its offsets and unregisters."""
        self._client(name)
        if self.runtime == "sim":
            self.sim.stop(name)
        else:
            self.real.stop(name)

    def _client(self, name: str) -> None:
        if name not in self.clients:
            raise ValueError(f"unknown client {name!r} (clients: {', '.join(self.clients) or 'none'})")

    def create_topic(self, topic: str, queues: int = 4, timeout_ms: float = 10_000) -> None:
        """`mqadmin updateTopic -c <cluster> -t topic -r queues -w queues`, then wait until the name
        server routes the topic to every master (clients learn of a topic created later only at
        their next 30 s route refresh)."""
        from rmqlab.broker.topic.topic_config import TopicConfig
        from rmqlab.client import ClientProcess, DefaultMQAdminExt, MQClientException

        masters = {c.brokerName for c in map(self._template, self.brokers) if c.brokerId == 0}
        clusters = sorted({c.brokerClusterName for c in map(self._template, self.brokers)})

        async def create(admin: DefaultMQAdminExt, now_ms: Callable[[], float]) -> None:
            for cluster_name in clusters:
                await admin.create_and_update_topic_config_by_cluster(cluster_name, TopicConfig(topic, queues, queues))
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

        if self.runtime == "sim":
            if ADMIN_NODE not in self.sim.components:
                self.sim.add_node(ADMIN_NODE, lambda: ClientProcess(admin=DefaultMQAdminExt(self.namesrv_addr)))
                self.sim.start(ADMIN_NODE)
            self.sim.run(create(self.sim.components[ADMIN_NODE]["admin"], self.sim.now_ms))
            return

        async def on_real() -> None:
            # An operator's tool run from this process (as `rmqlab admin`), outside the cluster map.
            from rmqlab.runtime.real import RealNode

            node = RealNode(ADMIN_NODE, tempfile.mkdtemp(prefix="rmqlab-admin-"))
            process = ClientProcess(admin=DefaultMQAdminExt(self.namesrv_addr))
            await process.start(node)
            try:
                await create(process["admin"], lambda: time.monotonic() * 1000.0)
            finally:
                await process.shutdown()
                await node.close()

        # A thread of its own: the caller may be running an event loop (a notebook).
        with concurrent.futures.ThreadPoolExecutor(1) as pool:
            pool.submit(asyncio.run, on_real()).result()

    def _template(self, name: str):
        return load_broker_config(os.path.join(CONF_DIR, self.brokers[name]),
                                  overrides={**self.overrides.get("*", {}), **self.overrides.get(name, {})}).brokerConfig

    def run_until(self, predicate: Callable[[], bool], timeout_ms: float, poll_ms: float = 100) -> float:
        """Let the cluster run until `predicate()` holds (virtual ms on the simulator, wall ms on the
        real runtime); returns the ms it took, TimeoutError past `timeout_ms`."""
        if self.runtime == "sim":
            return self.sim.run_until(predicate, timeout_ms, poll_ms)
        start = time.monotonic()
        while not predicate():
            if (time.monotonic() - start) * 1000.0 >= timeout_ms:
                raise TimeoutError(f"condition not reached within {timeout_ms:.0f} ms")
            time.sleep(poll_ms / 1000.0)
        return (time.monotonic() - start) * 1000.0

    def run_for(self, ms: float) -> None:
        """Let the cluster run: virtual ms on the simulator, wall ms on the real runtime."""
        if self.runtime == "sim":
            self.sim.run_for(ms)
        else:
            time.sleep(ms / 1000.0)

    def events(self):
        return self.sim.tracer.events if self.runtime == "sim" else self.real.merged_events()

    def close(self) -> None:
        if self.runtime == "sim":
            self.sim.close()
        else:
            self.real.close()

    def __enter__(self) -> "Cluster":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _spec(cls: type, spec, fields: dict):
    if spec is not None and fields:
        raise TypeError(f"give a {cls.__name__} or its fields, not both ({', '.join(fields)})")
    if spec is not None and not isinstance(spec, cls):
        raise TypeError(f"expected a {cls.__name__}, not {type(spec).__name__}")
    return spec if spec is not None else cls(**fields)


def _read_properties(path: str) -> dict[str, object]:
    from rmqlab.config import read_properties_file

    return {e.key: e.value for e in read_properties_file(path)}


def _write_properties(path: str, values: dict[str, object]) -> str:
    with open(path, "w") as f:
        for k, v in values.items():
            f.write(f"{k}={v}\n")
    return path
