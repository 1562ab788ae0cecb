"""The fault-injecting TCP relay of the real runtime: partitions, loss and delay without root.

Theory of operation
-------------------
In a RealCluster (rmqlab.runtime.real_cluster) every node listens on a *private* address, its own
loopback IP and the port it asked for (127.0.0.3:20001), and the relay listens on the *public*
address the rest of the cluster dials (127.0.0.1:20001), forwarding bytes both ways. Each node's
outgoing connections are bound to its own loopback IP (RealNode.connect, local_addr) — all of
127.0.0.0/8 reaches the loopback interface on Linux — so the relay knows the source node from the
peer address. No iptables, no root: it works on Binder.

A relayed connection from node `src` to node `dst` carries two directed links, src→dst (what the
client writes: requests) and dst→src (what the listener writes: replies). Each directed link has
the simulator's knobs (`rmqlab.runtime.sim.network.LinkKnobs`), with the same meaning:

  latency_ms (lo, hi)  an added one-way delay, uniform in [lo, hi] for each chunk; none by default
                       (the relay then costs only its own forwarding, a fraction of a millisecond)
  loss p               each chunk is lost with probability p and retransmitted after an RTO
                       (RTO_MS = 200 ms, doubling); after MAX_RETRIES losses in a row the connection
                       is reset — what packet loss does to a TCP stream. Delivery stays in order.
  blocked              a partition: chunks wait, in order, until the link is unblocked (TCP keeps
                       retransmitting); nothing is lost. A connect through a link blocked in either
                       direction times out (the SYN, or the SYN-ACK, is lost).

A *chunk* is what one read of the source socket returns (at most 64 KiB): the relay's unit, as a
segment is the simulator's. Each chunk gets its delivery time when it is read (now + latency +
retransmissions, never before the previous chunk of the same direction), then waits for its link
to be open. End of stream (FIN) and reset (RST) travel the same way, after the data before them.
A direction holds at most QUEUE_LIMIT bytes; beyond that the relay stops reading, so a sender
behind a partition is eventually blocked by TCP flow control, as it would be on a real network.

The handshake byte. The kernel completes a TCP handshake with the relay's listener before the
relay has decided anything, so a connect through a partition would succeed at once (it must time
out) and a connect to a dead node would succeed and then reset (it must be refused). To keep the
simulator's meaning, the relay answers a connection *from a cluster node* with one byte, HANDSHAKE,
once it has reached the listener behind it; RealNode.connect, which knows the relayed addresses,
waits for that byte before it returns. No byte (a blocked link, a crashed machine): the connect
times out. The relay closing the connection first (the listener refused): ConnectionRefusedError.
Connections from any other address (a tool on 127.0.0.1) get no byte and no faults: for them the
relay is a plain proxy, and a dead listener shows as a connection reset rather than a refusal.

Node states, as the simulator's network sees them:

* process crash (kill -9): nothing to do. The kernel closes the node's sockets; the relay reads
  EOF and forwards it in order (held behind a partition like any chunk), so peers read EOF and
  their later writes meet a reset; new connects are refused (the private listener is gone).
* machine crash: `node_down(node)`, called before the SIGKILL. Every relayed connection of the node
  goes silent: the surviving peer hears nothing (no FIN), what it sends is lost, and connects to
  the node time out. `node_up(node)`, when the machine is back, resets those old connections — a
  rebooted host answers stale segments with RST.
* suspend (SIGSTOP): nothing to do. The kernel keeps the connections and buffers the input.

Threading: the relay runs its own asyncio loop in a daemon thread, whatever the caller runs (a
pytest test, a notebook kernel with its own loop). Every public method is thread-safe and returns
once the change is in effect; none may be called from the relay's own thread.
"""

from __future__ import annotations

import asyncio
import random
import socket
import struct
import threading
from collections import Counter, deque
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from rmqlab.runtime.sim.network import MAX_RETRIES, RTO_MS, LinkKnobs

Link = tuple[str, str]
Address = tuple[str, int]

HANDSHAKE = b"\x01"
CHUNK = 64 * 1024
QUEUE_LIMIT = 4 * 1024 * 1024
BACKEND_CONNECT_TIMEOUT_S = 3.0


def _abort_with_rst(writer: asyncio.StreamWriter) -> None:
    """Close a socket with a TCP RST (SO_LINGER 0), as a reset connection ends."""
    sock = writer.get_extra_info("socket")
    if sock is not None:
        try:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        except OSError:
            pass
    writer.transport.abort()


class _Pipe:
    """One direction of a relayed connection: reads the source socket, delivers to the destination."""

    def __init__(self, relay: Relay, conn: _Connection, link: Link | None,
                 reader: asyncio.StreamReader, writer: asyncio.StreamWriter):
        self.relay, self.conn, self.link = relay, conn, link
        self.reader, self.writer = reader, writer
        self.items: deque[tuple[float, str, bytes]] = deque()  # (deliver at, "data" | "eof" | "reset", bytes)
        self.queued = 0
        self.has_items = asyncio.Event()
        self.has_room = asyncio.Event()
        self.has_room.set()
        self.last_at = 0.0
        self.done = False  # its EOF was delivered

    def _push(self, kind: str, payload: bytes) -> str:
        delay_s, lost = self.relay._transit(self.link)
        if lost:  # MAX_RETRIES retransmissions lost: the connection is reset when the last RTO expires
            kind, payload = "reset", b""
        at = max(self.relay._loop.time() + delay_s, self.last_at)
        self.last_at = at
        self.items.append((at, kind, payload))
        self.queued += len(payload)
        self.has_items.set()
        return kind

    async def read_loop(self) -> None:
        while True:
            if self.queued >= QUEUE_LIMIT:
                self.has_room.clear()
                await self.has_room.wait()
                continue
            try:
                data = await self.reader.read(CHUNK)
            except (ConnectionError, OSError):
                self._push("reset", b"")
                return
            if not data:
                self._push("eof", b"")
                return
            if self._push("data", data) != "data":
                return

    async def write_loop(self) -> None:
        loop = self.relay._loop
        while True:
            while not self.items:
                self.has_items.clear()
                await self.has_items.wait()
            at, kind, payload = self.items[0]
            wait = at - loop.time()
            if wait > 0:
                await asyncio.sleep(wait)
                continue  # re-read the head: nothing overtakes it, but stay simple about wake-ups
            if self.relay._held(self):
                await self.relay._changed.wait()
                continue
            self.items.popleft()
            self.queued -= len(payload)
            self.has_room.set()
            if self.conn.silent:
                continue  # a crashed machine at one end: everything goes nowhere
            if kind == "data":
                self.writer.write(payload)
                try:
                    await self.writer.drain()
                except (ConnectionError, OSError):
                    self.conn.reset()
                    return
                if self.link is not None:
                    self.relay.delivered[self.link] += len(payload)
            elif kind == "eof":
                try:
                    if self.writer.can_write_eof():
                        self.writer.write_eof()
                except (ConnectionError, OSError):
                    pass
                self.done = True
                self.conn.pipe_done()
                return
            else:
                self.conn.reset()
                return


class _Connection:
    """A relayed connection: client (the connecting node) ⇄ relay ⇄ backend (the listening node)."""

    def __init__(self, relay: Relay, src: str | None, dst: str,
                 client: tuple[asyncio.StreamReader, asyncio.StreamWriter],
                 backend: tuple[asyncio.StreamReader, asyncio.StreamWriter]):
        self.relay, self.src, self.dst = relay, src, dst
        self.client_writer, self.backend_writer = client[1], backend[1]
        self.up = _Pipe(relay, self, (src, dst) if src is not None else None, client[0], backend[1])
        self.down = _Pipe(relay, self, (dst, src) if src is not None else None, backend[0], client[1])
        self.silent = False
        self.tasks: list[asyncio.Task] = []

    def start(self) -> None:
        loop = self.relay._loop
        for pipe in (self.up, self.down):
            self.tasks.append(loop.create_task(pipe.read_loop()))
            self.tasks.append(loop.create_task(pipe.write_loop()))

    def involves(self, node: str) -> bool:
        return node in (self.src, self.dst)

    def pipe_done(self) -> None:
        if self.up.done and self.down.done:
            self._finish(rst=False)

    def reset(self) -> None:
        self._finish(rst=True)

    def _finish(self, rst: bool) -> None:
        self.relay._connections.discard(self)
        for writer in (self.client_writer, self.backend_writer):
            if rst:
                _abort_with_rst(writer)
            else:
                writer.close()
        current = asyncio.current_task()
        for task in self.tasks:
            if task is not current:
                task.cancel()


class Relay:
    """Forwards each node's public listen address to its private one, with per-link faults.

    `node_ips` maps node names to their loopback addresses (the source of their connections).
    `rto_ms` and `max_retries` are the simulator's TCP constants; a test may shorten the RTO so a
    reset at loss 1.0 comes in ~1 s instead of 12.6 s. `seed` seeds the draws of latency and loss.
    """

    def __init__(self, node_ips: Mapping[str, str], *, rto_ms: float = RTO_MS, max_retries: int = MAX_RETRIES,
                 seed: int | None = None):
        self.node_ips = dict(node_ips)
        self._node_of_ip = {ip: name for name, ip in self.node_ips.items()}
        if len(self._node_of_ip) != len(self.node_ips):
            raise ValueError(f"two nodes share an address: {self.node_ips}")
        self.rto_ms, self.max_retries = rto_ms, max_retries
        self.links: dict[Link, LinkKnobs] = {}
        self.down: set[str] = set()
        self.delivered: Counter[Link] = Counter()  # bytes delivered per directed link
        self._rng = random.Random(seed)
        self._servers: list[asyncio.base_events.Server] = []
        self._connections: set[_Connection] = set()
        self._loop = asyncio.new_event_loop()
        self._changed: asyncio.Event | None = None
        self._thread = threading.Thread(target=self._run, name="rmqlab-relay", daemon=True)
        self._closed = False
        started = threading.Event()
        self._loop.call_soon(started.set)
        self._thread.start()
        started.wait()

    # -- the relay's thread -----------------------------------------------------------------
    def _run(self) -> None:
        asyncio.set_event_loop(self._loop)
        self._changed = asyncio.Event()
        self._loop.run_forever()

    def _call(self, fn: Callable[..., Any], *args: Any) -> Any:
        """Run `fn(*args)` (a function, or a coroutine function) on the relay's loop; its result."""
        if self._closed:
            raise RuntimeError("the relay is closed")
        if threading.current_thread() is self._thread:
            raise RuntimeError("Relay methods block until done; call them from another thread")

        async def run() -> Any:
            result = fn(*args)
            if asyncio.iscoroutine(result):
                result = await result
            return result

        return asyncio.run_coroutine_threadsafe(run(), self._loop).result(timeout=30)

    def _knobs_changed(self) -> None:
        # Wake every direction waiting for a link to open; they re-check their own link.
        assert self._changed is not None
        self._changed.set()
        self._changed = asyncio.Event()

    # -- listeners ---------------------------------------------------------------------------
    def add_listener(self, node: str, public: Address, private: Address) -> None:
        """Relay connections to `public` (host, port) to `node`'s listener at `private`."""
        if node not in self.node_ips:
            raise ValueError(f"unknown node {node!r} (nodes: {', '.join(self.node_ips)})")

        async def add() -> None:
            server = await asyncio.start_server(
                lambda r, w: self._on_accept(node, private, r, w), public[0], public[1])
            self._servers.append(server)

        self._call(add)

    async def _on_accept(self, dst: str, private: Address, reader: asyncio.StreamReader,
                         writer: asyncio.StreamWriter) -> None:
        peer = writer.get_extra_info("peername")
        src = self._node_of_ip.get(peer[0]) if peer else None
        if dst in self.down or (src is not None and (self._blocked((src, dst)) or self._blocked((dst, src)))):
            # The SYN (or the SYN-ACK) is lost: never answer; the client's connect times out.
            await self._hold(reader, writer)
            return
        if src is not None:
            await asyncio.sleep(self._transit((src, dst))[0])  # the SYN's one-way latency
        try:
            backend = await asyncio.wait_for(
                asyncio.open_connection(private[0], private[1], local_addr=(peer[0], 0) if src else None),
                BACKEND_CONNECT_TIMEOUT_S)
        except (TimeoutError, OSError):
            _abort_with_rst(writer)  # the listener is gone: the client sees the connection refused
            return
        conn = _Connection(self, src, dst, (reader, writer), backend)
        self._connections.add(conn)
        if src is not None:
            # The SYN-ACK's latency: queued ahead of every reply byte on the dst → src link.
            conn.down.last_at = self._loop.time() + self._transit((dst, src))[0]
            conn.down.items.append((conn.down.last_at, "data", HANDSHAKE))
            conn.down.queued += 1
            conn.down.has_items.set()
        conn.start()

    @staticmethod
    async def _hold(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while await reader.read(CHUNK):
                pass  # a client sends nothing before the handshake; anything here goes nowhere
        except (ConnectionError, OSError):
            pass
        writer.transport.abort()

    # -- knobs ---------------------------------------------------------------------------------
    def _blocked(self, link: Link) -> bool:
        k = self.links.get(link)
        return bool(k and k.blocked)

    def _held(self, pipe: _Pipe) -> bool:
        return pipe.link is not None and not pipe.conn.silent and self._blocked(pipe.link)

    def _transit(self, link: Link | None) -> tuple[float, bool]:
        """(seconds until delivery, lost for good) for one chunk on `link` — the simulator's rule."""
        k = self.links.get(link) if link is not None else None
        if k is None:
            return 0.0, False
        delay_ms = 0.0
        if k.latency_ms is not None:
            lo, hi = k.latency_ms
            delay_ms = lo + (hi - lo) * self._rng.random()
        if k.loss > 0:
            rto, retries = self.rto_ms, 0
            while self._rng.random() < k.loss:
                retries += 1
                if retries > self.max_retries:
                    return delay_ms / 1000.0, True
                delay_ms += rto
                rto *= 2
        return delay_ms / 1000.0, False

    def _check(self, links: Iterable[Link]) -> list[Link]:
        links = [tuple(link) for link in links]
        for link in links:
            for n in link:
                if n not in self.node_ips:
                    raise ValueError(f"unknown node {n!r} (nodes: {', '.join(self.node_ips)})")
        return links

    def block(self, links: Iterable[Link]) -> None:
        """Partition: hold the bytes of every link in `links` (src, dst) until it is unblocked."""
        links = self._check(links)

        def apply() -> None:
            for link in links:
                self.links.setdefault(link, LinkKnobs()).blocked = True
            self._knobs_changed()

        self._call(apply)

    def heal(self) -> None:
        """Unblock every link; held bytes flow again, in order. Loss and delay stay as set."""

        def apply() -> None:
            for k in self.links.values():
                k.blocked = False
            self._knobs_changed()

        self._call(apply)

    def set_loss(self, links: Iterable[Link], p: float) -> None:
        if not 0.0 <= p <= 1.0:
            raise ValueError(f"loss probability must be in [0, 1], got {p}")
        links = self._check(links)

        def apply() -> None:
            for link in links:
                self.links.setdefault(link, LinkKnobs()).loss = p

        self._call(apply)

    def set_latency(self, links: Iterable[Link], lo_ms: float, hi_ms: float) -> None:
        if not 0 <= lo_ms <= hi_ms:
            raise ValueError(f"delay range must satisfy 0 <= lo <= hi, got ({lo_ms}, {hi_ms})")
        links = self._check(links)

        def apply() -> None:
            for link in links:
                self.links.setdefault(link, LinkKnobs()).latency_ms = (lo_ms, hi_ms)

        self._call(apply)

    # -- machines ------------------------------------------------------------------------------
    def node_down(self, node: str) -> None:
        """The machine under `node` crashed: its connections go silent, connects to it time out."""
        self._check([(node, node)])

        def apply() -> None:
            self.down.add(node)
            for conn in self._connections:
                if conn.involves(node):
                    conn.silent = True
            self._knobs_changed()

        self._call(apply)

    def node_up(self, node: str) -> None:
        """The machine is back: the connections silenced by its crash are reset."""
        self._check([(node, node)])

        def apply() -> None:
            self.down.discard(node)
            for conn in list(self._connections):
                if conn.silent and conn.involves(node):
                    conn.reset()

        self._call(apply)

    # -- observing -----------------------------------------------------------------------------
    def delivered_bytes(self) -> dict[Link, int]:
        """Bytes delivered so far on each directed link (src, dst)."""
        return self._call(lambda: dict(self.delivered))

    def connection_count(self) -> int:
        return self._call(lambda: len(self._connections))

    # -- closing -------------------------------------------------------------------------------
    def close(self) -> None:
        """Stop listening, drop every connection, stop the thread. Idempotent."""
        if self._closed:
            return

        async def shutdown() -> None:
            for server in self._servers:
                server.close()
            for conn in list(self._connections):
                conn._finish(rst=False)
            # Cancel what is left (pipes, held connects) and let it unwind before the loop stops.
            tasks = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)

        self._call(shutdown)
        self._closed = True
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=10)
        self._loop.close()

    def __enter__(self) -> Relay:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
