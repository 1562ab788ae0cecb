"""Recorded workloads as Parquet files, schema `rmqlab.workload` version 2
(documented in datasets/README.md, "Recorded workloads").

One file per workload. Rows are the recorded run's trace events, in the trace's own five columns
(rmqlab.trace.parquet: seq int64, time_ms float64, node string, kind string, fields string =
canonical JSON), zstd-compressed. The file's key-value metadata holds the rest:

    rmqlab.schema           "rmqlab.workload"
    rmqlab.schema_version   "2"
    rmqlab.workload         the Workload (canonical JSON of Workload.to_dict())
    rmqlab.outcome          the recorded run's outcome (canonical JSON), or "null"
    rmqlab.meta             {"runtime", "recorded_at", "rmqlab_version", "wall_s", ...} (canonical JSON)

and, so that every trace tool reads the file as a trace too (`python -m rmqlab.trace hash FILE`,
rmqlab.trace.load_parquet), the trace header keys rmqlab.trace.schema / .version / .meta.

Why one table and no second one for client operations: client operations are `client` events of
the trace (paired by rmqlab.trace.client_ops), so a second table would duplicate them, and one file
with one schema is what Spark's `spark.read.parquet(dir)` reads across a directory of workloads.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from rmqlab.trace import TraceEvent, canonical_json
from rmqlab.trace.event import parse_json
from rmqlab.trace.parquet import COLUMNS, META_RUN, META_SCHEMA, META_VERSION
from rmqlab.trace.kinds import SCHEMA_NAME as TRACE_SCHEMA, SCHEMA_VERSION as TRACE_VERSION
from rmqlab.workload.spec import Workload

SCHEMA = "rmqlab.workload"
SCHEMA_VERSION = 2
KEY_SCHEMA = b"rmqlab.schema"
KEY_VERSION = b"rmqlab.schema_version"
KEY_WORKLOAD = b"rmqlab.workload"
KEY_OUTCOME = b"rmqlab.outcome"
KEY_META = b"rmqlab.meta"


class WorkloadFormatError(ValueError):
    """A file that is not a readable recorded workload; the message names the file and what is wrong."""


class WorkloadVersionError(WorkloadFormatError):
    """A recorded workload of a newer schema version than this rmqlab reads."""


@dataclass
class RecordedWorkload:
    """What a workload file holds: the workload, the recorded run's trace and outcome, and meta
    (runtime, recorded_at, rmqlab_version, wall_s, ...)."""

    workload: Workload
    events: list[TraceEvent]
    outcome: dict | None = None
    meta: dict[str, Any] = field(default_factory=dict)


def _table(recorded: RecordedWorkload) -> pa.Table:
    w = recorded.workload
    events = recorded.events
    meta = dict(recorded.meta)
    kv = {
        KEY_SCHEMA: SCHEMA.encode(),
        KEY_VERSION: str(SCHEMA_VERSION).encode(),
        KEY_WORKLOAD: canonical_json(w.to_dict()).encode("utf-8"),
        KEY_OUTCOME: canonical_json(recorded.outcome).encode("utf-8"),
        KEY_META: canonical_json(meta).encode("utf-8"),
        META_SCHEMA: TRACE_SCHEMA.encode(),
        META_VERSION: str(TRACE_VERSION).encode(),
        META_RUN: canonical_json({"seed": (recorded.outcome or {}).get("seed", w.seed),
                                  "runtime": meta.get("runtime", w.recorded_runtime),
                                  "scenario": f"workload {w.name}"}).encode("utf-8"),
    }
    return pa.table({
        "seq": pa.array([e.seq for e in events], pa.int64()),
        "time_ms": pa.array([float(e.time_ms) for e in events], pa.float64()),
        "node": pa.array([e.node for e in events], pa.string()),
        "kind": pa.array([e.kind for e in events], pa.string()),
        "fields": pa.array([canonical_json(e.fields) for e in events], pa.string()),
    }, schema=COLUMNS.with_metadata(kv))


def save_workload(path: str | os.PathLike[str], recorded: RecordedWorkload) -> None:
    """Write `recorded` to `path` (replacing it)."""
    if not isinstance(recorded, RecordedWorkload):
        raise TypeError(f"save_workload: expected a RecordedWorkload, not {type(recorded).__name__}")
    pq.write_table(_table(recorded), os.fspath(path), compression="zstd")


def workload_bytes(recorded: RecordedWorkload) -> bytes:
    """The file's bytes (what save_workload writes)."""
    sink = pa.BufferOutputStream()
    pq.write_table(_table(recorded), sink, compression="zstd")
    return sink.getvalue().to_pybytes()


def load_workload(path: str | os.PathLike[str]) -> RecordedWorkload:
    """Read a recorded workload. WorkloadFormatError (a ValueError) naming the file for a file
    that is not Parquet, lacks a key, holds a bad workload spec or bad rows;
    WorkloadVersionError for a newer schema version."""
    path = os.fspath(path)
    if not os.path.exists(path):
        raise FileNotFoundError(f"{path}: no such workload file")
    try:
        table = pq.read_table(path)
    except (pa.ArrowException, OSError) as e:
        raise WorkloadFormatError(f"{path}: not a readable Parquet file ({e})") from None
    return _from_table(table, path)


def load_workload_bytes(data: bytes, name: str = "<bytes>") -> RecordedWorkload:
    """load_workload on a file's bytes (Spark ships workloads as bytes); `name` names it in errors."""
    try:
        table = pq.read_table(pa.BufferReader(data))
    except (pa.ArrowException, OSError) as e:
        raise WorkloadFormatError(f"{name}: not a readable Parquet file ({e})") from None
    return _from_table(table, name)


def read_spec(path: str | os.PathLike[str]) -> Workload:
    """Only the workload spec of a file (reads the footer's metadata, not the rows)."""
    path = os.fspath(path)
    try:
        kv = pq.read_schema(path).metadata or {}
    except (pa.ArrowException, OSError) as e:
        raise WorkloadFormatError(f"{path}: not a readable Parquet file ({e})") from None
    _check_header(kv, path)
    return _spec(kv, path)


def read_header(path: str | os.PathLike[str]) -> RecordedWorkload:
    """A file's workload, outcome and meta without its rows (events is empty): the footer only,
    for listing a directory of workloads quickly. Same errors as load_workload."""
    path = os.fspath(path)
    if not os.path.exists(path):
        raise FileNotFoundError(f"{path}: no such workload file")
    try:
        kv = pq.read_schema(path).metadata or {}
    except (pa.ArrowException, OSError) as e:
        raise WorkloadFormatError(f"{path}: not a readable Parquet file ({e})") from None
    _check_header(kv, path)
    outcome, meta = _outcome_meta(kv, path)
    return RecordedWorkload(_spec(kv, path), [], outcome, meta)


def _outcome_meta(kv: dict, where: str) -> tuple[dict | None, dict]:
    outcome = _json(kv, KEY_OUTCOME, where)
    if outcome is not None and not isinstance(outcome, dict):
        raise WorkloadFormatError(f"{where}: metadata key 'rmqlab.outcome' must be an object or null")
    meta = _json(kv, KEY_META, where)
    if not isinstance(meta, dict):
        raise WorkloadFormatError(f"{where}: metadata key 'rmqlab.meta' must be an object")
    return outcome, meta


def _text(kv: dict, key: bytes, where: str) -> str:
    value = kv.get(key)
    if value is None:
        raise WorkloadFormatError(f"{where}: metadata key {key.decode()!r} is missing (not a recorded workload "
                                  f"of schema {SCHEMA})")
    try:
        return value.decode("utf-8")
    except UnicodeDecodeError:
        raise WorkloadFormatError(f"{where}: metadata key {key.decode()!r} is not UTF-8") from None


def _check_header(kv: dict, where: str) -> None:
    schema = _text(kv, KEY_SCHEMA, where)
    if schema != SCHEMA:
        raise WorkloadFormatError(f"{where}: schema {schema!r} is not {SCHEMA!r}")
    version = _text(kv, KEY_VERSION, where)
    if not version.isdigit():
        raise WorkloadFormatError(f"{where}: schema version {version!r} is not a number")
    if int(version) > SCHEMA_VERSION:
        raise WorkloadVersionError(f"{where}: schema version {version} is newer than the {SCHEMA_VERSION} this "
                                   "rmqlab reads: upgrade rmqlab")


def _json(kv: dict, key: bytes, where: str) -> Any:
    try:
        return parse_json(_text(kv, key, where))
    except ValueError as e:
        if isinstance(e, WorkloadFormatError):
            raise
        raise WorkloadFormatError(f"{where}: metadata key {key.decode()!r} is not JSON ({e})") from None


def _spec(kv: dict, where: str) -> Workload:
    data = _json(kv, KEY_WORKLOAD, where)
    try:
        return Workload.from_dict(data)
    except (ValueError, TypeError) as e:
        raise WorkloadFormatError(f"{where}: bad workload spec: {e}") from None


def _from_table(table: pa.Table, where: str) -> RecordedWorkload:
    kv = table.schema.metadata or {}
    _check_header(kv, where)
    workload = _spec(kv, where)
    outcome, meta = _outcome_meta(kv, where)
    actual = [(f.name, f.type) for f in table.schema]
    expected = [(f.name, f.type) for f in COLUMNS]
    if actual != expected:
        raise WorkloadFormatError(f"{where}: columns {actual} are not the trace columns {expected}")
    columns = [table.column(name).to_pylist() for name in COLUMNS.names]
    events = []
    for row, (seq, time_ms, node, kind, fields) in enumerate(zip(*columns)):
        try:
            if fields is None or seq is None or time_ms is None or node is None or kind is None:
                raise ValueError("a null value")
            events.append(TraceEvent(seq, time_ms, node, kind, parse_json(fields)))
        except ValueError as e:
            raise WorkloadFormatError(f"{where}: row {row}: {e}") from None
    return RecordedWorkload(workload, events, outcome, meta)


def spec_json(workload: Workload) -> str:
    """A workload spec as indented JSON (a hand-written spec file's form)."""
    return json.dumps(workload.to_dict(), indent=2, sort_keys=False, ensure_ascii=False) + "\n"
