"""Send-latency fault avoidance (``org.apache.rocketmq.client.latency``)."""

from rmqlab.client.latency.latency_fault_tolerance import FaultItem, LatencyFaultTolerance
from rmqlab.client.latency.mq_fault_strategy import MQFaultStrategy

__all__ = ["FaultItem", "LatencyFaultTolerance", "MQFaultStrategy"]
