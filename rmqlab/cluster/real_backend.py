"""The real-process backend: each node of a Deployment an OS process (rmqlab.runtime.real_cluster.
RealCluster), started as an operator would (`rmqlab broker -c <file>`), from a configuration file
written under <root>/conf/: the template's keys, free ports of this machine, and the Deployment's
settings. Clients are `rmqlab producer|consumer` processes."""

from __future__ import annotations

import asyncio
import concurrent.futures
import json
import os
import socket
import sys
import tempfile
import time
from collections.abc import Callable

from rmqlab.cluster.backend import ADMIN_NODE, Backend, Endpoints
from rmqlab.cluster.deployment import Deployment
from rmqlab.example.benchmark import ClientSpec
from rmqlab.runtime.component import Component

SERVER_START_TIMEOUT_S = 60


class RealBackend(Backend):
    runtime = "real"
    trace_grows = False
    start_poll_ms = 50.0

    def __init__(self, root_dir: str, *, seed: int, relay: bool = True, proxy: str | None = None,
                 decision_points: object | None = None):
        """`relay=False` connects the processes directly, without the fault relay: kill, crash and
        restart still work, link faults do not. `decision_points` are refused: they are Python
        callables, and a server started from a conf file cannot take them."""
        if decision_points is not None:
            raise ValueError("decision_points are Python callables handed to the simulator's components: a real "
                             "process cannot take them (use runtime='sim')")
        if proxy == "local" and relay:
            raise ValueError("proxy='local' needs relay=False: each broker's Proxy listens on its own host "
                             "(its node's loopback address) at the one gRPC port, which the relay cannot forward")
        from rmqlab.runtime.real_cluster import RealCluster

        self.root_dir = root_dir  # nodes/: the processes' directories, conf/: their configuration files
        self.real = RealCluster(os.path.join(root_dir, "nodes"), seed=seed, relay=relay)
        self.nemesis = self.real.nemesis
        self.tracer = self.real.tracer
        self.components: dict[str, Component] = {}  # the processes' components are not ours to read
        self._started = False
        self._final_events: list | None = None

    # -- building -----------------------------------------------------------------------------
    def build(self, d: Deployment) -> Endpoints:
        from rmqlab.config.jsonconf import parse_json_object
        from rmqlab.runtime.real_cluster import free_ports

        real = self.real
        if d.mode.own_hosts and real.use_relay:
            raise ValueError(f"mode {d.mode.name!r} needs relay=False on the real runtime: each broker must connect "
                             "from the host it advertises (a returning master's pre-online finds its members' HA "
                             "connections by host), and the relay makes them come from elsewhere")
        controllers = d.controller_nodes
        peer_ports = _controller_ports(len(controllers))
        raft_ports = {p + _raft_port_offset() for p in peer_ports}
        namesrvs, brokers = d.namesrvs, d.brokers
        # DLedger CommitLog brokers (dLegerSelfId in their templates) serve DLedger on a port of their
        # own too: a free one each, and dLegerPeers rewritten to name them.
        broker_peer_ids = d.broker_peer_ids()
        while True:  # the other ports must not be a controller's Raft port (pysyncobj binds it itself)
            chosen = free_ports(len(namesrvs) + 2 * len(brokers) + len(broker_peer_ids) + 1)
            ns_ports, ports = chosen[:len(namesrvs)], chosen[len(namesrvs):len(namesrvs) + 2 * len(brokers)]
            grpc_port = chosen[-1]
            broker_peer_ports = dict(zip(broker_peer_ids, chosen[len(namesrvs) + 2 * len(brokers):-1]))
            if not raft_ports & set(chosen) and not set(peer_ports) & set(chosen):
                break
        broker_peers = ";".join(f"{broker_peer_ids[n]}-127.0.0.1:{p}" for n, p in broker_peer_ports.items())
        peers = {f"n{n.controller_index}": f"127.0.0.1:{peer_ports[n.controller_index]}" for n in controllers}
        ends = Endpoints(";".join(f"127.0.0.1:{p}" for p in ns_ports), ";".join(peers.values()))
        conf_dir = os.path.join(self.root_dir, "conf")
        os.makedirs(conf_dir, exist_ok=True)
        for i, node in enumerate(namesrvs):
            values: dict[str, object] = _read_properties(d.template_path(node.template)) if node.template else {}
            values["listenPort"] = ns_ports[i]
            relayed = [ns_ports[i]]
            if node.controller_index is not None:  # enableControllerInNamesrv: it serves the controller too
                values.update(d.controller_settings(node, peers, real.store_dir(node.name)))
                relayed.append(peer_ports[node.controller_index])
            # A classic cluster keeps its historical file name (namesrv.conf).
            conf = _write_properties(os.path.join(conf_dir, f"{node.name}.conf"), values)
            real.add_node(node.name, [sys.executable, "-m", "rmqlab.cli", "namesrv", "-c", conf], ports=relayed)
        for node in d.standalone_controllers:
            values = _read_properties(d.template_path(node.template))
            values.update(d.controller_settings(node, peers, real.store_dir(node.name)))
            conf = _write_properties(os.path.join(conf_dir, f"{node.name}.conf"), values)
            real.add_node(node.name, [sys.executable, "-m", "rmqlab.cli", "controller", "-c", conf],
                          ports=[peer_ports[node.controller_index]])
        proxy_conf = os.path.join(conf_dir, "rmq-proxy.json")
        if d.proxy is not None:
            # rmq-proxy.json (JSON, RocketMQ's key names): the template's keys, the port, the overrides.
            template = d.proxy_template_path
            with open(template) as f:
                values = {e.key: e.value for e in parse_json_object(f.read(), template)}
            values.update({"grpcServerPort": grpc_port, **d.proxy_overrides})
            with open(proxy_conf, "w") as f:
                json.dump(values, f, indent=2)
        for i, node in enumerate(brokers):
            listen, ha = ports[2 * i], ports[2 * i + 1]
            conf = os.path.join(conf_dir, f"{node.name}.properties")
            argv = [sys.executable, "-m", "rmqlab.cli", "broker", "-c", conf]
            if d.embedded:  # as the start command of conf/README.md: -n "all the name servers"
                argv += ["-n", ends.namesrv_addr]
            if d.proxy == "local":
                argv += ["--enable-proxy", "-pc", proxy_conf]
            own_ports = [listen, ha] + ([broker_peer_ports[node.name]] if node.name in broker_peer_ports else [])
            real.add_node(node.name, argv, ports=own_ports)
            values = _read_properties(d.template_path(node.template))
            values.update({"listenPort": listen, "haListenPort": ha})
            if node.name in broker_peer_ports:
                values["dLegerPeers"] = broker_peers
            if d.proxy == "local" or d.mode.own_hosts:  # a host of its own, as on its own machine
                ip = real.node_ip(node.name)
                values.update({"brokerIP1": ip, "brokerIP2": ip, "bindAddress": ip})
            if d.proxy == "local":
                ends.proxy_endpoints.append(f"{real.node_ip(node.name)}:{grpc_port}")
            values.update(d.broker_settings(node.name, real.store_dir(node.name), ends.namesrv_addr,
                                            ends.controller_addr))
            _write_properties(conf, values)
        if d.proxy_node is not None:
            # No relay port: clients reach the Proxy directly; its own connections to the brokers
            # go through the relay like every node's.
            real.add_node(d.proxy_node.name, [sys.executable, "-m", "rmqlab.cli", "proxy", "-n", ends.namesrv_addr,
                                              "-pc", proxy_conf])
            ends.proxy_endpoints.append(f"127.0.0.1:{grpc_port}")
        return ends

    def add_client(self, name: str, client: ClientSpec | Callable[[], Component], address: str | None) -> None:
        if address is None:
            raise TypeError(f"add_client {name!r}: on the real runtime a client is a process, so give a "
                            "description (ProducerSpec or ConsumerSpec), not a factory of this process's objects")
        if self._started:
            raise RuntimeError(f"add_client {name!r}: on the real runtime add clients before Cluster.start() "
                               "(each process is given the whole cluster map when it spawns); add it with "
                               "start=False and start it later with start_client")
        where = "--endpoints" if client.protocol == "grpc" else "-n"
        self.real.add_node(name, [sys.executable, "-m", "rmqlab.cli", client.kind, where, address, *client.to_argv()])

    # -- processes ----------------------------------------------------------------------------
    def start_servers(self, names: list[str]) -> None:
        """In parallel, each waited for until its node.start (RealCluster.start)."""
        self._started = True
        with concurrent.futures.ThreadPoolExecutor(len(names)) as pool:
            for f in [pool.submit(self.real.start, name, SERVER_START_TIMEOUT_S) for name in names]:
                f.result()

    def start(self, name: str) -> None:
        self.real.start(name)

    def stop(self, name: str) -> None:
        self.real.stop(name)

    def alive(self, name: str) -> bool:
        return self.real.alive(name)

    def store_dir(self, name: str) -> str:
        return self.real.store_dir(name)

    # -- time ---------------------------------------------------------------------------------
    def now_ms(self) -> float:
        return time.monotonic() * 1000.0

    def run_until(self, predicate: Callable[[], bool], timeout_ms: float, poll_ms: float) -> float:
        start = time.monotonic()
        while not predicate():
            if (time.monotonic() - start) * 1000.0 >= timeout_ms:
                raise TimeoutError(f"condition not reached within {timeout_ms:.0f} ms")
            time.sleep(poll_ms / 1000.0)
        return (time.monotonic() - start) * 1000.0

    def run_for(self, ms: float) -> None:
        time.sleep(ms / 1000.0)

    # -- the trace, the admin tool ----------------------------------------------------------------
    def events(self) -> list:
        if self._final_events is not None:  # closed, its files removed: the trace read at close
            return self._final_events
        return self.real.merged_events()

    def node_events(self, name: str) -> list:
        return self.real.events(name)

    def admin(self, work: Callable, namesrv_addr: str) -> None:
        """An operator's tool run from this process (a RealNode of its own, on a thread of its own:
        the caller may be running an event loop, a notebook)."""
        from rmqlab.client import ClientProcess, DefaultMQAdminExt

        async def on_real() -> None:
            from rmqlab.runtime.real import RealNode

            with tempfile.TemporaryDirectory(prefix="rmqlab-admin-") as store_dir:  # holds nothing
                node = RealNode(ADMIN_NODE, store_dir)
                process = ClientProcess(admin=DefaultMQAdminExt(namesrv_addr))
                await process.start(node)
                try:
                    await work(process["admin"], self.now_ms)
                finally:
                    await process.shutdown()
                    await node.close()

        with concurrent.futures.ThreadPoolExecutor(1) as pool:
            pool.submit(asyncio.run, on_real()).result()

    def close(self, keep_events: bool) -> None:
        self.real.close()
        if keep_events:  # the processes' trace files go with the directory
            self._final_events = self.real.merged_events()


def _read_properties(path: str) -> dict[str, object]:
    from rmqlab.config import read_properties_file

    return {e.key: e.value for e in read_properties_file(path)}


def _write_properties(path: str, values: dict[str, object]) -> str:
    with open(path, "w") as f:
        for k, v in values.items():
            f.write(f"{k}={v}\n")
    return path


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
