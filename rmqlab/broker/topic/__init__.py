"""Broker topic metadata: TopicConfig, TopicValidator and topics.json (RocketMQ broker/topic)."""

from rmqlab.broker.topic.topic_config import PermName, TopicConfig, TopicFilterType, TopicValidator, ValidateResult
from rmqlab.broker.topic.topic_config_manager import TopicConfigManager

__all__ = ["PermName", "TopicConfig", "TopicConfigManager", "TopicFilterType", "TopicValidator", "ValidateResult"]
