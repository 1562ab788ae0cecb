"""ExpressionMessageFilter: does a consume-queue unit match a subscription?

RocketMQ ``broker/src/main/java/org/apache/rocketmq/broker/filter/ExpressionMessageFilter.java``,
TAG part. The consume queue stores each message's tags code (the Java hashCode of its TAGS), so
"TagA || TagB" is matched without reading the commitlog: the unit matches when its code is in
the subscription's code set (compared as a Java int, ``tagsCode.intValue()``). Different tags with
equal hash codes therefore both match on the broker, as in RocketMQ; the client re-checks the tag
strings. "*", no subscription, class-filter mode and an unknown tags code match everything.

SQL92 filtering needs ``enablePropertyFilter`` (off by default), which rmqlab does not implement;
the pull processor refuses such subscriptions with RocketMQ's error before a filter is built.
"""

from __future__ import annotations

from rmqlab.common.java_compat import to_int32
from rmqlab.remoting.protocol.header.broker.heartbeat import SUB_ALL, ExpressionType, SubscriptionData


class ExpressionMessageFilter:
    def __init__(self, subscription_data: SubscriptionData | None):
        self.subscription_data = subscription_data

    def is_matched_by_consume_queue(self, tags_code: int | None) -> bool:
        sub = self.subscription_data
        if sub is None or sub.class_filter_mode:
            return True
        if ExpressionType.is_tag_type(sub.expression_type):
            if tags_code is None or sub.sub_string == SUB_ALL:
                return True
            return to_int32(tags_code) in sub.code_set
        return True

    __call__ = is_matched_by_consume_queue  # what DefaultMessageStore.get_message takes
