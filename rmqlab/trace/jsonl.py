"""Trace files as JSON Lines, and the trace hash.

Layout: the first line is the header (see `rmqlab.trace.header`), then one event per line, each
line the canonical JSON of the event record (`rmqlab.trace.event.canonical_json`: keys sorted,
no spaces, UTF-8), ended by "\\n"::

    {"meta":{"runtime":"sim","seed":7},"schema":"rmqlab.trace","version":2}
    {"fields":{"component":"broker"},"kind":"node.start","node":"broker-a","seq":0,"time_ms":0.0}

Lines are split at "\\n" only: JSON escapes every control character inside strings, and other
Unicode line breaks (U+2028, U+0085) are legal unescaped inside a string, so `str.splitlines`
would cut events apart.

A streaming writer (`JsonlWriter`, used by `Tracer(jsonl_path=...)`) hands lines to the operating
system as events happen, so a process killed with SIGKILL leaves the lines handed over behind (the
page cache survives a process crash) and at most one torn last line; the reader skips that line
with a TraceWarning. Two ways:

* unbuffered (the default): each line is written and flushed on its own; a SIGKILL loses nothing
  but the line being written;
* buffered (what a real-runtime process uses, `rmqlab.runtime.real.run_process`): lines collect in
  memory and are written with one write when the asyncio event loop of the emitting thread gets
  to the flush it scheduled, i.e. at the start of its next iteration, before any further I/O
  callback runs; without a running loop in the emitting thread (a thread of its own, code before
  or after `asyncio.run`) a line is written at once, and closing writes what is left. A SIGKILL
  therefore loses at most the events of the one loop iteration it interrupts. Those events may
  already have effects outside the process: a frame written to a socket in that iteration can
  reach its peer although its frame.send line is lost. Readers polling the file (RealCluster's
  `wait_started`, `Cluster.registered`) see an event one loop iteration after it was emitted.
  The saving is one write system call per line (a broker emits several events per message).

There is no fsync: trace files belong to the observer, not to the system under test, and the
lab's machine crash is emulated (the real machine keeps running).

`trace_hash` is the SHA-256 of the event lines exactly as written (header excluded), so for a
file this module wrote, ``tail -n +2 trace.jsonl | sha256sum`` prints the same value.
"""

from __future__ import annotations

import asyncio
import hashlib
import os
import threading
import warnings
from functools import lru_cache
from collections.abc import Iterable, Mapping
from typing import Any

from rmqlab.trace.errors import TraceFormatError, TraceWarning
from rmqlab.trace.event import TraceEvent, canonical_json, canonical_json_bytes, parse_json
from rmqlab.trace.header import TraceFile, header_record, meta_from_header


@lru_cache(maxsize=4096)
def _json_str(s: str) -> str:
    return canonical_json(s)  # kinds and node names: a handful per trace


_MIDDLES: dict[tuple[str, str], str] = {}  # (kind, node) -> ',"kind":...,"node":...,"seq":'


def _middle(kind: str, node: str) -> str:
    text = f',"kind":{_json_str(kind)},"node":{_json_str(node)},"seq":'
    if len(_MIDDLES) < 4096:  # a handful of kinds times the nodes of a run
        _MIDDLES[(kind, node)] = text
    return text


def dumps_event(event: TraceEvent) -> str:
    """The event's line (without the "\\n"): the canonical JSON of its record,
    ``canonical_json(event.to_record())``, assembled from its parts (the envelope keys in sorted
    order, ints and floats as json spells them) so that only `fields` goes through the encoder;
    the kind and node part is cached per pair."""
    return dumps_event_bytes(event).decode("utf-8")


_MIDDLES_BYTES: dict[tuple[str, str], bytes] = {}  # _MIDDLES, UTF-8 encoded


def dumps_event_bytes(event: TraceEvent) -> bytes:
    """`dumps_event` UTF-8 encoded, as a file holds it (what the writers and `trace_hash` use):
    the fields by `canonical_json_bytes`, which gives the same bytes faster."""
    kind, node = event.kind, event.node
    middle = _MIDDLES_BYTES.get((kind, node))
    if middle is None:
        middle = (_MIDDLES.get((kind, node)) or _middle(kind, node)).encode("utf-8")
        if len(_MIDDLES_BYTES) < 4096:
            _MIDDLES_BYTES[(kind, node)] = middle
    return b'{"fields":%b%b%b,"time_ms":%b}' % (canonical_json_bytes(event.fields), middle,
                                                 int.__repr__(event.seq).encode(),
                                                 float.__repr__(event.time_ms).encode())


def dumps_header(meta: Mapping[str, Any] | None = None) -> str:
    """The header line (without the "\\n") for run metadata `meta`."""
    return canonical_json(header_record(meta))


def trace_hash(events: Iterable[TraceEvent]) -> str:
    """SHA-256 hex digest of the canonical JSONL body of `events`: every event's line followed by
    "\\n", UTF-8 encoded, in the given order, no header. Determinism tests compare this value."""
    digest = hashlib.sha256()
    for event in events:
        digest.update(dumps_event_bytes(event))
        digest.update(b"\n")
    return digest.hexdigest()


class JsonlWriter:
    """Writes a JSONL trace file as events happen: every line flushed at once, or with `buffered`
    once per event-loop iteration (see the module docstring for what a SIGKILL loses).

    The file must not exist yet (FileExistsError otherwise): one file holds the events of one
    tracer, numbered from seq 0, so a restarted process writes a new file rather than appending a
    second numbering to the old one. Thread-safe.
    """

    def __init__(self, path: str | os.PathLike[str], meta: Mapping[str, Any] | None = None, *,
                 buffered: bool = False):
        self.path = os.fspath(path)
        # Binary, UTF-8 encoded here: no newline translation whatever the platform.
        self._file = open(self.path, "xb")
        self.buffered = buffered
        self._lines: list[bytes] = []
        self._lock = threading.Lock()
        self._flush_loop: asyncio.AbstractEventLoop | None = None  # where a flush is scheduled
        self._write_now((dumps_header(meta) + "\n").encode("utf-8"))

    def write(self, event: TraceEvent) -> None:
        line = dumps_event_bytes(event) + b"\n"
        if not self.buffered:
            with self._lock:
                self._write_now(line)
            return
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            loop = None
        with self._lock:
            self._lines.append(line)
            if loop is None:
                self._flush_locked()
            elif loop is not self._flush_loop:
                # A flush scheduled on another (perhaps finished) loop does not count here.
                self._flush_loop = loop
                loop.call_soon(self.flush)

    def flush(self) -> None:
        """Write the buffered lines now (one write)."""
        with self._lock:
            self._flush_loop = None
            self._flush_locked()

    def _flush_locked(self) -> None:
        if self._lines and not self._file.closed:
            lines, self._lines = self._lines, []
            self._write_now(b"".join(lines))

    def _write_now(self, data: bytes) -> None:
        # One write, then a flush to the OS: a SIGKILL can only tear the last line written.
        self._file.write(data)
        self._file.flush()

    def close(self) -> None:
        with self._lock:
            if not self._file.closed:
                self._flush_locked()
                self._file.close()

    def __enter__(self) -> JsonlWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def write_jsonl(events: Iterable[TraceEvent], path: str | os.PathLike[str],
                meta: Mapping[str, Any] | None = None) -> None:
    """Write `events` to `path` (replacing it) as a JSONL trace with header metadata `meta`."""
    with open(path, "w", encoding="utf-8", newline="\n") as f:
        f.write(dumps_header(meta) + "\n")
        for event in events:
            f.write(dumps_event(event) + "\n")


def load_jsonl(path: str | os.PathLike[str]) -> TraceFile:
    """Read a JSONL trace: its metadata and events.

    A malformed header or event raises TraceFormatError naming ``file:line`` (TraceVersionError
    for a newer schema version). A last line without "\\n" that does not parse is the torn line
    of a killed writer: it is skipped with a TraceWarning and `torn_tail` is set.
    """
    path = os.fspath(path)
    with open(path, "rb") as f:
        data = f.read()
    if not data:
        raise TraceFormatError(f"{path}: empty file, not a trace (no header line)")
    lines = data.split(b"\n")
    # After a final "\n" split leaves an empty piece; anything else there is an unterminated line.
    tail = lines.pop()
    meta = None
    events: list[TraceEvent] = []
    torn = False
    for index, raw in enumerate([*lines, tail] if tail else lines):
        lineno = index + 1
        where = f"{path}:{lineno}"
        unterminated = bool(tail) and index == len(lines)
        try:
            record = parse_json(raw.decode("utf-8"))
        except ValueError as e:  # UnicodeDecodeError and JSONDecodeError are ValueErrors
            # A writer killed mid-line can cut a UTF-8 sequence or the JSON text anywhere, but a
            # torn line always lacks its "\n"; with a header and a "\n", the line is just bad.
            if unterminated and meta is not None:
                warnings.warn(f"{where}: skipped a torn last line ({len(raw)} bytes without a "
                              "newline; its writer was probably killed mid-write)", TraceWarning, stacklevel=2)
                torn = True
                break
            raise TraceFormatError(f"{where}: not valid JSON ({e})") from None
        if meta is None:
            meta = meta_from_header(record, where)
            continue
        try:
            events.append(TraceEvent.from_record(record))
        except ValueError as e:
            raise TraceFormatError(f"{where}: {e}") from None
    return TraceFile(meta, events, torn)


def read_jsonl(path: str | os.PathLike[str]) -> list[TraceEvent]:
    """The events of a JSONL trace (see `load_jsonl` for the checks and the torn last line)."""
    return load_jsonl(path).events
