"""Broker consumer offsets: consumerOffset.json (RocketMQ broker/offset)."""

from rmqlab.broker.offset.consumer_offset_manager import ConsumerOffsetManager

__all__ = ["ConsumerOffsetManager"]
