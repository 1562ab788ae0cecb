"""AbstractTransactionalMessageCheckListener (RocketMQ
``broker/.../transaction/AbstractTransactionalMessageCheckListener.java``): ``resolve_half_msg``
sends CHECK_TRANSACTION_STATE for a half message (the check copy) to one live channel of its
producer group (``PGROUP``); with none connected it is logged and the next check tries again.

``sendCheckMessage``: the header names the copy (queue offset, commit-log offset, offset message
id) and its UNIQ_KEY as msgId and transactionId; the body is the message with its real topic and
queue restored (``MessageDecoder.encode``). RocketMQ sends it from a pool (2-5 threads,
caller-runs); here it is a node task, so the walk does not wait for the send.
"""

from __future__ import annotations

import logging
from abc import ABC, abstractmethod
from typing import TYPE_CHECKING

from rmqlab.broker.transaction.transaction_trace import trace_half
from rmqlab.common.java_compat import java_parse_int
from rmqlab.common.message.message import MessageExt
from rmqlab.common.message.message_const import MessageConst
from rmqlab.remoting.protocol.header.check_transaction_state_request_header import CheckTransactionStateRequestHeader

if TYPE_CHECKING:
    from rmqlab.broker.broker_controller import BrokerController

log = logging.getLogger("rmqlab.broker")


class AbstractTransactionalMessageCheckListener(ABC):
    """Java's abstract class: a broker uses DefaultTransactionalMessageCheckListener, which says
    what becomes of a half message whose checks ran out."""

    def __init__(self, broker: BrokerController):
        self.broker = broker

    async def resolve_half_msg(self, msg_ext: MessageExt, original_offset: int) -> None:
        """``resolveHalfMsg``: send the check (``original_offset``: the queue offset the walk found
        it at, for the trace)."""
        self.send_check_message(msg_ext, original_offset)

    def send_check_message(self, msg_ext: MessageExt, original_offset: int = -1) -> None:
        broker = self.broker
        props = msg_ext.properties
        uniq_key = props.get(MessageConst.PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX)
        real_topic = props.get(MessageConst.PROPERTY_REAL_TOPIC)
        header = CheckTransactionStateRequestHeader(
            topic=real_topic, tran_state_table_offset=msg_ext.queue_offset,
            commit_log_offset=msg_ext.commit_log_offset, msg_id=uniq_key, transaction_id=uniq_key,
            offset_msg_id=msg_ext.msg_id, broker_name=broker.broker_config.brokerName)
        msg_ext.topic = real_topic
        msg_ext.queue_id = java_parse_int(props.get(MessageConst.PROPERTY_REAL_QUEUE_ID))
        msg_ext.store_size = 0
        group = props.get(MessageConst.PROPERTY_PRODUCER_GROUP)
        channel = broker.producer_manager.get_available_channel(group)
        fields = dict(producer_group=group, check_times=java_parse_int(
            props.get(MessageConst.PROPERTY_TRANSACTION_CHECK_TIMES) or "1"), half_queue_offset=original_offset,
                      check_queue_offset=msg_ext.queue_offset, check_offset=msg_ext.commit_log_offset)
        if channel is None:
            trace_half(broker, msg_ext, "CHECKING", f"Check transaction failed, channel is null. groupId={group}",
                       "WARN", channel=None, **fields)
            return
        trace_half(broker, msg_ext, "CHECKING", f"Check transaction. groupId={group}, uniqKey={uniq_key}, "
                   f"channel={channel.remote_addr}", channel=channel.remote_addr, **fields)
        broker.broker2client.check_producer_transaction_state(group, channel, header, msg_ext)

    def on_escaped(self, msg_ext: MessageExt) -> None:
        trace_half(self.broker, msg_ext, "ESCAPED", "Escaped transactional half message to another broker, "
                   f"uniqKey={msg_ext.properties.get(MessageConst.PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX)}")

    @abstractmethod
    async def resolve_discard_msg(self, msg_ext: MessageExt) -> None:
        """``resolveDiscardMsg``: a half message checked transactionCheckMax times, or older than
        the commit log's retention, is given up."""
