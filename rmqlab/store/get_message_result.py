"""GetMessageStatus / GetMessageResult: what a read from a consume queue returns.

Mirrors org.apache.rocketmq.store.{GetMessageStatus, GetMessageResult}. The buffers are the raw
commitlog bytes of each message (what a PULL_MESSAGE response body concatenates).
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field

from rmqlab.common.message.message_decoder import decode


class GetMessageStatus(enum.Enum):
    FOUND = 0
    NO_MATCHED_MESSAGE = 1
    MESSAGE_WAS_REMOVING = 2
    OFFSET_FOUND_NULL = 3
    OFFSET_OVERFLOW_BADLY = 4
    OFFSET_OVERFLOW_ONE = 5
    OFFSET_TOO_SMALL = 6
    NO_MATCHED_LOGIC_QUEUE = 7
    NO_MESSAGE_IN_QUEUE = 8
    OFFSET_RESET = 9


@dataclass
class GetMessageResult:
    status: GetMessageStatus
    next_begin_offset: int = 0
    min_offset: int = 0
    max_offset: int = 0
    message_buffers: list[bytes] = field(default_factory=list)
    queue_offsets: list[int] = field(default_factory=list)
    suggest_pulling_from_slave: bool = False

    @property
    def message_count(self) -> int:
        return len(self.message_buffers)

    @property
    def buffer_total_size(self) -> int:
        return sum(len(b) for b in self.message_buffers)

    def messages(self):
        """Decode the buffers (MessageDecoder.decode) into MessageExt objects."""
        return [decode(b) for b in self.message_buffers]
