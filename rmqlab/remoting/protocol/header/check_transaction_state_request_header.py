"""Header of CHECK_TRANSACTION_STATE (39): the broker asks a producer of the half message's group
what became of its local transaction (oneway; the producer answers with END_TRANSACTION).

RocketMQ ``remoting/src/main/java/org/apache/rocketmq/remoting/protocol/header/CheckTransactionStateRequestHeader.java``.
The offsets name the half message the check is about (the check copy, see
``rmqlab.broker.transaction.queue.transactional_message_service_impl``); ``msgId`` and
``transactionId`` are its UNIQ_KEY, ``offsetMsgId`` its offset message id.
"""

from __future__ import annotations

from dataclasses import dataclass

from rmqlab.common.message.message import MessageExt
from rmqlab.common.message.message_decoder import decode
from rmqlab.remoting.protocol.header.command_custom_header import LONG, STRING, CommandCustomHeader, header_field


@dataclass
class CheckTransactionStateRequestHeader(CommandCustomHeader):
    topic: str | None = header_field("topic", STRING)
    tran_state_table_offset: int = header_field("tranStateTableOffset", LONG, not_null=True)
    commit_log_offset: int = header_field("commitLogOffset", LONG, not_null=True)
    msg_id: str | None = header_field("msgId", STRING)
    transaction_id: str | None = header_field("transactionId", STRING)
    offset_msg_id: str | None = header_field("offsetMsgId", STRING)
    broker_name: str | None = header_field("brokerName", STRING)


def decode_check_request(request) -> tuple[CheckTransactionStateRequestHeader, MessageExt | None]:
    """A CHECK_TRANSACTION_STATE request: its header, and its body's half message (real topic and
    queue restored by the broker), or None when the body does not decode (logged by the caller, as
    ``ClientRemotingProcessor.checkTransactionState`` does, and the broker checks again)."""
    header = CheckTransactionStateRequestHeader.decode(request)
    try:
        return header, decode(request.body or b"")
    except (ValueError, IndexError):
        return header, None
