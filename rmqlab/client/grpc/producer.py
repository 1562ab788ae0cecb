"""Producer (client-java's impl/producer/ProducerImpl.java): send through a 5.x Proxy.

    producer = Producer(ClientConfiguration("127.0.0.1:8081"), topics=["TopicTest"])
    ClientProcess(producer=producer)                     # started with its node
    receipt = await producer.send(Message("TopicTest", b"body"))

rmqlab's own Message is sent (topic, body, TAGS, KEYS, user properties; __SHARDINGKEY becomes the
message group, a FIFO message; TIMER_DELIVER_MS the delivery timestamp, a DELAY message), the
official clients have a Message class of their own with the same fields. The message id is a
MessageIdCodec id, also set as the message's UNIQ_KEY, which the Proxy stores.

Sending (ProducerImpl.send0): the queues are the route's writable queues of master brokers that
accept the message's type; the candidates are up to max-attempts of them on distinct brokers,
starting at a round-robin index and skipping isolated endpoints while others are left
(PublishingLoadBalancer.takeMessageQueues). Attempt i goes to candidate i; a failure isolates that
endpoint and the next attempt follows at once, or after the retry policy's backoff when the Proxy
said TOO_MANY_REQUESTS. Max attempts and the backoff come from the Proxy's settings (3 attempts).
The Proxy picks the queue itself, so a message lands where the Proxy decided, not on the queue the
client chose; in Local mode that is always a queue of the broker behind the endpoint.

Transactions (ProducerImpl, TransactionImpl): a producer built with a `transaction_checker` begins
a Transaction, sends one message in it (a TRANSACTION message: TRAN_MSG=true; a
CHECK_IMMUNITY_TIME_IN_SECONDS property becomes orphaned_transaction_recovery_duration), then
commits or rolls it back with EndTransaction to the endpoint that took it. The Proxy's
RecoverOrphanedTransactionCommand (a broker's check) goes to the checker, whose COMMIT or ROLLBACK
is sent with SOURCE_SERVER_CHECK; an unknown answer sends nothing, as in the Java client.

Trace (rmqlab.client.operation_tracer): one `send` operation per send, with every attempt in it.
The invoke value is the remoting producer's (describe_message: topic, uniq_key, keys, tags,
body_crc). The ok value: send_status SEND_OK, msg_id, queue_offset, the endpoint that answered
and every endpoint tried (endpoints_sent). A 5.x send result names no broker or queue (the Proxy
chose them), so `broker_name` is there only when the endpoint serves one broker in the route (a
Local-mode Proxy, or a topic on one broker), and `queue_id` never is. Failure: `fail` when no
attempt can have stored the message (client errors 4xxxx, no connection), else `info` (a timeout,
a Proxy error, a persistence timeout: stored, not safely).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from google.protobuf.timestamp_pb2 import Timestamp

from rmqlab.client.grpc.client import Client, ClientConfiguration, ClientException, endpoint_of
from rmqlab.client.grpc.message_id_codec import MessageIdCodec
from rmqlab.client.grpc.rpc import RpcError, RpcTransport
from rmqlab.client.operation_tracer import describe_message
from rmqlab.common.java_compat import java_string_hash_code
from rmqlab.common.message.message import Message
from rmqlab.common.message.message_const import MessageConst
from rmqlab.proto.v2 import definition_pb2 as pb
from rmqlab.proto.v2 import service_pb2 as spb

MC = MessageConst
Code = pb.Code
DEFAULT_MAX_ATTEMPTS = 3
DEFAULT_MAX_BODY_SIZE = 4 * 1024 * 1024


@dataclass(frozen=True)
class SendReceipt:
    message_id: str
    offset: int
    message_queue: pb.MessageQueue  # the queue the client chose (the Proxy may store elsewhere)
    endpoint: str
    transaction_id: str = ""


@dataclass
class _Backoff:
    """ExponentialBackoff of the Proxy's settings (ExponentialBackoffRetryPolicy)."""

    initial_ms: float = 10
    max_ms: float = 1000
    multiplier: float = 2

    def delay_ms(self, attempt: int) -> float:
        """getNextAttemptDelay(attempt): what ProducerImpl waits before attempt `attempt`."""
        return min(self.initial_ms * self.multiplier ** (attempt - 1), self.max_ms)


def message_type(msg: Message) -> int:
    if msg.properties.get(MC.PROPERTY_TRANSACTION_PREPARED) == "true":
        return pb.TRANSACTION
    if msg.properties.get(MC.PROPERTY_SHARDING_KEY):
        return pb.FIFO
    if msg.properties.get(MC.PROPERTY_TIMER_DELIVER_MS):
        return pb.DELAY
    return pb.NORMAL


class Producer(Client):
    client_type = pb.PRODUCER

    def __init__(self, configuration: ClientConfiguration, topics: Iterable[str] = (),
                 transport: RpcTransport | None = None, transaction_checker: TransactionChecker | None = None):
        super().__init__(configuration, transport)
        self.transaction_checker = transaction_checker
        self._topics = list(topics)
        self.max_attempts = DEFAULT_MAX_ATTEMPTS
        self.backoff = _Backoff()
        self.max_body_size = DEFAULT_MAX_BODY_SIZE
        self._index: int | None = None
        self.message_id_codec: MessageIdCodec | None = None

    def topics(self) -> list[str]:
        return list(self._topics)

    @property
    def send_timeout_ms(self) -> float:
        """The longest a send can take: every attempt timing out."""
        return self.configuration.request_timeout_ms * self.max_attempts

    async def start(self, node) -> None:
        self.message_id_codec = MessageIdCodec(node)
        self._index = node.random.randrange(2 ** 31)
        await super().start(node)

    def settings(self) -> pb.Settings:
        s = super().settings()
        s.publishing.topics.extend(pb.Resource(name=t) for t in self._topics)
        s.publishing.max_body_size = self.max_body_size
        s.publishing.validate_message_type = True
        return s

    def apply_settings(self, settings: pb.Settings) -> None:
        bp = settings.backoff_policy
        if bp.max_attempts > 0:
            self.max_attempts = bp.max_attempts
        if bp.HasField("exponential_backoff"):
            eb = bp.exponential_backoff
            self.backoff = _Backoff(eb.initial.ToMilliseconds(), eb.max.ToMilliseconds(), eb.multiplier or 2)
        if settings.publishing.max_body_size > 0:
            self.max_body_size = settings.publishing.max_body_size

    # -- sending -----------------------------------------------------------------------------------
    def _prepare(self, msg: Message) -> int:
        if not self.running:
            raise ClientException(None, "producer is not running", grpc_code="FAILED_PRECONDITION", maybe_done=False)
        if not msg.body:
            raise ClientException(Code.MESSAGE_BODY_EMPTY, "message body is empty", maybe_done=False)
        if len(msg.body) > self.max_body_size:
            raise ClientException(Code.MESSAGE_BODY_TOO_LARGE, f"message body exceeds {self.max_body_size} bytes",
                                  maybe_done=False)
        if not msg.properties.get(MC.PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX):
            msg.put_property(MC.PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX, self.message_id_codec.next_message_id())
        return message_type(msg)

    async def send(self, msg: Message) -> SendReceipt:
        """Send and wait for the Proxy's answer; ClientException (with `maybe_done`) on failure."""
        kind = self._prepare(msg)
        op = self.tracer.invoke("send", describe_message(msg))
        return await self._traced(op, msg, kind)

    def send_async(self, msg: Message) -> asyncio.Future[SendReceipt]:
        """Start a send (traced from now on) and return its future."""
        kind = self._prepare(msg)
        op = self.tracer.invoke("send", describe_message(msg))
        future: asyncio.Future[SendReceipt] = asyncio.get_running_loop().create_future()

        async def run() -> None:
            try:
                receipt = await self._traced(op, msg, kind)
            except ClientException as e:
                if not future.done():
                    future.set_exception(e)
                return
            if not future.done():
                future.set_result(receipt)

        self.node.spawn(run(), name="grpc send")
        return future

    async def _traced(self, op, msg: Message, kind: int, on_ok: Callable[[dict], None] | None = None) -> SendReceipt:
        """The send, completing `op` with its outcome; when it succeeds and `on_ok` is given, `op`
        is left to it (a transaction completes at its end)."""
        endpoints_sent: list[str] = []
        try:
            receipt = await self._send(msg, kind, endpoints_sent)
        except ClientException as e:
            value = {"endpoints_sent": endpoints_sent}
            (op.info if e.maybe_done else op.fail)(value, str(e))
            raise
        value = {"send_status": "SEND_OK", "msg_id": receipt.message_id, "queue_offset": receipt.offset,
                 "endpoint": receipt.endpoint, "endpoints_sent": endpoints_sent}
        broker = self._only_broker_behind(msg.topic, receipt.endpoint)
        if broker is not None:
            value["broker_name"] = broker
        (on_ok or op.ok)(value)
        return receipt

    def _only_broker_behind(self, topic: str, endpoint: str) -> str | None:
        brokers = {q.broker.name for q in self.routes.get(topic, ()) if endpoint_of(q.broker.endpoints) == endpoint}
        return brokers.pop() if len(brokers) == 1 else None

    async def _publishing_queues(self, topic: str, kind: int) -> list[pb.MessageQueue]:
        queues = [q for q in await self.route(topic)
                  if q.broker.id == 0 and q.permission in (pb.WRITE, pb.READ_WRITE)]
        if not queues:
            raise ClientException(Code.FORBIDDEN, f"no writable queue of topic {topic} in the route",
                                  maybe_done=False)
        accepted = [q for q in queues if kind in q.accept_message_types]
        if not accepted:
            raise ClientException(Code.MESSAGE_PROPERTY_CONFLICT_WITH_TYPE,
                                  f"topic {topic} does not accept {pb.MessageType.Name(kind)} messages",
                                  maybe_done=False)
        return accepted

    def _candidates(self, queues: list[pb.MessageQueue], msg: Message) -> list[pb.MessageQueue]:
        group = msg.properties.get(MC.PROPERTY_SHARDING_KEY)
        if group:
            # Deviation: Java picks by SipHash-2-4 of the group; any fixed choice does, since the
            # Proxy puts the message by its own hash of the group.
            return [queues[java_string_hash_code(group) % len(queues)]]
        start = self._index
        self._index += 1
        order = [queues[(start + i) % len(queues)] for i in range(len(queues))]
        candidates: list[pb.MessageQueue] = []
        for skip_isolated in (True, False):
            brokers: set[str] = set()
            for q in order:
                if q.broker.name in brokers or (skip_isolated and endpoint_of(q.broker.endpoints) in self.isolated):
                    continue
                brokers.add(q.broker.name)
                candidates.append(q)
                if len(candidates) >= self.max_attempts:
                    return candidates
            if candidates:
                return candidates
        return candidates

    def _request(self, msg: Message, kind: int) -> spb.SendMessageRequest:
        props = msg.properties
        sp = pb.SystemProperties(message_id=props[MC.PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX], message_type=kind,
                                 body_encoding=pb.IDENTITY)
        born = Timestamp()
        born.FromMilliseconds(self.node.now_ms())
        sp.born_timestamp.CopyFrom(born)
        if msg.tags:
            sp.tag = msg.tags
        if msg.keys:
            sp.keys.extend(k for k in msg.keys.split(MC.KEY_SEPARATOR) if k)
        if props.get(MC.PROPERTY_SHARDING_KEY):
            sp.message_group = props[MC.PROPERTY_SHARDING_KEY]
        if props.get(MC.PROPERTY_TIMER_DELIVER_MS):
            sp.delivery_timestamp.FromMilliseconds(int(props[MC.PROPERTY_TIMER_DELIVER_MS]))
        user = {k: v for k, v in props.items() if k not in MC.STRING_HASH_SET}
        if kind == pb.TRANSACTION and props.get(MC.PROPERTY_CHECK_IMMUNITY_TIME_IN_SECONDS):
            # A system property on the wire, not a user one (it is not in STRING_HASH_SET).
            sp.orphaned_transaction_recovery_duration.FromSeconds(int(user.pop(MC.PROPERTY_CHECK_IMMUNITY_TIME_IN_SECONDS)))
        return spb.SendMessageRequest(messages=[pb.Message(topic=pb.Resource(name=msg.topic), user_properties=user,
                                                           system_properties=sp, body=msg.body)])

    async def _send(self, msg: Message, kind: int, endpoints_sent: list[str]) -> SendReceipt:
        candidates = self._candidates(await self._publishing_queues(msg.topic, kind), msg)
        request = self._request(msg, kind)
        maybe_done = False
        error: ClientException | None = None
        for attempt in range(1, self.max_attempts + 1):
            mq = candidates[(attempt - 1) % len(candidates)]
            endpoint = endpoint_of(mq.broker.endpoints)
            endpoints_sent.append(endpoint)
            try:
                response = await self.call(endpoint, "SendMessage", request, spb.SendMessageResponse)
            except RpcError as e:
                error = ClientException.from_rpc(e)
            else:
                status = response.status
                if status.code == Code.OK and len(response.entries) == 1:
                    entry = response.entries[0]
                    return SendReceipt(entry.message_id, entry.offset, mq, endpoint, entry.transaction_id)
                error = ClientException.from_status(status if status.code != Code.OK else pb.Status(
                    code=Code.INTERNAL_ERROR, message=f"{len(response.entries)} result entries for one message"))
            maybe_done = maybe_done or error.maybe_done
            self.isolated.add(endpoint)
            if attempt < self.max_attempts and error.code == Code.TOO_MANY_REQUESTS:
                await self.node.sleep(self.backoff.delay_ms(attempt + 1))
        error.maybe_done = maybe_done
        raise error

    # -- transactions (ProducerImpl, TransactionImpl) --------------------------------------------------
    def begin_transaction(self) -> Transaction:
        """A transaction of one message (TransactionImpl.MAX_MESSAGE_NUM); the producer needs a
        checker, which answers for the transactions this process no longer ends itself."""
        if self.transaction_checker is None:
            raise ClientException(None, "transaction checker should not be null", grpc_code="FAILED_PRECONDITION",
                                  maybe_done=False)
        return Transaction(self)

    async def end_transaction(self, endpoint: str, topic: str, message_id: str, transaction_id: str,
                              resolution: int, source: int) -> None:
        """EndTransaction; ClientException when the Proxy does not answer OK."""
        request = spb.EndTransactionRequest(topic=pb.Resource(name=topic), message_id=message_id,
                                            transaction_id=transaction_id, resolution=resolution, source=source)
        try:
            response = await self.call(endpoint, "EndTransaction", request, spb.EndTransactionResponse)
        except RpcError as e:
            raise ClientException.from_rpc(e) from None
        if response.status.code != Code.OK:
            raise ClientException.from_status(response.status)

    def on_recover_orphaned_transaction_command(self, endpoint: str, command) -> None:
        """ProducerImpl.onRecoverOrphanedTransactionCommand: ask the checker; COMMIT or ROLLBACK is
        sent as EndTransaction with SOURCE_SERVER_CHECK, UNSPECIFIED (unknown) sends nothing."""
        from rmqlab.client.grpc.message_view import MessageView

        checker = self.transaction_checker
        if checker is None:
            self.node.log.error("%s: no transaction checker registered, ignore it", self.client_id)
            return
        view = MessageView.from_protobuf(command.message, "", endpoint)

        async def check() -> None:
            # Traced as TransactionMQProducer traces a check (f="transaction_check"), so a checker
            # reads either client's transactions the same way.
            op = self.tracer.invoke("transaction_check", {"topic": view.topic, "uniq_key": view.message_id,
                                                          "transaction_id": command.transaction_id})
            state = "UNKNOW"
            try:
                resolution = checker(view)
                if asyncio.iscoroutine(resolution):
                    resolution = await resolution
                if resolution not in (pb.COMMIT, pb.ROLLBACK):
                    op.ok({"local_transaction_state": state, "end_sent": False, "uniq_key": view.message_id})
                    return
                state = _LOCAL_STATE[resolution]
                await self.end_transaction(endpoint, view.topic, view.message_id, command.transaction_id,
                                           resolution, pb.SOURCE_SERVER_CHECK)
            except Exception as e:  # Java logs it; the broker checks again
                self.node.log.error("%s: failed to end the orphaned transaction %s: %s", self.client_id,
                                    command.transaction_id, e)
                op.info({"local_transaction_state": state, "end_sent": False}, str(e))
                return
            op.ok({"local_transaction_state": state, "end_sent": True, "uniq_key": view.message_id})

        self.node.spawn(check(), name="grpc transaction check")


# A checker takes the MessageView of a half message and answers pb.COMMIT, pb.ROLLBACK or
# pb.TRANSACTION_RESOLUTION_UNSPECIFIED (unknown: ask again later), or a coroutine of one.
TransactionChecker = Callable[[Any], Any]


# The trace's names for a resolution, TransactionMQProducer's LocalTransactionState.
_LOCAL_STATE = {pb.COMMIT: "COMMIT_MESSAGE", pb.ROLLBACK: "ROLLBACK_MESSAGE"}


class Transaction:
    """TransactionImpl: the message sent in it, then commit() or rollback() (EndTransaction with
    SOURCE_CLIENT to the endpoint that took the half message).

    Traced as TransactionMQProducer traces one (f="transaction", not a send: the half message is
    not delivered until committed): the invoke is the message; the send's failure completes it
    (fail or info); commit() / rollback() complete it ok with the send's fields and
    `local_transaction_state` COMMIT_MESSAGE / ROLLBACK_MESSAGE; never ended, it stays open (the
    broker's check decides)."""

    def __init__(self, producer: Producer):
        self.producer = producer
        self.message: Message | None = None
        self.receipt: SendReceipt | None = None
        self._op = None
        self._sent: dict = {}

    async def send(self, msg: Message) -> SendReceipt:
        if self.message is not None:
            raise ClientException(None, "message in transaction has exceeded the threshold: 1",
                                  grpc_code="FAILED_PRECONDITION", maybe_done=False)
        msg.put_property(MC.PROPERTY_TRANSACTION_PREPARED, "true")
        self.message = msg
        kind = self.producer._prepare(msg)
        self._op = self.producer.tracer.invoke("transaction", describe_message(msg))
        self.receipt = await self.producer._traced(self._op, msg, kind, on_ok=self._sent.update)
        return self.receipt

    async def commit(self) -> None:
        await self._end(pb.COMMIT)

    async def rollback(self) -> None:
        await self._end(pb.ROLLBACK)

    async def _end(self, resolution: int) -> None:
        if self.receipt is None:
            raise ClientException(None, "no message was sent in this transaction", grpc_code="FAILED_PRECONDITION",
                                  maybe_done=False)
        r = self.receipt
        value = dict(self._sent, local_transaction_state=_LOCAL_STATE.get(resolution, "UNKNOW"))
        op, self._op = self._op, None  # the first end decides the operation; a second changes nothing
        try:
            await self.producer.end_transaction(r.endpoint, self.message.topic, r.message_id, r.transaction_id,
                                                resolution, pb.SOURCE_CLIENT)
        except ClientException:
            if op is not None:
                op.ok(dict(value, end_sent=False))  # decided: the broker's check will ask again
            raise
        if op is not None:
            op.ok(dict(value, end_sent=True))
