"""PopStatus and PopResult: what a POP_MESSAGE returns (RocketMQ 5
``client/src/main/java/org/apache/rocketmq/client/consumer/PopStatus.java``, ``PopResult.java``;
mapping of ``MQClientAPIImpl.processPopResponse``).

    response code             PopStatus
    SUCCESS (0)               FOUND              messages, each with its POP_CK handle
    POLLING_FULL (209)        POLLING_FULL       too many pops held on the broker: do not retry at once
    POLLING_TIMEOUT (210)     POLLING_NOT_FOUND  nothing within the poll time
    PULL_NOT_FOUND (19)       POLLING_NOT_FOUND

Any other code is an MQBrokerException. NO_NEW_MSG is RocketMQ's initial value, which no answer
leaves in place (kept for its API). ``rest_num`` is what the broker saw left in the queues it
looked at; ``pop_time`` (broker clock) and ``invisible_time`` are set for FOUND.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field

from rmqlab.common.message.message import MessageExt


class PopStatus(enum.Enum):
    FOUND = "FOUND"
    NO_NEW_MSG = "NO_NEW_MSG"
    POLLING_FULL = "POLLING_FULL"
    POLLING_NOT_FOUND = "POLLING_NOT_FOUND"


@dataclass
class PopResult:
    pop_status: PopStatus
    msg_found_list: list[MessageExt] = field(default_factory=list)
    pop_time: int = 0
    invisible_time: int = 0
    rest_num: int = 0

    def __str__(self) -> str:
        return f"PopResult [popStatus={self.pop_status.name},msgFoundList={len(self.msg_found_list)},restNum={self.rest_num}]"
