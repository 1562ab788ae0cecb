"""Who leads now, read from the trace: the broker that is master (`Cluster.master`) or the
controller that is the Raft leader (`Cluster.controller_leader`), the same on either backend."""

from __future__ import annotations

from collections.abc import Callable

_DOWN_KINDS = ("node.kill", "node.crash", "node.stop")


class LeaderScan:
    """Of `names`, the running node whose last `role` event (passing `counts`) in its current
    incarnation `leads`, with the highest `rank_field` (epoch, term) of that event. Fed the trace
    from where it stopped when the trace only grows (the simulator's), from scratch otherwise."""

    def __init__(self, names: list[str], counts: Callable, leads: Callable, rank_field: str):
        self.names, self.counts, self.leads, self.rank_field = set(names), counts, leads, rank_field
        self._reset()

    def _reset(self) -> None:
        self.seen = 0
        self.last: dict[str, tuple[bool, int]] = {}
        self.down: set[str] = set()

    def __call__(self, events: list, grows: bool) -> str | None:
        if not grows or len(events) < self.seen:
            self._reset()
        for e in events[self.seen:]:
            if e.node not in self.names:
                continue
            if e.kind in _DOWN_KINDS or e.kind == "node.restart":
                # A new incarnation starts without a role (its role events may precede its node.start).
                self.last.pop(e.node, None)
                if e.kind == "node.restart":
                    self.down.discard(e.node)
                else:
                    self.down.add(e.node)
            elif e.kind == "role" and self.counts(e):
                self.last[e.node] = (bool(self.leads(e)), int(e.fields.get(self.rank_field) or 0))
        self.seen = len(events)
        ranked = [(rank, name) for name, (lead, rank) in self.last.items() if lead and name not in self.down]
        return max(ranked)[1] if ranked else None
