"""The name server's route tables (``org.apache.rocketmq.namesrv.routeinfo``)."""

from rmqlab.namesrv.routeinfo.broker_housekeeping_service import BrokerHousekeepingService
from rmqlab.namesrv.routeinfo.route_info_manager import (DEFAULT_BROKER_CHANNEL_EXPIRED_TIME, BrokerAddrInfo,
                                                         BrokerLiveInfo, MinBrokerIdChange, RouteInfoManager)

__all__ = ["BrokerHousekeepingService", "DEFAULT_BROKER_CHANNEL_EXPIRED_TIME", "BrokerAddrInfo", "BrokerLiveInfo",
           "MinBrokerIdChange", "RouteInfoManager"]
