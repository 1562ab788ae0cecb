"""TopicValidator: RocketMQ's topic and group name rules and system topics.

``common/src/main/java/org/apache/rocketmq/common/topic/TopicValidator.java``, plus the system-topic
check ``AdminBrokerProcessor.updateAndCreateTopic`` adds.
"""

from __future__ import annotations

from typing import NamedTuple

from rmqlab.common.mix_all import DLQ_GROUP_TOPIC_PREFIX, RETRY_GROUP_TOPIC_PREFIX


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
