"""The gRPC surface of the Proxy: `apache.rocketmq.v2.MessagingService` (rocketmq-apis).

definition_pb2 / service_pb2 are generated (see generate.py); the rest mirrors RocketMQ's
proxy/grpc/v2 package: one activity per group of RPCs, the converter between gRPC messages and
RocketMQ messages, the validator, the response builder and the client settings manager. None of
these modules touch grpcio: rmqlab.proxy.grpc.grpc_server adapts them to a grpc.aio server.
"""
