"""SendStatus and SendResult: what a send returns (``client/producer/SendStatus.java``,
``SendResult.java``; status mapping of ``MQClientAPIImpl.processSendResponse``).

Every status means the broker stored the message. The response code says how safely:

    response code              SendStatus
    SUCCESS (0)                SEND_OK
    FLUSH_DISK_TIMEOUT (10)    FLUSH_DISK_TIMEOUT   (SYNC_FLUSH did not reach the disk in time)
    FLUSH_SLAVE_TIMEOUT (12)   FLUSH_SLAVE_TIMEOUT  (SYNC_MASTER: the slave did not ack in time)
    SLAVE_NOT_AVAILABLE (11)   SLAVE_NOT_AVAILABLE  (SYNC_MASTER without a slave in sync)

Any other code is an MQBrokerException. ``msg_id`` is the message's UNIQ_KEY (set by the producer),
``offset_msg_id`` the broker's store-host + commitlog-offset id.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

from rmqlab.remoting.protocol.header.broker.admin import MessageQueue
from rmqlab.remoting.response_code import ResponseCode


class SendStatus(enum.Enum):
    SEND_OK = "SEND_OK"
    FLUSH_DISK_TIMEOUT = "FLUSH_DISK_TIMEOUT"
    FLUSH_SLAVE_TIMEOUT = "FLUSH_SLAVE_TIMEOUT"
    SLAVE_NOT_AVAILABLE = "SLAVE_NOT_AVAILABLE"

    @classmethod
    def from_response_code(cls, code: int) -> SendStatus | None:
        """The status of a stored message, or None for a code that means it was not stored."""
        return STATUS_BY_CODE.get(code)


STATUS_BY_CODE = {
    ResponseCode.SUCCESS: SendStatus.SEND_OK,
    ResponseCode.FLUSH_DISK_TIMEOUT: SendStatus.FLUSH_DISK_TIMEOUT,
    ResponseCode.FLUSH_SLAVE_TIMEOUT: SendStatus.FLUSH_SLAVE_TIMEOUT,
    ResponseCode.SLAVE_NOT_AVAILABLE: SendStatus.SLAVE_NOT_AVAILABLE,
}


@dataclass
class SendResult:
    send_status: SendStatus
    msg_id: str | None
    message_queue: MessageQueue
    queue_offset: int
    offset_msg_id: str | None = None
    transaction_id: str | None = None
    region_id: str | None = None
    trace_on: bool = True

    def to_trace_value(self) -> dict:
        return {"send_status": self.send_status.value, "msg_id": self.msg_id, "offset_msg_id": self.offset_msg_id,
                "broker_name": self.message_queue.broker_name, "queue_id": self.message_queue.queue_id,
                "queue_offset": self.queue_offset}
