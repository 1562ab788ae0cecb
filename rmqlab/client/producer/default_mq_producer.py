"""DefaultMQProducer: sends messages (``client/producer/DefaultMQProducer.java`` with
``client/impl/producer/DefaultMQProducerImpl.java``; the same wire sequence as the C++ producer of
PyPI ``rocketmq`` 0.4.4).

    producer = DefaultMQProducer("PG", namesrv_addr="127.0.0.1:9876")
    await producer.start(node)
    result = await producer.send(Message("TopicTest", b"hello"))       # SendResult
    future = producer.send_async(msg, callback)                         # awaitable
    await producer.send_oneway(msg)
    await producer.shutdown()

Every send first makes sure the message has a ``UNIQ_KEY`` (``MessageClientIDSetter.setUniqID``):
the id the consumer sees as the message id and a history checker matches sends and consumptions
by. Then (``sendDefaultImpl``):

1. the topic's TopicPublishInfo: the route from the name server, fetched at the first send; for a
   topic the name server does not know, TBW102's route trimmed to ``defaultTopicQueueNums`` (4)
   queues per broker, and the broker creates the topic from TBW102 when the message arrives;
2. a queue (MQFaultStrategy): round robin over the writable queues of groups that have a master;
   on a retry a queue of another broker; with ``send_latency_enable`` brokers that failed or were
   slow lately are skipped for a while;
3. SEND_MESSAGE_V2 to that group's master (``sendKernelImpl``), and the latency of the attempt
   reported to the fault strategy (a failure isolates the broker for 10 s);
4. sync sends retry on another broker up to ``retry_times_when_send_failed`` (2) more times after
   a connection failure, a timeout, or a broker answer in ``retry_response_codes`` (TOPIC_NOT_EXIST,
   SERVICE_NOT_AVAILABLE, SYSTEM_ERROR, SYSTEM_BUSY, NO_PERMISSION, NO_BUYER_ID,
   NOT_IN_CURRENT_UNIT, GO_AWAY), all within ``send_msg_timeout`` (3 s) in total. A status other
   than SEND_OK is returned as is (the message is stored) unless
   ``retry_another_broker_when_not_store_ok``. Async sends retry up to
   ``retry_times_when_send_async_failed`` (2) times, on remoting failures only; oneway sends never.

A retry after a timeout can store the message twice (RocketMQ's at-least-once): both copies carry
the same UNIQ_KEY, which is how a checker tells a retry's duplicate from a lost message.

Trace: each send is one ``client`` operation ``f="send"`` (OperationTracer): ``ok`` with the
SendResult's fields, ``fail`` when no attempt can have stored the message, ``info`` when one may
have (a timeout or a connection lost after the request was written), and always ``info`` for a
oneway send that was written.

Deviations: bodies are never compressed (``compressMsgBodyOverHowmuch``); an async retry goes to
a queue of the newly chosen broker (Java re-sends the first request, with its queue id, to the
other broker's address); no namespaces, batches or request/reply. Transactions are
``rmqlab.client.producer.transaction_mq_producer``.
"""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING, Any

from rmqlab.client.client_config import ClientConfig
from rmqlab.client.exceptions import ClientErrorCode, MQBrokerException, MQClientException, outcome_unknown
from rmqlab.client.impl.mq_client_manager import MQClientManager
from rmqlab.client.latency.mq_fault_strategy import MQFaultStrategy
from rmqlab.client.operation_tracer import ClientOperation, describe_message
from rmqlab.client.producer.selector.message_queue_selector import MessageQueueSelector
from rmqlab.client.producer.send_result import SendResult, SendStatus
from rmqlab.client.producer.topic_publish_info import TopicPublishInfo
from rmqlab.common.message.message import Message
from rmqlab.common.message.message_client_id_setter import MessageClientIDSetter
from rmqlab.common.message.message_const import MessageConst
from rmqlab.common.message.message_decoder import message_properties_to_string
from rmqlab.common.mix_all import RETRY_GROUP_TOPIC_PREFIX
from rmqlab.common.topic.topic_validator import TopicValidator
from rmqlab.remoting.exceptions import RemotingConnectError, RemotingError, RemotingTimeoutError
from rmqlab.remoting.protocol.header.broker.admin import MessageQueue
from rmqlab.remoting.protocol.header.broker.send_message import SendMessageRequestHeaderV2
from rmqlab.remoting.remoting_command import RemotingCommand
from rmqlab.remoting.response_code import ResponseCode

if TYPE_CHECKING:
    from rmqlab.client.impl.mq_client_instance import MQClientInstance
    from rmqlab.runtime.node import Node

log = logging.getLogger("rmqlab.client")
_TRAN_MSG = MessageConst.PROPERTY_TRANSACTION_PREPARED
_TRANSACTION_PREPARED_TYPE = 0x4  # MessageSysFlag.TRANSACTION_PREPARED_TYPE

DEFAULT_RETRY_RESPONSE_CODES = frozenset({
    ResponseCode.TOPIC_NOT_EXIST, ResponseCode.SERVICE_NOT_AVAILABLE, ResponseCode.SYSTEM_ERROR,
    ResponseCode.SYSTEM_BUSY, ResponseCode.NO_PERMISSION, ResponseCode.NO_BUYER_ID,
    ResponseCode.NOT_IN_CURRENT_UNIT, ResponseCode.GO_AWAY,
})
MAX_MESSAGE_SIZE = 4 * 1024 * 1024
_UNIQ_KEY = MessageConst.PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX
_CHECKED_TOPICS_MAX = 1024  # topics remembered as valid send targets (check_message)

# A SendCallback: an object with on_success(result) / on_exception(error), or a function called
# as callback(result, error) with exactly one of them None.
SendCallback = Any


def _error_text(e: BaseException) -> str:
    return f"{type(e).__name__}: {e}"


def _invoke_callback(callback: SendCallback, result: SendResult | None, error: BaseException | None) -> None:
    try:
        if hasattr(callback, "on_success"):
            if error is None:
                callback.on_success(result)
            else:
                callback.on_exception(error)
        else:
            callback(result, error)
    except Exception:
        # Java swallows what a callback throws; the send itself is finished either way.
        log.exception("send callback raised")


class DefaultMQProducer:
    def __init__(self, producer_group: str, namesrv_addr: str | None = None, *,
                 client_config: ClientConfig | None = None, send_msg_timeout: int = 3000,
                 retry_times_when_send_failed: int = 2, retry_times_when_send_async_failed: int = 2,
                 retry_another_broker_when_not_store_ok: bool = False, default_topic_queue_nums: int = 4,
                 create_topic_key: str = TopicValidator.AUTO_CREATE_TOPIC_KEY_TOPIC,
                 max_message_size: int = MAX_MESSAGE_SIZE):
        self.producer_group = producer_group
        self.client_config = client_config or ClientConfig()
        if namesrv_addr is not None:
            self.client_config.namesrv_addr = namesrv_addr
        self.send_msg_timeout = send_msg_timeout
        self.retry_times_when_send_failed = retry_times_when_send_failed
        self.retry_times_when_send_async_failed = retry_times_when_send_async_failed
        self.retry_another_broker_when_not_store_ok = retry_another_broker_when_not_store_ok
        self.default_topic_queue_nums = default_topic_queue_nums
        self.create_topic_key = create_topic_key
        self.max_message_size = max_message_size
        self.retry_response_codes = set(DEFAULT_RETRY_RESPONSE_CODES)
        self.topic_publish_info_table: dict[str, TopicPublishInfo] = {}
        self.node: Node | None = None
        self.client_factory: MQClientInstance | None = None
        self.mq_fault_strategy: MQFaultStrategy | None = None
        self.message_client_id_setter: MessageClientIDSetter | None = None
        self._running = False
        # Topics that passed check_message's topic checks (pure functions of the name), so a
        # send does not validate its topic's characters again.
        self._checked_topics: set[str] = set()
        self._send_async_task_name = f"send-async {producer_group}"

    # -- lifecycle -------------------------------------------------------------------------------
    async def start(self, node: Node, start_factory: bool = True,
                    client_factory: MQClientInstance | None = None) -> None:
        """Register with the node's MQClientInstance and start it (``start(startFactory)``). No
        request is sent yet: the first route request goes out with the first send, as RocketMQ's
        ``DefaultMQProducerImpl`` does. ``client_factory``: the instance to join, for its inner
        producer (Java finds that same instance through MQClientManager by the cloned config's
        client id)."""
        if self._running:
            return
        self.node = node
        if client_factory is None:
            client_factory = MQClientManager.get_instance(node).get_or_create_mq_client_instance(self.client_config)
        self.client_factory = client_factory
        if not self.client_factory.register_producer(self.producer_group, self):
            raise MQClientException(-1, f"The producer group[{self.producer_group}] has been created before, "
                                        "specify another name please.")
        self.mq_fault_strategy = MQFaultStrategy(node.now_ms, self.client_config.send_latency_enable)
        self.message_client_id_setter = MessageClientIDSetter(self.client_config.client_ip, node.now_ms, node.random)
        self.topic_publish_info_table[self.create_topic_key] = TopicPublishInfo(node.random)
        if start_factory:
            self.client_factory.start()
        self._running = True

    async def shutdown(self, shutdown_factory: bool = True) -> None:
        """Unregister from every broker (UNREGISTER_CLIENT) and stop the client instance if unused."""
        if not self._running:
            return
        self._running = False
        await self.client_factory.unregister_producer(self.producer_group)
        if shutdown_factory:
            await self.client_factory.shutdown()

    def on_crash(self) -> None:
        self._running = False
        if self.client_factory is not None:
            self.client_factory.producer_table.pop(self.producer_group, None)
            self.client_factory.on_crash()

    def _make_sure_state_ok(self) -> None:
        if not self._running:
            raise MQClientException(-1, "The producer service state not OK, maybe started once, RUNNING")

    # -- MQProducerInner -------------------------------------------------------------------------
    def get_publish_topic_list(self) -> list[str]:
        return sorted(self.topic_publish_info_table)

    def is_publish_topic_need_update(self, topic: str) -> bool:
        info = self.topic_publish_info_table.get(topic)
        return info is None or not info.ok()

    def update_topic_publish_info(self, topic: str, info: TopicPublishInfo) -> None:
        self.topic_publish_info_table[topic] = info

    # -- helpers ---------------------------------------------------------------------------------
    def check_message(self, msg: Message) -> None:
        """``Validators.checkMessage``: MQClientException(MESSAGE_ILLEGAL) for a bad message."""
        if msg is None:
            raise MQClientException(ResponseCode.MESSAGE_ILLEGAL, "the message is null")
        topic = msg.topic
        if type(topic) is not str or topic not in self._checked_topics:
            result = TopicValidator.validate_topic(topic)
            if not result.valid:
                raise MQClientException(ResponseCode.MESSAGE_ILLEGAL, result.remark)
            if TopicValidator.is_not_allowed_send_topic(topic):
                raise MQClientException(ResponseCode.MESSAGE_ILLEGAL,
                                        f"Sending message to topic[{topic}] is forbidden.")
            if len(self._checked_topics) >= _CHECKED_TOPICS_MAX:
                self._checked_topics.clear()
            self._checked_topics.add(topic)
        body = msg.body
        if body is None:
            raise MQClientException(ResponseCode.MESSAGE_ILLEGAL, "the message body is null")
        if len(body) == 0:
            raise MQClientException(ResponseCode.MESSAGE_ILLEGAL, "the message body length is zero")
        if len(body) > self.max_message_size:
            raise MQClientException(ResponseCode.MESSAGE_ILLEGAL,
                                    f"the message body size over max value, MAX: {self.max_message_size}")

    def set_uniq_id(self, msg: Message) -> None:
        """``MessageClientIDSetter.setUniqID``: only when the message has none."""
        if msg.properties.get(_UNIQ_KEY) is None:
            msg.put_property(_UNIQ_KEY, self.message_client_id_setter.create_uniq_id())

    async def try_to_find_topic_publish_info(self, topic: str) -> TopicPublishInfo | None:
        """``tryToFindTopicPublishInfo``: the cached info, else the route, else TBW102's route."""
        info = self.topic_publish_info_table.get(topic)
        if info is None or not info.ok():
            self.topic_publish_info_table.setdefault(topic, TopicPublishInfo(self.node.random))
            await self.client_factory.update_topic_route_info_from_name_server(topic)
            info = self.topic_publish_info_table.get(topic)
        if info.have_topic_router_info or info.ok():
            return info
        await self.client_factory.update_topic_route_info_from_name_server(topic, True, self)
        return self.topic_publish_info_table.get(topic)

    def select_one_message_queue(self, tp_info: TopicPublishInfo, last_broker_name: str | None,
                                 reset_index: bool) -> MessageQueue | None:
        return self.mq_fault_strategy.select_one_message_queue(tp_info, last_broker_name, reset_index)

    def update_fault_item(self, broker_name: str, current_latency: int, isolation: bool, reachable: bool) -> None:
        self.mq_fault_strategy.update_fault_item(broker_name, current_latency, isolation, reachable)

    async def fetch_publish_message_queues(self, topic: str) -> list[MessageQueue]:
        info = await self.try_to_find_topic_publish_info(topic)
        return list(info.message_queue_list) if info is not None else []

    async def send_kernel_impl(self, msg: Message, mq: MessageQueue, timeout_ms: float,
                               oneway: bool = False) -> SendResult | None:
        """One attempt: SEND_MESSAGE_V2 to ``mq``'s master."""
        factory = self.client_factory
        broker_addr = factory.find_broker_address_in_publish(mq.broker_name)
        if broker_addr is None:
            await self.try_to_find_topic_publish_info(mq.topic)
            broker_addr = factory.find_broker_address_in_publish(mq.broker_name)
        if broker_addr is None:
            raise MQClientException(-1, f"The broker[{mq.broker_name}] not exist")
        request = self.send_message_request(msg, mq)
        api = factory.mq_client_api_impl
        if oneway:
            await api.remoting_client.invoke_oneway(broker_addr, request)
            return None
        return await api.invoke_send_message(broker_addr, mq, msg, request, timeout_ms)

    def send_message_request(self, msg: Message, mq: MessageQueue) -> RemotingCommand:
        """``sendKernelImpl``'s request: the SendMessageRequestHeader's fields, sent as
        SEND_MESSAGE_V2 (MQClientAPIImpl.send_message). Built straight as the V2 header's wire
        fields (``SendMessageRequestHeaderV2.ext_fields_of``), without the V1 and V2 header
        objects: the same frame, one step per message fewer."""
        self.set_uniq_id(msg)
        topic = msg.topic
        born_timestamp = self.node.now_ms()
        properties = message_properties_to_string(msg.properties)
        reconsume_times = 0
        max_reconsume_times = None
        if topic.startswith(RETRY_GROUP_TOPIC_PREFIX):
            # A consumer's failed message sent as a new one (the send-back fallback): its retry
            # count and limit travel in the header, which the broker's DLQ check reads. As in
            # Java, the properties string above still carries them; the message loses them.
            value = msg.properties.get(MessageConst.PROPERTY_RECONSUME_TIME)
            if value is not None:
                reconsume_times = int(value)
                msg.clear_property(MessageConst.PROPERTY_RECONSUME_TIME)
            value = msg.properties.get(MessageConst.PROPERTY_MAX_RECONSUME_TIMES)
            if value is not None:
                max_reconsume_times = int(value)
                msg.clear_property(MessageConst.PROPERTY_MAX_RECONSUME_TIMES)
        # sendKernelImpl: a transaction half message (TRAN_MSG=true) carries the PREPARED sysFlag.
        sys_flag = _TRANSACTION_PREPARED_TYPE if msg.properties.get(_TRAN_MSG) == "true" else 0
        ext_fields = SendMessageRequestHeaderV2.ext_fields_of(
            self.producer_group, topic, self.create_topic_key, self.default_topic_queue_nums, mq.queue_id, sys_flag,
            born_timestamp, msg.flag, properties, reconsume_times, False, max_reconsume_times, False, mq.broker_name)
        return self.client_factory.mq_client_api_impl.send_message_request(ext_fields, msg.body)

    # -- sync ------------------------------------------------------------------------------------
    async def send(self, msg: Message, mq: MessageQueue | None = None, timeout: int | None = None, *,
                   selector: MessageQueueSelector | None = None, arg: Any = None) -> SendResult:
        """Send and wait for the broker's answer (see the module docstring); with ``mq``, to that
        queue only, without retries; with ``selector``, to the queue it picks for ``arg``
        (``sendSelectImpl``: an ordered send, also without retries). Raises MQClientException,
        MQBrokerException or a remoting error when the message was not (known to be) stored."""
        self._make_sure_state_ok()
        if msg is None:
            raise MQClientException(ResponseCode.MESSAGE_ILLEGAL, "the message is null")
        timeout_ms = self.send_msg_timeout if timeout is None else timeout
        if selector is not None:
            try:
                mq = await self.select_message_queue(msg, selector, arg)
            except MQClientException as e:
                self.set_uniq_id(msg)
                self._complete_failed(self.client_factory.tracer.invoke("send", describe_message(msg)), e)
                raise
        self.set_uniq_id(msg)
        op = self.client_factory.tracer.invoke("send", describe_message(msg, mq))
        if mq is not None:
            return await self._traced(op, self._send_to_queue(msg, mq, timeout_ms))
        return await self._traced(op, self.send_default_impl(msg, timeout_ms))

    async def select_message_queue(self, msg: Message, selector: MessageQueueSelector, arg: Any) -> MessageQueue:
        """``sendSelectImpl``'s choice: ``selector.select`` over the topic's publish queues."""
        self.check_message(msg)
        info = await self.try_to_find_topic_publish_info(msg.topic)
        if info is None or not info.ok():
            raise MQClientException(-1, f"No route info for this topic, {msg.topic}")
        try:
            mq = selector.select(list(info.message_queue_list), msg, arg)
        except Exception as e:
            raise MQClientException(-1, "select message queue threw exception.") from e
        if mq is None:
            raise MQClientException(-1, "select message queue return null.")
        return mq

    async def _send_to_queue(self, msg: Message, mq: MessageQueue, timeout_ms: float) -> tuple[SendResult, list[str]]:
        try:
            self.check_message(msg)
            if mq.topic != msg.topic:
                raise MQClientException(-1, f"message's topic not equal mq's topic: {msg.topic} {mq.topic}")
            return await self.send_kernel_impl(msg, mq, timeout_ms), [mq.broker_name]
        except Exception as e:
            e.maybe_stored = outcome_unknown(e)  # type: ignore[attr-defined]
            e.brokers_sent = [mq.broker_name]  # type: ignore[attr-defined]
            raise

    async def _traced(self, op: ClientOperation, work) -> SendResult:
        """Await a send that returns (result, brokers tried) and complete ``op`` with its outcome."""
        try:
            result, brokers_sent = await work
        except asyncio.CancelledError:
            raise
        except Exception as e:
            self._complete_failed(op, e)
            raise
        op.ok(dict(result.to_trace_value(), brokers_sent=brokers_sent))
        return result

    @staticmethod
    def _complete_failed(op: ClientOperation, e: Exception) -> None:
        """``op``'s completion for a send that raised ``e``: ``info`` when it may have stored
        the message, else ``fail``."""
        value = {"brokers_sent": getattr(e, "brokers_sent", [])}
        if getattr(e, "maybe_stored", False):
            op.info(value, _error_text(e))
        else:
            op.fail(value, _error_text(e))

    async def send_default_impl(self, msg: Message, timeout_ms: float) -> tuple[SendResult, list[str]]:
        """``sendDefaultImpl`` for a sync send: the result and the brokers tried, in order. An
        exception carries ``brokers_sent`` and ``maybe_stored`` (an attempt may have stored the
        message) for the trace."""
        maybe_stored = False
        brokers_sent: list[str] = []
        try:
            self.check_message(msg)
            node = self.node
            begin_first = node.now_ms()
            tp_info = await self.try_to_find_topic_publish_info(msg.topic)
            if tp_info is None or not tp_info.ok():
                if not self.client_factory.mq_client_api_impl.namesrv_addr_list:
                    raise MQClientException(ClientErrorCode.NO_NAME_SERVER_EXCEPTION,
                                            "No name server address, please set it.")
                raise MQClientException(ClientErrorCode.NOT_FOUND_TOPIC_EXCEPTION,
                                        f"No route info of this topic: {msg.topic}")
            times_total = 1 + self.retry_times_when_send_failed
            mq: MessageQueue | None = None
            exception: BaseException | None = None
            send_result: SendResult | None = None
            call_timeout = False
            for times in range(times_total):
                last_broker_name = mq.broker_name if mq is not None else None
                selected = self.select_one_message_queue(tp_info, last_broker_name, times > 0)
                if selected is None:
                    break
                mq = selected
                brokers_sent.append(mq.broker_name)
                begin_prev = node.now_ms()
                cost = begin_prev - begin_first
                if timeout_ms < cost:
                    call_timeout = True
                    break
                try:
                    send_result = await self.send_kernel_impl(msg, mq, timeout_ms - cost)
                    self.update_fault_item(mq.broker_name, node.now_ms() - begin_prev, False, True)
                    if (send_result.send_status is not SendStatus.SEND_OK
                            and self.retry_another_broker_when_not_store_ok):
                        continue
                    return send_result, brokers_sent
                except MQClientException as e:
                    self.update_fault_item(mq.broker_name, node.now_ms() - begin_prev, False, True)
                    log.warning("sendKernelImpl exception, resend at once, Broker: %s: %s", mq, e)
                    exception = e
                except RemotingError as e:
                    # No service detector: a failed broker is isolated, not marked unreachable.
                    self.update_fault_item(mq.broker_name, node.now_ms() - begin_prev, True, True)
                    log.warning("sendKernelImpl exception, resend at once, Broker: %s: %s", mq, e)
                    maybe_stored = maybe_stored or outcome_unknown(e)
                    exception = e
                except MQBrokerException as e:
                    self.update_fault_item(mq.broker_name, node.now_ms() - begin_prev, True, False)
                    log.warning("sendKernelImpl exception, resend at once, Broker: %s: %s", mq, e)
                    exception = e
                    maybe_stored = maybe_stored or outcome_unknown(e)
                    if e.response_code not in self.retry_response_codes:
                        if send_result is not None:
                            return send_result, brokers_sent
                        raise
            if send_result is not None:
                return send_result, brokers_sent
            if call_timeout:
                raise MQClientException(ClientErrorCode.REQUEST_TIMEOUT_EXCEPTION, "sendDefaultImpl call timeout")
            info = (f"Send [{len(brokers_sent)}] times, still failed, cost [{node.now_ms() - begin_first}]ms, "
                    f"Topic: {msg.topic}, BrokersSent: {brokers_sent}")
            if isinstance(exception, MQBrokerException):
                code = exception.response_code
            elif isinstance(exception, RemotingConnectError):
                code = ClientErrorCode.CONNECT_BROKER_EXCEPTION
            elif isinstance(exception, RemotingTimeoutError):
                code = ClientErrorCode.ACCESS_BROKER_TIMEOUT
            else:
                code = ClientErrorCode.BROKER_NOT_EXIST_EXCEPTION
            raise MQClientException(code, info, exception)
        except Exception as e:
            e.maybe_stored = maybe_stored  # type: ignore[attr-defined]
            e.brokers_sent = brokers_sent  # type: ignore[attr-defined]
            raise

    # -- async -----------------------------------------------------------------------------------
    def send_async(self, msg: Message, callback: SendCallback | None = None,
                   timeout: int | None = None) -> asyncio.Future[SendResult]:
        """Start a send and return at once: a future of the SendResult, and ``callback`` (if any)
        called with the outcome. The future's exception is the send's failure."""
        self._make_sure_state_ok()
        if msg is None:
            raise MQClientException(ResponseCode.MESSAGE_ILLEGAL, "the message is null")
        timeout_ms = self.send_msg_timeout if timeout is None else timeout
        self.set_uniq_id(msg)
        op = self.client_factory.tracer.invoke("send", describe_message(msg))
        future: asyncio.Future[SendResult] = asyncio.get_running_loop().create_future()
        self.node.spawn(self._send_async_run(op, msg, timeout_ms, future, callback), name=self._send_async_task_name)
        return future

    async def _send_async_run(self, op: ClientOperation, msg: Message, timeout_ms: float,
                              future: asyncio.Future[SendResult], callback: SendCallback | None) -> None:
        """The task of one send_async: the send (``sendMessageAsync`` / ``onExceptionImpl``: one
        attempt, then up to retry_times_when_send_async_failed more on another broker after a
        remoting failure), ``op`` completed as :meth:`_traced` does, then the future and the
        callback. One coroutine for all of it (the request goes straight to the connection when
        it is up): every await level would cost each of the thousands of messages a second."""
        try:
            result, brokers_sent = await self._send_async_attempts(msg, timeout_ms)
        except asyncio.CancelledError:
            raise
        except Exception as e:
            try:
                self._complete_failed(op, e)
            except Exception as trace_error:  # as in _traced: what completing raised is the outcome
                e = trace_error
            if not future.done():
                future.set_exception(e)
            if callback is not None:
                _invoke_callback(callback, None, e)
            return
        try:
            value = result.to_trace_value()
            value["brokers_sent"] = brokers_sent
            op.ok(value)
        except Exception as e:
            if not future.done():
                future.set_exception(e)
            if callback is not None:
                _invoke_callback(callback, None, e)
            return
        if not future.done():
            future.set_result(result)
        if callback is not None:
            _invoke_callback(callback, result, None)

    async def _send_async_attempts(self, msg: Message, timeout_ms: float) -> tuple[SendResult, list[str]]:
        """The attempts of an async send; the result and the brokers tried. An exception carries
        ``maybe_stored`` and ``brokers_sent`` for the trace."""
        maybe_stored = False
        brokers_sent: list[str] = []
        try:
            self.check_message(msg)
            node = self.node
            begin = node.now_ms()
            tp_info = self.topic_publish_info_table.get(msg.topic)
            if tp_info is None or not tp_info.message_queue_list:  # else the cached info is the answer
                tp_info = await self.try_to_find_topic_publish_info(msg.topic)
            if tp_info is None or not tp_info.ok():
                raise MQClientException(ClientErrorCode.NOT_FOUND_TOPIC_EXCEPTION,
                                        f"No route info of this topic: {msg.topic}")
            strategy = self.mq_fault_strategy
            mq = strategy.select_one_message_queue(tp_info, None, False)
            if mq is None:
                raise MQClientException(-1, f"no queue to send {msg.topic} to")
            factory = self.client_factory
            times = 0
            while True:
                left = timeout_ms - (node.now_ms() - begin)
                begin_attempt = node.now_ms()
                brokers_sent.append(mq.broker_name)
                try:
                    broker_addr = factory.find_broker_address_in_publish(mq.broker_name)
                    if broker_addr is None:  # send_kernel_impl looks the route up first
                        result = await self.send_kernel_impl(msg, mq, left)
                    else:  # send_kernel_impl inline
                        result = await factory.mq_client_api_impl.invoke_send_message(
                            broker_addr, mq, msg, self.send_message_request(msg, mq), left, async_send=True)
                except RemotingError as e:
                    self.update_fault_item(mq.broker_name, node.now_ms() - begin_attempt, True, True)
                    maybe_stored = maybe_stored or outcome_unknown(e)
                    times += 1
                    left = timeout_ms - (node.now_ms() - begin)
                    if times > self.retry_times_when_send_async_failed or left <= 0:
                        raise
                    log.warning("async send msg by retry %d times. topic=%s, brokerName=%s: %s", times, msg.topic,
                                mq.broker_name, e)
                    mq = self.select_one_message_queue(tp_info, mq.broker_name, False) or mq
                    continue
                except MQBrokerException as e:
                    self.update_fault_item(mq.broker_name, node.now_ms() - begin_attempt, True, True)
                    maybe_stored = maybe_stored or outcome_unknown(e)
                    raise
                if strategy.send_latency_fault_enable:  # update_fault_item is a no-op otherwise
                    self.update_fault_item(mq.broker_name, node.now_ms() - begin_attempt, False, True)
                return result, brokers_sent
        except Exception as e:
            e.maybe_stored = maybe_stored  # type: ignore[attr-defined]
            e.brokers_sent = brokers_sent  # type: ignore[attr-defined]
            raise

    # -- oneway ----------------------------------------------------------------------------------
    async def send_oneway(self, msg: Message, mq: MessageQueue | None = None) -> None:
        """Write the message to one broker and return: no answer, no retry. Traced ``info`` once
        written (whether it was stored is unknown), ``fail`` when it could not be written."""
        self._make_sure_state_ok()
        if msg is None:
            raise MQClientException(ResponseCode.MESSAGE_ILLEGAL, "the message is null")
        self.set_uniq_id(msg)
        op = self.client_factory.tracer.invoke("send", describe_message(msg, mq))
        try:
            self.check_message(msg)
            if mq is None:
                tp_info = await self.try_to_find_topic_publish_info(msg.topic)
                if tp_info is None or not tp_info.ok():
                    raise MQClientException(ClientErrorCode.NOT_FOUND_TOPIC_EXCEPTION,
                                            f"No route info of this topic: {msg.topic}")
                mq = self.select_one_message_queue(tp_info, None, False)
            begin = self.node.now_ms()
            await self.send_kernel_impl(msg, mq, self.send_msg_timeout, oneway=True)
            self.update_fault_item(mq.broker_name, self.node.now_ms() - begin, False, True)
        except asyncio.CancelledError:
            raise
        except Exception as e:
            if outcome_unknown(e):
                op.info(None, _error_text(e))
            else:
                op.fail(None, _error_text(e))
            raise
        op.info({"broker_name": mq.broker_name, "queue_id": mq.queue_id}, "oneway: the broker does not answer")
