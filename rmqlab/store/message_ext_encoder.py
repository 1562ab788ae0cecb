"""Encoding a message into its CommitLog bytes (RocketMQ ``MessageExtEncoder``).

Java encodes in two steps: ``MessageExtEncoder.encode`` fills a buffer with QUEUEOFFSET and
PHYSICALOFFSET still zero, then ``CommitLog.DefaultAppendMessageCallback.doAppend`` patches
PHYSICALOFFSET and STORETIMESTAMP under the put lock. rmqlab takes both offsets as arguments and
produces the final bytes in one step; the caller (the CommitLog) supplies them under its lock.
"""

from __future__ import annotations

import struct
import zlib

from rmqlab.common.java_compat import (INT32_MAX, INT32_MIN, INT64_MAX, INT64_MIN, crc32)
from rmqlab.common.message.message import (MessageExtBrokerInner, MessageFormatError,
                                           socket_address_to_bytes)
from rmqlab.common.message.message_const import MessageConst
from rmqlab.common.message.message_decoder import (CRC32_RESERVED_LEN, create_crc32,
                                                   message_properties_to_string)
from rmqlab.common.message.message_sys_flag import MessageSysFlag
from rmqlab.common.message.message_version import (BLANK_MAGIC_CODE, MESSAGE_MAGIC_CODE,
                                                   MESSAGE_MAGIC_CODE_V2, MessageVersion)

__all__ = [
    "MESSAGE_MAGIC_CODE", "MESSAGE_MAGIC_CODE_V2", "BLANK_MAGIC_CODE", "END_FILE_MIN_BLANK_LENGTH",
    "DEFAULT_MAX_MESSAGE_SIZE", "MessageEncodeError", "MessageExtEncoder", "calc_msg_length",
    "encode_blank",
]

# CommitLog.DefaultAppendMessageCallback: a file must keep room for TOTALSIZE + MAGICCODE of a
# BLANK filler after the last message.
END_FILE_MIN_BLANK_LENGTH = 4 + 4

# MessageStoreConfig.maxMessageSize default (4 MiB). In Java it bounds the BODY; the whole
# encoded message may be 64 KiB larger (MessageExtEncoder reserves that for the other fields).
DEFAULT_MAX_MESSAGE_SIZE = 1024 * 1024 * 4
_NON_BODY_RESERVE = 64 * 1024

_PROPERTIES_MAX = 32767  # Short.MAX_VALUE: the PROPERTIES length field is a signed short

_HEAD = struct.Struct(">iiiiiqqiq")
_HEAD_V4 = struct.Struct(">iiiiiqqiq8sq8siqi")  # TOTALSIZE .. BODY length with two IPv4 hosts (88 bytes)
_BYTE = struct.Struct(">b")
_HOST_V6_FLAGS = MessageSysFlag.BORNHOST_V6_FLAG | MessageSysFlag.STOREHOSTADDRESS_V6_FLAG
_TAIL = struct.Struct(">iq")
_INT = struct.Struct(">i")
_SHORT = struct.Struct(">h")
_LONG = struct.Struct(">q")
_BLANK = struct.Struct(">ii")


class MessageEncodeError(MessageFormatError):
    """A message the store refuses to append. ``put_status`` names the PutMessageStatus RocketMQ
    returns for it: ``"MESSAGE_ILLEGAL"`` or ``"PROPERTIES_SIZE_EXCEEDED"``."""

    def __init__(self, message: str, put_status: str = "MESSAGE_ILLEGAL") -> None:
        super().__init__(message)
        self.put_status = put_status


def calc_msg_length(sys_flag: int, body_length: int, topic_length: int, properties_length: int,
                    version: MessageVersion = MessageVersion.MESSAGE_VERSION_V1) -> int:
    """``MessageExtEncoder.calMsgLength``: the stored size of a message.

    91 + body + topic + properties for IPv4 hosts and V1; each IPv6 host adds 12, V2 adds 1.
    Negative body/properties lengths count as 0, as Java's ``Math.max(len, 0)`` does (which is
    what CommitLog.checkMessageAndReturnSize compares TOTALSIZE against)."""
    return (4                                   # TOTALSIZE
            + 4                                 # MAGICCODE
            + 4                                 # BODYCRC
            + 4                                 # QUEUEID
            + 4                                 # FLAG
            + 8                                 # QUEUEOFFSET
            + 8                                 # PHYSICALOFFSET
            + 4                                 # SYSFLAG
            + 8                                 # BORNTIMESTAMP
            + MessageSysFlag.born_host_length(sys_flag)    # BORNHOST
            + 8                                 # STORETIMESTAMP
            + MessageSysFlag.store_host_length(sys_flag)   # STOREHOSTADDRESS
            + 4                                 # RECONSUMETIMES
            + 8                                 # PREPARED TRANSACTION OFFSET
            + 4 + max(body_length, 0)           # BODY
            + version.topic_length_size + topic_length      # TOPIC
            + 2 + max(properties_length, 0))    # PROPERTIES


def encode_blank(length: int) -> bytes:
    """The end-of-file filler: TOTALSIZE = ``length`` (the space left in the file) and
    BLANK_MAGIC_CODE. Only these 8 bytes are written; the rest of the file counts as used."""
    if not END_FILE_MIN_BLANK_LENGTH <= length <= INT32_MAX:
        raise ValueError(f"blank length {length} is outside {END_FILE_MIN_BLANK_LENGTH}..{INT32_MAX}")
    return _BLANK.pack(length, BLANK_MAGIC_CODE)


def _check_range(name: str, value: int, low: int, high: int, java_type: str) -> None:
    if not isinstance(value, int) or isinstance(value, bool):
        raise MessageEncodeError(f"{name} must be an int, not {type(value).__name__}")
    if not low <= value <= high:
        raise MessageEncodeError(f"{name} {value} is out of Java {java_type} range")


def _utf8(text: str, what: str) -> bytes:
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError as e:
        # Java would write '?' for a lone surrogate; refusing keeps stored text faithful.
        raise MessageEncodeError(f"{what} is not valid Unicode text: {e.reason} at index {e.start}") from None


class MessageExtEncoder:
    """``MessageExtEncoder``: builds the bytes of one stored message.

    ``max_message_size`` is MessageStoreConfig.maxMessageSize: the largest BODY accepted; the
    whole message may exceed it by up to 64 KiB, as in Java.

    ``enabled_append_prop_crc`` is MessageStoreConfig.enabledAppendPropCRC (default false): the
    PROPERTIES then end with a ``__CRC32#`` property holding the CRC of every byte before it,
    so damage outside the body (which BODYCRC does not cover) can be detected
    (dispatch_request.check_message_and_return_size with ``force_verify_prop_crc``)."""

    def __init__(self, max_message_size: int = DEFAULT_MAX_MESSAGE_SIZE, *,
                 enabled_append_prop_crc: bool = False) -> None:
        if not 0 < max_message_size <= INT32_MAX:
            raise ValueError(f"max_message_size {max_message_size} is outside 1..{INT32_MAX}")
        self.enabled_append_prop_crc = enabled_append_prop_crc
        self.crc32_reserved_length = CRC32_RESERVED_LEN if enabled_append_prop_crc else 0
        self.max_message_body_size = max_message_size
        self.max_message_size = (max_message_size + _NON_BODY_RESERVE
                                 if INT32_MAX - max_message_size >= _NON_BODY_RESERVE else INT32_MAX)

    def encode(self, msg: MessageExtBrokerInner, *, queue_offset: int, physical_offset: int) -> bytes:
        """The stored bytes of ``msg`` at ``physical_offset`` with ``queue_offset``, fields in
        the order ``MessageExtEncoder`` writes them, big-endian.

        As CommitLog.asyncPutMessage does before encoding: BODYCRC is ``crc32(body)`` (``msg.
        body_crc`` is not consulted), the version follows the topic length, and SYSFLAG gets
        the IPv6 host bits when a host is IPv6. The caller passes queue_offset 0 for prepared
        and rollback transaction messages, as doAppend does.

        With ``enabled_append_prop_crc`` a stale ``__CRC32#`` property is dropped and the
        message ends with a fresh one (CRC32_RESERVED_LEN more bytes of PROPERTIES).

        Raises MessageEncodeError with ``put_status`` PROPERTIES_SIZE_EXCEEDED (properties over
        32767 bytes, the reserved CRC property included) or MESSAGE_ILLEGAL (body over
        max_message_size, message over max_message_size + 64 KiB, or a field Java could not
        represent)."""
        if not isinstance(msg, MessageExtBrokerInner):
            raise TypeError(f"encode needs a MessageExtBrokerInner, not {type(msg).__name__}")

        try:
            if self.enabled_append_prop_crc and MessageConst.PROPERTY_CRC32 in msg.properties:
                # asyncPutMessage deletes a stale __CRC32# before the store appends its own.
                properties_string = message_properties_to_string(
                    {k: v for k, v in msg.properties.items() if k != MessageConst.PROPERTY_CRC32})
            else:
                properties_string = msg.properties_string  # as given by the broker (see the class)
        except MessageFormatError as e:
            raise MessageEncodeError(str(e)) from None
        properties_data = _utf8(properties_string, "properties")
        # Java appends a \x02 first when the string does not end with one; ours always does.
        properties_length = len(properties_data) + self.crc32_reserved_length
        if properties_length > _PROPERTIES_MAX:
            raise MessageEncodeError(
                f"properties are {properties_length} bytes; max {_PROPERTIES_MAX}",
                "PROPERTIES_SIZE_EXCEEDED")

        topic_data = _utf8(msg.topic, "topic")
        topic_length = len(topic_data)
        if topic_length <= 127:  # V1 (MessageVersion.for_topic_length), the usual case
            magic_code, topic_length_field = MESSAGE_MAGIC_CODE, _BYTE.pack(topic_length)
        else:
            version = MessageVersion.for_topic_length(topic_length)
            if topic_length > version.max_topic_length:
                # Java casts the length to short and writes a corrupt message; refuse instead.
                raise MessageEncodeError(f"topic is {topic_length} bytes; max {version.max_topic_length}")
            magic_code, topic_length_field = version.magic_code, version.pack_topic_length(topic_length)

        body = msg.body if msg.body is not None else b""
        body_length = len(body)

        sys_flag = msg.sys_flag
        if not isinstance(sys_flag, int) or isinstance(sys_flag, bool):
            raise MessageEncodeError(f"sys_flag must be an int, not {type(sys_flag).__name__}")
        born_host = self._host_bytes(msg.born_host, "born_host")
        store_host = self._host_bytes(msg.store_host, "store_host")
        both_ipv4 = len(born_host) == 8 and len(store_host) == 8
        if not both_ipv4 or sys_flag & _HOST_V6_FLAGS:
            sys_flag = self._host_flag(sys_flag, len(born_host), msg.born_host, "born_host",
                                       MessageSysFlag.BORNHOST_V6_FLAG)
            sys_flag = self._host_flag(sys_flag, len(store_host), msg.store_host, "store_host",
                                       MessageSysFlag.STOREHOSTADDRESS_V6_FLAG)

        # calc_msg_length, with the field sizes already known (74 = the fixed-size fields).
        msg_len = (74 + len(born_host) + len(store_host) + body_length + len(topic_length_field)
                   + topic_length + properties_length)
        if body_length > self.max_message_body_size:
            raise MessageEncodeError(
                f"body is {body_length} bytes; max {self.max_message_body_size} (maxMessageSize)")
        if msg_len > self.max_message_size:
            raise MessageEncodeError(
                f"message is {msg_len} bytes; max {self.max_message_size} (maxMessageSize + 64 KiB)")

        try:
            body_crc = zlib.crc32(body) & 0x7FFFFFFF  # UtilAll.crc32 (java_compat.crc32), inlined
            if both_ipv4:
                # Fields 1 to 15's length in one precompiled pack.
                head = _HEAD_V4.pack(msg_len, magic_code, body_crc, msg.queue_id, msg.flag,
                                     queue_offset, physical_offset, sys_flag, msg.born_timestamp, born_host,
                                     msg.store_timestamp, store_host, msg.reconsume_times,
                                     msg.prepared_transaction_offset, body_length)
            else:
                head = b"".join((
                    _HEAD.pack(msg_len,                         # 1 TOTALSIZE
                               magic_code,                      # 2 MAGICCODE
                               body_crc,                        # 3 BODYCRC
                               msg.queue_id,                    # 4 QUEUEID
                               msg.flag,                        # 5 FLAG
                               queue_offset,                    # 6 QUEUEOFFSET
                               physical_offset,                 # 7 PHYSICALOFFSET
                               sys_flag,                        # 8 SYSFLAG
                               msg.born_timestamp),             # 9 BORNTIMESTAMP
                    born_host,                                  # 10 BORNHOST
                    _LONG.pack(msg.store_timestamp),            # 11 STORETIMESTAMP
                    store_host,                                 # 12 STOREHOSTADDRESS
                    _TAIL.pack(msg.reconsume_times,             # 13 RECONSUMETIMES
                               msg.prepared_transaction_offset),  # 14 PREPARED TRANSACTION OFFSET
                    _INT.pack(body_length)))                    # 15 BODY length
            data = b"".join((head, body,                                   # 15 BODY
                             topic_length_field, topic_data,               # 16 TOPIC
                             _SHORT.pack(properties_length), properties_data))  # 17 PROPERTIES
        except (struct.error, TypeError):
            # struct.pack enforces the Java ranges; name the offending field for the error.
            self._check_fields(msg, queue_offset, physical_offset)
            raise
        if self.crc32_reserved_length:
            # 18 CRC32, over everything before it (doAppend computes it once the offsets and
            # the store timestamp are in place; here they already are).
            data += create_crc32(crc32(data))
        return data

    @staticmethod
    def _check_fields(msg: MessageExtBrokerInner, queue_offset: int, physical_offset: int) -> None:
        for name, value in (("queue_id", msg.queue_id), ("flag", msg.flag),
                            ("reconsume_times", msg.reconsume_times)):
            _check_range(name, value, INT32_MIN, INT32_MAX, "int")
        for name, value in (("queue_offset", queue_offset), ("physical_offset", physical_offset),
                            ("born_timestamp", msg.born_timestamp),
                            ("store_timestamp", msg.store_timestamp),
                            ("prepared_transaction_offset", msg.prepared_transaction_offset)):
            _check_range(name, value, INT64_MIN, INT64_MAX, "long")

    @staticmethod
    def _host_bytes(host, what: str) -> bytes:
        if host is None:
            raise MessageEncodeError(f"{what} is not set")
        try:
            return socket_address_to_bytes(host, what)
        except MessageFormatError as e:
            raise MessageEncodeError(str(e)) from None

    @staticmethod
    def _host_flag(sys_flag: int, host_length: int, host, what: str, v6_flag: int) -> int:
        if host_length == 20:  # 16 address bytes + port: IPv6
            return sys_flag | v6_flag
        if sys_flag & v6_flag:
            # Java would write 8 host bytes but count 20 in TOTALSIZE: a corrupt message.
            raise MessageEncodeError(
                f"sys_flag 0x{sys_flag & 0xFFFFFFFF:X} marks {what} as IPv6 but {host[0]!r} is IPv4")
        return sys_flag
