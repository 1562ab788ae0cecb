"""rmqlab.cluster: a deployment mode of seed 000 as running software, on either runtime (issue 4 §5).

    c = Cluster("2m-2s-async")                      # the simulator, seeded
    c.start()
    c.nemesis.crash("broker-a")                       # kill / crash / restart / suspend / partition ...
    c.run_for(5_000)                                  # virtual ms (simulator); a sleep on the real runtime
    c.events()                                        # the event trace

    c = Cluster("2m-2s-sync", runtime="real", root_dir="/tmp/lab")   # the same, as OS processes

A cluster is one NameServer ("namesrv", listening on 127.0.0.1:9876 on the simulator) and the
brokers of the mode, each configured from its conf/ template exactly as an operator would start
it (`rmqlab broker -c conf/2m-2s-async/broker-a.properties`): only the store directory — and on
the real runtime the ports, which must be free on this machine — are changed. Node names are the
template names: broker-a, broker-a-s, broker-b, broker-b-s.
"""

from __future__ import annotations

import os
import sys
import tempfile
import time
from collections.abc import Callable

from rmqlab.config import load_broker_config, load_namesrv_config
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


class Cluster:
    def __init__(self, mode: str, runtime: str = "sim", *, seed: int = 0, root_dir: str | None = None,
                 overrides: dict[str, dict[str, object]] | None = None, mapped_file_size: int = 1024 * 1024):
        """`overrides` maps a node name (or "*" for every broker) to extra broker settings; the
        commitlog file size defaults to 1 MiB so rolling is visible in a lab."""
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
        if runtime == "sim":
            from rmqlab.runtime.sim import Simulation

            self.sim = Simulation(seed=seed, root_dir=os.path.join(self.root_dir, "nodes"))
            self.namesrv_addr = f"127.0.0.1:{NAMESRV_PORT}"
            self._build_sim()
            self.nemesis = self.sim.nemesis
        else:
            from rmqlab.runtime.real_cluster import RealCluster

            self.real = RealCluster(os.path.join(self.root_dir, "nodes"), seed=seed)
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
        """Start every node, then wait until the name server has registered every broker (a
        broker's boot line comes before its first registration, and a client that asks for a
        route earlier gets "no route info")."""
        if self.runtime == "sim":
            self.sim.start_all()
            self.sim.run_until(lambda: self.registered() >= len(self.brokers), timeout_ms)
        else:
            self.real.start_all(timeout_s=60)
            deadline = time.monotonic() + timeout_ms / 1000.0
            while self.registered() < len(self.brokers):
                if time.monotonic() > deadline:
                    raise TimeoutError(f"only {self.registered()} of {len(self.brokers)} brokers registered "
                                       f"with the name server within {timeout_ms:.0f} ms")
                time.sleep(0.05)

    def registered(self) -> int:
        """How many brokers the name server has registered so far (read from the trace)."""
        events = self.sim.tracer.events if self.runtime == "sim" else self.real.events("namesrv")
        return sum(1 for e in events if e.node == "namesrv" and e.kind == "log"
                   and e.fields.get("message", "").startswith("new broker registered"))

    def add_client(self, name: str, factory: Callable[[], Component], start: bool = True) -> None:
        """A client node (simulator only: on the real runtime clients are processes of their own)."""
        if self.runtime != "sim":
            raise RuntimeError("add_client builds simulated clients; on the real runtime run client processes")

        def build() -> Component:
            c = factory()
            self.components[name] = c
            return c

        self.sim.add_node(name, build)
        if start:
            self.sim.start(name)

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


def _read_properties(path: str) -> dict[str, object]:
    from rmqlab.config import read_properties_file

    return {e.key: e.value for e in read_properties_file(path)}


def _write_properties(path: str, values: dict[str, object]) -> str:
    with open(path, "w") as f:
        for k, v in values.items():
            f.write(f"{k}={v}\n")
    return path
