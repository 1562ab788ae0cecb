"""MixAll's name constants (``common/src/main/java/org/apache/rocketmq/common/MixAll.java``)."""

RETRY_GROUP_TOPIC_PREFIX = "%RETRY%"
DLQ_GROUP_TOPIC_PREFIX = "%DLQ%"
REPLY_TOPIC_POSTFIX = "REPLY_TOPIC"
