"""RaftSyncObj: pysyncobj's SyncObj with election timeouts drawn from the node's seeded random.

The only randomness in pysyncobj's Raft is `SyncObj.__generateRaftTimeout`, a uniform draw in
[raftMinTimeout, raftMaxTimeout] from the module-global `random` — drawn at start, at every
election, at every vote granted and at every append_entries received. Left alone, it makes two
runs with the same seed diverge (measured with pysyncobj 0.3.17: 4 runs of one seeded
simulation, 4 different trace digests). Here each replica draws
from its node's own `random.Random` (seeded from the simulation seed, the node and its
incarnation), so the replicas' streams are independent of each other and of the order in which
they happen to run.

Written against pysyncobj 0.3.17 (pyproject pins exactly that version). The hooks used are
name-mangled privates of SyncObj. A release that renames them breaks
`raft_state` loudly (AttributeError); one that renames the timeout method would silently bring back
the global `random` — tests/test_raft.py's cross-process determinism check is what catches that.

  _SyncObj__generateRaftTimeout   overridden below (the method SyncObj calls as
                                  self.__generateRaftTimeout, i.e. by its mangled name)
  _SyncObj__raftState             read by `raft_state` (no public accessor exists)

Every attribute of this class is set *before* SyncObj.__init__: SyncObj records the attribute
names it finds at the end of __init__ as its own, and serializes every later one into snapshots
as replicated state (pysyncobj's `SyncObj.__init__`, `__properies`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

from pysyncobj import SyncObj, SyncObjConf, SyncObjConsumer
from pysyncobj.node import Node

# pysyncobj's _RAFT_STATE values, named as DLedger's MemberState.Role (and pysyncobj) name them.
ROLES = {0: "FOLLOWER", 1: "CANDIDATE", 2: "LEADER"}


class Rng(Protocol):
    """What is drawn from: a node's random.Random."""

    def random(self) -> float: ...


class RaftSyncObj(SyncObj):
    """A SyncObj whose replicated state lives in `consumers` (SyncObjConsumer objects).

    `rng` is the node's random.Random; the other arguments are SyncObj's own.
    """

    def __init__(self, self_node: Node | str, other_nodes: Sequence[Node | str], conf: SyncObjConf,
                 consumers: Sequence[SyncObjConsumer], rng: Rng, **syncobj_kwargs: Any):
        self._rng = rng  # before SyncObj.__init__, which already draws the first election timeout
        super().__init__(self_node, list(other_nodes), conf, consumers=list(consumers), **syncobj_kwargs)

    def _SyncObj__generateRaftTimeout(self) -> float:
        # Replaces SyncObj.__generateRaftTimeout (same formula) to draw from the node's seeded
        # stream instead of the process-global `random` module.
        conf = self.conf
        return conf.raftMinTimeout + (conf.raftMaxTimeout - conf.raftMinTimeout) * self._rng.random()

    def raft_state(self) -> str:
        """FOLLOWER, CANDIDATE or LEADER."""
        return ROLES[self._SyncObj__raftState]
