"""Request and response bodies (``org.apache.rocketmq.remoting.protocol.body``)."""

from rmqlab.remoting.protocol.body.broker_member_group import BrokerMemberGroup, GetBrokerMemberGroupResponseBody
from rmqlab.remoting.protocol.body.cluster_info import ClusterInfo
from rmqlab.remoting.protocol.body.register_broker_body import (RegisterBrokerBody,
                                                                TopicConfigAndMappingSerializeWrapper,
                                                                TopicConfigSerializeWrapper)

__all__ = ["BrokerMemberGroup", "GetBrokerMemberGroupResponseBody", "ClusterInfo", "RegisterBrokerBody",
           "TopicConfigAndMappingSerializeWrapper", "TopicConfigSerializeWrapper"]
