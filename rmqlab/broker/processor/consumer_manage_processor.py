"""ConsumerManageProcessor: GET_CONSUMER_LIST_BY_GROUP (38), UPDATE_CONSUMER_OFFSET (15) and
QUERY_CONSUMER_OFFSET (14).

RocketMQ ``broker/src/main/java/org/apache/rocketmq/broker/processor/ConsumerManageProcessor.java``
(the push consumer of the C++ client, PyPI ``rocketmq`` 0.4.4, asks for the group's members to
rebalance, then for each queue's committed offset, and commits every ~5 s).

QUERY_CONSUMER_OFFSET for a group without a stored offset follows RocketMQ's long-standing rule
(``ConsumerManageProcessor.queryConsumerOffset``): offset 0 (code 0) when the queue's min offset is
0 and its message 0 is not only on disk (``checkInDiskByConsumeOffset`` false: no such message yet,
or it is within the ``accessMessageInMemoryMaxRatio`` share of memory from the commitlog's end),
which is the normal case for a fresh topic; otherwise QUERY_NOT_FOUND (22) ``Not found,
V3_0_6_SNAPSHOT maybe this group consumer boot first`` and the client falls back to GET_MAX_OFFSET.
Deviation from RocketMQ at commit 8fc57f1, which asks ``checkInMemByConsumeOffset`` instead and so
answers 22 for an empty queue (its first message does not exist, hence is not "in memory"). A 5.x
request with ``set_zero_if_not_found=false`` gets 22 ``Not found, do not set to zero, maybe this
group boot first``.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from rmqlab.remoting.protocol.header.broker.client import (GetConsumerListByGroupRequestHeader,
                                                           GetConsumerListByGroupResponseBody)
from rmqlab.remoting.protocol.header.broker.consumer_offset import (QueryConsumerOffsetRequestHeader,
                                                                    QueryConsumerOffsetResponseHeader,
                                                                    UpdateConsumerOffsetRequestHeader)
from rmqlab.remoting.protocol.header.broker.header_util import write_header
from rmqlab.remoting.remoting_command import RemotingCommand
from rmqlab.remoting.request_code import RequestCode
from rmqlab.remoting.response_code import ResponseCode

if TYPE_CHECKING:
    from rmqlab.broker.broker_controller import BrokerController
    from rmqlab.remoting.remoting_channel import RemotingChannel

log = logging.getLogger("rmqlab.broker")


class ConsumerManageProcessor:
    def __init__(self, broker: BrokerController):
        self.broker = broker

    async def process(self, channel: RemotingChannel, request: RemotingCommand) -> RemotingCommand | None:
        if request.code == RequestCode.GET_CONSUMER_LIST_BY_GROUP:
            return self.get_consumer_list_by_group(channel, request)
        if request.code == RequestCode.UPDATE_CONSUMER_OFFSET:
            return self.update_consumer_offset(channel, request)
        if request.code == RequestCode.QUERY_CONSUMER_OFFSET:
            return self.query_consumer_offset(channel, request)
        return None

    def get_consumer_list_by_group(self, channel: RemotingChannel, request: RemotingCommand) -> RemotingCommand:
        header = GetConsumerListByGroupRequestHeader.decode(request)
        info = self.broker.consumer_manager.get_consumer_group_info(header.consumer_group)
        if info is not None:
            client_ids = info.get_all_client_id()
            if client_ids:
                return RemotingCommand.create_response_command(
                    ResponseCode.SUCCESS, body=GetConsumerListByGroupResponseBody(client_ids).encode())
            log.warning("getAllClientId failed, %s %s", header.consumer_group, channel.remote_addr)
        else:
            log.warning("getConsumerGroupInfo failed, %s %s", header.consumer_group, channel.remote_addr)
        return RemotingCommand.create_response_command(ResponseCode.SYSTEM_ERROR,
                                                       f"no consumer for this group, {header.consumer_group}")

    def update_consumer_offset(self, channel: RemotingChannel, request: RemotingCommand) -> RemotingCommand:
        header = UpdateConsumerOffsetRequestHeader.decode(request)
        broker = self.broker
        topic, group = header.topic, header.consumer_group
        if not broker.subscription_group_manager.contains_subscription_group(group):
            return RemotingCommand.create_response_command(ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST,
                                                           f"Group {group} not exist!")
        if not broker.topic_config_manager.contains_topic(topic):
            return RemotingCommand.create_response_command(ResponseCode.TOPIC_NOT_EXIST, f"Topic {topic} not exist!")
        cof = broker.consumer_offset_manager
        if cof.use_server_side_reset_offset and cof.has_offset_reset(topic, group, header.queue_id):
            log.info("Update consumer offset is rejected because of previous offset-reset. Group=%s, Topic=%s, "
                     "QueueId=%s, Offset=%s", group, topic, header.queue_id, header.commit_offset)
            return RemotingCommand.create_response_command(ResponseCode.SUCCESS, "Offset has been previously reset")
        cof.commit_offset(channel.remote_addr, group, topic, header.queue_id, header.commit_offset)
        return RemotingCommand.create_response_command(ResponseCode.SUCCESS)

    def query_consumer_offset(self, channel: RemotingChannel, request: RemotingCommand) -> RemotingCommand:
        header = QueryConsumerOffsetRequestHeader.decode(request)
        broker = self.broker
        offset = broker.consumer_offset_manager.query_offset(header.consumer_group, header.topic, header.queue_id)
        if offset >= 0:
            response = RemotingCommand.create_response_command(ResponseCode.SUCCESS)
            return write_header(response, QueryConsumerOffsetResponseHeader(offset))
        min_offset = broker.message_store.get_min_offset_in_queue(header.topic, header.queue_id)
        if header.set_zero_if_not_found is False:
            return RemotingCommand.create_response_command(
                ResponseCode.QUERY_NOT_FOUND, "Not found, do not set to zero, maybe this group boot first")
        if min_offset <= 0 and not broker.check_in_disk_by_consume_offset(header.topic, header.queue_id, 0):
            response = RemotingCommand.create_response_command(ResponseCode.SUCCESS)
            return write_header(response, QueryConsumerOffsetResponseHeader(0))
        return RemotingCommand.create_response_command(
            ResponseCode.QUERY_NOT_FOUND, "Not found, V3_0_6_SNAPSHOT maybe this group consumer boot first")
