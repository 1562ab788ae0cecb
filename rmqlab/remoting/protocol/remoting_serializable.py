"""RemotingSerializable: the JSON of protocol bodies, as fastjson 1.2.83 writes and reads it.

RocketMQ's ``remoting/.../protocol/RemotingSerializable.java`` turns a body (TopicRouteData,
ClusterInfo, RegisterBrokerBody, ...) into bytes with ``JSON.toJSONString``. Two dialects travel:

* **fastjson's default** (``encode()``): bean properties in alphabetical order, null properties and
  null map values left out, maps in their Java iteration order, and **non-string map keys bare**:
  ``"brokerAddrs":{0:"127.0.0.1:10911"}``, which is not standard JSON (jsoncpp, the C++ client's
  parser, accepts it; Python's json does not). Strings are escaped as in the remoting header
  (``rmqlab.remoting.remoting_command.fastjson_text``).
* **standard JSON** (``encode(BrowserCompatible, QuoteFieldNames, SkipTransientField,
  MapSortField)``, what the name server answers GET_ROUTEINFO_BY_TOPIC with for clients from
  V4_9_4 on): non-string keys quoted (``{"0":...}``), every map sorted by key (a TreeMap: numbers
  numerically, strings by character), longs beyond +-(2^53 - 1) written as strings, and strings
  escaped for browsers: ``"``, ``\\`` and ``/`` with a backslash, ``\\b \\f \\n \\r \\t`` short, other
  control characters and everything from U+007F on as ``\\uXXXX`` (upper-case hex, UTF-16 units).

Values are modelled as Python data: dict (a bean with its properties already sorted, or a map in
the order Java iterates it), list, str, int, bool and None. In the standard dialect sorting every
dict is right for both: a bean's properties are sorted already.

Reading accepts both dialects (:func:`decode_json`, fastjson's bare integer keys included).

Java's HashMap iteration order, which the default dialect exposes, is reproduced by
:func:`hash_map_order` (string keys, as ``java_hash_map_order`` of the remoting header) and
:func:`long_hash_map_order` (``Long`` keys such as broker ids).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any

from rmqlab.common.config_manager import parse_fastjson
from rmqlab.common.java_compat import java_hash_map_order
from rmqlab.remoting.remoting_command import JSON_MAX_DEPTH, fastjson_text, json_depth_exceeds

# fastjson SerializeWriter.writeLong with BrowserCompatible: beyond this a long is written as a
# string, because JavaScript numbers lose precision there.
_BROWSER_SAFE_LONG = 9007199254740991

_BROWSER_SHORT_ESCAPES = {'"': '\\"', "\\": "\\\\", "/": "\\/", "\b": "\\b", "\f": "\\f", "\n": "\\n",
                          "\r": "\\r", "\t": "\\t"}
_BROWSER_SPECIAL = re.compile('[\x00-\x1f"\\\\/\x7f-\U0010ffff]')


def _browser_escape_char(match: re.Match) -> str:
    ch = match.group()
    short = _BROWSER_SHORT_ESCAPES.get(ch)
    if short is not None:
        return short
    code = ord(ch)
    if code > 0xFFFF:
        # Java escapes the two UTF-16 units of a supplementary character one by one.
        code -= 0x10000
        return f"\\u{0xD800 + (code >> 10):04X}\\u{0xDC00 + (code & 0x3FF):04X}"
    return f"\\u{code:04X}"


def _browser_string(s: str) -> str:
    return '"' + _BROWSER_SPECIAL.sub(_browser_escape_char, s) + '"'


def _write(out: list[str], value: Any, standard: bool) -> None:
    if value is None:
        out.append("null")
    elif value is True:
        out.append("true")
    elif value is False:
        out.append("false")
    elif isinstance(value, int):
        if standard and not -_BROWSER_SAFE_LONG <= value <= _BROWSER_SAFE_LONG:
            out.append(f'"{value}"')
        else:
            out.append(str(value))
    elif isinstance(value, str):
        out.append(_browser_string(value) if standard else fastjson_text(value))
    elif isinstance(value, Mapping):
        # MapSortField: a TreeMap's natural order. Deviation: strings compare by code point here,
        # by UTF-16 unit in Java; they differ only between U+E000-U+FFFF and supplementary
        # characters, which no name holds.
        items = sorted(value.items(), key=lambda kv: kv[0]) if standard else value.items()
        out.append("{")
        first = True
        for key, item in items:
            if item is None:
                continue  # WriteMapNullValue is off: null properties and map values are left out
            if not first:
                out.append(",")
            first = False
            if isinstance(key, str):
                out.append(_browser_string(key) if standard else fastjson_text(key))
            elif isinstance(key, int) and not isinstance(key, bool):
                # MapSerializer: a non-string key is written bare, or as a string with
                # BrowserCompatible (its NON_STRINGKEY_AS_STRING features).
                out.append(f'"{key}"' if standard else str(key))
            else:
                raise TypeError(f"a JSON map key must be str or int, not {type(key).__name__}")
            out.append(":")
            _write(out, item, standard)
        out.append("}")
    elif isinstance(value, (list, tuple)):
        out.append("[")
        for i, item in enumerate(value):
            if i:
                out.append(",")
            _write(out, item, standard)
        out.append("]")
    else:
        raise TypeError(f"cannot write {type(value).__name__} as JSON")


def to_json(value: Any, *, standard: bool = False) -> str:
    """``value`` as fastjson writes it: the default dialect, or standard JSON (module docstring)."""
    out: list[str] = []
    _write(out, value, standard)
    return "".join(out)


def encode(value: Any, *, standard: bool = False) -> bytes:
    """:func:`to_json` as UTF-8 bytes (``RemotingSerializable.encode``)."""
    # Java's getBytes(UTF_8) writes '?' for a lone surrogate; "replace" does the same.
    return to_json(value, standard=standard).encode("utf-8", "replace")


def decode_json(data: bytes | bytearray | None, what: str) -> Any:
    """Parse a JSON body (either dialect); ``ValueError`` naming ``what`` when it is not JSON."""
    if data is None:
        raise ValueError(f"{what}: no body")
    try:
        text = bytes(data).decode("utf-8")
    except UnicodeDecodeError as e:
        raise ValueError(f"{what}: not UTF-8 ({e.reason} at byte {e.start})") from None
    if json_depth_exceeds(text):
        raise ValueError(f"{what}: nests more than {JSON_MAX_DEPTH} levels deep")
    try:
        return parse_fastjson(text)
    except RecursionError:
        raise ValueError(f"{what}: nested too deeply") from None
    except ValueError as e:
        raise ValueError(f"{what}: {e}") from None


# ---------------------------------------------------------------------------------------------
# Java HashMap iteration order


def hash_map_capacity(size: int, initial_capacity: int = 16) -> int:
    """The table size of a ``HashMap`` created with ``initial_capacity`` that holds ``size`` entries.

    Deviation: a Java table never shrinks; this is the capacity for the current size, which differs
    only for a map that once held more than 3/4 of a larger table (broker groups and route maps
    hold a handful of entries).
    """
    capacity = 1
    while capacity < initial_capacity:
        capacity <<= 1
    while size > capacity * 3 // 4:
        capacity <<= 1
    return capacity


def copy_capacity(size: int) -> int:
    """The table size of ``new HashMap<>(other)`` or of an empty HashMap after ``putAll(other)``:
    ``tableSizeFor((int) (size / 0.75f + 1))`` (``HashMap.putMapEntries``)."""
    wanted = int(size / 0.75 + 1.0)
    capacity = 1
    while capacity < wanted:
        capacity <<= 1
    return capacity


def hash_set_copy_capacity(size: int) -> int:
    """The table size of ``new HashSet<>(collection)``: ``max((int) (size / .75f) + 1, 16)``."""
    return hash_map_capacity(0, max(int(size / 0.75) + 1, 16))


def hash_map_order(keys: Iterable[str], capacity: int) -> list[str]:
    """String keys in the order a HashMap (or HashSet, or ConcurrentHashMap) with a table of
    ``capacity`` iterates them, given their insertion order (``java_hash_map_order``)."""
    keys = list(keys)
    return java_hash_map_order(keys, hash_map_capacity(len(keys), capacity))


def _long_bucket(key: int, mask: int) -> int:
    # Long.hashCode() = (int) (value ^ (value >>> 32)), then HashMap.hash() folds the high half.
    u = key & 0xFFFFFFFFFFFFFFFF
    h = (u ^ (u >> 32)) & 0xFFFFFFFF
    return (h ^ (h >> 16)) & mask


def long_hash_map_order(keys: Iterable[int], capacity: int) -> list[int]:
    """``Long`` keys in the order a HashMap with a table of ``capacity`` iterates them, given the
    order they were inserted in (bucket by bucket, each bucket in insertion order)."""
    keys = list(keys)
    mask = hash_map_capacity(len(keys), capacity) - 1
    return sorted(keys, key=lambda k: _long_bucket(k, mask))  # stable: a bucket keeps its order
