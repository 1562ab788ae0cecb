"""CHANGE_MESSAGE_INVISIBLETIME (200053) headers (RocketMQ 5
``remoting/.../protocol/header/ChangeInvisibleTimeRequestHeader.java``, ``ChangeInvisibleTimeResponseHeader.java``).

The request names a popped message as an ack does (handle, topic, queueId, offset) plus the new
``invisibleTime``, counted from now. The response carries the new ``popTime`` (now, broker clock),
``invisibleTime`` and ``reviveQid``, from which the client builds the message's new handle.
"""

from __future__ import annotations

from dataclasses import dataclass

from rmqlab.remoting.protocol.header.command_custom_header import INTEGER, LONG, STRING, CommandCustomHeader, header_field


@dataclass
class ChangeInvisibleTimeRequestHeader(CommandCustomHeader):
    consumer_group: str = header_field("consumerGroup", STRING, not_null=True)
    topic: str = header_field("topic", STRING, not_null=True)
    queue_id: int = header_field("queueId", INTEGER, not_null=True)
    extra_info: str = header_field("extraInfo", STRING, not_null=True)
    offset: int = header_field("offset", LONG, not_null=True)
    invisible_time: int = header_field("invisibleTime", LONG, not_null=True)
    broker_name: str | None = header_field("bname", STRING)


@dataclass
class ChangeInvisibleTimeResponseHeader(CommandCustomHeader):
    pop_time: int | None = header_field("popTime", LONG, not_null=True)
    invisible_time: int | None = header_field("invisibleTime", LONG, not_null=True)
    revive_qid: int | None = header_field("reviveQid", INTEGER, not_null=True)
