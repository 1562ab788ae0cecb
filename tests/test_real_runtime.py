"""The real runtime: OS processes, the fault-injecting relay and every fault kind.

Two layers. The relay tests run RealNodes inside this process, on their own loopback addresses,
behind a Relay: they check the byte-level meaning of each knob (held, one-way, delayed, lost,
reset) against the simulator's. The cluster tests run PingPong nodes as OS processes under a
RealCluster and inject each fault through RealNemesis; results are read from the processes' trace
files only. Everything binds 127.0.0.x, waits are bounded, and every process is stopped by PID in
a `finally` (RealCluster.close).
"""

from __future__ import annotations

import asyncio
import os
import statistics
import textwrap
import time
from collections.abc import Callable
from contextlib import contextmanager
from dataclasses import dataclass

import pytest

from rmqlab.runtime.nemesis import one_way_links, partition_links, ring_links
from rmqlab.runtime.real import ClusterView, RealNode
from rmqlab.runtime.real_cluster import RealCluster, free_ports
from rmqlab.runtime.real_pingpong import build, pingpong_argv
from rmqlab.runtime.relay import Relay

INTERVAL_MS = 50.0
DEADLINE_S = 20


def wall_ms() -> float:
    return time.time() * 1000.0


# -- the relay, in this process ------------------------------------------------------------------

class Recorder:
    """A listener's handler: records what arrives (with monotonic ms) and keeps the writers."""

    def __init__(self):
        self.received: list[tuple[float, bytes]] = []
        self.writers: list = []
        self.eof = False

    async def serve(self, reader, writer):
        self.writers.append(writer)
        while data := await reader.read(1024):
            self.received.append((time.monotonic() * 1000.0, data))
        self.eof = True

    def data(self) -> bytes:
        return b"".join(d for _, d in self.received)


async def until(predicate: Callable[[], bool], timeout_s: float = 3.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not predicate():
        assert time.monotonic() < deadline, "condition not reached in time"
        await asyncio.sleep(0.005)


class Pair:
    """Nodes a (127.0.0.2) and b (127.0.0.3) in this process; b listens behind a relay."""

    def __init__(self, tmp_path, **relay_args):
        self.port = free_ports(1)[0]
        view = ClusterView(ips={"a": "127.0.0.2", "b": "127.0.0.3"}, relayed={("127.0.0.1", self.port): "b"})
        self.relay = Relay(view.ips, **relay_args)
        self.relay.add_listener("b", ("127.0.0.1", self.port), ("127.0.0.3", self.port))
        self.a = RealNode("a", str(tmp_path / "a"), node_ip="127.0.0.2", cluster=view)
        self.b = RealNode("b", str(tmp_path / "b"), node_ip="127.0.0.3", cluster=view)
        self.rec = Recorder()

    async def start(self):
        await self.b.listen("127.0.0.1", self.port, self.rec.serve)

    async def connect(self, timeout_ms: float = 1000):
        return await self.a.connect("127.0.0.1", self.port, timeout_ms)

    def close(self):
        self.relay.close()


def run_pair(tmp_path, body, **relay_args) -> Pair:
    pair = Pair(tmp_path, **relay_args)

    async def main():
        await pair.start()
        try:
            await body(pair)
        finally:
            await pair.a.close()
            await pair.b.close()

    try:
        asyncio.run(asyncio.wait_for(main(), DEADLINE_S))
    finally:
        pair.close()
    return pair


def test_relay_knows_the_source_node_and_answers_with_the_handshake(tmp_path):
    async def body(p: Pair):
        reader, writer = await p.connect()
        await until(lambda: p.rec.writers)
        accept = [e.fields for e in p.b.tracer.events if e.kind == "net.accept"]
        connect = [e.fields for e in p.a.tracer.events if e.kind == "net.connect"]
        assert accept[0]["peer"] == "a" and connect[0]["peer"] == "b"
        assert connect[0]["local"].startswith("127.0.0.2:")  # bound to a's own loopback address
        writer.write(b"hello")
        await until(lambda: p.rec.data() == b"hello")  # the handshake byte never reaches the listener
        p.rec.writers[0].write(b"world")
        assert await reader.readexactly(5) == b"world"
        # A client that is no cluster node (plain 127.0.0.1) gets a plain proxy: no byte, no faults.
        p.relay.block(partition_links(["a", "b"], [["a"], ["b"]]))
        r2, w2 = await asyncio.open_connection("127.0.0.1", p.port)
        await until(lambda: len(p.rec.writers) == 2)
        w2.write(b"outside")
        await until(lambda: p.rec.data() == b"hellooutside")
        p.rec.writers[1].write(b"ok")
        assert await r2.readexactly(2) == b"ok"
        w2.close()

    run_pair(tmp_path, body)


def test_relay_partition_holds_bytes_one_way_and_connects_time_out(tmp_path):
    async def body(p: Pair):
        reader, writer = await p.connect()
        await until(lambda: p.rec.writers)
        server_writer = p.rec.writers[0]
        p.relay.block(partition_links(["a", "b"], [["a"], ["b"]]))
        writer.write(b"held")
        server_writer.write(b"also held")
        await asyncio.sleep(0.3)
        assert p.rec.received == []  # retransmitting, not lost
        with pytest.raises(TimeoutError):
            await p.connect(timeout_ms=300)  # the SYN is lost
        p.relay.heal()
        await until(lambda: p.rec.data() == b"held")
        assert await reader.readexactly(9) == b"also held"
        # One way: a -> b blocked, b -> a open.
        p.relay.block(one_way_links(["a"], ["b"]))
        server_writer.write(b"back")
        assert await asyncio.wait_for(reader.readexactly(4), 1.0) == b"back"
        writer.write(b"x")
        await asyncio.sleep(0.2)
        assert p.rec.data() == b"held"
        with pytest.raises(TimeoutError):
            await p.connect(timeout_ms=300)
        p.relay.heal()
        await until(lambda: p.rec.data() == b"heldx")
        p.relay.block(one_way_links(["b"], ["a"]))  # the other way alone loses the SYN-ACK
        with pytest.raises(TimeoutError):
            await p.connect(timeout_ms=300)
        p.relay.heal()
        # Nothing listens behind the relay any more: the connect is refused.
        for listener in p.b._listeners:
            listener.close()
        with pytest.raises(ConnectionRefusedError):
            await p.connect()

    run_pair(tmp_path, body)


def test_relay_delay_and_loss_retransmit_in_order_and_total_loss_resets(tmp_path):
    async def body(p: Pair):
        reader, writer = await p.connect()
        await until(lambda: p.rec.writers)
        p.relay.set_latency([("a", "b")], 50, 60)
        sent = time.monotonic() * 1000.0
        writer.write(b"slow")
        await until(lambda: p.rec.received)
        assert 50 <= p.rec.received[0][0] - sent <= 60 + 25
        t = time.monotonic()
        p.rec.writers[0].write(b"fast")  # b -> a has no delay
        await reader.readexactly(4)
        assert time.monotonic() - t < 0.04
        p.relay.set_latency([("a", "b")], 0, 0)
        # At p = 0.3 a chunk is reset (7 losses in a row) with probability 2e-4; the seed fixes
        # the draws for chunks read one by one.
        p.relay.set_loss([("a", "b")], 0.3)
        expected = b""
        for i in range(20):
            writer.write(b"m%02d" % i)
            expected += b"m%02d" % i
            await asyncio.sleep(0.003)  # separate chunks, each lost or not on its own
        await until(lambda: p.rec.data() == b"slow" + expected, timeout_s=5)
        gaps = [b[0] - a[0] for a, b in zip(p.rec.received, p.rec.received[1:])]
        assert max(gaps) >= 10  # some chunk waited for at least one RTO
        p.relay.set_loss([("a", "b")], 1.0)
        writer.write(b"gone")
        t = time.monotonic()
        with pytest.raises(ConnectionResetError):  # 6 retransmissions lost: 10 * (1+2+...+32) ms
            await asyncio.wait_for(reader.read(10), 3.0)
        assert time.monotonic() - t >= 0.6

    run_pair(tmp_path, body, rto_ms=10.0, seed=7)


def test_relay_machine_crash_is_silent_until_the_machine_comes_back(tmp_path):
    async def body(p: Pair):
        reader, writer = await p.connect()
        await until(lambda: p.rec.writers)
        p.relay.node_down("b")
        p.rec.writers[0].write(b"last words")
        p.rec.writers[0].close()  # the dying process's FIN goes nowhere
        writer.write(b"into the void")
        await asyncio.sleep(0.3)
        assert not reader.at_eof() and p.rec.received == []
        with pytest.raises(TimeoutError):
            await p.connect(timeout_ms=300)
        p.relay.node_up("b")
        with pytest.raises(ConnectionResetError):
            await asyncio.wait_for(reader.read(10), 2.0)

    run_pair(tmp_path, body)


def test_real_node_clock_pause_freezes_time_and_timers(tmp_path):
    async def main():
        node = RealNode("c", str(tmp_path / "c"))
        fired: list[float] = []
        created, wall_created = node.monotonic_s(), time.monotonic()
        node.call_later(200, lambda: fired.append(node.monotonic_s()))
        await asyncio.sleep(0.05)
        node.clock_pause()
        frozen, mono = node.now_ms(), node.monotonic_s()
        await asyncio.sleep(0.3)
        assert node.now_ms() == frozen and node.monotonic_s() == mono and fired == []
        node.clock_resume()
        await until(lambda: fired, timeout_s=2)  # after the ~150 ms of node time still to go
        assert fired[0] - created >= 0.2 and time.monotonic() - wall_created >= 0.5  # 200 ms of node time
        assert wall_ms() - node.now_ms() == pytest.approx(300, abs=60)  # the skew remains
        logs = [e.fields for e in node.tracer.events if e.kind == "log"]
        assert [f["message"] for f in logs] == ["clock paused", "clock resumed"]
        assert logs[0]["now_ms"] == logs[1]["now_ms"] == frozen and logs[1]["lag_ms"] >= 290
        await node.close()

    asyncio.run(asyncio.wait_for(main(), DEADLINE_S))


# -- PingPong processes under a RealCluster ------------------------------------------------------

@contextmanager
def pingpong_cluster(tmp_path, n: int, **cluster_args):
    cluster = RealCluster(str(tmp_path / "cluster"), **cluster_args)
    try:
        names = build(cluster, n, interval_ms=INTERVAL_MS)
        cluster.start_all()
        wait_for(lambda: all(oks(cluster, a, b) for a in names for b in names if a != b), "every pair pings")
        yield cluster, names
    finally:
        cluster.close()


def wait_for(predicate: Callable[[], bool], what: str, timeout_s: float = 8.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not predicate():
        assert time.monotonic() < deadline, f"not reached within {timeout_s} s: {what}"
        time.sleep(0.05)


@dataclass(frozen=True)
class Ping:
    invoke_ms: float
    ok_ms: float | None  # None: no ok (failed, or still waiting)


def pings(cluster: RealCluster, src: str, dst: str) -> list[Ping]:
    """src's pings to dst from src's trace files: each invoke and its ok, paired by op_id within
    one process. (A ping's `info` carries the node-wide latest op_id rather than its own, so
    failures are read separately, by `errors`.)"""
    out = []
    for k in range(len(cluster.nodes[src].trace_paths)):
        invoked, done = {}, {}
        for e in cluster.events(src, k):
            if e.kind == "client" and e.fields["type"] == "invoke" and e.fields["value"] == dst:
                invoked[e.fields["op_id"]] = e.time_ms
            elif e.kind == "client" and e.fields["type"] == "ok":
                done[e.fields["op_id"]] = e.time_ms
        out += [Ping(t, done.get(op)) for op, t in invoked.items()]
    return out


def errors(cluster: RealCluster, src: str, after: float) -> list[str]:
    """The errors of src's failed pings (to any peer) traced after `after`."""
    return [e.fields["error"] for e in cluster.events(src)
            if e.kind == "client" and e.fields["type"] == "info" and e.time_ms > after]


def oks(cluster, src, dst, invoked_after: float = 0.0) -> list[Ping]:
    return [p for p in pings(cluster, src, dst) if p.ok_ms is not None and p.invoke_ms >= invoked_after]


def rtts(ops: list[Ping]) -> list[float]:
    return [p.ok_ms - p.invoke_ms for p in ops]


def completed_between(cluster, src, dst, t0, t1) -> list[Ping]:
    return [p for p in pings(cluster, src, dst) if p.ok_ms is not None and t0 < p.ok_ms < t1]


def went_through(cluster, src, dst, t0, t1) -> list[Ping]:
    """Pings sent at or after t0 that came back before t1 (a ping sent earlier may come back
    after t0: its echo was already on its way)."""
    return [p for p in oks(cluster, src, dst, invoked_after=t0) if p.ok_ms < t1]


# A peer's process closed: its FIN reads as EOF, unless a ping written meanwhile drew the RST
# that a closed socket answers with, and the reset is reported first (as on any TCP connection).
CLOSED = {"IncompleteReadError", "ConnectionResetError"}


def manager_kinds(cluster) -> list[str]:
    return [e.kind for e in cluster.manager_events()]


@pytest.mark.real
def test_process_boot_logs_and_clean_shutdown_on_sigterm(tmp_path):
    with pingpong_cluster(tmp_path, 2) as (cluster, names):
        pid = cluster.pid("n0")
        start = [e for e in cluster.events("n0") if e.kind == "node.start"][0].fields
        assert start == {"component": "client", "pid": pid, "incarnation": 0}
        # The relay told the nodes apart by their loopback addresses: accepts name the peer node.
        assert {e.fields["peer"] for e in cluster.events("n1") if e.kind == "net.accept"} == {"n0"}
        assert cluster.node_ip("n0") == "127.0.0.2" and cluster.node_ip("n1") == "127.0.0.3"
        t_stop = wall_ms()
        assert cluster.stop("n0") == 0
        assert not cluster.alive("n0")
        last = cluster.events("n0")[-1]
        assert last.kind == "node.stop" and last.fields["reason"] == "SIGTERM"
        wait_for(lambda: set(errors(cluster, "n1", t_stop)) & CLOSED, "n1 reads EOF (or a reset) from n0")
        logs = cluster.logs_dir("n0")
        with open(os.path.join(logs, "n0.log")) as f:
            log = f.read()
        assert "The PingPong node n0 boot success." in log and "shutdown hook was invoked (SIGTERM)" in log
        with open(os.path.join(logs, "n0.out")) as f:
            assert "The PingPong node n0 boot success." in f.read()
        merged = cluster.merged_events()
        assert [e.seq for e in merged] == list(range(len(merged)))
        assert {e.fields["_src"] for e in merged} == {"n0.0", "n1.0"}  # the manager traced no fault
    assert cluster.pid("n1") is None  # close() killed it


@pytest.mark.real
def test_kill_closes_connections_and_restart_is_a_new_process(tmp_path):
    with pingpong_cluster(tmp_path, 3) as (cluster, names):
        old_pid = cluster.pid("n1")
        t_kill = wall_ms()
        cluster.nemesis.kill("n1")
        assert not cluster.alive("n1")
        # The kernel closed n1's sockets: n0 reads EOF, and then its connects are refused.
        wait_for(lambda: set(errors(cluster, "n0", t_kill)) & CLOSED, "n0 reads EOF (or a reset) from n1")
        time.sleep(0.6)
        t_restart = wall_ms()
        assert not [p for p in pings(cluster, "n0", "n1") if t_kill + 100 < p.invoke_ms < t_restart]
        assert oks(cluster, "n0", "n2", invoked_after=t_kill)  # the others carry on
        cluster.nemesis.restart("n1")
        cluster.wait_started("n1")
        assert cluster.pid("n1") != old_pid
        start = [e for e in cluster.events("n1", incarnation=1) if e.kind == "node.start"][0]
        assert start.fields["incarnation"] == 1 and start.fields["pid"] == cluster.pid("n1")
        wait_for(lambda: oks(cluster, "n0", "n1", invoked_after=t_restart), "n0 pings the new n1")
        wait_for(lambda: oks(cluster, "n1", "n2", invoked_after=t_restart), "the new n1 pings n2")
        kill = [e for e in cluster.manager_events() if e.kind == "node.kill"][0]
        assert (kill.node, kill.fields) == ("n1", {"pid": old_pid, "signal": 9})
        assert manager_kinds(cluster) == ["node.kill", "node.restart"]
        assert {"n1.0", "n1.1", "nemesis"} <= {e.fields["_src"] for e in cluster.merged_events()}


# A PingPong node that also appends to a message store (ASYNC_FLUSH): 10 messages flushed, 5 not.
STORE_NODE = textwrap.dedent("""
    import os, sys
    from rmqlab.runtime.pingpong import PingPong
    from rmqlab.runtime.real_pingpong import main
    from tests.store_helpers import make_message, open_store

    class StorePingPong(PingPong):
        async def start(self, node):
            self.store, _ = open_store(os.path.join(node.store_dir, "store"), node.now_ms)
            node.trace("offset", which="written", value=self.store.get_max_phy_offset())  # what recovery kept
            for i in range(15):
                assert self.store.put_message(make_message(node.now_ms, i, body_size=500)).is_ok()
                if i == 9:
                    self.store.commit_log.flush_all()
                    node.trace("offset", which="flushed", value=self.store.commit_log.flushed_where())
            node.trace("offset", which="written", value=self.store.get_max_phy_offset())
            await super().start(node)

        async def shutdown(self):
            self.store.shutdown()

    sys.exit(main(sys.argv[1:], component_class=StorePingPong))
""")


@pytest.mark.real
def test_machine_crash_loses_unflushed_data_and_is_silent_on_the_network(tmp_path):
    cluster = RealCluster(str(tmp_path / "cluster"))
    try:
        names = ["n0", "n1", "s"]
        ports = dict(zip(names, free_ports(3)))
        for i, name in enumerate(names):
            argv = pingpong_argv(ports[name], {p: ports[p] for p in names if p != name}, INTERVAL_MS, i)
            if name == "s":
                argv = [argv[0], "-c", STORE_NODE] + argv[3:]
            cluster.add_node(name, argv, ports=[ports[name]])
        cluster.start_all()
        wait_for(lambda: oks(cluster, "n0", "s") and oks(cluster, "s", "n0"), "n0 and s ping each other")
        offsets = [e.fields for e in cluster.events("s") if e.kind == "offset"]
        assert [o["which"] for o in offsets] == ["written", "flushed", "written"] and offsets[0]["value"] == 0
        flushed, written = offsets[1]["value"], offsets[2]["value"]
        assert 0 < flushed < written

        t_crash = wall_ms()
        cluster.nemesis.crash("s")
        crash = [e for e in cluster.manager_events() if e.kind == "node.crash"][0]
        assert crash.node == "s" and crash.fields == {"lost_bytes": written - flushed, "torn": False}
        time.sleep(1.0)
        t_restart = wall_ms()
        # No FIN from a dead machine: n0's ping to s neither completes nor fails, it just waits.
        assert not completed_between(cluster, "n0", "s", t_crash + 50, t_restart)
        assert not completed_between(cluster, "n1", "s", t_crash + 50, t_restart)
        assert oks(cluster, "n0", "n1", invoked_after=t_crash)

        cluster.nemesis.restart("s")
        cluster.wait_started("s")
        # The machine is back: the old connection is reset, then n0 connects anew.
        wait_for(lambda: "ConnectionResetError" in errors(cluster, "n0", t_restart), "n0's old connection to s is reset")
        wait_for(lambda: oks(cluster, "n0", "s", invoked_after=t_restart), "n0 pings the restarted s")
        recovered = [e.fields for e in cluster.events("s", incarnation=1) if e.kind == "offset"][0]
        assert recovered == {"which": "written", "value": flushed}  # the unflushed tail is gone
        assert manager_kinds(cluster) == ["node.crash", "node.restart"]
    finally:
        cluster.close()


@pytest.mark.real
def test_suspend_freezes_the_process_and_resume_delivers_what_waited(tmp_path):
    with pingpong_cluster(tmp_path, 3) as (cluster, names):
        t_suspend = wall_ms()
        cluster.nemesis.suspend("n1")
        cluster.at(cluster.now_ms() + 1000, lambda: cluster.nemesis.resume("n1"))  # a scheduled fault
        wait_for(lambda: "node.resume" in manager_kinds(cluster), "the scheduled resume")
        t_resume = [e.time_ms for e in cluster.manager_events() if e.kind == "node.resume"][0]
        assert t_resume - t_suspend >= 1000
        wait_for(lambda: oks(cluster, "n1", "n0", invoked_after=t_resume), "n1 pings again")
        # A stopped process traces nothing; its peers' pings wait in its socket buffers.
        assert not [e for e in cluster.events("n1") if t_suspend + 50 < e.time_ms < t_resume]
        stalled = [p for p in oks(cluster, "n0", "n1") if p.invoke_ms < t_resume - 800 and p.ok_ms >= t_resume]
        assert len(stalled) == 1
        assert len(completed_between(cluster, "n0", "n2", t_suspend, t_resume)) >= 5
        assert [(e.node, e.kind) for e in cluster.manager_events()] == [("n1", "node.suspend"), ("n1", "node.resume")]


@pytest.mark.real
def test_partition_symmetric_one_way_and_heal(tmp_path):
    with pingpong_cluster(tmp_path, 4) as (cluster, names):
        left, right = ["n0", "n1"], ["n2", "n3"]
        cluster.nemesis.partition(left, right)
        t_cut = wall_ms()
        time.sleep(1.0)
        t_heal = wall_ms()
        cluster.nemesis.heal()
        for a, b in [("n0", "n1"), ("n1", "n0"), ("n2", "n3"), ("n3", "n2")]:
            assert len(completed_between(cluster, a, b, t_cut, t_heal)) >= 5, (a, b)
        cross = [(a, b) for a in names for b in names if (a in left) != (b in left)]
        for a, b in cross:
            wait_for(lambda: oks(cluster, a, b, invoked_after=t_heal), f"{a} pings {b} after the heal")
        for a, b in cross:
            assert not went_through(cluster, a, b, t_cut, t_heal), (a, b)
            # The ping sent into the partition was held, not lost: it completes after the heal.
            assert [p for p in oks(cluster, a, b) if p.invoke_ms < t_heal and p.ok_ms > t_heal]

        cluster.nemesis.partition_one_way(["n0"], ["n1"])
        t_cut = wall_ms()
        before = cluster.relay.delivered_bytes()
        time.sleep(0.8)
        t_heal = wall_ms()
        assert cluster.relay.delivered_bytes().get(("n0", "n1"), 0) == before.get(("n0", "n1"), 0)
        cluster.nemesis.heal()
        # Ping-pong needs both ways: n1's pings to n0 arrive, but n0's echoes are held.
        assert not went_through(cluster, "n0", "n1", t_cut, t_heal)
        assert not went_through(cluster, "n1", "n0", t_cut, t_heal)
        assert len(completed_between(cluster, "n0", "n2", t_cut, t_heal)) >= 5
        wait_for(lambda: oks(cluster, "n0", "n1", invoked_after=t_heal) and oks(cluster, "n1", "n0",
                                                                                invoked_after=t_heal), "healed")
        faults = [e.fields for e in cluster.manager_events() if e.kind == "fault.partition"]
        assert [(f["shape"], f["groups"]) for f in faults] == [("groups", [left, right]), ("one-way", [["n0"], ["n1"]])]
        assert faults[1]["links"] == [["n0", "n1"]]
        assert manager_kinds(cluster).count("fault.heal") == 2


@pytest.mark.real
def test_ring_and_bridge_with_five_processes(tmp_path):
    with pingpong_cluster(tmp_path, 5) as (cluster, names):
        blocked = set(ring_links(names))
        cluster.nemesis.ring()
        t_cut = wall_ms()
        time.sleep(1.2)
        t_heal = wall_ms()
        cluster.nemesis.heal()
        for a in names:
            for b in names:
                if a == b:
                    continue
                if (a, b) in blocked:
                    assert not went_through(cluster, a, b, t_cut, t_heal), (a, b)
                else:  # every node keeps reaching its two ring neighbours: progress
                    assert len(went_through(cluster, a, b, t_cut, t_heal)) >= 5, (a, b)

        cluster.nemesis.bridge()
        t_cut = wall_ms()
        time.sleep(1.0)
        t_heal = wall_ms()
        cluster.nemesis.heal()
        for a in names:
            for b in names:
                if a == b:
                    continue
                done = went_through(cluster, a, b, t_cut, t_heal)
                if {a, b} & {"n2"} or (a in ("n0", "n1")) == (b in ("n0", "n1")):
                    assert len(done) >= 3, (a, b)  # the middle node sees everyone; each half sees itself
                else:
                    assert not done, (a, b)
        shapes = [e.fields for e in cluster.manager_events() if e.kind == "fault.partition"]
        assert [s["shape"] for s in shapes] == ["ring", "bridge"]
        assert shapes[1]["groups"] == [["n0", "n1", "n2"], ["n2", "n3", "n4"]]


@pytest.mark.real
def test_loss_slows_pings_and_total_loss_resets_connections(tmp_path):
    # The simulator's RTO (200 ms, doubling, reset after 6 losses) takes 12.6 s to reset a
    # connection at loss 1.0; a 30 ms RTO keeps the same rule within this test's time budget.
    with pingpong_cluster(tmp_path, 3, rto_ms=30.0) as (cluster, names):
        # p = 0.2: a fifth of the chunks wait >= 1 RTO, and 7 losses in a row (a reset) are rare (1e-5).
        cluster.nemesis.set_loss(["n0"], ["n1"], 0.2)
        t_loss = wall_ms()
        time.sleep(1.5)
        # n0 -> n1 carries n0's requests to n1 and n0's echoes of n1's pings: both kinds slow down.
        lossy = rtts(oks(cluster, "n0", "n1", invoked_after=t_loss) + oks(cluster, "n1", "n0", invoked_after=t_loss))
        clean = rtts(oks(cluster, "n0", "n2", invoked_after=t_loss) + oks(cluster, "n2", "n0", invoked_after=t_loss))
        slow_lossy, slow_clean = sum(r >= 30 for r in lossy), sum(r >= 30 for r in clean)
        assert len(lossy) >= 20 and slow_lossy >= 3 and slow_clean <= 1, (lossy, clean)

        cluster.nemesis.set_loss(["n0"], ["n1"], 1.0)
        t_total = wall_ms()
        wait_for(lambda: "ConnectionResetError" in errors(cluster, "n0", t_total), "6 losses in a row reset the connection")
        assert not oks(cluster, "n0", "n1", invoked_after=t_total + 100)
        cluster.nemesis.set_loss(["n0"], ["n1"], 0.0)
        t_clear = wall_ms()
        wait_for(lambda: oks(cluster, "n0", "n1", invoked_after=t_clear), "pings recover")
        rates = [e.fields["rate"] for e in cluster.manager_events() if e.kind == "fault.loss"]
        assert rates == [0.2, 1.0, 0.0]


@pytest.mark.real
def test_delay_adds_to_the_round_trip(tmp_path):
    with pingpong_cluster(tmp_path, 3) as (cluster, names):
        cluster.nemesis.set_delay(["n0"], ["n1"], 100, 120)
        t_delay = wall_ms()
        time.sleep(1.2)
        # n0's requests to n1 are late, and so are n0's echoes of n1's pings; n0 -> n2 is untouched.
        for src, dst in [("n0", "n1"), ("n1", "n0")]:
            rtt = rtts(oks(cluster, src, dst, invoked_after=t_delay))
            assert len(rtt) >= 4 and 100 <= min(rtt) and max(rtt) <= 120 + 60, (src, dst, rtt)
        assert statistics.median(rtts(oks(cluster, "n0", "n2", invoked_after=t_delay))) < 30
        cluster.nemesis.set_delay(["n0"], ["n1"], 0, 0)
        t_clear = wall_ms()
        time.sleep(0.5)
        assert statistics.median(rtts(oks(cluster, "n0", "n1", invoked_after=t_clear))) < 30
        delays = [e.fields for e in cluster.manager_events() if e.kind == "fault.delay"]
        assert (delays[0]["delay_ms"], delays[0]["jitter_ms"], delays[0]["links"]) == (100, 20, [["n0", "n1"]])


@pytest.mark.real
def test_clock_pause_stops_the_nodes_time_not_its_service(tmp_path):
    with pingpong_cluster(tmp_path, 3) as (cluster, names):
        cluster.nemesis.clock_pause("n1")
        time.sleep(1.0)
        cluster.nemesis.clock_resume("n1")
        t_resume = wall_ms()
        wait_for(lambda: oks(cluster, "n1", "n0", invoked_after=t_resume), "n1 pings again")
        logs = [e for e in cluster.events("n1") if e.kind == "log"]
        assert [e.fields["message"] for e in logs] == ["clock paused", "clock resumed"]
        paused, resumed = logs
        assert resumed.fields["now_ms"] == paused.fields["now_ms"]  # n1's time stood still
        assert resumed.fields["lag_ms"] >= 900 and resumed.time_ms - paused.time_ms >= 900
        # Its timers stood still too: no ping of its own (each waits for node.sleep) ...
        assert not [p for peer in ("n0", "n2") for p in pings(cluster, "n1", peer)
                    if paused.time_ms + 50 < p.invoke_ms < resumed.time_ms]
        # ... but it still answers the others.
        assert len(completed_between(cluster, "n0", "n1", paused.time_ms, resumed.time_ms)) >= 5
        clock = [e.fields for e in cluster.manager_events() if e.kind == "fault.clock"]
        assert clock == [{"target": "n1", "action": "pause"}, {"target": "n1", "action": "resume"}]

        # The clock belongs to the machine: a process restarted during a pause starts paused.
        cluster.nemesis.clock_pause("n1")
        wait_for(lambda: len([e for e in cluster.events("n1") if e.kind == "log"]) == 3, "n1's clock pauses again")
        frozen = [e for e in cluster.events("n1") if e.kind == "log"][-1].fields["now_ms"]
        cluster.nemesis.kill("n1")
        cluster.nemesis.restart("n1")
        cluster.wait_started("n1")
        time.sleep(0.4)
        # Its two ping loops connect and ping once each, then wait in node.sleep on a clock that stands still.
        new = [e for e in cluster.events("n1", incarnation=1) if e.kind == "client" and e.fields["type"] == "invoke"]
        assert 1 <= len(new) <= 2
        cluster.nemesis.clock_resume("n1")
        wait_for(lambda: [e for e in cluster.events("n1", incarnation=1) if e.kind == "log"], "n1's clock resumes")
        resumed = [e for e in cluster.events("n1", incarnation=1) if e.kind == "log"][0].fields
        assert resumed["message"] == "clock resumed"
        # The manager's reading of the frozen clock, a few ms of signal delivery off the process's own.
        assert abs(resumed["now_ms"] - frozen) < 50 and resumed["lag_ms"] >= 1300
        t_resume = wall_ms()
        wait_for(lambda: oks(cluster, "n1", "n0", invoked_after=t_resume), "the new n1 pings on")


@pytest.mark.real
def test_without_the_relay_processes_connect_directly_and_link_faults_are_refused(tmp_path):
    with pingpong_cluster(tmp_path, 3, relay=False) as (cluster, names):
        assert cluster.relay is None
        # Each node still connects from its own address, and dials its peers' listeners directly.
        assert {e.fields["peer"] for e in cluster.events("n1") if e.kind == "net.accept"} == {"n0", "n2"}
        assert {e.fields["peer"] for e in cluster.events("n0") if e.kind == "net.connect"} == {"n1", "n2"}
        for fault in (lambda: cluster.nemesis.partition(["n0"], ["n1", "n2"]),
                      lambda: cluster.nemesis.partition_one_way(["n0"], ["n1"]),
                      lambda: cluster.nemesis.set_loss(["n0"], ["n1"], 0.5),
                      lambda: cluster.nemesis.set_delay(["n0"], ["n1"], 10, 20),
                      cluster.nemesis.heal):
            with pytest.raises(RuntimeError, match="built without the fault relay"):
                fault()
        t_kill = wall_ms()
        cluster.nemesis.kill("n1")
        wait_for(lambda: set(errors(cluster, "n0", t_kill)) & CLOSED, "n0 reads EOF (or a reset) from n1")
        cluster.nemesis.restart("n1")
        cluster.wait_started("n1")
        t_restart = wall_ms()
        wait_for(lambda: oks(cluster, "n0", "n1", invoked_after=t_restart), "n0 pings the new n1")
        # Without the relay a machine crash cannot be silent: the kernel closes the connections.
        t_crash = wall_ms()
        cluster.nemesis.crash("n2")
        wait_for(lambda: set(errors(cluster, "n0", t_crash)) & CLOSED, "n0 reads EOF (or a reset) from n2")
        assert manager_kinds(cluster) == ["node.kill", "node.restart", "node.crash"]


def test_free_ports_are_distinct_bindable_and_below_the_ephemeral_range():
    import socket

    from rmqlab.runtime import real_cluster

    ports = real_cluster.free_ports(12)
    assert len(set(ports)) == 12
    low = real_cluster._ephemeral_low()
    if low is not None and low > real_cluster.LISTEN_PORTS_FROM + 1000:
        # never a port the OS may hand to an outgoing connection meanwhile
        assert all(real_cluster.LISTEN_PORTS_FROM <= p < low for p in ports), ports
    for p in ports:
        with socket.socket() as s:
            s.bind(("127.0.0.1", p))


@pytest.mark.real
def test_a_port_handed_out_is_not_handed_out_again_meanwhile(monkeypatch):
    """Two callers looking for free ports at once (two test workers starting clusters) must not get
    the same one, free as it still is until its server binds it: neither this process nor another."""
    import random
    import subprocess
    import sys

    from rmqlab.runtime import real_cluster

    low = real_cluster._ephemeral_low()
    if low is None or low <= real_cluster.LISTEN_PORTS_FROM + 1000:
        pytest.skip("the OS does not say where its ephemeral ports start")
    first, second = real_cluster.free_ports(2)
    # Another process, made to try `first` and `second` before anything else: it gets neither.
    probe = ("import random\nfrom rmqlab.runtime import real_cluster\n"
             f"picks = iter([{first}, {second}])\n"
             "random.SystemRandom.randrange = lambda self, a, b: next(picks, 0)\n"
             "print(real_cluster.free_ports(1)[0])\n")
    other = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=60,
                           env={**os.environ, "PYTHONPATH": os.path.dirname(os.path.dirname(os.path.abspath(__file__)))})
    assert other.returncode == 0, other.stderr
    assert int(other.stdout) not in (first, second)
    # And this process again.
    picks = iter([first, first, second, second])
    monkeypatch.setattr(random.SystemRandom, "randrange", lambda self, a, b: next(picks, 0))
    again = real_cluster.free_ports(1)
    assert again[0] not in (first, second), again
