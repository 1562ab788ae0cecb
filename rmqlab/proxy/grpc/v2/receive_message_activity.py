"""ReceiveMessageActivity and ReceiveMessageResponseStreamWriter (proxy/grpc/v2/consumer/):
ReceiveMessage as a server stream: `{status}`, then one `{message}` per message, then
`{delivery_timestamp}`.

Polling time: the request's long_polling_timeout, else the time left minus half the request
timeout, clamped to [grpcClientConsumerMinLongPollingTimeoutMillis, ...Max...] and to the time
left before the caller's deadline; when even the minimum does not fit, ILLEGAL_POLLING_TIME
(BAD_REQUEST for clients older than 5.0.3). The broker holds the pop for the polling time minus
longPollingReserveTimeInMillis, so the answer is on the wire before the client gives up.

Invisible time: the request's invisible_duration, checked against minInvisibleTimeMillsForRecv
and maxInvisibleTimeMills; a PushConsumer's request (auto_renew, no duration) gets
defaultInvisibleTimeMills. Deviation: RocketMQ's Proxy then renews such handles in the
background while the client lives (ReceiptHandleProcessor); rmqlab's does not, so a push
consumer that holds a message longer than defaultInvisibleTimeMills (60 s) sees it again.

A message that cannot be written to the stream (the client went away) is nacked with a 1 s
invisible time, so it comes back soon instead of after its full invisible time.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator

from rmqlab.client.consumer.pop_result import PopStatus
from rmqlab.common.consumer.receipt_handle import ReceiptHandle
from rmqlab.common.message.message_const import MessageConst
from rmqlab.config.proxy import ProxyConfig
from rmqlab.proto.v2 import definition_pb2 as pb
from rmqlab.proto.v2 import service_pb2 as spb
from rmqlab.proxy.grpc.v2.common import Code, GrpcProxyException, build_status, status_of
from rmqlab.proxy.grpc.v2.grpc_converter import build_message, timestamp_from_millis
from rmqlab.proxy.grpc.v2.grpc_validator import validate_consumer_group, validate_invisible_time, validate_topic
from rmqlab.proxy.grpc.v2.proxy_context import ProxyContext

log = logging.getLogger("rmqlab.proxy")

ILLEGAL_POLLING_TIME_INTRODUCED_CLIENT_VERSION = "5.0.3"
NACK_INVISIBLE_TIME_MS = 1000
POP_TIMEOUT_EXTRA_MS = 3000


class ReceiveMessageActivity:
    def __init__(self, processor, settings_manager, config: ProxyConfig):
        self.processor = processor
        self.settings_manager = settings_manager
        self.config = config
        self.inflight: set[asyncio.Task] = set()  # pops and nacks running on their own: kept referenced

    def _polling_time(self, ctx: ProxyContext, request: spb.ReceiveMessageRequest, settings) -> int:
        c = self.config
        remaining = ctx.remaining_ms if ctx.remaining_ms is not None else float("inf")
        if request.HasField("long_polling_timeout"):
            polling = request.long_polling_timeout.ToMilliseconds()
        else:
            request_timeout = settings.request_timeout.ToMilliseconds() if settings is not None else 3000
            polling = remaining - request_timeout / 2
        polling = max(polling, c.grpcClientConsumerMinLongPollingTimeoutMillis)
        polling = min(polling, c.grpcClientConsumerMaxLongPollingTimeoutMillis)
        if polling > remaining:
            if remaining >= c.grpcClientConsumerMinLongPollingTimeoutMillis:
                polling = remaining
            else:
                old = not ctx.client_version or ctx.client_version < ILLEGAL_POLLING_TIME_INTRODUCED_CLIENT_VERSION
                raise GrpcProxyException(Code.BAD_REQUEST if old else Code.ILLEGAL_POLLING_TIME,
                                         "The deadline time remaining is not enough for polling, please check "
                                         "network condition")
        return int(polling)

    async def receive_message(self, ctx: ProxyContext,
                              request: spb.ReceiveMessageRequest) -> AsyncIterator[spb.ReceiveMessageResponse]:
        try:
            messages = await self._receive(ctx, request)
        except Exception as e:
            yield spb.ReceiveMessageResponse(status=status_of(e))
            yield self._delivery_timestamp()
            return
        if messages is None:
            yield spb.ReceiveMessageResponse(status=build_status(Code.MESSAGE_NOT_FOUND, "no new message"))
        elif messages == "POLLING_FULL":
            yield spb.ReceiveMessageResponse(status=build_status(Code.TOO_MANY_REQUESTS, "polling full"))
        elif not messages:
            yield spb.ReceiveMessageResponse(status=build_status(Code.MESSAGE_NOT_FOUND, "no match message"))
        else:
            pending = list(messages)
            try:
                yield spb.ReceiveMessageResponse(status=build_status(Code.OK))
                while pending:
                    yield spb.ReceiveMessageResponse(message=build_message(pending[0], self.processor.now_ms()))
                    pending.pop(0)
            finally:
                if pending:  # the stream broke (client gone, cancelled): hand them back soon
                    self._nack(request, pending)
        yield self._delivery_timestamp()

    def _delivery_timestamp(self) -> spb.ReceiveMessageResponse:
        return spb.ReceiveMessageResponse(delivery_timestamp=timestamp_from_millis(self.processor.now_ms()))

    def _nack(self, request: spb.ReceiveMessageRequest, messages) -> None:
        group, topic = request.group.name, request.message_queue.topic.name

        async def nack():
            for msg in messages:
                try:
                    handle = ReceiptHandle.decode(msg.properties[MessageConst.PROPERTY_POP_CK])
                    await self.processor.change_invisible_time(handle, msg.msg_id, group, topic,
                                                               NACK_INVISIBLE_TIME_MS)
                except Exception as e:
                    log.warning("proxy: nack after a broken receive stream failed: %s", e)

        self._track(asyncio.get_running_loop().create_task(nack()))

    def _track(self, task: asyncio.Task) -> asyncio.Task:
        self.inflight.add(task)
        task.add_done_callback(self.inflight.discard)
        return task

    async def _receive(self, ctx: ProxyContext, request: spb.ReceiveMessageRequest):
        """The found messages; None for no message; "POLLING_FULL" when the broker says so."""
        settings = self.settings_manager.get_raw_client_settings(ctx.client_id)
        polling = self._polling_time(ctx, request, settings)
        validate_topic(request.message_queue.topic)
        validate_consumer_group(request.group)
        topic, group = request.message_queue.topic.name, request.group.name
        c = self.config
        if c.enableProxyAutoRenew and request.auto_renew:
            invisible = c.defaultInvisibleTimeMills
        else:
            invisible = request.invisible_duration.ToMilliseconds()
            validate_invisible_time(invisible, c.minInvisibleTimeMillsForRecv, c.maxInvisibleTimeMills)
        fe = request.filter_expression
        exp_type = "SQL92" if fe.type == pb.SQL else "TAG"
        if exp_type == "SQL92":
            raise GrpcProxyException(Code.ILLEGAL_FILTER_EXPRESSION, "SQL92 filtering is not supported by rmqlab's broker")
        group_config = await self.processor.metadata.get_subscription_group_config(group)
        merged = self.settings_manager.merge(settings, group_config) if settings is not None else None
        fifo = merged.subscription.fifo if merged is not None else bool(
            group_config is not None and group_config.consume_message_orderly)
        max_attempts = merged.backoff_policy.max_attempts if merged is not None else \
            (group_config.retry_max_times + 1 if group_config is not None else 17)
        poll_ms = max(0, polling - c.longPollingReserveTimeInMillis)
        # The pop runs as its own task: if the caller goes away meanwhile, the messages it finds
        # are still handed back (nacked) instead of staying invisible for the full time.
        task = self._track(asyncio.get_running_loop().create_task(self.processor.pop_message(
            request.message_queue.broker.name, group, topic, request.batch_size or 32, invisible, poll_ms, fifo,
            exp_type, fe.expression or "*", request.attempt_id if request.HasField("attempt_id") else None,
            max_attempts, poll_ms + POP_TIMEOUT_EXTRA_MS)))
        try:
            result = await asyncio.shield(task)
        except asyncio.CancelledError:
            task.add_done_callback(lambda t: self._nack_found(request, t))
            raise
        if result.pop_status == PopStatus.FOUND:
            return result.msg_found_list
        if result.pop_status == PopStatus.POLLING_FULL:
            return "POLLING_FULL"
        return None

    def _nack_found(self, request, task: asyncio.Task) -> None:
        if task.cancelled() or task.exception() is not None:
            return
        result = task.result()
        if result.pop_status == PopStatus.FOUND and result.msg_found_list:
            self._nack(request, result.msg_found_list)
