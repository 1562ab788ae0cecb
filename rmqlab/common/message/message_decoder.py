"""Reading stored messages, properties strings and offset message ids (RocketMQ's
``common/.../message/MessageDecoder.java``).

Mirrors RocketMQ's ``MessageDecoder``. Java's ``decode`` swallows every error and returns null;
rmqlab's raises :class:`MessageFormatError` saying what was wrong, and additionally checks that
TOTALSIZE matches the fields (Java leaves that to CommitLog.checkMessageAndReturnSize). Bodies
are returned as stored (compressed when the COMPRESSED flag is set), like Java's decode with
``deCompressBody=false``.
"""

from __future__ import annotations

import struct

from rmqlab.common.java_compat import (INT64_MAX, INT64_MIN, bytes2string, crc32, java_hash_map_order,
                                       java_utf8_decode, string2bytes, to_int32)
from rmqlab.common.message.message import (Host, MessageExt, MessageFormatError,
                                           bytes_to_socket_address, socket_address_to_bytes)
from rmqlab.common.message.message_const import MessageConst
from rmqlab.common.message.message_sys_flag import MessageSysFlag
from rmqlab.common.message.message_version import (BLANK_MAGIC_CODE, MESSAGE_MAGIC_CODE,
                                                   MESSAGE_MAGIC_CODE_V2, MessageVersion)

__all__ = [
    "BLANK_MAGIC_CODE", "MESSAGE_MAGIC_CODE", "MESSAGE_MAGIC_CODE_V2", "NAME_VALUE_SEPARATOR",
    "PROPERTY_SEPARATOR", "MESSAGE_MAGIC_CODE_POSITION", "MESSAGE_FLAG_POSITION",
    "MESSAGE_PHYSIC_OFFSET_POSITION", "MESSAGE_STORE_TIMESTAMP_POSITION", "QUEUE_OFFSET_POSITION",
    "PHY_POS_POSITION", "SYSFLAG_POSITION", "message_properties_to_string", "PROPERTIES_MAP_CAPACITY",
    "properties_to_java_string",
    "string_to_message_properties", "create_message_id", "decode_message_id", "decode", "decodes",
    "CRC32_RESERVED_LEN", "create_crc32", "parse_crc32_property",
]

NAME_VALUE_SEPARATOR = "\x01"
PROPERTY_SEPARATOR = "\x02"

# Fixed field positions inside a stored message (same for IPv4 and IPv6 hosts up to SYSFLAG).
MESSAGE_MAGIC_CODE_POSITION = 4
MESSAGE_FLAG_POSITION = 16
QUEUE_OFFSET_POSITION = 20
MESSAGE_PHYSIC_OFFSET_POSITION = 28
PHY_POS_POSITION = MESSAGE_PHYSIC_OFFSET_POSITION
SYSFLAG_POSITION = 36
# Only with an IPv4 born host; IPv6 moves it to 68.
MESSAGE_STORE_TIMESTAMP_POSITION = 56

# CommitLog.CRC32_RESERVED_LEN: room for the "__CRC32#" property (name, \x01, 10 digits, \x02)
# that ends PROPERTIES when enabledAppendPropCRC is on.
CRC32_RESERVED_LEN = len(MessageConst.PROPERTY_CRC32) + 1 + 10 + 1

_HEAD = struct.Struct(">iiiiiqqiq")  # TOTALSIZE .. BORNTIMESTAMP (48 bytes)
_INT = struct.Struct(">i")
_SHORT = struct.Struct(">h")
_LONG = struct.Struct(">q")
_INT_LONG = struct.Struct(">iq")   # RECONSUMETIMES, PREPARED TRANSACTION OFFSET


def message_properties_to_string(properties: dict[str, str] | None) -> str:
    """``MessageDecoder.messageProperties2String``: ``name\\x01value\\x02`` per property, in the
    dict's order. Properties whose value is None are skipped, as in Java.

    Deviation: Java writes any name and value; a name or value containing \\x01 or \\x02, or an
    empty one, would be silently split or dropped when read back, so rmqlab refuses them."""
    if properties is None:
        return ""
    try:
        # Fast path: build, then check in bulk — exactly one \x01 and one \x02 per property
        # means no name or value contained a separator.
        items = [(n, v) for n, v in properties.items() if v is not None]
        text = "".join([f"{n}{NAME_VALUE_SEPARATOR}{v}{PROPERTY_SEPARATOR}" for n, v in items])
        if (text.count(NAME_VALUE_SEPARATOR) == len(items) == text.count(PROPERTY_SEPARATOR)
                and all(type(n) is str and type(v) is str and n and v for n, v in items)):
            return text
    except TypeError:
        pass
    _explain_bad_properties(properties)
    raise MessageFormatError(f"properties {properties!r} cannot be encoded")  # not reached


# The string2messageProperties map: new HashMap<>(128).
PROPERTIES_MAP_CAPACITY = 128


def properties_to_java_string(properties: dict[str, str], capacity: int = PROPERTIES_MAP_CAPACITY) -> str:
    """``messageProperties2String`` of a ``HashMap(capacity)`` filled in ``properties``' order:
    the entries in Java's iteration order (java_compat.java_hash_map_order). A Java broker stores the
    properties in the order of the ``HashMap(128)`` ``string2messageProperties`` creates."""
    order = java_hash_map_order(list(properties), capacity)
    return "".join(f"{k}{NAME_VALUE_SEPARATOR}{properties[k]}{PROPERTY_SEPARATOR}" for k in order)


def _explain_bad_properties(properties: dict) -> None:
    """Raise the precise error for the first property the fast path refused."""
    for name, value in properties.items():
        if value is None:
            continue
        if not isinstance(name, str) or not isinstance(value, str):
            raise MessageFormatError(f"property {name!r}={value!r}: name and value must be str")
        if not name or not value:
            raise MessageFormatError(
                f"property {name!r}={value!r} has an empty name or value, which "
                "string2messageProperties drops when reading it back")
        for text, what in ((name, "name"), (value, "value")):
            for sep, sep_name in ((NAME_VALUE_SEPARATOR, "\\x01"), (PROPERTY_SEPARATOR, "\\x02")):
                if sep in text:
                    raise MessageFormatError(
                        f"property {what} {text!r} contains the separator {sep_name} "
                        f"at index {text.index(sep)}")


def string_to_message_properties(properties: str | None) -> dict[str, str]:
    """``MessageDecoder.string2messageProperties``: split on \\x02, then on the first \\x01.

    Same tolerance as Java: segments with an empty name or value, or without \\x01, are
    skipped; a repeated name keeps its last value; a missing final \\x02 is accepted."""
    result: dict[str, str] = {}
    if properties is None:
        return result
    length = len(properties)
    index = 0
    while index < length:
        new_index = properties.find(PROPERTY_SEPARATOR, index)
        if new_index < 0:
            new_index = length
        if new_index - index >= 3:
            # Java searches from index to the end of the string, not the segment; a separator
            # found beyond the segment fails the range test below, as it does in Java.
            kv = properties.find(NAME_VALUE_SEPARATOR, index)
            if index < kv < new_index - 1:
                result[properties[index:kv]] = properties[kv + 1:new_index]
        index = new_index + 1
    return result


def create_message_id(store_host: Host, commit_log_offset: int) -> str:
    """The offset message id: store host address (4 or 16 bytes), port (int) and commitlog
    offset (long), as uppercase hex - 32 characters for IPv4, 56 for IPv6."""
    if not INT64_MIN <= commit_log_offset <= INT64_MAX:
        raise MessageFormatError(f"commit_log_offset {commit_log_offset} is out of long range")
    return bytes2string(socket_address_to_bytes(store_host, "store_host") + _LONG.pack(commit_log_offset))


def decode_message_id(msg_id: str) -> tuple[Host, int]:
    """``MessageDecoder.decodeMessageId``: ``((ip, port), commit_log_offset)``."""
    if len(msg_id) not in (32, 56):
        raise MessageFormatError(
            f"message id {msg_id!r} is {len(msg_id)} characters; expected 32 (IPv4) or 56 (IPv6)")
    try:
        raw = string2bytes(msg_id)
    except ValueError as e:
        raise MessageFormatError(f"message id: {e}") from None
    return bytes_to_socket_address(raw[:-8], "message id host"), _LONG.unpack_from(raw, len(raw) - 8)[0]


def create_crc32(crc: int) -> bytes:
    """``MessageDecoder.createCrc32``: the reserved ``__CRC32#`` property for a message CRC,
    CRC32_RESERVED_LEN bytes. The 10 digits are written least significant first, padded with
    '0' (so 123 is written "3210000000")."""
    digits = []
    for _ in range(10):
        digit = 0
        if crc > 0:
            digit, crc = crc % 10, crc // 10
        digits.append(chr(ord("0") + digit))
    return f"{MessageConst.PROPERTY_CRC32}{NAME_VALUE_SEPARATOR}{''.join(digits)}{PROPERTY_SEPARATOR}".encode()


def parse_crc32_property(value: str) -> int:
    """The CRC a ``__CRC32#`` value holds, read as CommitLog.checkMessageAndReturnSize does:
    digits from last to first, each as ``char - '0'`` without validation, in Java int
    arithmetic - so a damaged value yields some other (possibly negative) number."""
    units = value.encode("utf-16-be", "surrogatepass")
    expected = 0
    for i in range(len(units) - 2, -1, -2):
        expected = to_int32(expected * 10 + ((units[i] << 8) | units[i + 1]) - ord("0"))
    return expected


class _Reader:
    """Bounds-checked big-endian reads inside ``[pos, end)`` of a buffer."""

    __slots__ = ("buf", "pos", "end", "start")

    def __init__(self, buf, start: int, end: int) -> None:
        self.buf, self.start, self.pos, self.end = buf, start, start, end

    def take(self, n: int, what: str) -> int:
        if n < 0 or self.pos + n > self.end:
            raise MessageFormatError(
                f"{what} ({n} bytes at message byte {self.pos - self.start}) runs past the "
                f"message's {self.end - self.start} bytes")
        at = self.pos
        self.pos += n
        return at


def decode(buf, pos: int = 0, *, read_body: bool = True, check_crc: bool = True) -> MessageExt:
    """Decode the stored message at ``buf[pos:]`` (``MessageDecoder.decode``'s layout, V1 or V2, IPv4 or
    IPv6 hosts). ``buf`` is any bytes-like object (bytes, bytearray, memoryview, mmap).

    Raises MessageFormatError for a BLANK filler or unknown magic, a TOTALSIZE that does not fit
    the buffer or disagrees with the fields, negative lengths, an out-of-range port, or - when
    ``check_crc`` and the body is read - a BODYCRC that does not match the body (Java checks the
    CRC only for non-empty bodies; so does this)."""
    if pos < 0:
        raise ValueError(f"pos {pos} is negative")
    available = len(buf) - pos
    if available < 8:
        raise MessageFormatError(
            f"only {max(available, 0)} bytes at position {pos}; a message needs at least 8 to start")
    store_size, magic = struct.unpack_from(">ii", buf, pos)
    if magic == BLANK_MAGIC_CODE:
        raise MessageFormatError(
            f"position {pos} holds a BLANK end-of-file filler (TOTALSIZE {store_size}), not a message")
    try:
        version = MessageVersion.value_of_magic_code(magic)
    except ValueError as e:
        raise MessageFormatError(f"message at position {pos}: {e}") from None
    if store_size > available:
        raise MessageFormatError(
            f"TOTALSIZE {store_size} at position {pos} exceeds the {available} bytes left "
            "(truncated or torn message)")
    if store_size < _HEAD.size:
        raise MessageFormatError(f"TOTALSIZE {store_size} at position {pos} is smaller than the fixed fields")

    r = _Reader(buf, pos, pos + store_size)
    (_, _, body_crc, queue_id, flag, queue_offset, commit_log_offset, sys_flag,
     born_timestamp) = _HEAD.unpack_from(buf, r.take(_HEAD.size, "fixed header"))
    born_len = MessageSysFlag.born_host_length(sys_flag)
    at = r.take(born_len, "BORNHOST")
    born_host = bytes_to_socket_address(buf[at:at + born_len], "born_host")
    store_timestamp = _LONG.unpack_from(buf, r.take(8, "STORETIMESTAMP"))[0]
    store_len = MessageSysFlag.store_host_length(sys_flag)
    at = r.take(store_len, "STOREHOSTADDRESS")
    store_host = bytes_to_socket_address(buf[at:at + store_len], "store_host")
    reconsume_times, prepared_transaction_offset = _INT_LONG.unpack_from(
        buf, r.take(_INT_LONG.size, "RECONSUMETIMES and PREPARED TRANSACTION OFFSET"))

    body_len = _INT.unpack_from(buf, r.take(4, "BODY length"))[0]
    if body_len < 0:
        raise MessageFormatError(f"BODY length {body_len} is negative")
    at = r.take(body_len, "BODY")
    body = None
    if read_body:
        body = bytes(buf[at:at + body_len])
        if check_crc and body_len > 0:
            actual = crc32(body)
            if actual != body_crc:
                raise MessageFormatError(
                    f"BODYCRC mismatch at position {pos}: stored {body_crc}, body has {actual}")

    topic_len = version.get_topic_length(buf, r.take(version.topic_length_size, "TOPIC length"))
    if topic_len < 0:
        raise MessageFormatError(f"TOPIC length {topic_len} is negative")
    at = r.take(topic_len, "TOPIC")
    topic = java_utf8_decode(buf[at:at + topic_len])

    properties_len = _SHORT.unpack_from(buf, r.take(2, "PROPERTIES length"))[0]
    if properties_len < 0:
        raise MessageFormatError(f"PROPERTIES length {properties_len} is negative")
    at = r.take(properties_len, "PROPERTIES")
    properties = string_to_message_properties(java_utf8_decode(buf[at:at + properties_len]))

    if r.pos != r.end:
        raise MessageFormatError(
            f"TOTALSIZE {store_size} at position {pos} but the fields add up to {r.pos - pos} bytes")

    return MessageExt(
        topic=topic, body=body, flag=flag, properties=properties,
        queue_id=queue_id, queue_offset=queue_offset, commit_log_offset=commit_log_offset,
        sys_flag=sys_flag, born_timestamp=born_timestamp, born_host=born_host,
        store_timestamp=store_timestamp, store_host=store_host, reconsume_times=reconsume_times,
        prepared_transaction_offset=prepared_transaction_offset, body_crc=body_crc,
        store_size=store_size, msg_id=create_message_id(store_host, commit_log_offset))


def decodes(buf, *, read_body: bool = True, check_crc: bool = True) -> list[MessageExt]:
    """Decode the run of messages filling ``buf``, stopping at its end or at a BLANK filler
    (the end of a commitlog file). Anything else undecodable raises MessageFormatError (Java's
    decodes stops silently at the first failure, which hides corruption)."""
    messages: list[MessageExt] = []
    pos = 0
    while pos < len(buf):
        if len(buf) - pos >= 8 and _INT.unpack_from(buf, pos + 4)[0] == BLANK_MAGIC_CODE:
            break
        msg = decode(buf, pos, read_body=read_body, check_crc=check_crc)
        messages.append(msg)
        pos += msg.store_size
    return messages
