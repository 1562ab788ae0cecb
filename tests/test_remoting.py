"""Remoting protocol tests (RocketMQ's RemotingCommand, and what the C++ client sends).

Fixtures are assembled by hand with struct from the layouts of RocketMQ's RemotingCommand
(RemotingSerializable, RocketMQSerializable), independently of the encoder. Constants marked "JVM"
were printed by OpenJDK 17 (HashMap key order, RocketMQ's remark text). The header the C++ client
sends is spelled as jsoncpp's FastWriter writes it: keys sorted, no spaces, a newline at the end,
control characters as \\u00XX.

Server and client tests run on the real runtime (RealNode, 127.0.0.1, port 0) and are bounded in
time: every test body runs under a deadline and closes what it opened.
"""

from __future__ import annotations

import asyncio
import json
import struct

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rmqlab.common.java_compat import java_hash_map_order
from rmqlab.remoting import (FRAME_MAX_LENGTH, FrameDecoder, FrameError, LanguageCode, RemotingClient, RemotingCommand,
                             RemotingCommandError, RemotingConnectError, RemotingServer, RemotingTimeoutError,
                             RequestCode, ResponseCode, SerializeType, create_request_command, create_response_command,
                             get_request_code_desc, get_response_code_desc)
from rmqlab.remoting.remoting_command import _fastjson_text, fastjson_text
from rmqlab.remoting.remoting_helper import exception_simple_desc, string_to_address
from rmqlab.runtime.real import RealNode


def frame(header: bytes, body: bytes = b"", serialize_type: int = 0) -> bytes:
    """A frame from its parts, as RemotingCommand.encode lays it out."""
    return struct.pack(">ii", 4 + len(header) + len(body), (serialize_type << 24) | len(header)) + header + body


# ---------------------------------------------------------------------------------------------
# Golden bytes: a SEND_MESSAGE request as the C++ client (rocketmq 0.4.4) writes it: header fields
# as its SendMessageRequestHeader::Encode sets them (ints for defaultTopicQueueNums, queueId,
# sysFlag and flag; everything else strings, its bools as "0"/"1"), plus the three credential
# fields it always adds. The opaque and version values are illustrative.

CPP_PROPERTIES = "KEYS\x01k1\x02TAGS\x01TagA\x02WAIT\x01true\x02"
CPP_SEND_HEADER = (
    b'{"code":10,"extFields":{"AccessKey":"","OnsChannel":"ALIYUN","Signature":"",'
    b'"batch":"0","bornTimestamp":"1700000000123","defaultTopic":"TBW102","defaultTopicQueueNums":4,'
    b'"flag":0,"producerGroup":"PID_TEST","properties":"KEYS\\u0001k1\\u0002TAGS\\u0001TagA\\u0002'
    b'WAIT\\u0001true\\u0002","queueId":1,"reconsumeTimes":"0","sysFlag":0,"topic":"TopicTest",'
    b'"unitMode":"0"},"flag":0,"language":"CPP","opaque":17,"remark":"","version":317}\n'
)
CPP_SEND_BODY = b"Hello RocketMQ"
CPP_SEND_FRAME = frame(CPP_SEND_HEADER, CPP_SEND_BODY)


def test_cpp_send_message_golden_bytes_decode():
    [cmd] = FrameDecoder().feed(CPP_SEND_FRAME)
    assert (cmd.code, cmd.language, cmd.version, cmd.opaque, cmd.flag, cmd.remark) == (10, "CPP", 317, 17, 0, "")
    assert cmd.serialize_type is SerializeType.JSON
    assert not cmd.is_response_type() and not cmd.is_oneway_rpc()
    assert cmd.body == CPP_SEND_BODY
    assert cmd.frame_size == len(CPP_SEND_FRAME)
    # Mixed JSON types are kept as they arrived ...
    assert cmd.ext_fields["queueId"] == 1 and cmd.ext_fields["bornTimestamp"] == "1700000000123"
    # ... and the typed readers accept both spellings.
    assert cmd.ext_int("queueId") == 1
    assert cmd.ext_int("defaultTopicQueueNums") == 4
    assert cmd.ext_int("sysFlag") == 0
    assert cmd.ext_long("bornTimestamp") == 1_700_000_000_123
    assert cmd.ext_int("reconsumeTimes") == 0
    assert cmd.ext_bool("unitMode") is False and cmd.ext_bool("batch") is False
    assert cmd.ext_str("queueId") == "1"
    assert cmd.ext_str("properties") == CPP_PROPERTIES
    assert cmd.ext_str("OnsChannel") == "ALIYUN"
    assert cmd.ext_str("producerGroup") == "PID_TEST" and cmd.ext_str("topic") == "TopicTest"


def test_golden_frame_fed_byte_by_byte_completes_only_at_the_last_byte():
    decoder = FrameDecoder()
    for b in CPP_SEND_FRAME[:-1]:
        assert decoder.feed(bytes([b])) == []
    assert decoder.buffered == len(CPP_SEND_FRAME) - 1
    [cmd] = decoder.feed(CPP_SEND_FRAME[-1:])
    assert cmd.body == CPP_SEND_BODY and decoder.buffered == 0


# ---------------------------------------------------------------------------------------------
# Golden bytes: a SEND_MESSAGE response as a Java broker writes it (fastjson, HashMap order)

JAVA_SEND_RESPONSE_HEADER = (
    # JVM: new HashMap<>() with these five keys iterates queueId,TRACE_ON,MSG_REGION,msgId,queueOffset
    b'{"code":0,"extFields":{"queueId":"1","TRACE_ON":"true","MSG_REGION":"DefaultRegion",'
    b'"msgId":"7F00000100002A9F0000000000000000","queueOffset":"42"},"flag":1,"language":"JAVA",'
    b'"opaque":17,"serializeTypeCurrentRPC":"JSON","version":0}'
)


def test_response_encodes_ext_fields_as_strings_in_java_order():
    response = create_response_command(ResponseCode.SUCCESS, None, {
        "msgId": "7F00000100002A9F0000000000000000", "queueId": 1, "queueOffset": 42,
        "MSG_REGION": "DefaultRegion", "TRACE_ON": True})
    response.opaque = 17
    assert response.encode() == frame(JAVA_SEND_RESPONSE_HEADER)
    # What the C++ client needs: every value a JSON string.
    values = json.loads(JAVA_SEND_RESPONSE_HEADER)["extFields"].values()
    assert all(isinstance(v, str) for v in values)


def test_request_json_header_key_order_and_null_fields():
    cmd = create_request_command(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": "TopicTest"})
    cmd.opaque = 3
    assert cmd.encode_header() == (b'{"code":105,"extFields":{"topic":"TopicTest"},"flag":0,"language":"JAVA",'
                                   b'"opaque":3,"serializeTypeCurrentRPC":"JSON","version":0}')
    # fastjson leaves null properties out; an empty map or string is written.
    bare = RemotingCommand(34)
    assert bare.encode_header() == (b'{"code":34,"flag":0,"language":"JAVA","opaque":0,'
                                    b'"serializeTypeCurrentRPC":"JSON","version":0}')
    empty = RemotingCommand(34, remark="", ext_fields={})
    assert b'"extFields":{}' in empty.encode_header() and b'"remark":""' in empty.encode_header()


def test_fastjson_string_escapes():
    remark = 'a"b\\c/d\b\t\n\f\r\x00\x07\x0b\x0e\x1f\x7f\x9f\xa0é\u2028\u2029😀'
    cmd = RemotingCommand(1, remark=remark)
    header = cmd.encode_header()
    expected = ('"remark":"a\\"b\\\\c/d\\b\\t\\n\\f\\r\\u0000\\u0007\\u000B\\u000E\\u001F\\u007F\\u009F'
                '\xa0é\\u2028\\u2029😀"').encode()
    assert expected in header
    assert RemotingCommand.decode(cmd.encode()[4:]).remark == remark


_tricky_text = st.one_of(st.text(max_size=20),
                         st.text(alphabet="\x00\x08\x0b\x0e\x1a\x1f\x7f\x85\x9f\xa0\u2028\u2029\"\\/aé😀",
                                 max_size=20))


@settings(max_examples=300, deadline=None)
@given(st.dictionaries(_tricky_text, st.one_of(_tricky_text, st.integers(-2 ** 63, 2 ** 63 - 1)), max_size=6))
def test_fast_json_writer_agrees_with_the_fastjson_rules(obj):
    # The C-encoder shortcut must give exactly what the character-by-character writer gives.
    assert fastjson_text(obj) == _fastjson_text(obj)
    assert json.loads(fastjson_text(obj)) == obj


# JVM: HashMap iteration order of these key lists, for new HashMap<>() and new HashMap<>(256).
JVM_ORDERS = [
    (["msgId", "queueId", "queueOffset", "transactionId", "MSG_REGION", "TRACE_ON"],
     "queueId,TRACE_ON,MSG_REGION,msgId,queueOffset,transactionId",
     "queueId,transactionId,msgId,TRACE_ON,MSG_REGION,queueOffset"),
    (["nextBeginOffset", "minOffset", "maxOffset", "suggestWhichBrokerId", "offset"],
     "suggestWhichBrokerId,offset,nextBeginOffset,maxOffset,minOffset",
     "suggestWhichBrokerId,minOffset,offset,nextBeginOffset,maxOffset"),
    (["producerGroup", "topic", "defaultTopic", "defaultTopicQueueNums", "queueId", "sysFlag", "bornTimestamp",
      "flag", "properties", "reconsumeTimes", "unitMode", "batch", "maxReconsumeTimes", "brokerName"],
     "queueId,flag,sysFlag,reconsumeTimes,batch,unitMode,defaultTopic,defaultTopicQueueNums,producerGroup,"
     "maxReconsumeTimes,topic,brokerName,bornTimestamp,properties",
     "queueId,defaultTopicQueueNums,producerGroup,brokerName,flag,sysFlag,maxReconsumeTimes,bornTimestamp,batch,"
     "topic,unitMode,defaultTopic,reconsumeTimes,properties"),
    (list("abcdefghijklmn"), "a,b,c,d,e,f,g,h,i,j,k,l,m,n", "a,b,c,d,e,f,g,h,i,j,k,l,m,n"),
]


@pytest.mark.parametrize("keys,default_order,order_256", JVM_ORDERS)
def test_java_hash_map_order_matches_the_jvm(keys, default_order, order_256):
    assert ",".join(java_hash_map_order(keys)) == default_order
    assert ",".join(java_hash_map_order(keys, 256)) == order_256


# ---------------------------------------------------------------------------------------------
# ROCKETMQ binary header

def binary_header(code, language, version, opaque, flag, remark: bytes, entries: list[tuple[bytes, bytes]]) -> bytes:
    ext = b"".join(struct.pack(">h", len(k)) + k + struct.pack(">i", len(v)) + v for k, v in entries)
    return (struct.pack(">hbhii", code, language, version, opaque, flag) + struct.pack(">i", len(remark)) + remark
            + struct.pack(">i", len(ext)) + ext)


def test_rocketmq_binary_header_hand_built_fixture():
    header = binary_header(105, 1, 399, 7, 2, b"r\xc3\xa9mark", [(b"topic", b"TopicTest")])
    data = frame(header, b"\x01\x02", serialize_type=1)
    [cmd] = FrameDecoder().feed(data)
    assert (cmd.code, cmd.language, cmd.version, cmd.opaque, cmd.flag) == (105, "CPP", 399, 7, 2)
    assert cmd.remark == "rémark" and cmd.ext_fields == {"topic": "TopicTest"} and cmd.body == b"\x01\x02"
    assert cmd.is_oneway_rpc() and cmd.serialize_type is SerializeType.ROCKETMQ
    assert cmd.encode() == data


def test_rocketmq_binary_header_java_quirks():
    # An empty string is written with length 0 and read back as null (absent), as Java does.
    header = binary_header(-2, 99, -1, -5, 1, b"", [(b"gone", b""), (b"", b"orphan"), (b"kept", b"v")])
    cmd = RemotingCommand.decode(frame(header, serialize_type=1)[4:])
    assert cmd.code == -2 and cmd.version == -1 and cmd.opaque == -5  # shorts and ints are signed
    assert cmd.language is None  # LanguageCode.valueOf(99) is null
    assert cmd.remark is None and cmd.ext_fields == {"kept": "v"}
    assert cmd.body is None
    with pytest.raises(ValueError, match="no ROCKETMQ header byte"):
        cmd.encode()
    too_big = RemotingCommand(RequestCode.POP_MESSAGE, serialize_type=SerializeType.ROCKETMQ)
    with pytest.raises(ValueError, match="short"):
        too_big.encode()


@pytest.mark.parametrize("header,reason", [
    (struct.pack(">hbhii", 1, 0, 0, 0, 0), "shorter than its fixed part"),
    (struct.pack(">hbhiii", 1, 0, 0, 0, 0, -1) + struct.pack(">i", 0), "remark length -1"),
    (struct.pack(">hbhiii", 1, 0, 0, 0, 0, 50) + struct.pack(">i", 0), "remark length 50"),
    (struct.pack(">hbhiii", 1, 0, 0, 0, 0, 0) + struct.pack(">i", -3), "extFields length -3"),
    (struct.pack(">hbhiii", 1, 0, 0, 0, 0, 0) + struct.pack(">i", 9) + b"\x00\x01k\x00\x00\x00\x01v",
     "extFields length 9"),
    (struct.pack(">hbhiii", 1, 0, 0, 0, 0, 0) + struct.pack(">i", 8) + b"\x00\x01k\x00\x00\x00\x05vvvvv",
     "value length 5"),
    (binary_header(1, 0, 0, 0, 0, b"", [(b"k", b"v")]) + b"xx", "2 bytes after the extFields"),
    (binary_header(1, 0, 0, 0, 0, b"\xff", []), "remark is not valid UTF-8"),
])
def test_rocketmq_binary_header_errors(header, reason):
    with pytest.raises(FrameError, match=reason):
        RemotingCommand.decode(frame(header, serialize_type=1)[4:])


# ---------------------------------------------------------------------------------------------
# JSON header errors and typed readers

def decode_json(header: bytes) -> RemotingCommand:
    return RemotingCommand.decode(frame(header)[4:])


@pytest.mark.parametrize("header,reason", [
    (b'{"code":"10"}', "code must be an integer"),
    (b'{"code":true}', "code must be an integer"),
    (b'{"code":1.5}', "code must be an integer"),
    (b'{"code":2147483648}', "does not fit a Java int"),
    (b'{"opaque":[1]}', "opaque must be an integer"),
    (b'{"code":1,"extFields":[]}', "extFields must be an object"),
    (b'{"code":1,"extFields":{"a":{"b":1}}}', "extFields <a> must be a string, number or boolean"),
    (b'{"code":1,"remark":5}', "remark must be a string"),
    (b'{"code":1,"language":0}', "language must be a string"),
    (b'[1,2]', "must be an object"),
    (b'{"code":1', "not valid JSON"),
    (b'{"code":NaN}', "not valid JSON"),
    (b'{"code":1,"remark":"\xff"}', "not valid UTF-8"),
    (b'{"code":1,"remark":"\\ud800"}', "lone surrogate"),
    (b'{"code":' + b"1" * 5000 + b"}", "not valid JSON"),
    (b"[" * 100000, "nested too deeply|not valid JSON"),
    (b"", "not valid JSON"),
])
def test_json_header_errors(header, reason):
    with pytest.raises(FrameError, match=reason):
        decode_json(header)


def test_json_header_leniency_java_shares():
    # Missing fields take Java's defaults, unknown keys are ignored, null extFields values are absent.
    cmd = decode_json(b' {"extra":{"x":[1]},"extFields":{"a":null,"b":"1","c":1.50,"d":false}} \n')
    assert (cmd.code, cmd.language, cmd.version, cmd.opaque, cmd.flag, cmd.remark) == (0, "JAVA", 0, 0, 0, None)
    assert cmd.ext_fields == {"b": "1", "c": "1.50", "d": False}  # a fraction is kept as its text
    assert decode_json(b'{"language":"KOTLIN"}').language == "KOTLIN"
    assert decode_json(b'{"language":null}').language is None


def test_typed_ext_readers():
    cmd = RemotingCommand(11, ext_fields={
        "i": 7, "s": "-12", "big": "9223372036854775807", "bad": "1.0", "ws": " 1", "t": True, "f": "FALSE",
        "zero": "0", "one": 1, "two": 2, "word": "yes", "none": None, "over": 2 ** 31})
    assert cmd.ext_int("i") == 7 and cmd.ext_int("s") == -12 and cmd.ext_long("big") == 2 ** 63 - 1
    assert cmd.ext_bool("t") is True and cmd.ext_bool("f") is False
    assert cmd.ext_bool("zero") is False and cmd.ext_bool("one") is True
    assert cmd.ext_str("t") == "true" and cmd.ext_str("i") == "7"
    assert cmd.ext_int("missing", -1) == -1 and cmd.ext_str("none", None) is None
    assert cmd.ext_long("over") == 2 ** 31
    for reader, name in [(cmd.ext_int, "big"), (cmd.ext_int, "bad"), (cmd.ext_int, "ws"), (cmd.ext_int, "t"),
                         (cmd.ext_int, "over"), (cmd.ext_bool, "two"), (cmd.ext_bool, "word"),
                         (cmd.ext_long, "bad")]:
        with pytest.raises(RemotingCommandError, match=f"<{name}>"):
            reader(name)
    with pytest.raises(RemotingCommandError, match="the custom field <missing> is null"):
        cmd.ext_int("missing")
    with pytest.raises(RemotingCommandError, match="the custom field <none> is null"):
        cmd.ext_str("none")
    with pytest.raises(ValueError, match="<x>"):
        RemotingCommand(1, ext_fields={"x": 1.5}).encode()


def test_flags_factories_and_code_names():
    req = create_request_command(RequestCode.PULL_MESSAGE, {"queueId": 0})
    assert req.flag == 0 and not req.is_response_type()
    req.mark_oneway_rpc()
    assert req.flag == 2 and req.is_oneway_rpc() and not req.is_response_type()
    resp = create_response_command(ResponseCode.PULL_NOT_FOUND, "no new message")
    assert resp.flag == 1 and resp.is_response_type() and resp.remark == "no new message"
    assert get_request_code_desc(105) == "GET_ROUTEINFO_BY_TOPIC" and get_request_code_desc(4242) == "4242"
    assert get_response_code_desc(17) == "TOPIC_NOT_EXIST" and get_response_code_desc(3) == "REQUEST_CODE_NOT_SUPPORTED"
    # Codes the name server, broker and controller work (RequestCode.java, ResponseCode.java).
    assert (RequestCode.SEND_MESSAGE, RequestCode.HEART_BEAT, RequestCode.UNREGISTER_CLIENT,
            RequestCode.GET_CONSUMER_LIST_BY_GROUP, RequestCode.GET_MAX_OFFSET, RequestCode.SEND_MESSAGE_V2,
            RequestCode.BROKER_HEARTBEAT, RequestCode.CONTROLLER_APPLY_BROKER_ID,
            RequestCode.RAFT_BROKER_HEART_BEAT_EVENT_REQUEST) == (10, 34, 35, 38, 30, 310, 904, 1013, 1018)
    assert (ResponseCode.TOPIC_NOT_EXIST, ResponseCode.PULL_NOT_FOUND, ResponseCode.PULL_RETRY_IMMEDIATELY,
            ResponseCode.PULL_OFFSET_MOVED, ResponseCode.QUERY_NOT_FOUND, ResponseCode.SUBSCRIPTION_PARSE_FAILED,
            ResponseCode.CONTROLLER_BROKER_LIVE_INFO_NOT_EXISTS) == (17, 19, 20, 21, 22, 23, 2016)
    assert LanguageCode.value_of(1) is LanguageCode.CPP and LanguageCode.value_of(200) is None


def test_helpers():
    assert string_to_address("127.0.0.1:9876") == ("127.0.0.1", 9876)
    assert string_to_address("[::1]:10911") == ("::1", 10911)
    for bad in ("nohost", ":1", "h:", "h:0", "h:70000", "h:x"):
        with pytest.raises(ValueError):
            string_to_address(bad)
    try:
        raise KeyError("topic")
    except KeyError as e:
        assert exception_simple_desc(e).startswith("KeyError: 'topic', test_helpers(test_remoting.py:")


# ---------------------------------------------------------------------------------------------
# Round trip (hypothesis)

_text = st.text(max_size=12)
_ext_values = st.one_of(_text, st.integers(-2 ** 63, 2 ** 63 - 1), st.booleans(), st.none())


@st.composite
def commands(draw):
    serialize_type = draw(st.sampled_from(SerializeType))
    short = st.integers(-2 ** 15, 2 ** 15 - 1)
    int32 = st.integers(-2 ** 31, 2 ** 31 - 1)
    binary = serialize_type is SerializeType.ROCKETMQ
    return RemotingCommand(
        draw(short if binary else int32),
        language=draw(st.sampled_from([lc.name for lc in LanguageCode]) if binary
                      else st.one_of(st.none(), _text)),
        version=draw(short if binary else int32), opaque=draw(int32), flag=draw(int32),
        remark=draw(st.one_of(st.none(), st.text(max_size=40))),
        ext_fields=draw(st.one_of(st.none(), st.dictionaries(_text, _ext_values, max_size=8))),
        body=draw(st.one_of(st.none(), st.binary(min_size=1, max_size=64))),
        serialize_type=serialize_type)


def expected_after_round_trip(cmd: RemotingCommand) -> RemotingCommand:
    """What decoding the encoded command must give: values as strings, null values absent; a null
    language is left out of the JSON and so reads back as JAVA, Java's default; in a binary header
    an empty string is null too (Java's readStr)."""
    binary = cmd.serialize_type is SerializeType.ROCKETMQ
    ext = None
    if cmd.ext_fields is not None:
        ext = {k: ("true" if v is True else "false" if v is False else str(v))
               for k, v in cmd.ext_fields.items() if v is not None}
        if binary:
            # An empty map writes no extFields bytes and reads back as none at all.
            ext = {k: v for k, v in ext.items() if k and v} if ext else None
    remark = (cmd.remark or None) if binary else cmd.remark
    language = cmd.language if binary or cmd.language is not None else "JAVA"
    return RemotingCommand(cmd.code, language=language, version=cmd.version, opaque=cmd.opaque, flag=cmd.flag,
                           remark=remark, ext_fields=ext, body=cmd.body, serialize_type=cmd.serialize_type)


@settings(max_examples=300, deadline=None)
@given(commands())
def test_encode_decode_round_trip(cmd):
    data = cmd.encode()
    assert struct.unpack(">i", data[:4])[0] == len(data) - 4
    decoded = RemotingCommand.decode(data[4:])
    assert decoded == expected_after_round_trip(cmd)
    assert decoded.frame_size == len(data)
    if cmd.serialize_type is SerializeType.JSON and cmd.language is not None:
        # A second encode gives the same bytes: the order comes from the keys alone.
        assert decoded.encode() == data


# ---------------------------------------------------------------------------------------------
# Frame decoder fuzzing

def check_framing(data: bytes, commands: list[RemotingCommand]) -> None:
    """Every command returned sits at a frame boundary of `data` with the length its prefix declares."""
    pos = 0
    for cmd in commands:
        assert pos + 4 <= len(data)
        length = struct.unpack(">i", data[pos:pos + 4])[0]
        assert 4 <= length and length + 4 <= FRAME_MAX_LENGTH
        assert cmd.frame_size == length + 4
        pos += length + 4
        assert pos <= len(data)


def feed_chunks(data: bytes, cuts: list[int]) -> tuple[list[RemotingCommand], FrameError | None]:
    decoder = FrameDecoder()
    out: list[RemotingCommand] = []
    bounds = sorted({min(c, len(data)) for c in cuts} | {0, len(data)})
    for a, b in zip(bounds, bounds[1:]):
        try:
            out += decoder.feed(data[a:b])
        except FrameError as e:
            out += e.commands
            # A failed decoder stays failed.
            with pytest.raises(FrameError):
                decoder.feed(b"\x00\x00\x00\x08")
            return out, e
    return out, None


_FUZZ = settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
_cuts = st.lists(st.integers(0, 400), max_size=8)


@_FUZZ
@given(st.binary(max_size=300), _cuts)
def test_fuzz_random_bytes(data, cuts):
    commands, _ = feed_chunks(data, cuts)  # anything but FrameError propagates and fails the test
    check_framing(data, commands)


def valid_stream(cmds: list[RemotingCommand]) -> bytes:
    return b"".join(c.encode() for c in cmds)


@_FUZZ
@given(st.lists(commands(), min_size=1, max_size=4), st.data())
def test_fuzz_truncation_yields_only_complete_frames(cmds, data):
    stream = valid_stream(cmds)
    cut = data.draw(st.integers(0, len(stream)))
    decoder = FrameDecoder()
    got = decoder.feed(stream[:cut])
    ends = []
    pos = 0
    for c in cmds:
        pos += len(c.encode())
        ends.append(pos)
    complete = sum(1 for e in ends if e <= cut)
    assert got == [expected_after_round_trip(c) for c in cmds[:complete]]
    assert decoder.buffered == cut - (ends[complete - 1] if complete else 0)
    # The rest completes the others, with nothing lost or repeated.
    assert decoder.feed(stream[cut:]) == [expected_after_round_trip(c) for c in cmds[complete:]]
    assert decoder.buffered == 0


@_FUZZ
@given(st.lists(commands(), min_size=1, max_size=4), _cuts)
def test_fuzz_chunking_does_not_matter(cmds, cuts):
    stream = valid_stream(cmds)
    commands, error = feed_chunks(stream, cuts)
    assert error is None
    assert commands == [expected_after_round_trip(c) for c in cmds]


@_FUZZ
@given(st.lists(commands(), min_size=1, max_size=3), st.data(), _cuts)
def test_fuzz_mutated_frames(cmds, data, cuts):
    stream = bytearray(valid_stream(cmds))
    for _ in range(data.draw(st.integers(1, 4))):
        op = data.draw(st.sampled_from(["flip", "set", "insert", "delete"]))
        i = data.draw(st.integers(0, len(stream)))
        if op == "insert":
            stream[i:i] = data.draw(st.binary(min_size=1, max_size=6))
        elif stream and i < len(stream):
            if op == "flip":
                stream[i] ^= 1 << data.draw(st.integers(0, 7))
            elif op == "set":
                stream[i] = data.draw(st.integers(0, 255))
            else:
                del stream[i:i + data.draw(st.integers(1, 6))]
    stream = bytes(stream)
    commands, _ = feed_chunks(stream, cuts)
    check_framing(stream, commands)


@pytest.mark.parametrize("prefix,reason", [
    (struct.pack(">i", 3), "below 4"),
    (struct.pack(">i", -1), "below 4"),
    (struct.pack(">i", FRAME_MAX_LENGTH - 3), "exceeds"),
    (struct.pack(">ii", 8, 5) + b"{}  ", "bad header length: 5"),
    (struct.pack(">ii", 8, (2 << 24) | 4) + b"{}  ", "unknown serialize type 2"),
])
def test_frame_decoder_errors(prefix, reason):
    """A bad length prefix fails at once (an oversized frame is never buffered); the rest once
    the frame is complete, as in Netty."""
    with pytest.raises(FrameError, match=reason):
        FrameDecoder().feed(prefix)


def test_frame_decoder_limit_and_commands_before_a_bad_frame():
    # The largest frame Netty accepts (16777216 bytes with the prefix) passes the length check.
    assert FrameDecoder().feed(struct.pack(">i", FRAME_MAX_LENGTH - 4)) == []
    good = create_request_command(34).encode()
    with pytest.raises(FrameError) as info:
        FrameDecoder().feed(good + good + struct.pack(">ii", 5, 0) + b"x")
    assert len(info.value.commands) == 2 and "not valid JSON" in info.value.reason


# ---------------------------------------------------------------------------------------------
# Server and client on the real runtime

DEADLINE_S = 20


class Net:
    """A server node with a RemotingServer and a client node with a RemotingClient."""

    def __init__(self, tmp_path):
        self.server_node = RealNode("server", str(tmp_path / "server"))
        self.client_node = RealNode("client", str(tmp_path / "client"))
        self.server = RemotingServer(self.server_node, "127.0.0.1", 0)
        self.client = RemotingClient(self.client_node)
        self.extra: list[RemotingClient] = []

    @property
    def addr(self) -> str:
        return f"127.0.0.1:{self.server.port}"

    def new_client(self) -> RemotingClient:
        client = RemotingClient(self.client_node)
        self.extra.append(client)
        return client

    async def raw_connection(self):
        return await self.client_node.connect("127.0.0.1", self.server.port)

    async def close(self) -> None:
        for client in [self.client, *self.extra]:
            await client.shutdown()
        await self.server.shutdown()
        await self.client_node.close()
        await self.server_node.close()

    def events(self, node: RealNode, kind: str) -> list[dict]:
        return [e.fields for e in node.tracer.events if e.kind == kind]


def run_net(tmp_path, body) -> None:
    async def main():
        net = Net(tmp_path)
        await net.server.start()
        try:
            await body(net)
        finally:
            await net.close()
    asyncio.run(asyncio.wait_for(main(), DEADLINE_S))


async def read_frame(reader) -> RemotingCommand:
    prefix = await reader.readexactly(4)
    return RemotingCommand.decode(await reader.readexactly(struct.unpack(">i", prefix)[0]))


async def echo(channel, request):
    return create_response_command(ResponseCode.SUCCESS, None, {"n": request.ext_int("n")}, body=request.body)


def test_concurrent_requests_are_answered_out_of_order_on_one_connection(tmp_path):
    async def body(net: Net):
        release = asyncio.Event()
        held = asyncio.Event()

        async def long_poll(channel, request):
            held.set()
            await release.wait()
            return create_response_command(ResponseCode.SUCCESS, "released")

        net.server.register_processor(RequestCode.PULL_MESSAGE, long_poll)
        net.server.register_processor(RequestCode.SEND_MESSAGE, echo)
        slow = asyncio.ensure_future(net.client.invoke_sync(net.addr, create_request_command(11), 10_000))
        await held.wait()
        # 64 requests behind the held one, on the same connection, all answered while it waits.
        fast = await asyncio.gather(*(net.client.invoke_sync(net.addr, create_request_command(10, {"n": i}, b"%d" % i),
                                                             10_000) for i in range(64)))
        assert [r.ext_int("n") for r in fast] == list(range(64))
        assert [r.body for r in fast] == [b"%d" % i for i in range(64)]
        assert not slow.done()
        release.set()
        assert (await slow).remark == "released"
        assert len(net.server.channels) == 1
        sends = [f for f in net.events(net.server_node, "frame.send") if f["code"] == 0]
        assert sends[-1]["opaque"] == 0  # the first request was answered last
    run_net(tmp_path, body)


def test_oneway_request_gets_no_response(tmp_path):
    async def body(net: Net):
        seen = asyncio.Event()
        got: list[RemotingCommand] = []

        async def record(channel, request):
            got.append(request)
            seen.set()
            return create_response_command(ResponseCode.SUCCESS)  # dropped: the request is oneway

        net.server.register_processor(RequestCode.UPDATE_CONSUMER_OFFSET, record)
        await net.client.invoke_oneway(net.addr, create_request_command(15, {"commitOffset": 9}))
        await net.client.invoke_oneway(net.addr, create_request_command(9999))  # unknown: no answer either
        await seen.wait()
        assert got[0].is_oneway_rpc() and got[0].ext_long("commitOffset") == 9
        # A two-way request afterwards proves the server has handled everything before it.
        net.server.register_processor(RequestCode.SEND_MESSAGE, echo)
        await net.client.invoke_sync(net.addr, create_request_command(10, {"n": 1}), 5000)
        assert [f["opaque"] for f in net.events(net.server_node, "frame.send")] == [2]
        assert net.events(net.client_node, "frame.recv")[0]["opaque"] == 2
    run_net(tmp_path, body)


def test_timeout_then_the_late_response_is_dropped(tmp_path):
    async def body(net: Net):
        release = asyncio.Event()

        async def late(channel, request):
            await release.wait()
            return create_response_command(ResponseCode.SUCCESS, "late")

        net.server.register_processor(RequestCode.PULL_MESSAGE, late)
        net.server.register_processor(RequestCode.SEND_MESSAGE, echo)
        begin = net.client_node.now_ms()
        with pytest.raises(RemotingTimeoutError, match=r"timeout, 1[45]\d\(ms\)"):
            await net.client.invoke_sync(net.addr, create_request_command(11), 150)
        assert net.client_node.now_ms() - begin >= 140
        channel = net.client.channel(net.addr)
        assert channel.pending_count == 0
        release.set()
        # The late response arrives, matches nothing, and the connection keeps working.
        response = await net.client.invoke_sync(net.addr, create_request_command(10, {"n": 5}), 5000)
        assert response.ext_int("n") == 5 and net.client.channel(net.addr) is channel
    run_net(tmp_path, body)


def test_unknown_code_and_processor_exception(tmp_path):
    async def body(net: Net):
        async def broken(channel, request):
            raise ValueError("boom")

        class Processor:
            async def process(self, channel, request):
                return create_response_command(ResponseCode.SUCCESS, "object")

        net.server.register_processor(RequestCode.HEART_BEAT, broken)
        net.server.register_processor(RequestCode.UNREGISTER_CLIENT, Processor())
        unknown = await net.client.invoke_sync(net.addr, create_request_command(9999), 5000)
        assert unknown.code == ResponseCode.REQUEST_CODE_NOT_SUPPORTED
        assert unknown.remark == " request type 9999 not supported"  # JVM: RocketMQ's text, leading space
        failed = await net.client.invoke_sync(net.addr, create_request_command(34), 5000)
        assert failed.code == ResponseCode.SYSTEM_ERROR
        assert failed.remark.startswith("ValueError: boom, broken(test_remoting.py:")
        assert (await net.client.invoke_sync(net.addr, create_request_command(35), 5000)).remark == "object"
        net.server.register_default_processor(echo)
        assert (await net.client.invoke_sync(net.addr, create_request_command(4242, {"n": 3}), 5000)).ext_int("n") == 3
    run_net(tmp_path, body)


BAD_INPUTS = {
    # "GET " read as a length prefix is 1195725856 bytes.
    "garbage": (b"GET / HTTP/1.1\r\nHost: x\r\n\r\n", "exceeds the 16777216-byte frame limit"),
    "bad length": (struct.pack(">i", 2) + b"\x00\x00", "below 4"),
    "header length beyond the frame": (struct.pack(">ii", 10, 200) + b"{}xxxx", "bad header length: 200"),
    "invalid JSON": (frame(b'{"code":10,'), "not valid JSON"),
}


@pytest.mark.parametrize("what", list(BAD_INPUTS))
def test_bad_input_closes_only_that_connection(tmp_path, what):
    async def body(net: Net):
        release = asyncio.Event()
        held = asyncio.Event()

        async def long_poll(channel, request):
            held.set()
            await release.wait()
            return create_response_command(ResponseCode.SUCCESS, "still here")

        net.server.register_processor(RequestCode.PULL_MESSAGE, long_poll)
        net.server.register_processor(RequestCode.SEND_MESSAGE, echo)
        pending = asyncio.ensure_future(net.client.invoke_sync(net.addr, create_request_command(11), 10_000))
        await held.wait()
        reader, writer = await net.raw_connection()
        # A good request first, answered; then the bad bytes end the connection.
        writer.write(create_request_command(10, {"n": 1}).encode())
        assert (await read_frame(reader)).ext_int("n") == 1
        bad_bytes, reason = BAD_INPUTS[what]
        writer.write(bad_bytes)
        await writer.drain()
        assert await reader.read() == b""  # EOF: the server closed this connection
        writer.close()
        [close] = [f for f in net.events(net.server_node, "net.close") if f["reason"].startswith("frame error")]
        assert reason in close["reason"]
        # The other connection, with a request held across the incident, is untouched.
        assert (await net.client.invoke_sync(net.addr, create_request_command(10, {"n": 2}), 5000)).ext_int("n") == 2
        release.set()
        assert (await pending).remark == "still here"
    run_net(tmp_path, body)


def test_cpp_style_pipelined_requests_over_a_raw_connection(tmp_path):
    async def body(net: Net):
        release = asyncio.Event()
        sent: list[RemotingCommand] = []

        async def send_message(channel, request):
            sent.append(request)
            if request.ext_int("queueId") == 1:
                await release.wait()
            return create_response_command(ResponseCode.SUCCESS, None, {
                "msgId": "0A", "queueId": request.ext_int("queueId"), "queueOffset": 42})

        net.server.register_processor(RequestCode.SEND_MESSAGE, send_message)
        second = CPP_SEND_HEADER.replace(b'"queueId":1', b'"queueId":2').replace(b'"opaque":17', b'"opaque":18')
        reader, writer = await net.raw_connection()
        writer.write(CPP_SEND_FRAME + frame(second, CPP_SEND_BODY))
        await writer.drain()
        prefix = await reader.readexactly(4)
        raw = await reader.readexactly(struct.unpack(">i", prefix)[0])
        header_length = struct.unpack(">i", raw[:4])[0]
        header = json.loads(raw[4:4 + header_length])
        # Opaque 18 first: the held opaque-17 request does not block it. Every ext value a string.
        assert header["opaque"] == 18 and header["flag"] == 1
        assert header["extFields"] == {"msgId": "0A", "queueId": "2", "queueOffset": "42"}
        release.set()
        assert (await read_frame(reader)).opaque == 17
        assert sent[0].body == CPP_SEND_BODY and sent[0].language == "CPP"
        writer.close()
    run_net(tmp_path, body)


def test_a_response_that_cannot_be_encoded_becomes_system_error(tmp_path):
    async def body(net: Net):
        async def bad_header(channel, request):
            return create_response_command(ResponseCode.SUCCESS, None, {"ratio": 0.5})

        net.server.register_processor(RequestCode.GET_MAX_OFFSET, bad_header)
        response = await net.client.invoke_sync(net.addr, create_request_command(30), 5000)
        assert response.code == ResponseCode.SYSTEM_ERROR and "<ratio>" in response.remark
        assert len(net.events(net.server_node, "frame.send")) == 1  # the bad one was never written
    run_net(tmp_path, body)


def test_server_side_close_fails_pending_and_the_client_reconnects(tmp_path):
    async def body(net: Net):
        async def hang_up(channel, request):
            channel.close()
            return None

        net.server.register_processor(RequestCode.HEART_BEAT, hang_up)
        net.server.register_processor(RequestCode.SEND_MESSAGE, echo)
        first = await net.client._get_and_create_channel(net.addr)
        with pytest.raises(RemotingConnectError, match="connection closed"):
            await net.client.invoke_sync(net.addr, create_request_command(34), 10_000)
        assert not first.is_active() and first.pending_count == 0
        response = await net.client.invoke_sync(net.addr, create_request_command(10, {"n": 4}), 5000)
        assert response.ext_int("n") == 4 and net.client.channel(net.addr) is not first
    run_net(tmp_path, body)


def test_server_shutdown_fails_every_pending_request(tmp_path):
    async def body(net: Net):
        held = asyncio.Event()

        async def never(channel, request):
            held.set()
            await asyncio.Event().wait()

        net.server.register_processor(RequestCode.PULL_MESSAGE, never)
        calls = [asyncio.ensure_future(net.client.invoke_sync(net.addr, create_request_command(11), 10_000))
                 for _ in range(3)]
        await held.wait()
        await net.server.shutdown()
        for call in calls:
            with pytest.raises(RemotingConnectError):
                await call
        with pytest.raises(RemotingConnectError):
            await net.client.invoke_sync(net.addr, create_request_command(11), 2000)
    run_net(tmp_path, body)


def test_client_errors_and_close_channel(tmp_path):
    async def body(net: Net):
        net.server.register_processor(RequestCode.SEND_MESSAGE, echo)
        with pytest.raises(RemotingConnectError, match="127.0.0.1:1: connect failed"):
            await net.client.invoke_sync("127.0.0.1:1", create_request_command(10), 2000)
        with pytest.raises(ValueError, match="not host:port"):
            await net.client.invoke_sync("nowhere", create_request_command(10), 2000)
        await net.client.invoke_sync(net.addr, create_request_command(10, {"n": 1}), 5000)
        channel = net.client.channel(net.addr)
        net.client.close_channel(net.addr)
        assert net.client.channel(net.addr) is None and not channel.is_active()
        assert (await net.client.invoke_sync(net.addr, create_request_command(10, {"n": 2}), 5000)).ext_int("n") == 2
        with pytest.raises(ValueError, match="two-way"):
            await net.client.invoke_sync(net.addr, create_response_command(0), 5000)
        await net.client.shutdown()
        with pytest.raises(RemotingConnectError, match="shut down"):
            await net.client.invoke_sync(net.addr, create_request_command(10), 2000)
    run_net(tmp_path, body)


def test_server_calls_the_client_back_on_its_connection(tmp_path):
    async def body(net: Net):
        async def notify(channel, request):
            # The broker's way to tell a consumer its group changed: a request on the client's channel.
            answer = await net.server.invoke_sync(channel, create_request_command(
                RequestCode.NOTIFY_CONSUMER_IDS_CHANGED, {"consumerGroup": request.ext_str("consumerGroup")}), 5000)
            return create_response_command(ResponseCode.SUCCESS, answer.remark)

        async def on_notify(channel, request):
            return create_response_command(ResponseCode.SUCCESS, "rebalanced " + request.ext_str("consumerGroup"))

        net.server.register_processor(RequestCode.HEART_BEAT, notify)
        net.client.register_processor(RequestCode.NOTIFY_CONSUMER_IDS_CHANGED, on_notify)
        response = await net.client.invoke_sync(net.addr, create_request_command(34, {"consumerGroup": "G"}), 5000)
        assert response.remark == "rebalanced G"
    run_net(tmp_path, body)


def test_channel_events_and_frame_traces(tmp_path):
    async def body(net: Net):
        events: list[tuple[str, str]] = []

        class Listener:
            def on_channel_connect(self, remote_addr, channel):
                events.append(("connect", remote_addr))

            def on_channel_close(self, remote_addr, channel):
                events.append(("close", remote_addr))

        net.server.channel_event_listener = Listener()
        net.server.register_processor(RequestCode.SEND_MESSAGE, echo)
        await net.client.invoke_sync(net.addr, create_request_command(10, {"n": 7}, b"abc"), 5000)
        net.client.close_channel(net.addr)
        for _ in range(200):
            if len(events) == 2:
                break
            await net.server_node.sleep(5)
        client_port = net.events(net.server_node, "net.accept")[0]["peer"]
        assert events == [("connect", client_port), ("close", client_port)]
        [send] = net.events(net.client_node, "frame.send")
        assert send == {"proto": "remoting", "peer": net.addr, "size": send["size"], "code": 10,
                        "name": "SEND_MESSAGE", "opaque": 0, "flag": 0, "remark": None, "body_size": 3,
                        "ext_fields": {"n": "7"}}
        [recv] = net.events(net.server_node, "frame.recv")
        assert recv["size"] == send["size"] and recv["peer"] == client_port
        [reply] = net.events(net.client_node, "frame.recv")
        assert (reply["name"], reply["flag"], reply["ext_fields"]) == ("SUCCESS", 1, {"n": "7"})
        assert net.events(net.client_node, "net.close") == [{"peer": net.addr, "reason": "local"}]
        assert net.events(net.server_node, "net.close") == [{"peer": client_port, "reason": "remote"}]
    run_net(tmp_path, body)


# -- request timeouts as RocketMQ: a precise wait for invoke_sync, the periodic scan for invoke_async --

class _SimEcho:
    """A simulated name server answering GET_ROUTEINFO_BY_TOPIC after ``delayMs``, and a client."""

    @staticmethod
    def world(seed: int):
        from rmqlab.runtime.component import Component
        from rmqlab.runtime.sim import Simulation

        class Server(Component):
            component_type = "namesrv"

            async def start(self, node):
                self.server = RemotingServer(node, "127.0.0.1", 9876)

                async def slow(channel, request):
                    await node.sleep(request.ext_int("delayMs"))
                    return create_response_command(ResponseCode.SUCCESS, None, {"n": request.ext_int("delayMs")})

                self.server.register_processor(RequestCode.GET_ROUTEINFO_BY_TOPIC, slow)
                await self.server.start()

        class Idle(Component):
            async def start(self, node):
                pass

        sim = Simulation(seed=seed)
        sim.add_node("namesrv", Server)
        sim.add_node("client", Idle)
        sim.start_all()
        return sim, sim.nodes["client"], RemotingClient(sim.nodes["client"])


def _ask(delay_ms: int) -> RemotingCommand:
    return create_request_command(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"delayMs": delay_ms})


ADDR = "127.0.0.1:9876"


def _first_scan_at_or_after(anchor_ms: int, t_ms: float) -> int:
    """The scan grid of the client created at ``anchor_ms``: 3 s after it, then every second."""
    tick = anchor_ms + 3000
    while tick < t_ms:
        tick += 1000
    return tick


def test_async_timeout_fails_at_the_scan_after_timeout_plus_a_second_sync_at_the_timeout():
    sim, node, client = _SimEcho.world(11)
    anchor = node.now_ms()
    assert sim.run(client.invoke_async(ADDR, _ask(0), 3000)).ext_int("n") == 0  # connects; answered
    outcomes = {}

    async def timed(label, call):
        begin = node.now_ms()
        try:
            await call
        except RemotingTimeoutError as e:
            outcomes[label] = (begin, node.now_ms(), e.timeout_ms)

    async def both():
        await node.sleep(250)  # off the grid
        await asyncio.gather(timed("sync", client.invoke_sync(ADDR, _ask(60_000), 1500)),
                             timed("async", client.invoke_async(ADDR, _ask(60_000), 1500)))

    sim.run(both())
    begin, failed, timeout_ms = outcomes["sync"]
    assert failed - begin == 1500 and timeout_ms == 1500  # invokeSync: its own wait, to the ms
    begin, failed, timeout_ms = outcomes["async"]
    # scanResponseTable: the first scan at which begin + timeout + 1000 has passed.
    assert failed == _first_scan_at_or_after(anchor, begin + 1500 + 1000) and timeout_ms == 1500
    assert client.channel(ADDR).pending_count == 0
    # Nothing pending any more: the scan stopped and the simulation can go idle.
    assert client._scan_timer is None and not client._scan_channels
    sim.close()


def test_async_invoke_answers_out_of_order_and_connection_loss_fails_it():
    sim, node, client = _SimEcho.world(12)

    async def several():
        return await asyncio.gather(*(client.invoke_async(ADDR, _ask(d), 3000) for d in (300, 10, 100)))

    assert [r.ext_int("n") for r in sim.run(several())] == [300, 10, 100]

    async def lost():
        pending = asyncio.ensure_future(client.invoke_async(ADDR, _ask(60_000), 10_000))
        await node.sleep(50)
        client.close_channel(ADDR)
        with pytest.raises(RemotingConnectError):
            await pending

    sim.run(lost())
    assert not client._scan_channels
    sim.close()


def test_async_timeouts_are_deterministic():
    from rmqlab.trace import trace_hash

    hashes = []
    for _ in range(2):
        sim, node, client = _SimEcho.world(13)
        sim.nemesis.partition(["namesrv"], ["client"])

        async def many():
            results = await asyncio.gather(*(client.invoke_async(ADDR, _ask(0), 500 + 100 * i) for i in range(8)),
                                           return_exceptions=True)
            return [(type(r).__name__, node.now_ms()) for r in results]

        with pytest.raises(RemotingConnectError):  # partitioned: the connect itself fails
            sim.run(client.invoke_async(ADDR, _ask(0), 1000))
        sim.nemesis.heal()
        sim.run(client.invoke_async(ADDR, _ask(0), 1000))
        sim.nemesis.partition(["namesrv"], ["client"])
        outcome = sim.run(many())
        assert {name for name, _ in outcome} == {"RemotingTimeoutError"}
        hashes.append((trace_hash(sim.tracer.events), outcome))
        sim.close()
    assert hashes[0] == hashes[1]


def test_async_invoke_on_tcp(tmp_path):
    async def body(net: Net):
        net.server.register_processor(RequestCode.SEND_MESSAGE, echo)
        responses = await asyncio.gather(*(net.client.invoke_async(net.addr, create_request_command(10, {"n": i}), 5000)
                                           for i in range(16)))
        assert [r.ext_int("n") for r in responses] == list(range(16))
        assert net.client.channel(net.addr).pending_count == 0
    run_net(tmp_path, body)
