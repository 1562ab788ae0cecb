"""Header of CONSUMER_SEND_MSG_BACK (36): a push consumer hands a message it failed to consume back
to the broker, which re-delivers it through ``%RETRY%<group>`` (or parks it in ``%DLQ%<group>``).

RocketMQ: ``remoting/.../protocol/header/ConsumerSendMsgBackRequestHeader.java`` (with the
``brokerName`` of its base ``RpcRequestHeader``, which the Java client 5.x sets). The answer has no
header: SUCCESS, or an error code with a remark.

What real clients send: the Java client every field (``unitMode`` "false"); the C++ client 0.4.4
``group``, ``offset`` (a string) and ``delayLevel`` (a JSON number) only, newer C++ clients also
``originMsgId``, ``originTopic``, ``unitMode`` and ``maxReconsumeTimes``.
"""

from __future__ import annotations

from dataclasses import dataclass

from rmqlab.remoting.protocol.header.command_custom_header import (
    BOOLEAN, INTEGER, LONG, STRING, CommandCustomHeader, header_field)


@dataclass
class ConsumerSendMsgBackRequestHeader(CommandCustomHeader):
    # The commit-log offset of the message to send back (the broker reads it from its store).
    offset: int = header_field("offset", LONG, not_null=True)
    group: str = header_field("group", STRING, not_null=True)
    # 0: the broker picks 3 + reconsumeTimes; < 0: straight to the dead-letter queue.
    delay_level: int = header_field("delayLevel", INTEGER, not_null=True)
    origin_msg_id: str | None = header_field("originMsgId", STRING)
    origin_topic: str | None = header_field("originTopic", STRING)
    unit_mode: bool = header_field("unitMode", BOOLEAN, default=False)
    # Counts only from client version V3_4_9 on; else the group's retryMaxTimes.
    max_reconsume_times: int | None = header_field("maxReconsumeTimes", INTEGER)
    broker_name: str | None = header_field("brokerName", STRING)

    def is_unit_mode(self) -> bool:
        return bool(self.unit_mode)
