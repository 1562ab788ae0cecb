"""TransactionMQProducer: transactional messages, 4.x model (RocketMQ
``client/.../producer/TransactionMQProducer.java`` with ``DefaultMQProducerImpl.sendMessageInTransaction``,
``endTransaction`` and ``checkTransactionState``).

    producer = TransactionMQProducer("PG", namesrv_addr=..., transaction_listener=listener)
    await producer.start(node)
    result = await producer.send_message_in_transaction(Message("TopicTest", b"x"), arg)

``send_message_in_transaction``:

1. the message's DELAY is dropped; ``TRAN_MSG=true`` and ``PGROUP`` = the group are set; it is sent
   synchronously (with the PREPARED sysFlag; the broker stores it as a half message);
2. SEND_OK -> ``execute_local_transaction(msg, arg)`` (None or an exception: UNKNOW);
   FLUSH_DISK_TIMEOUT / FLUSH_SLAVE_TIMEOUT / SLAVE_NOT_AVAILABLE -> ROLLBACK_MESSAGE;
3. END_TRANSACTION, oneway, to the master of the broker that stored the half message:
   ``commitLogOffset`` from the send result's offset message id, ``tranStateTableOffset`` = its queue
   offset, ``commitOrRollback`` COMMIT 8 / ROLLBACK 12 / UNKNOW 0 (the broker ignores 0). A failure
   to send it is logged: the broker's check resolves the half message later.

A CHECK_TRANSACTION_STATE from a broker (``MQClientInstance`` routes it here by the message's PGROUP)
runs ``check_local_transaction`` on the producer's check executor (one at a time, RocketMQ's
1-thread pool) and answers END_TRANSACTION with ``fromTransactionCheck=true`` and the check's
offsets to the broker that asked; UNKNOW is sent as 0.

Trace (``OperationTracer``): a transaction is one ``client`` operation ``f="transaction"``, not a
``send``: the invoke describes the message; the completion is ``fail`` when the half message was
not stored, ``ok`` when the producer decided (``local_transaction_state`` COMMIT_MESSAGE: the
message must be delivered, at once or after a check; ROLLBACK_MESSAGE: it must never be), and
``info`` with UNKNOW (the check decides). Each check is an operation ``f="transaction_check"``
whose ``ok`` value holds the state answered.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
from typing import TYPE_CHECKING, Any

from rmqlab.client.exceptions import MQClientException
from rmqlab.client.operation_tracer import describe_message
from rmqlab.client.producer.default_mq_producer import DefaultMQProducer
from rmqlab.client.producer.local_transaction_state import LocalTransactionState
from rmqlab.client.producer.send_result import SendStatus
from rmqlab.client.producer.transaction_send_result import TransactionSendResult
from rmqlab.common.message.message import Message, MessageExt
from rmqlab.common.message.message_const import MessageConst
from rmqlab.common.message.message_decoder import decode_message_id
from rmqlab.remoting.protocol.header.end_transaction_request_header import EndTransactionRequestHeader

if TYPE_CHECKING:
    from rmqlab.client.producer.transaction_listener import TransactionListener
    from rmqlab.remoting.protocol.header.check_transaction_state_request_header import (
        CheckTransactionStateRequestHeader)

log = logging.getLogger("rmqlab.client")

_UNIQ_KEY = MessageConst.PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX


async def _call_listener(fn, *args) -> LocalTransactionState | None:
    result = fn(*args)
    if inspect.isawaitable(result):
        result = await result
    return result


class TransactionMQProducer(DefaultMQProducer):
    def __init__(self, producer_group: str, namesrv_addr: str | None = None, *,
                 transaction_listener: TransactionListener | None = None, **kwargs: Any):
        super().__init__(producer_group, namesrv_addr, **kwargs)
        self.transaction_listener = transaction_listener
        self._check_lock: asyncio.Lock | None = None

    async def start(self, node, start_factory: bool = True, client_factory=None) -> None:
        self._check_lock = asyncio.Lock()
        await super().start(node, start_factory, client_factory)

    # -- sendMessageInTransaction ---------------------------------------------------------------
    async def send_message_in_transaction(self, msg: Message, arg: Any = None) -> TransactionSendResult:
        """See the module docstring. Raises MQClientException when the half message could not be
        sent (nothing stored; the operation is ``fail``, or ``info`` if it may have been)."""
        self._make_sure_state_ok()
        listener = self.transaction_listener
        if listener is None:
            raise MQClientException(-1, "TransactionListener is null")
        if msg.delay_time_level != 0:  # ignore DelayTimeLevel parameter
            msg.clear_property(MessageConst.PROPERTY_DELAY_TIME_LEVEL)
        self.check_message(msg)
        msg.put_property(MessageConst.PROPERTY_TRANSACTION_PREPARED, "true")
        msg.put_property(MessageConst.PROPERTY_PRODUCER_GROUP, self.producer_group)
        self.set_uniq_id(msg)
        op = self.client_factory.tracer.invoke("transaction", describe_message(msg))
        try:
            send_result, brokers_sent = await self.send_default_impl(msg, self.send_msg_timeout)
        except asyncio.CancelledError:
            raise
        except Exception as e:
            self._complete_failed(op, e)
            raise MQClientException(-1, f"send message Exception: {e}") from e
        state = LocalTransactionState.UNKNOW
        local_exception: BaseException | None = None
        if send_result.send_status is SendStatus.SEND_OK:
            try:
                if send_result.transaction_id is not None:
                    msg.put_property(MessageConst.PROPERTY_TRANSACTION_ID, send_result.transaction_id)
                state = await _call_listener(listener.execute_local_transaction, msg, arg) or LocalTransactionState.UNKNOW
            except Exception as e:  # Java catches Throwable
                log.error("Broker exception, maybe this is a local transaction exception: %s", e)
                local_exception, state = e, LocalTransactionState.UNKNOW
        else:
            state = LocalTransactionState.ROLLBACK_MESSAGE
        end_sent = True
        try:
            await self.end_transaction(msg, send_result, state, local_exception)
        except Exception as e:
            end_sent = False
            log.warning("local transaction execute %s, but end broker transaction failed: %s", state.value, e)
        result = TransactionSendResult(send_result.send_status, send_result.msg_id, send_result.message_queue,
                                       send_result.queue_offset, send_result.offset_msg_id,
                                       send_result.transaction_id, send_result.region_id, send_result.trace_on,
                                       local_transaction_state=state)
        value = dict(result.to_trace_value(), brokers_sent=brokers_sent, end_sent=end_sent)
        if state is LocalTransactionState.UNKNOW:
            op.info(value, f"local transaction {state.value}: the broker's check decides")
        else:
            op.ok(value)
        return result

    async def end_transaction(self, msg: Message, send_result, state: LocalTransactionState,
                              local_exception: BaseException | None) -> None:
        """``endTransaction``: END_TRANSACTION, oneway, to the master of the half message's broker."""
        _, commit_log_offset = decode_message_id(send_result.offset_msg_id or send_result.msg_id)
        broker_name = send_result.message_queue.broker_name
        broker_addr = self.client_factory.find_broker_address_in_publish(broker_name)
        if broker_addr is None:
            raise MQClientException(-1, f"The broker[{broker_name}] not exist")
        header = EndTransactionRequestHeader(
            topic=msg.topic, producer_group=self.producer_group, tran_state_table_offset=send_result.queue_offset,
            commit_log_offset=commit_log_offset, commit_or_rollback=state.commit_or_rollback,
            from_transaction_check=False, msg_id=send_result.msg_id, transaction_id=send_result.transaction_id,
            broker_name=broker_name)
        remark = (f"executeLocalTransactionBranch exception: {local_exception!r}"
                  if local_exception is not None else None)
        await self.client_factory.mq_client_api_impl.end_transaction_oneway(broker_addr, header, remark)

    # -- checkTransactionState ------------------------------------------------------------------
    def check_transaction_state(self, addr: str, msg: MessageExt, header: CheckTransactionStateRequestHeader) -> None:
        """A broker's check (see the module docstring); answered from a node task."""
        if not self._running:
            return
        self.node.spawn(self._check_and_answer(addr, msg, header), name=f"transaction-check {self.producer_group}")

    async def _check_and_answer(self, addr: str, msg: MessageExt, header: CheckTransactionStateRequestHeader) -> None:
        async with self._check_lock:
            uniq_key = msg.properties.get(_UNIQ_KEY) or msg.msg_id
            op = self.client_factory.tracer.invoke("transaction_check", dict(
                describe_message(msg), broker_addr=addr, check_offset=header.commit_log_offset,
                check_queue_offset=header.tran_state_table_offset))
            listener = self.transaction_listener
            state, error = LocalTransactionState.UNKNOW, None
            if listener is None:
                log.warning("CheckTransactionState, pick transactionCheckListener by group[%s] failed",
                            self.producer_group)
            else:
                try:
                    state = await _call_listener(listener.check_local_transaction, msg) or LocalTransactionState.UNKNOW
                except Exception as e:
                    log.error("Broker call checkTransactionState, but checkLocalTransactionState exception: %s", e)
                    error = e
            end = EndTransactionRequestHeader(
                topic=msg.topic, producer_group=self.producer_group,
                tran_state_table_offset=header.tran_state_table_offset, commit_log_offset=header.commit_log_offset,
                commit_or_rollback=state.commit_or_rollback, from_transaction_check=True, msg_id=uniq_key,
                transaction_id=header.transaction_id, broker_name=header.broker_name)
            remark = f"checkLocalTransactionState Exception: {error!r}" if error is not None else None
            try:
                await self.client_factory.mq_client_api_impl.end_transaction_oneway(addr, end, remark)
            except Exception as e:
                log.error("endTransactionOneway exception: %s", e)
                op.info({"local_transaction_state": state.value, "end_sent": False}, str(e))
                return
            op.ok({"local_transaction_state": state.value, "end_sent": True, "uniq_key": uniq_key})
