"""Tests for rmqlab.trace: the structured event trace.

Covers emit validation against the kind catalog, canonical serialization (insertion order,
PYTHONHASHSEED, separate processes), JSONL and Parquet round trips, schema versions, the torn last
line of a killed writer, merging per-process traces, Jepsen-style client histories, subscribers,
and that datasets/README.md documents exactly the catalog. Everything runs on files under tmp_path
with a ManualClock; the subprocesses are short scripts with a timeout.
"""

from __future__ import annotations

import ast
import asyncio
import enum
import hashlib
import json
import os
import re
import signal
import subprocess
import sys
import threading
import warnings
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from rmqlab.common.manual_clock import ManualClock
from rmqlab.trace import (
    KINDS,
    SCHEMA_VERSION,
    TraceEvent,
    TraceFormatError,
    Tracer,
    TraceVersionError,
    TraceWarning,
    catalog_markdown,
    client_ops,
    dumps_event,
    load_jsonl,
    load_parquet,
    merge_traces,
    read_jsonl,
    read_parquet,
    trace_hash,
    write_jsonl,
    write_parquet,
)

REPO = Path(__file__).resolve().parents[1]
DATASETS_README = REPO / "datasets" / "README.md"


def new_tracer(**kwargs) -> tuple[Tracer, ManualClock]:
    clock = ManualClock(start_ms=0)
    return Tracer(clock, **kwargs), clock


def sample_run(tracer: Tracer, clock: ManualClock) -> None:
    """A small run touching several kinds, values of every JSON type, and non-ASCII text."""
    tracer.emit("broker-a", "node.start", component="broker", addr="127.0.0.1:10911")
    clock.advance(3)
    tracer.emit("broker-a", "role", from_=None, to="MASTER", epoch=1)
    tracer.emit("broker-a", "frame.send", proto="remoting", peer="namesrv", size=310, code=103, opaque=7,
                flag=0, remark=None, ext_fields={"brokerName": "broker-a", "clusterName": "DefaultCluster"})
    clock.advance(1)
    tracer.emit("client-1", "client", type="invoke", process=0, f="send", op_id=1,
                value={"topic": "TopicTest", "body": "héllo ✓", "keys": ["k1", "k2"], "ratio": 0.1})
    tracer.emit("broker-a", "offset", which="written", value=1234)
    clock.advance(2)
    tracer.emit("client-1", "client", type="ok", process=0, f="send", op_id=1, value={"queue_offset": 0})
    tracer.emit("nemesis", "fault.partition", groups=[["broker-a"], ["broker-b", "namesrv"]], fault_id=1)


# --- emit and validation -----------------------------------------------------------------------

def test_emit_numbers_stamps_and_keeps_events():
    tracer, clock = new_tracer()
    first = tracer.emit("broker-a", "node.start", component="broker")
    clock.advance(5)
    second = tracer.emit("broker-a", "offset", which="flushed", value=4096)
    assert (first.seq, first.time_ms, second.seq, second.time_ms) == (0, 0.0, 1, 5.0)
    assert type(second.time_ms) is float  # ManualClock returns ints; the trace always holds floats
    assert tracer.events == [first, second]
    assert second == TraceEvent(1, 5.0, "broker-a", "offset", {"which": "flushed", "value": 4096})


def test_a_tracer_that_keeps_nothing_still_numbers_streams_and_delivers(tmp_path):
    """A server process's tracer (keep=False): its events reach the file and the subscribers, and
    none stays in memory."""
    from rmqlab.trace import read_jsonl
    path = tmp_path / "t.jsonl"
    tracer, _ = new_tracer(jsonl_path=path, keep=False)
    seen = []
    tracer.subscribe(seen.append)
    for i in range(3):
        tracer.emit("namesrv", "offset", which="flushed", value=i)
    tracer.close()
    assert tracer.events == [] and [e.seq for e in seen] == [0, 1, 2]
    assert [e.fields["value"] for e in read_jsonl(path)] == [0, 1, 2]


def test_unknown_kind_is_rejected_with_a_suggestion():
    tracer, _ = new_tracer()
    with pytest.raises(ValueError, match=r"unknown trace event kind 'frame\.sent'.*frame\.send"):
        tracer.emit("broker-a", "frame.sent", proto="remoting", peer="namesrv", size=10)
    assert tracer.events == []


def test_missing_required_field_names_kind_and_field():
    tracer, _ = new_tracer()
    with pytest.raises(ValueError, match=r"trace event 'frame\.send': missing required field 'size'"):
        tracer.emit("broker-a", "frame.send", proto="remoting", peer="namesrv")
    with pytest.raises(ValueError, match=r"'client': missing required field 'value'"):
        tracer.emit("client-1", "client", type="invoke", process=0, f="send", op_id=1)


@pytest.mark.parametrize(
    "kind, fields, message",
    [
        ("offset", {"which": "writen", "value": 1}, r"'offset': field 'which' = 'writen' is not one of written"),
        ("offset", {"which": "written", "value": "1"}, r"'offset': field 'value' must be int, not str"),
        ("offset", {"which": "written", "value": True}, r"'offset': field 'value' must be int, not bool"),
        ("fault.loss", {"rate": "high"}, r"'fault.loss': field 'rate' must be number"),
        ("role", {"from": None, "to": None}, r"'role': field 'to' must be str"),
        ("frame.send", {"proto": "ha", "peer": "b", "size": 1, "code": 1.5}, r"field 'code' must be int"),
    ],
)
def test_declared_fields_are_type_checked(kind, fields, message):
    tracer, _ = new_tracer()
    with pytest.raises(ValueError, match=message):
        tracer.emit("broker-a", kind, **fields)


@pytest.mark.parametrize(
    "fields, message",
    [
        ({"body": b"\x00\x01"}, r"frame\.send\.fields\.body: bytes are not allowed"),
        ({"ext_fields": {"a": float("nan")}}, r"frame\.send\.fields\.ext_fields\.a: nan is not allowed"),
        ({"ratio": float("inf")}, r"inf is not allowed"),
        ({"ext_fields": {1: "x"}}, r"key 1 is not a str"),
        ({"peers": {"a", "b"}}, r"frame\.send\.fields\.peers: set value"),
        ({"remark": "\ud800"}, r"not valid Unicode"),
        ({"_src": "x"}, r"field name '_src' is reserved"),
    ],
)
def test_values_json_cannot_hold_exactly_are_rejected(fields, message):
    tracer, _ = new_tracer()
    with pytest.raises(ValueError, match=message):
        tracer.emit("broker-a", "frame.send", proto="remoting", peer="namesrv", size=10, **fields)
    assert tracer.events == []


def test_extra_fields_are_kept_and_values_normalized():
    class Role(str, enum.Enum):
        MASTER = "MASTER"

    class Code(enum.IntEnum):
        SEND_MESSAGE = 10

    tracer, _ = new_tracer()
    event = tracer.emit("broker-a", "frame.send", proto="ha", peer="broker-a-s", size=12, code=Code.SEND_MESSAGE,
                        master_phy_offset=4096, pair=(1, 2), role=Role.MASTER)
    assert event.fields == {"proto": "ha", "peer": "broker-a-s", "size": 12, "code": 10,
                            "master_phy_offset": 4096, "pair": [1, 2], "role": "MASTER"}
    assert type(event.fields["code"]) is int and type(event.fields["role"]) is str
    # What a file round trip gives back is what was kept in memory.
    assert TraceEvent.from_record(json.loads(dumps_event(event))) == event


def test_keyword_fields_take_a_trailing_underscore():
    tracer, _ = new_tracer()
    event = tracer.emit("broker-a", "state", machine="HAClient", from_="READY", to="HANDSHAKE")
    assert event.fields == {"machine": "HAClient", "from": "READY", "to": "HANDSHAKE"}
    assert tracer.emit("broker-a", "state", machine="m", **{"from": None, "to": "READY"}).fields["from"] is None
    with pytest.raises(ValueError, match="both with and without"):
        tracer.emit("broker-a", "state", machine="m", to="x", **{"from": "a", "from_": "b"})


def test_emit_after_close_is_an_error():
    tracer, _ = new_tracer()
    tracer.close()
    with pytest.raises(ValueError, match="closed Tracer"):
        tracer.emit("broker-a", "node.stop")


# --- canonical serialization and determinism ---------------------------------------------------

def test_serialization_does_not_depend_on_insertion_order():
    keys = [f"key{i}" for i in range(20)]
    forward = {k: {"x": i, "y": [i, str(i)]} for i, k in enumerate(keys)}
    backward = {k: {"y": [i, str(i)], "x": i} for i, k in reversed(list(enumerate(keys)))}
    assert list(forward) != list(backward)
    a, _ = new_tracer()
    b, _ = new_tracer()
    a.emit("broker-a", "frame.recv", proto="remoting", peer="p", size=1, ext_fields=forward, code=1)
    b.emit("broker-a", "frame.recv", code=1, ext_fields=backward, size=1, peer="p", proto="remoting")
    assert dumps_event(a.events[0]) == dumps_event(b.events[0])
    assert trace_hash(a.events) == trace_hash(b.events)


def test_canonical_line_spelling():
    tracer, clock = new_tracer()
    clock.advance(7)
    event = tracer.emit("broker-a", "log", level="INFO", message="naïve ✓\u2028next", ratio=0.1, big=10**16 * 1.0)
    assert dumps_event(event) == (
        '{"fields":{"big":1e+16,"level":"INFO","message":"naïve ✓\u2028next","ratio":0.1},'
        '"kind":"log","node":"broker-a","seq":0,"time_ms":7.0}'
    )


def test_event_lines_are_json_dumps_of_the_record():
    # dumps_event assembles the line from its parts; it must stay json.dumps of the whole record.
    tracer, clock = new_tracer()
    sample_run(tracer, clock)
    clock.advance(0.125)
    tracer.emit("bröker-✓", "log", level="INFO", message='quote " back \\ ctl \x01 \u2028', neg=-0.0, big=2**70,
                tiny=5e-324, nested={"b": [1, {"y": None, "x": True}], "a": ""})
    for event in tracer.events:
        record = {"seq": event.seq, "time_ms": event.time_ms, "node": event.node, "kind": event.kind,
                  "fields": event.fields}
        assert dumps_event(event) == json.dumps(record, sort_keys=True, separators=(",", ":"), ensure_ascii=False,
                                                allow_nan=False)


def test_emit_copies_nested_dicts_the_caller_keeps():
    tracer, _ = new_tracer()
    ext = {"topic": "TopicTest", "queueId": "1"}
    event = tracer.emit("broker-a", "frame.recv", proto="remoting", peer="p", size=9, ext_fields=ext)
    ext["topic"] = "changed"
    assert event.fields["ext_fields"] == {"topic": "TopicTest", "queueId": "1"}


def test_same_run_gives_identical_files(tmp_path):
    digests = []
    for run in ("one", "two"):
        tracer, clock = new_tracer(jsonl_path=tmp_path / f"{run}.jsonl", meta={"seed": 7, "runtime": "sim"})
        sample_run(tracer, clock)
        tracer.close()
        write_parquet(tracer.events, tmp_path / f"{run}.parquet", metadata=tracer.meta)
        digests.append((trace_hash(tracer.events), (tmp_path / f"{run}.jsonl").read_bytes(),
                        (tmp_path / f"{run}.parquet").read_bytes()))
    assert digests[0] == digests[1]


HASH_SEED_SCRIPT = r"""
import hashlib, sys
from rmqlab.common.manual_clock import ManualClock
from rmqlab.trace import Tracer, trace_hash, write_parquet

out = sys.argv[1]
words = {"alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf", "hotel", "india", "juliet"}
order = list(words)  # set iteration order follows the string hash, so PYTHONHASHSEED
clock = ManualClock(start_ms=0)
tracer = Tracer(clock, jsonl_path=out + ".jsonl", meta={"seed": 3, "runtime": "sim"})
for i, word in enumerate(sorted(words)):
    clock.advance(i)
    # The same content every time, but each dict is built in the hash-dependent order.
    tracer.emit("broker-a", "frame.send", proto="remoting", peer=word, size=len(word),
                ext_fields={w: len(w) * i for w in order}, remark=word, peers=dict.fromkeys(words, 0.5))
tracer.close()
write_parquet(tracer.events, out + ".parquet", metadata=tracer.meta)
files = [hashlib.sha256(open(out + ext, "rb").read()).hexdigest() for ext in (".jsonl", ".parquet")]
print(",".join(order), trace_hash(tracer.events), *files)
"""


@pytest.mark.real
def test_trace_is_identical_across_processes_and_hash_seeds(tmp_path):
    results = []
    for hash_seed in ("0", "1", "random"):
        env = dict(os.environ, PYTHONHASHSEED=hash_seed)
        done = subprocess.run([sys.executable, "-c", HASH_SEED_SCRIPT, str(tmp_path / f"run-{hash_seed}")],
                              env=env, cwd=REPO, capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, done.stderr
        order, *hashes = done.stdout.split()
        results.append((order, hashes))
    # The emitted dicts really were built in different orders...
    assert len({order for order, _ in results}) > 1
    # ...and the trace hash, the JSONL file and the Parquet file are the same bytes anyway.
    assert len({tuple(hashes) for _, hashes in results}) == 1


# --- JSON Lines --------------------------------------------------------------------------------

def test_jsonl_round_trip_and_hash_of_the_file_body(tmp_path):
    tracer, clock = new_tracer(meta={"seed": 7, "runtime": "sim", "scenario": "sample", "extra": [1]})
    sample_run(tracer, clock)
    path = tmp_path / "trace.jsonl"
    write_jsonl(tracer.events, path, meta=tracer.meta)
    loaded = load_jsonl(path)
    assert loaded.events == tracer.events
    assert loaded.meta == {"seed": 7, "runtime": "sim", "scenario": "sample", "extra": [1]}
    assert not loaded.torn_tail
    header, body = path.read_bytes().split(b"\n", 1)
    assert json.loads(header) == {"schema": "rmqlab.trace", "version": SCHEMA_VERSION, "meta": loaded.meta}
    assert hashlib.sha256(body).hexdigest() == trace_hash(tracer.events)


def test_streaming_sink_matches_the_batch_writer(tmp_path):
    tracer, clock = new_tracer(jsonl_path=tmp_path / "live.jsonl", meta={"runtime": "sim"})
    sample_run(tracer, clock)
    tracer.close()
    write_jsonl(tracer.events, tmp_path / "batch.jsonl", meta={"runtime": "sim"})
    assert (tmp_path / "live.jsonl").read_bytes() == (tmp_path / "batch.jsonl").read_bytes()


def test_streaming_sink_refuses_an_existing_file(tmp_path):
    path = tmp_path / "broker-a.jsonl"
    path.write_text("keep me\n")
    with pytest.raises(FileExistsError):
        Tracer(ManualClock(0), jsonl_path=path)
    assert path.read_text() == "keep me\n"


KILLED_WRITER_SCRIPT = r"""
import os, signal, sys
from rmqlab.common.manual_clock import ManualClock
from rmqlab.trace import Tracer

tracer = Tracer(ManualClock(0), jsonl_path=sys.argv[1], meta={"runtime": "real", "source": "broker-a"})
for i in range(50):
    tracer.emit("broker-a", "offset", which="written", value=i * 100)
os.kill(os.getpid(), signal.SIGKILL)  # no close(), no interpreter shutdown, no buffer flush
"""


@pytest.mark.real
def test_a_killed_writer_leaves_every_emitted_line(tmp_path):
    path = tmp_path / "broker-a.jsonl"
    done = subprocess.run([sys.executable, "-c", KILLED_WRITER_SCRIPT, str(path)], cwd=REPO,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == -signal.SIGKILL, done.stderr
    loaded = load_jsonl(path)
    assert loaded.meta == {"runtime": "real", "source": "broker-a"}
    assert [e.fields["value"] for e in loaded.events] == [i * 100 for i in range(50)]


def test_buffered_sink_writes_once_per_event_loop_iteration(tmp_path):
    path = tmp_path / "buffered.jsonl"
    tracer, clock = new_tracer(jsonl_path=path, buffered=True)

    def lines() -> int:
        return path.read_bytes().count(b"\n") - 1  # minus the header

    async def main():
        for i in range(5):
            tracer.emit("broker-a", "offset", which="written", value=i)
        assert lines() == 0  # still in memory during the iteration that emitted them
        await asyncio.sleep(0)  # the next iteration writes them
        assert lines() == 5
        tracer.emit("broker-a", "offset", which="written", value=5)

    asyncio.run(main())  # the loop ends before the last event's flush ran
    tracer.emit("broker-a", "offset", which="written", value=6)  # no running loop: written at once
    assert lines() == 7
    tracer.emit("broker-a", "node.stop")
    tracer.close()
    assert read_jsonl(path) == tracer.events
    write_jsonl(tracer.events, tmp_path / "batch.jsonl")
    assert path.read_bytes() == (tmp_path / "batch.jsonl").read_bytes()


BUFFERED_KILLED_WRITER_SCRIPT = r"""
import asyncio, os, signal, sys
from rmqlab.common.manual_clock import ManualClock
from rmqlab.trace import Tracer

tracer = Tracer(ManualClock(0), jsonl_path=sys.argv[1], buffered=True)

async def main():
    for i in range(50):
        tracer.emit("broker-a", "offset", which="written", value=i)
    await asyncio.sleep(0)
    for i in range(50, 55):  # the iteration the SIGKILL interrupts
        tracer.emit("broker-a", "offset", which="written", value=i)
    os.kill(os.getpid(), signal.SIGKILL)

asyncio.run(main())
"""


@pytest.mark.real
def test_a_killed_buffered_writer_loses_only_the_current_loop_iteration(tmp_path):
    path = tmp_path / "broker-a.jsonl"
    done = subprocess.run([sys.executable, "-c", BUFFERED_KILLED_WRITER_SCRIPT, str(path)], cwd=REPO,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == -signal.SIGKILL, done.stderr
    assert [e.fields["value"] for e in read_jsonl(path)] == list(range(50))


@pytest.mark.parametrize("cut", [1, 20, "in-utf8"])
def test_torn_last_line_is_skipped_with_a_warning(tmp_path, cut):
    tracer, clock = new_tracer()
    sample_run(tracer, clock)
    last = tracer.emit("broker-a", "log", level="WARN", message="ünïcödé tail")
    path = tmp_path / "killed.jsonl"
    write_jsonl(tracer.events, path)
    data = path.read_bytes()
    line = (dumps_event(last) + "\n").encode("utf-8")
    keep = line.index("ü".encode()) + 1 if cut == "in-utf8" else cut  # "in-utf8": half of a 2-byte character
    path.write_bytes(data[: len(data) - len(line) + keep])
    with pytest.warns(TraceWarning, match=r"killed\.jsonl:9: skipped a torn last line"):
        loaded = load_jsonl(path)
    assert loaded.torn_tail
    assert loaded.events == tracer.events[:-1]


def test_complete_last_line_without_newline_is_kept(tmp_path):
    tracer, clock = new_tracer()
    sample_run(tracer, clock)
    path = tmp_path / "t.jsonl"
    write_jsonl(tracer.events, path)
    path.write_bytes(path.read_bytes()[:-1])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert read_jsonl(path) == tracer.events


def test_bad_line_in_the_middle_names_file_and_line(tmp_path):
    tracer, clock = new_tracer()
    sample_run(tracer, clock)
    path = tmp_path / "bad.jsonl"
    write_jsonl(tracer.events, path)
    lines = path.read_text(encoding="utf-8").split("\n")
    lines[3] = lines[3][:-5]
    path.write_text("\n".join(lines), encoding="utf-8")
    with pytest.raises(TraceFormatError, match=r"bad\.jsonl:4: not valid JSON"):
        read_jsonl(path)
    lines[3] = '{"fields":{},"kind":"log","node":"n","seq":-1,"time_ms":0.0}'
    path.write_text("\n".join(lines), encoding="utf-8")
    with pytest.raises(TraceFormatError, match=r"bad\.jsonl:4: trace event seq must be a non-negative int"):
        read_jsonl(path)
    lines[3] = '{"fields":{},"kind":"log","node":"n","seq":3,"time_ms":NaN}'
    path.write_text("\n".join(lines), encoding="utf-8")
    with pytest.raises(TraceFormatError, match=r"bad\.jsonl:4: .*NaN is not allowed"):
        read_jsonl(path)


def test_a_file_without_header_is_not_a_trace(tmp_path):
    tracer, clock = new_tracer()
    sample_run(tracer, clock)
    path = tmp_path / "headless.jsonl"
    path.write_text("".join(dumps_event(e) + "\n" for e in tracer.events), encoding="utf-8")
    with pytest.raises(TraceFormatError, match=r"headless\.jsonl:1: the first line is not a trace header"):
        read_jsonl(path)
    path.write_text('{"meta":{},"schema":"other.trace","version":1}\n', encoding="utf-8")
    with pytest.raises(TraceFormatError, match=r"headless\.jsonl:1: not an rmqlab trace \(schema 'other\.trace'"):
        read_jsonl(path)
    path.write_bytes(b"")
    with pytest.raises(TraceFormatError, match="empty file"):
        read_jsonl(path)


def test_newer_schema_version_is_refused(tmp_path):
    jsonl = tmp_path / "future.jsonl"
    jsonl.write_text(f'{{"meta":{{}},"schema":"rmqlab.trace","version":{SCHEMA_VERSION + 1}}}\n', encoding="utf-8")
    with pytest.raises(TraceVersionError, match=rf"future\.jsonl:1: written with trace schema version "
                                                rf"{SCHEMA_VERSION + 1}, this rmqlab reads versions up to "
                                                rf"{SCHEMA_VERSION}"):
        read_jsonl(jsonl)

    tracer, clock = new_tracer()
    sample_run(tracer, clock)
    parquet = tmp_path / "future.parquet"
    write_parquet(tracer.events, parquet)
    table = pq.read_table(parquet)
    kv = dict(table.schema.metadata)
    kv[b"rmqlab.trace.version"] = str(SCHEMA_VERSION + 1).encode()
    pq.write_table(table.replace_schema_metadata(kv), parquet)
    with pytest.raises(TraceVersionError, match=rf"future\.parquet: written with trace schema version "
                                                rf"{SCHEMA_VERSION + 1}"):
        read_parquet(parquet)


# --- Parquet -----------------------------------------------------------------------------------

def test_parquet_round_trip_columns_and_metadata(tmp_path):
    tracer, clock = new_tracer()
    sample_run(tracer, clock)
    path = tmp_path / "trace.parquet"
    write_parquet(tracer.events, path, metadata={"seed": 7, "runtime": "sim"})
    loaded = load_parquet(path)
    assert loaded.events == tracer.events
    assert loaded.meta == {"seed": 7, "runtime": "sim"}
    table = pq.read_table(path)
    assert [(f.name, f.type) for f in table.schema] == [
        ("seq", pa.int64()), ("time_ms", pa.float64()), ("node", pa.string()), ("kind", pa.string()),
        ("fields", pa.string())]
    kv = table.schema.metadata
    assert kv[b"rmqlab.trace.schema"] == b"rmqlab.trace"
    assert kv[b"rmqlab.trace.version"] == str(SCHEMA_VERSION).encode()
    assert kv[b"rmqlab.trace.meta"] == b'{"runtime":"sim","seed":7}'
    assert table.column("fields").to_pylist()[0] == '{"addr":"127.0.0.1:10911","component":"broker"}'


def test_parquet_with_foreign_columns_is_refused(tmp_path):
    tracer, clock = new_tracer()
    sample_run(tracer, clock)
    path = tmp_path / "odd.parquet"
    write_parquet(tracer.events, path)
    table = pq.read_table(path)
    pq.write_table(table.drop_columns(["fields"]), path)
    with pytest.raises(TraceFormatError, match=r"odd\.parquet: columns .* are not the trace columns"):
        read_parquet(path)
    pq.write_table(pa.table({"x": [1]}), path)
    with pytest.raises(TraceFormatError, match=r"odd\.parquet: not an rmqlab trace \(schema None"):
        read_parquet(path)


# --- merge -------------------------------------------------------------------------------------

def ev(seq, time_ms, node, value):
    return TraceEvent(seq, time_ms, node, "offset", {"which": "written", "value": value})


def test_merge_orders_by_time_node_source_and_renumbers():
    broker = [ev(0, 10.0, "broker-a", 1), ev(1, 20.0, "broker-a", 2), ev(2, 30.0, "broker-a", 3)]
    # The supervisor reports about broker-a too (same node, different source), and its clock
    # steps back between its events 1 and 2: its own order must survive.
    supervisor = [ev(0, 5.0, "broker-a", 10), ev(1, 20.0, "broker-a", 11), ev(2, 15.0, "nemesis", 12),
                  ev(3, 30.0, "broker-a", 13)]
    client = [ev(0, 20.0, "aaa-client", 20)]
    merged = merge_traces([broker, supervisor, client], sources=["broker-a.jsonl", "supervisor.jsonl", "client.jsonl"])
    assert [e.fields["value"] for e in merged] == [10, 1, 20, 2, 11, 12, 3, 13]
    assert [e.seq for e in merged] == list(range(8))
    assert [(e.fields["_src"], e.fields["_src_seq"]) for e in merged[:3]] == [
        ("supervisor.jsonl", 0), ("broker-a.jsonl", 0), ("client.jsonl", 0)]
    # Order inside each source is kept exactly.
    for name, source in [("broker-a.jsonl", broker), ("supervisor.jsonl", supervisor)]:
        assert [e.fields["_src_seq"] for e in merged if e.fields["_src"] == name] == [e.seq for e in source]
    assert merge_traces([broker, supervisor, client])[0].fields["_src"] == "1"
    with pytest.raises(ValueError, match="already a merged event"):
        merge_traces([merged])
    with pytest.raises(ValueError, match="distinct"):
        merge_traces([broker, client], sources=["x", "x"])


def test_merged_trace_round_trips_through_files(tmp_path):
    a, clock_a = new_tracer()
    b, clock_b = new_tracer()
    sample_run(a, clock_a)
    clock_b.advance(2)
    b.emit("broker-b", "node.start", component="broker")
    merged = merge_traces([a.events, b.events], sources=["a", "b"])
    write_jsonl(merged, tmp_path / "merged.jsonl", meta={"runtime": "real"})
    assert read_jsonl(tmp_path / "merged.jsonl") == merged


# --- client operations -------------------------------------------------------------------------

def test_client_ops_pairs_invokes_with_completions():
    tracer, clock = new_tracer()

    def op(node, type_, process, op_id, f="send", value=None, **extra):
        clock.advance(1)
        tracer.emit(node, "client", type=type_, process=process, f=f, op_id=op_id, value=value, **extra)

    op("client-1", "invoke", 0, 1, value="m1")
    op("client-1", "invoke", 1, 2, value="m2")
    op("client-2", "invoke", 0, 1, f="pull")           # same process and op_id, other client node
    tracer.emit("broker-a", "offset", which="written", value=10)  # other kinds are ignored
    op("client-1", "ok", 1, 2, value={"offset": 0})
    op("client-1", "info", 0, 1, error="timeout")
    op("client-2", "fail", 0, 1, f="pull", error="NO_PERMISSION")
    op("client-1", "invoke", 0, 3, value="m3")          # never completes: the client was killed
    op("client-1", "invoke", 1, 2, value="m4")          # op_id reused after completion
    op("client-1", "ok", 1, 2, value={"offset": 1})

    ops = client_ops(tracer.events)
    summary = [(o.node, o.process, o.op_id, o.f, o.type, o.invoke_value, o.value, o.error, o.indeterminate)
               for o in ops]
    assert summary == [
        ("client-1", 0, 1, "send", "info", "m1", None, "timeout", True),
        ("client-1", 1, 2, "send", "ok", "m2", {"offset": 0}, None, False),
        ("client-2", 0, 1, "pull", "fail", None, None, "NO_PERMISSION", False),
        ("client-1", 0, 3, "send", "info", "m3", None, None, True),
        ("client-1", 1, 2, "send", "ok", "m4", {"offset": 1}, None, False),
    ]
    assert (ops[0].invoke_time_ms, ops[0].complete_time_ms) == (1.0, 5.0)
    assert (ops[3].complete_time_ms, ops[3].complete_seq) == (None, None)
    assert ops[1].invoke_seq == 1 and ops[1].complete_seq == 4


@pytest.mark.parametrize(
    "events, message",
    [
        ([("ok", 0, 1, "send")], r"client-1 seq 0 \(process 0, op_id 1\): ok without a pending invoke"),
        ([("invoke", 0, 1, "send"), ("invoke", 0, 1, "send")], r"seq 1 .*invoked again"),
        ([("invoke", 0, 1, "send"), ("ok", 0, 1, "pull")], r"completes f='pull' but was invoked as f='send'"),
    ],
)
def test_client_ops_rejects_inconsistent_histories(events, message):
    trace = [TraceEvent(i, float(i), "client-1", "client",
                        {"type": t, "process": p, "op_id": o, "f": f, "value": None})
             for i, (t, p, o, f) in enumerate(events)]
    with pytest.raises(ValueError, match=message):
        client_ops(trace)


def test_client_ops_checks_events_read_from_files():
    bad = TraceEvent(0, 0.0, "client-1", "client", {"type": "invoke", "process": 0, "f": "send", "value": None})
    with pytest.raises(ValueError, match=r"client-1 seq 0: .*missing required field 'op_id'"):
        client_ops([bad])


def test_client_ops_across_incarnations_and_merged_files():
    # Each incarnation of a process numbers its ops from 1; what a killed one left pending stays
    # indeterminate. Merged traces carry _src/_src_seq, which are not checked against the catalog.
    first, second = new_tracer()[0], new_tracer()[0]
    for tracer, incarnation in ((first, 0), (second, 1)):
        tracer.emit("producer", "node.start", component="client", incarnation=incarnation)
        tracer.emit("producer", "client", type="invoke", process=0, f="send", op_id=1, value=f"m{incarnation}")
    second.emit("producer", "client", type="ok", process=0, f="send", op_id=1, value={"offset": 0})
    merged = merge_traces([first.events, second.events], sources=["producer.0.jsonl", "producer.1.jsonl"])
    ops = client_ops(merged)
    assert [(o.op_id, o.incarnation, o.invoke_value, o.type, o.complete_time_ms is None) for o in ops] == [
        (1, 0, "m0", "info", True), (1, 1, "m1", "ok", False)]


# --- subscribers -------------------------------------------------------------------------------

def test_subscribers_receive_events_until_they_unsubscribe():
    tracer, _ = new_tracer()
    seen_a, seen_b = [], []
    tracer.emit("broker-a", "node.start", component="broker")
    unsubscribe_a = tracer.subscribe(seen_a.append)
    tracer.subscribe(seen_b.append, replay=True)
    second = tracer.emit("broker-a", "offset", which="written", value=1)
    unsubscribe_a()
    unsubscribe_a()  # harmless
    third = tracer.emit("broker-a", "offset", which="written", value=2)
    assert seen_a == [second]
    assert seen_b == tracer.events == [tracer.events[0], second, third]


def test_events_emitted_by_a_subscriber_arrive_in_seq_order():
    tracer, _ = new_tracer()
    seen_first, seen_second = [], []

    def checker(event):
        seen_first.append(event.seq)
        if event.kind == "offset" and event.fields["value"] < 0:
            tracer.emit("checker", "log", level="ERROR", message="negative offset")

    tracer.subscribe(checker)
    tracer.subscribe(lambda e: seen_second.append(e.seq))
    tracer.emit("broker-a", "offset", which="written", value=-1)
    assert seen_first == seen_second == [0, 1]
    assert tracer.events[1].kind == "log"


def test_a_failing_subscriber_does_not_starve_the_others():
    tracer, _ = new_tracer()
    seen = []

    def broken(event):
        raise RuntimeError("widget bug")

    tracer.subscribe(broken)
    tracer.subscribe(seen.append)
    with pytest.raises(RuntimeError, match="widget bug"):
        tracer.emit("broker-a", "node.start", component="broker")
    assert seen == tracer.events and len(seen) == 1


def test_concurrent_emits_keep_file_memory_and_subscribers_in_seq_order(tmp_path):
    tracer = Tracer(lambda: 0.0, jsonl_path=tmp_path / "threads.jsonl")
    seen = []
    tracer.subscribe(lambda e: seen.append(e.seq))

    def worker(n):
        for i in range(200):
            tracer.emit(f"client-{n}", "offset", which="written", value=i)

    threads = [threading.Thread(target=worker, args=(n,)) for n in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    tracer.close()
    assert [e.seq for e in tracer.events] == seen == list(range(800))
    assert read_jsonl(tmp_path / "threads.jsonl") == tracer.events


# --- catalog and documentation -----------------------------------------------------------------

def test_catalog_covers_the_issue_kinds():
    expected = {"node.start", "node.stop", "node.kill", "node.crash", "node.restart", "node.suspend",
                "node.resume", "fault.partition", "fault.heal", "fault.loss", "fault.delay", "fault.clock",
                "net.connect", "net.accept", "net.close", "frame.send", "frame.recv", "role", "state", "epoch",
                "offset", "client", "raft", "log"}
    assert expected <= set(KINDS)


def test_readme_embeds_the_catalog_exactly():
    text = DATASETS_README.read_text(encoding="utf-8")
    match = re.search(r"<!-- trace-kinds:begin -->\n(.*)<!-- trace-kinds:end -->", text, re.S)
    assert match, "datasets/README.md lost its trace-kinds markers"
    assert match.group(1) == catalog_markdown(), (
        "datasets/README.md is out of date: replace the part between the trace-kinds markers with "
        "the output of `.venv/bin/python -m rmqlab.trace catalog`")


def test_readme_example_lines_are_what_rmqlab_writes(tmp_path):
    text = DATASETS_README.read_text(encoding="utf-8")
    example = re.search(r'```\n(\{"meta".*?)```', text, re.S).group(1).splitlines()
    clock = ManualClock(start_ms=0)
    path = tmp_path / "example.jsonl"
    with Tracer(clock, jsonl_path=path, meta={"seed": 7, "runtime": "sim", "scenario": "failover"}) as tracer:
        tracer.emit("broker-a", "node.start", component="broker")
        clock.advance(5)
        tracer.emit("broker-a", "role", from_=None, to="MASTER", epoch=1)
    assert path.read_text(encoding="utf-8").splitlines() == example


def test_readme_reading_recipes_work_without_rmqlab(tmp_path):
    """The stdlib + pyarrow snippets in datasets/README.md read both formats and reproduce the hash."""
    text = DATASETS_README.read_text(encoding="utf-8")
    section = text.split("### Reading a trace without rmqlab", 1)[1].split("\n### ", 1)[0]
    jsonl_recipe, parquet_recipe, hash_recipe = re.findall(r"```python\n(.*?)```", section, re.S)
    tracer, clock = new_tracer()
    sample_run(tracer, clock)
    meta = {"seed": 7, "runtime": "sim"}
    write_jsonl(tracer.events, tmp_path / "t.jsonl", meta=meta)
    with open(tmp_path / "t.jsonl", "ab") as f:
        f.write(b'{"fields":{"lev')  # a torn tail the recipe must survive
    write_parquet(tracer.events, tmp_path / "t.parquet", metadata=meta)
    expected = [e.to_record() for e in tracer.events]
    for recipe, variable, path in [(jsonl_recipe, "jsonl_path", "t.jsonl"), (parquet_recipe, "parquet_path", "t.parquet")]:
        namespace = {variable: str(tmp_path / path)}
        exec(recipe, namespace)
        assert namespace["meta"] == meta and namespace["events"] == expected
        exec(hash_recipe, namespace)
        assert namespace["trace_hash"] == trace_hash(tracer.events)


def test_trace_modules_do_not_read_time_randomness_or_sockets():
    banned = {"time", "random", "socket", "datetime"}
    for path in sorted((REPO / "rmqlab" / "trace").glob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            names = []
            if isinstance(node, ast.Import):
                names = [a.name.split(".")[0] for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module:
                names = [node.module.split(".")[0]]
            assert not banned & set(names), f"{path.name} imports {banned & set(names)}"


@pytest.mark.real
def test_hash_tool_prints_the_hash_of_both_formats(tmp_path):
    tracer, clock = new_tracer()
    sample_run(tracer, clock)
    write_jsonl(tracer.events, tmp_path / "t.jsonl")
    write_parquet(tracer.events, tmp_path / "t.parquet")
    done = subprocess.run([sys.executable, "-m", "rmqlab.trace", "hash", str(tmp_path / "t.jsonl"),
                           str(tmp_path / "t.parquet")], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert [line.split()[0] for line in done.stdout.splitlines()] == [trace_hash(tracer.events)] * 2


# -- the trusted emit path of rmqlab's own hot emitters (remoting frames) ------------------------

def test_emit_trusted_records_the_same_event_and_bytes_as_emit():
    fields = {"proto": "remoting", "peer": "127.0.0.1:10911", "size": 1456, "code": 310, "name": "SEND_MESSAGE_V2",
              "opaque": 7, "flag": 0, "remark": None, "body_size": 1024,
              "ext_fields": {"b": "TopicTest", "a": "PID", "i": "UNIQ_KEY\x01AB\x02"}}
    lines = []
    for trusted in (False, True):
        tracer, _ = new_tracer()
        if trusted:
            event = tracer.emit_trusted("producer", "frame.send", dict(fields, ext_fields=dict(fields["ext_fields"])))
        else:
            event = tracer.emit("producer", "frame.send", **fields)
        lines.append(dumps_event(event))
        assert event.fields == fields
    assert lines[0] == lines[1]


@pytest.mark.parametrize("fields", [
    {"proto": "remoting", "peer": "p", "size": (1,)},                  # a tuple where emit stores a list
    {"proto": "remoting", "peer": "p", "size": 1, "_x": 1},            # a reserved name
    {"proto": "remoting", "peer": "p"},                                # a required field missing
    {"proto": "remoting", "peer": "p", "size": 1, "ext_fields": {"a": b"x"}},  # bytes
])
def test_emit_trusted_in_debug_mode_checks_as_emit_does(fields):
    tracer = Tracer(ManualClock(), debug=True)
    with pytest.raises(ValueError):
        tracer.emit_trusted("n", "frame.send", fields)


def test_debug_mode_from_the_environment(monkeypatch):
    monkeypatch.setenv("RMQLAB_TRACE_DEBUG", "1")
    assert Tracer(ManualClock()).debug
    monkeypatch.setenv("RMQLAB_TRACE_DEBUG", "0")
    assert not Tracer(ManualClock()).debug
    assert Tracer(ManualClock(), debug=True).debug


def _remoting_sim_trace(seed: int):
    """A simulated remoting exchange with odd values on both sides (non-ASCII extFields and
    remark, typed ext values, a processor that changes the request's extFields)."""
    from rmqlab.remoting import RemotingClient, RemotingCommand, RemotingServer
    from rmqlab.runtime.component import Component
    from rmqlab.runtime.sim import Simulation

    class Server(Component):
        component_type = "namesrv"

        async def start(self, node):
            self.server = RemotingServer(node, "127.0.0.1", 9876)

            async def answer(channel, request):
                request.ext_fields["touched"] = "yes"  # must not reach the frame.recv event
                return RemotingCommand.create_response_command(0, "fertig ✓", {"echo": request.ext_fields.get("t")})

            self.server.register_processor(105, answer)
            await self.server.start()

    class Idle(Component):
        async def start(self, node):
            pass

    sim = Simulation(seed=seed)
    sim.add_node("namesrv", Server)
    sim.add_node("client", Idle)
    sim.start_all()
    client = RemotingClient(sim.nodes["client"])
    for ext in ({"t": "plain", "n": 5, "b": True}, {"t": "tópico", "k": "\u2028"}):
        sim.run(client.invoke_sync("127.0.0.1:9876", RemotingCommand.create_request_command(105, ext), 3000))
    events = list(sim.tracer.events)
    sim.close()
    return events


def test_remoting_frames_are_the_same_with_and_without_the_trusted_path(monkeypatch):
    monkeypatch.setenv("RMQLAB_TRACE_DEBUG", "1")  # every frame through emit's checks
    checked = _remoting_sim_trace(5)
    monkeypatch.delenv("RMQLAB_TRACE_DEBUG")
    trusted = _remoting_sim_trace(5)
    assert [dumps_event(e) for e in checked] == [dumps_event(e) for e in trusted]
    recvs = [e.fields for e in trusted if e.kind == "frame.recv" and e.node == "namesrv"]
    assert len(recvs) == 2 and all("touched" not in f["ext_fields"] for f in recvs)
    assert recvs[1]["ext_fields"]["t"] == "tópico"
