"""Simulation: every node of a cluster in one process, on a virtual clock, seeded.

    sim = Simulation(seed=7)
    sim.add_node("broker-a", lambda: Broker(config))   # a factory: a restart builds a new process
    sim.start_all()
    sim.run_for(5_000)                                   # five virtual seconds
    sim.nemesis.kill("broker-a"); sim.run_for(1_000); sim.nemesis.restart("broker-a")
    sim.tracer.events                                    # the event trace

Same seed and same inputs give the same trace, byte for byte, in any process. The nemesis acts
right away or at a virtual time (`sim.at(ms, fn)`); a notebook button just calls it between runs.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import tempfile
from collections.abc import Callable, Iterable
from typing import Any

from rmqlab.runtime.component import Component
from rmqlab.runtime.nemesis import Link, Nemesis
from rmqlab.runtime.page_cache import crash_machine_disk
from rmqlab.runtime.sim.loop import SimHandle, SimLoop
from rmqlab.runtime.sim.network import SimNetwork
from rmqlab.runtime.sim.node import SimNode
from rmqlab.trace import Tracer

DEFAULT_EPOCH_MS = 1_700_000_000_000  # the nodes' clocks start here (2023-11-14), so timestamps look real


class Simulation:
    def __init__(self, seed: int = 0, root_dir: str | None = None, *, epoch_ms: int = DEFAULT_EPOCH_MS,
                 latency_ms: tuple[float, float] = (0.2, 1.0)):
        self.seed = seed
        self.epoch_ms = epoch_ms
        self.loop = SimLoop()
        self.tracer = Tracer(lambda: self.loop.time() * 1000.0)
        self.network = SimNetwork(self.loop, seed, trace=self.tracer.emit, default_latency_ms=latency_ms,
                                  spawn=lambda node, coro: self.nodes[node].spawn(coro))
        self._own_root = root_dir is None  # removed by close(); a given root_dir is the caller's
        self.root_dir = root_dir or tempfile.mkdtemp(prefix="rmqlab-sim-")
        self.nodes: dict[str, SimNode] = {}
        self.components: dict[str, Component | None] = {}
        self._factories: dict[str, Callable[[], Component]] = {}
        self._incarnations: dict[str, int] = {}
        self.nemesis = SimNemesis(self)

    # -- building the cluster ----------------------------------------------------------------
    def add_node(self, name: str, factory: Callable[[], Component]) -> SimNode:
        if name in self._factories:
            raise ValueError(f"node {name!r} already exists")
        self._factories[name] = factory
        self._incarnations[name] = 0
        node = self.new_incarnation(name)
        node.alive = False  # not started yet
        self.components[name] = None
        return node

    def store_dir(self, name: str) -> str:
        return os.path.join(self.root_dir, name)

    def new_incarnation(self, name: str) -> SimNode:
        """A new process of node `name` (not started yet): the next incarnation, on the same machine."""
        self._incarnations[name] += 1
        old = self.nodes.get(name)
        node = SimNode(self, name, self.store_dir(name), self._incarnations[name])
        if old is not None:
            node.keep_machine_clock(old)
        os.makedirs(node.store_dir, exist_ok=True)
        self.nodes[name] = node
        return node

    async def start_node(self, name: str) -> None:
        """Start node `name`'s process: the component's start-up, as a coroutine of the simulation."""
        node = self.nodes[name]
        node.alive = True
        component = self._factories[name]()
        self.components[name] = component
        component.node = node
        await component.start(node)
        self.tracer.emit(name, "node.start", component=component.component_type,
                         incarnation=node.incarnation - 1)

    def start(self, name: str) -> None:
        """Start a node's process and run the simulation until its start-up completes."""
        self.run(self.start_node(name))

    def start_all(self) -> None:
        for name in list(self._factories):
            self.start(name)

    def stop(self, name: str) -> None:
        """Clean shutdown of a node's process (SIGTERM)."""
        self.run(self.stop_node(name))

    async def stop_node(self, name: str, reason: str = "shutdown") -> None:
        """Clean shutdown of node `name`'s process, as a coroutine of the simulation."""
        component, node = self.components[name], self.nodes[name]
        if component is not None:
            await component.shutdown()
        node.die()
        self.network.node_down(name, "process")
        self.tracer.emit(name, "node.stop", reason=reason)

    # -- driving time ------------------------------------------------------------------------
    def now_ms(self) -> float:
        """Virtual milliseconds since the simulation began."""
        return self.loop.time() * 1000.0

    def run(self, coro) -> Any:
        """Run a coroutine to completion in virtual time and return its result."""
        return self.loop.run_until_complete_nested(coro)

    def run_for(self, ms: float) -> None:
        self.run(asyncio.sleep(ms / 1000.0))

    def run_until(self, predicate: Callable[[], bool], timeout_ms: float, poll_ms: float = 1.0) -> float:
        """Advance until `predicate()` holds; returns the virtual ms it took. TimeoutError past timeout_ms."""
        start = self.now_ms()

        async def wait() -> None:
            while not predicate():
                if self.now_ms() - start >= timeout_ms:
                    raise TimeoutError(f"condition not reached within {timeout_ms:.0f} virtual ms")
                await asyncio.sleep(poll_ms / 1000.0)

        self.run(wait())
        return self.now_ms() - start

    def at(self, time_ms: float, action: Callable[[], Any]) -> SimHandle:
        """Schedule `action()` at virtual time `time_ms` (a fault schedule, a client operation)."""
        return self.loop.call_at(time_ms / 1000.0, action)

    def close(self) -> None:
        """Stop every process (as a crash: nothing is flushed) and close the loop."""
        for name, node in self.nodes.items():
            if node.alive:
                node.die()
                component = self.components.get(name)
                if component is not None:
                    component.on_crash()
        # Let the cancelled tasks unwind before the loop closes.
        self.loop.run_until_complete_nested(asyncio.sleep(0))
        self.loop.close()
        if self._own_root:
            shutil.rmtree(self.root_dir, ignore_errors=True)


class SimNemesis(Nemesis):
    def __init__(self, sim: Simulation):
        self.sim = sim

    def node_names(self) -> list[str]:
        return list(self.sim._factories)

    def _emit(self, kind: str, **fields: Any) -> None:
        """A fault.* event, by the injector."""
        self.sim.tracer.emit("nemesis", kind, **fields)

    def _about(self, node: str, kind: str, **fields: Any) -> None:
        """A node.* event: `node` is the node it is about (rmqlab.trace.kinds)."""
        self.sim.tracer.emit(node, kind, **fields)

    def _down(self, name: str, how: str) -> SimNode:
        node = self.sim.nodes[name]
        if not node.alive:
            raise RuntimeError(f"{name} is not running")
        node.die()
        self.sim.network.node_down(name, how)
        component = self.sim.components.get(name)
        if component is not None:
            component.on_crash()
        return node

    def kill(self, node: str) -> None:
        self._down(node, "process")
        self._about(node, "node.kill", signal=9)

    def crash(self, node: str, torn_bytes=None) -> None:
        n = self._down(node, "machine")
        lost = crash_machine_disk(n.store_dir, torn_bytes)
        self._about(node, "node.crash", lost_bytes=lost, torn=torn_bytes is not None)

    def restart(self, node: str) -> None:
        if self.sim.nodes[node].alive:
            raise RuntimeError(f"{node} is running; kill, crash or stop it first")
        self.sim.network.node_up(node)
        n = self.sim.new_incarnation(node)
        self._about(node, "node.restart", incarnation=n.incarnation - 1)
        # Start-up runs as a task: restart may be called from inside the running simulation.
        self.sim.loop.create_task(self.sim.start_node(node))

    def suspend(self, node: str) -> None:
        n = self.sim.nodes[node]
        n.suspended = True
        n.freeze_timers()
        self.sim.network.suspend(node)
        self._about(node, "node.suspend")

    def resume(self, node: str) -> None:
        n = self.sim.nodes[node]
        n.suspended = False
        self.sim.network.resume(node)
        n.thaw_timers()
        self._about(node, "node.resume")

    def clock_pause(self, node: str) -> None:
        self.sim.nodes[node].clock_pause()
        self._emit("fault.clock", target=node, action="pause")

    def clock_resume(self, node: str) -> None:
        self.sim.nodes[node].clock_resume()
        self._emit("fault.clock", target=node, action="resume")

    def _block(self, links: list[Link], shape: str, detail: dict) -> None:
        for src, dst in links:
            self.sim.network.block(src, dst)
        self._emit("fault.partition", groups=detail.pop("groups"), shape=shape,
                   links=[list(link) for link in links], **detail)

    def heal(self) -> None:
        self.sim.network.heal()
        self._emit("fault.heal", fault="partition")

    def set_loss(self, srcs: Iterable[str], dsts: Iterable[str], p: float) -> None:
        if not 0.0 <= p <= 1.0:
            raise ValueError(f"loss probability must be in [0, 1], got {p}")
        srcs, dsts = sorted(srcs), sorted(dsts)
        for s in srcs:
            for d in dsts:
                if s != d:
                    self.sim.network.link(s, d).loss = p
        self._emit("fault.loss", rate=p, links=[[s, d] for s in srcs for d in dsts if s != d])

    def set_delay(self, srcs: Iterable[str], dsts: Iterable[str], lo_ms: float, hi_ms: float) -> None:
        if not 0 <= lo_ms <= hi_ms:
            raise ValueError(f"delay range must satisfy 0 <= lo <= hi, got ({lo_ms}, {hi_ms})")
        srcs, dsts = sorted(srcs), sorted(dsts)
        for s in srcs:
            for d in dsts:
                if s != d:
                    self.sim.network.link(s, d).latency_ms = (lo_ms, hi_ms)
        self._emit("fault.delay", delay_ms=lo_ms, jitter_ms=hi_ms - lo_ms,
                   links=[[s, d] for s in srcs for d in dsts if s != d])
