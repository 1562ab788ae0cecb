"""HEART_BEAT (34) body: HeartbeatData, ProducerData, ConsumerData, SubscriptionData.

RocketMQ: ``remoting/.../protocol/heartbeat/{HeartbeatData,ProducerData,ConsumerData,
SubscriptionData,ConsumeType,MessageModel}.java``, ``common/.../consumer/ConsumeFromWhere.java`` and
``remoting/.../protocol/filter/FilterAPI.java`` (building a subscription from "TagA || TagB").

Parsing is lenient where real clients differ from Java's fastjson output:

* enums arrive as names (Java, and some C++ builds: ``"CONSUME_PASSIVELY"``) or as ordinals (the
  C++ core in ``rocketmq`` 0.4.4: ``"consumeType": 1``); both, and digit strings, are accepted;
* sets may be absent or null (jsoncpp leaves empty arrays out), ``subVersion`` may be a number or a
  string (the C++ client writes ``UtilAll::to_string``), ``unitMode`` may be missing.

Anything else that does not fit the Java type raises ValueError naming the JSON path; the
processor answers it like Java's decoder failure (SYSTEM_ERROR).
"""

from __future__ import annotations

import enum
import json
from dataclasses import dataclass, field
from typing import Any

from rmqlab.common.config_manager import to_fastjson
from rmqlab.remoting.exceptions import RemotingCommandError
from rmqlab.remoting.remoting_command import JSON_MAX_DEPTH, json_depth_exceeds
from rmqlab.common.java_compat import INT32_MAX, INT32_MIN, INT64_MAX, INT64_MIN, java_parse_int, \
    java_string_hash_code

SUB_ALL = "*"  # SubscriptionData.SUB_ALL


class ConsumeType(enum.Enum):
    """Java ordinal order: the C++ client sends the ordinal."""

    CONSUME_ACTIVELY = "PULL"
    CONSUME_PASSIVELY = "PUSH"
    CONSUME_POP = "POP"


class MessageModel(enum.Enum):
    BROADCASTING = "BROADCASTING"
    CLUSTERING = "CLUSTERING"


class ConsumeFromWhere(enum.Enum):
    CONSUME_FROM_LAST_OFFSET = 0
    CONSUME_FROM_LAST_OFFSET_AND_FROM_MIN_WHEN_BOOT_FIRST = 1
    CONSUME_FROM_MIN_OFFSET = 2
    CONSUME_FROM_MAX_OFFSET = 3
    CONSUME_FROM_FIRST_OFFSET = 4
    CONSUME_FROM_TIMESTAMP = 5


class ExpressionType:
    """``ExpressionType``: how a subscription filters."""

    SQL92 = "SQL92"
    TAG = "TAG"

    @staticmethod
    def is_tag_type(expression_type: str | None) -> bool:
        return expression_type is None or expression_type == "" or expression_type == ExpressionType.TAG


def parse_enum(enum_cls: type[enum.Enum], value: Any, where: str) -> enum.Enum:
    """An enum from its name or its Java ordinal (a JSON number or a digit string)."""
    members = list(enum_cls)
    if isinstance(value, str):
        if value in enum_cls.__members__:
            return enum_cls.__members__[value]
        try:
            value = java_parse_int(value)
        except ValueError:
            raise ValueError(f"{where}: {value!r} is not one of {', '.join(m.name for m in members)} "
                             f"nor an ordinal 0..{len(members) - 1}") from None
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError(f"{where}: expected an enum name or ordinal, got {type(value).__name__} {value!r}")
    if not 0 <= value < len(members):
        raise ValueError(f"{where}: ordinal {value} is outside 0..{len(members) - 1} of {enum_cls.__name__}")
    return members[value]


def _opt_enum(enum_cls, obj: dict, key: str, where: str):
    value = obj.get(key)
    return None if value is None else parse_enum(enum_cls, value, f"{where}.{key}")


def _str(obj: dict, key: str, where: str, default: str | None = None) -> str | None:
    value = obj.get(key, default)
    if value is not None and not isinstance(value, str):
        raise ValueError(f"{where}.{key}: expected a string, got {type(value).__name__} {value!r}")
    return value


def _long(value: Any, where: str, low: int = INT64_MIN, high: int = INT64_MAX) -> int:
    if isinstance(value, str):
        try:
            value = java_parse_int(value, 64)
        except ValueError:
            raise ValueError(f"{where}: {value!r} is not an integer") from None
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError(f"{where}: expected an integer, got {type(value).__name__} {value!r}")
    if not low <= value <= high:
        raise ValueError(f"{where}: {value} is out of range")
    return value


def _bool(value: Any, where: str) -> bool:
    if isinstance(value, bool):
        return value
    if value in (0, 1, "0", "1"):
        return value in (1, "1")
    if isinstance(value, str) and value.lower() in ("true", "false"):
        return value.lower() == "true"
    raise ValueError(f"{where}: expected a boolean, got {type(value).__name__} {value!r}")


def _list(obj: dict, key: str, where: str) -> list:
    value = obj.get(key)
    if value is None:
        return []
    if not isinstance(value, list):
        raise ValueError(f"{where}.{key}: expected an array, got {type(value).__name__}")
    return value


def _object(value: Any, where: str) -> dict:
    if not isinstance(value, dict):
        raise ValueError(f"{where}: expected a JSON object, got {type(value).__name__}")
    return value


@dataclass
class SubscriptionData:
    topic: str
    sub_string: str = SUB_ALL
    tags_set: set[str] = field(default_factory=set)
    code_set: set[int] = field(default_factory=set)
    # Java initialises it with System.currentTimeMillis(); a decoded one always carries it.
    sub_version: int = 0
    expression_type: str = ExpressionType.TAG
    class_filter_mode: bool = False

    def to_json_dict(self) -> dict[str, Any]:
        # fastjson bean order; filterClassSource is @JSONField(serialize = false).
        return {"classFilterMode": self.class_filter_mode, "codeSet": sorted(self.code_set),
                "expressionType": self.expression_type, "subString": self.sub_string,
                "subVersion": self.sub_version, "tagsSet": sorted(self.tags_set), "topic": self.topic}

    @classmethod
    def from_json_dict(cls, data: Any, where: str) -> SubscriptionData:
        obj = _object(data, where)
        topic = _str(obj, "topic", where)
        if topic is None:
            raise ValueError(f"{where}.topic is missing")
        tags = set()
        for i, t in enumerate(_list(obj, "tagsSet", where)):
            if not isinstance(t, str):
                raise ValueError(f"{where}.tags_set[{i}]: expected a string, got {t!r}")
            tags.add(t)
        codes = {_long(c, f"{where}.code_set[{i}]", INT32_MIN, INT32_MAX)
                 for i, c in enumerate(_list(obj, "codeSet", where))}
        sub_version = obj.get("subVersion")
        return cls(topic=topic, sub_string=_str(obj, "subString", where, SUB_ALL) or "",
                   tags_set=tags, code_set=codes,
                   sub_version=0 if sub_version is None else _long(sub_version, f"{where}.subVersion"),
                   expression_type=_str(obj, "expressionType", where, ExpressionType.TAG) or ExpressionType.TAG,
                   class_filter_mode=_bool(obj.get("classFilterMode", False), f"{where}.class_filter_mode"))


def _java_split_double_pipe(text: str) -> list[str]:
    """``String.split("\\\\|\\\\|")``: like str.split, but Java drops trailing empty strings."""
    parts = text.split("||")
    while parts and parts[-1] == "":
        parts.pop()
    return parts


def build_subscription_data(topic: str, sub_string: str | None,
                            expression_type: str | None = None) -> SubscriptionData:
    """``FilterAPI.build``: a TAG subscription from "*" / "TagA || TagB" (each tag's code is its
    Java hashCode, what the consume queue stores), or an expression of another type kept as text.
    ValueError where Java throws (the processor answers SUBSCRIPTION_PARSE_FAILED)."""
    if not ExpressionType.is_tag_type(expression_type):
        if not sub_string:
            raise ValueError(f"Expression can't be null! {expression_type}")
        return SubscriptionData(topic=topic, sub_string=sub_string, expression_type=expression_type)
    data = SubscriptionData(topic=topic, sub_string=sub_string or SUB_ALL)
    if not sub_string or sub_string == SUB_ALL:
        data.sub_string = SUB_ALL
        return data
    tags = _java_split_double_pipe(sub_string)
    if not tags:
        raise ValueError("subString split error")
    for tag in (t.strip() for t in tags):
        if tag:
            data.tags_set.add(tag)
            data.code_set.add(java_string_hash_code(tag))
    return data


@dataclass
class ProducerData:
    group_name: str

    def to_json_dict(self) -> dict[str, Any]:
        return {"groupName": self.group_name}

    @classmethod
    def from_json_dict(cls, data: Any, where: str) -> ProducerData:
        obj = _object(data, where)
        name = _str(obj, "groupName", where)
        if name is None:
            raise ValueError(f"{where}.groupName is missing")
        return cls(name)


@dataclass
class ConsumerData:
    group_name: str
    consume_type: ConsumeType | None = None
    message_model: MessageModel | None = None
    consume_from_where: ConsumeFromWhere | None = None
    subscription_data_set: list[SubscriptionData] = field(default_factory=list)
    unit_mode: bool = False

    def to_json_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        if self.consume_from_where is not None:
            out["consumeFromWhere"] = self.consume_from_where.name
        if self.consume_type is not None:
            out["consumeType"] = self.consume_type.name
        out["groupName"] = self.group_name
        if self.message_model is not None:
            out["messageModel"] = self.message_model.name
        out["subscriptionDataSet"] = [s.to_json_dict() for s in self.subscription_data_set]
        out["unitMode"] = self.unit_mode
        return out

    @classmethod
    def from_json_dict(cls, data: Any, where: str) -> ConsumerData:
        obj = _object(data, where)
        name = _str(obj, "groupName", where)
        if name is None:
            raise ValueError(f"{where}.groupName is missing")
        subs = [SubscriptionData.from_json_dict(s, f"{where}.subscription_data_set[{i}]")
                for i, s in enumerate(_list(obj, "subscriptionDataSet", where))]
        return cls(group_name=name,
                   consume_type=_opt_enum(ConsumeType, obj, "consumeType", where),
                   message_model=_opt_enum(MessageModel, obj, "messageModel", where),
                   consume_from_where=_opt_enum(ConsumeFromWhere, obj, "consumeFromWhere", where),
                   subscription_data_set=subs,
                   unit_mode=_bool(obj.get("unitMode", False), f"{where}.unitMode"))


@dataclass
class HeartbeatData:
    client_id: str
    producer_data_set: list[ProducerData] = field(default_factory=list)
    consumer_data_set: list[ConsumerData] = field(default_factory=list)
    heartbeat_fingerprint: int = 0
    without_sub: bool = False

    def encode(self) -> bytes:
        """The body as a Java client's fastjson writes it (bean properties by name)."""
        return to_fastjson({
            "clientID": self.client_id,
            "consumerDataSet": [c.to_json_dict() for c in self.consumer_data_set],
            "heartbeatFingerprint": self.heartbeat_fingerprint,
            "producerDataSet": [p.to_json_dict() for p in self.producer_data_set],
            "withoutSub": self.without_sub,
        }).encode("utf-8")

    @classmethod
    def decode(cls, body: bytes | None) -> HeartbeatData:
        """Parse a HEART_BEAT body leniently (see the module docstring); RemotingCommandError (a
        ValueError) if it is not a heartbeat at all: a bad request, answered without a traceback."""
        try:
            return cls._decode(body)
        except RemotingCommandError:
            raise
        except ValueError as e:
            raise RemotingCommandError(str(e)) from None

    @classmethod
    def _decode(cls, body: bytes | None) -> HeartbeatData:
        if not body:
            raise ValueError("HEART_BEAT has no body")
        try:
            text = body.decode("utf-8")
            if json_depth_exceeds(text):
                raise ValueError(f"HEART_BEAT body nests more than {JSON_MAX_DEPTH} levels deep")
            doc = json.loads(text)
        except (UnicodeDecodeError, json.JSONDecodeError) as e:
            raise ValueError(f"HEART_BEAT body is not JSON: {e}") from None
        obj = _object(doc, "heartbeat")
        client_id = _str(obj, "clientID", "heartbeat")
        if client_id is None:
            raise ValueError("heartbeat.clientID is missing")
        fingerprint = obj.get("heartbeatFingerprint", 0)
        return cls(
            client_id=client_id,
            producer_data_set=[ProducerData.from_json_dict(p, f"heartbeat.producer_data_set[{i}]")
                             for i, p in enumerate(_list(obj, "producerDataSet", "heartbeat"))],
            consumer_data_set=[ConsumerData.from_json_dict(c, f"heartbeat.consumer_data_set[{i}]")
                             for i, c in enumerate(_list(obj, "consumerDataSet", "heartbeat"))],
            heartbeat_fingerprint=0 if fingerprint is None else _long(fingerprint, "heartbeat.heartbeat_fingerprint",
                                                                      INT32_MIN, INT32_MAX),
            # fastjson names the property of isWithoutSub() "withoutSub".
            without_sub=_bool(obj.get("withoutSub", False), "heartbeat.without_sub"),
        )
