"""AckMessageActivity, ChangeInvisibleDurationActivity and ForwardMessageToDLQActivity
(proxy/grpc/v2/consumer/, producer/ForwardMessageToDLQActivity.java): what a consumer does with
a receipt handle. Acks go one by one (enableBatchAck is off by default); each entry gets its own
status and the response's status is OK, MULTIPLE_RESULTS or the one shared code. A handle that
does not parse is INVALID_RECEIPT_HANDLE; an expired one too (MessagingProcessor).
"""

from __future__ import annotations

from rmqlab.client.consumer.ack_result import AckStatus
from rmqlab.common.consumer.receipt_handle import ReceiptHandle
from rmqlab.config.proxy import ProxyConfig
from rmqlab.proto.v2 import service_pb2 as spb
from rmqlab.proxy.grpc.v2.common import Code, GrpcProxyException, build_status, status_of
from rmqlab.proxy.grpc.v2.grpc_validator import validate_consumer_group, validate_invisible_time, validate_topic
from rmqlab.proxy.grpc.v2.proxy_context import ProxyContext


def decode_handle(handle: str) -> ReceiptHandle:
    try:
        return ReceiptHandle.decode(handle)
    except ValueError as e:
        raise GrpcProxyException(Code.INVALID_RECEIPT_HANDLE, f"receipt handle is invalid: {e}") from None


def overall_status(codes: set[int]):
    if len(codes) > 1:
        return build_status(Code.MULTIPLE_RESULTS)
    if len(codes) == 1:
        return build_status(next(iter(codes)))
    return build_status(Code.INTERNAL_SERVER_ERROR, "ack message status is empty")


class AckMessageActivity:
    def __init__(self, processor, config: ProxyConfig):
        self.processor = processor
        self.config = config

    async def ack_message(self, ctx: ProxyContext, request: spb.AckMessageRequest) -> spb.AckMessageResponse:
        validate_topic(request.topic)
        validate_consumer_group(request.group)
        entries = []
        for entry in request.entries:
            try:
                result = await self.processor.ack_message(decode_handle(entry.receipt_handle), entry.message_id,
                                                          request.group.name, request.topic.name)
                status = build_status(Code.OK) if result.status == AckStatus.OK else \
                    build_status(Code.INTERNAL_SERVER_ERROR, "ack failed: status is abnormal")
            except Exception as e:
                status = status_of(e)
            entries.append(spb.AckMessageResultEntry(message_id=entry.message_id, receipt_handle=entry.receipt_handle,
                                                     status=status))
        return spb.AckMessageResponse(status=overall_status({e.status.code for e in entries}), entries=entries)

    async def change_invisible_duration(self, ctx: ProxyContext, request: spb.ChangeInvisibleDurationRequest
                                        ) -> spb.ChangeInvisibleDurationResponse:
        validate_topic(request.topic)
        validate_consumer_group(request.group)
        invisible = request.invisible_duration.ToMilliseconds()
        validate_invisible_time(invisible, 0, self.config.maxInvisibleTimeMills)
        handle = decode_handle(request.receipt_handle)
        result = await self.processor.change_invisible_time(handle, request.message_id, request.group.name,
                                                            request.topic.name, invisible)
        if result.status != AckStatus.OK:
            return spb.ChangeInvisibleDurationResponse(
                status=build_status(Code.INTERNAL_SERVER_ERROR, "changeInvisibleTime failed: status is abnormal"))
        return spb.ChangeInvisibleDurationResponse(status=build_status(Code.OK), receipt_handle=result.extra_info)

    async def forward_message_to_dead_letter_queue(self, ctx: ProxyContext,
                                                   request: spb.ForwardMessageToDeadLetterQueueRequest
                                                   ) -> spb.ForwardMessageToDeadLetterQueueResponse:
        validate_topic(request.topic)
        validate_consumer_group(request.group)
        handle = decode_handle(request.receipt_handle)
        await self.processor.forward_message_to_dead_letter_queue(
            handle, request.message_id, request.group.name, request.topic.name, request.max_delivery_attempts)
        return spb.ForwardMessageToDeadLetterQueueResponse(status=build_status(Code.OK))
