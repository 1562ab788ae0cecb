"""The structured event trace: the only road from the running system to widgets,
checkers and grading.

Both runtimes emit `TraceEvent`s (seq, time, node, kind, fields) through a `Tracer`: frames sent
and received with their decoded fields and sizes, role and state changes, epochs, offsets, client
operations (Jepsen style), faults injected and healed. The kinds and their fields are the
catalog in `kinds`; traces are stored as JSON Lines (`jsonl`) and Parquet (`parquet`) with the
versioned schema documented in datasets/README.md. Serialization is canonical, so the same seed
gives the same trace byte for byte (`trace_hash`). `merge_traces` joins the per-process files of
the real runtime; `client_ops` turns client events into the history checkers read.
"""

from rmqlab.trace.errors import TraceFormatError, TraceVersionError, TraceWarning
from rmqlab.trace.event import TraceEvent, canonical_json
from rmqlab.trace.header import TraceFile
from rmqlab.trace.history import ClientOp, client_ops, messages_read
from rmqlab.trace.jsonl import (JsonlWriter, dumps_event, dumps_header, load_jsonl, read_jsonl, trace_hash,
                                write_jsonl)
from rmqlab.trace.kinds import (KINDS, SCHEMA_NAME, SCHEMA_VERSION, FieldSpec, KindSpec, catalog_markdown,
                                kind_spec, register_kind, validate_fields)
from rmqlab.trace.merge import merge_traces
from rmqlab.trace.parquet import load_parquet, read_parquet, write_parquet
from rmqlab.trace.tracer import Tracer

__all__ = [
    "TraceFormatError", "TraceVersionError", "TraceWarning",
    "TraceEvent", "canonical_json", "TraceFile", "ClientOp", "client_ops", "messages_read",
    "JsonlWriter", "dumps_event", "dumps_header", "load_jsonl", "read_jsonl", "trace_hash", "write_jsonl",
    "KINDS", "SCHEMA_NAME", "SCHEMA_VERSION", "FieldSpec", "KindSpec", "catalog_markdown", "kind_spec",
    "register_kind", "validate_fields", "merge_traces", "load_parquet", "read_parquet", "write_parquet", "Tracer",
]
