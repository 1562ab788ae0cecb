"""TransactionalMessageBridge (RocketMQ ``broker/.../transaction/queue/TransactionalMessageBridge.java``):
the store operations of transactions.

* ``parse_half_message_inner``: a producer's half message as stored: ``__transactionId__`` (the
  UNIQ_KEY), ``REAL_TOPIC``, ``REAL_QID`` added, the transaction bits reset to NOT (so it gets a
  normal consume-queue unit), topic RMQ_SYS_TRANS_HALF_TOPIC, queue 0;
* half and op messages read back by queue offset (the CID_RMQ_SYS_TRANS group's view of the
  store), and that group's cursors in the ConsumerOffsetManager (-1: the queue's min offset);
* ``write_op``: an op message (tag ``d``, body = half queue offsets each followed by ``,``) in
  RMQ_SYS_TRANS_OP_HALF_TOPIC, queue = the half queue's id, this broker as born and store host;
* ``renew_half_message_inner`` / ``renew_immunity_half_message_inner``: the copies the check
  appends to the half queue;
* ``escape_message``: a half message escaped through the EscapeBridge (slave acting master).
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from rmqlab.broker.broker_util import wait_completable
from rmqlab.broker.transaction.queue.transactional_message_util import (
    REMOVE_TAG, build_consumer_group, build_half_topic, build_op_topic)
from rmqlab.common.message.message import MessageExt, MessageExtBrokerInner
from rmqlab.common.message.message_const import MessageConst
from rmqlab.common.message.message_decoder import decode, properties_to_java_string
from rmqlab.common.message.message_sys_flag import MessageSysFlag
from rmqlab.store.put_message_result import PutMessageResult, PutMessageStatus

if TYPE_CHECKING:
    from rmqlab.broker.broker_controller import BrokerController

log = logging.getLogger("rmqlab.broker")


class TransactionalMessageBridge:
    def __init__(self, broker: BrokerController):
        self.broker = broker

    @property
    def store(self):
        return self.broker.message_store

    def _client_host(self) -> str:
        host, port = self.broker.store_host
        return f"{host}:{port}"

    # -- cursors ------------------------------------------------------------------------------
    def fetch_consume_offset(self, topic: str, queue_id: int) -> int:
        """``fetchConsumeOffset``: the group's cursor, or the queue's min offset (then saved)."""
        group = build_consumer_group()
        offset = self.broker.consumer_offset_manager.query_offset(group, topic, queue_id)
        if offset == -1:
            offset = self.store.get_min_offset_in_queue(topic, queue_id)
            self.update_consume_offset(topic, queue_id, offset)
        return offset

    def update_consume_offset(self, topic: str, queue_id: int, offset: int) -> None:
        self.broker.consumer_offset_manager.commit_offset(self._client_host(), build_consumer_group(), topic,
                                                          queue_id, offset)

    def fetch_message_queues(self, topic: str) -> list[int]:
        """``fetchMessageQueues``: the queue ids of ``topic`` on this broker."""
        tc = self.broker.topic_config_manager.select_topic_config(topic)
        return list(range(tc.read_queue_nums)) if tc is not None else []

    # -- reads --------------------------------------------------------------------------------
    def get_messages(self, topic: str, queue_id: int, offset: int, nums: int):
        """(status, next begin offset, messages): ``getMessage`` of the CID_RMQ_SYS_TRANS group,
        decoded with their queue offsets."""
        result = self.store.get_message(build_consumer_group(), topic, queue_id, offset, nums)
        msgs = []
        for data, queue_offset in zip(result.message_buffers, result.queue_offsets):
            msg = decode(data)
            msg.queue_offset = queue_offset
            msgs.append(msg)
        return result.status, result.next_begin_offset, msgs

    def get_half_message(self, queue_id: int, offset: int, nums: int):
        return self.get_messages(build_half_topic(), queue_id, offset, nums)

    def get_op_message(self, queue_id: int, offset: int, nums: int):
        return self.get_messages(build_op_topic(), queue_id, offset, nums)

    def look_message_by_offset(self, commit_log_offset: int) -> MessageExt | None:
        from rmqlab.broker.processor.send_message_processor import look_message_by_offset
        return look_message_by_offset(self.store, commit_log_offset)

    # -- writes -------------------------------------------------------------------------------
    @staticmethod
    def parse_half_message_inner(msg: MessageExtBrokerInner) -> MessageExtBrokerInner:
        """``parseHalfMessageInner`` (see the module docstring)."""
        props = msg.properties
        uniq_id = props.get(MessageConst.PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX)
        if uniq_id:
            props[MessageConst.PROPERTY_TRANSACTION_ID] = uniq_id
        props[MessageConst.PROPERTY_REAL_TOPIC] = msg.topic
        props[MessageConst.PROPERTY_REAL_QUEUE_ID] = str(msg.queue_id)
        msg.sys_flag = MessageSysFlag.reset_transaction_value(msg.sys_flag, MessageSysFlag.TRANSACTION_NOT_TYPE)
        msg.topic = build_half_topic()
        msg.queue_id = 0
        msg.properties_string = properties_to_java_string(props)
        return msg

    async def put_message_return_result(self, msg: MessageExtBrokerInner) -> PutMessageResult | None:
        return await wait_completable(self.store.async_put_message(msg))

    async def put_message(self, msg: MessageExtBrokerInner) -> bool:
        result = await self.put_message_return_result(msg)
        if result is not None and result.put_message_status is PutMessageStatus.PUT_OK:
            return True
        log.error("Put message failed, topic: %s, queueId: %s, msgId: %s", msg.topic, msg.queue_id, msg.msg_id)
        return False

    async def write_op(self, queue_id: int, body: str) -> bool:
        """``writeOp``: one op message for half queue ``queue_id``."""
        op_topic = build_op_topic()
        if self.broker.topic_config_manager.select_topic_config(op_topic) is None:
            return False
        msg = MessageExtBrokerInner(topic=op_topic, body=body.encode("utf-8"))
        msg.queue_id = queue_id
        # new Message(topic, REMOVE_TAG, body): the constructor adds WAIT=true; makeOpMessageInner
        # takes that map as the stored properties.
        msg.properties = {MessageConst.PROPERTY_TAGS: REMOVE_TAG, MessageConst.PROPERTY_WAIT_STORE_MSG_OK: "true"}
        msg.properties_string = properties_to_java_string(msg.properties)
        msg.sys_flag = 0
        msg.born_timestamp = self.broker.node.now_ms()
        msg.born_host = self.broker.store_host
        msg.store_host = self.broker.store_host
        return await self.put_message(msg)

    @staticmethod
    def renew_half_message_inner(msg_ext: MessageExt) -> MessageExtBrokerInner:
        """``renewHalfMessageInner``: a copy of a half message, to append to its half queue."""
        inner = MessageExtBrokerInner(topic=msg_ext.topic, body=msg_ext.body, flag=msg_ext.flag)
        inner.queue_id = msg_ext.queue_id
        inner.msg_id = msg_ext.msg_id
        inner.sys_flag = msg_ext.sys_flag
        props = dict(msg_ext.properties)
        inner.properties = props
        inner.properties_string = properties_to_java_string(props)
        inner.born_timestamp = msg_ext.born_timestamp
        inner.born_host = msg_ext.born_host
        inner.store_host = msg_ext.store_host
        inner.reconsume_times = msg_ext.reconsume_times
        # setWaitStoreMsgOK(false) after setPropertiesString: the map only, the bytes keep theirs.
        props[MessageConst.PROPERTY_WAIT_STORE_MSG_OK] = "false"
        return inner

    def renew_immunity_half_message_inner(self, msg_ext: MessageExt) -> MessageExtBrokerInner:
        """``renewImmunityHalfMessageInner``: a copy that remembers the original's queue offset."""
        inner = self.renew_half_message_inner(msg_ext)
        offset = msg_ext.properties.get(MessageConst.PROPERTY_TRANSACTION_PREPARED_QUEUE_OFFSET)
        if offset is None:
            inner.properties[MessageConst.PROPERTY_TRANSACTION_PREPARED_QUEUE_OFFSET] = str(msg_ext.queue_offset)
        inner.properties_string = properties_to_java_string(
            {k: v for k, v in inner.properties.items() if k != MessageConst.PROPERTY_WAIT_STORE_MSG_OK}
            if MessageConst.PROPERTY_WAIT_STORE_MSG_OK not in msg_ext.properties else inner.properties)
        return inner

    async def escape_message(self, msg: MessageExtBrokerInner) -> bool:
        """``escapeMessage``: through the EscapeBridge (which converts a half message back)."""
        result = await self.broker.escape_bridge.put_message(msg)
        if result is not None and result.put_message_status is PutMessageStatus.PUT_OK:
            return True
        log.error("Escaping message failed, topic: %s, queueId: %s, msgId: %s", msg.topic, msg.queue_id, msg.msg_id)
        return False
