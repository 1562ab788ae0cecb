"""Remoting round trips per second on loopback, beside a raw asyncio echo of the same frame bytes.

    .venv/bin/python bench/bench_remoting.py [--requests 20000] [--rounds 5] [--inflight 1,64]

One process, one event loop, the real runtime (RealNode, TCP on 127.0.0.1), one connection:

* remoting: a RemotingClient sends SEND_MESSAGE requests shaped like the C++ client's (12 header
  fields, a 256-byte body) to a RemotingServer whose processor answers with a SEND_MESSAGE-style
  response (msgId, queueId, queueOffset). Everything the layer does is measured: encoding, the
  frame decoder, JSON headers, a task per request, opaque matching, timers, and the four trace
  events of each round trip (frame.send and frame.recv on both nodes);
* remoting, trace off: the same with nodes whose tracer drops events unchecked, which separates
  the remoting layer's own cost from the trace's;
* raw: asyncio streams, no rmqlab code; the client keeps the same number of the same request
  frames in flight, the server reads each frame by its length prefix and writes it back.

With N in flight the client keeps N requests outstanding at all times (N workers calling
invoke_sync for remoting; a window of N for raw). Rounds alternate the three; the script prints
the median rate of each and the ratios to raw. Trace events are cleared between rounds so the
tracer's in-memory list does not grow across the run.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import struct
import sys
import tempfile
import time

from rmqlab.remoting import (RemotingClient, RemotingServer, RequestCode, ResponseCode, create_request_command,
                             create_response_command)
from rmqlab.runtime.real import RealNode
from rmqlab.trace import Tracer

BODY = bytes(range(256))


def make_request():
    return create_request_command(RequestCode.SEND_MESSAGE, {
        "producerGroup": "PID_BENCH", "topic": "BenchTopic", "defaultTopic": "TBW102", "defaultTopicQueueNums": 4,
        "queueId": 1, "sysFlag": 0, "bornTimestamp": 1_700_000_000_000, "flag": 0,
        "properties": "KEYS\x01k1\x02TAGS\x01TagA\x02WAIT\x01true\x02", "reconsumeTimes": 0, "unitMode": False,
        "batch": False}, body=BODY)


async def send_message(channel, request):
    return create_response_command(ResponseCode.SUCCESS, None, {
        "msgId": "7F00000100002A9F0000000000000000", "queueId": request.ext_int("queueId"), "queueOffset": 42})


async def remoting_round(server_node, client_node, addr: str, requests: int, inflight: int) -> float:
    client = RemotingClient(client_node)
    await client.invoke_sync(addr, make_request(), 5000)  # connect outside the timed part
    remaining = requests

    async def worker():
        nonlocal remaining
        while remaining > 0:
            remaining -= 1
            response = await client.invoke_sync(addr, make_request(), 5000)
            assert response.code == ResponseCode.SUCCESS

    t0 = time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(inflight)))
    elapsed = time.perf_counter() - t0
    await client.shutdown()
    server_node.tracer.events.clear()
    client_node.tracer.events.clear()
    return elapsed


async def raw_echo_server(reader, writer):
    try:
        while True:
            prefix = await reader.readexactly(4)
            data = await reader.readexactly(struct.unpack(">i", prefix)[0])
            writer.write(prefix + data)
            await writer.drain()
    except (asyncio.IncompleteReadError, ConnectionError):
        writer.close()


async def raw_round(port: int, frame: bytes, requests: int, inflight: int) -> float:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    t0 = time.perf_counter()
    sent = min(inflight, requests)
    writer.write(frame * sent)
    received = 0
    while received < requests:
        prefix = await reader.readexactly(4)
        echoed = await reader.readexactly(struct.unpack(">i", prefix)[0])
        assert len(echoed) + 4 == len(frame)
        received += 1
        if sent < requests:
            writer.write(frame)
            sent += 1
            await writer.drain()
    elapsed = time.perf_counter() - t0
    writer.close()
    await writer.wait_closed()
    return elapsed


class _DroppingTracer(Tracer):
    """Accepts every event and keeps none (the "trace off" measurement)."""

    def emit(self, node, kind, /, **fields):
        return None


async def start_pair(tmp: str, traced: bool):
    tracer = (lambda: None) if traced else (lambda: _DroppingTracer(time.time))
    server_node = RealNode("server", tmp, tracer=tracer())
    client_node = RealNode("client", tmp, tracer=tracer())
    server = RemotingServer(server_node, "127.0.0.1", 0)
    server.register_processor(RequestCode.SEND_MESSAGE, send_message)
    await server.start()
    return server, server_node, client_node


async def run(requests: int, rounds: int, inflights: list[int]) -> dict[int, tuple[float, float, float]]:
    tmp = tempfile.mkdtemp(prefix="rmqlab-bench-")
    pairs = [await start_pair(tmp, traced) for traced in (True, False)]
    raw_server = await asyncio.start_server(raw_echo_server, "127.0.0.1", 0)
    raw_port = raw_server.sockets[0].getsockname()[1]
    frame = make_request().encode()
    results = {}
    for inflight in inflights:
        times: list[list[float]] = [[], [], []]
        for _ in range(rounds):
            for i, (server, server_node, client_node) in enumerate(pairs):
                addr = f"127.0.0.1:{server.port}"
                times[i].append(await remoting_round(server_node, client_node, addr, requests, inflight))
            times[2].append(await raw_round(raw_port, frame, requests, inflight))
        results[inflight] = tuple(requests / statistics.median(t) for t in times)
    raw_server.close()
    for server, server_node, client_node in pairs:
        await server.shutdown()
        await client_node.close()
        await server_node.close()
    return results


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--requests", type=int, default=20_000, help="round trips per round")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--inflight", default="1,64", help="comma-separated in-flight counts")
    args = ap.parse_args(argv)
    inflights = [int(x) for x in args.inflight.split(",")]
    results = asyncio.run(run(args.requests, args.rounds, inflights))
    request_size = len(make_request().encode())
    print(f"python {sys.version.split()[0]}, {args.requests} round trips x {args.rounds} rounds, one connection, "
          f"request frame {request_size} bytes")
    for inflight, (traced, untraced, raw) in results.items():
        print(f"in flight {inflight:>3}: remoting {traced:>8,.0f} rt/s ({traced / raw:5.1%} of raw)   "
              f"trace off {untraced:>8,.0f} rt/s ({untraced / raw:5.1%})   raw asyncio echo {raw:>8,.0f} rt/s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
