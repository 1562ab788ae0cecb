"""rmqlab's client of the 5.x protocol (`apache.rocketmq.v2.MessagingService`, through a Proxy),
named after the official clients (rocketmq-clients): Producer.send, transactions
(Producer.begin_transaction, a transaction checker), SimpleConsumer.receive / ack,
QueryRoute, the Telemetry settings exchange, heartbeats.

    client.py            ClientConfiguration, ClientException, the shared client (routes, settings
                         sessions, endpoint isolation, heartbeat)
    producer.py          Producer, SendReceipt
    simple_consumer.py   SimpleConsumer
    message_view.py      MessageView: a received message
    message_id_codec.py  the V1 message id (the message's UNIQ_KEY)
    rpc.py               the transport interface, RpcError
    framed_transport.py  framed RPC over the node's streams (the simulator)
    grpcio_transport.py  grpc.aio (real processes); the only module here that imports grpcio

The client core never touches grpcio: on a simulator node it speaks framed RPC to the Proxy's
FramedGrpcServer, on the real runtime gRPC to its GrpcServer. Its operations are traced as
`client` events (send, receive, ack) like rmqlab's remoting clients'.
"""

from rmqlab.client.grpc.client import ClientConfiguration, ClientException
from rmqlab.client.grpc.message_view import MessageView
from rmqlab.client.grpc.producer import Producer, SendReceipt
from rmqlab.client.grpc.rpc import RpcError
from rmqlab.client.grpc.simple_consumer import SimpleConsumer

__all__ = ["ClientConfiguration", "ClientException", "MessageView", "Producer", "RpcError", "SendReceipt",
           "SimpleConsumer"]
