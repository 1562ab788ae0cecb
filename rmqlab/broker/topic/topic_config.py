"""TopicConfig, its permission bits, and RocketMQ's topic/group name rules.

* :class:`TopicConfig` - ``common/src/main/java/org/apache/rocketmq/common/TopicConfig.java``
  (defaults: 16 read and 16 write queues, perm READ|WRITE, SINGLE_TAG, sysFlag 0, not ordered).
* :class:`PermName` - ``common/src/main/java/org/apache/rocketmq/common/constant/PermName.java``.
* :class:`TopicFilterType` - ``common/src/main/java/org/apache/rocketmq/common/TopicFilterType.java``.
* :class:`TopicValidator` - ``common/src/main/java/org/apache/rocketmq/common/topic/TopicValidator.java``
  plus the system-topic check ``AdminBrokerProcessor.updateAndCreateTopic`` adds.

They live beside the topic manager because the broker is their only user in rmqlab so far.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from rmqlab.common.config_manager import check_bool, check_int, check_object, check_str, check_str_map

# MixAll constants used by the name rules.
RETRY_GROUP_TOPIC_PREFIX = "%RETRY%"
DLQ_GROUP_TOPIC_PREFIX = "%DLQ%"
REPLY_TOPIC_POSTFIX = "REPLY_TOPIC"


class PermName:
    """Topic permission bits (``PermName``): 6 = read+write, 7 adds "inherit" (auto-create template)."""

    PERM_PRIORITY = 0x1 << 3
    PERM_READ = 0x1 << 2
    PERM_WRITE = 0x1 << 1
    PERM_INHERIT = 0x1 << 0

    @staticmethod
    def is_readable(perm: int) -> bool:
        return perm & PermName.PERM_READ == PermName.PERM_READ

    @staticmethod
    def is_writeable(perm: int) -> bool:
        return perm & PermName.PERM_WRITE == PermName.PERM_WRITE

    @staticmethod
    def is_inherited(perm: int) -> bool:
        return perm & PermName.PERM_INHERIT == PermName.PERM_INHERIT

    @staticmethod
    def is_valid(perm: int) -> bool:
        return 0 <= perm < PermName.PERM_PRIORITY

    @staticmethod
    def perm2string(perm: int) -> str:
        return (
            ("R" if PermName.is_readable(perm) else "-")
            + ("W" if PermName.is_writeable(perm) else "-")
            + ("X" if PermName.is_inherited(perm) else "-")
        )


class TopicFilterType(enum.Enum):
    SINGLE_TAG = "SINGLE_TAG"
    MULTI_TAG = "MULTI_TAG"


DEFAULT_READ_QUEUE_NUMS = 16
DEFAULT_WRITE_QUEUE_NUMS = 16


@dataclass
class TopicConfig:
    """One entry of topics.json's ``topicConfigTable`` (RocketMQ ``TopicConfig``)."""

    topic_name: str
    read_queue_nums: int = DEFAULT_READ_QUEUE_NUMS
    write_queue_nums: int = DEFAULT_WRITE_QUEUE_NUMS
    perm: int = PermName.PERM_READ | PermName.PERM_WRITE
    topic_filter_type: TopicFilterType = TopicFilterType.SINGLE_TAG
    topic_sys_flag: int = 0
    order: bool = False
    # RocketMQ: keys and values must not contain ' ' (TopicConfig.encode splits on it).
    attributes: dict[str, str] = field(default_factory=dict)

    def to_json_dict(self) -> dict[str, Any]:
        """fastjson bean properties, sorted by name (``getTopicMessageType`` is not serialised)."""
        return {
            "attributes": dict(self.attributes),
            "order": self.order,
            "perm": self.perm,
            "readQueueNums": self.read_queue_nums,
            "topicFilterType": self.topic_filter_type.value,
            "topicName": self.topic_name,
            "topicSysFlag": self.topic_sys_flag,
            "writeQueueNums": self.write_queue_nums,
        }

    @classmethod
    def from_json_dict(cls, data: Any, where: str) -> TopicConfig:
        """Parse one entry; absent properties keep the Java defaults, as fastjson leaves them."""
        obj = check_object(data, where)
        if "topicName" not in obj or obj["topicName"] is None:
            raise ValueError(f"{where}: topicName is missing")
        filter_name = check_str(obj.get("topicFilterType", "SINGLE_TAG"), f"{where}.topicFilterType")
        try:
            filter_type = TopicFilterType(filter_name)
        except ValueError:
            raise ValueError(
                f"{where}.topicFilterType: {filter_name!r} is not one of SINGLE_TAG, MULTI_TAG"
            ) from None
        return cls(
            topic_name=check_str(obj["topicName"], f"{where}.topicName"),
            read_queue_nums=check_int(obj.get("readQueueNums", DEFAULT_READ_QUEUE_NUMS), f"{where}.readQueueNums"),
            write_queue_nums=check_int(
                obj.get("writeQueueNums", DEFAULT_WRITE_QUEUE_NUMS), f"{where}.writeQueueNums"
            ),
            perm=check_int(obj.get("perm", PermName.PERM_READ | PermName.PERM_WRITE), f"{where}.perm"),
            topic_filter_type=filter_type,
            topic_sys_flag=check_int(obj.get("topicSysFlag", 0), f"{where}.topicSysFlag"),
            order=check_bool(obj.get("order", False), f"{where}.order"),
            attributes=check_str_map(obj.get("attributes", {}), f"{where}.attributes"),
        )

    def copy(self) -> TopicConfig:
        return TopicConfig(
            self.topic_name,
            self.read_queue_nums,
            self.write_queue_nums,
            self.perm,
            self.topic_filter_type,
            self.topic_sys_flag,
            self.order,
            dict(self.attributes),
        )


class ValidateResult(NamedTuple):
    """``TopicValidator.ValidateResult``: ``remark`` is RocketMQ's message when invalid."""

    valid: bool
    remark: str


class TopicValidator:
    """Topic and group name rules (``TopicValidator``)."""

    AUTO_CREATE_TOPIC_KEY_TOPIC = "TBW102"
    RMQ_SYS_SCHEDULE_TOPIC = "SCHEDULE_TOPIC_XXXX"
    RMQ_SYS_BENCHMARK_TOPIC = "BenchmarkTest"
    RMQ_SYS_TRANS_HALF_TOPIC = "RMQ_SYS_TRANS_HALF_TOPIC"
    RMQ_SYS_TRACE_TOPIC = "RMQ_SYS_TRACE_TOPIC"
    RMQ_SYS_TRANS_OP_HALF_TOPIC = "RMQ_SYS_TRANS_OP_HALF_TOPIC"
    RMQ_SYS_TRANS_CHECK_MAX_TIME_TOPIC = "TRANS_CHECK_MAX_TIME_TOPIC"
    RMQ_SYS_SELF_TEST_TOPIC = "SELF_TEST_TOPIC"
    RMQ_SYS_OFFSET_MOVED_EVENT = "OFFSET_MOVED_EVENT"
    RMQ_SYS_ROCKSDB_OFFSET_TOPIC = "CHECKPOINT_TOPIC"

    SYSTEM_TOPIC_PREFIX = "rmq_sys_"
    SYNC_BROKER_MEMBER_GROUP_PREFIX = SYSTEM_TOPIC_PREFIX + "SYNC_BROKER_MEMBER_"

    TOPIC_MAX_LENGTH = 127
    # Groups are shorter: they are embedded in %RETRY%<group> and %DLQ%<group> topic names.
    GROUP_MAX_LENGTH = 120
    RETRY_OR_DLQ_TOPIC_MAX_LENGTH = 255

    VALID_CHARS = frozenset("%|-_0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz")

    # The static SYSTEM_TOPIC_SET before any broker calls addSystemTopic.
    SYSTEM_TOPIC_SET = frozenset(
        {
            AUTO_CREATE_TOPIC_KEY_TOPIC,
            RMQ_SYS_SCHEDULE_TOPIC,
            RMQ_SYS_BENCHMARK_TOPIC,
            RMQ_SYS_TRANS_HALF_TOPIC,
            RMQ_SYS_TRACE_TOPIC,
            RMQ_SYS_TRANS_OP_HALF_TOPIC,
            RMQ_SYS_TRANS_CHECK_MAX_TIME_TOPIC,
            RMQ_SYS_SELF_TEST_TOPIC,
            RMQ_SYS_OFFSET_MOVED_EVENT,
            RMQ_SYS_ROCKSDB_OFFSET_TOPIC,
        }
    )
    # Topics a client may not send to.
    NOT_ALLOWED_SEND_TOPIC_SET = frozenset(
        {
            RMQ_SYS_SCHEDULE_TOPIC,
            RMQ_SYS_TRANS_HALF_TOPIC,
            RMQ_SYS_TRANS_OP_HALF_TOPIC,
            RMQ_SYS_TRANS_CHECK_MAX_TIME_TOPIC,
            RMQ_SYS_SELF_TEST_TOPIC,
            RMQ_SYS_OFFSET_MOVED_EVENT,
        }
    )

    @classmethod
    def is_topic_or_group_illegal(cls, name: str) -> bool:
        """True if ``name`` has a character outside ``^[%|a-zA-Z0-9_-]+$``."""
        return any(ch not in cls.VALID_CHARS for ch in name)

    @classmethod
    def validate_topic(cls, topic: str | None) -> ValidateResult:
        if topic is None or topic.strip() == "":
            return ValidateResult(False, "The specified topic is blank.")
        if cls.is_topic_or_group_illegal(topic):
            return ValidateResult(
                False,
                f"The specified topic: {topic}, contains illegal characters, allowing only ^[%|a-zA-Z0-9_-]+$",
            )
        if topic.startswith(RETRY_GROUP_TOPIC_PREFIX) or topic.startswith(DLQ_GROUP_TOPIC_PREFIX):
            if len(topic) > cls.RETRY_OR_DLQ_TOPIC_MAX_LENGTH:
                return ValidateResult(
                    False,
                    f"The specified topic is DLQ or Retry topic: {topic}, and it's longer than topic max "
                    f"length: {cls.RETRY_OR_DLQ_TOPIC_MAX_LENGTH}",
                )
        elif len(topic) > cls.TOPIC_MAX_LENGTH:
            return ValidateResult(
                False, f"The specified topic: {topic}, is longer than topic max length: {cls.TOPIC_MAX_LENGTH}"
            )
        return ValidateResult(True, "")

    @classmethod
    def validate_group(cls, group: str | None) -> ValidateResult:
        if group is None or group.strip() == "":
            return ValidateResult(False, "The specified group is blank.")
        if cls.is_topic_or_group_illegal(group):
            return ValidateResult(
                False,
                f"The specified group: {group}, contains illegal characters, allowing only ^[%|a-zA-Z0-9_-]+$",
            )
        if len(group) > cls.GROUP_MAX_LENGTH:
            return ValidateResult(
                False, f"The specified group: {group}, is longer than group max length: {cls.GROUP_MAX_LENGTH}"
            )
        return ValidateResult(True, "")

    @classmethod
    def is_system_topic(cls, topic: str, added_system_topics: frozenset[str] | set[str] = frozenset()) -> bool:
        """``isSystemTopic``. Deviation: RocketMQ's ``addSystemTopic`` grows one process-wide static
        set; rmqlab runs many brokers in one process, so each TopicConfigManager passes its own."""
        return (
            topic in cls.SYSTEM_TOPIC_SET
            or topic in added_system_topics
            or topic.startswith(cls.SYSTEM_TOPIC_PREFIX)
        )

    @classmethod
    def is_not_allowed_send_topic(cls, topic: str) -> bool:
        return topic in cls.NOT_ALLOWED_SEND_TOPIC_SET
