"""PopAckConstants: names and constants of POP consumption (RocketMQ 5
``common/src/main/java/org/apache/rocketmq/common/PopAckConstants.java``).

The broker keeps the state of POP consumption in a system topic of its own cluster,
``rmq_sys_REVIVE_LOG_<clusterName>`` (``reviveQueueNum`` queues, created with the other system
topics by TopicConfigManager): a checkpoint (tag ``ck``) when messages are popped, an ack (tag
``ack``) when one is acknowledged. The revive service reads those queues as the consumer group
``CID_RMQ_SYS_REVIVE_GROUP``; its consumer offset there is how far it got.
"""

from __future__ import annotations

# MixAll.CID_RMQ_SYS_PREFIX / TopicValidator.SYSTEM_TOPIC_PREFIX
CID_RMQ_SYS_PREFIX = "CID_RMQ_SYS_"
SYSTEM_TOPIC_PREFIX = "rmq_sys_"

ACK_TIME_INTERVAL = 1000   # ackTimeInterval: a ck becomes visible to the revive service 1 s early
SECOND = 1000
LOCK_TIME = 5000
RETRY_QUEUE_NUM = 1        # retryQueueNum: the queues of a pop retry topic
REVIVE_GROUP = CID_RMQ_SYS_PREFIX + "REVIVE_GROUP"
LOCAL_HOST = "127.0.0.1"
REVIVE_TOPIC = SYSTEM_TOPIC_PREFIX + "REVIVE_LOG_"
CK_TAG = "ck"
ACK_TAG = "ack"
BATCH_ACK_TAG = "bAck"
SPLIT = "@"


def build_cluster_revive_topic(cluster_name: str) -> str:
    """``buildClusterReviveTopic``: ``rmq_sys_REVIVE_LOG_<clusterName>``."""
    return REVIVE_TOPIC + cluster_name


def is_start_with_revive_prefix(topic_name: str | None) -> bool:
    return topic_name is not None and topic_name.startswith(REVIVE_TOPIC)
