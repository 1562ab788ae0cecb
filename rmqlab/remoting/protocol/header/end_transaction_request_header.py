"""Header of END_TRANSACTION (37): a producer commits or rolls back a half message (oneway).

RocketMQ ``remoting/src/main/java/org/apache/rocketmq/remoting/protocol/header/EndTransactionRequestHeader.java``
(with the ``brokerName`` of its base ``RpcRequestHeader``). ``commitOrRollback`` is a
``MessageSysFlag`` transaction type: 0 (NOT: unknown), 8 (COMMIT) or 12 (ROLLBACK); any other value
fails ``checkFields`` with "commitOrRollback field wrong". ``tranStateTableOffset`` is the half
message's queue offset in RMQ_SYS_TRANS_HALF_TOPIC, ``commitLogOffset`` its commit-log offset.
"""

from __future__ import annotations

from dataclasses import dataclass

from rmqlab.common.message.message_sys_flag import MessageSysFlag
from rmqlab.remoting.exceptions import RemotingCommandError
from rmqlab.remoting.protocol.header.command_custom_header import (
    BOOLEAN, INTEGER, LONG, STRING, CommandCustomHeader, header_field)


@dataclass
class EndTransactionRequestHeader(CommandCustomHeader):
    topic: str | None = header_field("topic", STRING)
    producer_group: str = header_field("producerGroup", STRING, not_null=True)
    tran_state_table_offset: int = header_field("tranStateTableOffset", LONG, not_null=True)
    commit_log_offset: int = header_field("commitLogOffset", LONG, not_null=True)
    commit_or_rollback: int = header_field("commitOrRollback", INTEGER, not_null=True)
    from_transaction_check: bool = header_field("fromTransactionCheck", BOOLEAN, default=False)
    msg_id: str = header_field("msgId", STRING, not_null=True)
    transaction_id: str | None = header_field("transactionId", STRING)
    broker_name: str | None = header_field("brokerName", STRING)

    def check_fields(self) -> None:
        if self.commit_or_rollback in (MessageSysFlag.TRANSACTION_NOT_TYPE, MessageSysFlag.TRANSACTION_COMMIT_TYPE,
                                       MessageSysFlag.TRANSACTION_ROLLBACK_TYPE):
            return
        raise RemotingCommandError("commitOrRollback field wrong")
