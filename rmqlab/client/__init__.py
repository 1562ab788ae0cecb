"""RocketMQ's clients on the remoting protocol, mirroring ``org.apache.rocketmq.client``:
producers, pull and push consumers, the admin client, on either runtime (only the Node interface
is used).

* ``DefaultMQProducer`` - sync, async and oneway sends; round-robin queue selection with
  send-latency fault avoidance (MQFaultStrategy) and retries on another broker;
* ``DefaultMQPullConsumer`` - the application pulls queues and keeps its offsets;
* ``DefaultMQPushConsumer`` - clustering consumption: rebalancing across a group, long polling,
  offsets committed to the brokers, consumption from the slave while a master is down;
* ``DefaultMQAdminExt`` - clusterList, topicRoute, updateTopic, brokerStatus, consumerProgress;
* ``ClientProcess`` - the component that runs clients on a node;
* ``MQClientInstance`` - what the clients of one process share: routes, connections, heartbeats.

Every send, pull and consumed message is a ``client`` trace operation (OperationTracer), so
acknowledged, lost and duplicated messages can be computed from a trace alone.
"""

from rmqlab.client.admin import DefaultMQAdminExt
from rmqlab.client.client_config import ClientConfig
from rmqlab.client.client_process import ClientProcess
from rmqlab.client.consumer import (AllocateMessageQueueAveragely, ConsumeConcurrentlyContext,
                                    ConsumeConcurrentlyStatus, DefaultMQPullConsumer, DefaultMQPushConsumer,
                                    PullResult, PullStatus)
from rmqlab.client.exceptions import ClientErrorCode, MQBrokerException, MQClientException
from rmqlab.client.impl import MQClientInstance, MQClientManager
from rmqlab.client.operation_tracer import OperationTracer, describe_message
from rmqlab.client.producer import DefaultMQProducer, SendResult, SendStatus
from rmqlab.remoting.protocol.header.broker.admin import MessageQueue
from rmqlab.remoting.protocol.header.broker.heartbeat import ConsumeFromWhere, MessageModel

__all__ = [
    "DefaultMQAdminExt", "ClientConfig", "ClientProcess", "AllocateMessageQueueAveragely",
    "ConsumeConcurrentlyContext", "ConsumeConcurrentlyStatus", "DefaultMQPullConsumer", "DefaultMQPushConsumer",
    "PullResult", "PullStatus", "ClientErrorCode", "MQBrokerException", "MQClientException", "MQClientInstance",
    "MQClientManager", "OperationTracer", "describe_message", "DefaultMQProducer", "SendResult", "SendStatus",
    "MessageQueue", "ConsumeFromWhere", "MessageModel",
]
