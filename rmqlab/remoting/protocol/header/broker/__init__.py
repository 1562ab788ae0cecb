"""The broker's request and response headers and bodies, mirroring
``org.apache.rocketmq.remoting.protocol.header`` / ``.heartbeat`` / ``.body`` for the codes a broker
serves: send, pull, offsets, heartbeat and client management, and the admin requests."""

from rmqlab.remoting.protocol.header.broker.admin import (ConsumeStats, ConsumerOffsetSerializeWrapper,
                                                          CreateTopicRequestHeader, GetConsumeStatsRequestHeader,
                                                          KVTable, MessageQueue, OffsetWrapper,
                                                          SubscriptionGroupWrapper)
from rmqlab.remoting.protocol.header.broker.client import (GetConsumerListByGroupRequestHeader,
                                                           GetConsumerListByGroupResponseBody,
                                                           NotifyConsumerIdsChangedRequestHeader,
                                                           UnregisterClientRequestHeader)
from rmqlab.remoting.protocol.header.broker.header_util import write_header
from rmqlab.remoting.protocol.header.broker.consumer_offset import (GetMaxOffsetRequestHeader,
                                                                    GetMaxOffsetResponseHeader,
                                                                    GetMinOffsetRequestHeader,
                                                                    GetMinOffsetResponseHeader,
                                                                    QueryConsumerOffsetRequestHeader,
                                                                    QueryConsumerOffsetResponseHeader,
                                                                    UpdateConsumerOffsetRequestHeader,
                                                                    UpdateConsumerOffsetResponseHeader)
from rmqlab.remoting.protocol.header.broker.heartbeat import (SUB_ALL, ConsumeFromWhere, ConsumerData,
                                                              ConsumeType, ExpressionType, HeartbeatData,
                                                              MessageModel, ProducerData, SubscriptionData,
                                                              build_subscription_data, parse_enum)
from rmqlab.remoting.protocol.header.broker.pull_message import (ForbiddenType, PullMessageRequestHeader,
                                                                 PullMessageResponseHeader, PullSysFlag)
from rmqlab.remoting.protocol.header.broker.send_message import (SendMessageRequestHeader,
                                                                 SendMessageRequestHeaderV2,
                                                                 SendMessageResponseHeader)

__all__ = [
    "write_header",
    "SendMessageRequestHeader", "SendMessageRequestHeaderV2", "SendMessageResponseHeader",
    "PullMessageRequestHeader", "PullMessageResponseHeader", "PullSysFlag", "ForbiddenType",
    "QueryConsumerOffsetRequestHeader", "QueryConsumerOffsetResponseHeader", "UpdateConsumerOffsetRequestHeader",
    "UpdateConsumerOffsetResponseHeader", "GetMaxOffsetRequestHeader", "GetMaxOffsetResponseHeader",
    "GetMinOffsetRequestHeader", "GetMinOffsetResponseHeader",
    "GetConsumerListByGroupRequestHeader", "GetConsumerListByGroupResponseBody", "UnregisterClientRequestHeader",
    "NotifyConsumerIdsChangedRequestHeader",
    "HeartbeatData", "ProducerData", "ConsumerData", "SubscriptionData", "ConsumeType", "MessageModel",
    "ConsumeFromWhere", "ExpressionType", "SUB_ALL", "build_subscription_data", "parse_enum",
    "CreateTopicRequestHeader", "GetConsumeStatsRequestHeader", "KVTable", "MessageQueue", "OffsetWrapper",
    "ConsumeStats", "SubscriptionGroupWrapper", "ConsumerOffsetSerializeWrapper",
]
