"""ClientRequestProcessor: GET_ROUTEINFO_BY_TOPIC (105), the one request every client sends.

Implements ``namesrv/src/main/java/org/apache/rocketmq/namesrv/processor/ClientRequestProcessor.java``:

* a known topic: SUCCESS with the TopicRouteData body, in standard JSON for clients from V4_9_4 on
  or when the request sets ``acceptStandardJsonOnly``, else in fastjson's default dialect with bare
  broker-id keys (what the C++ client, version 63, gets);
* an unknown topic: TOPIC_NOT_EXIST (17) with RocketMQ's remark
  ``No topic route info in name server for the topic: <topic>`` + ``FAQUrl.suggestTodo``. A
  producer then asks for ``TBW102`` (the auto-create template every broker with
  autoCreateTopicEnable registers) and sends with ``defaultTopic=TBW102``; the broker creates the
  topic and its next registration puts it in the route table;
* ``supportActingMaster`` (RIP-32, off by default): in a group with ``enableActingMaster`` that has
  lost its master and whose queues are read-only, the smallest-id member is listed as brokerId 0
  on the answered copy (``RouteInfoManager.pickup_topic_route_data``), so clients use it as a
  read-only master;
* ``needWaitForService``: for ``waitSecondsForService`` after start-up the answer is SYSTEM_ERROR
  "name server not ready", giving brokers time to register after a name-server restart.

Deviation: ``orderMessageEnable`` would add the topic's ORDER_TOPIC_CONFIG key-value entry as
``orderTopicConf``; rmqlab's name server keeps no key-value configuration, so it is never set.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from rmqlab.remoting.exceptions import RemotingCommandError
from rmqlab.remoting.protocol.header.namesrv.get_route_info_request_header import GetRouteInfoRequestHeader
from rmqlab.remoting.protocol.mq_version import MQVersion
from rmqlab.remoting.remoting_command import RemotingCommand
from rmqlab.remoting.remoting_helper import clip
from rmqlab.remoting.response_code import ResponseCode

if TYPE_CHECKING:
    from rmqlab.namesrv.namesrv_controller import NamesrvController
    from rmqlab.remoting.remoting_channel import RemotingChannel

# common/src/main/java/org/apache/rocketmq/common/help/FAQUrl.java
DEFAULT_FAQ_URL = "https://rocketmq.apache.org/docs/bestPractice/06FAQ"
APPLY_TOPIC_URL = DEFAULT_FAQ_URL


def suggest_todo(url: str) -> str:
    """``FAQUrl.suggestTodo``: the "see this page" tail RocketMQ appends to an error remark."""
    return f"\nSee {url} for further details."


def topic_not_exist_remark(topic: str | None) -> str:
    """The TOPIC_NOT_EXIST remark of GET_ROUTEINFO_BY_TOPIC, as RocketMQ words it."""
    return f"No topic route info in name server for the topic: {topic}{suggest_todo(APPLY_TOPIC_URL)}"


class ClientRequestProcessor:
    """Serves GET_ROUTEINFO_BY_TOPIC for a NamesrvController."""

    def __init__(self, namesrv_controller: NamesrvController):
        self.namesrv_controller = namesrv_controller
        # The processor is built when the name server starts: the needWaitForService window
        # runs from here, as in Java.
        self.startup_time_millis = namesrv_controller.node.now_ms()

    async def process(self, channel: RemotingChannel, request: RemotingCommand) -> RemotingCommand:
        try:
            return self.get_route_info_by_topic(channel, request)
        except RemotingCommandError as e:
            # A malformed header (see rmqlab.remoting.protocol.header.command_custom_header).
            return RemotingCommand.create_response_command(ResponseCode.SYSTEM_ERROR, clip(e))

    def get_route_info_by_topic(self, channel: RemotingChannel, request: RemotingCommand) -> RemotingCommand:
        header = GetRouteInfoRequestHeader.decode(request)
        config = self.namesrv_controller.namesrv_config
        now = self.namesrv_controller.node.now_ms()
        namesrv_ready = now - self.startup_time_millis >= config.waitSecondsForService * 1000
        if config.needWaitForService and not namesrv_ready:
            self.namesrv_controller.node.log.warning("name server not ready. request code %d ", request.code)
            return RemotingCommand.create_response_command(ResponseCode.SYSTEM_ERROR, "name server not ready")

        route = self.namesrv_controller.route_info_manager.pickup_topic_route_data(header.topic)
        if route is None:
            return RemotingCommand.create_response_command(ResponseCode.TOPIC_NOT_EXIST,
                                                           topic_not_exist_remark(header.topic))
        standard_json = request.version >= MQVersion.V4_9_4 or bool(header.accept_standard_json_only)
        return RemotingCommand.create_response_command(ResponseCode.SUCCESS, body=route.encode(standard_json))
