"""PullMessageProcessor: PULL_MESSAGE (11), with long polling.

RocketMQ ``broker/src/main/java/org/apache/rocketmq/broker/processor/PullMessageProcessor.java`` and
``DefaultPullMessageResultHandler.java``. The checks, in RocketMQ's order: broker
readable; subscription group known (auto-created by default) and allowed to consume; topic known
and readable; queueId within readQueueNums; the subscription, from the request ("*",
"TagA || TagB") when sysFlag has the subscription bit, else from the group's heartbeat. Then the
store read (``getMessage`` with the tag filter on consume-queue tags codes) and the answer:

* body = the stored messages' bytes, concatenated (the C++ client decodes them itself);
* ext ``nextBeginOffset``, ``minOffset``, ``maxOffset``, ``suggestWhichBrokerId`` (strings on the
  wire, as the C++ client requires), plus ``topicSysFlag`` and ``groupSysFlag``; the remark is the
  GetMessageStatus name;
* code per GetMessageStatus as ``composeResponseHeader`` maps it: FOUND -> 0; NO_MATCHED_MESSAGE and
  MESSAGE_WAS_REMOVING -> PULL_RETRY_IMMEDIATELY (20); an empty or missing queue -> PULL_NOT_FOUND (19)
  for offset 0, else PULL_OFFSET_MOVED (21); OFFSET_OVERFLOW_ONE and OFFSET_FOUND_NULL -> 19;
  OFFSET_OVERFLOW_BADLY, OFFSET_TOO_SMALL and an admin reset (OFFSET_RESET) -> 21;
* ``suggestWhichBrokerId``: 0 unless ``slaveReadEnable``, then the group's ``brokerId`` or, when the
  consumer lags more than ``accessMessageInMemoryMaxRatio`` % of physical memory behind the
  commitlog end, its ``whichBrokerWhenConsumeSlowly`` (1); a slave (brokerId > 0) whose group has a
  master sends the client back to 0, and answers anything but FOUND with 20 (RocketMQ 5: its
  ``minBrokerIdInGroup`` stays 0 without slave-acting-master);
* a PULL_NOT_FOUND with the suspend flag is held (PullRequestHoldService) for suspendTimeoutMillis
  (``shortPollingTimeMills`` when ``longPollingEnable`` is off) and answered when a message
  arrives or the time is up;
* the commit offset piggy-backed on a pull (sysFlag bit 1, ``commitOffset``) is stored on the first
  run of the request (not when a held request is run again). RocketMQ 5 does not check the broker
  role here; clients clear the flag when they pull from a slave;
* PULL_OFFSET_MOVED on a slave (``offsetCheckInSlave`` off) becomes 20 with the group's brokerId.

A SLAVE without ``slaveReadEnable`` refuses every pull at the remoting layer (``rejectRequest``,
SYSTEM_BUSY ``[REJECTREQUEST]...``): in RocketMQ 5 reading from a slave, even while its master is
down, needs ``slaveReadEnable=true``.

Not implemented: static topics, the broadcast offset store (``enableBroadcastOffsetStore``: a
broadcast consumer keeps its offsets itself), cold-data flow control, SQL92 filters (property
filtering is off by default and answered as RocketMQ answers with it off), consume hooks.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from rmqlab.broker.broker_util import answer_held_request
from rmqlab.broker.filter.expression_message_filter import ExpressionMessageFilter
from rmqlab.broker.longpolling.pull_request_hold_service import PullRequest
from rmqlab.broker.processor.send_message_processor import FAQ_URL, reject_request_response, suggest_todo
from rmqlab.common.constant.perm_name import PermName
from rmqlab.config.broker import MASTER_ID, BrokerRole
from rmqlab.remoting.protocol.header.broker.header_util import write_header
from rmqlab.remoting.protocol.header.broker.heartbeat import (ConsumeType, ExpressionType, MessageModel,
                                                              build_subscription_data)
from rmqlab.remoting.protocol.header.broker.pull_message import (ForbiddenType, PullMessageRequestHeader,
                                                                 PullMessageResponseHeader, PullSysFlag)
from rmqlab.remoting.remoting_command import RemotingCommand
from rmqlab.remoting.response_code import ResponseCode
from rmqlab.store.get_message_result import GetMessageResult, GetMessageStatus

if TYPE_CHECKING:
    from rmqlab.broker.broker_controller import BrokerController
    from rmqlab.remoting.remoting_channel import RemotingChannel

log = logging.getLogger("rmqlab.broker")

INDEX_PERM_READ = 2  # PermName.INDEX_PERM_READ: the forbidden-table bit for reading

# Statuses for which the store searched the queue (DefaultMessageStore.getMessage's else branch),
# the only ones that compute suggestPullingFromSlave.
_SEARCHED = frozenset({GetMessageStatus.FOUND, GetMessageStatus.NO_MATCHED_MESSAGE,
                       GetMessageStatus.MESSAGE_WAS_REMOVING, GetMessageStatus.OFFSET_FOUND_NULL})
# Statuses whose nextBeginOffset the store corrects through nextOffsetCorrection.
_CORRECTED_BY_THE_STORE = frozenset({GetMessageStatus.NO_MESSAGE_IN_QUEUE, GetMessageStatus.OFFSET_TOO_SMALL,
                                     GetMessageStatus.OFFSET_OVERFLOW_ONE, GetMessageStatus.OFFSET_OVERFLOW_BADLY})


class PullMessageProcessor:
    def __init__(self, broker: BrokerController):
        self.broker = broker

    def reject_request(self) -> bool:
        return (not self.broker.broker_config.slaveReadEnable
                and self.broker.message_store_config.brokerRole == BrokerRole.SLAVE)

    async def process(self, channel: RemotingChannel, request: RemotingCommand) -> RemotingCommand | None:
        if self.reject_request():
            return reject_request_response()
        return self.process_request(channel, request, broker_allow_suspend=True)

    def execute_request_when_wakeup(self, channel: RemotingChannel, request: RemotingCommand) -> None:
        """Run a held request again, without suspending it this time, and answer it."""
        answer_held_request(self.broker, channel, request,
                            lambda: self.process_request(channel, request, broker_allow_suspend=False), "pull-wakeup")

    # -- the request ---------------------------------------------------------------------------
    def process_request(self, channel: RemotingChannel, request: RemotingCommand,
                        broker_allow_suspend: bool) -> RemotingCommand | None:
        broker = self.broker
        response = RemotingCommand.create_response_command(ResponseCode.SYSTEM_ERROR, "not set any response code")
        response_header = PullMessageResponseHeader()
        header = PullMessageRequestHeader.decode(request)

        def fail(code: int, remark: str, forbidden: int | None = None) -> RemotingCommand:
            response.code, response.remark = code, remark
            response_header.forbidden_type = forbidden
            return write_header(response, response_header)

        if not PermName.is_readable(broker.broker_config.brokerPermission):
            return fail(ResponseCode.NO_PERMISSION,
                        f"the broker[{broker.broker_config.brokerIP1}] pulling message is forbidden",
                        ForbiddenType.BROKER_FORBIDDEN)
        group_config = broker.subscription_group_manager.find_subscription_group_config(header.consumer_group)
        if group_config is None:
            return fail(ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST,
                        f"subscription group [{header.consumer_group}] does not exist, {suggest_todo(FAQ_URL)}")
        if not group_config.consume_enable:
            return fail(ResponseCode.NO_PERMISSION, f"subscription group no permission, {header.consumer_group}",
                        ForbiddenType.GROUP_FORBIDDEN)
        topic_config = broker.topic_config_manager.select_topic_config(header.topic)
        if topic_config is None:
            log.error("the topic %s not exist, consumer: %s", header.topic, channel.remote_addr)
            return fail(ResponseCode.TOPIC_NOT_EXIST,
                        f"topic[{header.topic}] not exist, apply first please! {suggest_todo(FAQ_URL)}")
        if not PermName.is_readable(topic_config.perm):
            return fail(ResponseCode.NO_PERMISSION, f"the topic[{header.topic}] pulling message is forbidden",
                        ForbiddenType.TOPIC_FORBIDDEN)
        if header.queue_id < 0 or header.queue_id >= topic_config.read_queue_nums:
            error = (f"queueId[{header.queue_id}] is illegal, topic:[{header.topic}] topicConfig.readQueueNums:"
                     f"[{topic_config.read_queue_nums}] consumer:[/{channel.remote_addr}]")
            log.warning(error)
            return fail(ResponseCode.INVALID_PARAMETER, error)

        consumer_manager = broker.consumer_manager
        consumer_manager.compensate_basic_consumer_info(header.consumer_group, ConsumeType.CONSUME_PASSIVELY,
                                                        MessageModel.CLUSTERING)
        if PullSysFlag.has_subscription_flag(header.sys_flag):
            try:
                subscription_data = build_subscription_data(header.topic, header.subscription, header.expression_type)
            except ValueError:
                log.warning("Parse the consumer's subscription[%s] failed, group: %s", header.subscription,
                            header.consumer_group)
                return fail(ResponseCode.SUBSCRIPTION_PARSE_FAILED, "parse the consumer's subscription failed")
            # SubscriptionData's constructor stamps subVersion with the current time.
            subscription_data.sub_version = broker.node.now_ms()
            consumer_manager.compensate_subscribe_data(header.consumer_group, header.topic, subscription_data)
        else:
            group_info = consumer_manager.get_consumer_group_info(header.consumer_group)
            if group_info is None:
                log.warning("the consumer's group info not exist, group: %s", header.consumer_group)
                return fail(ResponseCode.SUBSCRIPTION_NOT_EXIST,
                            f"the consumer's group info not exist{suggest_todo(FAQ_URL)}")
            if not group_config.consume_broadcast_enable and group_info.message_model is MessageModel.BROADCASTING:
                return fail(ResponseCode.NO_PERMISSION,
                            f"the consumer group[{header.consumer_group}] can not consume by broadcast way",
                            ForbiddenType.BROADCASTING_DISABLE_FORBIDDEN)
            if broker.subscription_group_manager.is_forbidden(group_config.group_name, header.topic, INDEX_PERM_READ):
                return fail(ResponseCode.NO_PERMISSION,
                            f"the consumer group[{header.consumer_group}] is forbidden for topic[{header.topic}]",
                            ForbiddenType.SUBSCRIPTION_FORBIDDEN)
            subscription_data = group_info.find_subscription_data(header.topic)
            if subscription_data is None:
                log.warning("the consumer's subscription not exist, group: %s, topic:%s", header.consumer_group,
                            header.topic)
                return fail(ResponseCode.SUBSCRIPTION_NOT_EXIST,
                            f"the consumer's subscription not exist{suggest_todo(FAQ_URL)}")
            if subscription_data.sub_version < header.sub_version:
                log.warning("The broker's subscription is not latest, group: %s %s", header.consumer_group,
                            subscription_data.sub_string)
                return fail(ResponseCode.SUBSCRIPTION_NOT_LATEST, "the consumer's subscription not latest")
            if not ExpressionType.is_tag_type(subscription_data.expression_type):
                # No ConsumerFilterManager: property filtering is not implemented (module docstring).
                return fail(ResponseCode.FILTER_DATA_NOT_EXIST,
                            "The broker's consumer filter data is not exist!Your expression may be wrong!")
        if not ExpressionType.is_tag_type(subscription_data.expression_type):
            # enablePropertyFilter is false (RocketMQ's default, not configurable in rmqlab).
            return fail(ResponseCode.SYSTEM_ERROR,
                        f"The broker does not support consumer to filter message by {subscription_data.expression_type}")
        message_filter = ExpressionMessageFilter(subscription_data)

        store = broker.message_store
        cof = broker.consumer_offset_manager
        reset_offset = cof.query_then_erase_reset_offset(header.topic, header.consumer_group, header.queue_id)
        if cof.use_server_side_reset_offset and reset_offset is not None:
            result = GetMessageResult(GetMessageStatus.OFFSET_RESET, next_begin_offset=reset_offset,
                                      min_offset=store.get_min_offset_in_queue(header.topic, header.queue_id),
                                      max_offset=store.get_max_offset_in_queue(header.topic, header.queue_id))
        else:
            if not store.running:
                return fail(ResponseCode.SYSTEM_ERROR, "store getMessage return null")
            result = store.get_message(header.consumer_group, header.topic, header.queue_id, header.queue_offset,
                                       header.max_msg_nums, message_filter)
            self._store_parity(header, result)
            self._suggest_pulling_from_slave(header, result)
        return self.handle(result, request, header, channel, subscription_data, group_config, broker_allow_suspend,
                           message_filter, response, response_header)

    def _store_parity(self, header: PullMessageRequestHeader, result: GetMessageResult) -> None:
        """Two rules of RocketMQ 5's ``DefaultMessageStore.getMessage`` that rmqlab's store leaves
        to its caller: a queue of a known topic that was never written is created on read
        (``findConsumeQueue``), so it reads as NO_MESSAGE_IN_QUEUE, not NO_MATCHED_LOGIC_QUEUE; and
        a SLAVE (``offsetCheckInSlave`` off) does not correct the client's offset
        (``nextOffsetCorrection``) when it found nothing, so the client keeps its position."""
        if result.status is GetMessageStatus.NO_MATCHED_LOGIC_QUEUE:
            result.status = GetMessageStatus.NO_MESSAGE_IN_QUEUE
        if (self.broker.message_store_config.brokerRole == BrokerRole.SLAVE
                and result.status in _CORRECTED_BY_THE_STORE):
            result.next_begin_offset = header.queue_offset

    def _suggest_pulling_from_slave(self, header: PullMessageRequestHeader, result: GetMessageResult) -> None:
        """The lag rule of ``DefaultMessageStore.getMessage``: suggest a slave when the last unit
        read is more than ``accessMessageInMemoryMaxRatio`` % of physical memory behind the
        commitlog's end. (rmqlab's store leaves the flag False; the broker applies the rule.)"""
        if result.status not in _SEARCHED or result.next_begin_offset <= 0:
            return
        store = self.broker.message_store
        cq = store.consume_queue_table.get((header.topic, header.queue_id))
        units = cq.get_units(result.next_begin_offset - 1, 1) if cq is not None else []
        if not units:
            return
        diff = store.get_max_phy_offset() - units[0][0]
        memory = int(self.broker.total_physical_memory_size
                     * (self.broker.message_store_config.accessMessageInMemoryMaxRatio / 100.0))
        result.suggest_pulling_from_slave = diff > memory

    # -- DefaultPullMessageResultHandler -------------------------------------------------------
    def compose_response_header(self, header: PullMessageRequestHeader, result: GetMessageResult, topic_sys_flag: int,
                                group_config: Any, response: RemotingCommand,
                                response_header: PullMessageResponseHeader, client_address: str) -> None:
        broker = self.broker
        response.remark = result.status.name
        response_header.next_begin_offset = result.next_begin_offset
        response_header.min_offset = result.min_offset
        response_header.max_offset = result.max_offset
        response_header.topic_sys_flag = topic_sys_flag
        response_header.group_sys_flag = group_config.group_sys_flag
        s = result.status
        if s is GetMessageStatus.FOUND:
            response.code = ResponseCode.SUCCESS
        elif s in (GetMessageStatus.MESSAGE_WAS_REMOVING, GetMessageStatus.NO_MATCHED_MESSAGE):
            response.code = ResponseCode.PULL_RETRY_IMMEDIATELY
        elif s in (GetMessageStatus.NO_MATCHED_LOGIC_QUEUE, GetMessageStatus.NO_MESSAGE_IN_QUEUE):
            if header.queue_offset != 0:
                response.code = ResponseCode.PULL_OFFSET_MOVED
                log.info("the broker stores no queue data, fix the request offset %s to %s, Topic: %s QueueId: %s "
                         "Consumer Group: %s", header.queue_offset, result.next_begin_offset, header.topic,
                         header.queue_id, header.consumer_group)
            else:
                response.code = ResponseCode.PULL_NOT_FOUND
        elif s in (GetMessageStatus.OFFSET_FOUND_NULL, GetMessageStatus.OFFSET_OVERFLOW_ONE):
            response.code = ResponseCode.PULL_NOT_FOUND
        elif s is GetMessageStatus.OFFSET_OVERFLOW_BADLY:
            response.code = ResponseCode.PULL_OFFSET_MOVED
            log.info("the request offset: %s over flow badly, fix to %s, broker max offset: %s, consumer: %s",
                     header.queue_offset, result.next_begin_offset, result.max_offset, client_address)
        elif s is GetMessageStatus.OFFSET_RESET:
            response.code = ResponseCode.PULL_OFFSET_MOVED
            log.info("The queue under pulling was previously reset to start from %s", result.next_begin_offset)
        elif s is GetMessageStatus.OFFSET_TOO_SMALL:
            response.code = ResponseCode.PULL_OFFSET_MOVED
            log.info("the request offset too small. group=%s, topic=%s, requestOffset=%s, brokerMinOffset=%s, "
                     "clientIp=%s", header.consumer_group, header.topic, header.queue_offset, result.min_offset,
                     client_address)
        if broker.broker_config.slaveReadEnable:
            response_header.suggest_which_broker_id = (group_config.which_broker_when_consume_slowly
                                                    if result.suggest_pulling_from_slave else group_config.broker_id)
        else:
            response_header.suggest_which_broker_id = MASTER_ID
        if broker.broker_config.brokerId != MASTER_ID and not result.suggest_pulling_from_slave:
            if broker.min_broker_id_in_group == MASTER_ID:
                response_header.suggest_which_broker_id = MASTER_ID
                if result.status is not GetMessageStatus.FOUND:
                    response.code = ResponseCode.PULL_RETRY_IMMEDIATELY

    def try_commit_offset(self, broker_allow_suspend: bool, header: PullMessageRequestHeader, next_offset: int,
                          client_address: str) -> None:
        cof = self.broker.consumer_offset_manager
        cof.commit_pull_offset(client_address, header.consumer_group, header.topic, header.queue_id, next_offset)
        if broker_allow_suspend and PullSysFlag.has_commit_offset_flag(header.sys_flag):
            cof.commit_offset(client_address, header.consumer_group, header.topic, header.queue_id, header.commit_offset)

    def handle(self, result: GetMessageResult, request: RemotingCommand, header: PullMessageRequestHeader,
               channel: RemotingChannel, subscription_data, group_config, broker_allow_suspend: bool,
               message_filter: ExpressionMessageFilter, response: RemotingCommand,
               response_header: PullMessageResponseHeader) -> RemotingCommand | None:
        broker = self.broker
        client_address = channel.remote_addr
        topic_config = broker.topic_config_manager.select_topic_config(header.topic)
        self.compose_response_header(header, result, topic_config.topic_sys_flag, group_config, response,
                                     response_header, client_address)
        self.try_commit_offset(broker_allow_suspend, header, result.next_begin_offset, client_address)
        code = response.code
        if code == ResponseCode.SUCCESS:
            broker.broker_stats.on_get(result.message_count)
            response.body = b"".join(result.message_buffers)
        elif code == ResponseCode.PULL_NOT_FOUND:
            if broker_allow_suspend and PullSysFlag.has_suspend_flag(header.sys_flag):
                polling_ms = header.suspend_timeout_millis
                if not broker.broker_config.longPollingEnable:
                    polling_ms = broker.broker_config.shortPollingTimeMills
                broker.pull_request_hold_service.suspend_pull_request(
                    header.topic, header.queue_id,
                    PullRequest(request, channel, polling_ms, broker.node.now_ms(), header.queue_offset,
                                subscription_data, message_filter))
                return None
        elif code == ResponseCode.PULL_OFFSET_MOVED:
            if broker.message_store_config.brokerRole != BrokerRole.SLAVE:
                log.warning("PULL_OFFSET_MOVED:correction offset. topic=%s, groupId=%s, requestOffset=%s, "
                            "newOffset=%s, suggestBrokerId=%s", header.topic, header.consumer_group, header.queue_offset,
                            result.next_begin_offset, response_header.suggest_which_broker_id)
            else:
                response_header.suggest_which_broker_id = group_config.broker_id
                response.code = ResponseCode.PULL_RETRY_IMMEDIATELY
                log.warning("PULL_OFFSET_MOVED:none correction. topic=%s, groupId=%s, requestOffset=%s, "
                            "suggestBrokerId=%s", header.topic, header.consumer_group, header.queue_offset,
                            response_header.suggest_which_broker_id)
        return write_header(response, response_header)
