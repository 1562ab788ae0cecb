"""LocalTransactionState (RocketMQ ``client/.../producer/LocalTransactionState.java``): what a
producer's local transaction came to. ``UNKNOW`` (RocketMQ's spelling) leaves the half message
to the broker's check."""

from __future__ import annotations

import enum

from rmqlab.common.message.message_sys_flag import MessageSysFlag


class LocalTransactionState(enum.Enum):
    COMMIT_MESSAGE = "COMMIT_MESSAGE"
    ROLLBACK_MESSAGE = "ROLLBACK_MESSAGE"
    UNKNOW = "UNKNOW"

    @property
    def commit_or_rollback(self) -> int:
        """END_TRANSACTION's ``commitOrRollback``: COMMIT 8, ROLLBACK 12, UNKNOW 0."""
        return {LocalTransactionState.COMMIT_MESSAGE: MessageSysFlag.TRANSACTION_COMMIT_TYPE,
                LocalTransactionState.ROLLBACK_MESSAGE: MessageSysFlag.TRANSACTION_ROLLBACK_TYPE,
                }.get(self, MessageSysFlag.TRANSACTION_NOT_TYPE)
