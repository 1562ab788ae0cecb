"""merge_traces: one trace from the per-process traces of the real runtime.

On the real runtime every OS process has its own Tracer and writes its own JSONL file; the
supervisor (which injects faults and records kills) writes one too. Checkers and widgets want a
single trace, so the files are merged:

* Order: a k-way merge by (time_ms, node, source index, seq). It takes the smallest head among
  the sources, so each source's events keep their own order even if its wall clock stepped
  backwards (seq order is the true order inside one process); ties on time are broken by node
  name, then by the sources' order in the argument list, so the merge is deterministic.
* Numbering: the merged events get a new global `seq` from 0. Each event keeps where it came
  from in two reserved fields: ``_src`` (the source's name) and ``_src_seq`` (its seq there), so a
  merged event can be found in its original file.

Times from different processes come from different reads of the same machine's clock; an order
between processes closer in time than the clock's resolution is a guess, which is why checkers
rely on causal pairs inside one process (a client's invoke and its completion) rather than on
cross-process order.
"""

from __future__ import annotations

import heapq
from collections.abc import Sequence

from rmqlab.trace.event import TraceEvent


def merge_traces(traces: Sequence[Sequence[TraceEvent]], sources: Sequence[str] | None = None) -> list[TraceEvent]:
    """Merge per-process traces into one, renumbered from seq 0 (see module docstring).

    `sources` names the traces (for example their file names) for the ``_src`` field; by
    default "0", "1", ... in argument order. ValueError for duplicate or miscounted names, and for
    an event that already has ``_src``/``_src_seq`` (merging a merged trace would lose its origin).
    """
    names = [str(i) for i in range(len(traces))] if sources is None else [str(s) for s in sources]
    if len(names) != len(traces):
        raise ValueError(f"{len(traces)} traces but {len(names)} source names")
    if len(set(names)) != len(names):
        raise ValueError(f"source names must be distinct: {names}")

    def keyed(index: int, events: Sequence[TraceEvent]):
        for event in events:
            if "_src" in event.fields or "_src_seq" in event.fields:
                raise ValueError(f"source {names[index]!r} seq {event.seq}: already a merged event "
                                 "(it has _src/_src_seq)")
            yield (event.time_ms, event.node, index, event.seq), index, event

    merged = heapq.merge(*(keyed(i, t) for i, t in enumerate(traces)), key=lambda item: item[0])
    return [
        TraceEvent(seq, event.time_ms, event.node, event.kind,
                   {**event.fields, "_src": names[index], "_src_seq": event.seq})
        for seq, (_key, index, event) in enumerate(merged)
    ]
