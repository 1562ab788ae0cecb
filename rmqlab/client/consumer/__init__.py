"""Consumers (``org.apache.rocketmq.client.consumer`` and ``impl.consumer``)."""

from rmqlab.client.consumer.allocate_message_queue_averagely import AllocateMessageQueueAveragely
from rmqlab.client.consumer.default_mq_pull_consumer import DefaultMQPullConsumer
from rmqlab.client.consumer.default_mq_push_consumer import DefaultMQPushConsumer
from rmqlab.client.consumer.message_listener import ConsumeConcurrentlyContext, ConsumeConcurrentlyStatus
from rmqlab.client.consumer.message_listener_orderly import (ConsumeOrderlyContext, ConsumeOrderlyStatus,
                                                             MessageListenerOrderly)
from rmqlab.client.consumer.process_queue import ProcessQueue
from rmqlab.client.consumer.pull_result import PullResult, PullStatus
from rmqlab.client.consumer.remote_broker_offset_store import ReadOffsetType, RemoteBrokerOffsetStore

__all__ = ["AllocateMessageQueueAveragely", "DefaultMQPullConsumer", "DefaultMQPushConsumer",
           "ConsumeConcurrentlyContext", "ConsumeConcurrentlyStatus", "ConsumeOrderlyContext", "ConsumeOrderlyStatus",
           "MessageListenerOrderly", "ProcessQueue", "PullResult", "PullStatus",
           "ReadOffsetType", "RemoteBrokerOffsetStore"]
