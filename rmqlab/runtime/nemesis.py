"""The nemesis: one fault API for both runtimes, and the partition shapes.

Faults, as in OpenChaos (the "混沌工程" section of the article "一文详解 RocketMQ 如何利用 Raft
进行高可用保障", Alibaba Cloud developer community):

  kill(node)        process crash (kill -9): the page cache survives
  crash(node)       machine crash (power loss): what was not flushed is lost
  restart(node)     start the node's process again (same configuration, same disk)
  suspend / resume  SIGSTOP / SIGCONT: timers and input freeze; connections stay open
  partition(*groups), partition_one_way(srcs, dsts), ring(nodes), bridge(nodes), heal()
  set_loss(srcs, dsts, p), set_delay(srcs, dsts, lo_ms, hi_ms)
  clock_pause / clock_resume(node)

A runtime implements the primitive `_block(src, dst)` / `_unblock_all()` and the process-level
actions; the shapes below are plain functions from node names to blocked directed links, so both
runtimes cut exactly the same links.
"""

from __future__ import annotations

import abc
import itertools
from collections.abc import Iterable, Sequence

Link = tuple[str, str]


def partition_links(all_nodes: Sequence[str], groups: Sequence[Iterable[str]]) -> list[Link]:
    """Block every link between nodes of different groups; a node in no group stays connected."""
    group_of: dict[str, int] = {}
    for i, g in enumerate(groups):
        for n in g:
            if n in group_of:
                raise ValueError(f"node {n!r} is in two partition groups")
            if n not in all_nodes:
                raise ValueError(f"unknown node {n!r} (nodes: {', '.join(all_nodes)})")
            group_of[n] = i
    return [(a, b) for a, b in itertools.permutations(all_nodes, 2)
            if a in group_of and b in group_of and group_of[a] != group_of[b]]


def one_way_links(srcs: Iterable[str], dsts: Iterable[str]) -> list[Link]:
    """Block only src → dst: dst still reaches src."""
    dsts = list(dsts)
    return [(a, b) for a in srcs for b in dsts if a != b]


def ring_links(nodes: Sequence[str]) -> list[Link]:
    """Majorities ring: each node sees a majority (itself and its nearest ring neighbours), and no
    two nodes see the same majority. Needs at least 4 nodes (with 3, a majority of every node is
    everyone or needs one-way links)."""
    n = len(nodes)
    if n < 4:
        raise ValueError(f"a majorities ring needs at least 4 nodes, got {n}")
    majority = n // 2 + 1
    reach = -(-(majority - 1) // 2)  # neighbours on each side so that a node sees >= majority-1 others
    blocked = []
    for i, j in itertools.permutations(range(n), 2):
        distance = min((i - j) % n, (j - i) % n)
        if distance > reach:
            blocked.append((nodes[i], nodes[j]))
    return blocked


def bridge_links(nodes: Sequence[str]) -> list[Link]:
    """Bridge: two halves that cannot see each other, and the middle node that sees both."""
    if len(nodes) < 3:
        raise ValueError(f"a bridge needs at least 3 nodes, got {len(nodes)}")
    mid = len(nodes) // 2
    left, right = nodes[:mid], nodes[mid + 1:]
    return partition_links(nodes, [left, right])


class Nemesis(abc.ABC):
    """The fault API; every action is traced as a `node.*` or `fault.*` event by node "nemesis"."""

    @abc.abstractmethod
    def node_names(self) -> list[str]: ...

    # -- processes and machines ------------------------------------------------------------
    @abc.abstractmethod
    def kill(self, node: str) -> None: ...

    @abc.abstractmethod
    def crash(self, node: str, torn_bytes=None) -> None: ...

    @abc.abstractmethod
    def restart(self, node: str) -> None: ...

    @abc.abstractmethod
    def suspend(self, node: str) -> None: ...

    @abc.abstractmethod
    def resume(self, node: str) -> None: ...

    @abc.abstractmethod
    def clock_pause(self, node: str) -> None: ...

    @abc.abstractmethod
    def clock_resume(self, node: str) -> None: ...

    # -- network ---------------------------------------------------------------------------
    @abc.abstractmethod
    def _block(self, links: list[Link], shape: str, detail: dict) -> None: ...

    @abc.abstractmethod
    def heal(self) -> None: ...

    @abc.abstractmethod
    def set_loss(self, srcs: Iterable[str], dsts: Iterable[str], p: float) -> None: ...

    @abc.abstractmethod
    def set_delay(self, srcs: Iterable[str], dsts: Iterable[str], lo_ms: float, hi_ms: float) -> None: ...

    def partition(self, *groups: Iterable[str]) -> None:
        groups = [sorted(g) for g in groups]
        self._block(partition_links(self.node_names(), groups), "groups", {"groups": groups})

    def partition_one_way(self, srcs: Iterable[str], dsts: Iterable[str]) -> None:
        srcs, dsts = sorted(srcs), sorted(dsts)
        self._block(one_way_links(srcs, dsts), "one-way", {"groups": [srcs, dsts]})

    def ring(self, nodes: Sequence[str] | None = None) -> None:
        nodes = list(nodes or self.node_names())
        links = ring_links(nodes)
        # Each node's side is what it sees: itself and its ring neighbours.
        sees = [[n] + [m for m in nodes if m != n and (n, m) not in links] for n in nodes]
        self._block(links, "ring", {"groups": sees})

    def bridge(self, nodes: Sequence[str] | None = None) -> None:
        nodes = list(nodes or self.node_names())
        mid = len(nodes) // 2
        self._block(bridge_links(nodes), "bridge", {"groups": [nodes[:mid + 1], nodes[mid:]]})
