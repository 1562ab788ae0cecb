"""Tracer: where components emit the structured events of the trace.

Every component of both runtimes gets a Tracer and calls ``tracer.emit(node, kind, **fields)``.
The tracer numbers the event (`seq`, from 0), stamps it with its clock (`time_ms`), checks it
against the kind catalog (`rmqlab.trace.kinds`), keeps it in `events`, hands it to every
subscriber (widgets, checkers) and, with `jsonl_path`, appends it to a JSONL file as it happens.
The trace is the only road from the running system to widgets, checkers and grading: they
subscribe here or read the files, never the components.

The clock is a callable returning milliseconds: the simulator's virtual clock (ms since the
simulation start) or, on the real runtime, a wall clock in epoch ms supplied by the runtime
(modules under rmqlab/ do not read the time themselves).
"""

from __future__ import annotations

import keyword
import math
import os
import threading
from collections import deque
from collections.abc import Callable, Mapping
from typing import Any

from rmqlab.trace.event import TraceEvent, json_fields, json_value, plain_fields_in_place
from rmqlab.trace.header import normalize_meta
from rmqlab.trace.jsonl import JsonlWriter
from rmqlab.trace.kinds import KINDS, validate_fields

Subscriber = Callable[[TraceEvent], None]

# Set (to anything but "" or "0") to make `Tracer.emit_trusted` check its events as `emit` does.
DEBUG_ENV = "RMQLAB_TRACE_DEBUG"
_INF = math.inf
_GOOD_NAMES_MAX = 4096  # distinct field-name tuples remembered as valid (emit call sites: a few dozen)


def _field_name(name: str) -> str:
    # `from` is a field of role/state events but a Python keyword: emit(..., from_="SLAVE").
    if name.endswith("_") and keyword.iskeyword(name[:-1]):
        return name[:-1]
    return name


class Tracer:
    """Numbers, stamps, validates, keeps, fans out and optionally streams trace events.

    `clock_ms` returns the current time in ms. `jsonl_path`, if given, is a new file (it must not
    exist) receiving the header with `meta` and then every event as it is emitted, each line
    flushed; with `buffered`, lines are flushed once per event-loop iteration instead
    (`rmqlab.trace.jsonl.JsonlWriter` says what a SIGKILL then loses). `meta` is the run metadata
    (`rmqlab.trace.header`). With `keep=False` the tracer keeps no events in `events` (a
    long-running server process, whose trace is its file and its subscribers: the list would grow
    by every frame's header; `subscribe(replay=True)` then replays nothing). Emitting is
    thread-safe: seq order is the order of the lines in the file and of the deliveries to each
    subscriber.
    """

    def __init__(self, clock_ms: Callable[[], float], *, jsonl_path: str | os.PathLike[str] | None = None,
                 meta: Mapping[str, Any] | None = None, buffered: bool = False, debug: bool | None = None,
                 keep: bool = True):
        self._clock_ms = clock_ms
        self.keep = keep
        # emit_trusted checks like emit in debug mode (default: from $RMQLAB_TRACE_DEBUG).
        self.debug = os.environ.get(DEBUG_ENV, "") not in ("", "0") if debug is None else bool(debug)
        # Field-name tuples found free of "_" edges and empty names: one set lookup per event.
        self._good_names: set[tuple[str, ...]] = set()
        self.meta = normalize_meta(meta)
        self.events: list[TraceEvent] = []
        self._next_seq = 0
        self._subscribers: dict[int, Subscriber] = {}
        self._next_token = 0
        # Re-entrant: a subscriber may emit (a checker reporting a violation as a log event).
        self._lock = threading.RLock()
        self._pending: deque[TraceEvent] = deque()
        self._delivering = False
        self._closed = False
        self._sink = JsonlWriter(jsonl_path, self.meta, buffered=buffered) if jsonl_path is not None else None
        self._checked_nodes: set[str] = set()  # node names already found valid

    def emit(self, node: str, kind: str, /, **fields: Any) -> TraceEvent:
        """Record one event and return it.

        ValueError names the kind and field for an unknown kind, a missing required field, a
        declared field of the wrong type, a value JSON cannot hold exactly (bytes, NaN, ...), or a
        reserved "_" name. Extra fields are welcome. A field named after a Python keyword is
        passed with a trailing underscore (``from_="SLAVE"`` stores ``"from"``).

        If a subscriber raises, the others still receive the event, and the first exception is
        re-raised here afterwards (the event stays recorded): a failing checker must not go
        unnoticed.
        """
        # The hot path, for the events most emitters send: a known kind whose declared fields have
        # exactly their plain types, no name starting or ending with "_", only plain values. It
        # keeps `fields` itself (** made it a fresh dict) and copies nested dicts; anything else
        # takes the general path, which normalizes or raises the error that names the problem.
        spec = KINDS.get(kind)
        names = tuple(fields)
        if spec is not None and (names in self._good_names or self._plain_names(names)) \
                and spec.fast_check(fields) and plain_fields_in_place(fields):
            named = fields
        else:
            named = fields
            for name in fields:
                if name[-1] == "_":  # rare: a keyword field such as from_
                    named = {_field_name(n): value for n, value in fields.items()}
                    if len(named) != len(fields):
                        raise ValueError(f"trace event {kind!r}: a field is given both with and without its "
                                         "trailing '_'")
                    break
            validate_fields(kind, named)
            named = json_fields(named, f"{kind}.fields")
        return self._record(node, kind, named)

    def emit_trusted(self, node: str, kind: str, fields: dict) -> TraceEvent:
        """:meth:`emit` for rmqlab's own hot emitters (the remoting layer's ``frame.*`` events),
        which build `fields` themselves in the kind's declared shape: a fresh dict of plain JSON
        values (exact str without lone surrogates, int, bool, None, finite float; nested dicts of
        those) that the caller hands over and never touches again. It is recorded as it is,
        without the catalog check and the copies of `emit`: the same event, the same bytes.

        Only for such callers: anything from outside (a student's component, a lab) goes through
        `emit`. In debug mode (``Tracer(debug=True)`` or $RMQLAB_TRACE_DEBUG) the event goes
        through `emit`'s checks, and ValueError also says so when they would have changed a value.
        """
        if self.debug:
            event = self.emit(node, kind, **fields)
            if event.fields != fields or any(type(v) is not type(fields[k]) for k, v in event.fields.items()):
                raise ValueError(f"trace event {kind!r}: emit_trusted was given fields that are not plain JSON "
                                 f"as emitted: {fields!r}")
            return event
        return self._record(node, kind, fields)

    def _plain_names(self, names: tuple[str, ...]) -> bool:
        """True when no field name is empty or starts or ends with "_" (remembered)."""
        for name in names:
            if not name or name[0] == "_" or name[-1] == "_":
                return False
        if len(self._good_names) < _GOOD_NAMES_MAX:
            self._good_names.add(names)
        return True

    def _record(self, node: str, kind: str, named: dict) -> TraceEvent:
        """Number, stamp, keep, write and hand out an event whose fields are final."""
        with self._lock:
            if self._closed:
                raise ValueError(f"trace event {kind!r} emitted on a closed Tracer")
            now = self._clock_ms()
            if type(now) is not float or not -_INF < now < _INF:  # NaN fails the comparison too
                if isinstance(now, bool) or not isinstance(now, (int, float)) or not math.isfinite(now):
                    raise ValueError(f"the trace clock returned {now!r}, not a finite number of ms")
                now = float(now)
            if type(node) is not str or node not in self._checked_nodes:
                if type(node) is not str or not node:
                    raise ValueError(f"trace event node must be a non-empty str, not {node!r}")
                if not node.isascii():
                    json_value(node, "node")  # a lone surrogate cannot be written as UTF-8
                self._checked_nodes.add(node)
            event = TraceEvent.trusted(self._next_seq, now, node, kind, named)
            self._next_seq += 1
            if self.keep:
                self.events.append(event)
            if self._sink is not None:
                self._sink.write(event)
            if not self._subscribers and not self._delivering:
                return event  # nobody to hand it to, and nothing pending (the queue drains first)
            self._pending.append(event)
            if self._delivering:
                # Emitted by a subscriber: the delivery loop below (further up this thread's
                # stack) hands it out after the current event, so every subscriber sees seq order.
                return event
            self._deliver()
        return event

    def _deliver(self) -> None:
        self._delivering = True
        first_error: Exception | None = None
        try:
            while self._pending:
                event = self._pending.popleft()
                # A snapshot: a subscriber may (un)subscribe while being called.
                for fn in tuple(self._subscribers.values()):
                    try:
                        fn(event)
                    except Exception as e:
                        if first_error is None:
                            first_error = e
        finally:
            self._delivering = False
        if first_error is not None:
            raise first_error

    def subscribe(self, fn: Subscriber, *, replay: bool = False) -> Callable[[], None]:
        """Call `fn(event)` for every event emitted from now on; with `replay`, first for every
        event already emitted. Returns a function that unsubscribes (calling it twice is harmless)."""
        with self._lock:
            token = self._next_token
            self._next_token += 1
            if replay:
                for event in tuple(self.events):
                    fn(event)
            self._subscribers[token] = fn

        def unsubscribe() -> None:
            with self._lock:
                self._subscribers.pop(token, None)

        return unsubscribe

    def close(self) -> None:
        """Close the JSONL sink; emitting afterwards raises ValueError. Idempotent."""
        with self._lock:
            self._closed = True
            if self._sink is not None:
                self._sink.close()
                self._sink = None

    def __enter__(self) -> Tracer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
