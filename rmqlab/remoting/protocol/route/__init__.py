"""Topic routes (``org.apache.rocketmq.remoting.protocol.route``)."""

from rmqlab.remoting.protocol.route.topic_route_data import MASTER_ID, BrokerData, QueueData, TopicRouteData

__all__ = ["MASTER_ID", "BrokerData", "QueueData", "TopicRouteData"]
