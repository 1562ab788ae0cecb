"""The remoting layer on the simulator: same code as on TCP, deterministic, and faults behave."""

from __future__ import annotations

import pytest

from rmqlab.remoting import RemotingClient, RemotingCommand, RemotingServer, RemotingTimeoutError, RequestCode
from rmqlab.remoting.exceptions import RemotingConnectError
from rmqlab.runtime.component import Component
from rmqlab.runtime.sim import Simulation
from rmqlab.trace import trace_hash


class EchoServer(Component):
    component_type = "namesrv"

    async def start(self, node):
        self.node = node
        self.server = RemotingServer(node, "127.0.0.1", 9876)

        async def slow(channel, request):
            await node.sleep(request.ext_int("delayMs"))
            return RemotingCommand.create_response_command(0, ext_fields={"echo": request.ext_str("topic")})

        self.server.register_processor(RequestCode.GET_ROUTEINFO_BY_TOPIC, slow)
        await self.server.start()


class Idle(Component):
    async def start(self, node):
        self.node = node


def world(seed):
    sim = Simulation(seed=seed)
    sim.add_node("namesrv", EchoServer)
    sim.add_node("client", Idle)
    sim.start_all()
    return sim, RemotingClient(sim.nodes["client"])


def ask(client, topic, delay_ms, timeout_ms=3000):
    req = RemotingCommand.create_request_command(RequestCode.GET_ROUTEINFO_BY_TOPIC,
                                                 {"topic": topic, "delayMs": delay_ms})
    return client.invoke_sync("127.0.0.1:9876", req, timeout_ms)


def test_out_of_order_answers_in_virtual_time():
    sim, client = world(1)
    done = []

    async def both():
        import asyncio
        async def one(topic, delay):
            r = await ask(client, topic, delay)
            done.append((r.ext_str("echo"), round(sim.now_ms())))
        await asyncio.gather(one("slow", 500), one("fast", 10))

    sim.run(both())
    assert [t for t, _ in done] == ["fast", "slow"]  # one connection, answered out of order
    assert 500 <= done[1][1] <= 510
    sim.close()


def test_timeout_under_partition_and_recovery_after_heal():
    sim, client = world(2)
    assert sim.run(ask(client, "t", 0)).code == 0
    sim.nemesis.partition(["namesrv"], ["client"])
    with pytest.raises(RemotingTimeoutError):
        sim.run(ask(client, "t", 0, timeout_ms=1000))
    sim.nemesis.heal()
    assert sim.run(ask(client, "t", 0)).ext_str("echo") == "t"
    sim.nemesis.kill("namesrv")
    with pytest.raises(RemotingConnectError):
        sim.run(ask(client, "t", 0))
    sim.close()


def test_frames_are_traced_and_deterministic():
    hashes = []
    for _ in range(2):
        sim, client = world(3)
        for i in range(5):
            sim.run(ask(client, f"topic-{i}", i))
        frames = [e for e in sim.tracer.events if e.kind.startswith("frame.")]
        assert len(frames) == 20 and {e.fields["proto"] for e in frames} == {"remoting"}
        assert frames[0].fields["name"] == "GET_ROUTEINFO_BY_TOPIC"
        hashes.append(trace_hash(sim.tracer.events))
        sim.close()
    assert hashes[0] == hashes[1]
