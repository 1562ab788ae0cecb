"""Errors and warnings raised while reading a trace file.

A bad trace file is reported with its path and, for JSON Lines, the line number
(``run/broker-a.jsonl:17: ...``), so a learner can open the file at the right place.
"""

from __future__ import annotations


class TraceFormatError(ValueError):
    """A trace file that cannot be read: not an rmqlab trace, a malformed header or event, a
    Parquet file with the wrong columns. The message names the file (and line) and the problem."""


class TraceVersionError(TraceFormatError):
    """A trace file written with a schema version this rmqlab does not know (a newer one)."""


class TraceWarning(UserWarning):
    """Something a reader skipped: the torn last line a killed process leaves in its JSONL file."""
