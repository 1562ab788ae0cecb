"""DefaultTransactionalMessageCheckListener (RocketMQ
``broker/.../transaction/queue/DefaultTransactionalMessageCheckListener.java``): a half message
whose checks ran out is copied to TRANS_CHECK_MAX_TIME_TOPIC queue 0 (the topic created on
demand, 1 queue, READ|WRITE), where an operator can find it; it is never delivered.
"""

from __future__ import annotations

import logging

from rmqlab.broker.transaction.abstract_transactional_message_check_listener import (
    AbstractTransactionalMessageCheckListener)
from rmqlab.broker.transaction.queue.transactional_message_util import TRANS_CHECK_MAX_TIME_TOPIC
from rmqlab.broker.transaction.transaction_trace import trace_half
from rmqlab.common.constant.perm_name import PermName
from rmqlab.common.message.message import MessageExt, MessageExtBrokerInner
from rmqlab.common.message.message_const import MessageConst
from rmqlab.common.message.message_decoder import properties_to_java_string
from rmqlab.store.put_message_result import PutMessageStatus

log = logging.getLogger("rmqlab.broker")


class DefaultTransactionalMessageCheckListener(AbstractTransactionalMessageCheckListener):
    async def resolve_discard_msg(self, msg_ext: MessageExt) -> None:
        """``resolveDiscardMsg``: the copy in TRANS_CHECK_MAX_TIME_TOPIC."""
        broker = self.broker
        # createTopicOfTranCheckMaxTime: 1 queue, READ|WRITE, created on first use.
        topic_config = broker.topic_config_manager.create_topic_in_send_message_back_method(
            TRANS_CHECK_MAX_TIME_TOPIC, 1, PermName.PERM_READ | PermName.PERM_WRITE, 0)
        inner = self.to_message_ext_broker_inner(msg_ext, topic_config.topic_name)
        result = await broker.transactional_message_service.bridge.put_message_return_result(inner)
        uniq = msg_ext.properties.get(MessageConst.PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX)
        if result is not None and result.put_message_status is PutMessageStatus.PUT_OK:
            trace_half(broker, msg_ext, "DISCARDED",
                       f"Put checked-too-many-time half message to TRANS_CHECK_MAXTIME_TOPIC OK. Restored in "
                       f"queueOffset={result.append_message_result.logics_offset}, commitLogOffset="
                       f"{result.append_message_result.wrote_offset}, real topic="
                       f"{msg_ext.properties.get(MessageConst.PROPERTY_REAL_TOPIC)}, uniqKey={uniq}",
                       check_times=int(msg_ext.properties.get(MessageConst.PROPERTY_TRANSACTION_CHECK_TIMES) or 0))
        else:
            log.error("Put checked-too-many-time half message to TRANS_CHECK_MAXTIME_TOPIC error. RealTopic=%s, "
                      "uniqKey=%s", msg_ext.properties.get(MessageConst.PROPERTY_REAL_TOPIC), uniq)

    @staticmethod
    def to_message_ext_broker_inner(msg_ext: MessageExt, topic: str) -> MessageExtBrokerInner:
        """``toMessageExtBrokerInner``: the half message as a message of ``topic``, queue 0."""
        inner = MessageExtBrokerInner(topic=topic, body=msg_ext.body, flag=msg_ext.flag)
        props = dict(msg_ext.properties)
        inner.properties = props
        inner.properties_string = properties_to_java_string(props)
        inner.queue_id = 0
        inner.sys_flag = msg_ext.sys_flag
        inner.born_timestamp = msg_ext.born_timestamp
        inner.born_host = msg_ext.born_host
        inner.store_host = msg_ext.store_host
        inner.reconsume_times = msg_ext.reconsume_times
        inner.msg_id = msg_ext.msg_id
        props[MessageConst.PROPERTY_WAIT_STORE_MSG_OK] = "false"
        return inner
