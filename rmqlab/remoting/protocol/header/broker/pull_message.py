"""PULL_MESSAGE (11) headers and the pull sysFlag bits (``PullSysFlag``).

RocketMQ: ``remoting/.../protocol/header/PullMessageRequestHeader.java``,
``PullMessageResponseHeader.java`` and ``common/.../sysflag/PullSysFlag.java``. The C++ client's
PullConsumer sends sysFlag 4 (subscription), its PushConsumer 6 (suspend + subscription, plus 1 when
it piggybacks a commit offset); numbers arrive as JSON numbers.
"""

from __future__ import annotations

from dataclasses import dataclass

from rmqlab.remoting.protocol.header.command_custom_header import (
    INTEGER, LONG, STRING, CommandCustomHeader, header_field)


class PullSysFlag:
    """``PullSysFlag``: what a pull request asks for."""

    FLAG_COMMIT_OFFSET = 0x1
    FLAG_SUSPEND = 0x1 << 1
    FLAG_SUBSCRIPTION = 0x1 << 2
    FLAG_CLASS_FILTER = 0x1 << 3
    FLAG_LITE_PULL_MESSAGE = 0x1 << 4

    @staticmethod
    def build_sys_flag(commit_offset: bool, suspend: bool, subscription: bool, class_filter: bool = False,
                       lite_pull: bool = False) -> int:
        flag = 0
        if commit_offset:
            flag |= PullSysFlag.FLAG_COMMIT_OFFSET
        if suspend:
            flag |= PullSysFlag.FLAG_SUSPEND
        if subscription:
            flag |= PullSysFlag.FLAG_SUBSCRIPTION
        if class_filter:
            flag |= PullSysFlag.FLAG_CLASS_FILTER
        if lite_pull:
            flag |= PullSysFlag.FLAG_LITE_PULL_MESSAGE
        return flag

    @staticmethod
    def has_commit_offset_flag(sys_flag: int) -> bool:
        return (sys_flag & PullSysFlag.FLAG_COMMIT_OFFSET) == PullSysFlag.FLAG_COMMIT_OFFSET

    @staticmethod
    def has_suspend_flag(sys_flag: int) -> bool:
        return (sys_flag & PullSysFlag.FLAG_SUSPEND) == PullSysFlag.FLAG_SUSPEND

    @staticmethod
    def has_subscription_flag(sys_flag: int) -> bool:
        return (sys_flag & PullSysFlag.FLAG_SUBSCRIPTION) == PullSysFlag.FLAG_SUBSCRIPTION

    @staticmethod
    def has_class_filter_flag(sys_flag: int) -> bool:
        return (sys_flag & PullSysFlag.FLAG_CLASS_FILTER) == PullSysFlag.FLAG_CLASS_FILTER


@dataclass
class PullMessageRequestHeader(CommandCustomHeader):
    consumer_group: str = header_field("consumerGroup", STRING, not_null=True)
    topic: str = header_field("topic", STRING, not_null=True)
    queue_id: int = header_field("queueId", INTEGER, not_null=True)
    queue_offset: int = header_field("queueOffset", LONG, not_null=True)
    max_msg_nums: int = header_field("maxMsgNums", INTEGER, not_null=True)
    sys_flag: int = header_field("sysFlag", INTEGER, not_null=True)
    commit_offset: int = header_field("commitOffset", LONG, not_null=True)
    suspend_timeout_millis: int = header_field("suspendTimeoutMillis", LONG, not_null=True)
    subscription: str | None = header_field("subscription", STRING)
    sub_version: int = header_field("subVersion", LONG, not_null=True)
    expression_type: str | None = header_field("expressionType", STRING)
    max_msg_bytes: int | None = header_field("maxMsgBytes", INTEGER)
    request_source: int | None = header_field("requestSource", INTEGER)
    proxy_froward_client_id: str | None = header_field("proxyFrowardClientId", STRING)  # sic: RocketMQ's spelling


@dataclass
class PullMessageResponseHeader(CommandCustomHeader):
    suggest_which_broker_id: int | None = header_field("suggestWhichBrokerId", LONG, not_null=True)
    next_begin_offset: int | None = header_field("nextBeginOffset", LONG, not_null=True)
    min_offset: int | None = header_field("minOffset", LONG, not_null=True)
    max_offset: int | None = header_field("maxOffset", LONG, not_null=True)
    offset_delta: int | None = header_field("offsetDelta", LONG)
    topic_sys_flag: int | None = header_field("topicSysFlag", INTEGER)
    group_sys_flag: int | None = header_field("groupSysFlag", INTEGER)
    forbidden_type: int | None = header_field("forbiddenType", INTEGER)


class ForbiddenType:
    """``ForbiddenType``: why a pull was refused with NO_PERMISSION (responseHeader.forbidden_type)."""

    BROKER_FORBIDDEN = 1
    GROUP_FORBIDDEN = 2
    TOPIC_FORBIDDEN = 3
    BROADCASTING_DISABLE_FORBIDDEN = 4
    SUBSCRIPTION_FORBIDDEN = 5
