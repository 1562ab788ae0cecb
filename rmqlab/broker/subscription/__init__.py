"""Consumer groups: SubscriptionGroupConfig and subscriptionGroup.json (RocketMQ broker/subscription)."""

from rmqlab.broker.subscription.subscription_group_config import (
    GroupRetryPolicy,
    SimpleSubscriptionData,
    SubscriptionGroupConfig,
)
from rmqlab.broker.subscription.subscription_group_manager import SubscriptionGroupManager

__all__ = ["GroupRetryPolicy", "SimpleSubscriptionData", "SubscriptionGroupConfig", "SubscriptionGroupManager"]
