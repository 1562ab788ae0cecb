"""A real name server and broker (`rmqlab namesrv`, `rmqlab broker` processes on 127.0.0.1) under
abusive clients: seeded mutations of the frames real clients send, and the targeted abuses a
fuzzer finds first. After each the servers must be alive and answer a real request, keep no junk
registration, close idle connections, bound their memory and their logs, and log no traceback.

The servers run with a short idle timeout (serverChannelMaxIdleTimeSeconds: 2 s for the name
server, 8 s for the broker) so the idle checks take seconds. Memory bounds are generous (RSS is not a precise measure); nothing
here is timed. bench/bench_fuzz_servers.py runs the same campaign at 1,000,000 frames. The last
test runs the idle timeout on the simulator: deterministic, in virtual time.
"""

from __future__ import annotations

import asyncio
import os
import random
import select
import socket
import struct
import subprocess
import sys

import pytest

from tests.fuzz_frames import (broker_seeds, campaign_frames, log_census, namesrv_seeds, register_broker_request,
                               rss_kib, send_frames)
from tests.process_helpers import stop

from rmqlab.remoting import RemotingClient, RemotingServer
from rmqlab.remoting.frame_decoder import FRAME_MAX_LENGTH
from rmqlab.remoting.protocol.body.cluster_info import ClusterInfo
from rmqlab.remoting.remoting_command import RemotingCommand
from rmqlab.remoting.response_code import ResponseCode
from rmqlab.runtime.component import Component
from rmqlab.runtime.sim import Simulation
from rmqlab.trace import trace_hash
from tests.fuzz_frames import request_on_new_connection

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
IDLE_S = 2
BROKER_IDLE_S = 8   # the broker's: longer than the budget test needs to fill and hold its frames


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _boot(argv: list[str], env: dict, cwd) -> subprocess.Popen:
    proc = subprocess.Popen([sys.executable, "-m", "rmqlab.cli", *argv], env=env, cwd=str(cwd),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    ready, _, _ = select.select([proc.stdout], [], [], 60)  # bounded: a hung start fails the test
    line = proc.stdout.readline() if ready else ""
    if "boot success" not in line:
        stop(proc)
        pytest.fail(f"{argv[0]} did not start: {line!r} {proc.stderr.read()}")
    return proc


class Servers:
    def __init__(self, tmp):
        self.tmp = tmp
        self.ns_port, self.broker_port = free_port(), free_port()
        env = {k: v for k, v in os.environ.items() if not k.startswith("RMQLAB_") and k != "NAMESRV_ADDR"}
        env["HOME"] = str(tmp / "home")
        env["PYTHONPATH"] = os.pathsep.join(p for p in (ROOT, os.environ.get("PYTHONPATH")) if p)
        (tmp / "namesrv.properties").write_text(f"listenPort={self.ns_port}\n"
                                                f"serverChannelMaxIdleTimeSeconds={IDLE_S}\n")
        (tmp / "broker.properties").write_text(
            f"brokerName=broker-f\nlistenPort={self.broker_port}\nhaListenPort={free_port()}\n"
            f"brokerIP1=127.0.0.1\nnamesrvAddr=127.0.0.1:{self.ns_port}\nstorePathRootDir={tmp}/store\n"
            f"serverChannelMaxIdleTimeSeconds={BROKER_IDLE_S}\n")
        self.logs_dir = str(tmp / "home" / "logs" / "rmqlab")
        self.namesrv = _boot(["namesrv", "-c", str(tmp / "namesrv.properties")], env, tmp)
        try:
            self.broker = _boot(["broker", "-c", str(tmp / "broker.properties")], env, tmp)
        except BaseException:
            stop(self.namesrv)
            raise

    def stop(self) -> None:
        for proc in (self.broker, self.namesrv):
            stop(proc)

    def alive(self) -> None:
        assert self.namesrv.poll() is None and self.broker.poll() is None


@pytest.fixture(scope="module")
def servers(tmp_path_factory):
    s = Servers(tmp_path_factory.mktemp("fuzz"))
    try:
        yield s
    finally:
        s.stop()


def request(port: int, cmd: RemotingCommand) -> RemotingCommand:
    return asyncio.run(request_on_new_connection(port, cmd))


def registered(servers: Servers) -> tuple[set[str], set[str]]:
    """The clusters and broker groups the name server holds (GET_BROKER_CLUSTER_INFO)."""
    response = request(servers.ns_port, RemotingCommand.create_request_command(106))
    assert response.code == ResponseCode.SUCCESS, response
    info = ClusterInfo.decode(response.body)
    return set(info.cluster_addr_table), set(info.broker_addr_table)


# The real broker registers every 30 s, and a 2 s idle timeout closes its connection in between
# (which unregisters it): the only registration the name server may hold is the broker's own.
REAL = ({"DefaultCluster"}, {"broker-f"})


def no_junk(servers: Servers) -> bool:
    clusters, groups = registered(servers)
    return clusters <= REAL[0] and groups <= REAL[1]


def assert_serving(servers: Servers) -> None:
    """Alive, and each answers requests real clients and tools send: the name server its cluster
    info and a route query (found or not), the broker GET_MAX_OFFSET of its own topic."""
    servers.alive()
    registered(servers)
    response = request(servers.ns_port, RemotingCommand.create_request_command(105, {"topic": "broker-f"}))
    assert response.code in (ResponseCode.SUCCESS, ResponseCode.TOPIC_NOT_EXIST), response
    response = request(servers.broker_port, RemotingCommand.create_request_command(30, {"topic": "broker-f",
                                                                                        "queueId": "0"}))
    assert response.code == ResponseCode.SUCCESS, response


@pytest.mark.real
def test_junk_registrations_are_refused_with_invalid_parameter(servers):
    long_name = "c" * 70_000
    for cmd, what in ((register_broker_request(long_name, "b1", "127.0.0.1:1"), "clusterName"),
                      (register_broker_request("C", "a b", "127.0.0.1:1"), "brokerName"),
                      (register_broker_request("C", "b1", "127.0.0.1:99999"), "brokerAddr"),
                      (register_broker_request("C", "b1", "127.0.0.1:1", topics=("T", "T2", "bad topic")), "topic")):
        response = request(servers.ns_port, cmd)
        assert response.code == ResponseCode.INVALID_PARAMETER, response
        assert what in response.remark and len(response.remark) < 400
    assert no_junk(servers)


@pytest.mark.real
def test_a_closed_connection_takes_every_registration_made_over_it(servers):
    async def register_three_then_close() -> list[int]:
        reader, writer = await asyncio.open_connection("127.0.0.1", servers.ns_port)
        codes = []
        for i in range(3):
            cmd = register_broker_request("JunkCluster", f"junk-{i}", f"127.0.0.1:{i + 1}")
            cmd.opaque = i
            writer.write(cmd.encode())
            length = struct.unpack(">i", await asyncio.wait_for(reader.readexactly(4), 20))[0]
            codes.append(RemotingCommand.decode(await asyncio.wait_for(reader.readexactly(length), 20)).code)
        response = await request_on_new_connection(servers.ns_port, RemotingCommand.create_request_command(106))
        assert "JunkCluster" in ClusterInfo.decode(response.body).cluster_addr_table
        writer.close()
        await writer.wait_closed()
        return codes

    assert asyncio.run(register_three_then_close()) == [ResponseCode.SUCCESS] * 3
    # The close is handled on the server's next loop iterations; a request after it is ordered after.
    for _ in range(50):
        if no_junk(servers):
            break
    assert no_junk(servers), registered(servers)


@pytest.mark.real
def test_deep_json_gets_one_line_and_no_traceback(servers):
    before = log_census(servers.logs_dir)
    deep = "[" * 100_000 + "]" * 100_000
    heartbeat = RemotingCommand.create_request_command(34, None, ('{"clientID":' + deep + "}").encode())
    response = request(servers.broker_port, heartbeat)
    assert response.code == ResponseCode.SYSTEM_ERROR and "nests more than 64 levels" in response.remark
    register = register_broker_request("C", "b1", "127.0.0.1:1")
    register.body = ('{"topicConfigSerializeWrapper":' + deep + "}").encode()
    response = request(servers.ns_port, register)
    assert response.code == ResponseCode.SYSTEM_ERROR and "nests more than 64 levels" in response.remark
    # In the header: the frame cannot be decoded, so the connection is closed (as NettyDecoder does).
    header = b'{"code":105,"extFields":{"topic":' + deep.encode() + b"}}"
    frame = struct.pack(">ii", 4 + len(header), len(header)) + header

    async def send_and_wait_close() -> bytes:
        reader, writer = await asyncio.open_connection("127.0.0.1", servers.ns_port)
        writer.write(frame)
        data = await asyncio.wait_for(reader.read(), 20)
        writer.close()
        return data

    assert asyncio.run(send_and_wait_close()) == b""
    after = log_census(servers.logs_dir)
    assert after["tracebacks"] == before["tracebacks"] == 0
    assert after["bytes"] - before["bytes"] < 4096  # three short lines, not the 200 KB requests
    assert_serving(servers)


@pytest.mark.real
def test_idle_and_trickling_connections_are_closed(servers):
    """1 byte every 0.25 s is idle too: Netty's IdleStateHandler sees whole frames only."""
    async def run() -> tuple[int, bool]:
        idle = [await asyncio.open_connection("127.0.0.1", servers.ns_port) for _ in range(190)]
        # the broker reads the setting from its own conf (longer there: the budget test holds frames)
        idle += [await asyncio.open_connection("127.0.0.1", servers.broker_port) for _ in range(10)]
        trickle_reader, trickle_writer = await asyncio.open_connection("127.0.0.1", servers.ns_port)
        frame = RemotingCommand.create_request_command(105, {"topic": "broker-f"}).encode()
        trickle_closed = False
        for i in range(4 * (IDLE_S + 4)):  # 24 of the frame's 70-odd bytes
            try:
                trickle_writer.write(frame[i:i + 1])
                await trickle_writer.drain()
            except (ConnectionError, OSError):
                trickle_closed = True
                break
            if await _eof(trickle_reader, 0.25):
                trickle_closed = True
                break
        closed = await asyncio.gather(*(_eof(reader, (IDLE_S if i < 190 else BROKER_IDLE_S) + 4)
                                        for i, (reader, _) in enumerate(idle)))
        for _, writer in idle:
            writer.close()
        trickle_writer.close()
        return sum(closed), trickle_closed

    closed_idle, trickle_closed = asyncio.run(run())
    assert closed_idle == 200
    assert trickle_closed, (closed_idle, trickle_closed)
    assert_serving(servers)


async def _eof(reader: asyncio.StreamReader, wait_s: float) -> bool:
    try:
        return await asyncio.wait_for(reader.read(1), wait_s) == b""
    except TimeoutError:
        return False
    except (ConnectionError, OSError):
        return True


@pytest.mark.real
def test_unfinished_frames_share_a_bounded_budget(servers):
    """Each connection announces a 15 MiB frame and sends all of it but one byte; together that is
    far beyond the broker's 64 MiB budget, so it closes connections instead of growing: at most
    four such frames (60 MiB) stay."""
    rss_before = rss_kib(servers.broker.pid)
    n = 12
    body_len = 15 * 1024 * 1024
    assert body_len + 8 < FRAME_MAX_LENGTH
    header = b'{"code":10,"extFields":{}}'
    prefix = struct.pack(">ii", 4 + len(header) + body_len, len(header)) + header
    chunk = b"\0" * (1024 * 1024)

    async def run() -> int:
        conns = [await asyncio.open_connection("127.0.0.1", servers.broker_port) for _ in range(n)]
        for _reader, writer in conns:
            try:
                writer.write(prefix)
                for _ in range(15):
                    writer.write(chunk[:-1] if _ == 14 else chunk)
                    await asyncio.wait_for(writer.drain(), 30)
            except (ConnectionError, OSError):
                pass
        closed = sum(await asyncio.gather(*(_eof(reader, 2) for reader, _ in conns)))
        rss_held = rss_kib(servers.broker.pid)
        for _reader, writer in conns:
            writer.close()
        return closed, rss_held

    closed, rss_held = asyncio.run(run())
    assert closed >= n - 4
    assert rss_held - rss_before < 130 * 1024, (rss_before, rss_held)  # 12 * 15 MiB = 180 MiB if all held
    with open(_log(servers, "broker-f")) as f:
        shed = [line for line in f if "beyond the server's budget" in line]
    assert len(shed) == closed
    assert_serving(servers)


def _log(servers: Servers, name: str) -> str:
    for entry in os.listdir(servers.logs_dir):
        if entry.startswith(name) and entry.endswith(".log"):
            return os.path.join(servers.logs_dir, entry)
    raise AssertionError(f"no log of {name} in {os.listdir(servers.logs_dir)}")


@pytest.mark.real
def test_requests_leave_no_memory_behind(servers):
    """A server keeps nothing per request served: 1,000 requests each carrying a 64 KiB header
    value (64 MiB in all) to each server leave their RSS where it was, give or take 32 MiB."""
    big = "t" * 65536
    frames_ns = [RemotingCommand.create_request_command(105, {"topic": big + str(i)}).encode() for i in range(1000)]
    frames_broker = [RemotingCommand.create_request_command(30, {"topic": big + str(i), "queueId": "0"}).encode()
                     for i in range(1000)]
    before = rss_kib(servers.namesrv.pid), rss_kib(servers.broker.pid)
    asyncio.run(send_frames(servers.ns_port, frames_ns, connections=4))
    asyncio.run(send_frames(servers.broker_port, frames_broker, connections=4))
    assert_serving(servers)
    after = rss_kib(servers.namesrv.pid), rss_kib(servers.broker.pid)
    assert after[0] - before[0] < 32 * 1024 and after[1] - before[1] < 32 * 1024, (before, after)
    census = log_census(servers.logs_dir)
    assert census["tracebacks"] == 0


@pytest.mark.real
def test_mutated_frames_leave_the_servers_serving_bounded_and_without_junk(servers):
    rng = random.Random(15)
    rss = {}
    for round_ in range(3):
        asyncio.run(send_frames(servers.ns_port, campaign_frames(rng, namesrv_seeds(), 3000)))
        asyncio.run(send_frames(servers.broker_port, campaign_frames(rng, broker_seeds(), 3000)))
        assert_serving(servers)
        rss[round_] = (rss_kib(servers.namesrv.pid), rss_kib(servers.broker.pid))
    # Rounds 2 and 3 cost what round 1 did (allocator slack, not growth per frame).
    assert rss[2][0] - rss[0][0] < 40 * 1024 and rss[2][1] - rss[0][1] < 40 * 1024, rss
    census = log_census(servers.logs_dir)
    assert census["tracebacks"] == 0
    assert census["bytes"] < 20 * 1024 * 1024
    # Only the real broker may be registered once the fuzzing connections are gone.
    for _ in range(50):
        if no_junk(servers):
            break
    assert no_junk(servers), registered(servers)


# ---------------------------------------------------------------------------------------------
# The same idle timeout on the simulator: virtual time, the same instant in every run.


class _IdleServer(Component):
    component_type = "namesrv"

    async def start(self, node):
        self.server = RemotingServer(node, "127.0.0.1", 9876, channel_max_idle_seconds=30)

        async def answer(channel, request):
            await node.sleep(request.ext_int("delayMs"))
            return RemotingCommand.create_response_command(0)

        self.server.register_processor(105, answer)
        await self.server.start()


class _Client(Component):
    async def start(self, node):
        self.node = node


def _idle_run(seed: int) -> tuple[list[tuple[float, str]], str]:
    sim = Simulation(seed=seed)
    sim.add_node("namesrv", _IdleServer)
    sim.add_node("client", _Client)
    sim.start_all()
    client = RemotingClient(sim.nodes["client"])
    # A request answered after 20 s: the response written at 20 s is the connection's last activity.
    request = RemotingCommand.create_request_command(105, {"topic": "t", "delayMs": 20_000})
    assert sim.run(client.invoke_sync("127.0.0.1:9876", request, 30_000)).code == 0
    sim.run_for(60_000)
    closes = [(e.time_ms, e.fields["reason"]) for e in sim.tracer.events
              if e.kind == "net.close" and e.node == "namesrv"]
    return closes, trace_hash(sim.tracer.events)


def test_the_simulator_closes_an_idle_connection_at_the_same_virtual_instant():
    closes, digest = _idle_run(3)
    assert len(closes) == 1 and closes[0][1] == "idle"
    assert 50_000 <= closes[0][0] < 50_100  # 20 s answer + 30 s idle (the connect's few virtual ms)
    assert _idle_run(3) == (closes, digest)
