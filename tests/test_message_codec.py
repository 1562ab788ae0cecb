"""Message codec tests (RocketMQ's MessageExtEncoder and MessageDecoder).

The fixtures are assembled field by field with struct from the reference table, independently of
the encoder; constants marked "JVM" were computed with OpenJDK 17 (String.hashCode,
java.util.zip.CRC32 masked with 0x7FFFFFFF as UtilAll.crc32 does).
"""

from __future__ import annotations

import struct

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rmqlab.common.java_compat import (bytes2string, crc32, java_parse_int, java_string_hash_code,
                                       string2bytes, to_int32)
from rmqlab.common.message import (Message, MessageConst, MessageExt, MessageExtBrokerInner,
                                   MessageFormatError, MessageSysFlag, MessageVersion,
                                   create_message_id, decode, decode_message_id, decodes,
                                   message_properties_to_string, string_to_message_properties)
from rmqlab.common.message.message_decoder import create_crc32, parse_crc32_property
from rmqlab.store.dispatch_request import (DispatchRequest, check_message_and_return_size,
                                           parse_delay_level)
from rmqlab.store.message_ext_encoder import (BLANK_MAGIC_CODE, END_FILE_MIN_BLANK_LENGTH,
                                              MESSAGE_MAGIC_CODE, MESSAGE_MAGIC_CODE_V2,
                                              MessageEncodeError, MessageExtEncoder,
                                              calc_msg_length, encode_blank)

ENCODER = MessageExtEncoder()

# ---------------------------------------------------------------------------------------------
# Hand-built V1 fixture, laid out as MessageExtEncoder writes it (body 32, topic "FooBar", 29 bytes of
# properties) = 158 bytes.

BODY_32 = bytes(range(32))
BODY_32_CRC = 287735434  # JVM: CRC32 of bytes 0..31 & 0x7FFFFFFF
KEYS_13 = "1700000000123"
PROPS_29 = f"TAGS\x01TAG1\x02KEYS\x01{KEYS_13}\x02"
TAG1_HASH = 2567159  # JVM: "TAG1".hashCode()

V1_FIELDS = dict(queue_id=3, flag=7, queue_offset=42, physical_offset=1580, sys_flag=0,
                 born_timestamp=1_700_000_000_000, born_host=("192.168.0.10", 51234),
                 store_timestamp=1_700_000_000_100, store_host=("10.0.0.1", 10911),
                 reconsume_times=2, prepared_transaction_offset=0)

V1_FIXTURE = b"".join([
    struct.pack(">i", 158),                                  # 0   TOTALSIZE
    bytes.fromhex("DAA320A7"),                               # 4   MAGICCODE (V1)
    struct.pack(">i", BODY_32_CRC),                          # 8   BODYCRC
    struct.pack(">i", 3),                                    # 12  QUEUEID
    struct.pack(">i", 7),                                    # 16  FLAG
    struct.pack(">q", 42),                                   # 20  QUEUEOFFSET
    struct.pack(">q", 1580),                                 # 28  PHYSICALOFFSET
    struct.pack(">i", 0),                                    # 36  SYSFLAG
    struct.pack(">q", 1_700_000_000_000),                    # 40  BORNTIMESTAMP
    bytes([192, 168, 0, 10]) + struct.pack(">i", 51234),     # 48  BORNHOST
    struct.pack(">q", 1_700_000_000_100),                    # 56  STORETIMESTAMP
    bytes([10, 0, 0, 1]) + struct.pack(">i", 10911),         # 64  STOREHOSTADDRESS
    struct.pack(">i", 2),                                    # 72  RECONSUMETIMES
    struct.pack(">q", 0),                                    # 76  PREPARED TRANSACTION OFFSET
    struct.pack(">i", 32) + BODY_32,                         # 84  BODY
    bytes([6]) + b"FooBar",                                  # 120 TOPIC
    struct.pack(">h", 29) + PROPS_29.encode(),               # 127 PROPERTIES
])


def broker_inner(topic, body, properties=None, **fields) -> MessageExtBrokerInner:
    return MessageExtBrokerInner(topic, body, fields.pop("flag", 0), dict(properties or {}), **fields)


def v1_message() -> MessageExtBrokerInner:
    fields = dict(V1_FIELDS)
    fields.pop("queue_offset")
    fields.pop("physical_offset")
    return broker_inner("FooBar", BODY_32, {"TAGS": "TAG1", "KEYS": KEYS_13}, **fields)


def test_v1_fixture_matches_reference_table():
    assert len(PROPS_29.encode()) == 29
    assert len(V1_FIXTURE) == 158
    table = [(">i", 0, 158), (">i", 4, MESSAGE_MAGIC_CODE), (">i", 12, 3), (">i", 16, 7),
             (">q", 20, 42), (">q", 28, 1580), (">i", 36, 0), (">q", 40, 1_700_000_000_000),
             (">q", 56, 1_700_000_000_100), (">i", 72, 2), (">q", 76, 0), (">i", 84, 32)]
    for fmt, offset, value in table:
        assert struct.unpack_from(fmt, V1_FIXTURE, offset)[0] == value, offset


def test_encoder_produces_the_v1_fixture_exactly():
    data = ENCODER.encode(v1_message(), queue_offset=42, physical_offset=1580)
    assert data == V1_FIXTURE
    assert calc_msg_length(0, 32, 6, 29, MessageVersion.MESSAGE_VERSION_V1) == 158
    assert calc_msg_length(0, 0, 0, 0) == 91


def test_decoder_reads_every_field_of_the_v1_fixture():
    m = decode(V1_FIXTURE)
    assert (m.store_size, m.body_crc, m.queue_id, m.flag) == (158, BODY_32_CRC, 3, 7)
    assert (m.queue_offset, m.commit_log_offset, m.sys_flag) == (42, 1580, 0)
    assert (m.born_timestamp, m.born_host) == (1_700_000_000_000, ("192.168.0.10", 51234))
    assert (m.store_timestamp, m.store_host) == (1_700_000_000_100, ("10.0.0.1", 10911))
    assert (m.reconsume_times, m.prepared_transaction_offset) == (2, 0)
    assert (m.body, m.topic) == (BODY_32, "FooBar")
    assert m.properties == {"TAGS": "TAG1", "KEYS": KEYS_13}
    assert (m.tags, m.keys, m.tags_code) == ("TAG1", KEYS_13, TAG1_HASH)
    assert m.msg_id == "0A00000100002A9F000000000000062C"


# Each field patched at its reference-table offset must come back from the decoder.
@pytest.mark.parametrize("attr, offset, fmt, value", [
    ("queue_id", 12, ">i", -5), ("flag", 16, ">i", 123456), ("queue_offset", 20, ">q", 2**40),
    ("commit_log_offset", 28, ">q", 7), ("born_timestamp", 40, ">q", -1),
    ("store_timestamp", 56, ">q", 99), ("reconsume_times", 72, ">i", 16),
    ("prepared_transaction_offset", 76, ">q", 4096),
])
def test_decoder_reads_fields_at_table_offsets(attr, offset, fmt, value):
    patched = bytearray(V1_FIXTURE)
    struct.pack_into(fmt, patched, offset, value)
    assert getattr(decode(patched), attr) == value


def test_decoder_reads_hosts_at_table_offsets():
    patched = bytearray(V1_FIXTURE)
    patched[48:56] = bytes([1, 2, 3, 4]) + struct.pack(">i", 65535)
    patched[64:72] = bytes([5, 6, 7, 8]) + struct.pack(">i", 1)
    m = decode(patched)
    assert (m.born_host, m.store_host) == (("1.2.3.4", 65535), ("5.6.7.8", 1))
    assert m.msg_id == "0506070800000001000000000000062C"


def test_check_message_and_return_size_on_v1_fixture():
    r = check_message_and_return_size(V1_FIXTURE, 0)
    assert r.success and r.msg_size == 158
    assert (r.topic, r.queue_id, r.commit_log_offset, r.consume_queue_offset) == ("FooBar", 3, 1580, 42)
    assert (r.tags_code, r.keys, r.uniq_key, r.store_timestamp) == (TAG1_HASH, KEYS_13, None, 1_700_000_000_100)
    assert (r.msg_base_offset, r.batch_size) == (42, 1)


# ---------------------------------------------------------------------------------------------
# V2 (topic > 127 bytes) and IPv6 fixtures.

def test_v2_fixture_for_a_200_byte_topic():
    topic = "T" * 200
    fixture = b"".join([
        struct.pack(">i", 92 + 5 + 200),                     # TOTALSIZE: V2 adds one byte
        bytes.fromhex("DAA320AB"),                           # MAGICCODE (V2)
        struct.pack(">i", 907060870),                        # BODYCRC, JVM: crc32("hello")
        struct.pack(">iiqqiq", 1, 0, 9, 2048, 0, 11),        # QUEUEID..BORNTIMESTAMP
        bytes([127, 0, 0, 1]) + struct.pack(">i", 40000),    # BORNHOST
        struct.pack(">q", 12),                               # STORETIMESTAMP
        bytes([127, 0, 0, 1]) + struct.pack(">i", 10911),    # STOREHOSTADDRESS
        struct.pack(">iq", 0, 0),                            # RECONSUMETIMES, PREPARED OFFSET
        struct.pack(">i", 5) + b"hello",                     # BODY
        struct.pack(">h", 200) + topic.encode(),             # TOPIC with a 2-byte length
        struct.pack(">h", 0),                                # PROPERTIES (none)
    ])
    msg = broker_inner(topic, b"hello", queue_id=1, born_timestamp=11, born_host=("127.0.0.1", 40000),
                       store_timestamp=12, store_host=("127.0.0.1", 10911))
    assert msg.version is MessageVersion.MESSAGE_VERSION_V2
    assert ENCODER.encode(msg, queue_offset=9, physical_offset=2048) == fixture
    m = decode(fixture)
    assert (m.topic, m.body, m.properties, m.store_size) == (topic, b"hello", {}, 297)
    r = check_message_and_return_size(fixture, 0)
    assert (r.success, r.msg_size, r.topic, r.keys, r.properties) == (True, 297, topic, "", None)


def test_version_boundary_is_127_bytes():
    assert broker_inner("a" * 127, b"").version is MessageVersion.MESSAGE_VERSION_V1
    assert broker_inner("a" * 128, b"").version is MessageVersion.MESSAGE_VERSION_V2
    data = ENCODER.encode(broker_inner("a" * 127, b"", born_host=("1.1.1.1", 1), store_host=("1.1.1.1", 2)),
                          queue_offset=0, physical_offset=0)
    assert data[4:8] == bytes.fromhex("DAA320A7") and data[88] == 127 and len(data) == 91 + 127


def test_ipv6_hosts_fixture():
    fixture = b"".join([
        struct.pack(">i", 121),                              # 91 + 2*12 + topic 2 + props 4
        bytes.fromhex("DAA320A7"),
        struct.pack(">i", 0),                                # BODYCRC of an empty body
        struct.pack(">iiqqiq", 0, 0, 1, 2, 0x30, 3),         # SYSFLAG: both host V6 bits
        bytes(15) + b"\x01" + struct.pack(">i", 5),          # 48 BORNHOST ::1 port 5
        struct.pack(">q", 4),                                # 68 STORETIMESTAMP
        bytes.fromhex("20010db8000000000000000000000001") + struct.pack(">i", 10911),  # 76
        struct.pack(">iq", 0, 0),                            # 96 RECONSUMETIMES, 100 PREPARED
        struct.pack(">i", 0),                                # 108 BODY (empty)
        bytes([2]) + b"T6",
        struct.pack(">h", 4) + b"a\x01b\x02",
    ])
    msg = broker_inner("T6", b"", {"a": "b"}, born_timestamp=3, born_host=("::1", 5),
                       store_timestamp=4, store_host=("2001:db8::1", 10911))
    # The encoder adds the V6 bits itself, as CommitLog.asyncPutMessage does.
    assert ENCODER.encode(msg, queue_offset=1, physical_offset=2) == fixture
    m = decode(fixture)
    assert (m.sys_flag, m.born_host, m.store_host) == (0x30, ("::1", 5), ("2001:db8::1", 10911))
    assert (m.store_timestamp, m.body, m.properties) == (4, b"", {"a": "b"})
    assert m.msg_id == "20010DB800000000000000000000000100002A9F0000000000000002"
    assert check_message_and_return_size(fixture, 0).msg_size == 121


# ---------------------------------------------------------------------------------------------
# Java compatibility helpers.

@pytest.mark.parametrize("s, expected", [
    ("TAG1", 2567159), ("", 0), ("hello", 99162322), ("polygenelubricants", -2147483648),
    ("\U0001F600", 1772899), ("a\U0001F600b", 57849694), ("标签", 857175),   # JVM values
])
def test_java_string_hash_code(s, expected):
    assert java_string_hash_code(s) == expected


def test_crc32_is_masked_like_utilall():
    assert crc32(b"123456789") == 1274296614          # 0xCBF43926 & 0x7FFFFFFF
    assert crc32(BODY_32) == BODY_32_CRC
    assert crc32(b"") == 0
    assert crc32(b"xx123456789yy", 2, 9) == 1274296614
    with pytest.raises(ValueError, match="outside"):
        crc32(b"abc", 2, 5)


def test_hex_and_int_helpers():
    assert bytes2string(b"\x00\xab\x7f") == "00AB7F"
    assert string2bytes("00ab7F") == b"\x00\xab\x7f"
    with pytest.raises(ValueError, match="odd length"):
        string2bytes("ABC")
    with pytest.raises(ValueError, match="non-hex"):
        string2bytes("ZZ")
    assert to_int32(2**31) == -(2**31) and to_int32(-1) == -1
    assert java_parse_int("+17") == 17 and java_parse_int("-2147483648") == -(2**31)
    for bad in (" 1", "1_0", "", "2147483648", "1.0"):
        with pytest.raises(ValueError):
            java_parse_int(bad)
    assert java_parse_int("2147483648", 64) == 2**31


# ---------------------------------------------------------------------------------------------
# Properties and message ids.

def test_properties_string_round_trip_keeps_order():
    props = {"KEYS": "k1 k2", "TAGS": "t", "ü名": "值\U0001F600"}
    s = message_properties_to_string(props)
    assert s == "KEYS\x01k1 k2\x02TAGS\x01t\x02ü名\x01值\U0001F600\x02"
    assert list(string_to_message_properties(s).items()) == list(props.items())
    assert message_properties_to_string({"a": None, "b": "c"}) == "b\x01c\x02"   # None skipped


def test_string_to_message_properties_tolerates_like_java():
    # Same results as MessageDecoder.string2messageProperties on a JVM.
    assert string_to_message_properties("\x01b\x02a\x01\x02a\x01b") == {"a": "b"}
    assert string_to_message_properties("a\x01b\x01c\x02") == {"a": "b\x01c"}
    assert string_to_message_properties("k\x01v\x02k\x01w\x02") == {"k": "w"}
    assert string_to_message_properties("") == {} and string_to_message_properties(None) == {}


@pytest.mark.parametrize("props, needle", [
    ({"a\x01": "v"}, r"name 'a\\x01' contains the separator \\x01"),
    ({"a": "v\x02w"}, r"value 'v\\x02w' contains the separator \\x02 at index 1"),
    ({"": "v"}, "empty name or value"),
    ({"a": ""}, "empty name or value"),
])
def test_properties_with_separators_or_empty_parts_are_refused(props, needle):
    with pytest.raises(MessageFormatError, match=needle):
        message_properties_to_string(props)


def test_message_id_known_value_and_round_trip():
    assert create_message_id(("127.0.0.1", 10911), 0) == "7F00000100002A9F0000000000000000"
    assert decode_message_id("C0A8000A00002A9F000000000000062C") == (("192.168.0.10", 10911), 1580)
    assert decode_message_id("c0a8000a00002a9f000000000000062c") == (("192.168.0.10", 10911), 1580)
    v6 = create_message_id(("fe80::1", 8080), 2**40)
    assert len(v6) == 56 and decode_message_id(v6) == (("fe80::1", 8080), 2**40)
    with pytest.raises(MessageFormatError, match="31 characters"):
        decode_message_id("0" * 31)
    with pytest.raises(MessageFormatError, match="non-hex"):
        decode_message_id("G" * 32)
    with pytest.raises(MessageFormatError, match="not an IPv4 or IPv6 address literal"):
        create_message_id(("localhost", 1), 0)
    with pytest.raises(MessageFormatError, match="port 70000"):
        create_message_id(("1.2.3.4", 70000), 0)


# ---------------------------------------------------------------------------------------------
# Message helpers.

def test_message_helpers():
    m = Message("T", b"x")
    assert m.properties == {} and m.tags is None and m.keys is None and m.delay_time_level == 0
    m.tags = "TagA"
    m.keys = ["k1", "k2"]
    m.delay_time_level = 3
    assert m.get_property("KEYS") == "k1 k2" and m.tags == "TagA" and m.delay_time_level == 3
    assert m.wait_store_msg_ok is True
    m.wait_store_msg_ok = False
    assert m.get_property("WAIT") == "false" and m.wait_store_msg_ok is False
    m.clear_property("TAGS")
    assert m.tags is None
    with pytest.raises(MessageFormatError, match="used by the system"):
        m.put_user_property(MessageConst.PROPERTY_TAGS, "x")
    with pytest.raises(MessageFormatError, match="blank"):
        m.put_user_property("mine", "  ")
    m.put_user_property("mine", "v")
    assert m.get_property("mine") == "v"
    assert Message("T", bytearray(b"ab")).body == b"ab"
    with pytest.raises(TypeError, match="body must be bytes"):
        Message("T", "text")
    ext = MessageExt("T", b"", properties={"TAGS": "TAG1"})
    assert ext.tags_code == TAG1_HASH and MessageExt("T", b"").tags_code == 0
    inner = broker_inner("T", b"", {"TAGS": "a", "KEYS": "b"})
    assert inner.properties_string == "TAGS\x01a\x02KEYS\x01b\x02"
    assert MessageSysFlag.get_transaction_value(0x0C | 0x30) == MessageSysFlag.TRANSACTION_ROLLBACK_TYPE
    assert MessageSysFlag.get_compression_type(MessageSysFlag.COMPRESSION_ZLIB_TYPE | 1) == 3


# ---------------------------------------------------------------------------------------------
# Encoder limits and errors.

def hosts() -> dict:
    return dict(born_host=("10.0.0.2", 1), store_host=("10.0.0.1", 10911))


def test_properties_size_exceeded():
    msg = broker_inner("T", b"", {"k": "v" * 32763}, **hosts())   # 1+1+32763+1 = 32766 bytes
    assert len(ENCODER.encode(msg, queue_offset=0, physical_offset=0)) == 91 + 1 + 32766
    msg.properties["k"] = "v" * 32765                              # 32768 bytes
    with pytest.raises(MessageEncodeError, match="properties are 32768 bytes; max 32767") as e:
        ENCODER.encode(msg, queue_offset=0, physical_offset=0)
    assert e.value.put_status == "PROPERTIES_SIZE_EXCEEDED"


def test_body_and_message_size_limits():
    small = MessageExtEncoder(max_message_size=1024)
    assert len(small.encode(broker_inner("T", bytes(1024), **hosts()), queue_offset=0, physical_offset=0)) == 1024 + 92
    with pytest.raises(MessageEncodeError, match="body is 1025 bytes; max 1024") as e:
        small.encode(broker_inner("T", bytes(1025), **hosts()), queue_offset=0, physical_offset=0)
    assert e.value.put_status == "MESSAGE_ILLEGAL"
    # The whole message may exceed the body limit by 64 KiB, no more.
    tiny = MessageExtEncoder(max_message_size=10)
    big = broker_inner("T" * 32767, bytes(10), {"k": "v" * 32764}, **hosts())
    with pytest.raises(MessageEncodeError, match="message is 65636 bytes; max 65546") as e:
        tiny.encode(big, queue_offset=0, physical_offset=0)
    assert e.value.put_status == "MESSAGE_ILLEGAL"
    default = MessageExtEncoder()
    assert (default.max_message_body_size, default.max_message_size) == (4 * 1024 * 1024, 4 * 1024 * 1024 + 65536)


@pytest.mark.parametrize("msg, needle", [
    (broker_inner("T" * 32768, b"", **hosts()), "topic is 32768 bytes; max 32767"),
    (broker_inner("T", b"", born_host=None, store_host=("1.1.1.1", 1)), "born_host is not set"),
    (broker_inner("T", b"", sys_flag=0x10, **hosts()), "marks born_host as IPv6 but '10.0.0.2' is IPv4"),
    (broker_inner("T", b"", born_host=("example.com", 1), store_host=("1.1.1.1", 1)),
     "not an IPv4 or IPv6 address literal"),
    (broker_inner("T", b"", queue_id=2**31, **hosts()), "queue_id 2147483648 is out of Java int range"),
    (broker_inner("T", b"", {"a": "b\x01"}, **hosts()), "contains the separator"),
    (broker_inner("T\ud800", b"", **hosts()), "topic is not valid Unicode text"),
])
def test_encoder_refuses_what_java_cannot_store(msg, needle):
    with pytest.raises(MessageEncodeError, match=needle) as e:
        ENCODER.encode(msg, queue_offset=0, physical_offset=0)
    assert e.value.put_status == "MESSAGE_ILLEGAL"


def test_encoder_refuses_out_of_range_offsets():
    with pytest.raises(MessageEncodeError, match="physical_offset .* out of Java long range"):
        ENCODER.encode(v1_message(), queue_offset=0, physical_offset=2**63)


# ---------------------------------------------------------------------------------------------
# Blank filler, runs of messages and dispatch-specific semantics.

def test_blank_filler_and_a_file_walk_like_recovery():
    file_size = 1024
    msgs = [v1_message() for _ in range(3)]
    data = bytearray()
    for i, m in enumerate(msgs):
        data += ENCODER.encode(m, queue_offset=i, physical_offset=len(data))
    assert encode_blank(file_size - len(data)) == struct.pack(">ii", file_size - len(data), BLANK_MAGIC_CODE)
    assert BLANK_MAGIC_CODE == -875286124 and END_FILE_MIN_BLANK_LENGTH == 8
    assert MESSAGE_MAGIC_CODE == -626843481 and MESSAGE_MAGIC_CODE_V2 == -626843477
    data += encode_blank(file_size - len(data))
    data += bytes(file_size - len(data))
    pos, sizes = 0, []
    while True:
        r = check_message_and_return_size(data, pos)
        assert r.success
        if r.msg_size == 0:
            break
        sizes.append(r.msg_size)
        assert r.commit_log_offset == pos
        pos += r.msg_size
    assert sizes == [158, 158, 158] and pos == 474
    assert [m.queue_offset for m in decodes(data)] == [0, 1, 2]
    with pytest.raises(MessageFormatError, match="BLANK end-of-file filler"):
        decode(data, 474)
    with pytest.raises(ValueError, match="blank length 7"):
        encode_blank(7)


def test_codec_reads_memoryview_and_mmap_without_pinning_them(tmp_path):
    import mmap
    path = tmp_path / "00000000000000000000"
    path.write_bytes(V1_FIXTURE + encode_blank(200 - 158) + bytes(200 - 158 - 8))
    with open(path, "r+b") as f:
        mm = mmap.mmap(f.fileno(), 0)
        assert check_message_and_return_size(mm, 0).msg_size == 158
        assert check_message_and_return_size(mm, 158).msg_size == 0
        assert decode(mm).body == BODY_32 and len(decodes(mm)) == 1
        mm.close()   # would raise BufferError if the codec still held a view of the map
    view = memoryview(bytearray(V1_FIXTURE))
    assert decode(view).topic == "FooBar" and check_message_and_return_size(view, 0).success


def test_check_failures_follow_rocketmq():
    assert check_message_and_return_size(bytes(200), 0) == DispatchRequest.of_size(-1, False)
    assert not check_message_and_return_size(V1_FIXTURE[:157], 0).success
    assert not check_message_and_return_size(V1_FIXTURE, 158).success
    # A BLANK whose TOTALSIZE runs past the buffer is rejected before its magic is read.
    assert not check_message_and_return_size(encode_blank(100), 0).success
    # TOTALSIZE disagreeing with the fields: failure carrying the declared size.
    patched = bytearray(V1_FIXTURE) + b"\x00"
    struct.pack_into(">i", patched, 0, 159)
    assert check_message_and_return_size(patched, 0) == DispatchRequest.of_size(159, False)
    with pytest.raises(MessageFormatError, match="TOTALSIZE 159 at position 0 but the fields add up to 158"):
        decode(patched)
    # A body CRC mismatch fails only when the CRC is checked.
    flipped = bytearray(V1_FIXTURE)
    flipped[100] ^= 0xFF
    assert not check_message_and_return_size(flipped, 0).success
    assert check_message_and_return_size(flipped, 0, check_crc=False).msg_size == 158
    assert check_message_and_return_size(flipped, 0, read_body=False).msg_size == 158
    with pytest.raises(MessageFormatError, match="BODYCRC mismatch"):
        decode(flipped)
    assert decode(flipped, check_crc=False).body == bytes(flipped[88:120])
    assert decode(flipped, read_body=False).body is None
    with pytest.raises(ValueError, match="non-negative"):
        check_message_and_return_size(V1_FIXTURE, -1)


def dispatch(props: dict[str, str], topic: str = "T", store_timestamp: int = 1_000_000) -> DispatchRequest:
    msg = broker_inner(topic, b"body", props, store_timestamp=store_timestamp, **hosts())
    return check_message_and_return_size(ENCODER.encode(msg, queue_offset=5, physical_offset=0), 0)


def test_delay_messages_get_the_deliver_time_as_tags_code():
    sched = "SCHEDULE_TOPIC_XXXX"
    assert dispatch({"DELAY": "3", "TAGS": "x"}, sched).tags_code == 1_000_000 + 10_000
    assert dispatch({"DELAY": "99"}, sched).tags_code == 1_000_000 + 2 * 3600 * 1000   # clamped to 18
    assert dispatch({"DELAY": "0", "TAGS": "TAG1"}, sched).tags_code == TAG1_HASH
    assert dispatch({"DELAY": "3", "TAGS": "TAG1"}, "Other").tags_code == TAG1_HASH
    assert not dispatch({"DELAY": "three"}, sched).success
    table = parse_delay_level("2s 1d")
    assert table == {1: 2000, 2: 86_400_000}
    msg = broker_inner(sched, b"", {"DELAY": "2"}, store_timestamp=5, **hosts())
    data = ENCODER.encode(msg, queue_offset=0, physical_offset=0)
    assert check_message_and_return_size(data, 0, delay_level_table=table).tags_code == 86_400_005
    with pytest.raises(ValueError, match="has unit .x.; the units are s, m, h, d"):
        parse_delay_level("1s 5x")


def test_keys_uniq_key_dup_info_and_inner_batch():
    assert dispatch({}).keys == "" and dispatch({"TAGS": "a"}).keys is None
    r = dispatch({"KEYS": "k1 k2", "UNIQ_KEY": "U1"})
    assert (r.keys, r.uniq_key, r.tags_code) == ("k1 k2", "U1", 0)
    msg = broker_inner("T", b"", {"DUP_INFO": "a_b"}, **hosts())
    data = ENCODER.encode(msg, queue_offset=0, physical_offset=0)
    assert check_message_and_return_size(data, 0, check_dup_info=True).success
    msg.properties["DUP_INFO"] = "a_b_c"
    data = ENCODER.encode(msg, queue_offset=0, physical_offset=0)
    assert not check_message_and_return_size(data, 0, check_dup_info=True).success
    r = dispatch({"INNER_NUM": "4", "INNER_BASE": "100"})
    assert (r.batch_size, r.msg_base_offset, r.consume_queue_offset) == (4, 100, 5)
    assert not dispatch({"INNER_NUM": "40000", "INNER_BASE": "100"}).success   # not a short


# ---------------------------------------------------------------------------------------------
# enabledAppendPropCRC / forceVerifyPropCRC: a CRC over the whole message in a last property.

CRC_ENCODER = MessageExtEncoder(enabled_append_prop_crc=True)


def test_crc32_property_digits_are_least_significant_first():
    assert create_crc32(123) == b"__CRC32#\x013210000000\x02"
    assert create_crc32(0) == b"__CRC32#\x010000000000\x02"
    assert len(create_crc32(2**31 - 1)) == 20
    assert parse_crc32_property("3210000000") == 123
    # Java reads from the last char: a torn \x00 in place of the separator counts as -48.
    assert parse_crc32_property("3210000000\x00") == to_int32(123 - 48 * 10**10)


def test_prop_crc_layout():
    data = CRC_ENCODER.encode(v1_message(), queue_offset=42, physical_offset=1580)
    assert len(data) == 158 + 20
    assert data[:4] == struct.pack(">i", 178) and data[4:127] == V1_FIXTURE[4:127]
    assert data[127:158] == struct.pack(">h", 49) + PROPS_29.encode()
    crc = crc32(data[:-20])
    assert data[-20:] == b"__CRC32#\x01" + str(crc)[::-1].ljust(10, "0").encode() + b"\x02"
    assert decode(data).properties == {"TAGS": "TAG1", "KEYS": KEYS_13, "__CRC32#": str(crc)[::-1].ljust(10, "0")}
    for force in (False, True):
        assert check_message_and_return_size(data, 0, force_verify_prop_crc=force).msg_size == 178
    # Without the property, forceVerifyPropCRC refuses the message.
    assert not check_message_and_return_size(V1_FIXTURE, 0, force_verify_prop_crc=True).success
    # A stale __CRC32# given by the caller is replaced, not stored twice.
    stale = v1_message()
    stale.properties["__CRC32#"] = "9999999999"
    assert CRC_ENCODER.encode(stale, queue_offset=42, physical_offset=1580) == data


def test_torn_tail_is_rejected_on_recovery_checks():
    data = CRC_ENCODER.encode(v1_message(), queue_offset=42, physical_offset=1580)
    for k in range(1, 58):   # zero the last k bytes: PROPERTIES (49), its length (2), TOPIC (6)
        torn = data[:-k] + bytes(k + 100)   # the rest of a preallocated file is zeros
        # RocketMQ's check (what the dispatcher runs, without CRC) misses damage confined to
        # PROPERTIES — BODYCRC covers only the body; a zeroed PROPERTIES length breaks the size check.
        assert check_message_and_return_size(torn, 0, check_crc=False).success == (k <= 49), k
        # rmqlab's recovery check (check_crc) sees the zeroed last byte; so does RocketMQ's prop CRC.
        assert not check_message_and_return_size(torn, 0).success, k
        assert not check_message_and_return_size(torn, 0, force_verify_prop_crc=True).success, k
    no_props = ENCODER.encode(MessageExtBrokerInner(topic="T" * 6, body=b"b", born_host=("127.0.0.1", 1),
                                                    store_host=("127.0.0.1", 2)), queue_offset=0, physical_offset=0)
    assert check_message_and_return_size(no_props + bytes(8), 0).success  # ends in a zero length: fine
    for k in range(3, 9):   # the length (2) is zero anyway; tear into the topic
        assert not check_message_and_return_size(no_props[:-k] + bytes(k + 8), 0).success, k


# ---------------------------------------------------------------------------------------------
# Property-based: round trips and robustness.

TOPIC_CHARS = "%|abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-"  # TopicValidator
_prop_text = st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="\x01\x02"),
                     min_size=1, max_size=16)
# Names the dispatcher parses (DELAY on the schedule topic, INNER_*) are left out of random keys.
_props = st.dictionaries(_prop_text.filter(lambda k: k not in {"INNER_NUM", "INNER_BASE", "DELAY"}),
                         _prop_text, max_size=6)
_host = st.tuples(st.ip_addresses().map(str), st.integers(0, 65535))
_i32 = st.integers(-(2**31), 2**31 - 1)
_i64 = st.integers(-(2**63), 2**63 - 1)


@st.composite
def messages(draw, max_body=8192, min_body=0):
    # Draw the lengths first: hypothesis' own size distribution rarely passes 127 (V2) or
    # produces large bodies.
    topic_length = draw(st.integers(1, 300))
    body_length = draw(st.integers(min_body, max_body))
    topic = draw(st.text(TOPIC_CHARS, min_size=topic_length, max_size=topic_length))
    msg = MessageExtBrokerInner(
        topic, draw(st.binary(min_size=body_length, max_size=body_length)), draw(_i32), draw(_props),
        queue_id=draw(_i32), sys_flag=draw(_i32) & ~0x30, born_timestamp=draw(_i64),
        born_host=draw(_host), store_timestamp=draw(_i64), store_host=draw(_host),
        reconsume_times=draw(_i32), prepared_transaction_offset=draw(_i64))
    return msg, draw(_i64), draw(_i64)


def _is_v6(host) -> bool:
    return ":" in host[0]


SETTINGS = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@SETTINGS
@given(messages(), st.binary(max_size=32))
def test_round_trip(case, trailing):
    msg, queue_offset, physical_offset = case
    data = ENCODER.encode(msg, queue_offset=queue_offset, physical_offset=physical_offset)
    sys_flag = msg.sys_flag | (0x10 if _is_v6(msg.born_host) else 0) | (0x20 if _is_v6(msg.store_host) else 0)
    topic_length = len(msg.topic.encode())
    version = MessageVersion.MESSAGE_VERSION_V2 if topic_length > 127 else MessageVersion.MESSAGE_VERSION_V1
    assert len(data) == calc_msg_length(sys_flag, len(msg.body), topic_length,
                                        len(msg.properties_string.encode()), version)
    assert struct.unpack_from(">ii", data) == (len(data), version.magic_code)

    decoded = decode(data + trailing)
    assert decoded == MessageExt(
        msg.topic, msg.body, msg.flag, msg.properties, queue_id=msg.queue_id,
        queue_offset=queue_offset, commit_log_offset=physical_offset, sys_flag=sys_flag,
        born_timestamp=msg.born_timestamp, born_host=msg.born_host, store_timestamp=msg.store_timestamp,
        store_host=msg.store_host, reconsume_times=msg.reconsume_times,
        prepared_transaction_offset=msg.prepared_transaction_offset, body_crc=crc32(msg.body),
        store_size=len(data), msg_id=create_message_id(msg.store_host, physical_offset))
    assert decode_message_id(decoded.msg_id) == (msg.store_host, physical_offset)

    r = check_message_and_return_size(data + trailing, 0)
    assert r.success and r.msg_size == len(data)
    assert (r.topic, r.queue_id, r.commit_log_offset, r.consume_queue_offset, r.sys_flag) == (
        msg.topic, msg.queue_id, physical_offset, queue_offset, sys_flag)
    assert r.tags_code == (java_string_hash_code(msg.tags) if msg.tags else 0)
    assert r.properties == (msg.properties or None)


def _check_is_sane(buf, pos):
    """The check never raises and a success never claims a size the bytes do not back."""
    r = check_message_and_return_size(buf, pos)
    assert isinstance(r, DispatchRequest)
    if r.success:
        magic = struct.unpack_from(">i", buf, pos + 4)[0]
        if r.msg_size == 0:
            assert magic == BLANK_MAGIC_CODE
        else:
            assert magic in (MESSAGE_MAGIC_CODE, MESSAGE_MAGIC_CODE_V2)
            assert r.msg_size == struct.unpack_from(">i", buf, pos)[0]
            assert 0 < r.msg_size <= len(buf) - pos
    else:
        assert r.msg_size == -1 or r.msg_size == struct.unpack_from(">i", buf, pos)[0]
    return r


def _decode_fails_cleanly(buf, pos=0):
    try:
        decode(buf, pos)
    except MessageFormatError:
        pass


_magic = st.sampled_from([MESSAGE_MAGIC_CODE, MESSAGE_MAGIC_CODE_V2, BLANK_MAGIC_CODE, 0])


@SETTINGS
@given(st.binary(max_size=400), st.integers(0, 420))
def test_random_garbage_never_raises(buf, pos):
    _check_is_sane(buf, pos)
    if pos <= len(buf):
        _decode_fails_cleanly(buf, pos)


@SETTINGS
@given(st.integers(-(2**31), 2**31 - 1), _magic, st.binary(max_size=300))
def test_garbage_behind_a_valid_magic_never_raises(total_size, magic, tail):
    buf = struct.pack(">ii", total_size, magic) + tail
    _check_is_sane(buf, 0)
    _decode_fails_cleanly(buf)


@SETTINGS
@given(messages(max_body=512), st.data())
def test_truncated_message_fails(case, data):
    msg, queue_offset, physical_offset = case
    encoded = ENCODER.encode(msg, queue_offset=queue_offset, physical_offset=physical_offset)
    cut = data.draw(st.integers(0, len(encoded) - 1))
    torn = encoded[:cut]
    assert not check_message_and_return_size(torn, 0).success
    with pytest.raises(MessageFormatError):
        decode(torn)


def _body_start(msg, encoded) -> int:
    return (len(encoded) - len(msg.body) - msg.version.topic_length_size - len(msg.topic.encode())
            - 2 - len(msg.properties_string.encode()))


@SETTINGS
@given(messages(max_body=512), st.data())
def test_single_byte_flip_never_yields_a_wrong_size(case, data):
    msg, queue_offset, physical_offset = case
    encoded = ENCODER.encode(msg, queue_offset=queue_offset, physical_offset=physical_offset)
    i = data.draw(st.integers(0, len(encoded) - 1))
    value = data.draw(st.integers(0, 255).filter(lambda v: v != encoded[i]))
    buf = bytearray(encoded + data.draw(st.binary(max_size=64)))
    buf[i] = value
    r = _check_is_sane(bytes(buf), 0)
    if r.success:
        assert r.msg_size == len(encoded)
    _decode_fails_cleanly(bytes(buf))


@SETTINGS
@given(messages(min_body=1), st.data())
def test_single_byte_flip_in_the_body_fails_the_crc(case, data):
    msg, queue_offset, physical_offset = case
    encoded = ENCODER.encode(msg, queue_offset=queue_offset, physical_offset=physical_offset)
    start = _body_start(msg, encoded)
    i = data.draw(st.integers(start, start + len(msg.body) - 1))
    buf = bytearray(encoded)
    buf[i] = data.draw(st.integers(0, 255).filter(lambda v: v != encoded[i]))
    # CRC-32 detects every single-byte change in a body of up to 8 KiB (checked exhaustively
    # over all error positions), so the check must fail and only on the CRC.
    assert check_message_and_return_size(bytes(buf), 0) == DispatchRequest.of_size(-1, False)
    assert check_message_and_return_size(bytes(buf), 0, check_crc=False).msg_size == len(encoded)
    with pytest.raises(MessageFormatError, match="BODYCRC mismatch"):
        decode(bytes(buf))


@SETTINGS
@given(messages(max_body=512), st.data())
def test_with_prop_crc_every_single_byte_flip_is_detected(case, data):
    msg, queue_offset, physical_offset = case
    encoded = CRC_ENCODER.encode(msg, queue_offset=queue_offset, physical_offset=physical_offset)
    assert check_message_and_return_size(encoded, 0, force_verify_prop_crc=True).msg_size == len(encoded)
    i = data.draw(st.integers(0, len(encoded) - 1))
    buf = bytearray(encoded + bytes(64))
    buf[i] = data.draw(st.integers(0, 255).filter(lambda v: v != encoded[i]))
    assert not check_message_and_return_size(bytes(buf), 0, force_verify_prop_crc=True).success
