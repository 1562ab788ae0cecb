"""MQVersion: the ``version`` number a remoting command carries, and the versions that change a format.

RocketMQ's ``common/src/main/java/org/apache/rocketmq/common/MQVersion.java``: a command's
``version`` header field is the ordinal of the sender's ``MQVersion.Version`` enum constant (the
enum lists every release since V3_0_0_SNAPSHOT, in order). The name server reads it to choose a
format, so rmqlab's brokers and clients must send a realistic one (RemotingCommand's default, 0,
reads as V3_0_0_SNAPSHOT, the oldest broker there is):

* REGISTER_BROKER from a broker older than V3_0_11 carries a bare TopicConfigSerializeWrapper as
  its body, newer ones a RegisterBrokerBody (``DefaultRequestProcessor.registerBroker``);
* a compressed RegisterBrokerBody holds the static-topic mapping section only from V5_0_0 on;
* GET_ROUTEINFO_BY_TOPIC from V4_9_4 on is answered with standard JSON (quoted map keys; see
  ``TopicRouteData.encode``), older clients get fastjson's default with bare integer keys.

The ordinals below were counted in the enum at commit 8fc57f1 (5.3.4-SNAPSHOT).
"""

from __future__ import annotations


class MQVersion:
    """Ordinals of ``MQVersion.Version`` that rmqlab needs (``Version.X.ordinal()``)."""

    V3_0_0_SNAPSHOT = 0
    V3_0_11 = 37
    # What the C++ client 0.4.4 (PyPI ``rocketmq``) sends in every request header (version=63).
    V3_1_8 = 63
    V4_9_4 = 401
    V5_0_0 = 413
    V5_3_3 = 479
    # MQVersion.CURRENT_VERSION of the RocketMQ release the reference describes; what a Java
    # broker or client of that release puts in every command it sends.
    CURRENT_VERSION = V5_3_3
