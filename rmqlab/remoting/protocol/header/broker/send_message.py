"""Headers of SEND_MESSAGE (10), SEND_MESSAGE_V2 (310) and their response (real-clients §3.2).

RocketMQ: ``remoting/.../protocol/header/SendMessageRequestHeader.java``,
``SendMessageRequestHeaderV2.java`` and ``SendMessageResponseHeader.java``. V2 carries the same
fields under one-letter names (``a`` = producerGroup ... ``n`` = brokerName) so fastjson parses it
faster; the broker converts it to V1 (``parseRequestHeader``). The C++ client 0.4.4 sends V1.
"""

from __future__ import annotations

from dataclasses import dataclass

from rmqlab.remoting.protocol.header.command_custom_header import (
    BOOLEAN, INTEGER, LONG, STRING, CommandCustomHeader, header_field)
from rmqlab.remoting.remoting_command import RemotingCommand
from rmqlab.remoting.request_code import RequestCode


@dataclass
class SendMessageRequestHeader(CommandCustomHeader):
    producer_group: str = header_field("producerGroup", STRING, not_null=True)
    topic: str = header_field("topic", STRING, not_null=True)
    default_topic: str = header_field("defaultTopic", STRING, not_null=True)
    default_topic_queue_nums: int = header_field("defaultTopicQueueNums", INTEGER, not_null=True)
    queue_id: int = header_field("queueId", INTEGER, not_null=True)
    sys_flag: int = header_field("sysFlag", INTEGER, not_null=True)
    born_timestamp: int = header_field("bornTimestamp", LONG, not_null=True)
    flag: int = header_field("flag", INTEGER, not_null=True)
    properties: str | None = header_field("properties", STRING)
    reconsume_times: int | None = header_field("reconsumeTimes", INTEGER)
    unit_mode: bool | None = header_field("unitMode", BOOLEAN)
    batch: bool | None = header_field("batch", BOOLEAN)
    max_reconsume_times: int | None = header_field("maxReconsumeTimes", INTEGER)
    # TopicRequestHeader / RpcRequestHeader: the target broker name of a forwarded request.
    broker_name: str | None = header_field("brokerName", STRING)

    def is_unit_mode(self) -> bool:
        return bool(self.unit_mode)

    def is_batch(self) -> bool:
        return bool(self.batch)

    @classmethod
    def parse_request_header(cls, request: RemotingCommand) -> "SendMessageRequestHeader":
        """``SendMessageRequestHeader.parseRequestHeader``: V2 for SEND_MESSAGE_V2 and
        SEND_BATCH_MESSAGE, V1 otherwise."""
        if request.code in (RequestCode.SEND_MESSAGE_V2, RequestCode.SEND_BATCH_MESSAGE):
            return SendMessageRequestHeaderV2.decode(request).to_v1()
        return cls.decode(request)


@dataclass
class SendMessageRequestHeaderV2(CommandCustomHeader):
    a: str = header_field("a", STRING, not_null=True)       # producerGroup
    b: str = header_field("b", STRING, not_null=True)       # topic
    c: str = header_field("c", STRING, not_null=True)       # defaultTopic
    d: int = header_field("d", INTEGER, not_null=True)      # defaultTopicQueueNums
    e: int = header_field("e", INTEGER, not_null=True)      # queueId
    f: int = header_field("f", INTEGER, not_null=True)      # sysFlag
    g: int = header_field("g", LONG, not_null=True)         # bornTimestamp
    h: int = header_field("h", INTEGER, not_null=True)      # flag
    i: str | None = header_field("i", STRING)               # properties
    j: int | None = header_field("j", INTEGER)              # reconsumeTimes
    k: bool | None = header_field("k", BOOLEAN)             # unitMode
    l: int | None = header_field("l", INTEGER)              # maxReconsumeTimes (consumeRetryTimes)  # noqa: E741
    m: bool | None = header_field("m", BOOLEAN)             # batch
    n: str | None = header_field("n", STRING)               # brokerName

    def to_v1(self) -> SendMessageRequestHeader:
        """``createSendMessageRequestHeaderV1``."""
        return SendMessageRequestHeader(
            producer_group=self.a, topic=self.b, default_topic=self.c, default_topic_queue_nums=self.d,
            queue_id=self.e, sys_flag=self.f, born_timestamp=self.g, flag=self.h, properties=self.i,
            reconsume_times=self.j, unit_mode=self.k, max_reconsume_times=self.l, batch=self.m, broker_name=self.n)

    @classmethod
    def from_v1(cls, v1: SendMessageRequestHeader) -> "SendMessageRequestHeaderV2":
        """``createSendMessageRequestHeaderV2``."""
        return cls(a=v1.producer_group, b=v1.topic, c=v1.default_topic, d=v1.default_topic_queue_nums, e=v1.queue_id,
                   f=v1.sys_flag, g=v1.born_timestamp, h=v1.flag, i=v1.properties, j=v1.reconsume_times,
                   k=v1.unit_mode, l=v1.max_reconsume_times, m=v1.batch, n=v1.broker_name)


@dataclass
class SendMessageResponseHeader(CommandCustomHeader):
    msg_id: str | None = header_field("msgId", STRING, not_null=True)
    queue_id: int | None = header_field("queueId", INTEGER, not_null=True)
    queue_offset: int | None = header_field("queueOffset", LONG, not_null=True)
    transaction_id: str | None = header_field("transactionId", STRING)
    batch_uniq_id: str | None = header_field("batchUniqId", STRING)
    recall_handle: str | None = header_field("recallHandle", STRING)
