"""GrpcValidator (proxy/grpc/v2/common/GrpcValidator.java): names, tags, keys and invisible times
checked before anything reaches a broker, each failure a GrpcProxyException with the real
proxy's code (ILLEGAL_TOPIC, ILLEGAL_CONSUMER_GROUP, ILLEGAL_MESSAGE_TAG, ...)."""

from __future__ import annotations

import unicodedata

from rmqlab.common.topic.topic_validator import TopicValidator
from rmqlab.proto.v2 import definition_pb2 as pb
from rmqlab.proxy.grpc.v2.common import Code, GrpcProxyException

CID_RMQ_SYS_PREFIX = "CID_RMQ_SYS_"  # MixAll.isSysConsumerGroup


def contain_control_character(data: str) -> bool:
    """Guava's CharMatcher.javaIsoControl: U+0000-U+001F and U+007F-U+009F."""
    return any(unicodedata.category(c) == "Cc" for c in data)


def validate_topic(topic: pb.Resource | str) -> None:
    name = topic if isinstance(topic, str) else topic.name
    # Validators.checkTopic: blank, longer than 127, or characters outside ^[%|a-zA-Z0-9_-]+$.
    if not name.strip():
        raise GrpcProxyException(Code.ILLEGAL_TOPIC, "The specified topic is blank")
    if len(name) > TopicValidator.TOPIC_MAX_LENGTH:
        raise GrpcProxyException(Code.ILLEGAL_TOPIC,
                                 f"The specified topic is longer than topic max length {TopicValidator.TOPIC_MAX_LENGTH}.")
    if TopicValidator.is_topic_or_group_illegal(name):
        raise GrpcProxyException(Code.ILLEGAL_TOPIC, f"The specified topic[{name}] contains illegal characters, "
                                 "allowing only ^[%|a-zA-Z0-9_-]+$")
    if TopicValidator.is_system_topic(name):
        raise GrpcProxyException(Code.ILLEGAL_TOPIC, "cannot access system topic")


def validate_consumer_group(group: pb.Resource | str) -> None:
    name = group if isinstance(group, str) else group.name
    if not name.strip():
        raise GrpcProxyException(Code.ILLEGAL_CONSUMER_GROUP, "the specified group is blank")
    if len(name) > TopicValidator.GROUP_MAX_LENGTH:
        raise GrpcProxyException(Code.ILLEGAL_CONSUMER_GROUP, f"the specified group[{name}] is longer than group "
                                 f"max length: {TopicValidator.GROUP_MAX_LENGTH}.")
    if TopicValidator.is_topic_or_group_illegal(name):
        raise GrpcProxyException(Code.ILLEGAL_CONSUMER_GROUP, f"the specified group[{name}] contains illegal "
                                 "characters, allowing only ^[%|a-zA-Z0-9_-]+$")
    if name.startswith(CID_RMQ_SYS_PREFIX):
        raise GrpcProxyException(Code.ILLEGAL_CONSUMER_GROUP, "cannot use system consumer group")


def validate_invisible_time(invisible_ms: int, min_ms: int, max_ms: int) -> None:
    if invisible_ms < min_ms:
        raise GrpcProxyException(Code.ILLEGAL_INVISIBLE_TIME, f"the invisibleTime is too small. min is {min_ms}")
    if 0 < max_ms < invisible_ms:
        raise GrpcProxyException(Code.ILLEGAL_INVISIBLE_TIME, f"the invisibleTime is too large. max is {max_ms}")


def validate_tag(tag: str) -> None:
    if tag:
        if not tag.strip():
            raise GrpcProxyException(Code.ILLEGAL_MESSAGE_TAG, "tag cannot be the char sequence of whitespace")
        if "|" in tag:
            raise GrpcProxyException(Code.ILLEGAL_MESSAGE_TAG, "tag cannot contain '|'")
        if contain_control_character(tag):
            raise GrpcProxyException(Code.ILLEGAL_MESSAGE_TAG, "tag cannot contain control character")
