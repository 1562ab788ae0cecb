"""ClientActivity (proxy/grpc/v2/client/ClientActivity.java): Telemetry, Heartbeat and
NotifyClientTermination, the client's lifecycle.

A producer's Telemetry stream is also its channel for checks: its settings register it as a
producer of each of its topics (the topic is the group), and the Proxy writes a broker's
CHECK_TRANSACTION_STATE to it as RecoverOrphanedTransactionCommand (TransactionService).

Telemetry is a bidirectional stream. Every `settings` the client writes is checked (topics of a
producer, the group of a consumer; neither: INVALID_ARGUMENT), stored under the client id, and
answered at once with `{status OK, settings}` where settings are the client's merged with the
Proxy's (GrpcClientSettingsManager). Errors end the stream with a gRPC status, as RocketMQ does:
INVALID_ARGUMENT for a bad request (codes 40000-49999), INTERNAL otherwise.

The Proxy forgets a client when it says goodbye (NotifyClientTermination) or when its Telemetry
stream ends (the client went away): RocketMQ keeps such settings until a periodic scan finds no
consumer channel for them; dropping them with the stream leaves nothing behind sooner.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

from rmqlab.proto.v2 import definition_pb2 as pb
from rmqlab.proto.v2 import service_pb2 as spb
from rmqlab.proxy.grpc.v2.common import Code, GrpcProxyException, build_status
from rmqlab.proxy.grpc.v2.grpc_validator import validate_consumer_group, validate_topic
from rmqlab.proxy.grpc.v2.proxy_context import ProxyContext


class StreamAbort(Exception):
    """End a stream with a gRPC status (grpc.StatusCode name) instead of a message."""

    def __init__(self, grpc_code: str, message: str):
        super().__init__(message)
        self.grpc_code = grpc_code
        self.message = message


class ClientActivity:
    def __init__(self, processor, settings_manager):
        self.processor = processor
        self.settings_manager = settings_manager
        self.telemetry_streams: dict[str, int] = {}  # client id -> open Telemetry streams

    async def heartbeat(self, ctx: ProxyContext, request: spb.HeartbeatRequest) -> spb.HeartbeatResponse:
        settings = self.settings_manager.get_raw_client_settings(ctx.client_id)
        if settings is None:
            return spb.HeartbeatResponse(status=build_status(Code.UNRECOGNIZED_CLIENT_TYPE,
                                                             "cannot find client settings for this client"))
        if settings.client_type in (pb.PUSH_CONSUMER, pb.SIMPLE_CONSUMER):
            validate_consumer_group(request.group)
        elif settings.client_type != pb.PRODUCER:
            return spb.HeartbeatResponse(status=build_status(Code.UNRECOGNIZED_CLIENT_TYPE,
                                                             pb.ClientType.Name(settings.client_type)))
        return spb.HeartbeatResponse(status=build_status(Code.OK))

    async def notify_client_termination(self, ctx: ProxyContext, request: spb.NotifyClientTerminationRequest
                                        ) -> spb.NotifyClientTerminationResponse:
        settings = self.settings_manager.remove_client_settings(ctx.client_id)
        if settings is None:
            return spb.NotifyClientTerminationResponse(status=build_status(
                Code.UNRECOGNIZED_CLIENT_TYPE, "cannot find client settings for this client"))
        if settings.client_type not in (pb.PRODUCER, pb.PUSH_CONSUMER, pb.SIMPLE_CONSUMER):
            return spb.NotifyClientTerminationResponse(status=build_status(
                Code.UNRECOGNIZED_CLIENT_TYPE, pb.ClientType.Name(settings.client_type)))
        return spb.NotifyClientTerminationResponse(status=build_status(Code.OK))

    async def telemetry(self, ctx: ProxyContext, commands: AsyncIterator[spb.TelemetryCommand]
                        ) -> AsyncIterator[spb.TelemetryCommand]:
        cid = ctx.client_id
        self.telemetry_streams[cid] = self.telemetry_streams.get(cid, 0) + 1
        try:
            async for command in commands:
                if command.WhichOneof("command") != "settings":
                    continue  # thread stack traces and verify results: only reported in RocketMQ
                try:
                    yield await self._process_settings(ctx, command.settings)
                except GrpcProxyException as e:
                    code = "INVALID_ARGUMENT" if Code.BAD_REQUEST <= e.code < Code.INTERNAL_ERROR else "INTERNAL"
                    raise StreamAbort(code, f"process client telemetryCommand failed. {e.message}") from None
        finally:
            left = self.telemetry_streams.get(cid, 1) - 1
            if left:
                self.telemetry_streams[cid] = left
            else:
                self.telemetry_streams.pop(cid, None)
                self.settings_manager.remove_client_settings(cid)
                if self.processor.transactions is not None:
                    self.processor.transactions.unregister_client(cid)

    async def _process_settings(self, ctx: ProxyContext, settings: pb.Settings) -> spb.TelemetryCommand:
        kind = settings.WhichOneof("pub_sub")
        group_config = None
        if kind == "publishing":
            for topic in settings.publishing.topics:
                validate_topic(topic)
            transactions = self.processor.transactions
            if transactions is not None and ctx.push is not None:
                # registerProducer: the topic is the producer group, this stream its channel.
                for topic in settings.publishing.topics:
                    transactions.register_producer(topic.name, ctx.client_id, ctx.push)
        elif kind == "subscription":
            validate_consumer_group(settings.subscription.group)
            group_config = await self.processor.metadata.get_subscription_group_config(
                settings.subscription.group.name)
        else:
            raise StreamAbort("INVALID_ARGUMENT", "there is no publishing or subscription data in settings")
        self.settings_manager.update_client_settings(ctx.client_id, settings)
        merged = self.settings_manager.merge(settings, group_config)
        return spb.TelemetryCommand(status=build_status(Code.OK), settings=merged)
