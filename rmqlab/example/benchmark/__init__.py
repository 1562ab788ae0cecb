"""RocketMQ's benchmark clients (``example/benchmark/Producer.java`` and ``Consumer.java``, run by
``benchmark/producer.sh`` / ``consumer.sh``) as ``rmqlab producer`` / ``rmqlab consumer``, and the
client descriptions a lab's Cluster runs on either runtime.

    ProducerSpec(topic="TopicTest", count=100, interval_ms=10)     # plain values, to_dict()/from_dict()
    ConsumerSpec(topic="TopicTest", group="CG")
    build_client(spec, namesrv_addr)                                # the component (a ClientProcess)
    spec.to_argv()                                                  # the same, as command-line flags
    ProducerSpec(topic="TopicTest", protocol="grpc")                # rmqlab's 5.x Producer, through a Proxy:
    build_client(spec, proxy_endpoints)                             # built with the Proxy endpoints

On the simulator ``rmqlab.cluster.Cluster`` runs ``build_client(spec, ...)`` on a node; on the
real runtime it runs ``python -m rmqlab.cli producer|consumer -n ... <spec.to_argv()>`` as a
process, which builds the same component from the flags. See producer.py and consumer.py for the
flags and how they differ from RocketMQ's tools.
"""

from __future__ import annotations

from typing import Any

from rmqlab.example.benchmark.consumer import BenchmarkConsumer, ConsumerSpec
from rmqlab.example.benchmark.producer import BenchmarkProducer, ProducerSpec

ClientSpec = ProducerSpec | ConsumerSpec
SPEC_KINDS: dict[str, type] = {ProducerSpec.kind: ProducerSpec, ConsumerSpec.kind: ConsumerSpec}


def client_spec_from_dict(data: dict[str, Any]) -> ClientSpec:
    """A description back from ``to_dict()`` (a recorded workload's client operation)."""
    kind = data.get("kind")
    if kind not in SPEC_KINDS:
        raise ValueError(f"client description kind {kind!r}: expected one of {', '.join(SPEC_KINDS)}")
    return SPEC_KINDS[kind].from_dict(data)


def build_client(spec: ClientSpec, address: str) -> BenchmarkProducer | BenchmarkConsumer:
    """The component that runs ``spec`` (what the command line builds from the same flags);
    `address`: the name servers, or the Proxy endpoints for ``protocol="grpc"``."""
    if isinstance(spec, ProducerSpec):
        return BenchmarkProducer(spec, address)
    if isinstance(spec, ConsumerSpec):
        return BenchmarkConsumer(spec, address)
    raise TypeError(f"not a client description: {spec!r}")


__all__ = ["BenchmarkConsumer", "BenchmarkProducer", "ClientSpec", "ConsumerSpec", "ProducerSpec",
           "build_client", "client_spec_from_dict"]
