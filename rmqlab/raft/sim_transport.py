"""SimTransport: a pysyncobj Transport over the simulated network's byte streams.

pysyncobj talks to its peers through a `pysyncobj.transport.Transport`: it calls `send(node,
message) -> bool` and expects the transport to report connections and messages through
`_onNodeConnected`, `_onNodeDisconnected` and `_onMessageReceived`. This transport does what
pysyncobj's own TCPTransport and TcpConnection do, over `node.connect` / `node.listen` of a SimNode,
so that the Raft code sees the same connection semantics as on a real network:

* one connection per pair of replicas, dialled by the replica whose address sorts higher
  (TCPTransport._shouldConnect); the dialler's first frame is its own node id, by which the
  listener recognizes it (an unknown id is hung up on); frames are TcpConnection's bytes
  (`rmqlab.raft.wire`);
* `send` returns False unless the peer is connected — pysyncobj sends only to connected nodes, and
  a follower starts an election only while it is connected to someone;
* connectionTimeout: a connection that has read nothing for that long is declared dead the next
  time it sends or reads (TcpConnection.__trySendBuffer / __processConnection check it then, not
  on a timer), so behind a partition a link dies about 3.5 s after its last read, not at once;
* connectionRetryTime: a dialler tries a lost peer again at most that often (TCPTransport.
  _connectIfNecessarySingle), also right after a disconnect if the last attempt is old enough;
  a connect through a partition times out after connectionTimeout;
* EOF or a reset from the peer disconnects at once (a killed process's kernel closes its sockets).

Hanging up. pysyncobj closes a dropped connection (socket.close); the peer reads EOF and drops its
end too. Here a hang-up is a half-close (`write_eof`): the peer reads the same EOF, while this end
keeps reading — and ignoring — what the peer had sent before it saw the EOF, and closes once the
peer's own EOF arrives. The simulated network does not accept bytes for an end that was already
closed (they would be fed to a StreamReader at EOF), and for pysyncobj the two are the same: the
old connection carries nothing more either way.

Determinism. pysyncobj iterates hash-ordered sets of nodes when it sends request_vote and
append_entries, so the order of its `send` calls changes with PYTHONHASHSEED. The network already
delivers by (time, src, dst, connection, seq) whatever the send order; what remains order-dependent
is what this transport *emits* while pysyncobj runs — frame.send events and the net.close of a
connection it drops. Those actions are queued during each entry into pysyncobj (a *session*, run by
`rmqlab.raft.component.RaftComponent`) and carried out at its end sorted by (peer, order within the
peer), so the trace is the same for every hash seed.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

from pysyncobj.node import Node
from pysyncobj.transport import Transport

from rmqlab.config.addresses import parse_addr
from rmqlab.raft.wire import LENGTH, MAX_FRAME, decode_payload, encode_frame, frame_fields
from rmqlab.runtime.sim.node import SimNode

Session = Callable[..., Any]  # session(fn, *args): run fn inside a pysyncobj session


class _Link:
    """The current connection to one peer."""

    __slots__ = ("peer_id", "writer", "last_read", "current", "hung_up")

    def __init__(self, peer_id: str, writer: Any, now: float):
        self.peer_id = peer_id
        self.writer = writer
        self.last_read = now  # TcpConnection.__lastReadTime: set on connect and on every read
        self.current = True   # False once dropped or replaced: what it still reads is ignored
        self.hung_up = False  # our EOF is sent: nothing more goes out on it

    def hang_up(self) -> None:
        if not self.hung_up:
            self.hung_up = True
            self.writer.write_eof()


class SimTransport(Transport):
    """Built by SyncObj as `transportClass(syncObj, selfNode, otherNodes)`; bind the keyword
    arguments with functools.partial. `session` runs a function as an entry into pysyncobj (clock
    bound, deferred actions flushed); `wake` is called after every input event (a frame, a new or
    lost connection), where pysyncobj's poll would return and its thread tick; `name_of` maps a
    node id (host:port) to the node's name for the trace; `trace_frames` turns frame.send /
    frame.recv events on."""

    def __init__(self, syncObj, selfNode: Node, otherNodes, *, node: SimNode, session: Session,
                 wake: Callable[[], None], name_of: Callable[[str], str], trace_frames: bool = True):
        super().__init__(syncObj, selfNode, otherNodes)
        self._conf = syncObj.conf
        self._node = node
        self._self = selfNode
        self._session = session
        self._wake = wake
        self._name_of = name_of
        self._trace_frames = trace_frames
        self._peers: dict[str, Node] = {}
        self._dial_order: list[str] = []
        for other in otherNodes:
            self.addNode(other)
        self._links: dict[str, _Link] = {}
        self._dialing: set[str] = set()
        self._last_dial: dict[str, float] = {}
        self._deferred: list[tuple[str, int, Callable[[], None]]] = []
        self._seq = 0
        self._destroyed = False

    # -- pysyncobj's Transport interface -----------------------------------------------------
    def addNode(self, node: Node) -> None:
        self._peers[node.id] = node
        self._dial_order = sorted(self._peers)

    def dropNode(self, node: Node) -> None:
        # As TCPTransport.dropNode: hang up without reporting a disconnect, and never redial.
        link = self._links.pop(node.id, None)
        if link is not None:
            link.current = False
            self._later(node.id, link.hang_up)
        self._peers.pop(node.id, None)
        self._last_dial.pop(node.id, None)
        self._dial_order = sorted(self._peers)

    def send(self, node: Node, message: Any) -> bool:
        link = self._links.get(node.id)
        if link is None:
            return False
        if self._now() - link.last_read > self._conf.connectionTimeout:
            self._drop(link)  # TcpConnection.__trySendBuffer checks the read timeout first
            return False
        self._write(link, message)
        return True

    def destroy(self) -> None:
        self._destroyed = True
        self.setOnMessageReceivedCallback(None)
        self.setOnNodeConnectedCallback(None)
        self.setOnNodeDisconnectedCallback(None)
        for link in self._links.values():
            link.current = False
            link.hang_up()  # the read loops close each connection on the peer's EOF
        self._links.clear()
        self._deferred.clear()

    # -- driven by the component --------------------------------------------------------------
    def maintain(self) -> None:
        """Dial the peers this replica is responsible for; called at every tick (TCPTransport._onTick)."""
        for peer_id in self._dial_order:
            self._dial_if_necessary(peer_id)

    def flush(self) -> None:
        """Carry out the writes and hang-ups of the session, in (peer, order) order."""
        if not self._deferred:
            return
        actions, self._deferred = self._deferred, []
        actions.sort(key=lambda a: (a[0], a[1]))
        for _peer, _seq, action in actions:
            action()

    async def serve(self, reader: asyncio.StreamReader, writer: Any) -> None:
        """Handler of the replica's listener: identify the dialler by its first frame, then read."""
        try:
            size, payload = await self._read_frame(reader)
        except (asyncio.IncompleteReadError, ConnectionError):
            writer.close()
            return
        peer_id = decode_payload(payload)
        link = _Link(peer_id, writer, self._now())
        if self._destroyed or not isinstance(peer_id, str) or peer_id not in self._peers:
            link.current = False  # TCPTransport._onIncomingMessageReceived: not a partner node
            link.hang_up()
        else:
            self._session(self._on_accepted, link, size, peer_id)
            self._wake()
        await self._read_loop(link, reader)

    # -- connections --------------------------------------------------------------------------
    def _now(self) -> float:
        return self._node.monotonic_s()

    def _should_dial(self, peer_id: str) -> bool:
        return self._self.id > peer_id  # TCPTransport._shouldConnect compares the addresses

    def _dial_if_necessary(self, peer_id: str) -> None:
        if (self._destroyed or peer_id in self._links or peer_id in self._dialing
                or peer_id not in self._peers or not self._should_dial(peer_id)):
            return
        now = self._now()
        last = self._last_dial.get(peer_id)
        if last is not None and now - last < self._conf.connectionRetryTime:
            return
        self._last_dial[peer_id] = now
        self._dialing.add(peer_id)
        self._node.spawn(self._dial(peer_id), name=f"raft-dial-{self._name_of(peer_id)}")

    async def _dial(self, peer_id: str) -> None:
        host, port = parse_addr(peer_id)
        try:
            reader, writer = await self._node.connect(host, port, timeout_ms=self._conf.connectionTimeout * 1000.0)
        except (OSError, TimeoutError):
            return  # refused or timed out: maintain() tries again after connectionRetryTime
        finally:
            self._dialing.discard(peer_id)
        if self._destroyed or peer_id not in self._peers:
            writer.close()
            return
        link = _Link(peer_id, writer, self._now())
        self._session(self._on_dialled, link)
        self._wake()
        await self._read_loop(link, reader)

    def _install(self, link: _Link) -> None:
        old = self._links.get(link.peer_id)
        if old is not None:  # the peer restarted and dialled again: the old connection is stale
            old.current = False
            self._later(old.peer_id, old.hang_up)
        self._links[link.peer_id] = link

    def _on_dialled(self, link: _Link) -> None:
        self._install(link)
        self._write(link, self._self.id)  # TCPTransport._sendSelfAddress
        self._onNodeConnected(self._peers[link.peer_id])

    def _on_accepted(self, link: _Link, size: int, peer_id: str) -> None:
        self._install(link)
        self._trace_frame("frame.recv", peer_id, size, peer_id)
        self._onNodeConnected(self._peers[peer_id])

    def _drop(self, link: _Link) -> None:
        """TcpConnection.disconnect + TCPTransport._onDisconnected: hang up, report, maybe redial."""
        if not link.current:
            return
        link.current = False
        if self._links.get(link.peer_id) is link:
            del self._links[link.peer_id]
        self._later(link.peer_id, link.hang_up)
        peer = self._peers.get(link.peer_id)
        if peer is not None:
            self._onNodeDisconnected(peer)
            self._dial_if_necessary(link.peer_id)

    # -- frames -------------------------------------------------------------------------------
    @staticmethod
    async def _read_frame(reader: asyncio.StreamReader) -> tuple[int, bytes]:
        (length,) = LENGTH.unpack(await reader.readexactly(LENGTH.size))
        if not 0 < length <= MAX_FRAME:
            raise ConnectionResetError(f"corrupt pysyncobj frame length {length}")
        return LENGTH.size + length, await reader.readexactly(length)

    async def _read_loop(self, link: _Link, reader: asyncio.StreamReader) -> None:
        """Deliver the frames of a current link; drain a hung-up one; close on the peer's EOF."""
        try:
            while True:
                size, payload = await self._read_frame(reader)
                if link.current:
                    self._session(self._on_frame, link, size, payload)
                    self._wake()
        except (asyncio.IncompleteReadError, ConnectionError):
            if link.current:
                self._session(self._drop, link)
                self._wake()
        finally:
            link.writer.close()

    def _on_frame(self, link: _Link, size: int, payload: bytes) -> None:
        now = self._now()
        if now - link.last_read > self._conf.connectionTimeout:
            # TcpConnection.__processConnection checks the read timeout before it reads: data
            # arriving after a long silence (a healed partition) finds the connection dead.
            self._drop(link)
            return
        link.last_read = now
        message = decode_payload(payload)
        self._trace_frame("frame.recv", link.peer_id, size, message)
        self._onMessageReceived(self._peers[link.peer_id], message)

    def _write(self, link: _Link, message: Any) -> None:
        frame = encode_frame(message)

        def write() -> None:
            if link.hung_up or link.writer.is_closing():
                return
            link.writer.write(frame)
            self._trace_frame("frame.send", link.peer_id, len(frame), message)

        self._later(link.peer_id, write)

    def _later(self, peer_id: str, action: Callable[[], None]) -> None:
        self._seq += 1
        self._deferred.append((peer_id, self._seq, action))

    def _trace_frame(self, kind: str, peer_id: str, size: int, message: Any) -> None:
        if self._trace_frames:
            self._node.trace(kind, proto="raft", peer=self._name_of(peer_id), size=size, **frame_fields(message))
