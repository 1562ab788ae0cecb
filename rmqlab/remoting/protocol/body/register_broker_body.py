"""RegisterBrokerBody and the topic-config wrappers it carries: the body of REGISTER_BROKER (103).

RocketMQ's ``remoting/.../protocol/body/RegisterBrokerBody.java``,
``TopicConfigSerializeWrapper.java`` and ``TopicConfigAndMappingSerializeWrapper.java``.

A broker sends its whole topic table, stamped with the table's DataVersion, to every name server
(``BrokerOuterAPI.registerBrokerAll``). Two body formats, chosen by the ``compressed`` field of the
RegisterBrokerRequestHeader:

**Uncompressed** (the default): fastjson JSON of the bean, properties alphabetical::

    {"filterServerList":[],
     "topicConfigSerializeWrapper":{"dataVersion":{"counter":3,"stateVersion":0,"timestamp":...},
        "mappingDataVersion":{...},
        "topicConfigTable":{"TopicTest":{"attributes":{},"order":false,"perm":6,"readQueueNums":4,
            "topicFilterType":"SINGLE_TAG","topicName":"TopicTest","topicSysFlag":0,"writeQueueNums":4},...},
        "topicQueueMappingDetailMap":{},"topicQueueMappingInfoMap":{}}}

A broker older than V3_0_11 sends the bare ``topicConfigSerializeWrapper`` object instead.

**Compressed**: a zlib stream (``DeflaterOutputStream``, BEST_COMPRESSION) of big-endian
length-prefixed parts: ``int len + DataVersion JSON``, ``int topicCount``, per topic ``int len +
TopicConfig.encode()``, ``int len + filterServerList JSON``, then (read only from brokers of V5_0_0
on) ``int mappingCount`` and per mapping ``int len + TopicQueueMappingInfo JSON``.
``TopicConfig.encode()`` is ``"name read write perm FILTER_TYPE {attributes JSON}"`` separated by
single spaces, so a compressed topic loses its ``topicSysFlag`` and ``order`` (they decode as 0 and
false), and attributes containing a space are dropped on decoding (Java ignores that parse error).

**Quirk** (BrokerOuterAPI since RIP-32): a Java broker with ``compressedRegister=true`` compresses
the body but still sends ``compressed=false`` in the header, so a Java name server fails to decode
it ("Failed to decode RegisterBrokerBody"); :meth:`RegisterBrokerBody.decode` says so when the
bytes look like zlib.

Static topics (RIP-21) are not implemented in rmqlab: the mapping maps and ``mappingDataVersion``
are carried as the JSON that arrived and written back as given.
"""

from __future__ import annotations

import io
import json
import struct
import zlib
from dataclasses import dataclass, field
from typing import Any

from rmqlab.common.config_manager import check_object, check_str
from rmqlab.common.data_version import DataVersion
from rmqlab.common.java_compat import java_parse_int
from rmqlab.common.topic_config import TopicConfig, TopicFilterType
from rmqlab.remoting.protocol import remoting_serializable
from rmqlab.remoting.protocol.mq_version import MQVersion
from rmqlab.remoting.protocol.remoting_serializable import hash_map_order

_INT = struct.Struct(">i")


def _zero_version() -> DataVersion:
    return DataVersion(state_version=0, timestamp=0, counter=0)


def _topic_table_from_json(data: Any, where: str) -> dict[str, TopicConfig]:
    table: dict[str, TopicConfig] = {}
    for name, entry in check_object(data, where).items():
        tc = TopicConfig.from_json_dict(entry, f"{where}.{name}")
        # A ConcurrentHashMap entry: Java keys it by the map key; the name inside must agree for
        # the route table to make sense, so a mismatch is refused rather than guessed at.
        if tc.topic_name != name:
            raise ValueError(f"{where}.{name}.topicName: {tc.topic_name!r} differs from its key")
        table[name] = tc
    return table


@dataclass
class TopicConfigSerializeWrapper:
    """A broker's topic table and its DataVersion (``TopicConfigSerializeWrapper``); the shape of
    topics.json and of an old (< V3_0_11) broker's registration body."""

    topic_config_table: dict[str, TopicConfig] = field(default_factory=dict)
    # Java's default is a fresh DataVersion stamped "now"; a caller passes the table's own.
    data_version: DataVersion = field(default_factory=_zero_version)

    def to_json_dict(self) -> dict[str, Any]:
        return {
            "dataVersion": self.data_version.to_json_dict(),
            "topicConfigTable": {name: tc.to_json_dict() for name, tc in self.topic_config_table.items()},
        }

    @classmethod
    def from_json_dict(cls, data: Any, where: str = "topicConfigSerializeWrapper") -> TopicConfigSerializeWrapper:
        obj = check_object(data, where)
        return cls(**cls._common_fields(obj, where))

    @staticmethod
    def _common_fields(obj: dict[str, Any], where: str) -> dict[str, Any]:
        version = obj.get("dataVersion")
        return {
            "topic_config_table": _topic_table_from_json(obj.get("topicConfigTable") or {}, f"{where}.topicConfigTable"),
            "data_version": _zero_version() if version is None
            else DataVersion.from_json_dict(version, f"{where}.dataVersion"),
        }


@dataclass
class TopicConfigAndMappingSerializeWrapper(TopicConfigSerializeWrapper):
    """The wrapper a RegisterBrokerBody carries (``TopicConfigAndMappingSerializeWrapper``): the
    topic table plus the static-topic mappings (kept as raw JSON, see the module docstring)."""

    topic_queue_mapping_info_map: dict[str, Any] = field(default_factory=dict)
    topic_queue_mapping_detail_map: dict[str, Any] = field(default_factory=dict)
    mapping_data_version: DataVersion = field(default_factory=_zero_version)

    def to_json_dict(self) -> dict[str, Any]:
        return {
            "dataVersion": self.data_version.to_json_dict(),
            "mappingDataVersion": self.mapping_data_version.to_json_dict(),
            "topicConfigTable": {name: tc.to_json_dict() for name, tc in self.topic_config_table.items()},
            "topicQueueMappingDetailMap": dict(self.topic_queue_mapping_detail_map),
            "topicQueueMappingInfoMap": dict(self.topic_queue_mapping_info_map),
        }

    @classmethod
    def from_json_dict(cls, data: Any, where: str = "topicConfigSerializeWrapper") -> TopicConfigAndMappingSerializeWrapper:
        obj = check_object(data, where)
        mapping_version = obj.get("mappingDataVersion")
        return cls(
            **cls._common_fields(obj, where),
            topic_queue_mapping_info_map=check_object(obj.get("topicQueueMappingInfoMap") or {},
                                                      f"{where}.topicQueueMappingInfoMap"),
            topic_queue_mapping_detail_map=check_object(obj.get("topicQueueMappingDetailMap") or {},
                                                        f"{where}.topicQueueMappingDetailMap"),
            mapping_data_version=_zero_version() if mapping_version is None
            else DataVersion.from_json_dict(mapping_version, f"{where}.mappingDataVersion"),
        )

    @classmethod
    def from_wrapper(cls, wrapper: TopicConfigSerializeWrapper) -> TopicConfigAndMappingSerializeWrapper:
        """``TopicConfigAndMappingSerializeWrapper.from``: the same table and version, no mappings."""
        if isinstance(wrapper, TopicConfigAndMappingSerializeWrapper):
            return wrapper
        return cls(topic_config_table=wrapper.topic_config_table, data_version=wrapper.data_version)


# ---------------------------------------------------------------------------------------------
# TopicConfig.encode / decode: the compressed body's one-line topic format


def topic_config_encode(tc: TopicConfig) -> str:
    """``TopicConfig.encode()``: ``name read write perm FILTER {attributes}`` (single spaces)."""
    attrs = remoting_serializable.to_json({k: tc.attributes[k] for k in hash_map_order(tc.attributes, 16)})
    return f"{tc.topic_name} {tc.read_queue_nums} {tc.write_queue_nums} {tc.perm} {tc.topic_filter_type.value} {attrs}"


def topic_config_decode(text: str) -> TopicConfig:
    """``TopicConfig.decode()``; ``ValueError`` where Java's decode fails or returns false."""
    parts = text.split(" ")
    while parts and parts[-1] == "":  # Java's split drops trailing empty strings
        parts.pop()
    if len(parts) < 5:
        raise ValueError(f"topic config {text!r} has {len(parts)} fields, 5 needed")
    try:
        filter_type = TopicFilterType(parts[4])
    except ValueError:
        raise ValueError(f"topic config {text!r}: {parts[4]!r} is not a topic filter type") from None
    tc = TopicConfig(parts[0], java_parse_int(parts[1], 32), java_parse_int(parts[2], 32),
                     java_parse_int(parts[3], 32), filter_type)
    if len(parts) >= 6:
        # Java ignores an attributes field it cannot parse (a value with a space was split).
        try:
            attrs = json.loads(parts[5])
        except ValueError:
            attrs = None
        if isinstance(attrs, dict) and all(isinstance(k, str) and isinstance(v, str) for k, v in attrs.items()):
            tc.attributes = attrs
    return tc


def _read_exactly(stream: io.BytesIO, n: int, what: str) -> bytes:
    if n < 0:
        raise ValueError(f"compressed body: negative length {n} for {what}")
    data = stream.read(n)
    if len(data) != n:
        raise ValueError(f"compressed body: end of compressed data has reached in {what}")
    return data


def _read_int(stream: io.BytesIO, what: str) -> int:
    return _INT.unpack(_read_exactly(stream, 4, what))[0]


def _read_text(stream: io.BytesIO, what: str) -> str:
    raw = _read_exactly(stream, _read_int(stream, f"{what} length"), what)
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as e:
        raise ValueError(f"compressed body: {what} is not UTF-8 ({e.reason})") from None


def _looks_like_zlib(data: bytes) -> bool:
    # A zlib header: CM=8 (deflate) in the low nibble and a check value making it a multiple of 31.
    return len(data) >= 2 and data[0] & 0x0F == 8 and ((data[0] << 8) | data[1]) % 31 == 0


@dataclass
class RegisterBrokerBody:
    """The REGISTER_BROKER body (``RegisterBrokerBody``): the topic table and filter servers."""

    topic_config_serialize_wrapper: TopicConfigAndMappingSerializeWrapper = field(
        default_factory=TopicConfigAndMappingSerializeWrapper)
    filter_server_list: list[str] = field(default_factory=list)

    def to_json_dict(self) -> dict[str, Any]:
        return {
            "filterServerList": list(self.filter_server_list),
            "topicConfigSerializeWrapper": self.topic_config_serialize_wrapper.to_json_dict(),
        }

    def encode(self, compress: bool = False) -> bytes:
        """``encode(compress)``: JSON, or the zlib format of the module docstring."""
        if not compress:
            return remoting_serializable.encode(self.to_json_dict())
        wrapper = self.topic_config_serialize_wrapper
        out = io.BytesIO()

        def put(data: bytes) -> None:
            out.write(_INT.pack(len(data)))
            out.write(data)

        put(wrapper.data_version.to_json().encode("utf-8"))
        out.write(_INT.pack(len(wrapper.topic_config_table)))
        for tc in wrapper.topic_config_table.values():
            put(topic_config_encode(tc).encode("utf-8"))
        put(remoting_serializable.encode(list(self.filter_server_list)))
        # Java always writes the mapping section, as a count of 0 when there are no mappings.
        out.write(_INT.pack(len(wrapper.topic_queue_mapping_info_map)))
        for info in wrapper.topic_queue_mapping_info_map.values():
            put(remoting_serializable.encode(info))
        return zlib.compress(out.getvalue(), 9)

    @classmethod
    def decode(cls, data: bytes | None, compressed: bool, broker_version: int) -> RegisterBrokerBody:
        """``RegisterBrokerBody.decode(data, compressed, brokerVersion)``; ``ValueError`` saying
        what is wrong. No body is an empty registration with DataVersion 0/0/0, as
        ``DefaultRequestProcessor.extractRegisterBrokerBodyFromRequest`` makes it."""
        if data is None:
            return cls()
        if not compressed:
            try:
                doc = remoting_serializable.decode_json(data, "RegisterBrokerBody")
            except ValueError as e:
                if _looks_like_zlib(data):
                    raise ValueError(f"{e} (the body looks zlib-compressed but the header's compressed "
                                     "field is false; a RocketMQ broker with compressedRegister=true "
                                     "sends that)") from None
                raise
            return cls.from_json_dict(doc)
        try:
            raw = zlib.decompress(data)
        except zlib.error as e:
            raise ValueError(f"RegisterBrokerBody: compressed=true but the body is not a zlib stream ({e})") from None
        stream = io.BytesIO(raw)
        version = DataVersion.from_json_dict(
            remoting_serializable.decode_json(_read_text(stream, "dataVersion").encode("utf-8"), "dataVersion"))
        table: dict[str, TopicConfig] = {}
        for i in range(_read_int(stream, "topic count")):
            tc = topic_config_decode(_read_text(stream, f"topic config {i}"))
            table[tc.topic_name] = tc
        filter_text = _read_text(stream, "filterServerList")
        try:
            filters = json.loads(filter_text)
        except ValueError:
            filters = []  # Java logs the parse error and goes on with an empty list
        if not isinstance(filters, list) or not all(isinstance(f, str) for f in filters):
            filters = []
        mappings: dict[str, Any] = {}
        if broker_version >= MQVersion.V5_0_0:
            for i in range(_read_int(stream, "topic queue mapping count")):
                info = check_object(remoting_serializable.decode_json(
                    _read_text(stream, f"topic queue mapping {i}").encode("utf-8"), "TopicQueueMappingInfo"),
                    "TopicQueueMappingInfo")
                mappings[check_str(info.get("topic"), "TopicQueueMappingInfo.topic")] = info
        wrapper = TopicConfigAndMappingSerializeWrapper(topic_config_table=table, data_version=version,
                                                        topic_queue_mapping_info_map=mappings)
        return cls(wrapper, filters)

    @classmethod
    def from_json_dict(cls, data: Any, where: str = "RegisterBrokerBody") -> RegisterBrokerBody:
        obj = check_object(data, where)
        filters = obj.get("filterServerList")
        if filters is not None and (not isinstance(filters, list) or not all(isinstance(f, str) for f in filters)):
            raise ValueError(f"{where}.filterServerList: expected an array of strings")
        wrapper = obj.get("topicConfigSerializeWrapper")
        return cls(
            topic_config_serialize_wrapper=TopicConfigAndMappingSerializeWrapper()
            if wrapper is None else TopicConfigAndMappingSerializeWrapper.from_json_dict(
                wrapper, f"{where}.topicConfigSerializeWrapper"),
            filter_server_list=list(filters) if filters is not None else [],
        )
