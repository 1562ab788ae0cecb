"""Headers of SEND_MESSAGE (10), SEND_MESSAGE_V2 (310) and their response.

RocketMQ: ``remoting/.../protocol/header/SendMessageRequestHeader.java``,
``SendMessageRequestHeaderV2.java`` and ``SendMessageResponseHeader.java``. V2 carries the same
fields under one-letter names (``a`` = producerGroup ... ``n`` = brokerName) so fastjson parses it
faster; the broker converts it to V1 (``parseRequestHeader``). The C++ client 0.4.4 sends V1.
"""

from __future__ import annotations

from dataclasses import dataclass

from rmqlab.remoting.protocol.header.command_custom_header import (
    BOOLEAN, INTEGER, LONG, STRING, CommandCustomHeader, header_field)
from rmqlab.remoting.remoting_command import ExtValue, RemotingCommand
from rmqlab.remoting.request_code import RequestCode


# Fast paths for the one header every message carries (both ends of a send). Each gives exactly
# what the generic CommandCustomHeader code gives, for the spellings Java and rmqlab clients
# write (decimal strings, "true"/"false"); anything else takes the generic code, which decides
# or explains.

def _int_text(value: object, max_digits: int) -> bool:
    # CommandCustomHeader.decode's direct case: a short run of ASCII digits (in range by length).
    return type(value) is str and len(value) <= max_digits and value.isdigit() and value.isascii()


def _net(value: ExtValue) -> ExtValue:
    # ext_value_to_string for an int or bool (what the encoder writes); a str, or a value the
    # encoder must refuse, is left for it.
    t = type(value)
    if t is int:
        return str(value)
    if t is bool:
        return "true" if value else "false"
    return value


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
    def parse_request_header(cls, request: RemotingCommand) -> SendMessageRequestHeader:
        """``SendMessageRequestHeader.parseRequestHeader``: V2 for SEND_MESSAGE_V2 and
        SEND_BATCH_MESSAGE, V1 otherwise."""
        if request.code in (RequestCode.SEND_MESSAGE_V2, RequestCode.SEND_BATCH_MESSAGE):
            header = SendMessageRequestHeaderV2.decode_to_v1(request)
            return header if header is not None else SendMessageRequestHeaderV2.decode(request).to_v1()
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

    @staticmethod
    def decode_to_v1(request: RemotingCommand) -> SendMessageRequestHeader | None:
        """``decode(request).to_v1()`` without the V2 object, for a header whose every value is
        in the usual spelling (the strings a Java or rmqlab producer sends); None otherwise (the
        caller then takes the generic decode, which also explains what is wrong)."""
        ext = request.ext_fields
        if ext is None:
            return None
        get = ext.get
        a, b, c, d, e, f, g, h = get("a"), get("b"), get("c"), get("d"), get("e"), get("f"), get("g"), get("h")
        if not (type(a) is str and type(b) is str and type(c) is str and type(d) is str and type(e) is str
                and type(f) is str and type(g) is str and type(h) is str):
            return None
        # _int_text of each, at once: every one non-empty and short enough, all of them digits.
        digits = d + e + f + g + h
        if not (0 < len(d) <= 9 and 0 < len(e) <= 9 and 0 < len(f) <= 9 and 0 < len(g) <= 18 and 0 < len(h) <= 9
                and digits.isdigit() and digits.isascii()):
            return None
        i, j, k, l, m, n = get("i"), get("j"), get("k"), get("l"), get("m"), get("n")  # noqa: E741
        if not ((i is None or type(i) is str) and (n is None or type(n) is str)
                and (j is None or _int_text(j, 9)) and (l is None or _int_text(l, 9))
                and (k is None or k == "true" or k == "false") and (m is None or m == "true" or m == "false")):
            return None
        # The optional fields absent stay at their default, None, as in the generic decode.
        return SendMessageRequestHeader(
            producer_group=a, topic=b, default_topic=c, default_topic_queue_nums=int(d), queue_id=int(e),
            sys_flag=int(f), born_timestamp=int(g), flag=int(h), properties=i,
            reconsume_times=None if j is None else int(j), unit_mode=None if k is None else k == "true",
            max_reconsume_times=None if l is None else int(l), batch=None if m is None else m == "true",
            broker_name=n)

    @staticmethod
    def ext_fields_of(producer_group: str, topic: str, default_topic: str, default_topic_queue_nums: int,
                      queue_id: int, sys_flag: int, born_timestamp: int, flag: int, properties: str | None,
                      reconsume_times: int | None, unit_mode: bool | None, max_reconsume_times: int | None,
                      batch: bool | None, broker_name: str | None) -> dict[str, ExtValue]:
        """``from_v1(SendMessageRequestHeader(...)).to_ext_fields()`` in one step, for the
        producer's hot path: the same fields (None left out), ints and bools already spelled as
        the encoder spells them, so the frame and its trace are the same."""
        # str(int) inline for the usual ints (_net's first case), _net for anything else.
        ext: dict[str, ExtValue] = {
            "a": producer_group, "b": topic, "c": default_topic,
            "d": str(default_topic_queue_nums) if type(default_topic_queue_nums) is int else _net(
                default_topic_queue_nums),
            "e": str(queue_id) if type(queue_id) is int else _net(queue_id),
            "f": str(sys_flag) if type(sys_flag) is int else _net(sys_flag),
            "g": str(born_timestamp) if type(born_timestamp) is int else _net(born_timestamp),
            "h": str(flag) if type(flag) is int else _net(flag)}
        if properties is not None:
            ext["i"] = properties
        if reconsume_times is not None:
            ext["j"] = _net(reconsume_times)
        if unit_mode is not None:
            ext["k"] = _net(unit_mode)
        if max_reconsume_times is not None:
            ext["l"] = _net(max_reconsume_times)
        if batch is not None:
            ext["m"] = _net(batch)
        if broker_name is not None:
            ext["n"] = broker_name
        return ext

    @classmethod
    def from_v1(cls, v1: SendMessageRequestHeader) -> SendMessageRequestHeaderV2:
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

    @classmethod
    def decode(cls, command: RemotingCommand) -> SendMessageResponseHeader:
        """The generic decode, with a direct path for the usual spelling (every message's answer)."""
        ext = command.ext_fields
        if ext is not None:
            get = ext.get
            msg_id, queue_id, queue_offset = get("msgId"), get("queueId"), get("queueOffset")
            if type(msg_id) is str and _int_text(queue_id, 9) and _int_text(queue_offset, 18):
                transaction_id, batch_uniq_id, recall_handle = get("transactionId"), get("batchUniqId"), \
                    get("recallHandle")
                if ((transaction_id is None or type(transaction_id) is str)
                        and (batch_uniq_id is None or type(batch_uniq_id) is str)
                        and (recall_handle is None or type(recall_handle) is str)):
                    return cls(msg_id, int(queue_id), int(queue_offset), transaction_id, batch_uniq_id,
                               recall_handle)
        return super().decode(command)
