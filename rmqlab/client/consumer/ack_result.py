"""AckStatus and AckResult: what ACK_MESSAGE and CHANGE_MESSAGE_INVISIBLETIME return (RocketMQ 5
``client/src/main/java/org/apache/rocketmq/client/consumer/AckStatus.java``, ``AckResult.java``;
``MQClientAPIImpl.ackMessageAsync`` / ``changeInvisibleTimeAsync``).

SUCCESS -> OK; any other code -> NO_EXIST (the broker's code and remark are kept here in
``response_code`` / ``remark``, which RocketMQ drops). Note what OK means: the broker recorded the
ack, not that the handle was live - an ack of a message already revived is OK too (RocketMQ).
For a change of invisible time, ``extra_info`` is the message's new handle and ``pop_time`` the
broker's new pop time.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass


class AckStatus(enum.Enum):
    OK = "OK"
    NO_EXIST = "NO_EXIST"


@dataclass
class AckResult:
    status: AckStatus
    extra_info: str | None = None
    pop_time: int = 0
    response_code: int = 0
    remark: str | None = None

    def __str__(self) -> str:
        return f"AckResult [AckStatus={self.status.name},extraInfo={self.extra_info}]"
