"""ReceiptHandle (common/consumer/ReceiptHandle.java): what a gRPC client holds for a received
message, and gives back to ack it or change its invisible time.

It is the broker's POP_CK extra info (ExtraInfoUtil: startOffset, popTime, invisibleTime,
reviveQueueId, topicType, brokerName, queueId, offset) with the message's commitlog offset
appended by the Proxy, all separated by single spaces:

    "<startOffset> <retrieveTime> <invisibleTime> <reviveQid> <topicType> <brokerName> <queueId> <offset> <commitLogOffset>"

Everything a later ack needs is in the handle, which is why the Proxy itself holds no
consumption state: a restarted Proxy acks a handle it never issued.
"""

from __future__ import annotations

from dataclasses import dataclass

SEPARATOR = " "  # MessageConst.KEY_SEPARATOR
NORMAL_TOPIC, RETRY_TOPIC, RETRY_TOPIC_V2 = "0", "1", "2"


@dataclass(frozen=True)
class ReceiptHandle:
    start_offset: int
    retrieve_time: int
    invisible_time: int
    revive_queue_id: int
    topic_type: str
    broker_name: str
    queue_id: int
    offset: int
    commit_log_offset: int
    receipt_handle: str

    @property
    def next_visible_time(self) -> int:
        return self.retrieve_time + self.invisible_time

    def is_expired(self, now_ms: int) -> bool:
        return self.next_visible_time <= now_ms

    def encode(self) -> str:
        return SEPARATOR.join(str(v) for v in (
            self.start_offset, self.retrieve_time, self.invisible_time, self.revive_queue_id, self.topic_type,
            self.broker_name, self.queue_id, self.offset, self.commit_log_offset))

    @classmethod
    def decode(cls, receipt_handle: str) -> ReceiptHandle:
        """ValueError naming the problem for anything that is not a handle (RocketMQ:
        IllegalArgumentException / NumberFormatException, answered INVALID_RECEIPT_HANDLE)."""
        parts = receipt_handle.split(SEPARATOR)
        if len(parts) < 8:
            raise ValueError(f"Parse failed, dataList size {len(parts)}")
        try:
            return cls(int(parts[0]), int(parts[1]), int(parts[2]), int(parts[3]), parts[4], parts[5], int(parts[6]),
                       int(parts[7]), int(parts[8]) if len(parts) >= 9 else -1, receipt_handle)
        except ValueError as e:
            raise ValueError(f"Parse failed: {e}") from None


def create_handle(extra_info: str, commit_log_offset: int) -> str:
    """ConsumerProcessor.createHandle: the broker's POP_CK with the commitlog offset appended."""
    return f"{extra_info}{SEPARATOR}{commit_log_offset}"
