"""ExtraInfoUtil: the POP receipt handle ("extra info") and the offset summaries of a POP answer
(RocketMQ 5 ``remoting/src/main/java/org/apache/rocketmq/remoting/protocol/header/ExtraInfoUtil.java``).

A popped message carries, in its ``POP_CK`` property, the handle needed to acknowledge it or
change its invisible time: eight fields separated by one space (MessageConst.KEY_SEPARATOR)::

    <ckQueueOffset> <popTime> <invisibleTime> <reviveQid> <retry> <brokerName> <queueId> <queueOffset>

``ckQueueOffset`` is the first queue offset the pop read in that queue (the checkpoint's
startOffset), ``retry`` is ``0`` for a normal topic, ``1`` for a v1 pop retry topic
(``%RETRY%group_topic``) and ``2`` for v2, ``reviveQid`` the revive queue holding the checkpoint
(999 for an orderly pop, which has none). The strings here are RocketMQ's, byte for byte.

A POP response summarises what it returned per queue: ``startOffsetInfo`` ("<retry> <queueId>
<startOffset>" joined by ";"), ``msgOffsetInfo`` ("<retry> <queueId> <o1>,<o2>,...") and, for an
orderly pop, ``orderCountInfo`` ("<retry> qo<queueId>%<offset> <count>" per message and
"<retry> <queueId> <minCount>" per queue). The client rebuilds each message's POP_CK from them
(MQClientAPIImpl.processPopResponse).

Errors: Java throws IllegalArgumentException (or its NumberFormatException) for a malformed
handle; here :class:`ExtraInfoError` (a ValueError) carries the same message and the Java class
name, so a processor can answer as RocketMQ's remoting layer does (SYSTEM_ERROR, the exception's
text as remark) without an exception escaping into the server.
"""

from __future__ import annotations

from rmqlab.common.java_compat import java_parse_int
from rmqlab.common.key_builder import (POP_ORDER_REVIVE_QUEUE, RETRY_GROUP_TOPIC_PREFIX, build_pop_retry_topic_v1,
                                       build_pop_retry_topic_v2, is_pop_retry_topic_v2)

KEY_SEPARATOR = " "  # MessageConst.KEY_SEPARATOR
NORMAL_TOPIC = "0"
RETRY_TOPIC = "1"
RETRY_TOPIC_V2 = "2"
QUEUE_OFFSET = "qo"


class ExtraInfoError(ValueError):
    """A malformed extra info (Java: IllegalArgumentException / NumberFormatException)."""

    def __init__(self, message: str, java_class: str = "java.lang.IllegalArgumentException"):
        super().__init__(message)
        self.java_class = java_class

    def java_desc(self) -> str:
        """What ``Throwable.toString()`` prints: ``<class>: <message>``."""
        return f"{self.java_class}: {self}"


def _long(text: str, bits: int = 64) -> int:
    try:
        return java_parse_int(text, bits)
    except ValueError:
        raise ExtraInfoError(f'For input string: "{text}"', "java.lang.NumberFormatException") from None


def split(extra_info: str | None) -> list[str]:
    """``extraInfo.split(" ")``: Java's String.split drops trailing empty strings."""
    if extra_info is None:
        raise ExtraInfoError("split extraInfo is null")
    parts = extra_info.split(KEY_SEPARATOR)
    while parts and parts[-1] == "":
        parts.pop()
    if not parts:  # "".split(" ") is [""] in Java: one empty element
        parts = [""] if extra_info == "" else []
    return parts


def _need(strs: list[str] | None, n: int, what: str) -> list[str]:
    if strs is None or len(strs) < n:
        raise ExtraInfoError(f"{what} fail, extraInfoStrs length {0 if strs is None else len(strs)}")
    return strs


def get_ck_queue_offset(strs: list[str]) -> int:
    return _long(_need(strs, 1, "getCkQueueOffset")[0])


def get_pop_time(strs: list[str]) -> int:
    return _long(_need(strs, 2, "getPopTime")[1])


def get_invisible_time(strs: list[str]) -> int:
    return _long(_need(strs, 3, "getInvisibleTime")[2])


def get_revive_qid(strs: list[str]) -> int:
    return _long(_need(strs, 4, "getReviveQid")[3], 32)


def get_retry(strs: list[str]) -> str:
    return _need(strs, 5, "getRetry")[4]


def get_real_topic(strs: list[str], topic: str, cid: str) -> str:
    """The topic the handle's message is stored in: the pop retry topic for retry "1"/"2"."""
    retry = _need(strs, 5, "getRealTopic")[4]
    if retry == RETRY_TOPIC:
        return build_pop_retry_topic_v1(topic, cid)
    if retry == RETRY_TOPIC_V2:
        return build_pop_retry_topic_v2(topic, cid)
    return topic


def get_real_topic_by_retry(topic: str, cid: str, retry: str) -> str:
    """``getRealTopic(topic, cid, retry)``."""
    if retry == NORMAL_TOPIC:
        return topic
    if retry == RETRY_TOPIC:
        return build_pop_retry_topic_v1(topic, cid)
    if retry == RETRY_TOPIC_V2:
        return build_pop_retry_topic_v2(topic, cid)
    raise ExtraInfoError("getRetry fail, format is wrong")


def get_broker_name(strs: list[str]) -> str:
    return _need(strs, 6, "getBrokerName")[5]


def get_queue_id(strs: list[str]) -> int:
    return _long(_need(strs, 7, "getQueueId")[6], 32)


def get_queue_offset(strs: list[str]) -> int:
    return _long(_need(strs, 8, "getQueueOffset")[7])


def is_order(strs: list[str]) -> bool:
    return get_revive_qid(strs) == POP_ORDER_REVIVE_QUEUE


def _retry_mark(topic: str) -> str:
    """``getRetry(topic)``: 2 for a v2 pop retry topic, 1 for any %RETRY% topic, else 0."""
    if is_pop_retry_topic_v2(topic):
        return RETRY_TOPIC_V2
    if topic.startswith(RETRY_GROUP_TOPIC_PREFIX):
        return RETRY_TOPIC
    return NORMAL_TOPIC


def build_extra_info(ck_queue_offset: int, pop_time: int, invisible_time: int, revive_qid: int, topic: str,
                     broker_name: str, queue_id: int, msg_queue_offset: int | None = None) -> str:
    """``buildExtraInfo``: seven fields, or eight with the message's queue offset."""
    fields = [str(ck_queue_offset), str(pop_time), str(invisible_time), str(revive_qid), _retry_mark(topic),
              broker_name, str(queue_id)]
    if msg_queue_offset is not None:
        fields.append(str(msg_queue_offset))
    return KEY_SEPARATOR.join(fields)


def _append(builder: list[str], entry: str) -> None:
    builder.append(entry)


def build_start_offset_info(builder: list[str], topic: str, queue_id: int, start_offset: int) -> None:
    """Append "<retry> <queueId> <startOffset>"; ``";".join(builder)`` is RocketMQ's string."""
    _append(builder, f"{_retry_mark(topic)} {queue_id} {start_offset}")


def build_queue_id_order_count_info(builder: list[str], topic: str, queue_id: int, order_count: int) -> None:
    _append(builder, f"{_retry_mark(topic)} {queue_id} {order_count}")


def build_queue_offset_order_count_info(builder: list[str], topic: str, queue_id: int, queue_offset: int,
                                        order_count: int) -> None:
    _append(builder, f"{_retry_mark(topic)} {get_queue_offset_key_value_key(queue_id, queue_offset)} {order_count}")


def build_msg_offset_info(builder: list[str], topic: str, queue_id: int, msg_offsets: list[int]) -> None:
    _append(builder, f"{_retry_mark(topic)} {queue_id} " + ",".join(str(o) for o in msg_offsets))


def _entries(info: str, what: str) -> list[list[str]]:
    out = []
    for one in info.split(";"):
        parts = one.split(KEY_SEPARATOR)
        if len(parts) != 3:
            raise ExtraInfoError(f"parse {what} error, {info}")
        out.append(parts)
    return out


def parse_msg_offset_info(msg_offset_info: str | None) -> dict[str, list[int]] | None:
    """``parseMsgOffsetInfo``: "<retry>@<queueId>" -> the queue offsets returned."""
    if not msg_offset_info:
        return None
    result: dict[str, list[int]] = {}
    for retry, qid, offsets in _entries(msg_offset_info, "msgOffsetMap"):
        key = f"{retry}@{qid}"
        if key in result:
            raise ExtraInfoError(f"parse msgOffsetMap error, duplicate, {msg_offset_info}")
        result[key] = [_long(o) for o in offsets.split(",")]
    return result


def parse_start_offset_info(start_offset_info: str | None) -> dict[str, int] | None:
    """``parseStartOffsetInfo``: "<retry>@<queueId>" -> the start offset of the pop in that queue."""
    if not start_offset_info:
        return None
    result: dict[str, int] = {}
    for retry, qid, offset in _entries(start_offset_info, "startOffsetInfo"):
        key = f"{retry}@{qid}"
        if key in result:
            raise ExtraInfoError(f"parse startOffsetInfo error, duplicate, {start_offset_info}")
        result[key] = _long(offset)
    return result


def parse_order_count_info(order_count_info: str | None) -> dict[str, int] | None:
    """``parseOrderCountInfo``: "<retry>@<queueId>" or "<retry>@qo<queueId>%<offset>" -> count."""
    if not order_count_info:
        return None
    result: dict[str, int] = {}
    for retry, key_part, count in _entries(order_count_info, "orderCountInfo"):
        key = f"{retry}@{key_part}"
        if key in result:
            raise ExtraInfoError(f"parse orderCountInfo error, duplicate, {order_count_info}")
        result[key] = _long(count, 32)
    return result


def get_start_offset_info_map_key(topic: str, key: int, pop_ck: str | None = None) -> str:
    """``getStartOffsetInfoMapKey``: "<retry>@<queueId>" (the retry mark from POP_CK when given)."""
    retry = get_retry(split(pop_ck)) if pop_ck is not None else _retry_mark(topic)
    return f"{retry}@{key}"


def get_queue_offset_key_value_key(queue_id: int, queue_offset: int) -> str:
    return f"{QUEUE_OFFSET}{queue_id}%{queue_offset}"


def get_queue_offset_map_key(topic: str, queue_id: int, queue_offset: int) -> str:
    return f"{_retry_mark(topic)}@{get_queue_offset_key_value_key(queue_id, queue_offset)}"
