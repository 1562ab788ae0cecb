"""The gRPC surface of the Proxy: `apache.rocketmq.v2.MessagingService` (rocketmq-apis).

The message classes are in rmqlab.proto.v2 (shared with the client); these modules mirror RocketMQ's
proxy/grpc/v2 package: one activity per group of RPCs, the converter between gRPC messages and
RocketMQ messages, the validator, the response builder and the client settings manager. None of
these modules touch grpcio: rmqlab.proxy.grpc.grpc_server adapts them to a grpc.aio server.
"""
