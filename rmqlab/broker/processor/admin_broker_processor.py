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
* GET_MAX_OFFSET (30), GET_MIN_OFFSET (31) — a queue's offsets;
* GET_BROKER_RUNTIME_INFO (28) — ``mqadmin brokerStatus``, a KVTable;
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

Deviation: topic attributes are stored without RocketMQ's validation against the known attribute
names (``AttributeUtil.alterCurrentAttributes``): "+key=value" sets, "-key" removes.
"""

from __future__ import annotations

import inspect
import logging
from typing import TYPE_CHECKING, Any
from collections.abc import Callable

from rmqlab.common.message.message_decoder import decode
from rmqlab.common.topic.topic_validator import TopicValidator
from rmqlab.config.broker import MASTER_ID
from rmqlab.common.topic_config import TopicConfig, TopicFilterType
from rmqlab.remoting.protocol import remoting_serializable
from rmqlab.remoting.protocol.body.epoch_entry_cache import EpochEntryCache
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
        }

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

