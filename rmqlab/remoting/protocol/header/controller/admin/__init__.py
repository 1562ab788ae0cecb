"""Controller admin headers (``org.apache.rocketmq.remoting.protocol.header.controller.admin``)."""

from rmqlab.remoting.protocol.header.controller.admin.clean_controller_broker_data_request_header import (
    CleanControllerBrokerDataRequestHeader)

__all__ = ["CleanControllerBrokerDataRequestHeader"]
