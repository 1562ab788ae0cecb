"""PullStatus and PullResult: what a pull returns (``client/consumer/PullStatus.java``,
``PullResult.java``, ``client/impl/consumer/PullResultExt.java``; mapping of
``MQClientAPIImpl.processPullResponse``).

    response code                PullStatus
    SUCCESS (0)                  FOUND            messages from the requested offset
    PULL_NOT_FOUND (19)          NO_NEW_MSG       nothing at or after the offset (yet)
    PULL_RETRY_IMMEDIATELY (20)  NO_MATCHED_MSG   none matched the filter; or a slave sends the
                                                  client back to its master
    PULL_OFFSET_MOVED (21)       OFFSET_ILLEGAL   the offset is outside the queue: restart at
                                                  next_begin_offset

Any other code is an MQBrokerException. ``suggest_which_broker_id`` is the broker id the next
pull of this queue should go to (PullAPIWrapper remembers it per queue).
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field

from rmqlab.common.message.message import MessageExt
from rmqlab.common.message.message_const import MessageConst
from rmqlab.remoting.response_code import ResponseCode


def client_msg_id(msg: MessageExt) -> str | None:
    """``MessageClientExt.getMsgId``: what a client calls a pulled message's id - its UNIQ_KEY,
    else the offset message id."""
    return msg.properties.get(MessageConst.PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX) or msg.msg_id


class PullStatus(enum.Enum):
    FOUND = "FOUND"
    NO_NEW_MSG = "NO_NEW_MSG"
    NO_MATCHED_MSG = "NO_MATCHED_MSG"
    OFFSET_ILLEGAL = "OFFSET_ILLEGAL"

    @classmethod
    def from_response_code(cls, code: int) -> PullStatus | None:
        return STATUS_BY_CODE.get(code)


STATUS_BY_CODE = {
    ResponseCode.SUCCESS: PullStatus.FOUND,
    ResponseCode.PULL_NOT_FOUND: PullStatus.NO_NEW_MSG,
    ResponseCode.PULL_RETRY_IMMEDIATELY: PullStatus.NO_MATCHED_MSG,
    ResponseCode.PULL_OFFSET_MOVED: PullStatus.OFFSET_ILLEGAL,
}


@dataclass
class PullResult:
    pull_status: PullStatus
    next_begin_offset: int
    min_offset: int
    max_offset: int
    msg_found_list: list[MessageExt] = field(default_factory=list)
    # PullResultExt: the raw answer, until PullAPIWrapper.process_pull_result decodes it.
    suggest_which_broker_id: int = 0
    message_binary: bytes | None = None
    # Which broker answered (host:port), for the trace.
    broker_addr: str | None = None
