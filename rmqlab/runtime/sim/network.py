"""SimNetwork: TCP-like byte streams between simulated nodes, with named knobs for faults.

Theory of operation (in the spirit of MIT 6.5840's labrpc)
-----------------------------------------------------------
Nodes listen on (host, port) and connect to each other; a connection is two directed *halves*,
each an ordered byte stream. A `write` becomes a segment delivered after the link's latency, never
before an earlier segment of the same half (TCP order). Every segment goes through one queue
ordered by (deliver time, src, dst, connection, seq) and every random draw is derived from
(seed, src, dst, connection, seq), so the order of events never depends on the order in which
code happened to send — pysyncobj, for instance, iterates hash-ordered sets.

The knobs, per directed link (src node → dst node):

  latency_ms (lo, hi)  uniform one-way delay; default `default_latency_ms`
  loss p               each segment is lost with probability p and retransmitted after an RTO
                       (200 ms, doubling); after MAX_RETRIES losses the connection is reset —
                       what iptables packet loss does to a TCP stream
  blocked              a partition: segments wait ("retransmitting") until the link is unblocked;
                       a connect through a blocked link times out

Like the real runtime, the network traces connects and accepts; a close is traced by the component
that sees it, which knows why (rmqlab.remoting's channels do).

Node states seen by the network: a *suspended* node (SIGSTOP) keeps its connections but its
input waits until it resumes; a *process crash* closes its connections (peers read EOF, their
later writes get a reset); a *machine crash* is silent (peers hear nothing; their segments are
lost; the old connections are reset when the machine comes back).
"""

from __future__ import annotations

import asyncio
import heapq
import random
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

RTO_MS = 200.0
MAX_RETRIES = 6


@dataclass
class LinkKnobs:
    latency_ms: tuple[float, float] | None = None  # None: the network default
    loss: float = 0.0
    blocked: bool = False


class SimListener:
    def __init__(self, network: SimNetwork, node: str, host: str, port: int, handler):
        self.network, self.node, self.host, self.port, self.handler = network, node, host, port, handler

    def close(self) -> None:
        self.network.listeners.pop((self.host, self.port), None)


class _Half:
    """One direction of a connection: bytes from `src` to `dst`."""

    def __init__(self, conn: SimConnection, src: str, dst: str, reader: asyncio.StreamReader):
        self.conn, self.src, self.dst, self.reader = conn, src, dst, reader
        self.seq = 0                # last sequence number sent
        self.next_seq = 1           # next sequence number the receiver takes, in order
        self.waiting: dict[int, tuple[str, bytes]] = {}  # arrived ahead of an earlier segment
        self.last_deliver_at = 0.0
        self.stalled: list[tuple[int, str, bytes]] = []  # waiting for a blocked link to open
        self.closed = False  # the sender closed it (EOF queued)
        # This half's own random stream: its draws happen in its own send order, so they never
        # depend on how sends to different destinations interleave.
        self.rng = random.Random(f"{conn.seed}|{conn.cid}|{src}|{dst}")


class SimConnection:
    def __init__(self, seed: int, cid: int, a: str, a_addr: tuple[str, int], b: str, b_addr: tuple[str, int]):
        self.seed, self.cid, self.a, self.a_addr, self.b, self.b_addr = seed, cid, a, a_addr, b, b_addr
        self.reader_a = asyncio.StreamReader(limit=2**31)
        self.reader_b = asyncio.StreamReader(limit=2**31)
        self.a_to_b = _Half(self, a, b, self.reader_b)
        self.b_to_a = _Half(self, b, a, self.reader_a)
        self.dead = False           # reset
        self.gone: dict[str, str] = {}  # end node -> "process" | "machine": that end crashed
        self.closed_ends: set[str] = set()  # ends their own node closed

    def half_from(self, node: str) -> _Half:
        return self.a_to_b if node == self.a else self.b_to_a


class SimStreamWriter:
    """The StreamWriter side of a simulated connection."""

    def __init__(self, network: SimNetwork, conn: SimConnection, node: str):
        self._network, self._conn, self._node = network, conn, node
        self._closing = False

    def write(self, data: bytes) -> None:
        if self._closing or not data:
            return
        self._network._send(self._conn, self._node, "data", bytes(data))

    def writelines(self, chunks) -> None:
        for c in chunks:
            self.write(c)

    async def drain(self) -> None:
        if self._conn.dead:
            raise ConnectionResetError(f"connection to {self.get_extra_info('peername')} was reset")
        await asyncio.sleep(0)

    def can_write_eof(self) -> bool:
        return True

    def write_eof(self) -> None:
        if not self._closing:
            self._network._send(self._conn, self._node, "eof", b"")

    def close(self) -> None:
        if self._closing:
            return
        self._closing = True
        self._network._close_end(self._conn, self._node, reason="closed")

    def is_closing(self) -> bool:
        return self._closing or self._conn.dead

    async def wait_closed(self) -> None:
        await asyncio.sleep(0)

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        c = self._conn
        if name == "peername":
            return c.b_addr if self._node == c.a else c.a_addr
        if name == "sockname":
            return c.a_addr if self._node == c.a else c.b_addr
        return default


class SimNetwork:
    def __init__(self, loop: asyncio.AbstractEventLoop, seed: int,
                 trace: Callable[..., None] | None = None, default_latency_ms: tuple[float, float] = (0.2, 1.0),
                 spawn: Callable[[str, Any], Any] | None = None):
        self.loop = loop
        self.seed = seed
        self.default_latency_ms = default_latency_ms
        self.links: dict[tuple[str, str], LinkKnobs] = {}
        self.listeners: dict[tuple[str, int], SimListener] = {}
        self.connections: list[SimConnection] = []
        self._trace = trace or (lambda node, kind, **f: None)
        self._queue: list[tuple] = []
        self._timer: asyncio.TimerHandle | None = None
        self._timer_at = float("inf")
        self._next_cid = 0
        self._next_port: dict[str, int] = {}
        self.suspended: set[str] = set()
        self._held: dict[str, list[Callable[[], None]]] = {}  # deliveries waiting for a resume
        self.down: dict[str, str] = {}  # node -> "process" | "machine"
        self.dark: dict[tuple[str, int], str] = {}  # addresses of crashed machines: SYNs go unanswered
        # Runs an accepted connection's handler as a task of the listening node (the simulation
        # gives its nodes' spawn); without one, a plain loop task.
        self._spawn: Callable[[str, Any], Any] = spawn or (lambda node, coro: asyncio.ensure_future(coro))
        self.segments_delivered = 0

    # -- knobs -------------------------------------------------------------------------------
    def link(self, src: str, dst: str) -> LinkKnobs:
        return self.links.setdefault((src, dst), LinkKnobs())

    def is_blocked(self, src: str, dst: str) -> bool:
        k = self.links.get((src, dst))
        return bool(k and k.blocked)

    def block(self, src: str, dst: str) -> None:
        self.link(src, dst).blocked = True

    def unblock(self, src: str, dst: str) -> None:
        self.link(src, dst).blocked = False
        self._release_stalled(src, dst)

    def heal(self) -> None:
        for (src, dst), k in list(self.links.items()):
            if k.blocked:
                self.unblock(src, dst)

    def _rng(self, *key: Any) -> random.Random:
        return random.Random("|".join(map(str, (self.seed, *key))))

    def _latency_s(self, src: str, dst: str, key: tuple, rng: random.Random | None = None) -> float:
        lo, hi = self.links.get((src, dst), LinkKnobs()).latency_ms or self.default_latency_ms
        return (lo + (hi - lo) * (rng or self._rng("lat", *key)).random()) / 1000.0

    # -- listen / connect --------------------------------------------------------------------
    def listen(self, node: str, host: str, port: int, handler) -> SimListener:
        if port == 0:
            port = self._ephemeral_port(host)
        if (host, port) in self.listeners:
            owner = self.listeners[(host, port)].node
            raise OSError(98, f"[Errno 98] address {host}:{port} already in use (by {owner})")
        listener = SimListener(self, node, host, port, handler)
        self.listeners[(host, port)] = listener
        return listener

    def _ephemeral_port(self, host: str) -> int:
        port = self._next_port.get(host, 40000)
        self._next_port[host] = port + 1
        return port

    async def connect(self, node: str, host: str, port: int, timeout_ms: float) -> tuple[asyncio.StreamReader, SimStreamWriter]:
        """Three-way handshake: refused (RST), timed out (blocked link, dead machine) or established."""
        cid = self._next_cid
        self._next_cid += 1
        local = (host if host != "0.0.0.0" else "127.0.0.1", self._ephemeral_port(host))
        result: asyncio.Future = self.loop.create_future()
        timer = self.loop.call_later(timeout_ms / 1000.0, lambda: result.done() or result.set_exception(
            TimeoutError(f"{node}: connect to {host}:{port} timed out after {timeout_ms:.0f} ms")))

        def syn_arrives() -> None:
            listener = self.listeners.get((host, port))
            if result.done():
                return
            if listener is None:
                # The host answers with a RST, unless the machine at that address is down.
                if (host, port) in self.dark:
                    return
                back = self._latency_s(node, node, ("rst", cid))
                self.loop.call_later(back, lambda: result.done() or result.set_exception(
                    ConnectionRefusedError(f"{node}: connect to {host}:{port} refused")))
                return
            dst = listener.node
            if self.is_blocked(dst, node) or self.down.get(dst) == "machine":
                return  # SYN-ACK lost: the connect times out
            conn = SimConnection(self.seed, cid, node, local, dst, (host, port))
            self.connections.append(conn)
            writer_b = SimStreamWriter(self, conn, dst)

            def accept() -> None:
                self._trace(dst, "net.accept", peer=node, conn_id=cid, local=f"{host}:{port}")
                self._spawn(dst, listener.handler(conn.reader_b, writer_b))

            self._deliver_to(dst, accept)
            back = self._latency_s(dst, node, ("synack", cid))

            def established() -> None:
                if not result.done():
                    self._trace(node, "net.connect", peer=dst, conn_id=cid, local=f"{local[0]}:{local[1]}")
                    result.set_result((conn.reader_a, SimStreamWriter(self, conn, node)))
                else:  # the caller gave up: the server side sees the connection close
                    self._close_end(conn, node, reason="connect timed out")

            self.loop.call_later(back, established)

        owner = self._owner_of(host, port)
        if owner is None or not self.is_blocked(node, owner):  # else the SYN is lost: time out
            self.loop.call_later(self._latency_s(node, owner or node, ("syn", cid)), syn_arrives)
        try:
            return await result
        finally:
            timer.cancel()

    def _owner_of(self, host: str, port: int) -> str | None:
        listener = self.listeners.get((host, port))
        return listener.node if listener else None

    # -- segments ----------------------------------------------------------------------------
    def _send(self, conn: SimConnection, src: str, kind: str, payload: bytes) -> None:
        if conn.dead or src in self.down:
            return
        half = conn.half_from(src)
        if half.closed:
            return
        if kind == "eof":
            half.closed = True
        half.seq += 1
        delay = self._latency_s(src, half.dst, (), half.rng)
        loss = self.links.get((src, half.dst), LinkKnobs()).loss
        if loss > 0:
            rng = half.rng
            rto = RTO_MS
            retries = 0
            while rng.random() < loss:
                retries += 1
                if retries > MAX_RETRIES:
                    self._schedule(self.loop.time() + delay, src, half.dst, conn, half.seq,
                                   lambda: self._reset(conn, reason=f"{MAX_RETRIES} retransmissions lost"))
                    return
                delay += rto / 1000.0
                rto *= 2
        at = max(self.loop.time() + delay, half.last_deliver_at)
        half.last_deliver_at = at
        seq = half.seq
        self._schedule(at, src, half.dst, conn, seq, lambda: self._arrive(half, seq, kind, payload))

    def _schedule(self, at: float, src: str, dst: str, conn: SimConnection, seq: int, action: Callable[[], None]) -> None:
        heapq.heappush(self._queue, (at, src, dst, conn.cid, seq, action))
        if at < self._timer_at:
            if self._timer is not None:
                self._timer.cancel()
            self._timer_at = at
            self._timer = self.loop.call_at(at, self._run_due)

    def _run_due(self) -> None:
        self._timer, self._timer_at = None, float("inf")
        now = self.loop.time()
        while self._queue and self._queue[0][0] <= now:
            action = heapq.heappop(self._queue)[-1]
            action()
        if self._queue:
            self._timer_at = self._queue[0][0]
            self._timer = self.loop.call_at(self._timer_at, self._run_due)

    def _arrive(self, half: _Half, seq: int, kind: str, payload: bytes) -> None:
        conn = half.conn
        if conn.dead:
            return
        gone = conn.gone.get(half.dst)
        if gone == "process":
            self._reset(conn, reason="the peer process is gone")  # its host answers with a RST
            return
        if gone == "machine":
            return  # nobody there: lost
        if self.is_blocked(half.src, half.dst):
            half.stalled.append((seq, kind, payload))  # retransmitted until the partition heals
            return
        # TCP order: a segment is taken only after every earlier one of its half.
        half.waiting[seq] = (kind, payload)
        while half.next_seq in half.waiting:
            k, p = half.waiting.pop(half.next_seq)
            half.next_seq += 1
            self._deliver_to(half.dst, lambda k=k, p=p: self._feed(half, k, p))

    def _feed(self, half: _Half, kind: str, payload: bytes) -> None:
        conn = half.conn
        if conn.dead:
            return
        if half.dst in conn.closed_ends:
            # The receiving socket is closed: data draws a RST (as TCP does); an EOF completes the close.
            if kind == "data":
                self._reset(conn, reason="data arrived for a closed socket")
            elif half.closed and conn.half_from(half.dst).closed:
                self._forget(conn)
            return
        self.segments_delivered += 1
        if kind == "data":
            half.reader.feed_data(payload)
        else:
            half.reader.feed_eof()

    def _release_stalled(self, src: str, dst: str) -> None:
        for conn in self.connections:
            for half in (conn.a_to_b, conn.b_to_a):
                if half.src == src and half.dst == dst and half.stalled:
                    pending, half.stalled = half.stalled, []
                    for seq, kind, payload in pending:  # resent with their own sequence numbers
                        at = max(self.loop.time() + self._latency_s(src, dst, (), half.rng), half.last_deliver_at)
                        half.last_deliver_at = at
                        self._schedule(at, src, dst, conn, seq,
                                       lambda h=half, q=seq, k=kind, p=payload: self._arrive(h, q, k, p))

    def _deliver_to(self, node: str, action: Callable[[], None]) -> None:
        if node in self.suspended:
            self._held.setdefault(node, []).append(action)
        elif node not in self.down:
            action()

    # -- closing -----------------------------------------------------------------------------
    def _close_end(self, conn: SimConnection, node: str, reason: str) -> None:
        """`node` closes its end: the peer reads EOF after the data already sent."""
        if conn.dead or node in self.down:
            return
        conn.closed_ends.add(node)
        own_reader = conn.reader_a if node == conn.a else conn.reader_b
        if not own_reader.at_eof():
            own_reader.feed_eof()
        self._send(conn, node, "eof", b"")
        other = conn.half_from(conn.b if node == conn.a else conn.a)
        if other.closed:
            self._forget(conn)

    def _reset(self, conn: SimConnection, reason: str) -> None:
        if conn.dead:
            return
        conn.dead = True
        for node, reader in ((conn.a, conn.reader_a), (conn.b, conn.reader_b)):
            if node not in self.down and not reader.at_eof():
                reader.set_exception(ConnectionResetError(f"connection reset ({reason})"))
        self._forget(conn)

    def _forget(self, conn: SimConnection) -> None:
        if conn in self.connections:
            self.connections.remove(conn)

    # -- node lifecycle ----------------------------------------------------------------------
    def suspend(self, node: str) -> None:
        self.suspended.add(node)

    def resume(self, node: str) -> None:
        self.suspended.discard(node)
        for action in self._held.pop(node, []):
            if node not in self.down:
                action()

    def node_down(self, node: str, how: str) -> None:
        """A process crash ("process") or a machine crash ("machine") of `node`."""
        self.suspended.discard(node)
        self._held.pop(node, None)
        for key, listener in list(self.listeners.items()):
            if listener.node == node:
                del self.listeners[key]
                if how == "machine":
                    self.dark[key] = node
        for conn in list(self.connections):
            if node not in (conn.a, conn.b):
                continue
            if how == "process":
                # The kernel closes the sockets: peers read EOF; their later writes hit a reset.
                self._close_end(conn, node, reason="process crashed")
            conn.gone[node] = how
        # From now on anything the dead node's unwinding tasks send goes nowhere.
        self.down[node] = how

    def node_up(self, node: str) -> None:
        """The node's machine/process is back: connections of the old incarnation are reset."""
        self.down.pop(node, None)
        self.dark = {addr: n for addr, n in self.dark.items() if n != node}
        for conn in list(self.connections):
            if node in conn.gone:
                self._reset(conn, reason=f"{node} restarted")
