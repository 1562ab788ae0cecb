"""EndTransactionProcessor: END_TRANSACTION (37), a producer's commit or rollback of a half message.

RocketMQ ``broker/src/main/java/org/apache/rocketmq/broker/processor/EndTransactionProcessor.java``
(5.x). The request is oneway from producers (the answer below is only seen by a caller that
invokes it synchronously, and in the broker's log). In order:

1. the header (``EndTransactionRequestHeader``; a missing field or a ``commitOrRollback`` other than
   0/8/12 -> SYSTEM_ERROR with the decoder's text, "commitOrRollback field wrong");
2. a SLAVE store -> SLAVE_NOT_AVAILABLE (11) (a slave acting as master too: its store is read-only;
   its check service escapes the half message instead, see ``rmqlab.broker.transaction``);
3. ``commitOrRollback`` 0 (UNKNOW) -> logged, no response at all;
4. the half message at ``commitLogOffset`` (none -> SYSTEM_ERROR "Find prepared transaction message
   failed");
5. not from a check, with the producer's CHECK_IMMUNITY_TIME_IN_SECONDS: older than
   max(value x 1000, transactionTimeOut) -> ILLEGAL_OPERATION (604): the check will resolve it;
6. ``checkPrepareMessage``: its PGROUP must be ``producerGroup`` ("The producer group wrong"), its
   queue offset ``tranStateTableOffset`` ("The transaction state table offset wrong"), its
   commit-log offset ``commitLogOffset`` ("The commit log offset wrong"), else SYSTEM_ERROR;
7. COMMIT: the real message is rebuilt (``endMessageTransaction``: REAL_TOPIC / REAL_QID, body, flag,
   born time and host, reconsume times; transaction bits COMMIT, ``preparedTransactionOffset`` =
   the half message's offset, store timestamp = the half's) and put through the store's put hook
   and the store; PUT_OK, FLUSH_DISK_TIMEOUT, FLUSH_SLAVE_TIMEOUT or SLAVE_NOT_AVAILABLE are
   success, and only then is the half message ended (its op record queued);
8. ROLLBACK: the half message is ended (op record) and nothing is written to the real topic.

**Quirk** kept from RocketMQ: the committed message's stored properties are the half message's
string (``setPropertiesString`` before ``clearProperty``), so consumers still see ``TRAN_MSG``,
``REAL_TOPIC``, ``REAL_QID``, ``PGROUP`` and ``__transactionId__``; only the in-memory map loses them.

Each outcome is a ``state`` event of machine ``TransactionalMessage.half``
(``rmqlab.broker.transaction.transaction_trace``).
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from rmqlab.broker.transaction.queue.transactional_message_util import get_immunity_time_with_floor
from rmqlab.broker.transaction.transaction_trace import trace_half
from rmqlab.broker.util.hook_utils import handle_schedule_message
from rmqlab.broker.broker_util import wait_completable
from rmqlab.common.java_compat import java_parse_int
from rmqlab.common.message.message import MessageExt, MessageExtBrokerInner
from rmqlab.common.message.message_const import MessageConst
from rmqlab.common.message.message_decoder import properties_to_java_string
from rmqlab.common.message.message_sys_flag import MessageSysFlag
from rmqlab.config.broker import BrokerRole
from rmqlab.remoting.protocol.header.end_transaction_request_header import EndTransactionRequestHeader
from rmqlab.remoting.remoting_command import RemotingCommand
from rmqlab.remoting.response_code import ResponseCode
from rmqlab.store.put_message_result import PutMessageStatus

if TYPE_CHECKING:
    from rmqlab.broker.broker_controller import BrokerController
    from rmqlab.remoting.remoting_channel import RemotingChannel

log = logging.getLogger("rmqlab.broker")

_TYPE_NAMES = {MessageSysFlag.TRANSACTION_NOT_TYPE: "UNKNOW", MessageSysFlag.TRANSACTION_COMMIT_TYPE: "COMMIT",
               MessageSysFlag.TRANSACTION_ROLLBACK_TYPE: "ROLLBACK"}


class EndTransactionProcessor:
    def __init__(self, broker: BrokerController):
        self.broker = broker

    async def process(self, channel: RemotingChannel, request: RemotingCommand) -> RemotingCommand | None:
        broker = self.broker
        response = RemotingCommand.create_response_command(ResponseCode.SYSTEM_ERROR, None)
        header = EndTransactionRequestHeader.decode(request)
        if broker.message_store_config.brokerRole == BrokerRole.SLAVE:
            response.code = ResponseCode.SLAVE_NOT_AVAILABLE
            log.warning("Message store is slave mode, so end transaction is forbidden. ")
            return response
        kind = _TYPE_NAMES[header.commit_or_rollback]
        if header.from_transaction_check:
            log.info("Check producer[%s] transaction state, the producer %s the message. RequestHeader: "
                     "msgId=%s", channel.remote_addr, kind, header.msg_id)
        if header.commit_or_rollback == MessageSysFlag.TRANSACTION_NOT_TYPE:
            if header.from_transaction_check:
                log.warning("Check producer[%s] transaction state, but it's pending status. msgId=%s",
                            channel.remote_addr, header.msg_id)
            else:
                log.warning("The producer[%s] end transaction in sending message,  and it's pending status. "
                            "msgId=%s", channel.remote_addr, header.msg_id)
            return None
        service = broker.transactional_message_service
        if header.commit_or_rollback == MessageSysFlag.TRANSACTION_COMMIT_TYPE:
            result = service.commit_message(header)
        else:
            result = service.rollback_message(header)
        if result.response_code != ResponseCode.SUCCESS:
            response.code, response.remark = result.response_code, result.response_remark
            return response
        half = result.prepare_message
        if self.reject_commit_or_rollback(header, half):
            response.code = ResponseCode.ILLEGAL_OPERATION
            log.warning("Message %s fail [producer end]. currentTimeMillis - bornTime > checkImmunityTime, msgId=%s,"
                        "commitLogOffset=%s, wait check", kind.lower(), half.msg_id, half.commit_log_offset)
            return response
        res = self.check_prepare_message(half, header)
        if res.code != ResponseCode.SUCCESS:
            return res
        if header.commit_or_rollback == MessageSysFlag.TRANSACTION_ROLLBACK_TYPE:
            await service.delete_prepare_message(half)
            trace_half(broker, half, "ROLLED_BACK", f"Rollback transaction message, msgId={header.msg_id}, "
                       f"commitLogOffset={half.commit_log_offset}", from_transaction_check=header.from_transaction_check)
            return res
        inner = self.end_message_transaction(half)
        inner.sys_flag = MessageSysFlag.reset_transaction_value(inner.sys_flag, header.commit_or_rollback)
        inner.queue_offset = header.tran_state_table_offset
        inner.prepared_transaction_offset = header.commit_log_offset
        inner.store_timestamp = half.store_timestamp
        send_result, put_result = await self.send_final_message(inner)
        if send_result.code == ResponseCode.SUCCESS:
            await service.delete_prepare_message(half)
            append = put_result.append_message_result
            trace_half(broker, half, "COMMITTED", f"Commit transaction message, msgId={header.msg_id}, topic="
                       f"{inner.topic}, queueId={inner.queue_id}, queueOffset={append.logics_offset}",
                       from_transaction_check=header.from_transaction_check, queue_id=inner.queue_id,
                       queue_offset=append.logics_offset, commit_log_offset=append.wrote_offset)
        return send_result

    def reject_commit_or_rollback(self, header: EndTransactionRequestHeader, msg_ext: MessageExt) -> bool:
        """``rejectCommitOrRollback``: a producer's own end that comes after its custom immunity."""
        if header.from_transaction_check:
            return False
        value = msg_ext.properties.get(MessageConst.PROPERTY_CHECK_IMMUNITY_TIME_IN_SECONDS)
        if value:
            age = self.broker.node.now_ms() - msg_ext.born_timestamp
            return age > get_immunity_time_with_floor(value, self.broker.broker_config.transactionTimeOut)
        return False

    @staticmethod
    def check_prepare_message(msg_ext: MessageExt | None, header: EndTransactionRequestHeader) -> RemotingCommand:
        """``checkPrepareMessage``."""
        response = RemotingCommand.create_response_command(ResponseCode.SYSTEM_ERROR, None)
        if msg_ext is None:
            response.remark = "Find prepared transaction message failed"
            return response
        pgroup_read = msg_ext.properties.get(MessageConst.PROPERTY_PRODUCER_GROUP)
        if pgroup_read is None:
            # Java: pgroupRead.equals(...) throws NullPointerException, answered as SYSTEM_ERROR.
            response.remark = "java.lang.NullPointerException"
            return response
        if pgroup_read != header.producer_group:
            response.remark = "The producer group wrong"
            return response
        if msg_ext.queue_offset != header.tran_state_table_offset:
            response.remark = "The transaction state table offset wrong"
            return response
        if msg_ext.commit_log_offset != header.commit_log_offset:
            response.remark = "The commit log offset wrong"
            return response
        response.code = ResponseCode.SUCCESS
        return response

    @staticmethod
    def end_message_transaction(msg_ext: MessageExt) -> MessageExtBrokerInner:
        """``endMessageTransaction``: the real message (see the quirk in the module docstring)."""
        props = dict(msg_ext.properties)
        inner = MessageExtBrokerInner(topic=props.get(MessageConst.PROPERTY_REAL_TOPIC), body=msg_ext.body,
                                      flag=msg_ext.flag)
        inner.queue_id = java_parse_int(props.get(MessageConst.PROPERTY_REAL_QUEUE_ID))
        inner.born_timestamp = msg_ext.born_timestamp
        inner.born_host = msg_ext.born_host
        inner.store_host = msg_ext.store_host
        inner.reconsume_times = msg_ext.reconsume_times
        inner.sys_flag = msg_ext.sys_flag
        inner.properties = props
        inner.properties_string = properties_to_java_string(msg_ext.properties)
        for name in (MessageConst.PROPERTY_REAL_TOPIC, MessageConst.PROPERTY_REAL_QUEUE_ID,
                     MessageConst.PROPERTY_TRANSACTION_PREPARED):
            props.pop(name, None)  # the map only: the string above keeps them
        return inner

    async def send_final_message(self, msg: MessageExtBrokerInner):
        """``sendFinalMessage``: (response, put result)."""
        response = RemotingCommand.create_response_command(ResponseCode.SYSTEM_ERROR, None)
        put_result = handle_schedule_message(self.broker, msg)
        if put_result is None:
            put_result = await wait_completable(self.broker.message_store.async_put_message(msg))
        if put_result is None:
            response.remark = "store putMessage return null"
            return response, None
        S = PutMessageStatus
        status = put_result.put_message_status
        if status in (S.PUT_OK, S.FLUSH_DISK_TIMEOUT, S.FLUSH_SLAVE_TIMEOUT, S.SLAVE_NOT_AVAILABLE):
            response.code = ResponseCode.SUCCESS
        elif status is S.CREATE_MAPPED_FILE_FAILED:
            response.remark = "Create mapped file failed."
        elif status in (S.MESSAGE_ILLEGAL, S.PROPERTIES_SIZE_EXCEEDED):
            response.code = ResponseCode.MESSAGE_ILLEGAL
            response.remark = ("The message is illegal, maybe msg body or properties length not matched. msg body "
                               "length limit 128k, msg properties length limit 32k.")
        elif status is S.SERVICE_NOT_AVAILABLE:
            response.code = ResponseCode.SERVICE_NOT_AVAILABLE
            response.remark = "Service not available now."
        elif status is S.OS_PAGE_CACHE_BUSY:
            response.remark = "OS page cache busy, please try another machine"
        elif status is S.UNKNOWN_ERROR:
            response.remark = "UNKNOWN_ERROR"
        else:
            response.remark = "UNKNOWN_ERROR DEFAULT"
        return response, put_result
