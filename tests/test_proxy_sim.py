"""The 5.x Proxy on the simulator (framed RPC) and rmqlab's 5.x client (rmqlab.client.grpc).

Both proxy modes on a seeded 2m-noslave cluster: produce and consume through the Proxy with the
benchmark clients described with protocol="grpc", the same trace for the same seed, a broker's
machine crash (Cluster mode: the Proxy node survives and sends go on to broker-b; Local mode: the
crashed broker's endpoint is gone and the client goes on through broker-b's endpoint), the framed
protocol's core and bad frames. One real-runtime test runs the same client, over grpcio, against
the real Proxy processes.
"""

from __future__ import annotations

import collections
import os

import pytest

from rmqlab.client.client_process import ClientProcess
from rmqlab.client.grpc.framed_transport import FramedTransport
from rmqlab.client.grpc.rpc import RpcError
from rmqlab.cluster import Cluster
from rmqlab.example.benchmark import ConsumerSpec, ProducerSpec
from rmqlab.proto import framed
from rmqlab.proto.framed import (CALL, CANCEL, END_STREAM, HALF_CLOSE, MESSAGE, STATUS, FrameDecoder, GrpcFrameError,
                                 encode_frame)
from rmqlab.proto.v2 import definition_pb2 as pb
from rmqlab.proto.v2 import service_pb2 as spb
from rmqlab.trace import client_ops, trace_hash

TOPIC = "ProxySimTopic"
GROUP = "GID_sim"


def start_cluster(mode: str, root: str, seed: int = 7, **producer) -> Cluster:
    c = Cluster("2m-noslave", seed=seed, proxy=mode, root_dir=root)
    c.add_consumer("consumer", topic=TOPIC, group=GROUP, protocol="grpc", start=False)
    c.add_producer("producer", topic=TOPIC, protocol="grpc", start=False,
                   **({"interval_ms": 50, "count": 30} | producer))
    c.start()
    c.create_topic(TOPIC)
    c.start_client("consumer")
    c.start_client("producer")
    return c


def ops_of(c: Cluster, f: str) -> list:
    return [op for op in client_ops(c.events()) if op.f == f]


def received(c: Cluster) -> dict[str, list[dict]]:
    out = collections.defaultdict(list)
    for op in ops_of(c, "receive"):
        if op.type == "ok":
            for m in op.value["messages"]:
                out[m["uniq_key"]].append(m)
    return out


# -- produce and consume ----------------------------------------------------------------------------
@pytest.mark.parametrize("mode", ["cluster", "local"])
def test_produce_and_consume_through_the_proxy(mode, tmp_path):
    c = start_cluster(mode, str(tmp_path))
    try:
        # The consumer takes the route's queues in turn, four in a row on each broker (Java's
        # SubscriptionLoadBalancer), each receive waiting 5 s when there is nothing: 40 s a round.
        c.run_for(45_000)
        sends = ops_of(c, "send")
        assert len(sends) == 30 and all(op.type == "ok" for op in sends), [op for op in sends if op.type != "ok"]
        assert all(op.value["send_status"] == "SEND_OK" and op.value["msg_id"] == op.invoke_value["uniq_key"]
                   for op in sends)
        sent = {op.invoke_value["uniq_key"]: op for op in sends}
        got = received(c)
        assert set(got) == set(sent), "every acknowledged message is received"
        for key, reads in got.items():
            assert len(reads) == 1, f"{key} delivered more than once: {reads}"
            assert reads[0]["body_crc"] == sent[key].invoke_value["body_crc"]
            assert reads[0]["keys"] == sent[key].invoke_value["keys"]
        acks = ops_of(c, "ack")
        assert sorted(op.invoke_value["uniq_key"] for op in acks if op.type == "ok") == sorted(sent)
        # Both brokers served: the consumer read from each, and in Local mode through each one's Proxy.
        assert {m[0]["broker_name"] for m in got.values()} == {"broker-a", "broker-b"}
        if mode == "local":
            assert c.proxy_endpoints == ["127.0.0.2:8081", "127.0.0.3:8081"]
            # A Local-mode endpoint serves its own broker only: the send result names it.
            by_endpoint = {op.value["endpoint"]: op.value["broker_name"] for op in sends}
            assert by_endpoint == {"127.0.0.2:8081": "broker-a", "127.0.0.3:8081": "broker-b"}
            for key, op in sent.items():
                assert got[key][0]["broker_name"] == op.value["broker_name"]
        else:
            assert c.proxy_endpoints == ["127.0.0.1:8081"]
            assert all("broker_name" not in op.value for op in sends), "Cluster mode: the Proxy chose the broker"
            # Settings live while the client's Telemetry stream does: the producer said goodbye
            # when it finished its count, the consumer does when it stops.
            settings = c.components["proxy"].activity.settings_manager
            assert [e.node for e in c.events() if e.kind == "node.stop"] == ["producer"]
            assert [cid.split("@")[0] for cid in settings.client_ids()] == ["consumer"]
            c.stop_client("consumer")
            assert settings.client_ids() == []
        # The Proxy's side, traced as the grpcio server traces it: method and status.
        proxy_nodes = {"proxy"} if mode == "cluster" else {"broker-a", "broker-b"}
        answered = [e for e in c.events() if e.kind == "frame.send" and e.node in proxy_nodes
                    and e.fields.get("proto") == "grpc" and e.fields.get("method") == "SendMessage"
                    and e.fields.get("frame") == "MESSAGE"]
        assert len(answered) == 30 and all(e.fields["status"] == "OK" for e in answered)
        starts = [e for e in c.events() if e.kind == "node.start" and e.node in proxy_nodes]
        assert {e.fields["component"] for e in starts} == ({"proxy"} if mode == "cluster" else {"broker"})
    finally:
        c.close()


@pytest.mark.parametrize("mode", ["cluster", "local"])
def test_same_seed_same_trace(mode, tmp_path):
    def run(root: str) -> tuple[str, int]:
        c = start_cluster(mode, root, count=10)
        try:
            c.run_for(4_000)
            return trace_hash(c.events()), len(c.events())
        finally:
            c.close()

    first = run(str(tmp_path / "a"))
    assert first == run(str(tmp_path / "b"))
    assert first[1] > 500


# -- a broker's machine crashes ---------------------------------------------------------------------
def test_cluster_mode_proxy_survives_a_broker_crash_and_sends_go_on_to_the_other_broker(tmp_path):
    c = start_cluster("cluster", str(tmp_path), interval_ms=100, count=0, duration_ms=40_000)
    try:
        c.run_for(5_000)
        crash_at = c.sim.now_ms()
        c.nemesis.crash("broker-a")
        # Until the name server drops broker-a (120 s), the Proxy still sends it some messages and
        # the consumer still asks it: each such attempt waits out its timeout. Long enough for the
        # consumer to have read what was sent.
        c.run_for(80_000)
        assert c.sim.nodes["proxy"].alive, "the Proxy is a node of its own"
        after = [op for op in ops_of(c, "send") if op.invoke_time_ms > crash_at]
        acked = [op for op in after if op.type == "ok"]
        assert len(acked) >= 5, after
        # Through the one Proxy endpoint, several attempts when the Proxy tried broker-a first.
        assert all(op.value["endpoint"] == "127.0.0.1:8081" for op in acked)
        assert any(len(op.value["endpoints_sent"]) > 1 for op in after), "some attempts hit the dead broker"
        got = received(c)
        for op in acked:  # stored on broker-b: read from there
            assert [m["broker_name"] for m in got[op.invoke_value["uniq_key"]]] == ["broker-b"]
    finally:
        c.close()


def test_local_mode_crash_takes_the_brokers_proxy_down_and_the_client_moves_on(tmp_path):
    c = start_cluster("local", str(tmp_path), interval_ms=100, count=0, duration_ms=30_000)
    try:
        c.run_for(5_000)
        crash_at = c.sim.now_ms()
        c.nemesis.crash("broker-a")
        # The consumer too loses a receive (its deadline: 3 s + 5 s of long polling) and pauses 3 s.
        c.run_for(20_000)
        # The Proxy lived in broker-a's process: its endpoint is gone with it.
        assert ("127.0.0.2", 8081) not in c.sim.network.listeners
        assert ("127.0.0.3", 8081) in c.sim.network.listeners
        # Every send that completed after the crash was acknowledged.
        after = [op for op in ops_of(c, "send") if op.complete_time_ms is not None and op.complete_time_ms > crash_at]
        assert len(after) > 50 and all(op.type == "ok" for op in after), [op for op in after if op.type != "ok"]
        # The first to try broker-a's endpoint timed out there and went on to broker-b's ...
        tried_a = [i for i, op in enumerate(after) if "127.0.0.2:8081" in op.value["endpoints_sent"]]
        assert tried_a and after[tried_a[0]].value["endpoints_sent"] == ["127.0.0.2:8081", "127.0.0.3:8081"]
        assert after[tried_a[0]].complete_time_ms - after[tried_a[0]].invoke_time_ms >= 3_000
        # ... which is isolated from then on: every later send goes straight to broker-b's Proxy.
        assert tried_a == [tried_a[0]]
        assert all(op.value["endpoints_sent"] == ["127.0.0.3:8081"] and op.value["broker_name"] == "broker-b"
                   for op in after[tried_a[0] + 1:])
        got = received(c)
        late = [op for op in after if op.complete_time_ms < c.sim.now_ms() - 2_000]
        assert all(op.invoke_value["uniq_key"] in got for op in late), "the consumer reads them from broker-b"
    finally:
        c.close()


# -- the framed protocol ----------------------------------------------------------------------------
def test_frames_round_trip_in_any_chunking():
    frames = [encode_frame(CALL, 1, method="SendMessage", timeout_ms=3000, metadata=[("x-mq-client-id", "c@1")]),
              encode_frame(MESSAGE, 1, flags=END_STREAM, message=b"\x0a\x00"),
              encode_frame(HALF_CLOSE, 2),
              encode_frame(STATUS, 1, code="OK", details=""),
              encode_frame(CANCEL, 3)]
    data = b"".join(frames)
    for chunk in (1, 3, 7, len(data)):
        decoder = FrameDecoder()
        out = []
        for i in range(0, len(data), chunk):
            out += decoder.feed(data[i:i + chunk])
        assert [(f.name, f.call_id) for f in out] == [("CALL", 1), ("MESSAGE", 1), ("HALF_CLOSE", 2),
                                                      ("STATUS", 1), ("CANCEL", 3)]
        assert out[0].fields == {"method": "SendMessage", "timeout_ms": 3000, "metadata": [("x-mq-client-id", "c@1")]}
        assert out[1].fields == {"flags": END_STREAM, "message": b"\x0a\x00"} and out[1].size == len(frames[1])


@pytest.mark.parametrize("data, reason", [
    (b"\x00\x00\x00\x02\x01\x00", "frame length 2 is below 5"),
    (b"\x00\x00\x00\x05\x09\x00\x00\x00\x01", "unknown frame type 9"),
    (b"\x00\x00\x00\x07\x01\x00\x00\x00\x01\x00\x05", "CALL.method: text of 5 bytes runs past the end"),
    (b"\x00\x00\x00\x08\x01\x00\x00\x00\x01\x00\x01\xff", "CALL.method: text is not UTF-8"),
    (b"\x00\x00\x00\x06\x03\x00\x00\x00\x01\x00", "HALF_CLOSE: 1 bytes after the last field"),
    (b"\x7f\x00\x00\x00", "exceeds the"),
])
def test_bad_frames_are_refused_with_the_reason(data, reason):
    decoder = FrameDecoder(max_frame_length=1024)
    good = encode_frame(CANCEL, 1)
    with pytest.raises(GrpcFrameError) as e:
        decoder.feed(good + data)
    assert reason in e.value.reason
    assert [f.name for f in e.value.frames] == ["CANCEL"], "the frames before the bad one arrived intact"
    with pytest.raises(GrpcFrameError, match="already failed"):
        decoder.feed(good)
    assert framed.FRAME_TYPES[CALL].sent_by == "client"


class _Idle(ClientProcess):
    """A client node whose test code runs as `sim.run(...)` on its node."""


def test_bad_frames_close_that_connection_and_the_proxy_goes_on(tmp_path):
    c = Cluster("single-master", seed=3, proxy="cluster", root_dir=str(tmp_path))
    try:
        c.add_client("raw", _Idle)
        c.start()
        c.create_topic(TOPIC)
        node = c.sim.nodes["raw"]
        host, port = c.proxy_endpoints[0].split(":")

        async def raw(*frames: bytes) -> list:
            reader, writer = await node.connect(host, int(port))
            for f in frames:
                writer.write(f)
            decoder, out = FrameDecoder(), []
            while data := await reader.read(65536):  # until the Proxy closes the connection
                out += decoder.feed(data)
                if any(f.type == STATUS for f in out):
                    writer.close()
                    break
            return out

        def closed_with(reason: str) -> None:
            assert any(e.kind == "net.close" and e.node == "proxy" and reason in e.fields["reason"]
                       for e in c.events()), reason

        assert c.sim.run(raw(b"\x00\x00\x00\x05\x63\x00\x00\x00\x01")) == []
        closed_with("frame error: unknown frame type 99")
        assert c.sim.run(raw(encode_frame(STATUS, 1, code="OK", details=""))) == []
        closed_with("a STATUS frame is sent by the server")
        assert c.sim.run(raw(encode_frame(MESSAGE, 5, flags=0, message=b""))) == []
        closed_with("MESSAGE for call 5, which was never opened")
        # Errors of one call end that call with a status, as grpcio would answer them.
        out = c.sim.run(raw(encode_frame(CALL, 1, method="PullMessage", timeout_ms=0, metadata=[])))
        assert [(f.name, f["code"]) for f in out] == [("STATUS", "UNIMPLEMENTED")]
        out = c.sim.run(raw(encode_frame(CALL, 1, method="QueryRoute", timeout_ms=1000, metadata=[]),
                            encode_frame(MESSAGE, 1, flags=END_STREAM, message=b"\xff\xff\xff")))
        assert [(f.name, f["code"]) for f in out] == [("STATUS", "INVALID_ARGUMENT")]
        assert "QueryRoute: the request is not a valid apache.rocketmq.v2.QueryRouteRequest" in out[0]["details"]
        settings = spb.TelemetryCommand(settings=pb.Settings(client_type=pb.PRODUCER))  # no publishing
        out = c.sim.run(raw(encode_frame(CALL, 1, method="Telemetry", timeout_ms=0, metadata=[]),
                            encode_frame(MESSAGE, 1, flags=0, message=settings.SerializeToString())))
        assert [(f.name, f["code"]) for f in out] == [("STATUS", "INVALID_ARGUMENT")]
        assert "there is no publishing or subscription data in settings" in out[0]["details"]
        # ... and the Proxy still serves a good client.
        transport = FramedTransport(node)
        request = spb.QueryRouteRequest(topic=pb.Resource(name=TOPIC), endpoints=pb.Endpoints(
            scheme=pb.IPv4, addresses=[pb.Address(host=host, port=int(port))]))
        response = c.sim.run(transport.unary(c.proxy_endpoints[0], "QueryRoute", request, spb.QueryRouteResponse,
                                             [], 3000))
        assert response.status.code == pb.Code.OK and len(response.message_queues) == 4
        with pytest.raises(RpcError) as e:  # nobody listens there: refused before anything was sent
            c.sim.run(transport.unary("127.0.0.1:8082", "QueryRoute", request, spb.QueryRouteResponse, [], 3000))
        assert e.value.code == "UNAVAILABLE" and e.value.sent is False
        assert not [e for e in c.events() if e.kind == "log" and e.fields["level"] == "ERROR"]
    finally:
        c.close()


# -- descriptions ---------------------------------------------------------------------------------
def test_grpc_client_descriptions(tmp_path):
    assert ConsumerSpec(protocol="grpc").consumer_type == "simple"
    assert ConsumerSpec().consumer_type == "push"
    with pytest.raises(ValueError, match="no oneway send"):
        ProducerSpec(protocol="grpc", send_mode="oneway")
    with pytest.raises(ValueError, match="push or pull with --protocol remoting"):
        ConsumerSpec(consumer_type="simple")
    with pytest.raises(ValueError, match="talks to a Proxy"):
        Cluster("single-master", root_dir=str(tmp_path)).add_producer("p", protocol="grpc")


# -- the real runtime: the same client over grpcio ---------------------------------------------------
@pytest.mark.real
def test_rmqlab_client_over_grpcio_against_the_real_proxy(tmp_path):
    """The benchmark clients as `rmqlab producer|consumer --protocol grpc --endpoints ...` processes
    (rmqlab's 5.x client over grpcio), against `rmqlab proxy` (grpcio)."""
    c = Cluster("single-master", runtime="real", proxy="cluster", root_dir=str(tmp_path))
    try:
        c.add_consumer("consumer", topic=TOPIC, group=GROUP, protocol="grpc", count=10, start=False)
        c.add_producer("producer", topic=TOPIC, protocol="grpc", count=10, interval_ms=20, start=False)
        c.start()
        c.create_topic(TOPIC)
        c.start_client("consumer")
        c.start_client("producer")

        def stopped():
            return {e.node for e in c.events() if e.kind == "node.stop"} >= {"producer", "consumer"}

        c.run_until(stopped, 60_000, poll_ms=200)
        ops = client_ops(c.events())
        sends = [op for op in ops if op.f == "send"]
        assert len(sends) == 10 and all(op.type == "ok" for op in sends)
        acked = sorted(op.invoke_value["uniq_key"] for op in ops if op.f == "ack" and op.type == "ok")
        assert acked == sorted(op.invoke_value["uniq_key"] for op in sends)
        assert all(op.value["broker_name"] == "broker-a" for op in sends), "one broker behind the endpoint"
        # The Proxy process traced its side of every call.
        assert sum(1 for e in c.events() if e.node == "proxy" and e.kind == "frame.send"
                   and e.fields.get("method") == "SendMessage" and e.fields.get("status") == "OK") == 10
        assert os.path.exists(os.path.join(str(tmp_path), "conf", "rmq-proxy.json"))
    finally:
        c.close()
