"""The broker's request processors (RocketMQ ``broker/processor``), one per family of request codes."""

from rmqlab.broker.processor.admin_broker_processor import AdminBrokerProcessor
from rmqlab.broker.processor.client_manage_processor import ClientManageProcessor
from rmqlab.broker.processor.consumer_manage_processor import ConsumerManageProcessor
from rmqlab.broker.processor.pull_message_processor import PullMessageProcessor
from rmqlab.broker.processor.send_message_processor import SendMessageProcessor

__all__ = ["AdminBrokerProcessor", "ClientManageProcessor", "ConsumerManageProcessor", "PullMessageProcessor",
           "SendMessageProcessor"]
