"""Producers (``org.apache.rocketmq.client.producer`` and ``impl.producer``)."""

from rmqlab.client.producer.default_mq_producer import DefaultMQProducer
from rmqlab.client.producer.send_result import SendResult, SendStatus
from rmqlab.client.producer.topic_publish_info import ThreadLocalIndex, TopicPublishInfo

__all__ = ["DefaultMQProducer", "SendResult", "SendStatus", "ThreadLocalIndex", "TopicPublishInfo"]
