"""POP_MESSAGE (200050) headers (RocketMQ 5 ``remoting/.../protocol/header/PopMessageRequestHeader.java``,
``PopMessageResponseHeader.java``) and ``ConsumeInitMode``.

Request: ``queueId`` -1 pops from any queue of the topic; ``invisibleTime`` is how long what is
returned stays invisible to other pops; ``pollTime`` > 0 asks the broker to hold the request
until a message arrives or ``bornTime + pollTime`` (``bornTime``: the client's clock when it sent
the request); ``initMode`` says where a group without an offset starts; ``exp``/``expType`` the
filter (TAG: "*", "a || b"); ``order`` marks an orderly (FIFO) pop; ``attemptId`` lets a client
retry an orderly pop without being blocked by its own first attempt. ``bname`` is the broker name
every RpcRequestHeader carries.

Response: ``popTime`` (broker clock), ``invisibleTime``, ``reviveQid`` (the revive queue of the
checkpoint, 999 for an orderly pop), ``restNum`` (messages left behind in the queues looked at),
and the offset summaries of :mod:`rmqlab.remoting.protocol.header.extra_info_util`.
"""

from __future__ import annotations

from dataclasses import dataclass

from rmqlab.remoting.protocol.header.command_custom_header import (BOOLEAN, INTEGER, LONG, STRING, CommandCustomHeader,
                                                                   header_field)


class ConsumeInitMode:
    """``common/.../constant/ConsumeInitMode.java``: where a group without an offset starts."""

    MIN = 0
    MAX = 1


@dataclass
class PopMessageRequestHeader(CommandCustomHeader):
    consumer_group: str = header_field("consumerGroup", STRING, not_null=True)
    topic: str = header_field("topic", STRING, not_null=True)
    queue_id: int = header_field("queueId", INTEGER, not_null=True)
    max_msg_nums: int = header_field("maxMsgNums", INTEGER, not_null=True)
    invisible_time: int = header_field("invisibleTime", LONG, not_null=True)
    poll_time: int = header_field("pollTime", LONG, not_null=True, default=0)
    born_time: int = header_field("bornTime", LONG, not_null=True, default=0)
    init_mode: int = header_field("initMode", INTEGER, not_null=True, default=ConsumeInitMode.MIN)
    exp_type: str | None = header_field("expType", STRING)
    exp: str | None = header_field("exp", STRING)
    order: bool | None = header_field("order", BOOLEAN, default=False)
    attempt_id: str | None = header_field("attemptId", STRING)
    broker_name: str | None = header_field("bname", STRING)

    def get_queue_id(self) -> int:
        """``getQueueId``: any negative id means -1 (all queues)."""
        return -1 if self.queue_id < 0 else self.queue_id

    def is_order(self) -> bool:
        return bool(self.order)

    def is_timeout_too_much(self, now_ms: int) -> bool:
        """``isTimeoutTooMuch``: the request is more than 500 ms past its poll time already."""
        return now_ms - self.born_time - self.poll_time > 500


@dataclass
class PopMessageResponseHeader(CommandCustomHeader):
    pop_time: int | None = header_field("popTime", LONG, not_null=True)
    invisible_time: int | None = header_field("invisibleTime", LONG, not_null=True)
    revive_qid: int | None = header_field("reviveQid", INTEGER, not_null=True)
    rest_num: int | None = header_field("restNum", LONG, not_null=True)
    start_offset_info: str | None = header_field("startOffsetInfo", STRING)
    msg_offset_info: str | None = header_field("msgOffsetInfo", STRING)
    order_count_info: str | None = header_field("orderCountInfo", STRING)
