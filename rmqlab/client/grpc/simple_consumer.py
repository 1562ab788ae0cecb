"""SimpleConsumer (client-java's impl/consumer/SimpleConsumerImpl.java): receive and ack through a
5.x Proxy, consumption by POP (the state lives in the broker).

    consumer = SimpleConsumer(ClientConfiguration("127.0.0.1:8081"), "GID", {"TopicTest": "*"})
    views = await consumer.receive(16, invisible_duration_ms=15_000)   # long polling await_duration_ms
    await consumer.ack(views[0])

receive: the next subscribed topic (round robin), then the next readable queue of a master broker
in its route (SubscriptionLoadBalancer; endpoints that did not answer are skipped, see
_next_queue), a ReceiveMessage to that broker's endpoint waiting up to
await_duration for messages (the request's long_polling_timeout; the call's deadline is the
request timeout plus that). No message: an empty list. The messages stay invisible to the group
for the invisible duration unless acked (ack goes to the endpoint they came through).

Trace (rmqlab.client.operation_tracer): `receive` - invoke {topic, group, broker_name, queue_id,
endpoint}, ok {"messages": [...]} (each as describe_message describes it, plus the broker it came
from), like a pull's value; `ack` - invoke {topic, uniq_key, broker_name, queue_id, queue_offset},
ok null. A receive or ack that failed is `fail` when it cannot have happened, `info` otherwise (a
receive that timed out may have made messages invisible).
"""

from __future__ import annotations

from rmqlab.client.grpc.client import Client, ClientConfiguration, ClientException, duration_of, endpoint_of
from rmqlab.client.grpc.message_view import MessageView
from rmqlab.client.grpc.rpc import RpcError, RpcTransport
from rmqlab.client.operation_tracer import describe_message
from rmqlab.proto.v2 import definition_pb2 as pb
from rmqlab.proto.v2 import service_pb2 as spb

Code = pb.Code
DEFAULT_AWAIT_DURATION_MS = 5_000


class SimpleConsumer(Client):
    client_type = pb.SIMPLE_CONSUMER

    def __init__(self, configuration: ClientConfiguration, consumer_group: str, subscriptions: dict[str, str],
                 await_duration_ms: int = DEFAULT_AWAIT_DURATION_MS, transport: RpcTransport | None = None):
        super().__init__(configuration, transport)
        if not subscriptions:
            raise ValueError("a SimpleConsumer needs at least one subscription (topic -> tag expression)")
        self.consumer_group = consumer_group
        self.subscriptions = dict(subscriptions)
        self.await_duration_ms = await_duration_ms
        self._topic_index = 0
        self._queue_index: dict[str, int] = {}

    def topics(self) -> list[str]:
        return list(self.subscriptions)

    def _group(self) -> pb.Resource:
        return pb.Resource(name=self.consumer_group)

    def settings(self) -> pb.Settings:
        s = super().settings()
        s.subscription.group.CopyFrom(self._group())
        for topic, expression in self.subscriptions.items():
            s.subscription.subscriptions.add(topic=pb.Resource(name=topic),
                                             expression=pb.FilterExpression(type=pb.TAG, expression=expression))
        s.subscription.long_polling_timeout.FromMilliseconds(self.await_duration_ms)
        return s

    def heartbeat_request(self) -> spb.HeartbeatRequest:
        return spb.HeartbeatRequest(client_type=self.client_type, group=self._group())

    def termination_request(self) -> spb.NotifyClientTerminationRequest:
        return spb.NotifyClientTerminationRequest(group=self._group())

    async def _next_queue(self, topic: str) -> pb.MessageQueue:
        queues = [q for q in await self.route(topic) if q.broker.id == 0 and q.permission in (pb.READ, pb.READ_WRITE)]
        if not queues:
            raise ClientException(Code.FORBIDDEN, f"no readable queue of topic {topic} in the route", maybe_done=False)
        # Deviation: Java's SimpleConsumer takes the next queue whatever happened to its endpoint;
        # this one skips endpoints a receive could not reach (isolated, as the producer does) while
        # others are left, or a dead Local-mode Proxy would take every other receive for its timeout.
        reachable = [q for q in queues if endpoint_of(q.broker.endpoints) not in self.isolated]
        queues = reachable or queues
        index = self._queue_index.get(topic)
        if index is None:
            index = self.node.random.randrange(2 ** 31)
        self._queue_index[topic] = index + 1
        return queues[index % len(queues)]

    async def receive(self, max_message_num: int = 16, invisible_duration_ms: int = 15_000) -> list[MessageView]:
        if not self.running:
            raise ClientException(None, "consumer is not running", grpc_code="FAILED_PRECONDITION", maybe_done=False)
        if max_message_num <= 0:
            raise ValueError("max_message_num must be greater than 0")
        topics = list(self.subscriptions)
        topic = topics[self._topic_index % len(topics)]
        self._topic_index += 1
        mq = await self._next_queue(topic)
        endpoint = endpoint_of(mq.broker.endpoints)
        op = self.tracer.invoke("receive", {"topic": topic, "group": self.consumer_group, "broker_name": mq.broker.name,
                                            "queue_id": mq.id, "endpoint": endpoint})
        request = spb.ReceiveMessageRequest(
            group=self._group(), message_queue=mq, batch_size=max_message_num,
            filter_expression=pb.FilterExpression(type=pb.TAG, expression=self.subscriptions[topic]),
            invisible_duration=duration_of(invisible_duration_ms),
            long_polling_timeout=duration_of(self.await_duration_ms), auto_renew=False)
        try:
            views = await self._receive(request, mq, endpoint)
        except ClientException as e:
            (op.info if e.maybe_done else op.fail)(None, str(e))
            raise
        op.ok({"messages": [dict(describe_message(v.to_message_ext()), broker_name=v.broker_name) for v in views]})
        return views

    async def _receive(self, request: spb.ReceiveMessageRequest, mq: pb.MessageQueue, endpoint: str) -> list[MessageView]:
        self._session(endpoint)
        status: pb.Status | None = None
        messages: list[pb.Message] = []
        try:
            async for response in self.transport.server_stream(
                    endpoint, "ReceiveMessage", request, spb.ReceiveMessageResponse, self.metadata(),
                    self.configuration.request_timeout_ms + self.await_duration_ms):
                which = response.WhichOneof("content")
                if which == "status":
                    status = response.status
                elif which == "message":
                    messages.append(response.message)
        except RpcError as e:
            self.isolated.add(endpoint)
            raise ClientException.from_rpc(e) from None
        if status is None:
            raise ClientException(Code.INTERNAL_ERROR, "the receive stream carried no status")
        if status.code == Code.MESSAGE_NOT_FOUND:
            return []
        if status.code != Code.OK:
            raise ClientException.from_status(status)
        return [MessageView.from_protobuf(m, mq.broker.name, endpoint) for m in messages]

    async def ack(self, view: MessageView) -> None:
        """Ack one received message through the endpoint it came from; ClientException on failure."""
        op = self.tracer.invoke("ack", {"topic": view.topic, "uniq_key": view.message_id, "broker_name": view.broker_name,
                                        "queue_id": view.queue_id, "queue_offset": view.queue_offset})
        request = spb.AckMessageRequest(group=self._group(), topic=pb.Resource(name=view.topic), entries=[
            spb.AckMessageEntry(message_id=view.message_id, receipt_handle=view.receipt_handle)])
        try:
            try:
                response = await self.call(view.endpoint, "AckMessage", request, spb.AckMessageResponse)
            except RpcError as e:
                raise ClientException.from_rpc(e) from None
            status = response.entries[0].status if len(response.entries) == 1 else response.status
            if status.code != Code.OK:
                raise ClientException.from_status(status)
        except ClientException as e:
            (op.info if e.maybe_done else op.fail)(None, str(e))
            raise
        op.ok(None)
