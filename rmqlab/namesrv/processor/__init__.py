"""The name server's request processors (``org.apache.rocketmq.namesrv.processor``)."""

from rmqlab.namesrv.processor.client_request_processor import ClientRequestProcessor, topic_not_exist_remark
from rmqlab.namesrv.processor.default_request_processor import DefaultRequestProcessor

__all__ = ["ClientRequestProcessor", "DefaultRequestProcessor", "topic_not_exist_remark"]
