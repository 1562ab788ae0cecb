"""EndTransactionActivity (proxy/grpc/v2/transaction/EndTransactionActivity.java): a 5.x client
commits or rolls back its half message, or answers the Proxy's RecoverOrphanedTransactionCommand.

    topic not valid                       the topic's validation code (ILLEGAL_TOPIC, ...)
    blank transaction_id                  INVALID_TRANSACTION_ID
    resolution COMMIT / ROLLBACK / other  commitOrRollback 8 / 12 / 0 (MessageSysFlag)
    source SOURCE_SERVER_CHECK            fromTransactionCheck = true
    no transaction data in the Proxy      INTERNAL_SERVER_ERROR "cannot found transaction data"
                                          (ProxyExceptionCode.TRANSACTION_DATA_NOT_FOUND has no
                                          gRPC code of its own in GrpcProxyException's table)

The producer group is the topic, as for the send. END_TRANSACTION is oneway, so OK says that the
Proxy sent it, not that the broker ended the transaction (the broker's check covers a lost one).
"""

from __future__ import annotations

from rmqlab.proto.v2 import definition_pb2 as pb
from rmqlab.proto.v2 import service_pb2 as spb
from rmqlab.proxy.grpc.v2.common import Code, GrpcProxyException, build_status
from rmqlab.proxy.grpc.v2.grpc_validator import validate_topic
from rmqlab.proxy.grpc.v2.proxy_context import ProxyContext
from rmqlab.proxy.service.transaction_service import commit_or_rollback_of


class EndTransactionActivity:
    def __init__(self, processor):
        self.processor = processor

    async def end_transaction(self, ctx: ProxyContext, request: spb.EndTransactionRequest
                              ) -> spb.EndTransactionResponse:
        validate_topic(request.topic)
        if not request.transaction_id.strip():
            raise GrpcProxyException(Code.INVALID_TRANSACTION_ID, "transaction id cannot be empty")
        topic = request.topic.name
        await self.processor.end_transaction(topic, request.transaction_id, request.message_id, topic,
                                             commit_or_rollback_of(request.resolution),
                                             request.source == pb.SOURCE_SERVER_CHECK)
        return spb.EndTransactionResponse(status=build_status(Code.OK))
