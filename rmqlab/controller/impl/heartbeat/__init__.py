"""Broker liveness on the controller (``org.apache.rocketmq.controller.impl.heartbeat``)."""

from rmqlab.controller.impl.heartbeat.broker_identity_info import BrokerIdentityInfo
from rmqlab.controller.impl.heartbeat.broker_live_info import BrokerLiveInfo
from rmqlab.controller.impl.heartbeat.default_broker_heartbeat_manager import (DEFAULT_BROKER_CHANNEL_EXPIRED_TIME,
                                                                              DefaultBrokerHeartbeatManager)

__all__ = ["BrokerIdentityInfo", "BrokerLiveInfo", "DEFAULT_BROKER_CHANNEL_EXPIRED_TIME",
           "DefaultBrokerHeartbeatManager"]
