"""rmqlab.cluster: a deployment mode of RocketMQ (its docs' "部署方式", conf/README.md) as running
software, on either runtime.

    c = Cluster("2m-2s-async")                      # the simulator, seeded
    c.start()
    c.nemesis.crash("broker-a")                       # kill / crash / restart / suspend / partition ...
    c.run_for(5_000)                                  # virtual ms (simulator); a sleep on the real runtime
    c.events()                                        # the event trace

    c = Cluster("2m-2s-sync", runtime="real", root_dir="/tmp/lab")   # the same, as OS processes
    c.close()                                         # without root_dir: its temporary directory is removed

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

A classic cluster is one NameServer ("namesrv", listening on 127.0.0.1:9876 on the simulator) and
the brokers of the mode, each configured from its conf/ template exactly as an operator would start
it (`rmqlab broker -c conf/2m-2s-async/broker-a.properties`): only the store directory — and on
the real runtime the ports, which must be free on this machine — are changed. Node names are the
template names: broker-a, broker-a-s, broker-b, broker-b-s.

Controller mode ("主备自动切换模式部署", apache/rocketmq docs/cn/controller/deploy.md; conf/controller/),
broker set broker-a of three replicas broker-n0..n2 (enableControllerMode=true; the controllers
elect the master):

    Cluster("controller-embedded")     name servers namesrv-n0..n2, each also a controller
                                       (enableControllerInNamesrv=true); brokers get -n "all three"
    Cluster("controller-standalone")   one name server "namesrv" and controllers controller-n0..n2
                                       (`rmqlab controller -c conf/controller/controller-n0.conf`)
    Cluster(..., controllers=1 | 3 | 5)  the deploy guide: "a single controller still performs failover";
                                       n3, n4 are written like n0..n2 (next peer ports 9880, 9881)
    Cluster(..., controller_overrides={"enableElectUncleanMaster": True})   every controller

`namesrv_addr` is then the ";" list of the name servers, `controller_addr` the brokers'
controllerAddr list; `master()` names the broker that is master now and `controller_leader()` the
controller serving as leader, both read from the trace (the brokers' and the controllers' `role`
events), so they work the same on either runtime; `master_changes()` lists every election a
broker took part in (time, node, epoch), from which a lab measures failover times.

Proxy (RocketMQ's docs/cn/proxy/deploy_guide.md: Local and Cluster mode), for clients of the 5.x
protocol, on either runtime:

    Cluster("2m-noslave", proxy="cluster")   a node "proxy": `rmqlab proxy -n <name servers> -pc
                                       rmq-proxy.json` (conf/rmq-proxy.json); it survives a broker
                                       crash and sends to the brokers that are left
    Cluster("2m-noslave", proxy="local")     every broker runs `rmqlab broker ... --enable-proxy`, on
                                       a host of its own (brokerIP1 = brokerIP2 = bindAddress =
                                       127.0.0.x): a Local-mode route names each broker's host with
                                       the one gRPC port, as if each were a machine of its own; a
                                       broker's crash takes its Proxy down with it
    Cluster(..., proxy_overrides={"topicRouteServiceCacheRefreshSeconds": 1})   rmq-proxy.json keys

`proxy_endpoints` lists the addresses clients dial ("host:port"). On the real runtime the Proxy
serves gRPC (grpcio; proxy="local" needs relay=False, each Proxy on its node's loopback address,
with a free gRPC port); on the simulator, where grpcio cannot open sockets, it serves the same
MessagingService over framed RPC on the simulated streams (rmqlab.proxy.grpc.framed, a deviation
from RocketMQ), at the template's port 8081, local hosts 127.0.0.2, 127.0.0.3, ... in broker order.

rmqlab's 5.x clients (rmqlab.client.grpc: Producer, SimpleConsumer) are described like the others,
with protocol="grpc"; they connect to `proxy_endpoints` (all of them: the access point), over
framed RPC on the simulator and gRPC on the real runtime (`rmqlab producer --protocol grpc
--endpoints ...`):

    c = Cluster("2m-noslave", proxy="cluster", seed=7)
    c.add_consumer("consumer", topic="TopicTest", group="CG", protocol="grpc", start=False)   # SimpleConsumer
    c.add_producer("producer", topic="TopicTest", interval_ms=50, duration_ms=20_000, protocol="grpc", start=False)
    c.start(); c.create_topic("TopicTest"); c.start_client("consumer"); c.start_client("producer")

Their operations are `send`, `receive` and `ack` client events (rmqlab.client.grpc).

On the real runtime each controller also listens on its peer port + 1000 for Raft (pysyncobj binds
it itself, see rmqlab.controller.impl.raft_controller): the Cluster picks peer ports whose +1000 is
free too. That port is not behind the relay, so link faults (partitions, loss, delay) do not reach
Raft traffic between controllers on the real runtime (they reach everything on the simulator);
process faults (kill, crash, suspend) reach controllers alike on both.
"""

from __future__ import annotations

import asyncio
import atexit
import concurrent.futures
import json
import os
import shutil
import socket
import sys
import tempfile
import time
from collections.abc import Callable

from rmqlab.config import load_broker_config, load_controller_config, load_namesrv_config, load_proxy_config
from rmqlab.config.jsonconf import parse_json_object
from rmqlab.example.benchmark import ClientSpec, ConsumerSpec, ProducerSpec, build_client
from rmqlab.runtime.component import Component

CONF_DIR = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "conf")

_CONTROLLER_BROKERS = {f"broker-n{i}": f"controller/broker-n{i}.conf" for i in range(3)}
# mode -> {broker node name: template under conf/}
MODES: dict[str, dict[str, str]] = {
    "single-master": {"broker-a": "broker.conf"},
    "2m-noslave": {"broker-a": "2m-noslave/broker-a.properties", "broker-b": "2m-noslave/broker-b.properties"},
    "2m-2s-async": {n: f"2m-2s-async/{n}.properties" for n in ("broker-a", "broker-a-s", "broker-b", "broker-b-s")},
    "2m-2s-sync": {n: f"2m-2s-sync/{n}.properties" for n in ("broker-a", "broker-a-s", "broker-b", "broker-b-s")},
    "controller-embedded": dict(_CONTROLLER_BROKERS),
    "controller-standalone": dict(_CONTROLLER_BROKERS),
}
# Controller modes: where the controllers run (conf/controller/<prefix>-n<i>.conf).
CONTROLLER_MODES = {"controller-embedded": "namesrv", "controller-standalone": "controller"}
NAMESRV_PORT = 9876
CONTROLLER_PEER_PORT = 9877      # controller n<i> serves on 9877 + i (conf/controller/, conf/README.md)
EMBEDDED_NAMESRV_PORT_STEP = 10  # embedded name server n<i> listens on 9876 + 10 i (9876, 9886, 9896)
CONTROLLER_COUNTS = (1, 3, 5)
ADMIN_NODE = "mqadmin"  # the admin client of create_topic (a node of its own on the simulator)
MASTER_ROLES = ("SYNC_MASTER", "ASYNC_MASTER")
SIM_LOCAL_PROXY_NET = "127.0.0"  # simulator, proxy="local": broker i on host 127.0.0.(2 + i)
_DOWN_KINDS = ("node.kill", "node.crash", "node.stop")


class Cluster:
    def __init__(self, mode: str, runtime: str = "sim", *, seed: int = 0, root_dir: str | None = None,
                 overrides: dict[str, dict[str, object]] | None = None, mapped_file_size: int = 1024 * 1024,
                 relay: bool = True, controllers: int = 3,
                 controller_overrides: dict[str, object] | None = None, proxy: str | None = None,
                 proxy_overrides: dict[str, object] | None = None, decision_points=None):
        """`overrides` maps a node name (or "*" for every broker) to extra broker settings; the
        commitlog file size defaults to 1 MiB so rolling is visible in a lab. `relay=False` (real
        runtime only) connects the processes directly, without the fault relay: kill, crash and
        restart still work, link faults do not (benchmarks use it: an operator has no relay).
        Controller modes only: `controllers` (1, 3 or 5) and `controller_overrides`, settings for
        every controller (e.g. enableElectUncleanMaster).

        `proxy` (see the module docstring): "cluster" adds a node "proxy" (`rmqlab proxy -n ...
        -pc rmq-proxy.json`), "local" runs every broker with `--enable-proxy`; `proxy_overrides`
        are rmq-proxy.json settings. `proxy_endpoints` lists the addresses clients use.

        `decision_points` (simulator only): a rmqlab.common.decision_points.DecisionPoints, the
        rules the brokers and controllers use at its points instead of RocketMQ's."""
        if mode not in MODES:
            raise ValueError(f"unknown mode {mode!r}; expected one of {', '.join(MODES)}")
        if runtime not in ("sim", "real"):
            raise ValueError(f"runtime must be 'sim' or 'real', not {runtime!r}")
        if mode in CONTROLLER_MODES:
            if controllers not in CONTROLLER_COUNTS:
                raise ValueError(f"controllers must be one of {CONTROLLER_COUNTS} (a Raft group of an odd size), "
                                 f"not {controllers!r}")
        elif controllers != 3 or controller_overrides:
            raise ValueError(f"controllers / controller_overrides: mode {mode!r} has no controllers "
                             f"(controller modes: {', '.join(CONTROLLER_MODES)})")
        if decision_points is not None and runtime != "sim":
            raise ValueError("decision_points are Python callables handed to the simulator's components: a real "
                             "process cannot take them (use runtime='sim')")
        # rmqlab.common.decision_points: passed to the components that decide, only when given.
        self._components_options = {} if decision_points is None else {"decision_points": decision_points}
        if proxy not in (None, "cluster", "local"):
            raise ValueError(f"proxy must be None, 'cluster' or 'local', not {proxy!r}")
        if proxy == "local" and runtime == "real" and relay:
            raise ValueError("proxy='local' needs relay=False: each broker's Proxy listens on its own host "
                             "(its node's loopback address) at the one gRPC port, which the relay cannot forward")
        self.proxy, self.proxy_overrides = proxy, dict(proxy_overrides or {})
        self.proxy_endpoints: list[str] = []
        self.mode, self.runtime, self.seed = mode, runtime, seed
        self.brokers = dict(MODES[mode])
        self.overrides = overrides or {}
        self.controller_overrides = dict(controller_overrides or {})
        self.mapped_file_size = mapped_file_size
        # A root of our own making is removed by close() (also at interpreter exit, e.g. after
        # Ctrl-C); a root_dir given by the caller is the caller's, and is left as it is.
        self._own_root = root_dir is None
        self.root_dir = root_dir or tempfile.mkdtemp(prefix=f"rmqlab-{mode}-")
        self._closed = False
        self._final_events: list | None = None
        if self._own_root:
            atexit.register(self.close)
        try:
            self._build(controllers, relay)
        except BaseException:  # nothing to close later: remove what was made
            self.close()
            raise

    def _build(self, controllers: int, relay: bool) -> None:
        mode, runtime, seed = self.mode, self.runtime, self.seed
        # Name servers and controllers: node name -> template under conf/ (None: the defaults,
        # `rmqlab namesrv` without -c). Embedded: the controllers are the name servers.
        where = CONTROLLER_MODES.get(mode)
        self.controller_nodes = [f"{where}-n{i}" for i in range(controllers)] if where else []
        if where == "namesrv":
            self.namesrvs: dict[str, str | None] = {n: self._controller_template(n) for n in self.controller_nodes}
            self.controllers: dict[str, str] = {}
        else:
            self.namesrvs = {"namesrv": None}
            self.controllers = {n: self._controller_template(n) for n in self.controller_nodes}
        self.controller_addr = ""  # the brokers' controllerAddr (controller modes)
        self._master_scans: dict[str | None, _LeaderScan] = {}
        self._controller_scan = _LeaderScan(self.controller_nodes, lambda e: e.fields.get("component") == "raft",
                                            lambda e: e.fields.get("to") == "LEADER", "term")
        self.components: dict[str, Component] = {}
        self.clients: dict[str, ClientSpec | None] = {}   # client node -> its description (None: a factory)
        self._start_with_cluster: list[str] = []           # clients added with start=True before start()
        self._started = False
        if runtime == "sim":
            from rmqlab.runtime.sim import Simulation

            self.sim = Simulation(seed=seed, root_dir=os.path.join(self.root_dir, "nodes"))
            self._build_sim()
            self.nemesis = self.sim.nemesis
        else:
            from rmqlab.runtime.real_cluster import RealCluster

            self.real = RealCluster(os.path.join(self.root_dir, "nodes"), seed=seed, relay=relay)
            self._build_real()
            self.nemesis = self.real.nemesis

    # -- configuration -------------------------------------------------------------------------
    @staticmethod
    def _controller_template(name: str) -> str:
        """conf/controller/<name>.conf; n3 and n4 (five controllers) are written like n0."""
        prefix, index = name.rsplit("-n", 1)
        return f"controller/{prefix}-n{index if int(index) < 3 else 0}.conf"

    def _controller_settings(self, name: str, peers: dict[str, str], store_dir: str) -> dict[str, object]:
        """What differs from the template of controller `name`: the peers (for 1 or 5 controllers,
        or the free ports of the real runtime), its own id, and its store."""
        index = int(name.rsplit("-n", 1)[1])
        values: dict[str, object] = {
            "controllerDLegerPeers": ";".join(f"{n}-{a}" for n, a in peers.items()),
            "controllerDLegerSelfId": f"n{index}",
            "controllerStorePath": os.path.join(store_dir, "controller"),
            **self.controller_overrides}
        return values

    def _broker_overrides(self, name: str, store_dir: str, namesrv_addr: str) -> dict[str, object]:
        values: dict[str, object] = {"storePathRootDir": store_dir, "namesrvAddr": namesrv_addr,
                                     "mappedFileSizeCommitLog": self.mapped_file_size}
        if self.controller_nodes:
            values["controllerAddr"] = self.controller_addr
        if self.proxy == "local" and self.runtime == "sim":  # a host of its own, as on its own machine
            host = self._sim_local_host(name)
            values.update({"brokerIP1": host, "brokerIP2": host, "bindAddress": host})
        return {**values, **self.overrides.get("*", {}), **self.overrides.get(name, {})}

    def broker_config(self, name: str, store_dir: str, namesrv_addr: str):
        return load_broker_config(os.path.join(CONF_DIR, self.brokers[name]),
                                  overrides=self._broker_overrides(name, store_dir, namesrv_addr))

    def _build_sim(self) -> None:
        from rmqlab.broker import BrokerController
        from rmqlab.controller.controller_manager import ControllerManager
        from rmqlab.namesrv import NamesrvController
        from rmqlab.proxy.proxy_controller import ProxyController

        sim = self.sim
        # The template ports: peer port 9877 + i, embedded name server 9876 + 10 i.
        peers = {f"n{i}": f"127.0.0.1:{CONTROLLER_PEER_PORT + i}" for i in range(len(self.controller_nodes))}
        self.controller_addr = ";".join(peers.values())
        ns_ports = {name: NAMESRV_PORT + EMBEDDED_NAMESRV_PORT_STEP * i for i, name in enumerate(self.namesrvs)}
        self.namesrv_addr = ";".join(f"127.0.0.1:{p}" for p in ns_ports.values())

        for name, template in self.namesrvs.items():
            def namesrv(name: str = name, template: str | None = template) -> Component:
                overrides: dict[str, object] = {"listenPort": ns_ports[name]}
                if template is not None:
                    overrides.update(self._controller_settings(name, peers, sim.store_dir(name)))
                config = load_namesrv_config(os.path.join(CONF_DIR, template) if template else None,
                                             overrides=overrides)
                c = NamesrvController.from_startup_config(config, **(self._components_options if template else {}))
                self.components[name] = c
                return c

            sim.add_node(name, namesrv)
        for name, template in self.controllers.items():
            def controller(name: str = name, template: str = template) -> Component:
                config = load_controller_config(os.path.join(CONF_DIR, template),
                                                overrides=self._controller_settings(name, peers, sim.store_dir(name)))
                c = ControllerManager.from_startup_config(config, **self._components_options)
                self.components[name] = c
                return c

            sim.add_node(name, controller)
        for name in self.brokers:
            def broker(name: str = name) -> Component:
                c = BrokerController(self.broker_config(name, sim.store_dir(name), self.namesrv_addr),
                                     **self._components_options)
                self.components[name] = c
                if self.proxy == "local":
                    return ProxyController(self._sim_proxy_config(), broker=c, transport="framed")
                return c

            sim.add_node(name, broker)
        if self.proxy == "local":
            port = self._sim_proxy_config().grpcServerPort
            self.proxy_endpoints = [f"{self._sim_local_host(name)}:{port}" for name in self.brokers]
        elif self.proxy == "cluster":
            def proxy() -> Component:
                c = ProxyController(self._sim_proxy_config(), transport="framed")
                self.components["proxy"] = c
                return c

            sim.add_node("proxy", proxy)
            config = self._sim_proxy_config()
            self.proxy_endpoints = [f"{config.localServeAddr}:{config.grpcServerPort}"]

    def _sim_local_host(self, broker: str) -> str:
        """Simulator, proxy="local": the host of a broker and its Proxy (module docstring)."""
        return f"{SIM_LOCAL_PROXY_NET}.{2 + list(self.brokers).index(broker)}"

    def _sim_proxy_config(self):
        """conf/rmq-proxy.json with the overrides and -n, as `rmqlab proxy -n ... -pc` (or the
        Local-mode Proxy of `rmqlab broker --enable-proxy -pc`) loads it."""
        return load_proxy_config(os.path.join(CONF_DIR, "rmq-proxy.json"), namesrv_addr=self.namesrv_addr,
                                 overrides=self.proxy_overrides, local=self.proxy == "local").proxyConfig

    def _build_real(self) -> None:
        from rmqlab.runtime.real_cluster import free_ports

        real = self.real
        embedded = bool(self.controller_nodes) and not self.controllers
        peer_ports = _controller_ports(len(self.controller_nodes))
        raft_ports = {p + _raft_port_offset() for p in peer_ports}
        while True:  # the other ports must not be a controller's Raft port (pysyncobj binds it itself)
            chosen = free_ports(len(self.namesrvs) + 2 * len(self.brokers) + 1)
            ns_ports, ports = chosen[:len(self.namesrvs)], chosen[len(self.namesrvs):-1]
            grpc_port = chosen[-1]
            if not raft_ports & set(chosen) and not set(peer_ports) & set(chosen):
                break
        peers = {f"n{i}": f"127.0.0.1:{p}" for i, p in enumerate(peer_ports)}
        self.controller_addr = ";".join(peers.values())
        self.namesrv_addr = ";".join(f"127.0.0.1:{p}" for p in ns_ports)
        conf_dir = os.path.join(self.root_dir, "conf")
        os.makedirs(conf_dir, exist_ok=True)
        for i, (name, template) in enumerate(self.namesrvs.items()):
            values: dict[str, object] = _read_properties(os.path.join(CONF_DIR, template)) if template else {}
            values["listenPort"] = ns_ports[i]
            relayed = [ns_ports[i]]
            if template is not None:
                values.update(self._controller_settings(name, peers, real.store_dir(name)))
                relayed.append(peer_ports[i])
            # A classic cluster keeps its historical file name (namesrv.conf).
            conf = _write_properties(os.path.join(conf_dir, f"{name}.conf"), values)
            real.add_node(name, [sys.executable, "-m", "rmqlab.cli", "namesrv", "-c", conf], ports=relayed)
        for i, (name, template) in enumerate(self.controllers.items()):
            values = _read_properties(os.path.join(CONF_DIR, template))
            values.update(self._controller_settings(name, peers, real.store_dir(name)))
            conf = _write_properties(os.path.join(conf_dir, f"{name}.conf"), values)
            real.add_node(name, [sys.executable, "-m", "rmqlab.cli", "controller", "-c", conf], ports=[peer_ports[i]])
        proxy_conf = os.path.join(conf_dir, "rmq-proxy.json")
        if self.proxy is not None:
            # rmq-proxy.json (JSON, RocketMQ's key names): the template's keys, the port, the overrides.
            template = os.path.join(CONF_DIR, "rmq-proxy.json")
            with open(template) as f:
                values = {e.key: e.value for e in parse_json_object(f.read(), template)}
            values.update({"grpcServerPort": grpc_port, **self.proxy_overrides})
            with open(proxy_conf, "w") as f:
                json.dump(values, f, indent=2)
        for i, name in enumerate(self.brokers):
            listen, ha = ports[2 * i], ports[2 * i + 1]
            conf = os.path.join(conf_dir, f"{name}.properties")
            argv = [sys.executable, "-m", "rmqlab.cli", "broker", "-c", conf]
            if embedded:  # as the start command of conf/README.md: -n "all the name servers"
                argv += ["-n", self.namesrv_addr]
            if self.proxy == "local":
                argv += ["--enable-proxy", "-pc", proxy_conf]
            real.add_node(name, argv, ports=[listen, ha])
            values = _read_properties(os.path.join(CONF_DIR, self.brokers[name]))
            values.update({"listenPort": listen, "haListenPort": ha})
            if self.proxy == "local":  # a host of its own, as on its own machine (see __init__)
                values.update({"brokerIP1": real.node_ip(name), "bindAddress": real.node_ip(name)})
                self.proxy_endpoints.append(f"{real.node_ip(name)}:{grpc_port}")
            values.update(self._broker_overrides(name, real.store_dir(name), self.namesrv_addr))
            _write_properties(conf, values)
        if self.proxy == "cluster":
            # No relay port: clients reach the Proxy directly; its own connections to the brokers
            # go through the relay like every node's.
            real.add_node("proxy", [sys.executable, "-m", "rmqlab.cli", "proxy", "-n", self.namesrv_addr,
                                    "-pc", proxy_conf])
            self.proxy_endpoints.append(f"127.0.0.1:{grpc_port}")

    # -- running -------------------------------------------------------------------------------
    def start(self, timeout_ms: float = 30_000) -> None:
        """Start the name servers, the controllers and the brokers, wait until every name server
        has registered every broker (a broker's boot line comes before its first registration, and
        a client that asks for a route earlier gets "no route info"; in controller mode a broker
        registers only once the controllers gave it a role), then start the clients added with
        start=True."""
        servers = [*self.namesrvs, *self.controllers, *self.brokers, *(["proxy"] if self.proxy == "cluster" else [])]
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
        """How many brokers the name server has registered so far (read from the trace); with
        several name servers, the fewest any of them has registered."""
        counts = []
        for namesrv in self.namesrvs:
            events = self.sim.tracer.events if self.runtime == "sim" else self.real.events(namesrv)
            counts.append(sum(1 for e in events if e.node == namesrv and e.kind == "log"
                              and e.fields.get("message", "").startswith("new broker registered")))
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
            names = [n for n in self.brokers if broker_name is None or self._template(n).brokerName == broker_name]
            self._master_scans[broker_name] = _LeaderScan(
                names, lambda e: e.fields.get("component", "broker") == "broker",
                lambda e: e.fields.get("to") in MASTER_ROLES, "epoch")
        return self._master_scans[broker_name](self.events(), self.runtime == "sim")

    def controller_leader(self) -> str | None:
        """The controller node that leads the controllers' Raft group now (its last `role` event
        is LEADER, the highest term among the running ones), or None (no majority, or an election
        under way). Read from the trace; the leader serves requests once its first entry of the
        term is applied, a few ms later."""
        return self._controller_scan(self.events(), self.runtime == "sim")

    def controller_addr_of(self, node: str) -> str:
        """The peer address controller `node` serves brokers and mqadmin on."""
        return self.controller_addr.split(";")[self.controller_nodes.index(node)]

    def add_client(self, name: str, client: ClientSpec | Callable[[], Component], start: bool = True) -> None:
        """A client node. `client` is a description (ProducerSpec, ConsumerSpec: either runtime)
        or, on the simulator only, a factory of the component (a new one per start). On the real
        runtime add clients before `start()` (every process gets the cluster map when it spawns).
        `start`: now, or with the cluster when it has not started yet; else `start_client` later."""
        spec = client if isinstance(client, (ProducerSpec, ConsumerSpec)) else None
        if spec is None and not callable(client):
            raise TypeError(f"add_client {name!r}: expected a ProducerSpec, a ConsumerSpec or (on the simulator) "
                            f"a component factory, not {type(client).__name__}")
        address = self._client_address(name, spec) if spec is not None else None
        if self.runtime == "sim":
            factory = (lambda: build_client(spec, address)) if spec is not None else client

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
            where = "--endpoints" if spec.protocol == "grpc" else "-n"
            argv = [sys.executable, "-m", "rmqlab.cli", spec.kind, where, address, *spec.to_argv()]
            self.real.add_node(name, argv)
        self.clients[name] = spec
        if start:
            if self._started:
                self.start_client(name)
            else:
                self._start_with_cluster.append(name)

    def _client_address(self, name: str, spec: ClientSpec) -> str:
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

    def create_topic(self, topic: str, queues: int = 4, timeout_ms: float = 10_000,
                     message_type: str | None = None) -> None:
        """`mqadmin updateTopic -c <cluster> -t topic -r queues -w queues [-a +message.type=FIFO]`,
        then wait until the name server routes the topic to every master (clients learn of a topic
        created later only at their next 30 s route refresh). `message_type`: NORMAL, FIFO, DELAY
        or TRANSACTION, what a 5.x Proxy lets clients send to the topic."""
        from rmqlab.broker.topic.topic_config import TopicConfig
        from rmqlab.client import DefaultMQAdminExt, MQClientException

        # Controller mode: every set has a master once start() returned (the controllers elected it).
        masters = {c.brokerName for c in map(self._template, self.brokers) if c.brokerId == 0 or c.enableControllerMode}
        clusters = sorted({c.brokerClusterName for c in map(self._template, self.brokers)})

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

        self._admin(create)

    def create_group(self, group: str, orderly: bool = False) -> None:
        """`mqadmin updateSubGroup -c <cluster> -g group [-o true]` on every master: with `orderly`
        (consumeMessageOrderly) a 5.x Proxy serves the group as FIFO."""
        from rmqlab.broker.subscription.subscription_group_config import SubscriptionGroupConfig

        clusters = sorted({c.brokerClusterName for c in map(self._template, self.brokers)})

        async def create(admin, now_ms) -> None:
            for cluster_name in clusters:
                await admin.create_and_update_subscription_group_config_by_cluster(
                    cluster_name, SubscriptionGroupConfig(group, consume_message_orderly=orderly))

        self._admin(create)

    def _admin(self, work: Callable) -> None:
        """Run `await work(admin, now_ms)` with a DefaultMQAdminExt: a node of its own on the
        simulator, an operator's tool run from this process on the real runtime."""
        from rmqlab.client import ClientProcess, DefaultMQAdminExt

        if self.runtime == "sim":
            if ADMIN_NODE not in self.sim.components:
                self.sim.add_node(ADMIN_NODE, lambda: ClientProcess(admin=DefaultMQAdminExt(self.namesrv_addr)))
                self.sim.start(ADMIN_NODE)
            self.sim.run(work(self.sim.components[ADMIN_NODE]["admin"], self.sim.now_ms))
            return

        async def on_real() -> None:
            from rmqlab.runtime.real import RealNode

            with tempfile.TemporaryDirectory(prefix="rmqlab-admin-") as store_dir:  # holds nothing
                node = RealNode(ADMIN_NODE, store_dir)
                process = ClientProcess(admin=DefaultMQAdminExt(self.namesrv_addr))
                await process.start(node)
                try:
                    await work(process["admin"], lambda: time.monotonic() * 1000.0)
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
        if self._final_events is not None:  # closed, its files removed: the trace read at close
            return self._final_events
        return self.sim.tracer.events if self.runtime == "sim" else self.real.merged_events()

    def close(self) -> None:
        """Stop every node; a root directory this Cluster made (no root_dir given) is removed, so
        nothing is left under the temporary directory. events() still answers afterwards. Idempotent."""
        if self._closed:
            return
        self._closed = True
        try:
            if hasattr(self, "sim"):
                self.sim.close()
            elif hasattr(self, "real"):  # (neither: the constructor failed before making one)
                self.real.close()
                if self._own_root:  # the processes' trace files go with the directory
                    self._final_events = self.real.merged_events()
        finally:
            if self._own_root:
                shutil.rmtree(self.root_dir, ignore_errors=True)
                atexit.unregister(self.close)

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


class _LeaderScan:
    """Of `names`, the running node whose last `role` event (passing `counts`) in its current
    incarnation `leads`, with the highest `rank_field` (epoch, term) of that event. Fed the trace
    from where it stopped when the trace only grows (the simulator's), from scratch otherwise."""

    def __init__(self, names: list[str], counts: Callable, leads: Callable, rank_field: str):
        self.names, self.counts, self.leads, self.rank_field = set(names), counts, leads, rank_field
        self._reset()

    def _reset(self) -> None:
        self.seen = 0
        self.last: dict[str, tuple[bool, int]] = {}
        self.down: set[str] = set()

    def __call__(self, events: list, grows: bool) -> str | None:
        if not grows or len(events) < self.seen:
            self._reset()
        for e in events[self.seen:]:
            if e.node not in self.names:
                continue
            if e.kind in _DOWN_KINDS or e.kind == "node.restart":
                # A new incarnation starts without a role (its role events may precede its node.start).
                self.last.pop(e.node, None)
                if e.kind == "node.restart":
                    self.down.discard(e.node)
                else:
                    self.down.add(e.node)
            elif e.kind == "role" and self.counts(e):
                self.last[e.node] = (bool(self.leads(e)), int(e.fields.get(self.rank_field) or 0))
        self.seen = len(events)
        ranked = [(rank, name) for name, (lead, rank) in self.last.items() if lead and name not in self.down]
        return max(ranked)[1] if ranked else None


def _raft_port_offset() -> int:
    from rmqlab.controller.impl.raft_controller import RAFT_PORT_OFFSET

    return RAFT_PORT_OFFSET


def _controller_ports(n: int) -> list[int]:
    """`n` free ports whose Raft port (+ RAFT_PORT_OFFSET, bound by pysyncobj itself) is free too."""
    from rmqlab.runtime.real_cluster import free_ports

    if n == 0:
        return []
    offset = _raft_port_offset()
    for _ in range(50):
        chosen: list[int] = []
        for p in free_ports(3 * n):
            if p + offset > 65535 or p + offset in chosen or p - offset in chosen:
                continue
            with socket.socket() as s:
                try:
                    s.bind(("127.0.0.1", p + offset))
                except OSError:
                    continue
            chosen.append(p)
            if len(chosen) == n:
                return chosen
    raise RuntimeError(f"found no {n} free controller ports whose port + {offset} is free too")
