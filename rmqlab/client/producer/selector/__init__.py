"""Queue selectors for ordered sends (``client/producer/MessageQueueSelector.java`` and
``client/producer/selector/``)."""

from rmqlab.client.producer.selector.message_queue_selector import MessageQueueSelector
from rmqlab.client.producer.selector.select_message_queue_by_hash import SelectMessageQueueByHash, java_hash_code

__all__ = ["MessageQueueSelector", "SelectMessageQueueByHash", "java_hash_code"]
