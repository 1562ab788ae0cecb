"""ClientManageProcessor: HEART_BEAT (34), UNREGISTER_CLIENT (35) and CHECK_CLIENT_CONFIG (46).

RocketMQ ``broker/src/main/java/org/apache/rocketmq/broker/processor/ClientManageProcessor.java``.
A heartbeat registers the client's producer groups and its consumer groups
with their subscriptions; for each consumer group it auto-creates the group (when allowed) and its
retry topic ``%RETRY%group``. The body is parsed leniently (enums as names or ordinals, see
``rmqlab.remoting.protocol.header.broker.heartbeat``). The answer carries
``IS_SUPPORT_HEART_BEAT_V2`` and ``IS_SUB_CHANGE``; a heartbeat with a non-zero
``heartbeatFingerprint`` is a v2 heartbeat (``withoutSub`` may then omit unchanged subscriptions).
Nothing requires a heartbeat before a send or a pull: the C++ client (PyPI ``rocketmq`` 0.4.4) may
send or pull before its first heartbeat.
"""

from __future__ import annotations

import json
import logging
from typing import TYPE_CHECKING

from rmqlab.broker.client.client_channel_info import ClientChannelInfo
from rmqlab.common.constant.perm_name import PermName
from rmqlab.common.mix_all import RETRY_GROUP_TOPIC_PREFIX
from rmqlab.remoting.protocol.header.broker.client import UnregisterClientRequestHeader
from rmqlab.remoting.protocol.header.broker.heartbeat import ExpressionType, HeartbeatData, SubscriptionData
from rmqlab.remoting.remoting_command import RemotingCommand
from rmqlab.remoting.request_code import RequestCode
from rmqlab.remoting.response_code import ResponseCode

if TYPE_CHECKING:
    from rmqlab.broker.broker_controller import BrokerController
    from rmqlab.remoting.remoting_channel import RemotingChannel

log = logging.getLogger("rmqlab.broker")

IS_SUPPORT_HEART_BEAT_V2 = "IS_SUPPORT_HEART_BEAT_V2"
IS_SUB_CHANGE = "IS_SUB_CHANGE"


class ClientManageProcessor:
    def __init__(self, broker: BrokerController):
        self.broker = broker
        # ConsumerGroup -> the fingerprint of its last heartbeat (heartbeat v2).
        self.consumer_group_heartbeat_table: dict[str, int] = {}

    async def process(self, channel: RemotingChannel, request: RemotingCommand) -> RemotingCommand | None:
        if request.code == RequestCode.HEART_BEAT:
            return self.heart_beat(channel, request)
        if request.code == RequestCode.UNREGISTER_CLIENT:
            return self.unregister_client(channel, request)
        if request.code == RequestCode.CHECK_CLIENT_CONFIG:
            return self.check_client_config(channel, request)
        return None

    def _client_channel_info(self, channel, client_id: str, request: RemotingCommand) -> ClientChannelInfo:
        return ClientChannelInfo(channel, client_id, request.language, request.version, self.broker.node.now_ms())

    def heart_beat(self, channel: RemotingChannel, request: RemotingCommand) -> RemotingCommand:
        heartbeat = HeartbeatData.decode(request.body)
        info = self._client_channel_info(channel, heartbeat.client_id, request)
        v2 = heartbeat.heartbeat_fingerprint != 0
        is_sub_change = False
        broker = self.broker
        for consumer_data in heartbeat.consumer_data_set:
            group = consumer_data.group_name
            previous = self.consumer_group_heartbeat_table.get(group)
            if v2 and previous is not None and previous != heartbeat.heartbeat_fingerprint:
                is_sub_change = True
            self.consumer_group_heartbeat_table[group] = heartbeat.heartbeat_fingerprint
            has_order_topic_sub = any(broker.topic_config_manager.is_order_topic(s.topic)
                                      for s in consumer_data.subscription_data_set)
            group_config = broker.subscription_group_manager.find_subscription_group_config(group)
            if group_config is None:
                continue
            notify = group_config.notify_consumer_ids_changed_enable
            topic_sys_flag = 2 if consumer_data.unit_mode else 0  # TopicSysFlag.buildSysFlag(false, true)
            broker.topic_config_manager.create_topic_in_send_message_back_method(
                RETRY_GROUP_TOPIC_PREFIX + group, group_config.retry_queue_nums,
                PermName.PERM_WRITE | PermName.PERM_READ, topic_sys_flag, has_order_topic_sub)
            if v2 and heartbeat.without_sub:
                changed = broker.consumer_manager.register_consumer_without_sub(
                    group, info, consumer_data.consume_type, consumer_data.message_model,
                    consumer_data.consume_from_where, notify)
            else:
                changed = broker.consumer_manager.register_consumer(
                    group, info, consumer_data.consume_type, consumer_data.message_model,
                    consumer_data.consume_from_where, consumer_data.subscription_data_set, notify)
            if changed:
                log.info("ClientManageProcessor: registerConsumer info changed, SDK address=%s, consumerData=%s",
                         channel.remote_addr, consumer_data)
        for producer_data in heartbeat.producer_data_set:
            broker.producer_manager.register_producer(producer_data.group_name, info)
        response = RemotingCommand.create_response_command(ResponseCode.SUCCESS)
        response.add_ext_field(IS_SUPPORT_HEART_BEAT_V2, "true")
        response.add_ext_field(IS_SUB_CHANGE, "true" if (is_sub_change or not v2) else "false")
        return response

    def unregister_client(self, channel: RemotingChannel, request: RemotingCommand) -> RemotingCommand:
        header = UnregisterClientRequestHeader.decode(request)
        info = self._client_channel_info(channel, header.client_id, request)
        broker = self.broker
        if header.producer_group is not None:
            broker.producer_manager.unregister_producer(header.producer_group, info)
        if header.consumer_group is not None:
            group_config = broker.subscription_group_manager.find_subscription_group_config(header.consumer_group)
            notify = group_config.notify_consumer_ids_changed_enable if group_config is not None else True
            broker.consumer_manager.unregister_consumer(header.consumer_group, info, notify)
        return RemotingCommand.create_response_command(ResponseCode.SUCCESS)

    def check_client_config(self, channel: RemotingChannel, request: RemotingCommand) -> RemotingCommand:
        """``checkClientConfig``: TAG subscriptions are always fine; others need property filtering,
        which is off (RocketMQ's default, ``enablePropertyFilter``)."""
        body = json.loads(request.body.decode("utf-8")) if request.body else None
        sub_json = body.get("subscriptionData") if isinstance(body, dict) else None
        if sub_json is not None:
            sub = SubscriptionData.from_json_dict(sub_json, "subscriptionData")
            if not ExpressionType.is_tag_type(sub.expression_type):
                return RemotingCommand.create_response_command(
                    ResponseCode.SYSTEM_ERROR,
                    f"The broker does not support consumer to filter message by {sub.expression_type}")
        return RemotingCommand.create_response_command(ResponseCode.SUCCESS)
