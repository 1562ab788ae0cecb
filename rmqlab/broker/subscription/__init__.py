"""Consumer groups: subscriptionGroup.json (RocketMQ broker/subscription). SubscriptionGroupConfig is in
rmqlab.remoting.protocol.subscription, as in RocketMQ."""

from rmqlab.broker.subscription.subscription_group_manager import SubscriptionGroupManager

__all__ = ["SubscriptionGroupManager"]
