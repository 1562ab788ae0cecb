"""The benchmark clients (`rmqlab producer`, `rmqlab consumer`, rmqlab.example.benchmark) and one client
description for both runtimes (Cluster.add_producer / add_consumer).

Every scenario is judged from the cluster's trace only (merged from the processes' files on the
real runtime): a send is acknowledged when its operation is `ok`, a message consumed when a
`consume` (push) or `pull` (pull) operation carries its UNIQ_KEY. The same scenario function runs
on the simulator and on real processes and asserts the same outcome.
"""

from __future__ import annotations


import json
from collections import Counter

import pytest

from rmqlab.cli import build_parser, main
from rmqlab.client import ClientProcess, DefaultMQProducer
from rmqlab.cluster import Cluster
from rmqlab.common.message import Message
from rmqlab.example.benchmark import ConsumerSpec, ProducerSpec, client_spec_from_dict
from rmqlab.example.benchmark import consumer as consumer_cli
from rmqlab.example.benchmark import producer as producer_cli
from rmqlab.example.benchmark.message_body import body_matches, build_body
from tests.client_helpers import consumed_messages, make_cluster, ops_of

TOPIC = "BenchTopic"


# ---------------------------------------------------------------------------------------------
# the command line and the description
# ---------------------------------------------------------------------------------------------

@pytest.mark.parametrize("argv, expected", [
    (["producer", "-n", "127.0.0.1:9876", "-q", "-1"], "-q (count) must be an integer >= 0, not -1"),
    (["producer", "-n", "127.0.0.1:9876", "-s", "0"], "-s (body_size) must be an integer >= 1, not 0"),
    (["producer", "-n", "127.0.0.1:9876", "-s", "big"], "argument -s/--messageSize: invalid int value: 'big'"),
    (["producer", "-n", "127.0.0.1:9876", "-w", "0"], "-w (in_flight) must be an integer >= 1, not 0"),
    (["producer", "-n", "127.0.0.1:9876", "-i", "-5"], "-i (interval_ms) must be a number of ms >= 0"),
    (["producer", "-n", "127.0.0.1:9876", "--duration", "-1"], "--duration (duration_ms) must be a number of ms >= 0"),
    (["producer", "-n", "127.0.0.1:9876", "--sendMode", "batch"], "argument --sendMode: invalid choice: 'batch'"),
    (["producer", "-n", "127.0.0.1:9876", "-k", "{seq}"], "-k (keys): bad key pattern '{seq}': unknown field(s) seq"),
    (["producer", "-n", "127.0.0.1:9876", "-k", "{i"], "-k (keys): bad key pattern '{i'"),
    (["producer", "-n", "127.0.0.1:9876", "-t", "a/b"], "-t (topic): The specified topic: a/b, contains illegal"),
    (["producer", "-n", "127.0.0.1:9876", "-g", "a b"], "-g (group): The specified group: a b, contains illegal"),
    (["producer", "-n", "localhost"], "-n/--namesrvAddr 'localhost': expected host:port entries"),
    (["producer", "-n", "127.0.0.1:9876;x"], "-n/--namesrvAddr '127.0.0.1:9876;x': expected host:port entries"),
    (["producer"], "no name server: give -n/--namesrvAddr (or set $NAMESRV_ADDR)"),
    (["consumer", "-n", "127.0.0.1:9876", "-r", "1"], "-r (fail_rate) must be a number in [0, 1), not 1.0"),
    (["consumer", "-n", "127.0.0.1:9876", "-r", "0.5", "--consumerType", "pull"],
     "-r (fail_rate) applies to push consumers only"),
    (["consumer", "-n", "127.0.0.1:9876", "--consumerType", "lite"], "argument --consumerType: invalid choice"),
    (["consumer", "-n", "127.0.0.1:9876", "--consumeFromWhere", "CONSUME_FROM_TIMESTAMP"],
     "argument --consumeFromWhere: invalid choice: 'CONSUME_FROM_TIMESTAMP'"),
    (["consumer", "-n", "127.0.0.1:9876", "-w", "0"], "-w (threads) must be an integer >= 1, not 0"),
    (["consumer", "-n", "127.0.0.1:9876", "-q", "x"], "argument -q/--messageQuantity: invalid int value: 'x'"),
])
def test_command_line_errors_name_the_flag(argv, expected, capsys, monkeypatch):
    monkeypatch.delenv("NAMESRV_ADDR", raising=False)
    with pytest.raises(SystemExit) as exit_:
        main(argv)
    assert exit_.value.code == 2
    err = capsys.readouterr().err
    assert f"rmqlab {argv[0]}: error: " in err and expected in err, err


def test_name_server_from_the_environment_like_rocketmq_clients(monkeypatch):
    from rmqlab.example.benchmark.process import build_client

    monkeypatch.setenv("NAMESRV_ADDR", "127.0.0.1:9876;127.0.0.1:9877")
    args = build_parser().parse_args(["consumer", "-t", TOPIC])
    client, addr = build_client("consumer", args)
    assert addr == "127.0.0.1:9876;127.0.0.1:9877" and client.spec == ConsumerSpec(topic=TOPIC)
    monkeypatch.setenv("NAMESRV_ADDR", "nowhere")
    with pytest.raises(ValueError, match=r"\$NAMESRV_ADDR 'nowhere': expected host:port"):
        build_client("consumer", args)


@pytest.mark.parametrize("spec", [
    ProducerSpec(),
    ProducerSpec(topic=TOPIC, group="PG", count=7, interval_ms=12.5, duration_ms=3000, body_size=10, keys="",
                 tag_count=3, send_mode="oneway", in_flight=5),
    ConsumerSpec(),
    ConsumerSpec(topic=TOPIC, group="CG", expression="tag0 || tag1", consumer_type="pull",
                 consume_from_where="CONSUME_FROM_FIRST_OFFSET", threads=2, count=9, duration_ms=1.5),
])
def test_a_description_is_its_command_line_and_a_plain_value(spec):
    """What the real runtime runs (flags) and what a workload stores (JSON) give back the same spec."""
    module = producer_cli if isinstance(spec, ProducerSpec) else consumer_cli
    args = build_parser().parse_args([spec.kind, "-n", "127.0.0.1:9876", *spec.to_argv()])
    assert module.spec_from_args(args) == spec
    assert client_spec_from_dict(json.loads(json.dumps(spec.to_dict()))) == spec


def test_description_errors(tmp_path):
    with pytest.raises(ValueError, match=r"unknown producer field\(s\): rate"):
        client_spec_from_dict({"kind": "producer", "rate": 5})
    with pytest.raises(ValueError, match="client description kind 'bench'"):
        client_spec_from_dict({"kind": "bench"})
    with pytest.raises(ValueError, match=r"--sendMode \(send_mode\) must be sync or async or oneway"):
        ProducerSpec(send_mode="SYNC")
    with pytest.raises(ValueError, match=r"-e \(expression\): bad tag expression"):
        ConsumerSpec(expression="||")
    c = Cluster("single-master")
    try:
        with pytest.raises(TypeError, match="not both"):
            c.add_producer("p", ProducerSpec(), count=3)
        with pytest.raises(TypeError, match="expected a ProducerSpec, a ConsumerSpec"):
            c.add_client("p", "producer")
    finally:
        c.close()
    c = Cluster("single-master", runtime="real", root_dir=str(tmp_path / "real"))  # no process starts
    try:
        with pytest.raises(TypeError, match="on the real runtime a client is a process"):
            c.add_client("p", lambda: ClientProcess())
        with pytest.raises(ValueError, match="unknown client 'nobody'"):
            c.start_client("nobody")
    finally:
        c.close()


def test_bodies_are_built_from_their_keys():
    assert build_body("p-1", 10) == b"p-1.p-1.p-" and body_matches("p-1", b"p-1.p-1.p-")
    assert build_body("producer-12", 4) == b"producer-12"  # never shorter than the key
    assert build_body(None, 3) == b"..." and body_matches(None, b"...")
    assert not body_matches("p-1", build_body("p-2", 10)) and not body_matches("p-1", b"p-1.p-1.px")


# ---------------------------------------------------------------------------------------------
# reading the trace
# ---------------------------------------------------------------------------------------------

def summaries(events, node: str) -> list[dict]:
    return [e.fields for e in events if e.node == node and e.kind == "log"
            and e.fields["message"].startswith("[Complete]")]


# ---------------------------------------------------------------------------------------------
# the same description on both runtimes
# ---------------------------------------------------------------------------------------------

@pytest.mark.parametrize("runtime", ["sim", pytest.param("real", marks=pytest.mark.real)])
def test_producer_and_consumer_processes_send_and_consume_everything(runtime, tmp_path):
    n = 60
    c = make_cluster(runtime, "2m-noslave", tmp_path)
    try:
        c.add_consumer("consumer", topic=TOPIC, group="CG", threads=4, start=False)
        c.add_consumer("puller", topic=TOPIC, group="CG-pull", consumer_type="pull",
                       consume_from_where="CONSUME_FROM_FIRST_OFFSET", start=False)
        c.add_producer("producer", topic=TOPIC, count=n, in_flight=4, body_size=64, tag_count=3, start=False)
        c.start()
        if runtime == "real":  # every process is given the cluster map when it spawns
            with pytest.raises(RuntimeError, match=r"add clients before Cluster.start\(\)"):
                c.add_producer("late", topic=TOPIC)
        c.create_topic(TOPIC, queues=4)
        for name in ("consumer", "puller", "producer"):
            c.start_client(name)

        def everything_consumed() -> bool:
            events = c.events()
            ops = ops_of(events)
            acked = {op.invoke_value["uniq_key"] for op in ops if op.f == "send" and op.type == "ok"}
            by = {node: {m["uniq_key"] for op in ops if op.node == node for m in consumed_messages(op)}
                  for node in ("consumer#0", "puller#0")}
            return (bool(summaries(events, "producer")) and len(acked) == n
                    and all(acked <= keys for keys in by.values()))

        c.run_until(everything_consumed, 40_000, poll_ms=200)
        c.stop_client("consumer")  # its summary: how many bodies it checked
        events = c.events()
    finally:
        c.close()

    ops = ops_of(events)
    sends = {op.invoke_value["uniq_key"]: op for op in ops if op.f == "send"}
    assert len(sends) == n and all(op.type == "ok" for op in sends.values())
    # Keys and tags arrive as sent, and across both brokers' queues.
    sent_keys = {op.invoke_value["keys"] for op in sends.values()}
    assert sent_keys == {f"producer-{i}" for i in range(n)}
    received = [m for op in ops for m in consumed_messages(op)]
    for m in received:
        assert m["keys"] == sends[m["uniq_key"]].invoke_value["keys"]
        assert m["tags"] == sends[m["uniq_key"]].invoke_value["tags"] == f"tag{int(m['keys'].split('-')[1]) % 3}"
    assert {op.value["broker_name"] for op in sends.values()} == {"broker-a", "broker-b"}
    # Bodies by key: the consumer checked every body against its key and found none astray.
    assert not [e for e in events if e.kind == "log" and e.fields["message"].startswith("body_mismatch")]
    (summary,) = summaries(events, "consumer")
    assert summary["mismatched"] == 0 and summary["consumed"] >= n and summary["failed"] == 0
    (summary,) = summaries(events, "producer")
    assert (summary["sent"], summary["ok"], summary["failed"], summary["unknown"]) == (n, n, 0, 0)
    # The same kinds of operations on both runtimes (push consumes, pulls, sends; none failed).
    kinds = {(op.node, op.f, op.type) for op in ops if op.complete_seq is not None}
    assert kinds == {("producer#0", "send", "ok"), ("consumer#0", "consume", "ok"), ("puller#0", "pull", "ok")}
    # Each client process started once; the producer ended by itself after its count.
    starts = Counter(e.node for e in events if e.kind == "node.start")
    assert starts["producer"] == starts["consumer"] == starts["puller"] == 1
    # The producer stopped itself (Node.exit) on both runtimes; the consumer was stopped by the test.
    stops = {e.node: e.fields.get("reason") for e in events if e.kind == "node.stop"}
    assert stops["producer"] == "finished" and "consumer" in stops and "puller" not in stops


def test_the_consumer_reports_a_body_that_does_not_belong_to_its_key(tmp_path):
    """The body check can fail: a message whose body is not the one built from its key."""
    c = make_cluster("sim", "single-master", tmp_path)
    try:
        c.start()
        c.create_topic(TOPIC, queues=1)
        c.add_consumer("consumer", topic=TOPIC, group="CG")
        c.add_client("app", lambda: ClientProcess(producer=DefaultMQProducer("PG", c.namesrv_addr)))
        producer = c.sim.components["app"]["producer"]

        async def send():
            for key, body in (("k-1", build_body("k-1", 20)), ("k-2", build_body("k-3", 20))):
                msg = Message(TOPIC, body)
                msg.keys = key
                await producer.send(msg)

        c.sim.run(send())
        c.run_for(2_000)
        events = c.events()
    finally:
        c.close()
    warnings = [e.fields for e in events if e.kind == "log" and e.fields["message"].startswith("body_mismatch")]
    assert [(w["keys"], w["level"]) for w in warnings] == [("k-2", "WARN")]
    assert len([op for op in ops_of(events) if op.f == "consume" and op.type == "ok"]) == 2


@pytest.mark.parametrize("runtime", ["sim", pytest.param("real", marks=pytest.mark.real)])
def test_a_killed_consumer_restarts_from_the_committed_offsets_and_loses_nothing(runtime, tmp_path):
    c = make_cluster(runtime, "single-master", tmp_path)
    try:
        c.add_consumer("consumer", topic=TOPIC, group="CG", start=False)
        c.add_producer("producer-1", topic=TOPIC, count=30, in_flight=2, start=False)
        c.add_producer("producer-2", topic=TOPIC, count=40, interval_ms=100, start=False)
        c.start()
        c.create_topic(TOPIC, queues=4)
        c.start_client("consumer")
        c.start_client("producer-1")

        def consumed_by(incarnation: str) -> list[str]:
            return [m["uniq_key"] for op in ops_of(c.events()) if op.node == incarnation
                    for m in consumed_messages(op)]

        def acked(producer: str) -> set[str]:
            return {op.invoke_value["uniq_key"] for op in ops_of(c.events())
                    if op.node == f"{producer}#0" and op.f == "send" and op.type == "ok"}

        c.run_until(lambda: len(acked("producer-1")) == 30 and acked("producer-1") <= set(consumed_by("consumer#0")),
                    30_000, poll_ms=200)
        # The consumer writes its offsets 10 s after its start, then every 5 s (persistConsumerOffsetInterval).
        c.run_for(11_000)
        c.nemesis.kill("consumer")
        c.start_client("producer-2")
        c.nemesis.restart("consumer")
        # Killed again mid-way through producer-2's messages, then restarted once more.
        c.run_until(lambda: len(consumed_by("consumer#1")) >= 10, 30_000, poll_ms=100)
        c.nemesis.kill("consumer")
        c.nemesis.restart("consumer")
        c.run_until(lambda: len(acked("producer-2")) == 40
                    and acked("producer-1") | acked("producer-2") <= {k for i in range(3)
                                                                       for k in consumed_by(f"consumer#{i}")},
                    30_000, poll_ms=200)
        phase1, phase2 = acked("producer-1"), acked("producer-2")
        first, second, third = (consumed_by(f"consumer#{i}") for i in range(3))
    finally:
        c.close()
    # Nothing acknowledged is lost.
    assert phase1 | phase2 <= set(first) | set(second) | set(third)
    assert set(first) == phase1 and not (phase2 & set(first))
    # The first restart resumed from the offsets committed before the kill: none of the first
    # batch again, only producer-2's messages.
    assert set(second) <= phase2 and len(second) >= 10
    # The second kill came mid-way: the third process consumed what the second had not (from its
    # last commit on, so some of the second's messages may come again: at-least-once).
    assert set(third) <= phase2 and phase2 - set(second) <= set(third)
