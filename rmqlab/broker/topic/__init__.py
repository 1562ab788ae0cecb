"""Broker topic metadata: topics.json (RocketMQ broker/topic). TopicConfig and TopicValidator are in
rmqlab.common, as in RocketMQ."""

from rmqlab.broker.topic.topic_config_manager import TopicConfigManager

__all__ = ["TopicConfigManager"]
