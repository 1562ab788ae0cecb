"""The header of a trace file: schema name, schema version and run metadata.

Both file formats carry the same header. In JSON Lines it is the first line,
``{"meta":{...},"schema":"rmqlab.trace","version":2}``; in Parquet the same three values are
file-level key-value metadata. `meta` describes the run; these keys have a fixed meaning and are
checked, any other key is free (plain JSON):

* ``seed`` (int): the simulator seed;
* ``runtime`` ("sim" or "real"): which runtime produced the events (and so what time_ms means);
* ``scenario`` (str): the scenario or notebook that ran;
* ``source`` (str): on the real runtime, the process whose tracer wrote the file.

Nothing is added automatically — no creation time, no rmqlab version — so a file written twice
from the same seed is the same file, byte for byte.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from rmqlab.trace.errors import TraceFormatError, TraceVersionError
from rmqlab.trace.event import TraceEvent, json_value
from rmqlab.trace.kinds import SCHEMA_NAME, SCHEMA_VERSION

RUNTIMES = ("sim", "real")


def normalize_meta(meta: Mapping[str, Any] | None) -> dict:
    """`meta` as plain JSON, with the documented keys checked; ValueError naming a bad key."""
    if meta is None:
        return {}
    if not isinstance(meta, Mapping):
        raise ValueError(f"trace meta must be a dict, not {type(meta).__name__}")
    out = json_value(dict(meta), "meta")
    seed = out.get("seed")
    if "seed" in out and (not isinstance(seed, int) or isinstance(seed, bool)):
        raise ValueError(f"meta.seed must be an int, not {seed!r}")
    if "runtime" in out and out["runtime"] not in RUNTIMES:
        raise ValueError(f"meta.runtime must be one of {', '.join(RUNTIMES)}, not {out['runtime']!r}")
    for key in ("scenario", "source"):
        if key in out and not isinstance(out[key], str):
            raise ValueError(f"meta.{key} must be a str, not {out[key]!r}")
    return out


def header_record(meta: Mapping[str, Any] | None) -> dict:
    """The JSONL header record for a file with run metadata `meta`."""
    return {"schema": SCHEMA_NAME, "version": SCHEMA_VERSION, "meta": normalize_meta(meta)}


def check_schema(schema: Any, version: Any, where: str) -> None:
    """TraceFormatError unless (`schema`, `version`) names a trace this rmqlab reads; the more
    specific TraceVersionError for a newer version. `where` names the file for the message."""
    if schema != SCHEMA_NAME:
        raise TraceFormatError(f"{where}: not an rmqlab trace (schema {schema!r}, expected {SCHEMA_NAME!r})")
    if isinstance(version, bool) or not isinstance(version, int) or version < 1:
        raise TraceFormatError(f"{where}: schema version must be a positive int, not {version!r}")
    if version > SCHEMA_VERSION:
        raise TraceVersionError(
            f"{where}: written with trace schema version {version}, this rmqlab reads versions up to "
            f"{SCHEMA_VERSION}; upgrade rmqlab to read it"
        )


def meta_from_header(record: Any, where: str) -> dict:
    """The run metadata of a parsed JSONL header record, after checking its schema and version."""
    if not isinstance(record, dict) or "schema" not in record:
        raise TraceFormatError(f"{where}: the first line is not a trace header "
                               f'(expected {{"meta":...,"schema":"{SCHEMA_NAME}","version":...}})')
    check_schema(record.get("schema"), record.get("version"), where)
    extra = sorted(set(record) - {"schema", "version", "meta"})
    if extra:
        raise TraceFormatError(f"{where}: unexpected header keys {', '.join(extra)}")
    try:
        return normalize_meta(record.get("meta", {}))
    except ValueError as e:
        raise TraceFormatError(f"{where}: {e}") from None


@dataclass(frozen=True)
class TraceFile:
    """What a trace file holds: the run metadata and the events. `torn_tail` is True when the
    JSONL file ended in a torn line (its writer was killed mid-line) that was skipped."""

    meta: dict
    events: list[TraceEvent]
    torn_tail: bool = field(default=False)
