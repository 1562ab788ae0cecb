"""RemotingCommand: one request or response of RocketMQ's remoting protocol, and its wire format.

Implements ``remoting/src/main/java/org/apache/rocketmq/remoting/protocol/RemotingCommand.java``
with ``RemotingSerializable`` (JSON headers) and ``RocketMQSerializable`` (binary headers), for
every client, the C++ one included. A frame, all integers big-endian::

    int32 length          4 + header length + body length (the prefix itself not counted)
    int32 header info     serializeType << 24 | (header length & 0xFFFFFF); JSON = 0, ROCKETMQ = 1
    header                header length bytes, JSON or ROCKETMQ binary
    body                  the rest of the frame, raw bytes

The JSON header is what fastjson 1.2.83 writes for the Java bean: the bean's properties in
alphabetical order, ``null`` ones left out (so a null remark or extFields is absent, an empty one
is not), enums by name, no spaces::

    {"code":105,"extFields":{"topic":"TopicTest"},"flag":0,"language":"JAVA","opaque":3,
     "remark":"...","serializeTypeCurrentRPC":"JSON","version":0}

``extFields`` is a ``HashMap<String, String>`` in Java, so its keys come in HashMap iteration
order; :func:`rmqlab.common.java_compat.java_hash_map_order` reproduces that order, which makes
rmqlab's headers the same bytes a Java broker writes. Strings are escaped as fastjson escapes them
(see :func:`fastjson_text`).

The ROCKETMQ binary header is ``code`` short, ``language`` byte, ``version`` short, ``opaque`` int,
``flag`` int, ``remark`` (int length + UTF-8), ``extFields`` (int length + entries of short key
length, key, int value length, value).

``flag`` bit 0 marks a response, bit 1 a oneway request (no response is sent). ``opaque`` pairs a
response with its request.

Types of extFields values. Java keeps them as strings; RocketMQ clients written in other
languages do not: the C++ client (PyPI ``rocketmq`` 0.4.4) sends ``"queueId": 0`` and
``"sysFlag": 6`` as JSON numbers beside strings. A decoded command keeps what arrived (str, int or bool; a JSON
fraction is kept as its text), and the typed readers :meth:`RemotingCommand.ext_int`,
:meth:`~RemotingCommand.ext_long`, :meth:`~RemotingCommand.ext_bool` and
:meth:`~RemotingCommand.ext_str` accept either spelling. Encoding always writes strings, as
Java's ``makeCustomHeaderToNet`` does with ``toString()`` (``true``/``false`` for booleans): the C++
client reads a response field only ``if (value.isString())``, so a number there would be ignored.

Deviations from Java (the first three because Java's leniency would only hide a corrupt frame or
a mangled value):

* decoding is strict where fastjson is lenient: ``code``, ``flag``, ``opaque`` and ``version`` must
  be JSON integers in Java's int range, ``remark`` and ``language`` strings (or null),
  ``extFields`` an object whose values are strings, numbers, booleans or null; NaN/Infinity, bad
  UTF-8 and lone surrogates are refused. Any of these raises :class:`FrameError`;
* the binary decoder checks every length against the bytes present (Java reads map entries past
  the extFields region into the body and ignores a negative extFields length) and refuses
  trailing bytes after the extFields;
* encoding refuses values Java would silently mangle: a code or version outside a Java short in a
  binary header (Java casts), a float extFields value (Java's ``Double.toString`` spelling is not
  reproduced; no RocketMQ header carries one);
* ``opaque`` is assigned when a request is sent, from a per-connection counter
  (``RemotingChannel``), not at construction from a process-wide counter: a command can then be
  built once and sent anywhere, and the simulator's traces do not depend on what else the process
  did before.
"""

from __future__ import annotations

import enum
import json
import re
import struct
from collections.abc import Mapping
from typing import Any

from rmqlab.common.java_compat import INT16_MAX, INT16_MIN, INT32_MAX, INT32_MIN, INT64_MAX, INT64_MIN, \
    java_hash_map_order_of_tuple, java_parse_int
from rmqlab.remoting.exceptions import FrameError, RemotingCommandError
from rmqlab.remoting.language_code import LanguageCode
from rmqlab.remoting.remoting_helper import clip

# A decoded extFields value: what the JSON held (a fraction kept as its text). None means absent,
# as a null HashMap value does in Java.
ExtValue = str | int | bool

RPC_TYPE = 0    # flag bit 0: 0 request, 1 response
RPC_ONEWAY = 1  # flag bit 1: 1 oneway request (no response)

_RESPONSE_BIT = 1 << RPC_TYPE
_ONEWAY_BIT = 1 << RPC_ONEWAY


class SerializeType(enum.IntEnum):
    """How the header is written: the top byte of the header-info int (``SerializeType.java``)."""

    JSON = 0
    ROCKETMQ = 1

    @classmethod
    def value_of(cls, code: int) -> SerializeType | None:
        try:
            return cls(code)
        except ValueError:
            return None


def mark_protocol_type(header_length: int, serialize_type: SerializeType) -> int:
    """``markProtocolType``: the header-info int for a header of ``header_length`` bytes."""
    return (serialize_type << 24) | (header_length & 0xFFFFFF)


# ---------------------------------------------------------------------------------------------
# JSON text as fastjson writes it

# fastjson 1.2.83 (SerializeWriter.writeStringWithDoubleQuote, IOUtils.specicalFlags_doubleQuotes)
# escapes ", \ and \b \t \n \f \r with a backslash; U+0000-U+0007, U+000B, U+000E-U+001F,
# U+007F-U+009F, U+2028 and U+2029 as \uXXXX with upper-case hex; everything else, '/' included,
# is written as is.
_JSON_SPECIAL = re.compile('[\x00-\x1f"\\\\\x7f-\x9f\u2028\u2029]')
_JSON_SHORT_ESCAPES = {'"': '\\"', "\\": "\\\\", "\b": "\\b", "\t": "\\t", "\n": "\\n", "\f": "\\f",
                       "\r": "\\r"}


def _json_escape_char(match: re.Match) -> str:
    ch = match.group()
    return _JSON_SHORT_ESCAPES.get(ch) or f"\\u{ord(ch):04X}"


def _json_string(s: str) -> str:
    if _JSON_SPECIAL.search(s) is None:
        return f'"{s}"'
    return '"' + _JSON_SPECIAL.sub(_json_escape_char, s) + '"'


def _fastjson_text(value: str | int | dict) -> str:
    """``value`` (str, int, or a dict of them, in order) as fastjson writes it, piece by piece."""
    if isinstance(value, str):
        return _json_string(value)
    if isinstance(value, dict):
        return "{" + ",".join(f"{_json_string(k)}:{_fastjson_text(v)}" for k, v in value.items()) + "}"
    return str(value)


# Python's C encoder writes what fastjson writes except that it leaves U+007F-U+009F, U+2028 and
# U+2029 raw and spells the \u escapes of U+000B and U+000E-U+001F with lower-case hex; a text
# without those is identical, and several times faster to produce.
_C_ENCODER = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), check_circular=False)
_NOT_LIKE_FASTJSON = re.compile(r"\\u00[01][a-f]" "|[\x7f-\x9f\u2028\u2029]")
_LOWER_HEX_ESCAPE = re.compile(r"\\u00[01][a-f]")  # what _NOT_LIKE_FASTJSON finds in ASCII text
# The C encoder _C_ENCODER.encode builds on every call, built once (values here hold no cycles).
_C_MAKE_ENCODER = getattr(json.encoder, "c_make_encoder", None)
_C_ENCODE = _C_MAKE_ENCODER(None, _C_ENCODER.default, json.encoder.encode_basestring, None, ":", ",", False,
                            False, True) if _C_MAKE_ENCODER is not None else None


def fastjson_text(value: str | int | dict) -> str:
    """``value`` as fastjson 1.2.83 writes it (see ``_JSON_SPECIAL``), fast when it can be."""
    text = "".join(_C_ENCODE(value, 0)) if _C_ENCODE is not None else _C_ENCODER.encode(value)
    if text.isascii():
        # Only U+007F (ASCII too) or a lower-case \u00XX escape can differ; literal searches are quick.
        if "\x7f" not in text and ("\\u00" not in text or _LOWER_HEX_ESCAPE.search(text) is None):
            return text
    elif _NOT_LIKE_FASTJSON.search(text) is None:
        return text
    return _fastjson_text(value)


try:  # orjson: the header's JSON several times faster where it writes json's (and so fastjson's) text
    import orjson as _orjson
except ImportError:  # pragma: no cover - a dependency; without it fastjson_text does it all
    _orjson = None
_ORJSON_DUMPS = _orjson.dumps if _orjson is not None else None
_LOWER_HEX_ESCAPE_BYTES = re.compile(rb"\\u00[01][a-f]")


def fastjson_bytes(value: dict) -> bytes:
    """``fastjson_text(value)`` UTF-8 encoded (a lone surrogate as "?", as Java's getBytes does),
    for a dict of str keys and str, int (a Java int or long) and dict values: the header.

    orjson writes the same text as json's C encoder for such values (the escapes of ", \\ and
    the control characters included) and refuses lone surrogates and ints beyond 64 bits. Only
    ASCII output without U+007F or a lower-case \\u00XX escape is taken as it is, where
    fastjson_text also takes json's text as it is; anything else goes to fastjson_text
    (tests/test_remoting.py compares both on random and tricky headers)."""
    if _ORJSON_DUMPS is not None:
        try:
            out = _ORJSON_DUMPS(value)
        except TypeError:  # orjson.JSONEncodeError
            pass
        else:
            if out.isascii() and b"\x7f" not in out and (b"\\u00" not in out or _LOWER_HEX_ESCAPE_BYTES.search(out) is None):
                return out
    return fastjson_text(value).encode("utf-8", "replace")


def ext_value_to_string(key: str, value: ExtValue) -> str:
    """An extFields value as Java's ``toString()`` spells it (booleans ``true``/``false``)."""
    if value is True:
        return "true"
    if value is False:
        return "false"
    if isinstance(value, str):
        return str.__str__(value)  # a str subclass (an Enum) as its plain text: the trace keeps it as is
    if isinstance(value, int):
        return str(value)
    raise ValueError(f"extFields <{key}>: {type(value).__name__} {value!r} cannot be sent "
                     "(a header value is a str, an int or a bool)")


# ---------------------------------------------------------------------------------------------
# Decoding helpers

class _Required:
    def __repr__(self) -> str:
        return "<required>"


_REQUIRED: Any = _Required()

_HEADER_INTS = ("code", "flag", "opaque", "version")
_STR_ONLY = {str}


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON number")


# A fraction is kept as its text: the typed readers then treat it as Java's parseInt would.
_JSON_DECODER = json.JSONDecoder(parse_float=str, parse_constant=_reject_constant)


def _int32_field(obj: Mapping[str, Any], name: str) -> int:
    value = obj.get(name, 0)
    # Missing or null is Java's field default (0); bool is an int subclass and is refused.
    if value is None:
        return 0
    if type(value) is not int:
        raise FrameError(f"header field {name} must be an integer, not {type(value).__name__} "
                         f"{clip(repr(value), 100)}")
    if not INT32_MIN <= value <= INT32_MAX:
        raise FrameError(f"header field {name} = {value} does not fit a Java int")
    return value


def _optional_str_field(obj: Mapping[str, Any], name: str) -> str | None:
    value = obj.get(name)
    if value is not None and not isinstance(value, str):
        raise FrameError(f"header field {name} must be a string, not {type(value).__name__} "
                         f"{clip(repr(value), 100)}")
    return value


_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F]")


def _check_unicode(s: str, where: str) -> None:
    try:
        s.encode("utf-8")
    except UnicodeEncodeError:
        raise FrameError(f"header {where} holds a lone surrogate (not valid Unicode)") from None


# How deeply JSON from a peer may nest. A header is two levels deep (the command, its extFields)
# and the deepest body (RegisterBrokerBody) five; Python's decoder recurses per level, so without
# a bound a frame of "[[[[..." reaches the interpreter's recursion limit, at a depth that depends
# on how deep the stack already is (a RecursionError). Deviation: fastjson states no such bound;
# 64 levels is far beyond any RocketMQ header or body, and the same wherever it is checked.
JSON_MAX_DEPTH = 64
_JSON_NESTING = re.compile(r'"(?:[^"\\]|\\.)*"|[\[\]{}]')


def json_depth_exceeds(text: str, limit: int = JSON_MAX_DEPTH) -> bool:
    """Whether the JSON ``text`` nests objects and arrays more than ``limit`` deep (brackets in
    strings do not count). Cheap for ordinary text: it counts brackets first, and only text with
    more opening brackets than ``limit`` is scanned."""
    if text.count("[") + text.count("{") <= limit:
        return False
    depth = 0
    for m in _JSON_NESTING.finditer(text):
        ch = m.group()
        if ch in "[{":
            depth += 1
            if depth > limit:
                return True
        elif ch in "]}":
            depth -= 1
    return False


def _json_module_header(text: str) -> Any:
    try:
        return _JSON_DECODER.decode(text)
    except RecursionError:  # not reached after the depth check; kept as the last line of defence
        raise FrameError("JSON header is nested too deeply") from None
    except ValueError as e:  # JSONDecodeError, NaN/Infinity, an integer of more than 4300 digits
        raise FrameError(f"JSON header is not valid JSON: {e}") from None


_ORJSON_LOADS = _orjson.loads if _orjson is not None else None
_HEADER_VALUE_TYPES = frozenset({int, str, dict, bool, type(None)})  # a header's own fields, as decoded
_EXT_VALUE_TYPES = frozenset({str, int, bool, type(None)})


def _orjson_header(text: str) -> dict | None:
    """The header parsed by orjson where that is exactly what `_JSON_DECODER` gives, else None
    (then the json module decides, and words any error). orjson accepts only strict JSON, which
    the json module reads the same way (escapes, key order, a repeated key's last value), except
    that it reads a number with a fraction or exponent as a float where `_JSON_DECODER` keeps its
    text, and an int beyond 64 bits as a float; and it refuses a lone surrogate escape. So it is
    used only for an object without a float among its values and its extFields' values, without
    lists or deeper objects, and without a surrogate escape (tests/test_remoting_header_codec.py
    compares both decoders)."""
    if _ORJSON_LOADS is None or _SURROGATE_ESCAPE.search(text) is not None:
        return None
    try:
        obj = _ORJSON_LOADS(text)
    except ValueError:  # orjson.JSONDecodeError: the json module words the error (or reads NaN)
        return None
    if type(obj) is not dict or not set(map(type, obj.values())) <= _HEADER_VALUE_TYPES:
        return None
    for value in obj.values():
        if type(value) is dict and not set(map(type, value.values())) <= _EXT_VALUE_TYPES:
            return None
    return obj


def _decode_json_header(data: bytes) -> RemotingCommand:
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise FrameError(f"JSON header is not valid UTF-8 ({e.reason} at byte {e.start})") from None
    if json_depth_exceeds(text):
        raise FrameError(f"JSON header is nested too deeply (more than {JSON_MAX_DEPTH} levels)")
    obj = _orjson_header(text)  # only for a text without a surrogate escape
    surrogate_escape = obj is None and _SURROGATE_ESCAPE.search(text) is not None
    if obj is None:
        obj = _json_module_header(text)
    if not isinstance(obj, dict):
        raise FrameError(f"JSON header must be an object, not {type(obj).__name__}")
    code, flag, opaque, version = obj.get("code", 0), obj.get("flag", 0), obj.get("opaque", 0), obj.get("version", 0)
    if not (type(code) is int and type(flag) is int and type(opaque) is int and type(version) is int
            and INT32_MIN <= code <= INT32_MAX and INT32_MIN <= flag <= INT32_MAX
            and INT32_MIN <= opaque <= INT32_MAX and INT32_MIN <= version <= INT32_MAX):
        code, flag, opaque, version = (_int32_field(obj, name) for name in _HEADER_INTS)  # decides, or explains
    remark = _optional_str_field(obj, "remark")
    # Absent: Java's field default. An unknown name is kept (fastjson would give null): it is
    # only ever reported.
    language = _optional_str_field(obj, "language") if "language" in obj else LanguageCode.JAVA.name
    raw_ext = obj.get("extFields")
    ext_fields: dict[str, ExtValue] | None = None
    if raw_ext is not None:
        if not isinstance(raw_ext, dict):
            raise FrameError(f"header field extFields must be an object, not {type(raw_ext).__name__}")
        ext_fields = raw_ext
        try:
            # Java peers send only strings; joining them is the quickest test that all are (the
            # JSON decoder makes no str subclasses).
            "".join(raw_ext.values())
            all_str = True
        except TypeError:
            all_str = False
        if not all_str:
            ext_fields = {}
            for key, value in raw_ext.items():
                if value is None:
                    continue  # a null value reads as absent, as HashMap.get gives null in Java
                if not isinstance(value, (str, int)):  # bool is an int
                    raise FrameError(f"extFields <{key}> must be a string, number or boolean, "
                                     f"not {type(value).__name__}")
                ext_fields[key] = value
    # Only a \uD800-\uDFFF escape can put a lone surrogate in the decoded text (the UTF-8 decoder
    # refuses encoded ones); a trace or a re-encode could not carry it.
    if surrogate_escape:
        for s, where in ((remark, "remark"), (language, "language")):
            if s is not None:
                _check_unicode(s, where)
        for key, value in (ext_fields or {}).items():
            _check_unicode(key, "extFields key")
            if isinstance(value, str):
                _check_unicode(value, f"extFields <{key}>")
    cmd = RemotingCommand(code, language=language, version=version, opaque=opaque, flag=flag, remark=remark)
    cmd.ext_fields = ext_fields  # already a fresh dict; the constructor would copy it again
    return cmd


_BIN_FIXED = struct.Struct(">hbhii")  # code, language, version, opaque, flag
_INT32 = struct.Struct(">I")  # the header-info int, read unsigned (its top byte is the serialize type)


def _decode_rocketmq_header(data: bytes) -> RemotingCommand:
    n = len(data)
    if n < _BIN_FIXED.size + 8:
        raise FrameError(f"ROCKETMQ header of {n} bytes is shorter than its fixed part "
                         f"({_BIN_FIXED.size + 8} bytes)")
    code, language_byte, version, opaque, flag = _BIN_FIXED.unpack_from(data, 0)
    pos = _BIN_FIXED.size

    def read_str(length_size: int, what: str, end: int) -> str | None:
        nonlocal pos
        if pos + length_size > end:
            raise FrameError(f"ROCKETMQ header: {what} length runs past its region")
        length = int.from_bytes(data[pos:pos + length_size], "big", signed=True)
        pos += length_size
        if length < 0 or pos + length > end:
            raise FrameError(f"ROCKETMQ header: {what} length {length} does not fit the "
                             f"{end - pos} bytes left")
        raw = data[pos:pos + length]
        pos += length
        if length == 0:
            return None  # Java's readStr returns null for an empty string
        try:
            return raw.decode("utf-8")
        except UnicodeDecodeError as e:
            raise FrameError(f"ROCKETMQ header: {what} is not valid UTF-8 ({e.reason})") from None

    remark = read_str(4, "remark", n)
    if pos + 4 > n:
        raise FrameError("ROCKETMQ header: no room for the extFields length")
    ext_length = int.from_bytes(data[pos:pos + 4], "big", signed=True)
    pos += 4
    if ext_length < 0 or pos + ext_length > n:
        raise FrameError(f"ROCKETMQ header: extFields length {ext_length} does not fit the "
                         f"{n - pos} bytes left")
    ext_fields: dict[str, ExtValue] | None = None
    if ext_length > 0:
        ext_fields = {}
        end = pos + ext_length
        while pos < end:
            key = read_str(2, "extFields key", end)
            value = read_str(4, f"extFields <{key}> value", end)
            # Java stores an empty key or value as null; HashMap.get then reads it as absent.
            if key is not None and value is not None:
                ext_fields[key] = value
    if pos != n:
        raise FrameError(f"ROCKETMQ header: {n - pos} bytes after the extFields")
    language = LanguageCode.value_of(language_byte)
    cmd = RemotingCommand(code, language=language.name if language is not None else None, version=version,
                          opaque=opaque, flag=flag, remark=remark, serialize_type=SerializeType.ROCKETMQ)
    cmd.ext_fields = ext_fields
    return cmd


# ---------------------------------------------------------------------------------------------

class RemotingCommand:
    """A request or response; see the module docstring for the wire format.

    ``language`` is the language's name (``"JAVA"``, ``"CPP"``) as the peer spelled it in a JSON
    header (absent reads as JAVA, Java's default); None when the JSON has null there or a binary
    header holds a byte this version does not know (Java's ``LanguageCode.valueOf`` gives null
    too). ``ext_fields`` is None when the header has none, which is not the same as empty on the
    wire. ``frame_size`` is set by :meth:`decode`: the bytes the command occupied on the wire,
    length prefix included.
    """

    __slots__ = ("code", "language", "version", "opaque", "flag", "remark", "ext_fields", "body",
                 "serialize_type", "frame_size")

    def __init__(self, code: int = 0, *, language: str | LanguageCode | None = LanguageCode.JAVA.name,
                 version: int = 0, opaque: int = 0, flag: int = 0, remark: str | None = None,
                 ext_fields: Mapping[str, ExtValue | None] | None = None, body: bytes | None = None,
                 serialize_type: SerializeType = SerializeType.JSON):
        self.code = code
        self.language = language.name if isinstance(language, LanguageCode) else language
        self.version = version
        self.opaque = opaque
        self.flag = flag
        self.remark = remark
        self.ext_fields: dict[str, ExtValue | None] | None = dict(ext_fields) if ext_fields is not None else None
        self.body = body
        self.serialize_type = serialize_type
        self.frame_size: int | None = None

    # -- factories (RemotingCommand.createRequestCommand / createResponseCommand) ----------------
    @classmethod
    def create_request_command(cls, code: int, ext_fields: Mapping[str, ExtValue | None] | None = None,
                               body: bytes | None = None) -> RemotingCommand:
        """A request with ``code``; ``ext_fields`` are the custom header's fields."""
        return cls(code, ext_fields=ext_fields, body=body)

    @classmethod
    def create_response_command(cls, code: int, remark: str | None = None,
                                ext_fields: Mapping[str, ExtValue | None] | None = None,
                                body: bytes | None = None) -> RemotingCommand:
        """A response with ``code`` and ``remark``, already marked as a response. The opaque is
        set when it is written back (``writeResponse`` copies the request's)."""
        cmd = cls(code, remark=remark, ext_fields=ext_fields, body=body)
        cmd.mark_response_type()
        return cmd

    # -- flag bits ------------------------------------------------------------------------------
    def mark_response_type(self) -> None:
        self.flag |= _RESPONSE_BIT

    def is_response_type(self) -> bool:
        return (self.flag & _RESPONSE_BIT) == _RESPONSE_BIT

    def mark_oneway_rpc(self) -> None:
        self.flag |= _ONEWAY_BIT

    def is_oneway_rpc(self) -> bool:
        return (self.flag & _ONEWAY_BIT) == _ONEWAY_BIT

    # -- extFields ------------------------------------------------------------------------------
    def add_ext_field(self, key: str, value: ExtValue) -> None:
        if self.ext_fields is None:
            self.ext_fields = {}
        self.ext_fields[key] = value

    def _ext(self, name: str, default: Any) -> Any:
        value = self.ext_fields.get(name) if self.ext_fields is not None else None
        if value is None and default is _REQUIRED:
            # RocketMQ's text for a missing @CFNotNull field.
            raise RemotingCommandError(f"the custom field <{name}> is null")
        return value

    def _bad(self, name: str, value: ExtValue, wanted: str) -> RemotingCommandError:
        return RemotingCommandError(f"the custom field <{name}> = {clip(repr(value), 100)} is not {wanted} "
                                    f"(request code {self.code})")

    def ext_str(self, name: str, default: Any = _REQUIRED) -> Any:
        """The field as a string (numbers and booleans spelled as Java's ``toString()``), or
        ``default`` when absent; absent without a default raises RemotingCommandError."""
        value = self._ext(name, default)
        return default if value is None else ext_value_to_string(name, value)

    def _ext_integer(self, name: str, default: Any, bits: int, wanted: str) -> Any:
        value = self._ext(name, default)
        if value is None:
            return default
        if isinstance(value, bool):
            raise self._bad(name, value, wanted)
        if isinstance(value, int):
            low, high = (INT32_MIN, INT32_MAX) if bits == 32 else (INT64_MIN, INT64_MAX)
            if not low <= value <= high:
                raise self._bad(name, value, wanted)
            return value
        try:
            return java_parse_int(value, bits)  # Integer.parseInt / Long.parseLong
        except ValueError:
            raise self._bad(name, value, wanted) from None

    def ext_int(self, name: str, default: Any = _REQUIRED) -> Any:
        """The field as a Java int: a JSON integer, or a string ``Integer.parseInt`` accepts."""
        return self._ext_integer(name, default, 32, "a 32-bit integer")

    def ext_long(self, name: str, default: Any = _REQUIRED) -> Any:
        """The field as a Java long: a JSON integer, or a string ``Long.parseLong`` accepts."""
        return self._ext_integer(name, default, 64, "a 64-bit integer")

    def ext_bool(self, name: str, default: Any = _REQUIRED) -> Any:
        """The field as a boolean: JSON true/false, "true"/"false" in any case, or 0/1.

        Deviation: Java's ``Boolean.parseBoolean`` reads every string but "true" as false, so a
        typo silently means false; here anything else raises RemotingCommandError. 0 and 1 (as
        numbers or strings) are accepted because the C++ client writes its bools through an
        ostringstream (``"unitMode": "0"``), where they mean false and true.
        """
        value = self._ext(name, default)
        if value is None:
            return default
        if isinstance(value, bool):
            return value
        if isinstance(value, int):
            if value in (0, 1):
                return bool(value)
        else:
            lowered = value.lower()
            if lowered in ("true", "false"):
                return lowered == "true"
            if value in ("0", "1"):
                return value == "1"
        raise self._bad(name, value, "a boolean")

    # -- encoding -------------------------------------------------------------------------------
    def wire_ext_fields(self) -> dict[str, str] | None:
        """``ext_fields`` as encoding writes them: strings, null values left out, in Java's
        HashMap order; None when the command has none."""
        fields = self.ext_fields
        if fields is None:
            return None
        values = fields.values()
        if set(map(type, values)) == _STR_ONLY:  # the usual: every value already a str (none is None)
            return {key: fields[key] for key in java_hash_map_order_of_tuple(tuple(fields), 16)}
        order = java_hash_map_order_of_tuple(tuple(k for k, v in fields.items() if v is not None), 16)
        return {key: value if type(value) is str else ext_value_to_string(key, value)  # type: ignore[arg-type]
                for key in order for value in (fields[key],)}

    def _json_header(self, ext: dict[str, str] | None) -> bytes:
        # fastjson's bean order (alphabetical) with null properties left out.
        obj: dict[str, Any] = {"code": self.code}
        if ext is not None:
            obj["extFields"] = ext
        obj["flag"] = self.flag
        if self.language is not None:
            obj["language"] = self.language
        obj["opaque"] = self.opaque
        if self.remark is not None:
            obj["remark"] = self.remark
        obj["serializeTypeCurrentRPC"] = "JSON"
        obj["version"] = self.version
        # Java's String.getBytes(UTF_8) writes '?' for a lone surrogate; fastjson_bytes does the same.
        return fastjson_bytes(obj)

    def _rocketmq_header(self, ext: dict[str, str] | None) -> bytes:
        for name in ("code", "version"):
            value = getattr(self, name)
            if not INT16_MIN <= value <= INT16_MAX:
                raise ValueError(f"{name} {value} does not fit the short of a ROCKETMQ header")
        language = LanguageCode.get_code(self.language) if self.language is not None else None
        if language is None:
            raise ValueError(f"language {self.language!r} has no ROCKETMQ header byte")
        out = bytearray(_BIN_FIXED.pack(self.code, language, self.version, self.opaque, self.flag))
        remark = self.remark.encode("utf-8", "replace") if self.remark else b""
        out += len(remark).to_bytes(4, "big") + remark
        entries = bytearray()
        for key, value in (ext or {}).items():
            k = key.encode("utf-8", "replace")
            v = value.encode("utf-8", "replace")
            if len(k) > INT16_MAX:
                raise ValueError(f"extFields key of {len(k)} bytes does not fit a short length")
            entries += len(k).to_bytes(2, "big") + k + len(v).to_bytes(4, "big") + v
        out += len(entries).to_bytes(4, "big") + entries
        return bytes(out)

    def _encode_header(self, ext: dict[str, str] | None) -> bytes:
        for name in _HEADER_INTS:
            value = getattr(self, name)
            if type(value) is not int or not INT32_MIN <= value <= INT32_MAX:
                raise ValueError(f"{name} {value!r} is not a Java int")
        if self.serialize_type == SerializeType.ROCKETMQ:
            return self._rocketmq_header(ext)
        return self._json_header(ext)

    def encode_header(self) -> bytes:
        """The header bytes alone, in ``serialize_type``."""
        return self._encode_header(self.wire_ext_fields())

    def encode_frame(self) -> tuple[bytes, dict[str, str] | None]:
        """The frame and the extFields it carries (:meth:`wire_ext_fields`), for a caller that
        reports what it sent without converting the values twice."""
        ext = self.wire_ext_fields()
        header = self._encode_header(ext)
        body = self.body or b""
        prefix = struct.pack(">ii", 4 + len(header) + len(body), mark_protocol_type(len(header), self.serialize_type))
        return b"".join((prefix, header, body)), ext

    def encode(self) -> bytes:
        """The whole frame: length, header info, header, body (``RemotingCommand.encode``)."""
        return self.encode_frame()[0]

    # -- decoding -------------------------------------------------------------------------------
    @classmethod
    def decode(cls, frame: bytes | bytearray | memoryview) -> RemotingCommand:
        """A command from one frame without its length prefix (what ``NettyDecoder`` hands to
        ``RemotingCommand.decode``); :class:`FrameError` says what is wrong with bad bytes."""
        with memoryview(frame) as view:
            return cls.decode_from(view.cast("B"), 0, view.nbytes)

    @classmethod
    def decode_from(cls, view: memoryview, start: int, end: int) -> RemotingCommand:
        """:meth:`decode` of the frame at ``view[start:end]`` (length prefix excluded), copying
        the header and the body out of ``view`` once each (the frame decoder's path: no copy of
        the whole frame first)."""
        size = end - start
        if size < 4:
            raise FrameError(f"frame of {size} bytes has no header-info int")
        info = _INT32.unpack_from(view, start)[0]
        header_length = info & 0xFFFFFF
        if header_length > size - 4:
            # RocketMQ's text: "decode error, bad header length: N".
            raise FrameError(f"bad header length: {header_length} (frame holds {size - 4} bytes "
                             "after the header info)")
        serialize_type = (info >> 24) & 0xFF
        header = bytes(view[start + 4:start + 4 + header_length])
        if serialize_type == SerializeType.JSON:
            cmd = _decode_json_header(header)
        elif serialize_type == SerializeType.ROCKETMQ:
            cmd = _decode_rocketmq_header(header)
        else:
            raise FrameError(f"unknown serialize type {serialize_type}")
        body_start = start + 4 + header_length
        # Java leaves body null when there is none.
        cmd.body = bytes(view[body_start:end]) if end > body_start else None
        cmd.frame_size = size + 4
        return cmd

    # -- plumbing ---------------------------------------------------------------------------------
    def __eq__(self, other: object) -> bool:
        if not isinstance(other, RemotingCommand):
            return NotImplemented
        return all(getattr(self, s) == getattr(other, s) for s in self.__slots__ if s != "frame_size")

    __hash__ = None  # type: ignore[assignment]  # mutable

    def __repr__(self) -> str:
        return (f"RemotingCommand [code={self.code}, language={self.language}, version={self.version}, "
                f"opaque={self.opaque}, flag(B)={self.flag:b}, remark={self.remark}, "
                f"extFields={self.ext_fields}, serializeTypeCurrentRPC={self.serialize_type.name}, "
                f"body={len(self.body) if self.body else 0} bytes]")


create_request_command = RemotingCommand.create_request_command
create_response_command = RemotingCommand.create_response_command
