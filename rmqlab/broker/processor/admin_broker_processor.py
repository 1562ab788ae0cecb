"""AdminBrokerProcessor: the broker's default processor, serving the admin requests.

RocketMQ ``broker/src/main/java/org/apache/rocketmq/broker/processor/AdminBrokerProcessor.java``,
registered as the RemotingServer's *default* processor, so every code no other processor takes
lands here and, when it is not an admin code rmqlab implements, gets REQUEST_CODE_NOT_SUPPORTED (3)
with RocketMQ's remark ``" request type N not supported"`` (``getUnknownCmdResponse``).

Served here (what the rmqlab Admin client and SlaveSynchronize use):

* UPDATE_AND_CREATE_TOPIC (17) — ``mqadmin updateTopic``: name checks (INVALID_PARAMETER with
  TopicValidator's remark, or "conflict with system topic"), store the config, register it with
  the name servers at once (``registerIncrementBrokerData``);
* GET_ALL_TOPIC_CONFIG (21) — the topic table with its DataVersion
  (TopicConfigAndMappingSerializeWrapper);
* UPDATE_AND_CREATE_SUBSCRIPTIONGROUP (200), GET_ALL_SUBSCRIPTIONGROUP_CONFIG (201);
* GET_ALL_CONSUMER_OFFSET (43) — consumerOffset.json's text; GET_ALL_DELAY_OFFSET (45) —
  delayOffset.json's text (empty content answers SYSTEM_ERROR, as in RocketMQ);
  GET_TIMER_CHECK_POINT (60) — the timer checkpoint's 56 bytes (``TimerCheckpoint.encode``), or
  SYSTEM_ERROR "The checkpoint is null" without timer messages (``timerWheelEnable=false``);
* GET_MAX_OFFSET (30), GET_MIN_OFFSET (31) — a queue's offsets; SEARCH_OFFSET_BY_TIMESTAMP (29) —
  the queue offset of a store time (``getOffsetInQueueByTime``, see ``get_offset_in_queue_by_time``);
  GET_EARLIEST_MSG_STORETIME (32) — the store time of a queue's first message. RIP-32: none of
  them checks the broker's role, so a slave the name server shows as brokerId 0 (acting master)
  answers them from its own store, as RocketMQ's slave does;
* GET_BROKER_CONFIG (26) / UPDATE_BROKER_CONFIG (25) — ``mqadmin getBrokerConfig`` /
  ``updateBrokerConfig``: the broker's settings as properties text (see ``update_broker_config``);
* GET_BROKER_RUNTIME_INFO (28) — ``mqadmin brokerStatus``, a KVTable;
* DELETE_EXPIRED_COMMITLOG (329) — ``mqadmin deleteExpiredCommitLog``: the store's next 20
  CleanCommitLogService passes run whatever the hour (``executeDeleteFilesManually``); SUCCESS;
* GET_CONSUME_STATS (208) — ``mqadmin consumerProgress``, a ConsumeStats;
* controller mode: NOTIFY_BROKER_ROLE_CHANGED (1008, oneway from
  the controller; header master id/address/epochs, body SyncStateSet) hands the election's result
  to ``ReplicasManager.change_broker_role``, which acts only on a newer master epoch (outside
  controller mode it is answered SUCCESS and ignored, as in RocketMQ); GET_BROKER_EPOCH_CACHE
  (1007, ``mqadmin getBrokerEpoch``) answers the epoch file as an EpochEntryCache with the
  broker's current ``brokerId`` — 0 while master, the controller id while slave, as RocketMQ
  sends it — or SYSTEM_ERROR "this request only for controllerMode " outside controller mode.
* slave acting master (RIP-32): NOTIFY_MIN_BROKER_ID_CHANGE (905, oneway from a name server) hands
  the group's new smallest broker id to ``BrokerController.update_min_broker_notified`` (a master,
  or a broker without ``enableSlaveActingMaster``, ignores it, as in RocketMQ);
  EXCHANGE_BROKER_HA_INFO (906): a request carrying ``masterHaAddress`` tells this broker where to
  replicate from (and, with ``syncMasterFlushOffsetWhenStartup``, the master's flushed offset when
  it knows none); one without it asks, and a master answers its HA address, its initial max
  offset as ``masterFlushOffset`` and its address (anyone else answers SUCCESS with no fields).

Deviations on 905's bad input, where RocketMQ applies what it gets: a notice naming another broker
group is refused with INVALID_PARAMETER and changes nothing (RocketMQ does not look at the name; a
misrouted notice would move this group's services); one without ``minBrokerId`` answers
SYSTEM_ERROR with a remark saying so (RocketMQ fails the same way, on a null unboxing).

Queue locks (orderly consumption): LOCK_BATCH_MQ (41) locks the body's queues for its client in the
RebalanceLockManager and answers the queues granted (LockBatchResponseBody); UNLOCK_BATCH_MQ (42)
unlocks them. With ``lockInStrictMode`` (RIP-32's lock quorum; off by default) and
``quorum = totalReplicas / 2 + 1`` above 1, a lock not marked ``onlyThisBroker`` is, after the local
lock, forwarded (``onlyThisBroker = true``, only the queues locked here, 1000 ms each) to every other
member of the broker member group (``BrokerController.broker_member_group``, kept by the member-group
sync of ``enableSlaveActingMaster``); after at most 2000 ms the answer is the queues locked by at
least ``quorum`` members, this one included. A member that fails or is late counts as not locked.
The local lock stays even when the quorum fails, and remote locks are not rolled back, as in
RocketMQ. A strict-mode unlock is sent to every member, this broker included, without waiting.
Both are answered SUCCESS. Deviation on bad input: a body without ``consumerGroup`` (or a lock
without ``clientId``) answers SYSTEM_ERROR naming it and changes nothing; RocketMQ's lock manager
fails on the null pointer (SYSTEM_ERROR too), except in a strict-mode unlock, which it answers
SUCCESS while every member fails.

Deviation: topic attributes are stored without RocketMQ's validation against the known attribute
names (``AttributeUtil.alterCurrentAttributes``): "+key=value" sets, "-key" removes.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
from typing import TYPE_CHECKING, Any
from collections.abc import Callable

from rmqlab.broker.client.rebalance_lock_manager import RebalanceLockManager
from rmqlab.common.boundary_type import BoundaryType
from rmqlab.common.data_version import DataVersion
from rmqlab.common.message.message_decoder import decode
from rmqlab.common.topic.topic_validator import TopicValidator
from rmqlab.config.broker import MASTER_ID
from rmqlab.common.topic_config import TopicConfig, TopicFilterType
from rmqlab.remoting.exceptions import RemotingError
from rmqlab.remoting.protocol import remoting_serializable
from rmqlab.remoting.protocol.body.epoch_entry_cache import EpochEntryCache
from rmqlab.remoting.protocol.body.lock_batch_body import (DEFAULT_HASH_SET_CAPACITY, LockBatchRequestBody,
                                                          LockBatchResponseBody, UnlockBatchRequestBody)
from rmqlab.remoting.protocol.body.register_broker_body import TopicConfigAndMappingSerializeWrapper
from rmqlab.remoting.protocol.body.sync_state_set import SyncStateSet
from rmqlab.remoting.protocol.header.broker.admin import (ConsumeStats, CreateTopicRequestHeader,
                                                          GetConsumeStatsRequestHeader,
                                                          GetSubscriptionGroupConfigRequestHeader,
                                                          GetTopicConfigRequestHeader, KVTable, MessageQueue,
                                                          OffsetWrapper, SubscriptionGroupWrapper)
from rmqlab.remoting.protocol.header.broker.consumer_offset import (GetMaxOffsetRequestHeader,
                                                                    GetMaxOffsetResponseHeader,
                                                                    GetMinOffsetRequestHeader,
                                                                    GetMinOffsetResponseHeader)
from rmqlab.remoting.protocol.header.broker.header_util import write_header
from rmqlab.remoting.protocol.header.broker.offset_query import (GetBrokerConfigResponseHeader,
                                                                 GetEarliestMsgStoretimeRequestHeader,
                                                                 GetEarliestMsgStoretimeResponseHeader,
                                                                 SearchOffsetRequestHeader, SearchOffsetResponseHeader)
from rmqlab.remoting.protocol.header.controller import NotifyBrokerRoleChangedRequestHeader
from rmqlab.remoting.protocol.header.exchange_ha_info_header import (ExchangeHAInfoRequestHeader,
                                                                    ExchangeHAInfoResponseHeader)
from rmqlab.remoting.protocol.header.notify_min_broker_id_change_request_header import \
    NotifyMinBrokerIdChangeRequestHeader
from rmqlab.remoting.protocol.subscription.subscription_group_config import SubscriptionGroupConfig
from rmqlab.remoting.remoting_command import RemotingCommand
from rmqlab.remoting.request_code import RequestCode
from rmqlab.remoting.response_code import RemotingSysResponseCode, ResponseCode

if TYPE_CHECKING:
    from rmqlab.broker.broker_controller import BrokerController
    from rmqlab.remoting.remoting_channel import RemotingChannel

log = logging.getLogger("rmqlab.broker")

# MQVersion.getVersionDesc(CURRENT_VERSION) of the RocketMQ release rmqlab follows.
BROKER_VERSION_DESC = "V5_3_3"
# lockBatchMQ in strict mode: each forwarded lock's timeout, and the longest wait for all of them.
LOCK_FORWARD_TIMEOUT_MS = 1000
LOCK_QUORUM_WAIT_MS = 2000


def parse_attributes(modification: str | None) -> dict[str, str]:
    """``AttributeParser.parseToMap``: "+k1=v1,+k2=v2,-k3" -> {"+k1": "v1", "+k2": "v2", "-k3": ""}."""
    if not modification:
        return {}
    out: dict[str, str] = {}
    for kv in modification.split(","):
        if "=" in kv:
            key, value = kv.split("=")[0], kv.split("=")[1]
            if "+" not in key:
                raise ValueError(f"add/alter attribute format is wrong: {key}")
        else:
            key, value = kv, ""
            if "-" not in key:
                raise ValueError(f"delete attribute format is wrong: {key}")
        if key in out:
            raise ValueError(f"key duplication: {key}")
        out[key] = value
    return out


def apply_attributes(current: dict[str, str], modification: dict[str, str]) -> dict[str, str]:
    """The signs of a modification applied to the current attributes (see the module docstring)."""
    result = dict(current)
    for key, value in modification.items():
        if key.startswith("+"):
            result[key[1:]] = value
        elif key.startswith("-"):
            result.pop(key[1:], None)
    return result


class AdminBrokerProcessor:
    def __init__(self, broker: BrokerController):
        self.broker = broker
        # A handler returns the response, or a coroutine that produces it (the controller-mode ones).
        self._handlers: dict[int, Callable[[RemotingChannel, RemotingCommand], Any]] = {
            RequestCode.UPDATE_AND_CREATE_TOPIC: self.update_and_create_topic,
            RequestCode.GET_ALL_TOPIC_CONFIG: self.get_all_topic_config,
            RequestCode.GET_TOPIC_CONFIG: self.get_topic_config,
            RequestCode.GET_SUBSCRIPTIONGROUP_CONFIG: self.get_subscription_group_config,
            RequestCode.GET_MAX_OFFSET: self.get_max_offset,
            RequestCode.GET_MIN_OFFSET: self.get_min_offset,
            RequestCode.GET_BROKER_RUNTIME_INFO: self.get_broker_runtime_info,
            RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP: self.update_and_create_subscription_group,
            RequestCode.GET_ALL_SUBSCRIPTIONGROUP_CONFIG: self.get_all_subscription_group,
            RequestCode.GET_CONSUME_STATS: self.get_consume_stats,
            RequestCode.GET_ALL_CONSUMER_OFFSET: self.get_all_consumer_offset,
            RequestCode.GET_ALL_DELAY_OFFSET: self.get_all_delay_offset,
            RequestCode.GET_TIMER_CHECK_POINT: self.get_timer_check_point,
            RequestCode.GET_BROKER_EPOCH_CACHE: self.get_broker_epoch_cache,
            RequestCode.NOTIFY_BROKER_ROLE_CHANGED: self.notify_broker_role_changed,
            RequestCode.NOTIFY_MIN_BROKER_ID_CHANGE: self.notify_min_broker_id_change,
            RequestCode.EXCHANGE_BROKER_HA_INFO: self.update_broker_ha_info,
            RequestCode.SEARCH_OFFSET_BY_TIMESTAMP: self.search_offset_by_timestamp,
            RequestCode.GET_EARLIEST_MSG_STORETIME: self.get_earliest_msg_storetime,
            RequestCode.GET_BROKER_CONFIG: self.get_broker_config,
            RequestCode.UPDATE_BROKER_CONFIG: self.update_broker_config,
            RequestCode.DELETE_EXPIRED_COMMITLOG: self.delete_expired_commit_log,
            RequestCode.LOCK_BATCH_MQ: self.lock_batch_mq,
            RequestCode.UNLOCK_BATCH_MQ: self.unlock_batch_mq,
        }
        # Configuration.dataVersion: bumped by every UPDATE_BROKER_CONFIG, answered by GET_BROKER_CONFIG.
        self.configuration_data_version: DataVersion | None = None
        # Deviation: RocketMQ keeps it in BrokerController (getRebalanceLockManager); here the
        # processor serving the locks owns it, and SendMessageProcessor's retry path reads it here.
        self.rebalance_lock_manager = RebalanceLockManager(broker.node.now_ms)

    async def process(self, channel: RemotingChannel, request: RemotingCommand) -> RemotingCommand | None:
        handler = self._handlers.get(request.code)
        if handler is None:
            return RemotingCommand.create_response_command(RemotingSysResponseCode.REQUEST_CODE_NOT_SUPPORTED,
                                                           f" request type {request.code} not supported")
        response = handler(channel, request)
        if inspect.isawaitable(response):
            response = await response
        return response

    # -- topics --------------------------------------------------------------------------------
    def update_and_create_topic(self, channel: RemotingChannel, request: RemotingCommand) -> RemotingCommand:
        header = CreateTopicRequestHeader.decode(request)
        log.info("Broker receive request to update or create topic=%s, caller address=%s", header.topic,
                 channel.remote_addr)
        tcm = self.broker.topic_config_manager
        result = tcm.validate_topic_for_update(header.topic)  # validateTopic + isSystemTopic
        if not result.valid:
            return RemotingCommand.create_response_command(ResponseCode.INVALID_PARAMETER, result.remark)
        try:
            filter_type = TopicFilterType(header.topic_filter_type)
            modification = parse_attributes(header.attributes)
        except ValueError as e:
            log.error("Update / create topic failed for [%r]", request)
            return RemotingCommand.create_response_command(ResponseCode.SYSTEM_ERROR, str(e))
        if modification.get("+message.type") == "MIXED":  # enableMixedMessageType is false
            return RemotingCommand.create_response_command(ResponseCode.INVALID_PARAMETER,
                                                           "MIXED message type is not supported.")
        topic_config = TopicConfig(header.topic, header.read_queue_nums, header.write_queue_nums, header.perm,
                                   filter_type, header.topic_sys_flag or 0, bool(header.order), modification)
        if topic_config == tcm.select_topic_config(header.topic):
            log.info("Broker receive request to update or create topic=%s, but topicConfig has  no changes , so "
                     "idempotent, caller address=%s", header.topic, channel.remote_addr)
            return RemotingCommand.create_response_command(ResponseCode.SUCCESS)
        existing = tcm.select_topic_config(header.topic)
        topic_config.attributes = apply_attributes(existing.attributes if existing else {}, modification)
        try:
            tcm.update_topic_config(topic_config)
        except ValueError as e:
            return RemotingCommand.create_response_command(ResponseCode.SYSTEM_ERROR, str(e))
        self.broker.register_increment_broker_data([topic_config], tcm.data_version)
        return RemotingCommand.create_response_command(ResponseCode.SUCCESS)

    def get_all_topic_config(self, channel: RemotingChannel, request: RemotingCommand) -> RemotingCommand:
        tcm = self.broker.topic_config_manager
        wrapper = TopicConfigAndMappingSerializeWrapper(
            topic_config_table={name: tcm.topic_config_table[name] for name in sorted(tcm.topic_config_table)},
            data_version=tcm.data_version,
            mapping_data_version=self.broker.topic_queue_mapping_data_version)
        return RemotingCommand.create_response_command(ResponseCode.SUCCESS,
                                                       body=remoting_serializable.encode(wrapper.to_json_dict()))

    # -- offsets -------------------------------------------------------------------------------
    def get_max_offset(self, channel: RemotingChannel, request: RemotingCommand) -> RemotingCommand:
        header = GetMaxOffsetRequestHeader.decode(request)
        offset = self.broker.message_store.get_max_offset_in_queue(header.topic, header.queue_id)
        response = RemotingCommand.create_response_command(ResponseCode.SUCCESS)
        return write_header(response, GetMaxOffsetResponseHeader(offset))

    def get_min_offset(self, channel: RemotingChannel, request: RemotingCommand) -> RemotingCommand:
        header = GetMinOffsetRequestHeader.decode(request)
        offset = self.broker.message_store.get_min_offset_in_queue(header.topic, header.queue_id)
        response = RemotingCommand.create_response_command(ResponseCode.SUCCESS)
        return write_header(response, GetMinOffsetResponseHeader(offset))

    def get_all_consumer_offset(self, channel: RemotingChannel, request: RemotingCommand) -> RemotingCommand:
        content = self.broker.consumer_offset_manager.encode()
        if not content:
            log.error("No consumer offset in this broker, client: %s ", channel.remote_addr)
            return RemotingCommand.create_response_command(ResponseCode.SYSTEM_ERROR, "No consumer offset in this broker")
        return RemotingCommand.create_response_command(ResponseCode.SUCCESS, body=content.encode("utf-8"))

    def get_all_delay_offset(self, channel: RemotingChannel, request: RemotingCommand) -> RemotingCommand:
        content = self.broker.schedule_message_service.encode()
        if not content:
            log.error("AdminBrokerProcessor#getAllDelayOffset: no delay offset in this broker, caller=%s",
                      channel.remote_addr)
            return RemotingCommand.create_response_command(ResponseCode.SYSTEM_ERROR, "No delay offset in this broker")
        return RemotingCommand.create_response_command(ResponseCode.SUCCESS, body=content.encode("utf-8"))

    def get_timer_check_point(self, channel: RemotingChannel, request: RemotingCommand) -> RemotingCommand:
        """``getTimerCheckPoint``: what a returning master's pre-online compares by data version."""
        tms = self.broker.timer_message_store
        if tms is None:
            log.error("AdminBrokerProcessor#getTimerCheckPoint: checkpoint is null, caller=%s", channel.remote_addr)
            return RemotingCommand.create_response_command(ResponseCode.SYSTEM_ERROR, "The checkpoint is null")
        return RemotingCommand.create_response_command(ResponseCode.SUCCESS, body=tms.timer_checkpoint.encode())

    # -- subscription groups -------------------------------------------------------------------
    def get_topic_config(self, channel: RemotingChannel, request: RemotingCommand) -> RemotingCommand:
        """``getTopicConfig``: one topic's config as TopicConfigAndQueueMappingDetail (rmqlab has
        no static topics, so there is never a mapping detail)."""
        header = GetTopicConfigRequestHeader.decode(request)
        topic_config = self.broker.topic_config_manager.select_topic_config(header.topic)
        if topic_config is None:
            return RemotingCommand.create_response_command(ResponseCode.TOPIC_NOT_EXIST,
                                                           f"No topic in this broker. topic: {header.topic}")
        return RemotingCommand.create_response_command(
            ResponseCode.SUCCESS, body=remoting_serializable.encode(topic_config.to_json_dict()))

    def get_subscription_group_config(self, channel: RemotingChannel, request: RemotingCommand) -> RemotingCommand:
        """``getSubscriptionGroup``: one group's config, SUBSCRIPTION_GROUP_NOT_EXIST when unknown."""
        header = GetSubscriptionGroupConfigRequestHeader.decode(request)
        config = self.broker.subscription_group_manager.subscription_group_table.get(header.group)
        if config is None:
            return RemotingCommand.create_response_command(ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST,
                                                           f"The subscription group {header.group} does not exist")
        return RemotingCommand.create_response_command(
            ResponseCode.SUCCESS, body=remoting_serializable.encode(config.to_json_dict()))

    def update_and_create_subscription_group(self, channel: RemotingChannel,
                                             request: RemotingCommand) -> RemotingCommand:
        log.info("AdminBrokerProcessor#updateAndCreateSubscriptionGroup called by %s", channel.remote_addr)
        if request.body:
            config = SubscriptionGroupConfig.from_json_dict(
                remoting_serializable.decode_json(request.body, "SubscriptionGroupConfig"), "SubscriptionGroupConfig")
            result = TopicValidator.validate_group(config.group_name)
            if not result.valid:
                return RemotingCommand.create_response_command(ResponseCode.INVALID_PARAMETER, result.remark)
            self.broker.subscription_group_manager.update_subscription_group_config(config)
        return RemotingCommand.create_response_command(ResponseCode.SUCCESS)

    def get_all_subscription_group(self, channel: RemotingChannel, request: RemotingCommand) -> RemotingCommand:
        sgm = self.broker.subscription_group_manager
        wrapper = SubscriptionGroupWrapper(dict(sgm.subscription_group_table), dict(sgm.forbidden_table),
                                           sgm.data_version)
        return RemotingCommand.create_response_command(ResponseCode.SUCCESS, body=wrapper.encode())

    # -- controller mode -------------------------------------------------------------------------
    def get_broker_epoch_cache(self, channel: RemotingChannel, request: RemotingCommand) -> RemotingCommand:
        bc = self.broker.broker_config
        if not bc.enableControllerMode:
            return RemotingCommand.create_response_command(ResponseCode.SYSTEM_ERROR,
                                                           "this request only for controllerMode ")
        replicas_manager = self.broker.replicas_manager
        cache = EpochEntryCache(bc.brokerClusterName, bc.brokerName, bc.brokerId,
                                replicas_manager.get_epoch_entries(), self.broker.message_store.get_max_phy_offset())
        return RemotingCommand.create_response_command(ResponseCode.SUCCESS, body=cache.encode())

    async def notify_broker_role_changed(self, channel: RemotingChannel, request: RemotingCommand) -> RemotingCommand:
        header = NotifyBrokerRoleChangedRequestHeader.decode(request)
        sync_state_set = SyncStateSet.decode(request.body)
        log.info("Receive notifyBrokerRoleChanged request, try to change brokerRole, request:%s", header)
        replicas_manager = self.broker.replicas_manager
        if replicas_manager is not None:
            # Errors become SYSTEM_ERROR in the remoting layer (Java: RemotingCommandException);
            # the request is oneway, so nobody reads the answer either way.
            await replicas_manager.change_broker_role(header.master_broker_id, header.master_address,
                                                      header.master_epoch, header.sync_state_set_epoch,
                                                      sync_state_set.sync_state_set)
        return RemotingCommand.create_response_command(ResponseCode.SUCCESS)

    # -- slave acting master (RIP-32) ----------------------------------------------------------
    async def notify_min_broker_id_change(self, channel: RemotingChannel, request: RemotingCommand) -> RemotingCommand:
        """``notifyMinBrokerIdChange`` (see the module docstring for the bad-input deviations)."""
        header = NotifyMinBrokerIdChangeRequestHeader.decode(request)
        broker = self.broker
        own_name = broker.broker_config.brokerName
        if header.broker_name is not None and header.broker_name != own_name:
            log.warning("min broker id change of broker group %s ignored: this broker is in %s", header.broker_name,
                        own_name)
            return RemotingCommand.create_response_command(
                ResponseCode.INVALID_PARAMETER,
                f"NOTIFY_MIN_BROKER_ID_CHANGE for broker group {header.broker_name}, but this broker is in "
                f"{own_name}: ignored")
        if header.min_broker_id is None:
            return RemotingCommand.create_response_command(
                ResponseCode.SYSTEM_ERROR, "NOTIFY_MIN_BROKER_ID_CHANGE without minBrokerId: ignored")
        log.warning("min broker id changed, prev %s, new %s", broker.min_broker_id_in_group, header.min_broker_id)
        await broker.update_min_broker_notified(header.min_broker_id, header.min_broker_addr,
                                                header.offline_broker_addr, header.ha_broker_addr)
        return RemotingCommand.create_response_command(ResponseCode.SUCCESS)

    def update_broker_ha_info(self, channel: RemotingChannel, request: RemotingCommand) -> RemotingCommand:
        """``updateBrokerHaInfo``: EXCHANGE_BROKER_HA_INFO, both directions (module docstring)."""
        header = ExchangeHAInfoRequestHeader.decode(request)
        broker = self.broker
        response = RemotingCommand.create_response_command(ResponseCode.SUCCESS)
        if header.master_ha_address is not None:
            # (RocketMQ's store also records masterAddress; rmqlab's HA client needs only the HA one.)
            broker.ha_service.update_ha_master_address(header.master_ha_address)
            checkpoint = broker.message_store.store_checkpoint
            if (checkpoint.master_flushed_offset == 0 and broker.message_store_config.syncMasterFlushOffsetWhenStartup
                    and header.master_flush_offset is not None):
                log.info("Set master flush offset in slave to %s", header.master_flush_offset)
                checkpoint.master_flushed_offset = header.master_flush_offset
        elif broker.broker_config.brokerId == MASTER_ID:
            write_header(response, ExchangeHAInfoResponseHeader(master_ha_address=broker.ha_server_addr,
                                                                master_flush_offset=broker.broker_init_max_offset,
                                                                master_address=broker.broker_addr))
        return response

    # -- statistics ----------------------------------------------------------------------------
    def get_broker_runtime_info(self, channel: RemotingChannel, request: RemotingCommand) -> RemotingCommand:
        return RemotingCommand.create_response_command(ResponseCode.SUCCESS,
                                                       body=KVTable(self.prepare_runtime_info()).encode())

    def prepare_runtime_info(self) -> dict[str, str]:
        """``prepareRuntimeInfo``: the entries rmqlab can fill honestly (no thread pools, no
        TPS sampling, no disk measurement)."""
        broker = self.broker
        store = broker.message_store
        stats = broker.broker_stats
        return {
            "bootTimestamp": str(broker.boot_timestamp),
            "brokerActive": "true" if broker.special_service_running else "false",
            "brokerVersionDesc": BROKER_VERSION_DESC,
            "brokerRole": broker.message_store_config.brokerRole.value,
            "commitLogMinOffset": str(store.get_min_phy_offset()),
            "commitLogMaxOffset": str(store.get_max_phy_offset()),
            "dispatchBehindBytes": str(store.dispatch_behind_bytes()),
            "remainHowManyDataToFlush": str(store.get_max_phy_offset() - store.commit_log.flushed_where()),
            "putMessageTimesTotal": str(max(stats.put_times_total, 1)),  # Java reports at least 1
            "putMessageFailedTimes": str(stats.put_failed_times),
            "putMessageSizeTotal": str(stats.put_size_total),
            "msgPutTotalTodayNow": str(stats.put_times_total),
            "msgGetTotalTodayNow": str(stats.get_total),
            "startAcceptSendRequestTimeStamp": "0",
        }

    def get_consume_stats(self, channel: RemotingChannel, request: RemotingCommand) -> RemotingCommand:
        header = GetConsumeStatsRequestHeader.decode(request)
        broker = self.broker
        store = broker.message_store
        cof = broker.consumer_offset_manager
        stats = ConsumeStats()
        for topic in sorted(self._topics_for_collecting(header)):
            topic_config = broker.topic_config_manager.select_topic_config(topic)
            if topic_config is None:
                log.warning("AdminBrokerProcessor#getConsumeStats: topic config does not exist, topic=%s", topic)
                continue
            for queue_id in range(topic_config.read_queue_nums):
                mq = MessageQueue(topic, broker.broker_config.brokerName, queue_id)
                broker_offset = max(0, store.get_max_offset_in_queue(topic, queue_id))
                consumer_offset = max(0, cof.query_offset(header.consumer_group, topic, queue_id))
                pull_offset = cof.query_pull_offset(header.consumer_group, topic, queue_id)
                wrapper = OffsetWrapper(broker_offset, consumer_offset, max(consumer_offset, pull_offset))
                if consumer_offset - 1 >= 0:
                    last = self._message_store_timestamp(topic, queue_id, consumer_offset - 1)
                    if last > 0:
                        wrapper.last_timestamp = last
                stats.offset_table[mq] = wrapper
        return RemotingCommand.create_response_command(ResponseCode.SUCCESS, body=stats.encode())

    def _topics_for_collecting(self, header: GetConsumeStatsRequestHeader) -> set[str]:
        provided = header.fetch_topic_list()
        if provided:
            return set(provided)
        cm = self.broker.consumer_manager
        topics = ({header.topic} if header.topic and header.topic.strip()
                  else set(self.broker.consumer_offset_manager.which_topic_by_consumer(header.consumer_group)))
        subscription_count = cm.find_subscription_data_count(header.consumer_group)
        return {t for t in topics
                if not (cm.find_subscription_data(header.consumer_group, t) is None and subscription_count > 0)}

    def _message_store_timestamp(self, topic: str, queue_id: int, consume_offset: int) -> int:
        """``getMessageStoreTimeStamp``: the store time of the message at a queue offset, -1 if gone."""
        store = self.broker.message_store
        cq = store.consume_queue_table.get((topic, queue_id))
        units = cq.get_units(consume_offset, 1) if cq is not None else []
        if not units:
            return -1
        phy, size, _ = units[0]
        data = store.commit_log.get_message(phy, size)
        if len(data) != size:
            return -1
        return decode(data, read_body=False, check_crc=False).store_timestamp

    # -- master-only queries (RIP-32: served by whichever broker the route shows as id 0) ----------
    def search_offset_by_timestamp(self, channel: RemotingChannel, request: RemotingCommand) -> RemotingCommand:
        header = SearchOffsetRequestHeader.decode(request)
        offset = get_offset_in_queue_by_time(self.broker.message_store, header.topic, header.queue_id,
                                             header.timestamp, header.get_boundary_type())
        response = RemotingCommand.create_response_command(ResponseCode.SUCCESS)
        return write_header(response, SearchOffsetResponseHeader(offset))

    def get_earliest_msg_storetime(self, channel: RemotingChannel, request: RemotingCommand) -> RemotingCommand:
        header = GetEarliestMsgStoretimeRequestHeader.decode(request)
        timestamp = get_earliest_message_time(self.broker.message_store, header.topic, header.queue_id)
        response = RemotingCommand.create_response_command(ResponseCode.SUCCESS)
        return write_header(response, GetEarliestMsgStoretimeResponseHeader(timestamp))

    # -- the broker's configuration ------------------------------------------------------------------
    def _configuration_version(self) -> DataVersion:
        if self.configuration_data_version is None:
            self.configuration_data_version = DataVersion(timestamp=self.broker.node.now_ms())
        return self.configuration_data_version

    def get_broker_config(self, channel: RemotingChannel, request: RemotingCommand) -> RemotingCommand:
        """``getBrokerConfig``: ``Configuration.getAllConfigsFormatString`` (every field of
        BrokerConfig, the Netty configs and MessageStoreConfig as sorted ``key=value`` lines, null
        ones left out) and the configuration's DataVersion in the header."""
        response = RemotingCommand.create_response_command(ResponseCode.SUCCESS,
                                                           body=broker_config_text(self.broker).encode("utf-8"))
        return write_header(response, GetBrokerConfigResponseHeader(self._configuration_version().to_json()))

    def delete_expired_commit_log(self, channel: RemotingChannel, request: RemotingCommand) -> RemotingCommand:
        """``deleteExpiredCommitLog``: files older than fileReservedTime go at the next passes
        whatever deleteWhen says (younger ones only when the disk is over its thresholds)."""
        log.warning("invoke deleteExpiredCommitLog start.")
        self.broker.message_store.execute_delete_files_manually()
        log.warning("invoke deleteExpiredCommitLog end.")
        return RemotingCommand.create_response_command(ResponseCode.SUCCESS, None)

    async def update_broker_config(self, channel: RemotingChannel, request: RemotingCommand) -> RemotingCommand:
        """``updateBrokerConfig``: the body's properties set the fields of that name on the live
        config objects (``Configuration.update``); a key of the black list (BrokerConfig's
        ``configBlackList``, default "configBlackList;brokerConfigPath") is NO_PERMISSION; a change
        of ``brokerPermission`` bumps the topic DataVersion and re-registers at once.

        As in RocketMQ every other key may be changed; one the broker reads only at start-up (ports,
        paths, brokerRole) changes the value shown, not the running broker, until it restarts.
        Deviations: RocketMQ ignores an unknown key and a value that does not parse (MixAll.properties2Object
        swallows the error) and answers SUCCESS; here either is INVALID_PARAMETER naming the key and
        nothing is changed. The new values live in memory only, another deviation: RocketMQ also
        writes them to brokerConfigPath, which is the `-c` file when the broker was started with one
        (BrokerStartup: BrokerPathConfigHelper.setBrokerConfigPath), so there a change survives a
        restart; rmqlab does not rewrite an operator's file."""
        from rmqlab.config.errors import ConfigError
        from rmqlab.config.fields import BadValue, parse_text
        from rmqlab.config.properties import parse_properties

        log.info("Broker receive request to update config, caller address=%s", channel.remote_addr)
        if not request.body:
            return RemotingCommand.create_response_command(ResponseCode.SUCCESS)
        try:
            entries = parse_properties(request.body.decode("utf-8"), "updateBrokerConfig")
        except (ConfigError, UnicodeDecodeError):
            log.error("string2Properties error")
            return RemotingCommand.create_response_command(ResponseCode.SYSTEM_ERROR, "string2Properties error")
        if any(e.key in CONFIG_BLACK_LIST for e in entries):
            return RemotingCommand.create_response_command(ResponseCode.NO_PERMISSION,
                                                           "Can not update config in black list.")
        targets = _config_targets(self.broker)
        changes: list[tuple[object, str, object]] = []
        for entry in entries:
            fields = targets.get(entry.key)
            if not fields:
                return RemotingCommand.create_response_command(ResponseCode.INVALID_PARAMETER,
                                                               _unknown_key(self.broker, entry.key))
            for obj, spec in fields:
                try:
                    changes.append((obj, entry.key, parse_text(spec, entry.value)))
                except BadValue as e:
                    return RemotingCommand.create_response_command(
                        ResponseCode.INVALID_PARAMETER, f"{entry.key} = '{entry.value}': expected {e.expected}")
        log.info("updateBrokerConfig, new config: [%s] client: %s ",
                 ", ".join(f"{e.key}={e.value}" for e in entries), channel.remote_addr)
        for obj, key, value in changes:
            setattr(obj, key, value)
        self._configuration_version().next_version(self.broker.node.now_ms())
        if any(e.key == "brokerPermission" for e in entries):
            self.broker.topic_config_manager.update_data_version()
            await self.broker.register_broker_all(False, False, True)
        return RemotingCommand.create_response_command(ResponseCode.SUCCESS)

    # -- queue locks (orderly consumption) and RIP-32's lock quorum ------------------------------
    async def lock_batch_mq(self, channel: RemotingChannel, request: RemotingCommand) -> RemotingCommand:
        """``lockBatchMQ``: lock the queues here; in strict mode (module docstring) also on the
        other members of the group, and grant only the queues a quorum of members locked."""
        body = LockBatchRequestBody.decode(request.body)
        missing = self._lock_body_missing(body, "LOCK_BATCH_MQ", need_client=True)
        if missing is not None:
            return missing
        broker = self.broker
        bc = broker.broker_config
        self_lock_ok = self.rebalance_lock_manager.try_lock_batch(body.consumer_group, body.mq_set, body.client_id)
        # The HashSets of RocketMQ's tryLockBatch are new HashSet<>(mqs.size()); the quorum's answer
        # is a new HashSet<>() (the capacity decides the order the queues are written in).
        lock_ok, capacity = self_lock_ok, len(body.mq_set)
        quorum = broker.message_store_config.totalReplicas // 2 + 1
        if not body.only_this_broker and bc.lockInStrictMode and quorum > 1:
            lock_count = {mq: 1 for mq in self_lock_ok}
            member_group = broker.broker_member_group
            if member_group is not None:
                forward = LockBatchRequestBody(body.consumer_group, body.client_id, True, list(self_lock_ok),
                                               mq_set_capacity=len(body.mq_set))
                others = [addr for broker_id, addr in member_group.broker_addrs.items() if broker_id != bc.brokerId]
                await self._forward_locks(others, forward, lock_count)
            lock_ok = [mq for mq, count in lock_count.items() if count >= quorum]
            capacity = DEFAULT_HASH_SET_CAPACITY
        return RemotingCommand.create_response_command(ResponseCode.SUCCESS,
                                                       body=LockBatchResponseBody(lock_ok, capacity).encode())

    async def _forward_locks(self, addrs: list[str], forward: LockBatchRequestBody,
                             lock_count: dict[MessageQueue, int]) -> None:
        """Lock ``forward``'s queues on each member (1000 ms each, all at once) and count every
        queue a member granted; wait at most 2000 ms. A member that fails or has not answered by
        then counts as not locked (its answer, if it comes later, is ignored)."""
        if not addrs:
            return
        node = self.broker.node
        all_done = asyncio.get_running_loop().create_future()
        remaining = len(addrs)
        counted = True  # False once the wait is over: late answers no longer count

        async def one(addr: str) -> None:
            nonlocal remaining
            try:
                granted = await self.broker.broker_outer_api.lock_batch_mq_async(addr, forward,
                                                                                 LOCK_FORWARD_TIMEOUT_MS)
                if counted:
                    for mq in granted:
                        lock_count[mq] = lock_count.get(mq, 0) + 1
            except (RemotingError, ValueError, OSError) as e:
                log.warning("lockBatchMQAsync on %s failed, %s", addr, e)
            finally:
                remaining -= 1
                if remaining == 0 and not all_done.done():
                    all_done.set_result(None)

        for addr in addrs:
            node.spawn(one(addr), name=f"lock-batch-mq {addr}")
        timer = node.call_later(LOCK_QUORUM_WAIT_MS, lambda: all_done.done() or all_done.set_result(None))
        try:
            await all_done
        finally:
            timer.cancel()
            counted = False

    def unlock_batch_mq(self, channel: RemotingChannel, request: RemotingCommand) -> RemotingCommand:
        """``unlockBatchMQ``: unlock here; in strict mode, instead, send the unlock (onlyThisBroker)
        to every member of the group, this broker included, and answer at once."""
        body = UnlockBatchRequestBody.decode(request.body)
        missing = self._lock_body_missing(body, "UNLOCK_BATCH_MQ", need_client=False)
        if missing is not None:
            return missing
        broker = self.broker
        if body.only_this_broker or not broker.broker_config.lockInStrictMode:
            self.rebalance_lock_manager.unlock_batch(body.consumer_group, body.mq_set, body.client_id)
        else:
            member_group = broker.broker_member_group
            if member_group is not None:
                forward = UnlockBatchRequestBody(body.consumer_group, body.client_id, True, list(body.mq_set))
                for addr in member_group.broker_addrs.values():
                    broker.node.spawn(self._forward_unlock(addr, forward), name=f"unlock-batch-mq {addr}")
        return RemotingCommand.create_response_command(ResponseCode.SUCCESS)

    async def _forward_unlock(self, addr: str, forward: UnlockBatchRequestBody) -> None:
        try:
            await self.broker.broker_outer_api.unlock_batch_mq_async(addr, forward, LOCK_FORWARD_TIMEOUT_MS)
        except (RemotingError, ValueError, OSError) as e:
            log.warning("unlockBatchMQ exception on %s, %s", addr, e)

    @staticmethod
    def _lock_body_missing(body: LockBatchRequestBody, what: str, need_client: bool) -> RemotingCommand | None:
        """SYSTEM_ERROR naming the missing property: no consumerGroup, or (a lock) no clientId
        (module docstring)."""
        required = [(body.consumer_group, "consumerGroup")] + ([(body.client_id, "clientId")] if need_client else [])
        for value, name in required:
            if value is None:
                return RemotingCommand.create_response_command(ResponseCode.SYSTEM_ERROR,
                                                               f"{what} without {name}: nothing locked or unlocked")
        return None


# BrokerConfig.configBlackList's default: keys UPDATE_BROKER_CONFIG refuses (rmqlab has neither field).
CONFIG_BLACK_LIST = frozenset({"configBlackList", "brokerConfigPath"})


def _config_targets(broker: BrokerController) -> dict[str, list[tuple[object, Any]]]:
    """key -> (config object, FieldSpec) of every object that has a field of that name."""
    from rmqlab.config.fields import config_fields, spec_of

    targets: dict[str, list[tuple[object, Any]]] = {}
    for _, obj in broker.startup_config.config_objects():
        for f in config_fields(obj):
            targets.setdefault(f.name, []).append((obj, spec_of(f)))
    return targets


def _unknown_key(broker: BrokerController, key: str) -> str:
    """Why ``key`` cannot be set, as the loader words it for a file (a typo and its closest key, a
    RocketMQ setting rmqlab does not implement, a key of another component)."""
    from rmqlab.config.loader import why_not_settable

    return "updateBrokerConfig: " + why_not_settable(broker.startup_config, key)


def broker_config_text(broker: BrokerController) -> str:
    """``Configuration.getAllConfigsFormatString``: the objects' fields merged in registration order
    (a later object's field of the same name wins), sorted by key, null values left out."""
    from rmqlab.config.fields import config_fields, format_value

    merged: dict[str, str] = {}
    for _, obj in broker.startup_config.config_objects():
        for f in config_fields(obj):
            value = getattr(obj, f.name)
            if value is not None:
                merged[f.name] = format_value(value)
    return "".join(f"{key}={merged[key]}\n" for key in sorted(merged))


def pickup_store_timestamp(store, offset: int, size: int) -> int:
    """``CommitLog.pickupStoreTimestamp``: the store time of the message at ``offset``, -1 when it
    is outside the commit log."""
    commit_log = store.commit_log
    if offset < commit_log.get_min_offset() or offset + size > commit_log.get_max_offset():
        return -1
    data = commit_log.get_message(offset, size)
    if len(data) != size:
        return -1
    return decode(data, read_body=False, check_crc=False).store_timestamp


def get_earliest_message_time(store, topic: str, queue_id: int) -> int:
    """``DefaultMessageStore.getEarliestMessageTime(topic, queueId)``: the store time of the queue's
    first unit (at its min offset), -1 when the queue is empty or the message is gone."""
    cq = store.consume_queue_table.get((topic, queue_id))
    if cq is None:
        return -1
    units = cq.get_units(cq.get_min_offset_in_queue(), 1)
    if not units:
        return -1
    phy, size, _ = units[0]
    return pickup_store_timestamp(store, phy, size)


def get_offset_in_queue_by_time(store, topic: str, queue_id: int, timestamp: int, boundary: BoundaryType) -> int:
    """``DefaultMessageStore.getOffsetInQueueByTime`` with ``ConsumeQueue.binarySearchInQueueByTime``:
    a binary search of the queue's units by the store time of their messages.

    LOWER: the first offset whose message was stored at or after ``timestamp``; UPPER: the last
    one stored at or before it. A time after the last message: LOWER the max offset, UPPER the last
    offset; before the first message: the min offset. With no message at exactly ``timestamp`` the
    two bracket it (UPPER < LOWER, RocketMQ's "range query" reading). The result is clamped to
    [min offset, max offset]; an empty or unknown queue answers 0; a unit whose message left the
    commit log counts as older than any time. Deviation: RocketMQ first picks the consume-queue file
    by time (``getConsumeQueueMappedFileByTime``) and searches in it; rmqlab searches the whole
    queue, which gives the same offset."""
    cq = store.consume_queue_table.get((topic, queue_id))
    if cq is None:
        return 0
    floor, end = cq.get_min_offset_in_queue(), cq.get_max_offset_in_queue()
    result = _binary_search_in_queue_by_time(store, cq, floor, end - 1, timestamp, boundary) if end > floor else 0
    return min(max(result, floor), end)


def _binary_search_in_queue_by_time(store, cq, floor: int, ceiling: int, timestamp: int,
                                    boundary: BoundaryType) -> int:
    def unit(index: int) -> tuple[int, int]:
        phy, size, _ = cq.get_units(index, 1)[0]
        return phy, size

    def store_time(index: int) -> int:
        return pickup_store_timestamp(store, *unit(index))

    if store_time(ceiling) < timestamp:  # every message is older
        return ceiling + 1 if boundary is BoundaryType.LOWER else ceiling
    if store_time(floor) > timestamp:  # every message is newer
        return floor
    min_phy = store.get_min_phy_offset()
    low, high = floor, ceiling
    target = left = right = -1
    while high >= low:
        mid = (low + high) // 2
        phy, size = unit(mid)
        if phy < min_phy:
            low, left = mid + 1, mid
            continue
        t = pickup_store_timestamp(store, phy, size)
        if t < 0:
            log.warning("Failed to query store timestamp for commit log offset: %d", phy)
            return 0
        if t == timestamp:
            target = mid
            break
        if t > timestamp:
            high, right = mid - 1, mid
        else:
            low, left = mid + 1, mid
    if target == -1:
        return right if boundary is BoundaryType.LOWER else left
    # Neighbours may share the store time: walk to the first (LOWER) or last (UPPER) of them.
    step, limit = (-1, floor) if boundary is BoundaryType.LOWER else (1, ceiling)
    while target != limit and store_time(target + step) == timestamp:
        target += step
    return target
