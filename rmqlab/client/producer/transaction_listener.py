"""TransactionListener (RocketMQ ``client/.../producer/TransactionListener.java``): the producer's
local transaction. Either method may be a coroutine function; returning None or raising counts as
``UNKNOW``."""

from __future__ import annotations

from typing import Any, Protocol

from rmqlab.client.producer.local_transaction_state import LocalTransactionState
from rmqlab.common.message.message import Message, MessageExt


class TransactionListener(Protocol):
    def execute_local_transaction(self, msg: Message, arg: Any) -> LocalTransactionState | None:
        """Runs once the half message is stored (SEND_OK)."""

    def check_local_transaction(self, msg: MessageExt) -> LocalTransactionState | None:
        """The broker's check of a half message left unknown (or whose end was lost)."""
