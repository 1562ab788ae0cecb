"""RaftComponent: a pysyncobj replica as an rmqlab component, on either runtime.

A replica owns one `RaftSyncObj` whose replicated state lives in its *consumers* —
`pysyncobj.SyncObjConsumer` objects with `@replicated` methods (`rmqlab.raft.counter` is the
smallest example; the RocketMQ 5 controller's metadata managers come later on the same base).
Peers are named: `peers` maps every member's name to its host:port, as RocketMQ's
controllerDLegerPeers does (`ControllerConfig.get_peers()` returns exactly this mapping). Inside
pysyncobj a member's id is its host:port, as with pysyncobj's TCP transport; the trace and this
API use names.

The two runtimes
----------------
**Simulator** (a SimNode). `SyncObjConf(autoTick=False)`: no thread; the component calls
`doTick(0)` when pysyncobj's own autoTick thread would. That thread runs `_onTick(autoTickPeriod)`
in a loop, and each tick ends in `poll(autoTickPeriod)`, which handles the socket events and
returns as soon as there were any. So here: messages travel through `SimTransport` over the
simulated network and are handed to pysyncobj the moment they arrive (what `poll` does); after
any such I/O a tick follows at once, otherwise one comes `autoTickPeriod` (50 ms by default) after
the last. The ticks run on the node's timers and clock, so a suspended node or one whose clock is
paused does not tick (a queued write does not wake the thread either: with appendEntriesUseBatch
pysyncobj notifies no pipe). Every entry into pysyncobj — a tick, a message, a
connection event, a write — is a *session*: pysyncobj's clock (`rmqlab.raft.clock`) is bound to
this node, and at the end the transport's queued writes go out in a canonical order and the
replica's role / term / leader are compared with what was last traced. Election timeouts come
from `node.random` (`RaftSyncObj`). Same seed, same trace.

**Real runtime** (any other Node, e.g. RealNode). pysyncobj runs as its authors intended: its TCP
transport (`TracingTCPTransport`, which only adds frame events) and its autoTick thread. A node
timer polls the replica's role / term / leader every `poll_ms` and traces the changes. Nothing
blocks the asyncio loop: writes are queued with a callback, and the callback, which runs on
pysyncobj's thread, completes the caller's future through `loop.call_soon_threadsafe`.

Writes
------
`await replica.replicate(consumer.method, *args)` submits a `@replicated` call (as pysyncobj's
`method(*args, callback=...)`) on this replica — a follower forwards it to the leader — and returns
the method's result once the entry is applied here, or raises `RaftError(reason)`. `sync=True` is
never used: in the simulator nobody would tick while it blocked (it
waits on a threading.Event), so it would always end in SyncObjException('Timeout').

Persistence
-----------
With `journal=True` the Raft log, the current term and the vote live in a pysyncobj FileJournal
(`<data_dir>/raft.journal` and `.meta`; the commit index is saved once a second); with
`full_dump=True` log compaction writes the consumers' state to `<data_dir>/raft.dump`
(useFork=False: the simulator has one process). A restarted replica rebuilds its state machine
from the dump and the journal before it hears from anyone. `data_dir` defaults to
`<store_dir>/raft`. In the simulator pysyncobj's writes (an mmap and plain files, never fsynced)
are not tracked by the page-cache model of `rmqlab.runtime.page_cache`, so a simulated machine crash
keeps them, like a process crash.
"""

from __future__ import annotations

import asyncio
import functools
import os
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from pysyncobj import SyncObjConf, SyncObjConsumer
from pysyncobj.syncobj import SyncObjException
from pysyncobj.node import Node

from rmqlab.config.addresses import parse_addr
from rmqlab.raft import clock
from rmqlab.raft.fail_reason import FailReason, RaftError
from rmqlab.raft.sim_transport import SimTransport
from rmqlab.raft.sync_obj import RaftSyncObj
from rmqlab.raft.tcp_transport import TracingTCPTransport
from rmqlab.raft.wire import encode_frame, frame_fields
from rmqlab.runtime.component import Component
from rmqlab.runtime.node import Node as RuntimeNode
from rmqlab.runtime.node import Timer
from rmqlab.runtime.sim.node import SimNode
from rmqlab.runtime.real import bind_error

# SyncObjConf settings the component decides itself (the runtime and the files); the rest of
# SyncObjConf's keyword arguments pass through `conf`.
# Real runtime: bind attempts (one every bindRetryTime, 1 s) before a replica's start fails; a
# restarted replica may briefly find its port still held by the process it replaces.
BIND_RETRIES = 3
_OWNED_CONF = ("autoTick", "journalFile", "fullDumpFile", "useFork", "bindAddress", "onStateChanged")


def _complete(fut: asyncio.Future, result: Any, error: int) -> None:
    if fut.done():
        return
    if error == FailReason.SUCCESS:
        fut.set_result(result)
    else:
        fut.set_exception(RaftError(FailReason(error)))


class RaftComponent(Component):
    """One member of a Raft group.

    self_id    this member's name, a key of `peers`
    peers      every member's name -> "host:port" (this one included)
    consumers  the SyncObjConsumer objects holding the replicated state, built for this process
    group      the group's name in `raft` events (RocketMQ: controllerDLegerGroup)
    journal, full_dump, data_dir   persistence (module docstring)
    bind_addr  real runtime: where pysyncobj listens (SyncObjConf.bindAddress), if not on its peer
               address — a relay or NAT in between
    poll_ms    real runtime: how often the role / term / leader are read for the trace
    trace_frames  frame.send / frame.recv events for every Raft message
    on_view_change  called as on_view_change(role, term, leader) on the node's loop whenever the
               replica's role, term or known leader changes (after it is traced); in the simulator
               it runs inside a pysyncobj session, so it should only schedule work
    conf       further SyncObjConf settings (raftMinTimeout, leaderFallbackTimeout, autoTickPeriod
               — in the simulator the idle tick period — ...)
    """

    component_type = "raft"

    def __init__(self, self_id: str, peers: Mapping[str, str], consumers: Sequence[SyncObjConsumer], *,
                 group: str = "raft", journal: bool = False, full_dump: bool = False, data_dir: str | None = None,
                 bind_addr: str | None = None, poll_ms: float = 5.0, trace_frames: bool = True,
                 on_view_change: Callable[[str, int, str | None], None] | None = None, **conf: Any):
        if self_id not in peers:
            raise ValueError(f"self id {self_id!r} is not among the peers {sorted(peers)}")
        for addr in peers.values():
            parse_addr(addr)  # ValueError naming a malformed address now, not in pysyncobj's thread
        if len(set(peers.values())) != len(peers):
            raise ValueError(f"two peers share an address: {dict(peers)}")
        owned = sorted(set(conf) & set(_OWNED_CONF))
        if owned:
            raise ValueError(f"{', '.join(owned)}: set by RaftComponent (see its parameters), not through conf")
        unknown = sorted(set(conf) - set(vars(SyncObjConf())))
        if unknown:  # SyncObjConf ignores unknown keywords: a typo would silently keep the default
            raise ValueError(f"unknown SyncObjConf setting(s): {', '.join(unknown)}")
        try:
            SyncObjConf(**conf).validate()
        except AssertionError:
            raise ValueError(f"SyncObjConf.validate() refuses {conf} (for example raftMinTimeout must exceed "
                             "3 x appendEntriesPeriod, connectionTimeout must be >= raftMaxTimeout)") from None
        if poll_ms <= 0:
            raise ValueError(f"poll_ms must be > 0, got {poll_ms}")
        self.self_id = self_id
        self.peers = dict(peers)
        self.self_addr = self.peers[self_id]
        self.consumers = list(consumers)
        self.group = group
        self.journal = journal
        self.full_dump = full_dump
        self.data_dir = data_dir
        self.bind_addr = bind_addr
        self.poll_ms = poll_ms
        self.trace_frames = trace_frames
        self.on_view_change = on_view_change
        self.conf_overrides = dict(conf)
        self._names = {addr: name for name, addr in self.peers.items()}
        self.sync_obj: RaftSyncObj | None = None
        self._transport: SimTransport | None = None
        self._simulated = False
        self._loop: asyncio.AbstractEventLoop | None = None
        self._timer: Timer | None = None
        self._tick_period_ms = 0.0
        self._tick_soon = False
        self._listener = None
        self._depth = 0
        self._pending: dict[asyncio.Future, None] = {}  # insertion-ordered: failed in submission order
        self._stopped = False
        # What was last traced.
        self._role: str | None = None
        self._term: int | None = None
        self._leader: str | None = None
        self._traced_view = False

    # -- lifecycle -----------------------------------------------------------------------------
    async def start(self, node: RuntimeNode) -> None:
        self.node = node
        self._loop = asyncio.get_running_loop()
        self._simulated = isinstance(node, SimNode)
        conf = SyncObjConf(**self.conf_overrides)
        conf.useFork = False
        if self.journal or self.full_dump:
            data_dir = self.data_dir or os.path.join(node.store_dir, "raft")
            os.makedirs(data_dir, exist_ok=True)
            conf.journalFile = os.path.join(data_dir, "raft.journal") if self.journal else None
            conf.fullDumpFile = os.path.join(data_dir, "raft.dump") if self.full_dump else None
        others = [addr for name, addr in sorted(self.peers.items()) if name != self.self_id]
        if self._simulated:
            conf.autoTick = False
            conf.validate()
            host, port = parse_addr(self.self_addr)
            self._listener = await node.listen(host, port, self._serve)
            transport_class = functools.partial(self._sim_transport, node=node)
            self._tick_period_ms = conf.autoTickPeriod * 1000.0
            self.sync_obj = self._session(RaftSyncObj, Node(self.self_addr), [Node(a) for a in others], conf,
                                          self.consumers, node.random, transportClass=transport_class)
            self._timer = node.call_later(self._tick_period_ms, self._tick)
        else:
            conf.autoTick = True
            # Left unset, TCPTransport binds 0.0.0.0 (every interface) on the peer address's port;
            # listen exactly where the peers are told to dial instead.
            conf.bindAddress = self.bind_addr or self.self_addr
            # pysyncobj retries a failed bind every bindRetryTime forever by default, so a replica
            # whose port is taken would run without Raft. Give up after a few tries and fail the
            # start, as a DLedger controller that cannot bind does.
            if "maxBindRetries" not in self.conf_overrides:
                conf.maxBindRetries = BIND_RETRIES
            conf.validate()
            transport_class = functools.partial(TracingTCPTransport, report=self._report_frame)
            # SyncObj starts its autoTick thread and waits (briefly) until it has tried to bind.
            self.sync_obj = RaftSyncObj(self.self_addr, others, conf, self.consumers, node.random,
                                        transportClass=transport_class)
            try:
                await asyncio.to_thread(self.sync_obj.waitBinded)
            except SyncObjException:
                sync_obj, self.sync_obj = self.sync_obj, None
                await asyncio.to_thread(sync_obj.destroy_synchronous)
                host, port = parse_addr(conf.bindAddress)
                raise bind_error(host, port) from None
            self._timer = node.call_later(self.poll_ms, self._poll)
        self._observe()

    def _sim_transport(self, sync_obj, self_node, other_nodes, *, node: SimNode) -> SimTransport:
        self._transport = SimTransport(sync_obj, self_node, other_nodes, node=node, session=self._session,
                                       wake=self._wake, name_of=self.name_of, trace_frames=self.trace_frames)
        return self._transport

    async def shutdown(self) -> None:
        self._halt("the replica shut down")
        if self.sync_obj is None:
            return
        if self._simulated:
            self.sync_obj.destroy()  # closes the connections and the journal at once (no thread)
        else:
            # The autoTick thread destroys the object at its next tick; wait for it off the loop.
            await asyncio.to_thread(self.sync_obj.destroy_synchronous)

    def on_crash(self) -> None:
        """The process died (simulator): nothing more runs; release the journal's file and map."""
        self._halt("the replica crashed")
        if self.sync_obj is not None:
            self.sync_obj.destroy()

    def _halt(self, why: str) -> None:
        self._stopped = True
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        if self._listener is not None:
            self._listener.close()
            self._listener = None
        pending, self._pending = self._pending, {}
        for fut in pending:
            if not fut.done():
                fut.set_exception(RaftError(FailReason.UNKNOWN_OUTCOME, why))
                # When the replica's process died, so did the task awaiting this write: mark the
                # exception seen, or asyncio prints "Future exception was never retrieved" at
                # garbage collection. A caller that still awaits gets it all the same.
                fut.exception()

    # -- simulator: sessions and ticks ---------------------------------------------------------
    def _session(self, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        """Run `fn` as an entry into pysyncobj (see the module docstring)."""
        if not self._simulated:
            return fn(*args, **kwargs)
        self._depth += 1
        try:
            with clock.bound(self.node.monotonic_s):
                return fn(*args, **kwargs)
        finally:
            self._depth -= 1
            if self._depth == 0 and self._transport is not None and not self._stopped:
                self._transport.flush()
                if self.sync_obj is not None:
                    self._observe()

    def _tick(self) -> None:
        if self._stopped:
            return
        self._tick_soon = False
        self._timer = self.node.call_later(self._tick_period_ms, self._tick)
        self._session(self._do_tick)

    def _wake(self) -> None:
        """There was I/O: tick now, as pysyncobj's poll would return to its loop."""
        if self._tick_soon or self._stopped:
            return
        self._tick_soon = True
        if self._timer is not None:
            self._timer.cancel()
        self._timer = self.node.call_later(0, self._tick)

    def _do_tick(self) -> None:
        self._transport.maintain()
        self.sync_obj.doTick(0.0)

    async def _serve(self, reader: asyncio.StreamReader, writer: Any) -> None:
        if self._transport is None or self._stopped:
            writer.close()
            return
        await self._transport.serve(reader, writer)

    # -- real runtime: polling and frame reports -----------------------------------------------
    def _poll(self) -> None:
        if self._stopped:
            return
        self._observe()
        self._timer = self.node.call_later(self.poll_ms, self._poll)

    def _report_frame(self, kind: str, peer: Node, message: Any) -> None:
        # Runs on pysyncobj's thread; Tracer.emit is thread-safe.
        if self.trace_frames and not self._stopped:
            self.node.trace(kind, proto="raft", peer=self.name_of(peer.id), size=len(encode_frame(message)),
                            **frame_fields(message))

    # -- observation -----------------------------------------------------------------------------
    def _observe(self) -> None:
        so = self.sync_obj
        role = so.raft_state()
        term = so.raftCurrentTerm
        leader_node = so._getLeader()
        leader = self.name_of(leader_node.id) if leader_node is not None else None
        changed = False
        if role != self._role:
            self.node.trace("role", from_=self._role, to=role, component="raft", term=term)
            self._role = role
            changed = True
        if not self._traced_view or term != self._term or leader != self._leader:
            self.node.trace("raft", term=term, leader=leader, group=self.group, commit_index=so.raftCommitIndex)
            self._term, self._leader, self._traced_view = term, leader, True
            changed = True
        if changed and self.on_view_change is not None and not self._stopped:
            self.on_view_change(role, term, leader)

    def name_of(self, node_id: str) -> str:
        """The member name of a pysyncobj node id (host:port); the id itself if unknown."""
        return self._names.get(node_id, node_id)

    # -- state -----------------------------------------------------------------------------------
    @property
    def role(self) -> str:
        """FOLLOWER, CANDIDATE or LEADER, as pysyncobj sees itself now."""
        return self.sync_obj.raft_state()

    @property
    def term(self) -> int:
        return self.sync_obj.raftCurrentTerm

    @property
    def leader(self) -> str | None:
        """The name of the leader this replica knows of (it may be stale; pysyncobj warns so)."""
        node = self.sync_obj._getLeader()
        return self.name_of(node.id) if node is not None else None

    @property
    def commit_index(self) -> int:
        return self.sync_obj.raftCommitIndex

    @property
    def last_applied(self) -> int:
        return self.sync_obj.raftLastApplied

    def connected_peers(self) -> list[str]:
        """Names of the peers pysyncobj counts as connected."""
        return sorted(name for name, addr in self.peers.items()
                      if name != self.self_id and self.sync_obj.isNodeConnected(Node(addr)))

    def status(self) -> dict[str, Any]:
        """A JSON-ready summary (what the process control channel answers)."""
        return {"name": self.self_id, "role": self.role, "term": self.term, "leader": self.leader,
                "commit_index": self.commit_index, "last_applied": self.last_applied,
                "connected": self.connected_peers(), "log_size": self.sync_obj._getRaftLogSize()}

    # -- writes ----------------------------------------------------------------------------------
    def replicate_future(self, method: Callable[..., Any], *args: Any, **kwargs: Any) -> asyncio.Future:
        """Submit `method(*args, **kwargs)`, a @replicated method of one of this replica's consumers;
        the returned future gets its result once applied here, or a RaftError."""
        if self.sync_obj is None:
            raise RuntimeError(f"{self.self_id}: the replica has not started")
        loop = self._loop
        fut = loop.create_future()
        if self._stopped:
            fut.set_exception(RaftError(FailReason.UNKNOWN_OUTCOME, "the replica is not running"))
            return fut
        self._pending[fut] = None
        fut.add_done_callback(lambda f: self._pending.pop(f, None))

        def callback(result: Any, error: int) -> None:
            # pysyncobj's thread on the real runtime, a tick in the simulator: either way the
            # future is completed on the loop.
            try:
                loop.call_soon_threadsafe(_complete, fut, result, error)
            except RuntimeError:
                pass  # the loop is closed: the process is exiting and nobody awaits the write

        self._session(method, *args, callback=callback, **kwargs)
        return fut

    async def replicate(self, method: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        """`await` form of replicate_future."""
        return await self.replicate_future(method, *args, **kwargs)

    def force_log_compaction(self) -> None:
        """Compact the log at the next tick (with full_dump: write the dump file)."""
        self._session(self.sync_obj.forceLogCompaction)
