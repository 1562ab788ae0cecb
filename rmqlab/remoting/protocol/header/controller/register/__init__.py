"""Broker registration headers (``org.apache.rocketmq.remoting.protocol.header.controller.register``)."""

from rmqlab.remoting.protocol.header.controller.register.apply_broker_id_header import (ApplyBrokerIdRequestHeader,
                                                                                       ApplyBrokerIdResponseHeader)
from rmqlab.remoting.protocol.header.controller.register.get_next_broker_id_header import (
    GetNextBrokerIdRequestHeader, GetNextBrokerIdResponseHeader)
from rmqlab.remoting.protocol.header.controller.register.register_broker_to_controller_header import (
    RegisterBrokerToControllerRequestHeader, RegisterBrokerToControllerResponseHeader)

__all__ = ["ApplyBrokerIdRequestHeader", "ApplyBrokerIdResponseHeader", "GetNextBrokerIdRequestHeader",
           "GetNextBrokerIdResponseHeader", "RegisterBrokerToControllerRequestHeader",
           "RegisterBrokerToControllerResponseHeader"]
