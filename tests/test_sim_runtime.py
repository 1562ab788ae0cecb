"""The simulated runtime: virtual time, the in-memory network and every fault kind."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import time

import pytest

from rmqlab.runtime.component import Component
from rmqlab.runtime.nemesis import bridge_links, partition_links, ring_links
from rmqlab.runtime.pingpong import build, scenario
from rmqlab.runtime.sim import Simulation, SimulationDeadlock
from rmqlab.trace import trace_hash

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


class Recorder(Component):
    """Listens; records every byte it receives with the node's clock; optionally replies."""

    def __init__(self, port: int):
        self.port = port
        self.received: list[tuple[float, bytes]] = []
        self.ticks: list[int] = []
        self.crashed = False

    async def start(self, node):
        self.node = node
        await node.listen("127.0.0.1", self.port, self._serve)

    async def _serve(self, reader, writer):
        while True:
            data = await reader.read(1024)
            if not data:
                writer.close()
                return
            self.received.append((self.node.loop.time() * 1000.0, data))  # precise virtual ms
            writer.write(b"ack:" + data)
            await writer.drain()

    def tick_every(self, ms):
        def tick():
            self.ticks.append(self.node.now_ms())
            self.node.call_later(ms, tick)
        self.node.call_later(ms, tick)

    def on_crash(self):
        self.crashed = True


class Idle(Component):
    async def start(self, node):
        self.node = node


def two_nodes(seed=1):
    sim = Simulation(seed=seed)
    server = {}

    def make():
        server["c"] = Recorder(9000)
        return server["c"]

    sim.add_node("srv", make)
    sim.add_node("cli", Idle)
    sim.start_all()
    return sim, server


def connect(sim, host="127.0.0.1", port=9000, timeout_ms=3000):
    node = sim.nodes["cli"]
    return sim.run(node.connect(host, port, timeout_ms))


def test_virtual_time_is_fast_and_exact():
    sim, srv = two_nodes()
    srv["c"].tick_every(1000)
    t0 = time.perf_counter()
    sim.run_for(3_600_000)  # one virtual hour
    assert time.perf_counter() - t0 < 2.0
    ticks = srv["c"].ticks
    assert len(ticks) == 3600 and ticks[1] - ticks[0] == 1000
    assert sim.nodes["srv"].now_ms() == sim.epoch_ms + 3_600_000
    sim.close()


def test_bytes_flow_in_order_with_latency():
    sim, srv = two_nodes()
    reader, writer = connect(sim)
    sent_at = sim.now_ms()
    for i in range(50):
        writer.write(b"%02d" % i)
    sim.run_for(50)
    got = b"".join(d for _, d in srv["c"].received)
    assert got == b"".join(b"%02d" % i for i in range(50))
    first_arrival = srv["c"].received[0][0]
    assert 0.2 <= first_arrival - sent_at <= 2.0  # default one-way latency 0.2..1.0 ms
    assert sim.run(reader.readexactly(4)) == b"ack:"
    sim.close()


def test_refused_and_timed_out_connects():
    sim, _ = two_nodes()
    with pytest.raises(ConnectionRefusedError):
        connect(sim, port=9999)
    sim.nemesis.partition(["srv"], ["cli"])
    start = sim.now_ms()
    with pytest.raises(TimeoutError):
        connect(sim, timeout_ms=700)
    assert sim.now_ms() - start == pytest.approx(700, abs=1)
    sim.close()


def test_partition_holds_bytes_until_heal_and_one_way():
    sim, srv = two_nodes()
    reader, writer = connect(sim)
    sim.nemesis.partition(["srv"], ["cli"])
    writer.write(b"held")
    sim.run_for(5_000)
    assert srv["c"].received == []  # retransmitting, not lost
    sim.nemesis.heal()
    sim.run_for(10)
    assert [d for _, d in srv["c"].received] == [b"held"]
    # one way: cli -> srv blocked, srv -> cli still open
    sim.nemesis.partition_one_way(["cli"], ["srv"])
    writer.write(b"x")
    sim.run_for(100)
    assert len(srv["c"].received) == 1
    sim.nemesis.heal()
    sim.run_for(10)
    assert len(srv["c"].received) == 2
    sim.close()


def test_kill_closes_connections_and_restart_is_a_new_process():
    sim, srv = two_nodes()
    reader, writer = connect(sim)
    first = srv["c"]
    sim.nemesis.kill("srv")
    assert first.crashed
    sim.run_for(10)
    assert sim.run(reader.read(100)) == b""  # the kernel closed the socket: EOF
    writer.write(b"late")
    sim.run_for(10)
    with pytest.raises(ConnectionResetError):
        sim.run(writer.drain())
    with pytest.raises(ConnectionRefusedError):  # the machine is up, the port is closed
        connect(sim)
    sim.nemesis.restart("srv")
    sim.run_for(1)
    assert srv["c"] is not first and sim.nodes["srv"].incarnation == 2
    r2, w2 = connect(sim)
    w2.write(b"again")
    sim.run_for(10)
    assert [d for _, d in srv["c"].received] == [b"again"]
    kinds = [e.kind for e in sim.tracer.events if e.node == "srv"]
    assert kinds.count("node.start") == 2 and "node.kill" in kinds and "node.restart" in kinds
    sim.close()


def test_machine_crash_is_silent_and_restart_resets_old_connections(tmp_path):
    sim, srv = two_nodes()
    reader, writer = connect(sim)
    sim.nemesis.crash("srv")
    writer.write(b"into the void")
    sim.run_for(1000)
    assert not reader.at_eof() and srv["c"].received == []  # no FIN from a dead machine
    with pytest.raises(TimeoutError):  # SYNs go unanswered
        connect(sim, timeout_ms=300)
    sim.nemesis.restart("srv")
    sim.run_for(10)
    with pytest.raises(ConnectionResetError):
        sim.run(reader.read(10))
    sim.close()


def test_suspend_freezes_timers_and_input_but_keeps_connections():
    sim, srv = two_nodes()
    srv["c"].tick_every(100)
    reader, writer = connect(sim)
    sim.run_for(1000)
    assert len(srv["c"].ticks) == 10
    sim.nemesis.suspend("srv")
    writer.write(b"while stopped")
    sim.run_for(5000)
    assert len(srv["c"].ticks) == 10 and srv["c"].received == []
    sim.nemesis.resume("srv")
    sim.run_for(1)
    assert [d for _, d in srv["c"].received] == [b"while stopped"]
    # The tick due at 1100 fires at once on resume: the clock kept running while stopped (SIGSTOP).
    assert srv["c"].ticks[10] - srv["c"].ticks[9] == pytest.approx(5000, abs=3)
    sim.close()


def test_clock_pause_stops_the_nodes_time():
    sim, srv = two_nodes()
    srv["c"].tick_every(100)
    node = sim.nodes["srv"]
    sim.run_for(1000)
    sim.nemesis.clock_pause("srv")
    frozen = node.now_ms()
    sim.run_for(2000)
    assert node.now_ms() == frozen and len(srv["c"].ticks) == 10
    reader, writer = connect(sim)  # a paused clock still serves requests
    writer.write(b"ping")
    sim.run_for(5)
    assert srv["c"].received
    sim.nemesis.clock_resume("srv")
    sim.run_for(100)
    assert len(srv["c"].ticks) == 11 and node.now_ms() == frozen + 100
    assert sim.nodes["cli"].now_ms() - node.now_ms() == pytest.approx(2005, abs=2)  # skew remains
    sim.close()


def test_loss_delays_by_retransmission_and_heavy_loss_resets():
    sim, srv = two_nodes(seed=3)
    reader, writer = connect(sim)
    sim.nemesis.set_loss(["cli"], ["srv"], 0.5)
    for i in range(20):
        writer.write(b"m%02d" % i)
    sim.run_for(60_000)
    data = b"".join(d for _, d in srv["c"].received)
    late = max(t for t, _ in srv["c"].received)
    assert data == b"".join(b"m%02d" % i for i in range(20)) and late > 200  # in order, retransmitted
    sim.nemesis.set_loss(["cli"], ["srv"], 1.0)
    writer.write(b"gone")
    sim.run_for(60_000)
    with pytest.raises(ConnectionResetError):
        sim.run(writer.drain())
    sim.close()


def test_delay_knob():
    sim, srv = two_nodes()
    reader, writer = connect(sim)
    sim.nemesis.set_delay(["cli"], ["srv"], 50, 60)
    t = sim.now_ms()
    writer.write(b"slow")
    sim.run_until(lambda: srv["c"].received, timeout_ms=1000)
    arrival = srv["c"].received[0][0]
    assert 50 <= arrival - t <= 61
    sim.close()


def test_partition_shapes():
    nodes = ["a", "b", "c", "d", "e"]
    links = set(ring_links(nodes))
    for n in nodes:
        sees = [m for m in nodes if m != n and (n, m) not in links]
        assert len(sees) + 1 >= 3  # a majority, itself included
    views = [frozenset([n] + [m for m in nodes if m != n and (n, m) not in links]) for n in nodes]
    assert len(set(views)) == 5  # no two nodes share a majority
    with pytest.raises(ValueError, match="at least 4"):
        ring_links(["a", "b", "c"])
    b = set(bridge_links(nodes))
    assert ("a", "e") in b and ("c", "a") not in b and ("c", "e") not in b and ("a", "b") not in b
    assert set(partition_links(nodes, [["a"], ["b", "c"]])) == {("a", "b"), ("a", "c"), ("b", "a"), ("c", "a")}
    with pytest.raises(ValueError, match="unknown node"):
        partition_links(nodes, [["zz"]])


def test_ring_and_bridge_in_the_simulation():
    sim = Simulation(seed=5)
    names = build(sim, 5, interval_ms=20)
    sim.start_all()
    sim.run_for(200)
    sim.nemesis.ring()
    before = {n: c.acked for n, c in sim.components.items()}
    sim.run_for(2000)
    # Every node still reaches its two ring neighbours, so everyone keeps making progress.
    assert all(sim.components[n].acked > before[n] for n in names)
    sim.nemesis.heal()
    sim.nemesis.bridge()
    sim.run_for(500)
    ev = [e for e in sim.tracer.events if e.kind == "fault.partition"]
    assert [e.fields["shape"] for e in ev] == ["ring", "bridge"]
    assert ev[1].fields["groups"] == [["n0", "n1", "n2"], ["n2", "n3", "n4"]]
    sim.close()


def test_deadlock_is_reported():
    sim = Simulation(seed=1)
    never = sim.loop.create_future()
    with pytest.raises(SimulationDeadlock):
        sim.run(never)


def test_a_simulation_runs_inside_a_running_event_loop():
    async def notebook_cell():  # a Jupyter kernel runs cells inside its own asyncio loop
        sim = scenario(seed=3, nodes=3, ms=300, faults=False)
        n = len(sim.tracer.events)
        sim.close()
        return n

    assert asyncio.run(notebook_cell()) > 50


def test_same_seed_same_trace_different_seed_different_trace():
    a = scenario(seed=11, nodes=4, ms=1500)
    b = scenario(seed=11, nodes=4, ms=1500)
    c = scenario(seed=12, nodes=4, ms=1500)
    assert trace_hash(a.tracer.events) == trace_hash(b.tracer.events) != trace_hash(c.tracer.events)
    kinds = {e.kind for e in a.tracer.events}
    assert {"node.kill", "node.restart", "node.suspend", "node.resume", "fault.partition", "fault.heal",
            "fault.loss", "client", "net.close"} <= kinds
    for s in (a, b, c):
        s.close()


@pytest.mark.real
def test_trace_is_identical_across_processes_and_hash_seeds():
    outs = set()
    for hash_seed in ("0", "1", "12345"):
        env = dict(os.environ, PYTHONHASHSEED=hash_seed, PYTHONPATH=ROOT)
        r = subprocess.run([sys.executable, "-m", "rmqlab.runtime.pingpong", "--seed", "7", "--nodes", "6",
                            "--ms", "1500"], capture_output=True, text=True, env=env, timeout=120, cwd=ROOT)
        assert r.returncode == 0, r.stderr
        outs.add(r.stdout.strip())
    assert len(outs) == 1, outs


def test_data_for_a_locally_closed_socket_draws_a_reset():
    sim, srv = two_nodes()
    reader, writer = connect(sim)
    writer.write(b"request")
    writer.close()  # closed before the reply ("ack:request") arrives
    sim.run_for(10)
    assert sim.network._queue == [] and sim.network.connections == []  # delivery kept going
    # The server's reply hit the closed socket: the server sees a reset on its next read.
    assert [d for _, d in srv["c"].received] == [b"request"]


def test_pingpong_history_pairs_every_operation():
    from rmqlab.trace import client_ops
    sim = scenario(seed=4, nodes=4, ms=1500)
    ops = client_ops(sim.tracer.events)  # raises on an unpaired completion
    assert {op.type for op in ops} >= {"ok", "info"}
    sim.close()


def test_bytes_held_by_a_partition_stay_ahead_of_a_later_close():
    """Regression: data stalled by a partition must reach the reader before the EOF of a peer that
    was killed meanwhile (segments are taken in sequence order, as TCP does)."""
    sim, srv = two_nodes()
    reader, writer = connect(sim)
    sim.run_for(5)
    sim.nemesis.partition(["srv"], ["cli"])
    writer.write(b"held")
    sim.run_for(5)
    sim.nemesis.kill("cli")
    sim.nemesis.heal()
    sim.run_for(10)
    assert [d for _, d in srv["c"].received] == [b"held"]
    sim.close()


def test_run_in_executor_and_to_thread_run_inline_at_the_current_instant():
    from rmqlab.runtime.sim import SimLoop

    loop = SimLoop()
    calls = []

    def work(x):
        calls.append(loop.time())
        if x < 0:
            raise ValueError("negative")
        return x * 2

    async def main():
        await asyncio.sleep(1.5)
        a = await loop.run_in_executor(None, work, 21)
        b = await asyncio.to_thread(work, 4)
        with pytest.raises(ValueError, match="negative"):
            await loop.run_in_executor(None, work, -1)
        return a, b

    assert loop.run_until_complete(main()) == (42, 8)
    assert calls == [1.5, 1.5, 1.5]  # no virtual time passed
    loop.close()


def test_what_the_simulator_lacks_says_what_to_use_instead():
    from rmqlab.runtime.sim import SimLoop, SimulationUnsupported

    loop = SimLoop()

    async def main():
        with pytest.raises(SimulationUnsupported, match=r"loop.create_connection\(\).*node.connect"):
            await asyncio.open_connection("127.0.0.1", 9876)
        with pytest.raises(SimulationUnsupported, match="subprocess_exec.*Simulation.add_node"):
            await asyncio.create_subprocess_exec("true")
        with pytest.raises(SimulationUnsupported, match="nemesis"):
            loop.add_signal_handler(15, print)

    loop.run_until_complete(main())
    loop.close()


def test_a_task_factory_makes_the_tasks():
    from rmqlab.runtime.sim import SimLoop

    loop = SimLoop()
    made = []

    def factory(lp, coro, **kwargs):
        task = asyncio.Task(coro, loop=lp, **kwargs)
        made.append(task)
        return task

    loop.set_task_factory(factory)
    assert loop.get_task_factory() is factory

    async def child():
        return 7

    async def main():
        return await loop.create_task(child(), name="child")

    assert loop.run_until_complete(main()) == 7
    assert [t.get_name() for t in made][-1] == "child" and len(made) == 2
    loop.close()
