"""The RocketMQ 5.x Proxy: gRPC in front, remoting behind; Local or Cluster mode, as in
RocketMQ's deployment guide ("部署方式", https://rocketmq.apache.org/zh/docs/deploymentOperations/01deploy).

    proxy_controller.py   the component: Cluster mode (`rmqlab proxy`) or Local mode (in a broker)
    grpc/grpc_server.py   grpc.aio server: the only module that touches grpcio
    grpc/framed*.py       the simulator's transport (grpcio cannot use its network): the same
                          MessagingService as framed RPC on the node's streams; framed.py is the
                          protocol core (frame table, codec), framed_server.py the Proxy's side
    in_process.py         the simulator's Local-mode Proxy reaches its broker through a pipe
    grpc/v2/              MessagingService: generated classes, the method table, one activity per
                          group of RPCs, settings, converter, validator, status codes
    processor/            MessagingProcessor: send, pop, ack, change invisible time, end
                          transaction over remoting
    service/              routes (name server or local broker), metadata (topic message type,
                          subscription group config), transactions (transaction data, the
                          producer heartbeats, the check relay to the client's Telemetry stream)
"""
