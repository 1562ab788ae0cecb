"""Custom headers of the name-server requests (``org.apache.rocketmq.remoting.protocol.header.namesrv``)."""

from rmqlab.remoting.protocol.header.namesrv.broker_heartbeat_request_header import BrokerHeartbeatRequestHeader
from rmqlab.remoting.protocol.header.namesrv.get_route_info_request_header import GetRouteInfoRequestHeader
from rmqlab.remoting.protocol.header.namesrv.query_data_version_header import (QueryDataVersionRequestHeader,
                                                                               QueryDataVersionResponseHeader)
from rmqlab.remoting.protocol.header.namesrv.register_broker_header import (ZONE_NAME, RegisterBrokerRequestHeader,
                                                                            RegisterBrokerResponseHeader)
from rmqlab.remoting.protocol.header.namesrv.unregister_broker_request_header import UnRegisterBrokerRequestHeader
from rmqlab.remoting.protocol.header.namesrv.write_perm_of_broker_header import (
    AddWritePermOfBrokerRequestHeader, AddWritePermOfBrokerResponseHeader, WipeWritePermOfBrokerRequestHeader,
    WipeWritePermOfBrokerResponseHeader)

__all__ = [
    "BrokerHeartbeatRequestHeader", "GetRouteInfoRequestHeader", "QueryDataVersionRequestHeader",
    "QueryDataVersionResponseHeader", "ZONE_NAME", "RegisterBrokerRequestHeader", "RegisterBrokerResponseHeader",
    "UnRegisterBrokerRequestHeader", "AddWritePermOfBrokerRequestHeader", "AddWritePermOfBrokerResponseHeader",
    "WipeWritePermOfBrokerRequestHeader", "WipeWritePermOfBrokerResponseHeader",
]
