"""The benchmark clients ordered: ``rmqlab producer --shardingKeys N`` (SelectMessageQueueByHash on
"order-<i mod N>") and ``rmqlab consumer --orderly`` (MessageListenerOrderly), one description for
both runtimes (Cluster.add_producer / add_consumer). Judged from the trace alone, as a checker
does: every orderly ``consume`` operation carries its queue and offset, so per-queue order (and
each order's send order) can be read back."""

from __future__ import annotations

import dataclasses
from collections import defaultdict

import pytest

from rmqlab.cli import build_parser
from rmqlab.cluster import Cluster
from rmqlab.example.benchmark import ConsumerSpec, ProducerSpec
from rmqlab.example.benchmark import consumer as consumer_cli
from rmqlab.example.benchmark import producer as producer_cli
from rmqlab.trace import client_ops

TOPIC = "OrderTopic"
N, ORDERS = 64, 8


def test_the_new_flags_round_trip_and_leave_old_descriptions_alone():
    p = ProducerSpec(topic=TOPIC, count=N, sharding_keys=ORDERS)
    c = ConsumerSpec(topic=TOPIC, orderly=True)
    parser = build_parser()
    assert producer_cli.spec_from_args(parser.parse_args(["producer", *p.to_argv()])) == p
    assert consumer_cli.spec_from_args(parser.parse_args(["consumer", *c.to_argv()])) == c
    assert ProducerSpec.from_dict(p.to_dict()) == p and ConsumerSpec.from_dict(c.to_dict()) == c
    # Without them, the description's dict and flags are what they were before they existed.
    assert "sharding_keys" not in ProducerSpec().to_dict() and "--shardingKeys" not in ProducerSpec().to_argv()
    assert "orderly" not in ConsumerSpec().to_dict() and "--orderly" not in ConsumerSpec().to_argv()
    with pytest.raises(ValueError, match="--orderly .* push consumers only"):
        ConsumerSpec(consumer_type="pull", orderly=True)
    with pytest.raises(ValueError, match="--shardingKeys .* sync sends"):
        ProducerSpec(sharding_keys=2, send_mode="async")


@pytest.mark.parametrize("runtime", ["sim", pytest.param("real", marks=pytest.mark.real)])
def test_ordered_sends_consumed_orderly_by_two_benchmark_consumers(runtime, tmp_path):
    c = Cluster("2m-noslave", runtime=runtime, seed=3, root_dir=str(tmp_path / runtime))
    try:
        for name in ("c1", "c2"):
            c.add_consumer(name, topic=TOPIC, group="CG-orderly", orderly=True,
                           consume_from_where="CONSUME_FROM_FIRST_OFFSET", start=False)
        c.add_producer("producer", topic=TOPIC, count=N, sharding_keys=ORDERS, body_size=32, start=False)
        c.start()
        c.create_topic(TOPIC, queues=4)
        for name in ("c1", "c2", "producer"):
            c.start_client(name)

        def consumed() -> set:
            return {op.invoke_value["uniq_key"] for op in client_ops(c.events()) if op.f == "consume" and op.type == "ok"}

        c.run_until(lambda: len(consumed()) == N, 60_000, poll_ms=200)
        events = c.events()
    finally:
        c.close()

    ops = [dataclasses.replace(op, node=f"{op.node}#{op.incarnation}") for op in client_ops(events)]
    sends = [op for op in ops if op.f == "send"]
    assert len(sends) == N and all(op.type == "ok" for op in sends)
    # One order, one queue: the queue SelectMessageQueueByHash picked for "order-<i mod 8>".
    queue_of = defaultdict(set)
    for op in sends:
        i = int(op.invoke_value["keys"].split("-")[1])
        queue_of[i % ORDERS].add((op.value["broker_name"], op.value["queue_id"]))
    assert all(len(qs) == 1 for qs in queue_of.values())
    consumes = [op for op in ops if op.f == "consume"]
    assert all(op.invoke_value["orderly"] is True for op in consumes)
    assert {op.node for op in consumes} == {"c1#0", "c2#0"}  # the group shares the queues
    # Per queue: offsets consumed in order, each once, by one consumer at a time (a queue can
    # change hands while the second consumer joins, never back and forth); per order: the send order.
    by_queue = defaultdict(list)
    for op in consumes:
        by_queue[(op.invoke_value["broker_name"], op.invoke_value["queue_id"])].append(op)
    for q, qops in by_queue.items():
        offsets = [op.invoke_value["queue_offset"] for op in qops]
        assert offsets == sorted(offsets) and len(set(offsets)) == len(offsets), q
        nodes = [op.node for i, op in enumerate(qops) if i == 0 or qops[i - 1].node != op.node]
        assert len(nodes) == len(set(nodes)), (q, nodes)
    steps = defaultdict(list)
    for op in consumes:
        i = int(op.invoke_value["keys"].split("-")[1])
        steps[i % ORDERS].append(i)
    assert all(s == sorted(s) and len(s) == N // ORDERS for s in steps.values())
