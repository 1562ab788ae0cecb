"""TransactionSendResult (RocketMQ ``client/.../producer/TransactionSendResult.java``): the half
message's SendResult and the local transaction's state."""

from __future__ import annotations

from dataclasses import dataclass

from rmqlab.client.producer.local_transaction_state import LocalTransactionState
from rmqlab.client.producer.send_result import SendResult


@dataclass
class TransactionSendResult(SendResult):
    local_transaction_state: LocalTransactionState = LocalTransactionState.UNKNOW

    def to_trace_value(self) -> dict:
        return dict(super().to_trace_value(), local_transaction_state=self.local_transaction_state.value)
