"""The trace's fast JSON codec (rmqlab.trace.event.canonical_json_bytes, orjson where it writes the
same bytes) against the json module's canonical spelling: every event of every recorded workload
in datasets/, and values chosen to differ (floats of every magnitude, big ints, non-ASCII and
control characters, lone surrogates, non-BMP keys)."""

from __future__ import annotations

import glob
import json
import math
import os
import random
import struct

import pyarrow.parquet as pq
import pytest

from rmqlab.trace.event import TraceEvent, canonical_json, canonical_json_bytes, parse_json
from rmqlab.trace.jsonl import dumps_event, dumps_event_bytes, trace_hash

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
WORKLOADS = sorted(glob.glob(os.path.join(ROOT, "datasets", "workloads", "*.parquet")))


def reference(value) -> bytes:
    """The canonical spelling, by the json module alone."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False,
                      allow_nan=False).encode("utf-8")


def test_canonical_json_bytes_is_faster_json_not_another_spelling():
    import rmqlab.trace.event as event_module

    assert event_module._ORJSON_DUMPS is not None  # orjson is a dependency: the fast road is taken


@pytest.mark.parametrize("path", WORKLOADS, ids=[os.path.basename(p) for p in WORKLOADS])
def test_every_recorded_event_is_written_with_the_same_bytes(path):
    table = pq.read_table(path, columns=["seq", "time_ms", "node", "kind", "fields"])
    columns = table.to_pydict()
    assert columns["fields"], f"{path} holds no events"
    for seq, time_ms, node, kind, text in zip(columns["seq"], columns["time_ms"], columns["node"],
                                              columns["kind"], columns["fields"]):
        fields = parse_json(text)
        assert canonical_json_bytes(fields) == text.encode("utf-8")
        event = TraceEvent(seq, time_ms, node, kind, fields)
        record = json.dumps(event.to_record(), sort_keys=True, separators=(",", ":"), ensure_ascii=False,
                            allow_nan=False)
        assert dumps_event_bytes(event) == record.encode("utf-8") and dumps_event(event) == record


def _floats(rng: random.Random, n: int) -> list[float]:
    out = [0.0, -0.0, 0.1, 0.2, 0.3, 1e-4, 9.999e-5, 1e-5, 1.5e-5, 1e-7, 1e-100, 5e-324, 2.2250738585072014e-308,
           1e15, 1e16, 9999999999999998.0, 1.2345678901234568e16, 1e22, 1e100, 1.7976931348623157e308,
           123456789.123, 0.5, 1.0, 100.0, 1e300 * 10 / 10]
    for _ in range(n):
        # random bit patterns (every exponent), and round decimals of every magnitude
        x = struct.unpack("<d", rng.getrandbits(64).to_bytes(8, "little"))[0]
        if math.isfinite(x):
            out.append(x)
        out.append(round(rng.uniform(-1, 1), rng.randint(0, 17)) * 10 ** rng.randint(-30, 30))
    return out + [-x for x in out]


def test_floats_of_every_magnitude_are_spelled_as_json_spells_them():
    floats = _floats(random.Random(17), 40_000)
    for x in floats:
        assert canonical_json_bytes(x) == reference(x), x
        assert canonical_json_bytes({"v": x, "l": [x, 1]}) == reference({"v": x, "l": [x, 1]}), x


def test_ints_strings_and_keys_that_differ_or_fail_in_orjson():
    values = [
        2**63 - 1, 2**63, -2**63, -2**63 - 1, 2**64, 10**30, -10**40,  # beyond 64 bits: orjson raises
        True, False, None, "", "plain", "non-ASCII é 中文 🎉", "\x00\x01\x1f\x7f\x80\x9f \u2028\u2029 \ufeff",
        '"quoted" \\ back\\slash /slash \b\f\n\r\t', "1e-05 in a string", "0.00001 too",
        {"é": 1, "e": 2, "z": 3, "中": 4, "🎉": 5, "\uffff": 6, "A": 7, "": 8},  # sorted by code point
        {"nested": {"b": [1, 2.5, {"y": None, "x": "ü"}], "a": []}, "list": [[], {}, [[1e-6]]]},
    ]
    for v in values:
        assert canonical_json_bytes(v) == reference(v), v
    deep = current = {}
    for _ in range(300):  # deeper than orjson's limit: json writes it
        current["k"] = {}
        current = current["k"]
    assert canonical_json_bytes(deep) == reference(deep)


def test_a_lone_surrogate_fails_as_with_json():
    with pytest.raises(UnicodeEncodeError):
        reference("\ud800")
    with pytest.raises(UnicodeEncodeError):
        canonical_json_bytes({"v": "\ud800"})


def test_random_event_fields_give_the_same_lines_and_hash():
    rng = random.Random(5)
    atoms = [None, True, False, 0, -1, 2**70, 0.1, 1e-9, 1e17, "x", "ünï", "\n\t", "中"]

    def value(depth: int):
        r = rng.random()
        if depth > 3 or r < 0.5:
            return rng.choice(atoms)
        if r < 0.75:
            return [value(depth + 1) for _ in range(rng.randint(0, 4))]
        return {rng.choice(["a", "b", "ζ", "key", "é", "Z"]) + str(rng.randint(0, 9)): value(depth + 1)
                for _ in range(rng.randint(0, 5))}

    events = [TraceEvent(i, rng.random() * 1e6, "n", "log", {"f": value(0), "g": value(0)}) for i in range(3000)]
    for e in events:
        assert dumps_event_bytes(e) == json.dumps(e.to_record(), sort_keys=True, separators=(",", ":"),
                                                  ensure_ascii=False, allow_nan=False).encode("utf-8")
    import hashlib

    digest = hashlib.sha256()
    for e in events:
        digest.update(canonical_json(e.to_record()).encode("utf-8") + b"\n")
    assert trace_hash(events) == digest.hexdigest()
    assert all(parse_json(dumps_event(e)) == e.to_record() for e in events[:100])
