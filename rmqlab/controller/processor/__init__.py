"""The controller's remoting processor (``org.apache.rocketmq.controller.processor``)."""

from rmqlab.controller.processor.controller_request_processor import CONTROLLER_REQUEST_CODES, ControllerRequestProcessor

__all__ = ["CONTROLLER_REQUEST_CODES", "ControllerRequestProcessor"]
