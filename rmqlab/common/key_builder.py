"""KeyBuilder: the names POP consumption derives (RocketMQ 5
``common/src/main/java/org/apache/rocketmq/common/KeyBuilder.java``).

A message popped and neither acknowledged nor given more time in its invisible time is put
again, by the revive service, into the group's *pop retry topic*: ``%RETRY%<group>_<topic>``
(v1, the default, ``enableRetryTopicV2=false``) or ``%RETRY%<group>+<topic>`` (v2). Orderly
(FIFO) pops write no checkpoint; their acks name the pseudo revive queue 999
(``POP_ORDER_REVIVE_QUEUE``).
"""

from __future__ import annotations

from rmqlab.common.mix_all import RETRY_GROUP_TOPIC_PREFIX
from rmqlab.common.pop_ack_constants import SPLIT

POP_ORDER_REVIVE_QUEUE = 999
POP_RETRY_SEPARATOR_V1 = "_"
POP_RETRY_SEPARATOR_V2 = "+"


def build_pop_retry_topic(topic: str, cid: str, enable_retry_v2: bool = False) -> str:
    """``buildPopRetryTopic(topic, cid, enableRetryV2)``."""
    return build_pop_retry_topic_v2(topic, cid) if enable_retry_v2 else build_pop_retry_topic_v1(topic, cid)


def build_pop_retry_topic_v1(topic: str, cid: str) -> str:
    return RETRY_GROUP_TOPIC_PREFIX + cid + POP_RETRY_SEPARATOR_V1 + topic


def build_pop_retry_topic_v2(topic: str, cid: str) -> str:
    return RETRY_GROUP_TOPIC_PREFIX + cid + POP_RETRY_SEPARATOR_V2 + topic


def is_pop_retry_topic_v2(retry_topic: str) -> bool:
    return retry_topic.startswith(RETRY_GROUP_TOPIC_PREFIX) and POP_RETRY_SEPARATOR_V2 in retry_topic


def parse_normal_topic(topic: str, cid: str | None = None) -> str:
    """``parseNormalTopic``: the topic a pop retry topic belongs to (a normal topic as is).

    With ``cid``: strip ``%RETRY%<cid>+`` or ``%RETRY%<cid>_``; without: only a v2 name can be
    split (``<group>+<topic>``)."""
    if cid is not None:
        if not topic.startswith(RETRY_GROUP_TOPIC_PREFIX):
            return topic
        v2 = RETRY_GROUP_TOPIC_PREFIX + cid + POP_RETRY_SEPARATOR_V2
        if topic.startswith(v2):
            return topic[len(v2):]
        return topic[len(RETRY_GROUP_TOPIC_PREFIX + cid + POP_RETRY_SEPARATOR_V1):]
    if is_pop_retry_topic_v2(topic):
        parts = topic.split(POP_RETRY_SEPARATOR_V2)
        if len(parts) == 2:
            return parts[1]
    return topic


def parse_group(retry_topic: str) -> str:
    if is_pop_retry_topic_v2(retry_topic):
        parts = retry_topic.split(POP_RETRY_SEPARATOR_V2)
        if len(parts) == 2:
            return parts[0][len(RETRY_GROUP_TOPIC_PREFIX):]
    return retry_topic[len(RETRY_GROUP_TOPIC_PREFIX):]


def build_polling_key(topic: str, cid: str, queue_id: int) -> str:
    """``buildPollingKey``: ``topic@cid@queueId`` (also the pop lock key)."""
    return f"{topic}{SPLIT}{cid}{SPLIT}{queue_id}"
