"""The 5.x protocol that the 5.x client (rmqlab.client.grpc) and the Proxy (rmqlab.proxy.grpc) share.

RocketMQ keeps it apart from both, in the rocketmq-proto artifact (Java package
`apache.rocketmq.v2`, generated from https://github.com/apache/rocketmq-apis); a package of its
own here too, so that neither the client nor the Proxy imports the other for it, and the wire
format is one module that both ends read.

    v2/                  the generated message and service classes (definition_pb2, service_pb2)
    status.py            code names of a response's Status, as both ends trace them
    framed.py            framed RPC: gRPC calls on a plain byte stream, what the simulator carries
                         (a deviation from RocketMQ, which speaks gRPC over HTTP/2; see there)
    framed_connection.py one connection carrying framed RPC, at either end

Nothing here imports grpcio.
"""
