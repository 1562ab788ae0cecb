"""Java behaviours RocketMQ's on-disk formats depend on (``store/.../MessageExtEncoder.java``,
``common/.../message/MessageDecoder.java``).

The CommitLog stores values Java computed: the ConsumeQueue tags code is ``String.hashCode()``
(UTF-16 code units, 32-bit wrap-around), BODYCRC is ``UtilAll.crc32`` (zlib CRC-32 with the
sign bit masked off), message ids are ``UtilAll.bytes2string`` (uppercase hex) and numeric
properties are read with ``Integer.parseInt``/``Long.parseLong``, and a ``HashMap``'s keys come in
its iteration order (remoting headers' extFields, stored message properties). Reproducing them bit
for bit is what lets rmqlab read and write the same bytes as a Java broker.
"""

from __future__ import annotations

import re
import zlib
from collections.abc import Iterable
from functools import lru_cache

INT8_MIN, INT8_MAX = -(1 << 7), (1 << 7) - 1
INT16_MIN, INT16_MAX = -(1 << 15), (1 << 15) - 1
INT32_MIN, INT32_MAX = -(1 << 31), (1 << 31) - 1
INT64_MIN, INT64_MAX = -(1 << 63), (1 << 63) - 1

_BITS_RANGE = {8: (INT8_MIN, INT8_MAX), 16: (INT16_MIN, INT16_MAX),
               32: (INT32_MIN, INT32_MAX), 64: (INT64_MIN, INT64_MAX)}

# Java's parseInt/parseLong grammar: optional sign, then digits. ASCII digits only here; Java
# also accepts other Unicode decimal digits, which no RocketMQ component writes.
_JAVA_INTEGER = re.compile(r"[+-]?[0-9]+")


def to_int32(value: int) -> int:
    """Wrap ``value`` to a Java ``int`` (two's complement, like a Java narrowing cast)."""
    value &= 0xFFFFFFFF
    return value - (1 << 32) if value & 0x80000000 else value


def in_java_range(value: int, bits: int) -> bool:
    """True when ``value`` fits a signed Java integer of ``bits`` bits (8, 16, 32 or 64)."""
    low, high = _BITS_RANGE[bits]
    return low <= value <= high


def java_string_hash_code(s: str) -> int:
    """``java.lang.String.hashCode()``: ``s[0]*31^(n-1) + ... + s[n-1]`` over UTF-16 code units,
    wrapped to a signed 32-bit int. Characters outside the BMP count as two units (a surrogate
    pair), exactly as Java stores them; ``"".hashCode()`` is 0."""
    # surrogatepass keeps a lone surrogate as the single unit Java would hold.
    units = s.encode("utf-16-be", "surrogatepass")
    h = 0
    for i in range(0, len(units), 2):
        h = (31 * h + ((units[i] << 8) | units[i + 1])) & 0xFFFFFFFF
    return to_int32(h)


def crc32(data: bytes | bytearray | memoryview, offset: int = 0, length: int | None = None) -> int:
    """``UtilAll.crc32(byte[], offset, length)``: CRC-32 (``java.util.zip.CRC32``, same polynomial
    as zlib) masked with ``0x7FFFFFFF``, so the result is never negative. RocketMQ writes this
    value as BODYCRC; ``crc32(b"")`` is 0."""
    # Release the view at once so an mmap passed in can still be closed by its owner.
    with memoryview(data) as view:
        end = len(view) if length is None else offset + length
        if offset < 0 or end < offset or end > len(view):
            raise ValueError(f"crc32 range [{offset}, {end}) is outside a buffer of {len(view)} bytes")
        with view[offset:end] as part:
            return zlib.crc32(part) & 0x7FFFFFFF


_HEX_DIGITS = frozenset("0123456789abcdefABCDEF")


def bytes2string(src: bytes | bytearray | memoryview) -> str:
    """``UtilAll.bytes2string``: two uppercase hex digits per byte."""
    return bytes(src).hex().upper()


def string2bytes(hex_string: str) -> bytes:
    """``UtilAll.string2bytes``: the inverse of :func:`bytes2string` (either case accepted).

    Raises ValueError for an odd length or a non-hex character; Java silently drops a trailing
    odd digit and maps non-hex characters to garbage nibbles, which would hide a corrupt id."""
    if len(hex_string) % 2:
        raise ValueError(f"hex string has odd length {len(hex_string)}: {hex_string!r}")
    bad = next((c for c in hex_string if c not in _HEX_DIGITS), None)
    if bad is not None:
        raise ValueError(f"hex string contains non-hex character {bad!r}: {hex_string!r}")
    return bytes.fromhex(hex_string)


def java_utf8_decode(data: bytes | bytearray | memoryview) -> str:
    """``new String(bytes, UTF_8)``: never fails; malformed sequences become U+FFFD."""
    return bytes(data).decode("utf-8", "replace")


def java_parse_int(s: str, bits: int = 32) -> int:
    """``Integer.parseInt`` (bits=32), ``Long.parseLong`` (64) or ``Short.parseShort`` (16).

    Raises ValueError (Java: NumberFormatException) when ``s`` is not an optionally signed run
    of digits or the value is out of range. Unlike Python's ``int()``, whitespace, underscores
    and ``"1.0"`` are rejected, as in Java."""
    if not _JAVA_INTEGER.fullmatch(s):
        raise ValueError(f"{s!r} is not a Java integer literal")
    value = int(s)
    if not in_java_range(value, bits):
        raise ValueError(f"{s!r} is out of range for a {bits}-bit Java integer")
    return value


# -- Java HashMap iteration order ------------------------------------------------------------------
@lru_cache(maxsize=4096)
def _java_hash(key: str) -> int:
    # HashMap.hash(): String.hashCode() with its high half folded into the low half.
    h = java_string_hash_code(key) & 0xFFFFFFFF
    return h ^ (h >> 16)


def java_hash_map_order(keys: Iterable[str], initial_capacity: int = 16) -> list[str]:
    """The order a ``java.util.HashMap`` built by putting ``keys`` in this order iterates them.

    HashMap iterates its table bucket by bucket (bucket = hash & (capacity - 1)) and each bucket in
    insertion order; resizing splits buckets without reordering them. The capacity starts at
    ``initial_capacity`` rounded up to a power of two and doubles while more than 3/4 full. Java
    serializes ``extFields`` in this order (fastjson and the binary header both iterate the map);
    RocketMQ builds it with ``new HashMap<>()`` (16) in ``makeCustomHeaderToNet``. Not modelled:
    a bucket of 8 or more colliding keys turning into a tree, which no header comes near.
    """
    return list(java_hash_map_order_of_tuple(tuple(keys), initial_capacity))


@lru_cache(maxsize=1024)
def java_hash_map_order_of_tuple(keys: tuple[str, ...], initial_capacity: int) -> tuple[str, ...]:
    """java_hash_map_order for a tuple of keys, cached by it: a protocol sends the same few header
    shapes over and over."""
    capacity = 1
    while capacity < initial_capacity:
        capacity <<= 1
    while len(keys) > capacity * 3 // 4:
        capacity <<= 1
    mask = capacity - 1
    # sorted() is stable: keys in one bucket keep their insertion order.
    return tuple(sorted(keys, key=lambda k: _java_hash(k) & mask))
