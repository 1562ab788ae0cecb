"""SubscriptionGroupConfig: one consumer group's settings on a broker.

Implements ``remoting/src/main/java/org/apache/rocketmq/remoting/protocol/subscription/``
``SubscriptionGroupConfig.java`` with its nested ``GroupRetryPolicy.java`` (plus
``ExponentialRetryPolicy`` / ``CustomizedRetryPolicy``) and ``SimpleSubscriptionData.java``.
JSON keys are the bean properties fastjson writes, in its alphabetical order; ``null`` properties
(an unset ``subscriptionDataSet``, an unset retry policy) are omitted.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import Any

from rmqlab.common.config_manager import (
    check_bool,
    check_int,
    check_long,
    check_object,
    check_str,
    check_str_map,
)

MASTER_ID = 0

# CustomizedRetryPolicy's default "next": 1s 5s 10s 30s 1m ... 2h, the delay levels in millis.
DEFAULT_CUSTOMIZED_NEXT = (
    1000, 5000, 10000, 30000, 60000, 120000, 180000, 240000, 300000, 360000,
    420000, 480000, 540000, 600000, 1200000, 1800000, 3600000, 7200000,
)  # fmt: skip


class GroupRetryPolicyType(enum.Enum):
    EXPONENTIAL = "EXPONENTIAL"
    CUSTOMIZED = "CUSTOMIZED"


@dataclass
class ExponentialRetryPolicy:
    """Retry delay ``min(max, initial * multiplier ** reconsumeTimes)`` (times capped at 32)."""

    initial: int = 5000
    max: int = 7200000
    multiplier: int = 2

    def next_delay_duration(self, reconsume_times: int) -> int:
        times = min(max(reconsume_times, 0), 32)
        return min(self.max, self.initial * self.multiplier**times)

    def to_json_dict(self) -> dict[str, Any]:
        return {"initial": self.initial, "max": self.max, "multiplier": self.multiplier}

    @classmethod
    def from_json_dict(cls, data: Any, where: str) -> ExponentialRetryPolicy:
        obj = check_object(data, where)
        return cls(
            initial=check_long(obj.get("initial", 5000), f"{where}.initial"),
            max=check_long(obj.get("max", 7200000), f"{where}.max"),
            multiplier=check_long(obj.get("multiplier", 2), f"{where}.multiplier"),
        )


@dataclass
class CustomizedRetryPolicy:
    """Retry delay ``next[reconsumeTimes + 2]`` (clamped to the last entry)."""

    next: list[int] = field(default_factory=lambda: list(DEFAULT_CUSTOMIZED_NEXT))

    def next_delay_duration(self, reconsume_times: int) -> int:
        index = min(max(reconsume_times, 0) + 2, len(self.next) - 1)
        return self.next[index]

    def to_json_dict(self) -> dict[str, Any]:
        return {"next": list(self.next)}

    @classmethod
    def from_json_dict(cls, data: Any, where: str) -> CustomizedRetryPolicy:
        obj = check_object(data, where)
        raw = obj.get("next", list(DEFAULT_CUSTOMIZED_NEXT))
        if not isinstance(raw, list):
            raise ValueError(f"{where}.next: expected an array of integers")
        return cls([check_long(v, f"{where}.next[{i}]") for i, v in enumerate(raw)])


@dataclass
class GroupRetryPolicy:
    """``GroupRetryPolicy``: which retry schedule the group's messages follow."""

    type: GroupRetryPolicyType = GroupRetryPolicyType.CUSTOMIZED
    exponential_retry_policy: ExponentialRetryPolicy | None = None
    customized_retry_policy: CustomizedRetryPolicy | None = None

    def retry_policy(self) -> ExponentialRetryPolicy | CustomizedRetryPolicy:
        """``getRetryPolicy`` (not serialised): the configured policy, else the default customized one."""
        if self.type is GroupRetryPolicyType.EXPONENTIAL and self.exponential_retry_policy is not None:
            return self.exponential_retry_policy
        if self.type is GroupRetryPolicyType.CUSTOMIZED and self.customized_retry_policy is not None:
            return self.customized_retry_policy
        return CustomizedRetryPolicy()

    def to_json_dict(self) -> dict[str, Any]:
        return {
            "customizedRetryPolicy": (
                self.customized_retry_policy.to_json_dict() if self.customized_retry_policy else None
            ),
            "exponentialRetryPolicy": (
                self.exponential_retry_policy.to_json_dict() if self.exponential_retry_policy else None
            ),
            "type": self.type.value,
        }

    @classmethod
    def from_json_dict(cls, data: Any, where: str) -> GroupRetryPolicy:
        obj = check_object(data, where)
        type_name = check_str(obj.get("type", "CUSTOMIZED"), f"{where}.type")
        try:
            policy_type = GroupRetryPolicyType(type_name)
        except ValueError:
            raise ValueError(f"{where}.type: {type_name!r} is not one of EXPONENTIAL, CUSTOMIZED") from None
        exp = obj.get("exponentialRetryPolicy")
        cust = obj.get("customizedRetryPolicy")
        return cls(
            policy_type,
            ExponentialRetryPolicy.from_json_dict(exp, f"{where}.exponentialRetryPolicy") if exp is not None else None,
            CustomizedRetryPolicy.from_json_dict(cust, f"{where}.customizedRetryPolicy") if cust is not None else None,
        )


@dataclass(frozen=True)
class SimpleSubscriptionData:
    """``SimpleSubscriptionData``; equality ignores ``version`` as in Java."""

    topic: str
    expression_type: str
    expression: str
    version: int = field(default=0, compare=False)

    def to_json_dict(self) -> dict[str, Any]:
        return {
            "expression": self.expression,
            "expressionType": self.expression_type,
            "topic": self.topic,
            "version": self.version,
        }

    @classmethod
    def from_json_dict(cls, data: Any, where: str) -> SimpleSubscriptionData:
        obj = check_object(data, where)

        def opt_str(key: str) -> Any:
            value = obj.get(key)
            return None if value is None else check_str(value, f"{where}.{key}")

        return cls(
            topic=opt_str("topic"),
            expression_type=opt_str("expressionType"),
            expression=opt_str("expression"),
            version=check_long(obj.get("version", 0), f"{where}.version"),
        )


@dataclass
class SubscriptionGroupConfig:
    """One entry of subscriptionGroup.json's ``subscriptionGroupTable``, with RocketMQ's defaults."""

    group_name: str
    consume_enable: bool = True
    consume_from_min_enable: bool = True
    consume_broadcast_enable: bool = True
    consume_message_orderly: bool = False
    retry_queue_nums: int = 1
    retry_max_times: int = 16
    group_retry_policy: GroupRetryPolicy = field(default_factory=GroupRetryPolicy)
    broker_id: int = MASTER_ID
    # Which broker a slow consumer is redirected to (1 = the first slave).
    which_broker_when_consume_slowly: int = 1
    notify_consumer_ids_changed_enable: bool = True
    group_sys_flag: int = 0
    # Only valid for push consumers.
    consume_timeout_minute: int = 15
    subscription_data_set: list[SimpleSubscriptionData] | None = None
    attributes: dict[str, str] = field(default_factory=dict)

    def to_json_dict(self) -> dict[str, Any]:
        return {
            "attributes": dict(self.attributes),
            "brokerId": self.broker_id,
            "consumeBroadcastEnable": self.consume_broadcast_enable,
            "consumeEnable": self.consume_enable,
            "consumeFromMinEnable": self.consume_from_min_enable,
            "consumeMessageOrderly": self.consume_message_orderly,
            "consumeTimeoutMinute": self.consume_timeout_minute,
            "groupName": self.group_name,
            "groupRetryPolicy": self.group_retry_policy.to_json_dict(),
            "groupSysFlag": self.group_sys_flag,
            "notifyConsumerIdsChangedEnable": self.notify_consumer_ids_changed_enable,
            "retryMaxTimes": self.retry_max_times,
            "retryQueueNums": self.retry_queue_nums,
            "subscriptionDataSet": (
                None if self.subscription_data_set is None else [s.to_json_dict() for s in self.subscription_data_set]
            ),
            "whichBrokerWhenConsumeSlowly": self.which_broker_when_consume_slowly,
        }

    @classmethod
    def from_json_dict(cls, data: Any, where: str) -> SubscriptionGroupConfig:
        """Parse one entry; absent properties keep the Java defaults, as fastjson leaves them."""
        obj = check_object(data, where)
        if obj.get("groupName") is None:
            raise ValueError(f"{where}: groupName is missing")
        defaults = cls(group_name="")

        def flag(key: str, default: bool) -> bool:
            return check_bool(obj.get(key, default), f"{where}.{key}")

        def number(key: str, default: int, java_type: str = "int") -> int:
            return check_int(obj.get(key, default), f"{where}.{key}", java_type)

        raw_set = obj.get("subscriptionDataSet")
        if raw_set is not None and not isinstance(raw_set, list):
            raise ValueError(f"{where}.subscriptionDataSet: expected an array")
        policy = obj.get("groupRetryPolicy")
        return cls(
            group_name=check_str(obj["groupName"], f"{where}.groupName"),
            consume_enable=flag("consumeEnable", defaults.consume_enable),
            consume_from_min_enable=flag("consumeFromMinEnable", defaults.consume_from_min_enable),
            consume_broadcast_enable=flag("consumeBroadcastEnable", defaults.consume_broadcast_enable),
            consume_message_orderly=flag("consumeMessageOrderly", defaults.consume_message_orderly),
            retry_queue_nums=number("retryQueueNums", defaults.retry_queue_nums),
            retry_max_times=number("retryMaxTimes", defaults.retry_max_times),
            group_retry_policy=(
                GroupRetryPolicy.from_json_dict(policy, f"{where}.groupRetryPolicy")
                if policy is not None
                else GroupRetryPolicy()
            ),
            broker_id=number("brokerId", defaults.broker_id, "long"),
            which_broker_when_consume_slowly=number(
                "whichBrokerWhenConsumeSlowly", defaults.which_broker_when_consume_slowly, "long"
            ),
            notify_consumer_ids_changed_enable=flag(
                "notifyConsumerIdsChangedEnable", defaults.notify_consumer_ids_changed_enable
            ),
            group_sys_flag=number("groupSysFlag", defaults.group_sys_flag),
            consume_timeout_minute=number("consumeTimeoutMinute", defaults.consume_timeout_minute),
            subscription_data_set=(
                None
                if raw_set is None
                else [
                    SimpleSubscriptionData.from_json_dict(item, f"{where}.subscriptionDataSet[{i}]")
                    for i, item in enumerate(raw_set)
                ]
            ),
            attributes=check_str_map(obj.get("attributes", {}), f"{where}.attributes"),
        )
