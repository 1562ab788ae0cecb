"""Admin requests the rmqlab Admin client and SlaveSynchronize send to a broker, with their bodies.

RocketMQ: ``remoting/.../protocol/header/CreateTopicRequestHeader.java`` (UPDATE_AND_CREATE_TOPIC 17),
``GetConsumeStatsRequestHeader.java`` (GET_CONSUME_STATS 208), ``admin/ConsumeStats.java`` +
``admin/OffsetWrapper.java`` + ``common/message/MessageQueue.java``, ``body/KVTable.java``
(GET_BROKER_RUNTIME_INFO 28), ``body/SubscriptionGroupWrapper.java`` (GET_ALL_SUBSCRIPTIONGROUP_CONFIG
201) and ``body/ConsumerOffsetSerializeWrapper.java`` (GET_ALL_CONSUMER_OFFSET 43). GET_ALL_TOPIC_CONFIG
(21) answers with ``TopicConfigAndMappingSerializeWrapper`` (rmqlab.remoting.protocol.body), and
GET_ALL_DELAY_OFFSET (45) with delayOffset.json's text.

ConsumeStats is keyed by MessageQueue objects; fastjson writes such a map key as the key object's
JSON (``{{"brokerName":"b","queueId":0,"topic":"T"}:{...}}``), which is not standard JSON.
:meth:`ConsumeStats.encode` writes it that way and :meth:`ConsumeStats.decode` reads it back.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from rmqlab.common.config_manager import check_int, check_int_key, check_long, check_object
from rmqlab.common.data_version import DataVersion
from rmqlab.remoting.protocol import remoting_serializable
from rmqlab.remoting.protocol.header.command_custom_header import (
    BOOLEAN, INTEGER, STRING, CommandCustomHeader, header_field)
from rmqlab.remoting.protocol.subscription.subscription_group_config import SubscriptionGroupConfig


@dataclass
class CreateTopicRequestHeader(CommandCustomHeader):
    topic: str = header_field("topic", STRING, not_null=True)
    default_topic: str = header_field("defaultTopic", STRING, not_null=True)
    read_queue_nums: int = header_field("readQueueNums", INTEGER, not_null=True)
    write_queue_nums: int = header_field("writeQueueNums", INTEGER, not_null=True)
    perm: int = header_field("perm", INTEGER, not_null=True)
    topic_filter_type: str = header_field("topicFilterType", STRING, not_null=True)
    topic_sys_flag: int | None = header_field("topicSysFlag", INTEGER)
    order: bool = header_field("order", BOOLEAN, not_null=True, default=False)
    attributes: str | None = header_field("attributes", STRING)
    force: bool | None = header_field("force", BOOLEAN, default=False)


@dataclass
class GetConsumeStatsRequestHeader(CommandCustomHeader):
    consumer_group: str = header_field("consumerGroup", STRING, not_null=True)
    topic: str | None = header_field("topic", STRING)
    # Topics separated by ';' (RocketMQ 5.3); when given, the subscription check is skipped.
    topic_list: str | None = header_field("topicList", STRING)

    def fetch_topic_list(self) -> list[str]:
        """``fetchTopicList``: topicList split on ';', blanks dropped."""
        if not self.topic_list:
            return []
        return [t for t in self.topic_list.split(";") if t.strip()]


@dataclass
class KVTable:
    """``KVTable``: ``{"table":{key: value}}`` (the broker runtime info of ``mqadmin brokerStatus``)."""

    table: dict[str, str] = field(default_factory=dict)

    def encode(self) -> bytes:
        # Deviation: Java writes its HashMap in hash order; rmqlab sorts the keys.
        return remoting_serializable.encode({"table": {k: self.table[k] for k in sorted(self.table)}})

    @classmethod
    def decode(cls, body: bytes) -> KVTable:
        doc = check_object(remoting_serializable.decode_json(body, "KVTable"), "KVTable")
        table = check_object(doc.get("table") or {}, "KVTable.table")
        if not all(isinstance(v, str) for v in table.values()):
            raise ValueError("KVTable.table: every value must be a string")
        return cls(dict(table))


@dataclass(frozen=True, order=True)
class MessageQueue:
    """``MessageQueue``: one queue of a topic on one broker group."""

    topic: str
    broker_name: str
    queue_id: int

    def to_json_dict(self) -> dict[str, Any]:
        return {"brokerName": self.broker_name, "queueId": self.queue_id, "topic": self.topic}

    @classmethod
    def from_json_dict(cls, data: Any, where: str) -> MessageQueue:
        obj = check_object(data, where)
        return cls(topic=obj.get("topic"), broker_name=obj.get("brokerName"),
                   queue_id=check_int(obj.get("queueId", 0), f"{where}.queueId"))


@dataclass
class OffsetWrapper:
    broker_offset: int = 0
    consumer_offset: int = 0
    pull_offset: int = 0
    last_timestamp: int = 0

    def to_json_dict(self) -> dict[str, Any]:
        return {"brokerOffset": self.broker_offset, "consumerOffset": self.consumer_offset,
                "lastTimestamp": self.last_timestamp, "pullOffset": self.pull_offset}

    @classmethod
    def from_json_dict(cls, data: Any, where: str) -> OffsetWrapper:
        obj = check_object(data, where)
        return cls(*(check_long(obj.get(k, 0), f"{where}.{k}")
                     for k in ("brokerOffset", "consumerOffset", "pullOffset", "lastTimestamp")))


def _java_double(value: float) -> str:
    """``Double.toString`` for the values consumeTps takes (finite, not in exponent range)."""
    text = repr(float(value))
    return text if "e" not in text and "E" not in text else f"{value:.17g}"


@dataclass
class ConsumeStats:
    """``ConsumeStats``: per queue the broker's max offset, the group's committed and pulled
    offsets and the store time of the last consumed message (``mqadmin consumerProgress``)."""

    offset_table: dict[MessageQueue, OffsetWrapper] = field(default_factory=dict)
    consume_tps: float = 0.0

    def compute_total_diff(self) -> int:
        """``computeTotalDiff``: messages not consumed yet, over all queues."""
        return sum(w.broker_offset - w.consumer_offset for w in self.offset_table.values())

    def encode(self) -> bytes:
        entries = ",".join(
            remoting_serializable.to_json(mq.to_json_dict()) + ":" + remoting_serializable.to_json(w.to_json_dict())
            for mq, w in sorted(self.offset_table.items()))
        return ('{"consumeTps":' + _java_double(self.consume_tps) + ',"offsetTable":{' + entries + "}}").encode("utf-8")

    @classmethod
    def decode(cls, body: bytes) -> ConsumeStats:
        """Read what :meth:`encode` (or fastjson) writes, object keys included."""
        text = body.decode("utf-8")
        decoder = json.JSONDecoder()
        key = '"offsetTable":'
        start = text.find(key)
        table: dict[MessageQueue, OffsetWrapper] = {}
        rest = text
        if start >= 0:
            pos = start + len(key)
            if text[pos] != "{":
                raise ValueError("ConsumeStats.offsetTable: expected an object")
            pos += 1
            while text[pos] != "}":
                mq_json, pos = decoder.raw_decode(text, pos)
                if text[pos] != ":":
                    raise ValueError(f"ConsumeStats.offsetTable: ':' expected at {pos}")
                wrapper_json, pos = decoder.raw_decode(text, pos + 1)
                mq = MessageQueue.from_json_dict(mq_json, "ConsumeStats.offsetTable key")
                table[mq] = OffsetWrapper.from_json_dict(wrapper_json, f"ConsumeStats.offsetTable[{mq}]")
                if text[pos] == ",":
                    pos += 1
            rest = text[:start] + '"offsetTable":{}' + text[pos + 1:]
        doc = check_object(json.loads(rest), "ConsumeStats")
        tps = doc.get("consumeTps", 0.0)
        if isinstance(tps, bool) or not isinstance(tps, (int, float)):
            raise ValueError(f"ConsumeStats.consumeTps: expected a number, got {tps!r}")
        return cls(table, float(tps))


@dataclass
class SubscriptionGroupWrapper:
    """``SubscriptionGroupWrapper``: the group table, forbidden bits and data version."""

    subscription_group_table: dict[str, SubscriptionGroupConfig] = field(default_factory=dict)
    forbidden_table: dict[str, dict[str, int]] = field(default_factory=dict)
    data_version: DataVersion = field(default_factory=DataVersion)

    def encode(self) -> bytes:
        return remoting_serializable.encode({
            "dataVersion": self.data_version.to_json_dict(),
            "forbiddenTable": {g: dict(sorted(t.items())) for g, t in sorted(self.forbidden_table.items())},
            "subscriptionGroupTable": {g: c.to_json_dict() for g, c in sorted(self.subscription_group_table.items())},
        })

    @classmethod
    def decode(cls, body: bytes) -> SubscriptionGroupWrapper:
        doc = check_object(remoting_serializable.decode_json(body, "SubscriptionGroupWrapper"),
                           "SubscriptionGroupWrapper")
        groups = {}
        for name, entry in check_object(doc.get("subscriptionGroupTable") or {}, "subscriptionGroupTable").items():
            groups[name] = SubscriptionGroupConfig.from_json_dict(entry, f"subscriptionGroupTable.{name}")
        forbidden = {g: {t: check_int(v, f"forbiddenTable.{g}.{t}") for t, v in check_object(ts, g).items()}
                     for g, ts in check_object(doc.get("forbiddenTable") or {}, "forbiddenTable").items()}
        version = doc.get("dataVersion")
        return cls(groups, forbidden, DataVersion() if version is None else DataVersion.from_json_dict(version))


@dataclass
class ConsumerOffsetSerializeWrapper:
    """``ConsumerOffsetSerializeWrapper``: what GET_ALL_CONSUMER_OFFSET's body (the master's
    consumerOffset.json text) is read as on the slave."""

    offset_table: dict[str, dict[int, int]] = field(default_factory=dict)
    data_version: DataVersion = field(default_factory=DataVersion)

    @classmethod
    def decode(cls, body: bytes) -> ConsumerOffsetSerializeWrapper:
        doc = check_object(remoting_serializable.decode_json(body, "ConsumerOffsetSerializeWrapper"),
                           "ConsumerOffsetSerializeWrapper")
        table: dict[str, dict[int, int]] = {}
        for key, queues in check_object(doc.get("offsetTable") or {}, "offsetTable").items():
            table[key] = {check_int_key(q, f"offsetTable.{key}"): check_long(o, f"offsetTable.{key}[{q}]")
                          for q, o in check_object(queues, f"offsetTable.{key}").items()}
        version = doc.get("dataVersion")
        return cls(table, DataVersion() if version is None else DataVersion.from_json_dict(version))


@dataclass
class GetTopicConfigRequestHeader(CommandCustomHeader):
    """GET_TOPIC_CONFIG (351); the Proxy reads a topic's message type with it."""
    topic: str = header_field("topic", STRING, not_null=True)
    lo: bool | None = header_field("lo", BOOLEAN)


@dataclass
class GetSubscriptionGroupConfigRequestHeader(CommandCustomHeader):
    """GET_SUBSCRIPTIONGROUP_CONFIG (352); the Proxy reads a group's consumeMessageOrderly with it."""
    group: str = header_field("group", STRING, not_null=True)
