"""PullAPIWrapper: one pull of one queue, from the right broker
(``client/impl/consumer/PullAPIWrapper.java``).

Which broker: the id the last answer for this queue suggested (``suggestWhichBrokerId``, kept per
queue in ``pull_from_which_node_table``; 0, the master, at first), resolved by
MQClientInstance.find_broker_address_in_subscribe - which falls back to any member of the group,
a slave, when the suggested one is not in the route: that is how a consumer keeps consuming the
master's queues from its slave while the master is down (RocketMQ's deployment guide "部署方式",
"多副本模式-异步复制": "Master 宕机后，消费者仍然可以从Slave消费"). A pull sent to a slave never commits an offset (the
commitOffset bit is cleared): offsets are committed to the master, or by UPDATE_CONSUMER_OFFSET.

The answer (``processPullResult``): the body decoded into messages, then filtered again on the
client by tag (the broker filters on tag hash codes, which can collide), and each message gets the
queue's MIN_OFFSET / MAX_OFFSET properties, as Java adds them. The body CRC is not checked:
Java decodes with ``MessageDecoder.decodesBatch(..., isClient=true)``, whose checkCRC is false, so
a body corrupted on the broker's disk reaches the listener as it is.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from rmqlab.client.consumer.pull_result import PullResult, PullStatus
from rmqlab.client.exceptions import MQClientException
from rmqlab.common.message.message_const import MessageConst
from rmqlab.common.message.message_decoder import decodes
from rmqlab.remoting.protocol.header.broker.admin import MessageQueue
from rmqlab.remoting.protocol.header.broker.heartbeat import SubscriptionData
from rmqlab.remoting.protocol.header.broker.pull_message import PullMessageRequestHeader, PullSysFlag
from rmqlab.remoting.protocol.route.topic_route_data import MASTER_ID

if TYPE_CHECKING:
    from rmqlab.client.impl.mq_client_instance import MQClientInstance


class PullAPIWrapper:
    def __init__(self, client_factory: MQClientInstance, consumer_group: str):
        self.client_factory = client_factory
        self.consumer_group = consumer_group
        self.pull_from_which_node_table: dict[MessageQueue, int] = {}

    def update_pull_from_which_node(self, mq: MessageQueue, broker_id: int) -> None:
        self.pull_from_which_node_table[mq] = broker_id

    def recalculate_pull_from_which_node(self, mq: MessageQueue) -> int:
        return self.pull_from_which_node_table.get(mq, MASTER_ID)

    def process_pull_result(self, mq: MessageQueue, pull_result: PullResult,
                            subscription_data: SubscriptionData) -> PullResult:
        """Remember the suggested broker; decode and filter the messages of a FOUND answer."""
        self.update_pull_from_which_node(mq, pull_result.suggest_which_broker_id)
        if pull_result.pull_status is PullStatus.FOUND and pull_result.message_binary:
            msgs = decodes(pull_result.message_binary, check_crc=False)
            if subscription_data.tags_set and not subscription_data.class_filter_mode:
                msgs = [m for m in msgs if m.tags is not None and m.tags in subscription_data.tags_set]
            for m in msgs:
                m.properties[MessageConst.PROPERTY_MIN_OFFSET] = str(pull_result.min_offset)
                m.properties[MessageConst.PROPERTY_MAX_OFFSET] = str(pull_result.max_offset)
                m.queue_id = mq.queue_id
            pull_result.msg_found_list = msgs
        pull_result.message_binary = None
        return pull_result

    async def pull_kernel_impl(self, mq: MessageQueue, sub_expression: str | None, expression_type: str | None,
                               sub_version: int, offset: int, max_nums: int, sys_flag: int, commit_offset: int,
                               broker_suspend_max_time_millis: int, timeout_millis: int) -> PullResult:
        """One PULL_MESSAGE to the broker chosen for ``mq`` (see the module docstring)."""
        factory = self.client_factory
        found = factory.find_broker_address_in_subscribe(mq.broker_name, self.recalculate_pull_from_which_node(mq),
                                                         False)
        if found is None:
            await factory.update_topic_route_info_from_name_server(mq.topic)
            found = factory.find_broker_address_in_subscribe(mq.broker_name,
                                                             self.recalculate_pull_from_which_node(mq), False)
        if found is None:
            raise MQClientException(-1, f"The broker[{mq.broker_name}] not exist")
        if found.slave:
            sys_flag &= ~PullSysFlag.FLAG_COMMIT_OFFSET
        header = PullMessageRequestHeader(
            consumer_group=self.consumer_group, topic=mq.topic, queue_id=mq.queue_id, queue_offset=offset,
            max_msg_nums=max_nums, sys_flag=sys_flag, commit_offset=commit_offset,
            suspend_timeout_millis=broker_suspend_max_time_millis, subscription=sub_expression,
            sub_version=sub_version, expression_type=expression_type)
        return await factory.mq_client_api_impl.pull_message(found.broker_addr, header, timeout_millis)
