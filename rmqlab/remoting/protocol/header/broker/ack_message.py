"""ACK_MESSAGE (200051) request header (RocketMQ 5 ``remoting/.../protocol/header/AckMessageRequestHeader.java``).

``extraInfo`` is the popped message's POP_CK handle (see extra_info_util), ``topic`` the topic the
message is stored in (the pop retry topic for a retried message: ``ExtraInfoUtil.getRealTopic``),
``queueId``/``offset`` its queue and queue offset. The answer has no header: SUCCESS, or an error
code with a remark.
"""

from __future__ import annotations

from dataclasses import dataclass

from rmqlab.remoting.protocol.header.command_custom_header import INTEGER, LONG, STRING, CommandCustomHeader, header_field


@dataclass
class AckMessageRequestHeader(CommandCustomHeader):
    consumer_group: str = header_field("consumerGroup", STRING, not_null=True)
    topic: str = header_field("topic", STRING, not_null=True)
    queue_id: int = header_field("queueId", INTEGER, not_null=True)
    extra_info: str = header_field("extraInfo", STRING, not_null=True)
    offset: int = header_field("offset", LONG, not_null=True)
    broker_name: str | None = header_field("bname", STRING)
