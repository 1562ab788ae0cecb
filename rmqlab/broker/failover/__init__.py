"""Failover helpers of the broker (RocketMQ ``broker/src/main/java/org/apache/rocketmq/broker/failover``):
the EscapeBridge, through which a slave acting as master (RIP-32) re-delivers special messages."""

from rmqlab.broker.failover.escape_bridge import EscapeBridge

__all__ = ["EscapeBridge"]
