"""The JSON header's fast writer (rmqlab.remoting.remoting_command.fastjson_bytes: orjson where it
writes fastjson's bytes) against the character-by-character fastjson writer, on whole headers:
what real Java, C++ and Go clients read must not change by a byte."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import rmqlab.remoting.remoting_command as remoting_command
from rmqlab.remoting import RemotingCommand
from rmqlab.remoting.exceptions import FrameError
from rmqlab.remoting.remoting_command import _fastjson_text, fastjson_bytes

_text = st.one_of(
    st.text(max_size=24),
    st.text(alphabet="\x00\x08\x09\x0a\x0b\x0c\x0d\x0e\x1a\x1f\x7f\x80\x85\x9f\xa0\u2028\u2029\ud800\udfff"
                     "\"\\/aZ09é中😀", max_size=24),
    st.text(alphabet="abcXYZ0123456789_-.:;=,|\x01\x02", max_size=60),  # the usual: ASCII, property separators
)
_ints = st.one_of(st.integers(-2 ** 31, 2 ** 31 - 1), st.integers(-2 ** 63, 2 ** 63 - 1))


def expected(obj: dict) -> bytes:
    return _fastjson_text(obj).encode("utf-8", "replace")


@settings(max_examples=500, deadline=None)
@given(code=_ints, flag=_ints, opaque=_ints, version=_ints, remark=st.one_of(st.none(), _text),
       language=st.one_of(st.none(), st.sampled_from(["JAVA", "CPP", "GO", "PYTHON"]), _text),
       ext=st.one_of(st.none(), st.dictionaries(_text, _text, max_size=8)))
def test_fast_header_writer_gives_fastjson_s_bytes(code, flag, opaque, version, remark, language, ext):
    obj: dict = {"code": code}
    if ext is not None:
        obj["extFields"] = ext
    obj["flag"] = flag
    if language is not None:
        obj["language"] = language
    obj["opaque"] = opaque
    if remark is not None:
        obj["remark"] = remark
    obj["serializeTypeCurrentRPC"] = "JSON"
    obj["version"] = version
    assert fastjson_bytes(obj) == expected(obj)


def test_header_bytes_of_commands_with_every_escape():
    assert remoting_command._ORJSON_DUMPS is not None  # orjson is a dependency: the fast road is taken
    for remark in (None, "", "plain", 'a"b\\c/d\b\t\n\f\r', "\x00\x07\x0b\x0e\x1f", "\x7f", "\x9f", "é",
                   "\u2028", "\ud800 lone", "😀"):
        cmd = RemotingCommand(310, remark=remark, ext_fields={"topic": "T", "queueId": 3,
                                                                                 "unitMode": False})
        cmd.opaque = 2 ** 31 - 1
        ext = cmd.wire_ext_fields()
        obj = {"code": 310, "extFields": ext, "flag": 0, "language": "JAVA", "opaque": 2 ** 31 - 1}
        if remark is not None:
            obj["remark"] = remark
        obj.update(serializeTypeCurrentRPC="JSON", version=0)
        assert cmd.encode_header() == expected(obj), remark


def _decoded(data: bytes):
    """What _decode_json_header makes of `data`: the command's fields, or the FrameError's text."""
    try:
        cmd = remoting_command._decode_json_header(data)
    except FrameError as e:
        return ("error", str(e))
    return (cmd.code, cmd.language, cmd.version, cmd.opaque, cmd.flag, cmd.remark,
            None if cmd.ext_fields is None else list(cmd.ext_fields.items()),
            None if cmd.ext_fields is None else [type(v) for v in cmd.ext_fields.values()])


def _both_decoders(data: bytes) -> tuple:
    fast = _decoded(data)
    with pytest.MonkeyPatch.context() as m:
        m.setattr(remoting_command, "_ORJSON_LOADS", None)  # the json module alone
        slow = _decoded(data)
    return fast, slow


_json_scalars = st.one_of(st.none(), st.booleans(), st.integers(-2 ** 70, 2 ** 70), _text,
                          st.floats(allow_nan=False, allow_infinity=False))
_json_values = st.recursive(_json_scalars, lambda inner: st.one_of(st.lists(inner, max_size=3),
                                                                   st.dictionaries(_text, inner, max_size=3)),
                            max_leaves=6)


@settings(max_examples=500, deadline=None)
@given(top=st.dictionaries(st.sampled_from(["code", "flag", "opaque", "version", "remark", "language",
                                            "extFields", "serializeTypeCurrentRPC", "other"]),
                           st.one_of(_json_values, st.dictionaries(_text, _json_scalars, max_size=6)), max_size=9),
       cut=st.integers(0, 3), junk=st.sampled_from(["", " ", "x", "}", ",", "\\ud800", '"\\udc00"', "NaN", "1.5"]))
def test_orjson_and_the_json_module_decode_headers_alike(top, cut, junk):
    import json

    text = json.dumps(top, ensure_ascii=bool(cut & 1))
    variants = [text, text[:-1] + junk + "}" if text.endswith("}") else text + junk,
                text.replace(":", ": ", 1), text.replace('"', '"\\u0041', 1)]
    for variant in variants:
        try:
            data = variant.encode("utf-8")
        except UnicodeEncodeError:
            continue  # a lone surrogate cannot be on the wire as UTF-8
        fast, slow = _both_decoders(data)
        assert fast == slow, variant


def test_headers_rmqlab_and_java_send_decode_alike():
    cmd = RemotingCommand(310, remark="r", ext_fields={"topic": "T", "queueId": 3, "properties": "a\x01b\x02",
                                                        "unitMode": False})
    cmd.opaque = 9
    header = cmd.encode_header()
    fast, slow = _both_decoders(header)
    assert fast == slow and fast[0] == 310 and fast[6][0] == ("queueId", "3")
    for text in ['{"code":0,"extFields":{"queueId":0,"sysFlag":6,"x":true,"y":null},"flag":0}',  # the C++ client
                 '{"code":1,"flag":0,"opaque":1e3}', '{"code":1,"opaque":18446744073709551616}',
                 '{"code":1,"extFields":{"a":"\\ud800"}}', '{"code":1,"extFields":{"a":1.25}}',
                 '{"code":1,"extFields":{"a":[1]}}', '{"code":1,"remark":{"a":1}}', '[1]', '{"code":NaN}']:
        fast, slow = _both_decoders(text.encode())
        assert fast == slow, text
