"""GrpcProxyException and ResponseBuilder (proxy/grpc/v2/common/GrpcProxyException.java,
ResponseBuilder.java): how an error anywhere in the Proxy becomes a `Status{code, message}`.

Remoting response codes map to gRPC codes through RocketMQ's small table; everything not in it
is INTERNAL_SERVER_ERROR, as in RocketMQ. A name server's TOPIC_NOT_EXIST becomes TOPIC_NOT_FOUND
(TopicRouteHelper.isTopicNotExistError).
"""

from __future__ import annotations

import logging

from rmqlab.client.exceptions import MQBrokerException, MQClientException
from rmqlab.proto.status import code_name
from rmqlab.proto.v2 import definition_pb2 as pb
from rmqlab.remoting.exceptions import RemotingConnectError, RemotingTimeoutError
from rmqlab.remoting.response_code import ResponseCode

log = logging.getLogger("rmqlab.proxy")

Code = pb.Code

# ClientErrorCode.ACCESS_BROKER_TIMEOUT (a client-side code, not a broker response code).
ACCESS_BROKER_TIMEOUT = 10004

RESPONSE_CODE_MAPPING = {
    ResponseCode.SUCCESS: Code.OK,
    ResponseCode.SYSTEM_BUSY: Code.TOO_MANY_REQUESTS,
    ResponseCode.REQUEST_CODE_NOT_SUPPORTED: Code.NOT_IMPLEMENTED,
    ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST: Code.CONSUMER_GROUP_NOT_FOUND,
    ACCESS_BROKER_TIMEOUT: Code.PROXY_TIMEOUT,
}


class GrpcProxyException(Exception):
    """An error the Proxy answers with a given gRPC code (GrpcProxyException)."""

    def __init__(self, code: int, message: str):
        super().__init__(message)
        self.code = code
        self.message = message


def build_status(code: int, message: str | None = None) -> pb.Status:
    return pb.Status(code=code, message=message if message is not None else code_name(code))


def build_code(remoting_response_code: int) -> int:
    return RESPONSE_CODE_MAPPING.get(remoting_response_code, Code.INTERNAL_SERVER_ERROR)


def status_of(error: BaseException) -> pb.Status:
    """ResponseBuilder.buildStatus(Throwable)."""
    if isinstance(error, GrpcProxyException):
        return build_status(error.code, error.message)
    if isinstance(error, MQClientException) and error.response_code == ResponseCode.TOPIC_NOT_EXIST:
        return build_status(Code.TOPIC_NOT_FOUND, error.error_message)
    if isinstance(error, MQBrokerException):
        return build_status(build_code(error.response_code), error.error_message or str(error.response_code))
    if isinstance(error, MQClientException):
        return build_status(build_code(error.response_code), error.error_message)
    if isinstance(error, RemotingTimeoutError):
        return build_status(Code.PROXY_TIMEOUT, str(error))
    if isinstance(error, RemotingConnectError):
        # RocketMQ has no entry for it either: a broker that cannot be reached is an internal error
        # (the client retries a send on another queue).
        return build_status(Code.INTERNAL_SERVER_ERROR, str(error))
    log.error("internal server error", exc_info=error)
    return build_status(Code.INTERNAL_SERVER_ERROR, f"{type(error).__name__}: {error}")
