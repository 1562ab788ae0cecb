"""Results of appending to the CommitLog (PutMessageStatus, AppendMessageResult, PutMessageResult).

Mirrors org.apache.rocketmq.store.{PutMessageStatus, AppendMessageStatus, AppendMessageResult,
PutMessageResult}. PutMessageStatus keeps Java's ordinal order; the broker maps it to send-response
codes in ``SendMessageProcessor.handlePutMessageResult``.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

from rmqlab.common.message.message_decoder import create_message_id


class PutMessageStatus(enum.Enum):
    PUT_OK = 0
    FLUSH_DISK_TIMEOUT = 1
    FLUSH_SLAVE_TIMEOUT = 2
    SLAVE_NOT_AVAILABLE = 3
    SERVICE_NOT_AVAILABLE = 4
    CREATE_MAPPED_FILE_FAILED = 5
    MESSAGE_ILLEGAL = 6
    PROPERTIES_SIZE_EXCEEDED = 7
    OS_PAGE_CACHE_BUSY = 8
    UNKNOWN_ERROR = 9
    IN_SYNC_REPLICAS_NOT_ENOUGH = 10
    PUT_TO_REMOTE_BROKER_FAIL = 11
    LMQ_CONSUME_QUEUE_NUM_EXCEEDED = 12
    WHEEL_TIMER_FLOW_CONTROL = 13
    WHEEL_TIMER_MSG_ILLEGAL = 14
    WHEEL_TIMER_NOT_ENABLE = 15

    def is_stored(self) -> bool:
        """The message is in the commitlog: OK, or only a flush/replication wait failed
        (``SendMessageProcessor.handlePutMessageResult`` sets sendOK for exactly these)."""
        return self in (PutMessageStatus.PUT_OK, PutMessageStatus.FLUSH_DISK_TIMEOUT,
                        PutMessageStatus.FLUSH_SLAVE_TIMEOUT, PutMessageStatus.SLAVE_NOT_AVAILABLE)


class AppendMessageStatus(enum.Enum):
    PUT_OK = 0
    END_OF_FILE = 1
    MESSAGE_SIZE_EXCEEDED = 2
    PROPERTIES_SIZE_EXCEEDED = 3
    UNKNOWN_ERROR = 4


@dataclass
class AppendMessageResult:
    status: AppendMessageStatus
    wrote_offset: int = 0
    wrote_bytes: int = 0
    store_timestamp: int = 0
    logics_offset: int = 0  # the queue offset the message got
    msg_num: int = 1
    store_host: tuple[str, int] | None = None

    @property
    def next_offset(self) -> int:
        return self.wrote_offset + self.wrote_bytes

    @property
    def msg_id(self) -> str:
        """The offset message id (store host + wrote offset), built on demand like RocketMQ's
        msgIdSupplier: most appends never need it as a string."""
        return create_message_id(self.store_host, self.wrote_offset) if self.store_host else ""


@dataclass
class PutMessageResult:
    put_message_status: PutMessageStatus
    append_message_result: AppendMessageResult | None = None
    remark: str = ""

    def is_ok(self) -> bool:
        return self.append_message_result is not None and self.put_message_status.is_stored()
