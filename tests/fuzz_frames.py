"""Seeded mutations of valid remoting frames, and the client side of a fuzz campaign against a
real name server and broker (used by tests/test_fuzz_servers.py and bench/bench_fuzz_servers.py).

The seeds are the requests real clients and brokers send (a producer's SEND_MESSAGE_V2, a
consumer's PULL_MESSAGE and HEART_BEAT, a broker's REGISTER_BROKER, ...); each mutation starts
from one of them and changes its bytes, its JSON header or its values. Everything is decided by
``random.Random(seed)``, so a campaign is repeatable.
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import struct
import time

from rmqlab.remoting.remoting_command import RemotingCommand

_NOW = 1_700_000_000_000


def _topic_config(name: str) -> dict:
    return {"order": False, "perm": 6, "readQueueNums": 4, "topicFilterType": "SINGLE_TAG", "topicName": name,
            "topicSysFlag": 0, "writeQueueNums": 4}


def register_broker_request(cluster: str, broker_name: str, broker_addr: str, broker_id: int = 0,
                            topics: tuple[str, ...] = ("FuzzTopic", "FuzzTopic2")) -> RemotingCommand:
    body = json.dumps({"filterServerList": [], "topicConfigSerializeWrapper": {
        "dataVersion": {"counter": 1, "stateVersion": 0, "timestamp": _NOW},
        "topicConfigTable": {t: _topic_config(t) for t in topics}}}).encode()
    cmd = RemotingCommand.create_request_command(103, {
        "brokerAddr": broker_addr, "brokerId": str(broker_id), "brokerName": broker_name, "bodyCrc32": "0",
        "clusterName": cluster, "compressed": "false", "enableActingMaster": "false",
        "haServerAddr": broker_addr, "heartbeatTimeoutMillis": "120000"}, body)
    cmd.version = 453
    return cmd


def _heartbeat_body(client: str, group: str, topic: str) -> bytes:
    return json.dumps({"clientID": client, "consumerDataSet": [{
        "consumeFromWhere": "CONSUME_FROM_LAST_OFFSET", "consumeType": "CONSUME_PASSIVELY",
        "groupName": group, "messageModel": "CLUSTERING", "subscriptionDataSet": [{
            "classFilterMode": False, "codeSet": [], "expressionType": "TAG", "subString": "*",
            "subVersion": _NOW, "tagsSet": [], "topic": topic}], "unitMode": False}],
        "producerDataSet": [{"groupName": "FuzzProducer"}]}).encode()


def namesrv_seeds() -> list[RemotingCommand]:
    """What brokers, clients and admin tools send a name server."""
    c = RemotingCommand.create_request_command
    return [
        c(105, {"topic": "FuzzTopic"}),
        c(106),
        register_broker_request("FuzzCluster", "fuzz-broker", "127.0.0.1:1"),
        c(322, {"brokerAddr": "127.0.0.1:1", "brokerId": "0", "brokerName": "fuzz-broker",
                "clusterName": "FuzzCluster"},
          json.dumps({"counter": 1, "stateVersion": 0, "timestamp": _NOW}).encode()),
        c(904, {"brokerAddr": "127.0.0.1:1", "brokerName": "fuzz-broker", "clusterName": "FuzzCluster"}),
        c(104, {"brokerAddr": "127.0.0.1:1", "brokerId": "0", "brokerName": "fuzz-broker",
                "clusterName": "FuzzCluster"}),
        c(327, {"brokerName": "fuzz-broker"}),
    ]


def broker_seeds() -> list[RemotingCommand]:
    """What producers and consumers send a broker."""
    c = RemotingCommand.create_request_command
    props = "KEYS\u0001k1\u0002UNIQ_KEY\u0001AC1100010000\u0002WAIT\u0001true\u0002"
    return [
        c(310, {"a": "FuzzProducer", "b": "FuzzTopic", "c": "TBW102", "d": "4", "e": "0", "f": "0",
                "g": str(_NOW), "h": "0", "i": props, "j": "0", "k": "false", "m": "false"}, b"hello fuzz"),
        c(10, {"producerGroup": "FuzzProducer", "topic": "FuzzTopic", "defaultTopic": "TBW102",
               "defaultTopicQueueNums": "4", "queueId": "1", "sysFlag": "0", "bornTimestamp": str(_NOW),
               "flag": "0", "properties": props, "reconsumeTimes": "0", "unitMode": "false", "batch": "false"},
          b"hello"),
        c(11, {"consumerGroup": "FuzzGroup", "topic": "FuzzTopic", "queueId": "0", "queueOffset": "0",
               "maxMsgNums": "32", "sysFlag": "2", "commitOffset": "0", "suspendTimeoutMillis": "0",
               "subscription": "*", "subVersion": "0", "expressionType": "TAG"}),
        c(34, None, _heartbeat_body("127.0.0.1@fuzz", "FuzzGroup", "FuzzTopic")),
        c(14, {"consumerGroup": "FuzzGroup", "topic": "FuzzTopic", "queueId": "0"}),
        c(15, {"consumerGroup": "FuzzGroup", "topic": "FuzzTopic", "queueId": "0", "commitOffset": "1"}),
        c(38, {"consumerGroup": "FuzzGroup"}),
        c(30, {"topic": "FuzzTopic", "queueId": "0"}),
        c(31, {"topic": "FuzzTopic", "queueId": "0"}),
        c(35, {"clientID": "127.0.0.1@fuzz", "producerGroup": "FuzzProducer", "consumerGroup": "FuzzGroup"}),
        c(36, {"offset": "0", "group": "FuzzGroup", "delayLevel": "1", "originMsgId": "00", "originTopic":
               "FuzzTopic", "unitMode": "false", "maxReconsumeTimes": "16"}),
    ]


_WEIRD = ["", " ", "-1", "2147483648", "9223372036854775808", "1e309", "NaN", "true", "null", "%RETRY%x",
          "a/b", "../../etc", "\u0000", "\u00e9\u4e2d", "\U0001f600", "0x10", "1.5", "[]", "{}", "TBW102",
          "rmq_sys_x", "SCHEDULE_TOPIC_XXXX", "127.0.0.1:0", "x" * 300]


def _frame(header: bytes, body: bytes | None) -> bytes:
    body = body or b""
    return struct.pack(">ii", 4 + len(header) + len(body), len(header)) + header + body


def _header_json(cmd: RemotingCommand) -> dict:
    frame = cmd.encode()
    hlen = struct.unpack_from(">i", frame, 4)[0] & 0xFFFFFF
    return json.loads(frame[8:8 + hlen])


def mutate(rng: random.Random, seed: RemotingCommand) -> bytes:
    """One mutated frame from ``seed`` (length prefix included)."""
    kind = rng.randrange(10)
    if kind <= 2:  # byte-level: flip, insert, delete, in the header or the body
        data = bytearray(seed.encode())
        for _ in range(rng.randint(1, 8)):
            op = rng.randrange(3)
            pos = rng.randrange(4 if rng.random() < 0.8 else 0, len(data)) if len(data) > 4 else 0
            if op == 0 and pos < len(data):
                data[pos] ^= 1 << rng.randrange(8)
            elif op == 1:
                data[pos:pos] = bytes(rng.randrange(256) for _ in range(rng.randint(1, 4)))
            elif pos < len(data):
                del data[pos]
        if rng.random() < 0.7 and len(data) >= 4:  # mostly keep the frame boundaries right
            struct.pack_into(">i", data, 0, len(data) - 4)
        return bytes(data)
    header = _header_json(seed)
    ext = dict(header.get("extFields") or {})
    body = seed.body
    if kind <= 6:  # value-level: weird, long, typed or removed values
        for _ in range(rng.randint(1, 3)):
            choice = rng.randrange(6)
            key = rng.choice(list(ext)) if ext else "x"
            if choice == 0:
                ext[key] = rng.choice(_WEIRD)
            elif choice == 1:
                ext[key] = rng.choice("abc%|_-\u00e9") * rng.choice((128, 256, 4096, 70_000))
            elif choice == 2:
                ext[key] = rng.choice([0, -1, 2 ** 31, 2 ** 63, True, None, 1.5, [1], {"a": 1}])
            elif choice == 3:
                ext.pop(key, None)
            elif choice == 4:
                header[rng.choice(["code", "flag", "opaque", "version", "language", "remark"])] = \
                    rng.choice([None, -1, 2 ** 40, "x", [], {}, 1.5, True])
            else:
                ext[f"k{rng.randrange(1000)}"] = "v" * rng.randrange(50)
        header["extFields"] = ext
        if body is not None and rng.random() < 0.3:
            body = _mutate_json_body(rng, body)
        return _frame(json.dumps(header).encode(), body)
    if kind == 7:  # structure: deep nesting in the header or the body, wrong types
        depth = rng.choice((50, 500, 5_000, 100_000))
        nested = "[" * depth + "]" * depth
        if rng.random() < 0.5:
            text = json.dumps(header)[:-1] + ',"deep":' + nested + "}"
            return _frame(text.encode(), body)
        return _frame(json.dumps(header).encode(), ('{"a":' + nested + "}").encode())
    if kind == 8:  # the body only
        return _frame(json.dumps(header).encode(), _mutate_json_body(rng, body or b"{}"))
    # framing: truncated, zero-length, header length beyond the frame, odd serialize types
    data = bytearray(seed.encode())
    op = rng.randrange(4)
    if op == 0:
        return bytes(data[:rng.randrange(1, len(data))])
    if op == 1:
        struct.pack_into(">i", data, 4, rng.choice([0x7FFFFFFF, len(data), 0x01000000 | 4, 0x02000010]))
        return bytes(data)
    if op == 2:
        return struct.pack(">i", rng.choice([0, 1, 3, -1, -2 ** 31]))
    return bytes(data) * rng.randint(2, 5)


def _mutate_json_body(rng: random.Random, body: bytes) -> bytes:
    try:
        obj = json.loads(body)
    except ValueError:
        return bytes(b ^ 0xFF if rng.random() < 0.05 else b for b in body)

    def walk(value, depth=0):
        if isinstance(value, dict):
            out = {}
            for k, v in value.items():
                if rng.random() < 0.15:
                    k = rng.choice(_WEIRD) if rng.random() < 0.5 else k * rng.choice((2, 100, 2000))
                out[k] = walk(v, depth + 1)
            return out
        if isinstance(value, list):
            return [walk(v, depth + 1) for v in value] * (rng.choice((1, 1, 1, 50)))
        if rng.random() < 0.2:
            return rng.choice([None, -1, 2 ** 63, "", "x" * 5000, [], {}, 1.5, True] + _WEIRD)
        return value

    return json.dumps(walk(obj)).encode()


async def send_frames(port: int, frames: list[bytes], connections: int = 8, host: str = "127.0.0.1") -> int:
    """Send ``frames`` over ``connections`` parallel connections, reading whatever comes back, and
    reconnecting when the server closes one (as a bad frame makes it do); returns the reconnects."""
    reconnects = 0
    share = [frames[i::connections] for i in range(connections)]

    async def worker(mine: list[bytes]) -> None:
        nonlocal reconnects
        reader = writer = None
        drain_task = None

        async def drain(r: asyncio.StreamReader) -> None:
            try:
                while await r.read(65536):
                    pass
            except (ConnectionError, OSError):
                pass

        for i, frame in enumerate(mine):
            if writer is None or writer.is_closing() or (drain_task is not None and drain_task.done()):
                if writer is not None:
                    writer.close()
                    reconnects += 1
                reader, writer = await asyncio.open_connection(host, port)
                drain_task = asyncio.ensure_future(drain(reader))
            try:
                writer.write(frame)
                if i % 16 == 0:
                    await asyncio.wait_for(writer.drain(), 10)
            except (TimeoutError, ConnectionError, OSError):
                writer.close()
                writer = None
        if writer is not None:
            writer.close()
            await asyncio.sleep(0)
        if drain_task is not None:
            drain_task.cancel()

    await asyncio.gather(*(worker(m) for m in share))
    return reconnects


def rss_kib(pid: int) -> int:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    raise RuntimeError("no VmRSS")


def log_census(logs_dir: str) -> dict[str, int]:
    """Bytes, ERROR lines and tracebacks across every log file under ``logs_dir``."""
    total = errors = tracebacks = 0
    for root, _dirs, files in os.walk(logs_dir):
        for name in files:
            path = os.path.join(root, name)
            total += os.path.getsize(path)
            with open(path, errors="replace") as f:
                for line in f:
                    if " ERROR " in line:
                        errors += 1
                    if line.startswith("Traceback (most recent call last)"):
                        tracebacks += 1
    return {"bytes": total, "errors": errors, "tracebacks": tracebacks}


def campaign_frames(rng: random.Random, seeds: list[RemotingCommand], n: int) -> list[bytes]:
    return [mutate(rng, rng.choice(seeds)) for _ in range(n)]


def now_s() -> float:
    return time.monotonic()


async def request_on_new_connection(port: int, cmd: RemotingCommand, timeout_s: float = 20) -> RemotingCommand:
    """One request on a fresh connection, its response decoded (bounded wait)."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        cmd.opaque = 7
        writer.write(cmd.encode())
        while True:
            length = struct.unpack(">i", await asyncio.wait_for(reader.readexactly(4), timeout_s))[0]
            response = RemotingCommand.decode(await asyncio.wait_for(reader.readexactly(length), timeout_s))
            if response.is_response_type() and response.opaque == 7:
                return response
    finally:
        writer.close()
