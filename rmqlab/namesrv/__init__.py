"""The name server (RocketMQ's ``namesrv`` module): NamesrvController, the
component; RouteInfoManager, its route tables (pure, unit-testable); the request processors and
BrokerHousekeepingService. Wire formats live in ``rmqlab.remoting.protocol``.
"""

from rmqlab.namesrv.namesrv_controller import NamesrvController
from rmqlab.namesrv.processor import ClientRequestProcessor, DefaultRequestProcessor
from rmqlab.namesrv.routeinfo import (DEFAULT_BROKER_CHANNEL_EXPIRED_TIME, BrokerAddrInfo,
                                      BrokerHousekeepingService, BrokerLiveInfo, RouteInfoManager)

__all__ = ["NamesrvController", "ClientRequestProcessor", "DefaultRequestProcessor",
           "DEFAULT_BROKER_CHANNEL_EXPIRED_TIME", "BrokerAddrInfo", "BrokerHousekeepingService", "BrokerLiveInfo",
           "RouteInfoManager"]
