"""pysyncobj on both runtimes: rmqlab.raft in the simulator and as OS processes."""

from __future__ import annotations

import ast
import asyncio
import json
import os
import pathlib
import signal
import socket
import subprocess
import sys
import threading
import time

import pysyncobj.monotonic
import pysyncobj.syncobj
import pytest

from rmqlab.raft import FailReason, RaftComponent, RaftError, clock
from rmqlab.raft.counter import CounterReplica, agreed_leader, build, peer_map, scenario
from rmqlab.raft.wire import decode_payload, encode_frame
from rmqlab.runtime.real_cluster import free_ports
from rmqlab.runtime.sim import Simulation
from rmqlab.trace import trace_hash

ROOT = pathlib.Path(__file__).resolve().parents[1]


def started(seed: int, **options):
    sim = Simulation(seed=seed)
    names = build(sim, 3, **options)
    sim.start_all()
    sim.run_until(lambda: agreed_leader(sim, names), timeout_ms=10_000, poll_ms=5)
    return sim, names


def values(sim, names) -> dict[str, int]:
    return {n: sim.components[n].value for n in names if sim.nodes[n].alive}


def settle(sim, names, expected: int, timeout_ms: float = 2_000) -> None:
    """Run until every running replica has applied exactly `expected`."""
    sim.run_until(lambda: set(values(sim, names).values()) == {expected}, timeout_ms=timeout_ms, poll_ms=5)


def role_events(sim, node: str, since_ms: float = 0.0):
    return [e for e in sim.tracer.events if e.kind == "role" and e.node == node and e.time_ms >= since_ms]


# ---------------------------------------------------------------------------------------------
# Simulator
# ---------------------------------------------------------------------------------------------

def test_sim_elects_fails_over_and_discards_the_isolated_leaders_write():
    wall = time.perf_counter()
    sim, names = started(seed=3)
    comps = sim.components
    first = agreed_leader(sim, names)
    elected_at = sim.now_ms()
    assert comps[first].term >= 1 and elected_at < 5_000

    # Writes commit on every replica, whichever replica they are submitted to (followers forward).
    for i in range(6):
        assert sim.run(comps[names[i % 3]].incr(1)) == i + 1
    settle(sim, names, 6)

    # Kill the leader: the survivors elect another within a few virtual seconds; writes continue.
    term = comps[first].term
    sim.nemesis.kill(first)
    survivors = [n for n in names if n != first]
    failover_ms = sim.run_until(lambda: agreed_leader(sim, survivors), timeout_ms=5_000, poll_ms=5)
    second = agreed_leader(sim, survivors)
    assert comps[second].term > term
    assert sim.run(comps[survivors[0]].incr(1)) == 7
    sim.nemesis.restart(first)
    sim.run_until(lambda: agreed_leader(sim, names) == second, timeout_ms=15_000, poll_ms=5)
    settle(sim, names, 7)

    # Isolate the leader and write to it: it stays leader (leaderFallbackTimeout is 30 s) and
    # appends the write, but can never commit it; the others elect a new leader and move on.
    old = agreed_leader(sim, names)
    old_term = comps[old].term
    rest = [n for n in names if n != old]
    sim.nemesis.partition([old], rest)
    doomed = comps[old].incr_future(100)
    sim.run_until(lambda: agreed_leader(sim, rest), timeout_ms=10_000, poll_ms=5)
    new = agreed_leader(sim, rest)
    assert comps[new].term > old_term
    assert comps[old].role == "LEADER" and comps[old].term == old_term  # two leaders, two terms
    assert sim.run(comps[new].incr(1)) == 8
    sim.run_for(6_000)  # past connectionTimeout: the links across the partition die and must be redialled
    assert not doomed.done() and comps[old].role == "LEADER" and comps[old].connected_peers() == []

    # Heal: the old leader hears the higher term, steps down, and its write is discarded.
    healed_at = sim.now_ms()
    sim.nemesis.heal()
    sim.run_until(lambda: doomed.done() and comps[old].role == "FOLLOWER" and comps[old].leader == new,
                  timeout_ms=15_000, poll_ms=5)
    with pytest.raises(RaftError) as failure:
        doomed.result()
    assert failure.value.reason is FailReason.DISCARDED
    settle(sim, names, 8)  # the +100 is applied nowhere
    stepped_down = [e for e in role_events(sim, old, healed_at) if e.fields["to"] == "FOLLOWER"]
    assert stepped_down and stepped_down[0].fields["from"] == "LEADER"

    # The trace carries the Raft view, the roles and every frame with its decoded fields.
    kinds = {e.kind for e in sim.tracer.events}
    assert {"raft", "role", "frame.send", "frame.recv", "fault.partition", "fault.heal"} <= kinds
    sends = [e for e in sim.tracer.events if e.kind == "frame.send"]
    assert {e.fields["type"] for e in sends} >= {"self_address", "request_vote", "response_vote",
                                                 "append_entries", "next_node_idx", "apply_command"}
    assert all(e.fields["proto"] == "raft" and e.fields["size"] > 4 for e in sends)
    virtual_s = sim.now_ms() / 1000
    sim.close()
    wall = time.perf_counter() - wall
    print(f"\nsim: elected {first} at {elected_at:.0f} ms, failover {failover_ms:.0f} ms, old leader "
          f"stepped down {stepped_down[0].time_ms - healed_at:.0f} ms after the heal; "
          f"{virtual_s:.1f} virtual s in {wall:.3f} s wall")


def test_sim_write_pending_on_a_killed_replica_fails_without_an_unretrieved_exception():
    """A write still pending when its replica's process dies fails (UNKNOWN_OUTCOME), and since
    whoever awaited it died too, asyncio must not report "Future exception was never retrieved"
    when the future is collected (seen once in a grading run's output)."""
    import gc

    sim, names = started(seed=4)
    leader = agreed_leader(sim, names)
    sim.nemesis.partition([leader], [n for n in names if n != leader])  # the write cannot commit
    fut = sim.components[leader].incr_future(1)
    reported: list[dict] = []
    fut.get_loop().set_exception_handler(lambda _loop, context: reported.append(context))
    sim.run_for(100)
    assert not fut.done()
    sim.nemesis.kill(leader)
    assert fut.done() and not fut.cancelled()
    sim.close()
    del fut, sim  # the dead replica's pysyncobj still holds the write's callback, hence the future
    gc.collect()
    assert not [c for c in reported if "never retrieved" in c.get("message", "")], reported


@pytest.mark.real
def test_sim_same_seed_same_trace_across_processes_and_hash_seeds():
    outs = set()
    for hash_seed in ("0", "1", "12345"):
        env = dict(os.environ, PYTHONHASHSEED=hash_seed, PYTHONPATH=str(ROOT))
        r = subprocess.run([sys.executable, "-m", "rmqlab.raft.counter", "--seed", "7"], capture_output=True,
                           text=True, env=env, timeout=120, cwd=ROOT)
        assert r.returncode == 0, r.stderr
        outs.add(r.stdout.strip())
    assert len(outs) == 1, outs
    out = outs.pop()
    # The scenario really exercised failover and the discarded write of the isolated leader.
    elections = int(out.split("elections=")[1].split()[0])
    assert elections >= 4 and "+100:DISCARDED" in out, out


def test_sim_trace_depends_on_the_seed_only():
    a, _ = scenario(11, ms=12_000)
    b, _ = scenario(11, ms=12_000)
    c, _ = scenario(12, ms=12_000)
    assert trace_hash(a.tracer.events) == trace_hash(b.tracer.events) != trace_hash(c.tracer.events)
    for s in (a, b, c):
        s.close()


def test_sim_restarted_replica_rebuilds_its_state_from_dump_and_journal():
    sim, names = started(seed=5, journal=True, full_dump=True)
    comps = sim.components
    leader = agreed_leader(sim, names)
    follower = next(n for n in names if n != leader)
    for _ in range(20):
        sim.run(comps[leader].incr(1))
    settle(sim, names, 20)
    comps[follower].force_log_compaction()
    sim.run_for(100)
    raft_dir = os.path.join(sim.nodes[follower].store_dir, "raft")
    assert os.path.getsize(os.path.join(raft_dir, "raft.dump")) > 0
    for _ in range(10):
        sim.run(comps[leader].incr(1))
    settle(sim, names, 30)
    sim.run_for(1_500)  # the journal saves the commit index once a second
    term = comps[follower].term
    log_size = comps[follower].status()["log_size"]
    assert log_size < 30  # compacted: the first 20 writes live only in the dump

    # Restart it cut off from everyone: whatever it knows comes from its own files.
    sim.nemesis.kill(follower)
    sim.nemesis.partition([follower], [n for n in names if n != follower])
    sim.nemesis.restart(follower)
    sim.run_for(300)
    restarted = comps[follower]
    assert sim.nodes[follower].incarnation == 2
    assert restarted.value == 30 and restarted.last_applied == restarted.commit_index
    assert restarted.term == term and restarted.role == "FOLLOWER" and restarted.leader is None
    assert restarted.status()["log_size"] == log_size

    # Back on the network it rejoins — possibly as the new leader: its election deadline passed
    # while it was cut off, and pysyncobj has no PreVote to stop it from campaigning at once.
    sim.nemesis.heal()
    sim.run_until(lambda: agreed_leader(sim, names), timeout_ms=15_000, poll_ms=5)
    assert sim.run(comps[follower].incr(5)) == 35
    settle(sim, names, 35)
    sim.close()


def test_sim_replica_without_journal_restarts_empty_and_catches_up_from_the_leader():
    sim, names = started(seed=5)
    comps = sim.components
    leader = agreed_leader(sim, names)
    follower = next(n for n in names if n != leader)
    for _ in range(5):
        sim.run(comps[leader].incr(1))
    settle(sim, names, 5)
    sim.nemesis.kill(follower)
    sim.nemesis.partition([follower], [n for n in names if n != follower])
    sim.nemesis.restart(follower)
    sim.run_for(300)
    assert comps[follower].value == 0 and comps[follower].term == 0  # the in-memory journal is gone
    sim.nemesis.heal()
    settle(sim, names, 5, timeout_ms=15_000)
    sim.close()


def test_sim_suspended_leader_steps_down_on_resume_and_forwards_the_write_it_got_meanwhile():
    """SIGSTOP, as pysyncobj experiences it: the peers elect a new leader; the stopped leader's
    input (the new term's request_vote / append_entries) waits in its socket buffers. On SIGCONT
    it reads them before its own timers run, so it steps down first; a write that reached it while
    it was stopped is then forwarded to the new leader and succeeds. (Contrast: an *isolated*
    running leader appends the write itself, and the write is discarded.)"""
    sim, names = started(seed=9)
    comps = sim.components
    old = agreed_leader(sim, names)
    old_term = comps[old].term
    for _ in range(3):
        sim.run(comps[old].incr(1))
    settle(sim, names, 3)
    sim.nemesis.suspend(old)
    received: list[asyncio.Future] = []
    # A request delivered to the stopped process: handled when it runs again.
    sim.nodes[old].call_later(0, lambda: received.append(comps[old].incr_future(100)))
    rest = [n for n in names if n != old]
    sim.run_until(lambda: agreed_leader(sim, rest), timeout_ms=10_000, poll_ms=5)
    new = agreed_leader(sim, rest)
    assert comps[new].term > old_term
    assert comps[old].role == "LEADER" and comps[old].term == old_term and received == []  # frozen
    assert sim.run(comps[new].incr(1)) == 4

    resumed_at = sim.now_ms()
    sim.nemesis.resume(old)
    sim.run_until(lambda: received and received[0].done(), timeout_ms=5_000, poll_ms=5)
    assert received[0].result() == 104
    step_down = [e for e in role_events(sim, old, resumed_at) if e.fields["to"] == "FOLLOWER"]
    assert step_down and step_down[0].time_ms == resumed_at  # before any timer of its own
    assert comps[old].leader == new and comps[old].term == comps[new].term
    settle(sim, names, 104)
    sim.close()


def test_sim_clock_paused_follower_votes_and_acks_but_never_times_out_or_applies():
    """A replica whose clock stands still runs no tick: no election timeout, no heartbeat, no
    applying of committed entries. Message handling needs no clock, so it still grants votes and
    acknowledges append_entries — a leader can commit with it as the majority — and its commit
    index moves while its state machine stays behind until its clock resumes."""
    sim, names = started(seed=4)
    comps = sim.components
    leader = agreed_leader(sim, names)
    paused, other = [n for n in names if n != leader]
    for _ in range(4):
        sim.run(comps[leader].incr(1))
    settle(sim, names, 4)

    paused_at = sim.now_ms()
    sim.nemesis.clock_pause(paused)
    frozen_clock = sim.nodes[paused].now_ms()
    sim.nemesis.kill(leader)  # only `other` can time out now; it needs `paused`'s vote to win
    sim.run_until(lambda: comps[other].role == "LEADER", timeout_ms=10_000, poll_ms=5)
    sim.run_until(lambda: comps[paused].leader == other, timeout_ms=5_000, poll_ms=5)
    assert sim.nodes[paused].now_ms() == frozen_clock
    assert not [e for e in role_events(sim, paused, paused_at) if e.fields["to"] == "CANDIDATE"]
    assert comps[paused].term == comps[other].term

    # With the old leader dead, every commit needs the paused replica's acknowledgement.
    assert sim.run(comps[other].incr(10)) == 14
    sim.run_for(500)
    assert comps[paused].value == 4  # committed, not applied: applying happens in a tick
    assert comps[paused].commit_index > comps[paused].last_applied

    sim.nemesis.clock_resume(paused)
    sim.run_for(10)
    assert comps[paused].value == 14 and comps[paused].last_applied == comps[paused].commit_index
    sim.close()


def test_sim_trace_of_frames_is_pysyncobjs_wire_format():
    frame = encode_frame({"type": "request_vote", "term": 3, "last_log_index": 7, "last_log_term": 2})
    assert int.from_bytes(frame[:4], sys.byteorder, signed=True) == len(frame) - 4
    assert decode_payload(frame[4:])["term"] == 3
    sim, names = started(seed=1)
    votes = [e for e in sim.tracer.events if e.kind == "frame.recv" and e.fields["type"] == "request_vote"]
    assert votes and all(isinstance(e.fields["term"], int) and "last_log_index" in e.fields for e in votes)
    sim.close()


# ---------------------------------------------------------------------------------------------
# Pieces
# ---------------------------------------------------------------------------------------------

def test_clock_binding_is_per_thread_and_falls_through_to_the_real_clock():
    real = pysyncobj.monotonic.monotonic
    assert pysyncobj.syncobj.monotonicTime is clock.monotonic_time
    before = real()
    assert before <= pysyncobj.syncobj.monotonicTime() <= real()
    seen: list[float] = []
    with clock.bound(lambda: 42.0):
        assert pysyncobj.syncobj.monotonicTime() == 42.0
        with clock.bound(lambda: 7.0):
            assert pysyncobj.syncobj.monotonicTime() == 7.0
        assert pysyncobj.syncobj.monotonicTime() == 42.0
        t = threading.Thread(target=lambda: seen.append(pysyncobj.syncobj.monotonicTime()))
        t.start()
        t.join()
    assert before <= seen[0] <= real()
    assert pysyncobj.syncobj.monotonicTime() != 42.0


def test_component_refuses_bad_settings():
    peers = peer_map(3)
    with pytest.raises(ValueError, match="not among the peers"):
        CounterReplica("n9", peers)
    with pytest.raises(ValueError, match="unknown SyncObjConf setting"):
        CounterReplica("n0", peers, raftMinTimout=1.0)
    with pytest.raises(ValueError, match="set by RaftComponent"):
        CounterReplica("n0", peers, autoTick=False)
    with pytest.raises(ValueError, match="refuses"):
        CounterReplica("n0", peers, raftMinTimeout=0.1)
    with pytest.raises(ValueError, match="host:port"):
        RaftComponent("a", {"a": "nowhere"}, [])
    assert [r.name for r in FailReason if r.certainly_not_applied] == [
        "QUEUE_FULL", "MISSING_LEADER", "DISCARDED", "NOT_LEADER", "REQUEST_DENIED"]


def test_pysyncobj_still_has_the_hooks_rmqlab_overrides():
    # RaftSyncObj overrides SyncObj's name-mangled timeout method and reads its raft state; if a
    # pysyncobj release renamed them, the override would be silently bypassed.
    assert callable(vars(pysyncobj.syncobj.SyncObj).get("_SyncObj__generateRaftTimeout"))
    sim, names = started(seed=2)
    so = sim.components[names[0]].sync_obj
    assert so._SyncObj__raftState in (0, 1, 2)
    rng_state = sim.nodes[names[0]].random.getstate()
    so._SyncObj__generateRaftTimeout()
    assert sim.nodes[names[0]].random.getstate() != rng_state  # drawn from the node's stream
    sim.close()


def test_raft_modules_follow_the_house_rules():
    for path in sorted((ROOT / "rmqlab" / "raft").glob("*.py")):
        tree = ast.parse(path.read_text())
        imported = {alias.name.split(".")[0] for node in ast.walk(tree) if isinstance(node, ast.Import)
                    for alias in node.names}
        imported |= {(node.module or "").split(".")[0] for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)}
        assert not imported & {"time", "random", "socket"}, path.name


# ---------------------------------------------------------------------------------------------
# Real runtime: three OS processes on 127.0.0.1
# ---------------------------------------------------------------------------------------------

class ProcessCluster:
    """Three counter_process replicas; `relay` puts a Relay between them (pysyncobj's bindAddress)."""

    def __init__(self, tmp_path: pathlib.Path, relayed: bool = False):
        self.names = ["n0", "n1", "n2"]
        ports = free_ports(9)
        self.public = dict(zip(self.names, ports[0:3]))   # the peer addresses everyone dials
        self.control = dict(zip(self.names, ports[3:6]))
        self.private = dict(zip(self.names, ports[6:9])) if relayed else None
        self.peers = ";".join(f"{n}-127.0.0.1:{self.public[n]}" for n in self.names)
        self.tmp = tmp_path
        self.procs: dict[str, subprocess.Popen] = {}
        self.relay = Relay(self.public, self.private) if relayed else None

    def spawn(self, name: str) -> None:
        cmd = [sys.executable, "-m", "rmqlab.raft.counter_process", "--self", name, "--peers", self.peers,
               "--control-port", str(self.control[name]), "--store-dir", str(self.tmp / name), "--journal"]
        if self.private:
            cmd += ["--bind", f"127.0.0.1:{self.private[name]}"]
        log = open(self.tmp / f"{name}.out", "a")
        self.procs[name] = subprocess.Popen(cmd, cwd=ROOT, env=dict(os.environ, PYTHONPATH=str(ROOT)),
                                            stdout=log, stderr=subprocess.STDOUT)
        log.close()

    def start_all(self) -> None:
        """Start the replicas in pysyncobj's dial order — the higher address dials the lower
        (TCPTransport._shouldConnect) — each once the previous answers, so that no first dial
        finds its peer not yet listening and waits out connectionRetryTime (5 s)."""
        for name in sorted(self.names, key=lambda n: f"127.0.0.1:{self.public[n]}"):
            self.spawn(name)
            self.wait(lambda: self.status(name), 10, f"{name} serving")

    def request(self, name: str, req: dict, timeout: float) -> dict:
        with socket.create_connection(("127.0.0.1", self.control[name]), timeout=timeout) as s:
            s.sendall(json.dumps(req).encode() + b"\n")
            return json.loads(s.makefile("r").readline())

    def status(self, name: str) -> dict | None:
        try:
            return self.request(name, {"op": "status"}, timeout=0.5)["status"]
        except (OSError, ValueError):
            return None

    def incr(self, name: str, by: int = 1, timeout: float = 10.0) -> dict:
        return self.request(name, {"op": "incr", "by": by}, timeout)

    def agreed(self, names) -> str | None:
        views = [self.status(n) for n in names]
        if any(v is None for v in views) or len({v["leader"] for v in views}) != 1:
            return None
        leader = views[0]["leader"]
        ok = leader in names and views[list(names).index(leader)]["role"] == "LEADER"
        return leader if ok else None

    @staticmethod
    def wait(predicate, timeout: float, what: str):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            result = predicate()
            if result:
                return result
            time.sleep(0.02)
        raise AssertionError(f"timed out after {timeout} s waiting for {what}")

    def signal(self, name: str, sig: int) -> None:
        os.kill(self.procs[name].pid, sig)

    def close(self) -> None:
        for proc in self.procs.values():
            if proc.poll() is None:
                os.kill(proc.pid, signal.SIGCONT)  # a stopped process would not die until continued
                os.kill(proc.pid, signal.SIGKILL)
        for proc in self.procs.values():
            proc.wait(timeout=10)
        if self.relay is not None:
            self.relay.close()

    def output(self) -> str:
        return "\n".join(f"--- {n}\n" + (self.tmp / f"{n}.out").read_text()[-2000:] for n in self.procs)


class Relay:
    """A partitionable TCP relay in front of each replica, for the real runtime.

    Replica n listens on its private port (pysyncobj's bindAddress) and announces its public
    port, where the relay listens and forwards. The relay learns which replica dialled from the
    connection's first frame (pysyncobj's self address, `rmqlab.raft.wire`). While a replica is
    isolated, bytes from and to it wait in the relay, in order, as TCP would keep retransmitting
    behind a partition; `heal` lets them through.
    """

    def __init__(self, public: dict[str, int], private: dict[str, int]):
        self.public, self.private = public, private
        self.by_address = {f"127.0.0.1:{port}": name for name, port in public.items()}
        self.isolated: set[str] = set()
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()
        self.servers = self._run(self._listen())

    def _run(self, coro):
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout=10)

    async def _listen(self):
        self.changed = asyncio.Condition()
        return [await asyncio.start_server(lambda r, w, n=name: self._relay(n, r, w), "127.0.0.1", port)
                for name, port in self.public.items()]

    async def _relay(self, dst: str, reader, writer) -> None:
        try:
            up_reader, up_writer = await asyncio.open_connection("127.0.0.1", self.private[dst])
            header = await reader.readexactly(4)
            first = header + await reader.readexactly(int.from_bytes(header, sys.byteorder, signed=True))
        except (OSError, asyncio.IncompleteReadError):
            writer.close()
            return
        src = self.by_address.get(decode_payload(first[4:]), "?")
        await asyncio.gather(self._pump(src, dst, first, reader, up_writer),
                             self._pump(dst, src, b"", up_reader, writer))

    async def _pump(self, src: str, dst: str, data: bytes, reader, writer) -> None:
        try:
            while True:
                if data:
                    await self._open(src, dst)
                    writer.write(data)
                    await writer.drain()
                data = await reader.read(65536)
                if not data:
                    await self._open(src, dst)  # the FIN waits behind the partition like the data
                    break
        except OSError:
            pass
        finally:
            writer.close()

    async def _open(self, src: str, dst: str) -> None:
        async with self.changed:
            await self.changed.wait_for(lambda: not {src, dst} & self.isolated)

    async def _set(self, isolated: set[str]) -> None:
        async with self.changed:
            self.isolated = isolated
            self.changed.notify_all()

    def isolate(self, name: str) -> None:
        self._run(self._set({name}))

    def heal(self) -> None:
        self._run(self._set(set()))

    async def _shutdown(self) -> None:
        for server in self.servers:
            server.close()
        tasks = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    def close(self) -> None:
        self._run(self._shutdown())
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(timeout=5)
        self.loop.close()


def in_background(fn, *args):
    """Run fn(*args) in a thread; returns (thread, result list) — a write that waits."""
    result: list = []
    t = threading.Thread(target=lambda: result.append(fn(*args)), daemon=True)
    t.start()
    return t, result


@pytest.mark.real
def test_real_three_processes_elect_fail_over_and_survive_sigstop(tmp_path):
    cluster = ProcessCluster(tmp_path)
    names = cluster.names
    try:
        t0 = time.monotonic()
        cluster.start_all()
        first = cluster.wait(lambda: cluster.agreed(names), 20, "a leader all three agree on")
        elected = time.monotonic() - t0
        assert cluster.incr(first) == {"id": None, "ok": True, "value": 1}
        cluster.wait(lambda: all((cluster.status(n) or {}).get("value") == 1 for n in names), 5, "value 1 everywhere")

        # kill -9 the leader: the survivors elect a new one and accept writes.
        survivors = [n for n in names if n != first]
        term = cluster.status(survivors[0])["term"]
        cluster.signal(first, signal.SIGKILL)
        cluster.procs[first].wait(timeout=5)
        killed = time.monotonic()
        second = cluster.wait(lambda: cluster.agreed(survivors), 20, "a new leader among the survivors")
        failover = time.monotonic() - killed
        assert cluster.status(second)["term"] > term
        assert cluster.incr(survivors[0])["value"] == 2

        # The killed replica restarts from its journal and rejoins (it may disrupt the leader on the
        # way: pysyncobj has no PreVote, so whoever leads afterwards is not fixed).
        cluster.spawn(first)
        caught_up = lambda: (cluster.status(first) or {}).get("value") == 2  # noqa: E731
        old = cluster.wait(lambda: caught_up() and cluster.agreed(names), 20,
                           "the restarted replica caught up, all three following one leader")

        # SIGSTOP the leader; a write reaches it while it is stopped (its control channel reads it
        # after SIGCONT); the others elect a new leader and commit a write of their own.
        rest = [n for n in names if n != old]
        old_term = cluster.status(old)["term"]
        cluster.signal(old, signal.SIGSTOP)
        writer, reply = in_background(cluster.incr, old, 100, 60.0)
        new = cluster.wait(lambda: cluster.agreed(rest), 20, "a new leader while the old one is stopped")
        assert cluster.status(new)["term"] > old_term
        assert cluster.incr(new)["value"] == 3
        assert reply == []  # nothing answers from a stopped process
        cluster.signal(old, signal.SIGCONT)
        continued = time.monotonic()
        # It steps down when it hears the newer term. Who leads after that is open: more elections
        # may follow (pysyncobj has no PreVote), the old leader may even win one in a newer term.
        cluster.wait(lambda: (cluster.status(old) or {}).get("term", 0) > old_term, 20, "the old leader stepping down")
        stepped_down = time.monotonic() - continued
        cluster.wait(lambda: cluster.agreed(names), 20, "all three following one leader")
        writer.join(timeout=30)
        assert reply, "the write sent to the stopped leader never completed"
        # Two threads wake on SIGCONT: pysyncobj's, which usually reads the new term's messages and
        # steps down before it looks at its command queue again — the write is then forwarded to
        # the new leader and succeeds, as in the simulator — and the control channel's, which now
        # and then queues the write first: the old leader appends it as leader and it is discarded.
        # Either way the replicas must agree with what the client was told.
        outcome = reply[0]
        if outcome["ok"]:
            assert outcome["value"] == 103
            allowed = {103}
        elif outcome["error"] == "DISCARDED":
            allowed = {3}
        else:  # the client may be told it cannot know; then either state is right
            assert outcome["error"] in ("LEADER_CHANGED", "UNKNOWN_OUTCOME"), outcome
            allowed = {3, 103}
        cluster.wait(lambda: len(vs := {(cluster.status(n) or {}).get("value") for n in names}) == 1 and vs <= allowed,
                     10, f"one value of {allowed} on every replica")
        print(f"\nreal: elected in {elected:.2f} s, failover after kill -9 in {failover:.2f} s, old leader "
              f"stepped down {stepped_down:.2f} s after SIGCONT, write sent while stopped: {reply[0]}")
    except BaseException:
        print(cluster.output())
        raise
    finally:
        cluster.close()


@pytest.mark.real
def test_real_isolated_old_leaders_write_is_discarded_after_the_heal(tmp_path):
    cluster = ProcessCluster(tmp_path, relayed=True)
    names = cluster.names
    try:
        cluster.start_all()
        old = cluster.wait(lambda: cluster.agreed(names), 20, "a leader all three agree on")
        assert cluster.incr(old)["value"] == 1
        old_term = cluster.status(old)["term"]
        rest = [n for n in names if n != old]

        cluster.relay.isolate(old)
        writer, reply = in_background(cluster.incr, old, 100, 60.0)
        new = cluster.wait(lambda: cluster.agreed(rest), 20, "a new leader on the majority side")
        assert cluster.status(new)["term"] > old_term
        assert cluster.incr(new)["value"] == 2
        s = cluster.status(old)
        assert s["role"] == "LEADER" and s["term"] == old_term and reply == []

        cluster.relay.heal()
        healed = time.monotonic()
        writer.join(timeout=40)
        assert reply == [{"id": None, "ok": False, "error": "DISCARDED"}]
        discarded = time.monotonic() - healed
        assert cluster.status(old)["term"] > old_term  # it learnt the newer term: that is how it stepped down
        cluster.wait(lambda: cluster.agreed(names), 20, "all three following one leader")
        cluster.wait(lambda: all((cluster.status(n) or {}).get("value") == 2 for n in names), 10,
                     "value 2 everywhere: the +100 applied nowhere")
        print(f"\nreal (relayed): the isolated leader's write was discarded {discarded:.2f} s after the heal")
    except BaseException:
        print(cluster.output())
        raise
    finally:
        cluster.close()
