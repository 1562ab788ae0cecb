"""Checking one CommitLog entry and describing it for dispatch.

Mirrors RocketMQ's ``DispatchRequest`` and ``CommitLog.checkMessageAndReturnSize``, which
recovery and the reput service use to walk the commitlog: a valid message yields success and
its size, a BLANK filler yields success and size 0 (end of file), anything else yields failure -
recovery truncates the commitlog there. Like Java (which catches every exception), the check
never raises on the buffer's contents; unlike Java it never relies on an exception to stop at
the buffer's end, every read is bounds-checked first.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from rmqlab.common.delay_level import DEFAULT_MESSAGE_DELAY_LEVEL, compute_deliver_timestamp, parse_delay_level
from rmqlab.common.java_compat import crc32, java_parse_int, java_string_hash_code, java_utf8_decode, to_int32
from rmqlab.common.message.message_const import MessageConst
from rmqlab.common.message.message_decoder import (CRC32_RESERVED_LEN, parse_crc32_property,
                                                   string_to_message_properties)
from rmqlab.common.message.message_sys_flag import MessageSysFlag
from rmqlab.common.message.message_version import BLANK_MAGIC_CODE, MessageVersion
from rmqlab.store.message_ext_encoder import calc_msg_length

__all__ = [
    "DispatchRequest", "check_message_and_return_size", "DEFAULT_MESSAGE_DELAY_LEVEL",
    "RMQ_SYS_SCHEDULE_TOPIC", "parse_delay_level", "compute_deliver_timestamp",
]

# TopicValidator.RMQ_SYS_SCHEDULE_TOPIC: where delayed messages wait for their level's delay.
RMQ_SYS_SCHEDULE_TOPIC = "SCHEDULE_TOPIC_XXXX"

_INT = struct.Struct(">i")
_SHORT = struct.Struct(">h")
_LONG = struct.Struct(">q")
_AFTER_MAGIC = struct.Struct(">iiiqqiq")  # BODYCRC .. BORNTIMESTAMP (40 bytes)
_INT_LONG = struct.Struct(">iq")


_DEFAULT_DELAY_LEVEL_TABLE = parse_delay_level(DEFAULT_MESSAGE_DELAY_LEVEL)


@dataclass
class DispatchRequest:
    """``DispatchRequest``: what the reput service needs to build ConsumeQueue/index entries.

    ``msg_size`` is the stored size of a good message, 0 for a BLANK filler (end of file) and
    -1 (or the declared TOTALSIZE, when only the length check failed) for a failure.
    ``keys`` is "" when the message has no properties and None when it has properties without
    KEYS, as in Java. ``msg_base_offset``/``batch_size`` describe inner-batch messages."""

    topic: str = ""
    queue_id: int = 0
    commit_log_offset: int = 0
    msg_size: int = 0
    tags_code: int = 0
    store_timestamp: int = 0
    consume_queue_offset: int = 0
    keys: str | None = ""
    uniq_key: str | None = None
    sys_flag: int = 0
    prepared_transaction_offset: int = 0
    properties: dict[str, str] | None = None
    success: bool = True
    msg_base_offset: int = -1
    batch_size: int = 1
    # DispatchRequest.bufferSize: how far the dispatcher moves past this record, when it is not the
    # message's size (-1): in DLedger CommitLog mode the DLedger entry's, message + 48-byte header.
    buffer_size: int = -1

    @classmethod
    def of_size(cls, msg_size: int, success: bool) -> DispatchRequest:
        """``new DispatchRequest(size, success)``: a result carrying only a size and outcome."""
        return cls(msg_size=msg_size, success=success)


def _fail() -> DispatchRequest:
    return DispatchRequest.of_size(-1, False)


def _dup_info_ok(dup_info: str | None) -> bool:
    # Java: dupInfo.split("_").length == 2; String.split drops trailing empty strings.
    if dup_info is None:
        return False
    parts = dup_info.split("_")
    while parts and parts[-1] == "":
        parts.pop()
    return len(parts) == 2


def check_message_and_return_size(buf, pos: int = 0, *, check_crc: bool = True, read_body: bool = True,
                                  check_dup_info: bool = False, force_verify_prop_crc: bool = False,
                                  delay_level_table: dict[int, int] | None = None) -> DispatchRequest:
    """``CommitLog.checkMessageAndReturnSize`` on the entry at ``buf[pos:]`` (the buffer's end
    plays the role of the mapped file's limit).

    * valid message: success, ``msg_size`` = TOTALSIZE, ``tags_code`` = Java hashCode of TAGS
      (0 without tags). For a message in SCHEDULE_TOPIC_XXXX with a DELAY property the tags code
      is its deliver timestamp (store timestamp + the level's delay from ``delay_level_table``,
      default the default messageDelayLevel; levels above the maximum are clamped).
    * BLANK filler: success, ``msg_size`` 0 - whatever its TOTALSIZE says, as in Java. Its
      TOTALSIZE (the space left in the file) is still checked against the bytes left first, so
      pass a buffer that reaches the end of the file, as Java's mapped-file slice does.
    * illegal magic, body CRC mismatch (when ``check_crc`` and ``read_body``), a buffer too
      short for the declared size or for any field (torn tail), negative or oversized lengths,
      an unparsable DELAY/INNER_* property, or (with ``check_dup_info``) a missing DUP_INFO:
      failure, ``msg_size`` -1.
    * TOTALSIZE different from the size the fields add up to: failure, ``msg_size`` = TOTALSIZE.

    ``force_verify_prop_crc`` (MessageStoreConfig.forceVerifyPropCRC, default false) replaces
    the body CRC check by the whole-message CRC of the ``__CRC32#`` property (written with
    enabledAppendPropCRC); a message without that property then fails. Only this catches damage
    outside the body. With ``check_crc`` rmqlab also rejects a message whose last byte is 0: that is
    how a torn tail that lost just the end of the topic or PROPERTIES looks in a zero-filled file
    (RocketMQ would accept it).

    Java quirks kept: the CRC is checked only for non-empty bodies; a negative BODY or
    PROPERTIES length counts as 0 in the length check (``Math.max``); lengths are bounded by
    TOTALSIZE (Java reads them into a TOTALSIZE-byte array), not by where the message ends."""
    if not isinstance(pos, int) or pos < 0:
        raise ValueError(f"pos must be a non-negative int, not {pos!r}")
    limit = len(buf)
    remaining = limit - pos
    if remaining <= 4:
        return _fail()
    total_size = _INT.unpack_from(buf, pos)[0]
    # Java: remaining() < totalSize - 4, in int arithmetic (wraps for Integer.MIN_VALUE).
    if remaining - 4 < to_int32(total_size - 4):
        return _fail()
    if remaining < 8:
        return _fail()
    magic = _INT.unpack_from(buf, pos + 4)[0]
    if magic == BLANK_MAGIC_CODE:
        return DispatchRequest.of_size(0, True)
    try:
        version = MessageVersion.value_of_magic_code(magic)
    except ValueError:
        return _fail()
    if total_size < 0:
        return _fail()  # Java: new byte[totalSize] throws

    cursor = pos + 8

    def take(n: int, into_content: bool) -> int | None:
        """Start of the next ``n`` bytes, or None when Java's read would throw: past the limit,
        or (for reads into the TOTALSIZE-byte scratch array) longer than TOTALSIZE."""
        nonlocal cursor
        if n < 0 or cursor + n > limit or (into_content and n > total_size):
            return None
        at = cursor
        cursor += n
        return at

    at = take(_AFTER_MAGIC.size, False)
    if at is None:
        return _fail()
    (body_crc, queue_id, _flag, queue_offset, physic_offset, sys_flag,
     _born_timestamp) = _AFTER_MAGIC.unpack_from(buf, at)
    if take(MessageSysFlag.born_host_length(sys_flag), True) is None:
        return _fail()
    at = take(8, False)
    if at is None:
        return _fail()
    store_timestamp = _LONG.unpack_from(buf, at)[0]
    if take(MessageSysFlag.store_host_length(sys_flag), True) is None:
        return _fail()
    at = take(_INT_LONG.size + 4, False)
    if at is None:
        return _fail()
    _reconsume_times, prepared_transaction_offset = _INT_LONG.unpack_from(buf, at)
    body_len = _INT.unpack_from(buf, at + _INT_LONG.size)[0]

    if body_len > 0:
        if read_body:
            at = take(body_len, True)
            if at is None:
                return _fail()
            if check_crc and not force_verify_prop_crc and crc32(buf, at, body_len) != body_crc:
                return _fail()
        elif take(body_len, False) is None:
            return _fail()

    at = take(version.topic_length_size, False)
    if at is None:
        return _fail()
    topic_len = version.get_topic_length(buf, at)
    at = take(topic_len, True)
    if at is None:
        return _fail()
    topic = java_utf8_decode(buf[at:at + topic_len])
    topic_last_byte = buf[at + topic_len - 1] if topic_len > 0 else 0

    tags_code = 0
    keys: str | None = ""
    uniq_key = None
    properties = None

    # Torn-tail note — an rmqlab addition, RocketMQ has no such check: the topic's last byte and
    # the properties' last byte ("\x02") are never 0 in a real message, but a torn write into a
    # zero-filled file that lost only the end of the topic or of the properties leaves 0 there,
    # and the body CRC cannot see it. RocketMQ's own remedy is the whole-message property CRC
    # (enabledAppendPropCRC / forceVerifyPropCRC). Checked when ``check_crc`` is (recovery).
    if check_crc and topic_last_byte == 0:
        return _fail()
    at = take(2, False)
    if at is None:
        return _fail()
    properties_length = _SHORT.unpack_from(buf, at)[0]
    if properties_length > 0:
        at = take(properties_length, True)
        if at is None:
            return _fail()
        if check_crc and buf[at + properties_length - 1] == 0:
            return _fail()  # see the torn-tail note below
        properties = string_to_message_properties(java_utf8_decode(buf[at:at + properties_length]))
        keys = properties.get(MessageConst.PROPERTY_KEYS)
        uniq_key = properties.get(MessageConst.PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX)
        if check_dup_info and not _dup_info_ok(properties.get(MessageConst.DUP_INFO)):
            return _fail()
        tags = properties.get(MessageConst.PROPERTY_TAGS)
        if tags:
            tags_code = java_string_hash_code(tags)
        # Delayed messages: the ConsumeQueue of SCHEDULE_TOPIC_XXXX stores the deliver time in
        # the tags code slot, so the schedule service can tell when each message is due.
        level_text = properties.get(MessageConst.PROPERTY_DELAY_TIME_LEVEL)
        if topic == RMQ_SYS_SCHEDULE_TOPIC and level_text is not None:
            try:
                delay_level = java_parse_int(level_text)
            except ValueError:
                return _fail()
            table = _DEFAULT_DELAY_LEVEL_TABLE if delay_level_table is None else delay_level_table
            # maxDelayLevel is the number of configured levels.
            max_delay_level = max(table, default=0)
            if delay_level > max_delay_level:
                delay_level = max_delay_level
            if delay_level > 0:
                tags_code = compute_deliver_timestamp(table, delay_level, store_timestamp)

    if check_crc and force_verify_prop_crc:
        crc_text = None if properties is None else properties.get(MessageConst.PROPERTY_CRC32)
        expected = -1 if crc_text is None else parse_crc32_property(crc_text)
        if expected < 0:
            return _fail()
        # Java rewinds TOTALSIZE bytes from where PROPERTIES ended, which is the message start
        # unless the lengths disagree with TOTALSIZE.
        start = cursor - total_size
        end = start + total_size - CRC32_RESERVED_LEN
        if start < 0 or end < start or crc32(buf, start, end - start) != expected:
            return _fail()

    read_length = calc_msg_length(sys_flag, body_len, topic_len, properties_length, version)
    if total_size != read_length:
        return DispatchRequest.of_size(total_size, False)

    request = DispatchRequest(
        topic=topic, queue_id=queue_id, commit_log_offset=physic_offset, msg_size=total_size,
        tags_code=tags_code, store_timestamp=store_timestamp, consume_queue_offset=queue_offset,
        keys=keys, uniq_key=uniq_key, sys_flag=sys_flag,
        prepared_transaction_offset=prepared_transaction_offset, properties=properties,
        success=True, msg_base_offset=queue_offset)

    # CommitLog.setBatchSizeIfNeeded: inner-batch messages carry their base offset and count.
    if (properties is not None and MessageConst.PROPERTY_INNER_NUM in properties
            and MessageConst.PROPERTY_INNER_BASE in properties):
        try:
            request.msg_base_offset = java_parse_int(properties[MessageConst.PROPERTY_INNER_BASE], 64)
            request.batch_size = java_parse_int(properties[MessageConst.PROPERTY_INNER_NUM], 16)
        except ValueError:
            return _fail()
    return request
