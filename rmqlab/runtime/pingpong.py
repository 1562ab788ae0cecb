"""PingPong: the smallest component, for the runtime's own tests, determinism checks and benchmarks.

Every node listens on its port and pings every other node over one connection each: a ping is a
4-byte length + payload frame, answered by the same frame. Pings are client operations in the
trace (invoke, then ok / info), so faults show up as failed or late pings.

    python -m rmqlab.runtime.pingpong --seed 7 --nodes 8 --ms 2000   # prints the trace hash
"""

from __future__ import annotations

import argparse
import asyncio
import struct

from rmqlab.runtime.component import Component
from rmqlab.runtime.node import Node

_LEN = struct.Struct(">i")


class PingPong(Component):
    component_type = "client"

    def __init__(self, port: int, peers: dict[str, int], interval_ms: float = 10.0, process: int = 0):
        self.port, self.peers, self.interval_ms, self.process = port, peers, interval_ms, process
        self.op_id = 0
        self.acked = 0

    async def start(self, node: Node) -> None:
        self.node = node
        await node.listen("127.0.0.1", self.port, self._serve)
        for peer, port in self.peers.items():
            node.spawn(self._ping_loop(peer, port), name=f"ping-{peer}")

    async def _serve(self, reader: asyncio.StreamReader, writer) -> None:
        try:
            while True:
                n = _LEN.unpack(await reader.readexactly(4))[0]
                payload = await reader.readexactly(n)
                writer.write(_LEN.pack(n) + payload)
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError) as e:
            self.node.trace("net.close", peer=str(writer.get_extra_info("peername")), reason=_why(e))
            writer.close()

    async def _ping_loop(self, peer: str, port: int) -> None:
        node = self.node
        while True:
            try:
                reader, writer = await node.connect("127.0.0.1", port, timeout_ms=500)
            except (ConnectionError, TimeoutError):
                await node.sleep(100)
                continue
            pending = None  # the op invoked on this connection and not yet completed
            try:
                while True:
                    self.op_id += 1
                    op = pending = self.op_id
                    payload = f"{node.name}->{peer}#{op}:{node.random.randrange(10**6)}".encode()
                    node.trace("client", type="invoke", process=self.process, f="ping", op_id=op, value=peer)
                    writer.write(_LEN.pack(len(payload)) + payload)
                    await writer.drain()
                    echo = await reader.readexactly(_LEN.unpack(await reader.readexactly(4))[0])
                    ok = echo == payload
                    self.acked += ok
                    node.trace("client", type="ok" if ok else "fail", process=self.process, f="ping", op_id=op,
                               value=len(echo))
                    pending = None
                    await node.sleep(self.interval_ms)
            except (asyncio.IncompleteReadError, ConnectionError) as e:
                if pending is not None:
                    node.trace("client", type="info", process=self.process, f="ping", op_id=pending, value=None,
                               error=type(e).__name__)
                node.trace("net.close", peer=peer, reason=_why(e))
                writer.close()
                await node.sleep(100)


def _why(e: Exception) -> str:
    return "remote" if isinstance(e, asyncio.IncompleteReadError) else f"reset: {e}"


def build(sim, nodes: int, base_port: int = 20000, interval_ms: float = 10.0) -> list[str]:
    """Add `nodes` PingPong nodes to a Simulation; returns their names."""
    names = [f"n{i}" for i in range(nodes)]
    ports = {n: base_port + i for i, n in enumerate(names)}
    for i, n in enumerate(names):
        sim.add_node(n, lambda n=n, i=i: PingPong(ports[n], {p: ports[p] for p in names if p != n}, interval_ms, i))
    return names


def scenario(seed: int, nodes: int = 8, ms: float = 2000.0, faults: bool = True):
    """The determinism scenario: ping-pong with a partition, a kill, a restart and a suspend."""
    from rmqlab.runtime.sim import Simulation

    sim = Simulation(seed=seed)
    names = build(sim, nodes)
    sim.start_all()
    if faults:
        sim.at(ms * 0.2, lambda: sim.nemesis.partition(names[: nodes // 2], names[nodes // 2:]))
        sim.at(ms * 0.3, sim.nemesis.heal)
        sim.at(ms * 0.4, lambda: sim.nemesis.kill(names[1]))
        sim.at(ms * 0.5, lambda: sim.nemesis.restart(names[1]))
        sim.at(ms * 0.6, lambda: sim.nemesis.suspend(names[2]))
        sim.at(ms * 0.7, lambda: sim.nemesis.resume(names[2]))
        sim.at(ms * 0.75, lambda: sim.nemesis.set_loss(names[:2], names[2:4], 0.3))
    sim.run_for(ms)
    return sim


def main(argv=None) -> int:
    from rmqlab.trace import trace_hash

    ap = argparse.ArgumentParser(description="run the ping-pong determinism scenario and print its trace hash")
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--nodes", type=int, default=8)
    ap.add_argument("--ms", type=float, default=2000.0)
    args = ap.parse_args(argv)
    sim = scenario(args.seed, args.nodes, args.ms)
    print(trace_hash(sim.tracer.events), len(sim.tracer.events))
    sim.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
