"""GrpcMessagingActivity (DefaultGrpcMessingActivity + GrpcMessagingApplication): the table of
MessagingService methods, each with its shape, message classes and the activity that serves it,
and the rule that turns an error into an answer.

    method                           shape            activity
    QueryRoute                       unary            RouteActivity.query_route
    Heartbeat                        unary            ClientActivity.heartbeat
    SendMessage                      unary            SendMessageActivity.send_message
    QueryAssignment                  unary            RouteActivity.query_assignment
    ReceiveMessage                   server stream    ReceiveMessageActivity.receive_message
    AckMessage                       unary            AckMessageActivity.ack_message
    ForwardMessageToDeadLetterQueue  unary            AckMessageActivity.forward_message_to_dead_letter_queue
    Telemetry                        bidi stream      ClientActivity.telemetry
    NotifyClientTermination          unary            ClientActivity.notify_client_termination
    ChangeInvisibleDuration          unary            AckMessageActivity.change_invisible_duration
    EndTransaction                   unary            EndTransactionActivity.end_transaction

Methods not in the table (PullMessage, UpdateOffset, GetOffset, QueryOffset,
RecallMessage, SyncLiteSubscription) are answered UNIMPLEMENTED by the transport.

Errors: a unary method answers its own response type with `status` from the error
(GrpcMessagingApplication.generateErrorResult); a stream ends with a status message
(ReceiveMessage) or a gRPC status (Telemetry, StreamAbort). Nothing here touches sockets.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any
from collections.abc import Callable

from google.protobuf.message import DecodeError

from rmqlab.config.proxy import ProxyConfig
from rmqlab.proto.v2 import service_pb2 as spb
from rmqlab.proxy.grpc.v2.ack_message_activity import AckMessageActivity
from rmqlab.proxy.grpc.v2.client_activity import ClientActivity
from rmqlab.proxy.grpc.v2.common import status_of
from rmqlab.proxy.grpc.v2.end_transaction_activity import EndTransactionActivity
from rmqlab.proxy.grpc.v2.grpc_client_settings_manager import GrpcClientSettingsManager
from rmqlab.proxy.grpc.v2.receive_message_activity import ReceiveMessageActivity
from rmqlab.proxy.grpc.v2.route_activity import RouteActivity
from rmqlab.proxy.grpc.v2.send_message_activity import SendMessageActivity

SERVICE_NAME = "apache.rocketmq.v2.MessagingService"
UNARY, SERVER_STREAM, BIDI_STREAM = "unary", "server_stream", "bidi_stream"


@dataclass(frozen=True)
class MethodSpec:
    name: str
    shape: str
    request: type
    response: type
    handler: Callable[..., Any]

    def parse_request(self, data: bytes):
        """The request message from its bytes; InvalidRequest (the transport answers
        INVALID_ARGUMENT with its text) when they are not one."""
        try:
            return self.request.FromString(data)
        except DecodeError as e:
            raise InvalidRequest(f"{self.name}: the request is not a valid "
                                 f"{self.request.DESCRIPTOR.full_name}: {e}") from None


class InvalidRequest(ValueError):
    """Request bytes that do not parse as the method's request message."""


class GrpcMessagingActivity:
    def __init__(self, processor, config: ProxyConfig):
        self.settings_manager = GrpcClientSettingsManager(config)
        self.route = RouteActivity(processor)
        self.client = ClientActivity(processor, self.settings_manager)
        self.send = SendMessageActivity(processor, config)
        self.receive = ReceiveMessageActivity(processor, self.settings_manager, config)
        self.ack = AckMessageActivity(processor, config)
        self.transaction = EndTransactionActivity(processor)
        self.methods: dict[str, MethodSpec] = {m.name: m for m in (
            MethodSpec("QueryRoute", UNARY, spb.QueryRouteRequest, spb.QueryRouteResponse, self.route.query_route),
            MethodSpec("Heartbeat", UNARY, spb.HeartbeatRequest, spb.HeartbeatResponse, self.client.heartbeat),
            MethodSpec("SendMessage", UNARY, spb.SendMessageRequest, spb.SendMessageResponse, self.send.send_message),
            MethodSpec("QueryAssignment", UNARY, spb.QueryAssignmentRequest, spb.QueryAssignmentResponse,
                       self.route.query_assignment),
            MethodSpec("ReceiveMessage", SERVER_STREAM, spb.ReceiveMessageRequest, spb.ReceiveMessageResponse,
                       self.receive.receive_message),
            MethodSpec("AckMessage", UNARY, spb.AckMessageRequest, spb.AckMessageResponse, self.ack.ack_message),
            MethodSpec("ForwardMessageToDeadLetterQueue", UNARY, spb.ForwardMessageToDeadLetterQueueRequest,
                       spb.ForwardMessageToDeadLetterQueueResponse, self.ack.forward_message_to_dead_letter_queue),
            MethodSpec("Telemetry", BIDI_STREAM, spb.TelemetryCommand, spb.TelemetryCommand, self.client.telemetry),
            MethodSpec("NotifyClientTermination", UNARY, spb.NotifyClientTerminationRequest,
                       spb.NotifyClientTerminationResponse, self.client.notify_client_termination),
            MethodSpec("ChangeInvisibleDuration", UNARY, spb.ChangeInvisibleDurationRequest,
                       spb.ChangeInvisibleDurationResponse, self.ack.change_invisible_duration),
            MethodSpec("EndTransaction", UNARY, spb.EndTransactionRequest, spb.EndTransactionResponse,
                       self.transaction.end_transaction),
        )}

    async def call_unary(self, spec: MethodSpec, ctx, request):
        try:
            return await spec.handler(ctx, request)
        except Exception as e:
            return spec.response(status=status_of(e))
