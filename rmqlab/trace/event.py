"""TraceEvent: one structured event of the trace, and the canonical JSON it is written as.

An event is an envelope — `seq`, `time_ms`, `node`, `kind` — plus `fields`, a JSON object whose
content the event kind defines (see `rmqlab.trace.kinds`). Everything that leaves the running
system for widgets, checkers and grading travels as these events, so they hold plain JSON values
only: str, int, float, bool, None, lists, and dicts with str keys. Bytes are refused; a frame is
traced as its decoded fields and its size (and, if wanted, a hex preview string).

Canonical JSON
--------------
"Same seed ⇒ identical trace, byte for byte, whatever PYTHONHASHSEED is" needs one spelling per
value. `canonical_json` is ``json.dumps(value, sort_keys=True, separators=(",", ":"),
ensure_ascii=False, allow_nan=False)``: keys sorted (so neither dict insertion order nor hash
order matters), no spaces, non-ASCII text as UTF-8, floats as Python's shortest round-trip repr
(identical on every IEEE-754 platform), NaN and infinities rejected. Values are normalized when
an event is built, so what is kept in memory equals what a file round trip gives back: tuples
become lists, str/int/float subclasses (enums) become the plain type, and anything that JSON
would spell ambiguously or not at all (bytes, sets, non-str keys, NaN, lone surrogates) raises
ValueError naming where it was found.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from typing import Any

# The envelope keys of an event record, in the order they appear in a canonical line (sorted).
RECORD_KEYS = ("fields", "kind", "node", "seq", "time_ms")


# json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False)
# builds an encoder on every call; this is the same C encoder built once. Without a circular
# reference check: plain JSON values (json_value's fresh copies) hold no cycles.
_CANONICAL_ENCODER = json.JSONEncoder(sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False,
                                      check_circular=False)
_C_MAKE_ENCODER = getattr(json.encoder, "c_make_encoder", None)
_C_ENCODE = _C_MAKE_ENCODER(None, _CANONICAL_ENCODER.default, json.encoder.encode_basestring, None, ":", ",", True,
                            False, False) if _C_MAKE_ENCODER is not None else None


def canonical_json(value: Any) -> str:
    """`value` (already plain JSON, see `json_value`) in rmqlab's canonical JSON spelling."""
    if _C_ENCODE is not None:
        return "".join(_C_ENCODE(value, 0))
    return _CANONICAL_ENCODER.encode(value)


try:  # orjson: the same text several times faster, where it spells values as json does (below)
    import orjson as _orjson
except ImportError:  # pragma: no cover - a dependency; without it the json module does it all
    _orjson = None
_ORJSON_DUMPS = _orjson.dumps if _orjson is not None else None
_ORJSON_SORT_KEYS = _orjson.OPT_SORT_KEYS if _orjson is not None else 0


def canonical_json_bytes(value: Any) -> bytes:
    """``canonical_json(value).encode("utf-8")`` for a plain JSON value (`json_value`'s output,
    or an event's fields: finite floats only), byte for byte, mostly by orjson.

    orjson writes what the json module writes (keys sorted by code point, UTF-8 text, the same
    escapes, the same shortest round-trip digits) except where it cannot or does not: it raises
    for an int beyond 64 bits, a lone surrogate, a non-str key or deep nesting, and spells a
    float below 1e-4 as 0.00001 or 1e-7 where json writes 1e-05 and 1e-07. Those go to the json
    module: a raise, or text holding "0.0000" or "e-" (a float below 1e-4 shows one of them; a
    string that holds one merely takes the slower road). orjson would write NaN and the
    infinities as null where json refuses them: a plain value has none
    (tests/test_trace_codec.py checks all this, and every recorded trace in datasets/)."""
    if _ORJSON_DUMPS is not None:
        try:
            out = _ORJSON_DUMPS(value, option=_ORJSON_SORT_KEYS)
        except TypeError:  # orjson.JSONEncodeError
            pass
        else:
            if b"e-" not in out and b"0.0000" not in out:
                return out
    return canonical_json(value).encode("utf-8")


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not allowed in a trace (JSON has no such number)")


def parse_json(text: str) -> Any:
    """json.loads that refuses NaN/Infinity, which Python's parser would otherwise accept."""
    return json.loads(text, parse_constant=_reject_constant)


def json_value(value: Any, where: str) -> Any:
    """`value` as plain JSON data (a fresh copy), or ValueError naming `where` and the problem.

    `where` is a path such as ``frame.send.fields.ext_fields.topic`` so the emitter knows which
    value to fix.
    """
    # bool before int: bool is an int subclass and must stay true/false (bool has no subclasses).
    if value is None or type(value) is bool:
        return value
    if isinstance(value, str):
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            raise ValueError(f"{where}: string {value!r} is not valid Unicode (lone surrogate)") from None
        # str.__str__ drops a subclass (a str-valued Enum) to its plain value.
        return str.__str__(value)
    if isinstance(value, int):
        return int(value)
    if isinstance(value, float):
        if not math.isfinite(value):
            raise ValueError(f"{where}: {value!r} is not allowed (JSON has no NaN or infinity)")
        return float(value)
    if isinstance(value, (list, tuple)):
        return [json_value(item, f"{where}[{i}]") for i, item in enumerate(value)]
    if isinstance(value, dict):
        out = {}
        for key, item in value.items():
            if not isinstance(key, str):
                raise ValueError(f"{where}: key {key!r} is not a str (JSON object keys are strings)")
            out[str.__str__(key)] = json_value(item, f"{where}.{key}")
        return out
    if isinstance(value, (bytes, bytearray, memoryview)):
        raise ValueError(
            f"{where}: bytes are not allowed in a trace; emit the decoded fields and a size "
            "(and a hex preview string if useful)"
        )
    raise ValueError(f"{where}: {type(value).__name__} value {value!r} is not JSON (use str, int, float, "
                     "bool, None, list or dict)")


_PLAIN = (int, float, bool, type(None))


def _plain(v: Any) -> bool:
    t = type(v)
    return (t is str and v.isascii()) or (t in _PLAIN and (t is not float or math.isfinite(v)))


def _flat_copy(value: dict) -> dict | None:
    """A copy of a dict of str keys and plain values or lists of them (a frame's extFields, a
    client operation's value), else None."""
    out = {}
    for k, v in value.items():
        t = type(v)
        if type(k) is not str:
            return None
        if t is str:
            if not v.isascii():
                return None
        elif t is list:
            if not all(map(_plain, v)):
                return None
            v = list(v)
        elif t not in _PLAIN or (t is float and not math.isfinite(v)):
            return None
        out[k] = v
    return out


def plain_fields_in_place(fields: dict) -> bool:
    """The Tracer's hot path: True when every value of `fields` (a dict the caller owns) is
    already plain JSON that `json_fields` would keep as it is — an ASCII str, int, bool, None, a
    finite float, or a dict of str keys and such values, which is replaced by a copy here. False
    (with `fields` possibly partly updated to such copies, which is harmless) means "use
    `json_fields`", which normalizes or names what is wrong."""
    for key, value in fields.items():
        t = type(value)
        if t is str:
            if not value.isascii():
                return False
        elif t is dict:
            flat = _flat_copy(value)
            if flat is None:
                return False
            fields[key] = flat  # same keys: no resize while iterating
        elif not (t is int or t is bool or value is None or (t is float and math.isfinite(value))):
            return False
    return True


def json_fields(fields: dict, where: str) -> dict:
    """`json_value` for an event's fields, with fast paths for the flat values most events have;
    anything else goes through `json_value`, which normalizes and names what is wrong."""
    out = {}
    for key, value in fields.items():
        t = type(value)
        if t is str and value.isascii():
            out[key] = value
        elif t in _PLAIN and (t is not float or math.isfinite(value)):
            out[key] = value
        elif t is dict and (flat := _flat_copy(value)) is not None:
            out[key] = flat
        else:
            if type(key) is not str:
                raise ValueError(f"{where}: key {key!r} is not a str (JSON object keys are strings)")
            out[key] = json_value(value, f"{where}.{key}")
    return out


@dataclass(frozen=True)
class TraceEvent:
    """One event: `seq` (per tracer, from 0), `time_ms`, `node`, `kind`, `fields`.

    `time_ms` is virtual milliseconds since the simulation start on the simulator and wall-clock
    epoch milliseconds on the real runtime; it is always a float. `node` is the node the event is
    about ("broker-a", "namesrv", "controller-n0", "client-1", "nemesis"). `fields` is normalized
    to plain JSON on construction (see module docstring); treat it as read-only — the same dict
    is shared with every subscriber and with the written files.
    """

    seq: int
    time_ms: float
    node: str
    kind: str
    fields: dict

    def __post_init__(self) -> None:
        if isinstance(self.seq, bool) or not isinstance(self.seq, int) or self.seq < 0:
            raise ValueError(f"trace event seq must be a non-negative int, not {self.seq!r}")
        object.__setattr__(self, "seq", int(self.seq))
        if isinstance(self.time_ms, bool) or not isinstance(self.time_ms, (int, float)):
            raise ValueError(f"trace event time_ms must be a number, not {self.time_ms!r}")
        if not math.isfinite(self.time_ms):
            raise ValueError(f"trace event time_ms must be finite, not {self.time_ms!r}")
        object.__setattr__(self, "time_ms", float(self.time_ms))
        for name in ("node", "kind"):
            value = getattr(self, name)
            if not isinstance(value, str) or not value:
                raise ValueError(f"trace event {name} must be a non-empty str, not {value!r}")
            object.__setattr__(self, name, json_value(value, name))
        if not isinstance(self.fields, dict):
            raise ValueError(f"{self.kind}: fields must be a dict, not {type(self.fields).__name__}")
        object.__setattr__(self, "fields", json_value(self.fields, f"{self.kind}.fields"))

    @classmethod
    def trusted(cls, seq: int, time_ms: float, node: str, kind: str, fields: dict) -> TraceEvent:
        """An event from values the caller already checked and normalized (the Tracer's hot path)."""
        event = object.__new__(cls)
        # One dict update instead of five object.__setattr__ calls (the dataclass is frozen).
        event.__dict__.update(seq=seq, time_ms=time_ms, node=node, kind=kind, fields=fields)
        return event

    def to_record(self) -> dict:
        """The event as the JSON object written on its JSONL line."""
        return {"seq": self.seq, "time_ms": self.time_ms, "node": self.node, "kind": self.kind,
                "fields": self.fields}

    @classmethod
    def from_record(cls, record: Any) -> TraceEvent:
        """An event from a parsed JSONL record; ValueError when the envelope is malformed.

        The kind is not checked against the catalog: a reader must accept kinds added after it
        was written (see `rmqlab.trace.kinds` on versioning).
        """
        if not isinstance(record, dict):
            raise ValueError(f"an event record must be a JSON object, not {type(record).__name__}")
        keys = set(record)
        if keys != set(RECORD_KEYS):
            missing = sorted(set(RECORD_KEYS) - keys)
            extra = sorted(keys - set(RECORD_KEYS))
            detail = []
            if missing:
                detail.append(f"missing {', '.join(missing)}")
            if extra:
                detail.append(f"unexpected {', '.join(extra)}")
            raise ValueError(f"an event record has keys {', '.join(RECORD_KEYS)}: {'; '.join(detail)}")
        return cls(record["seq"], record["time_ms"], record["node"], record["kind"], record["fields"])
