"""ConsumerManager and ConsumerGroupInfo: which consumers of which group are connected, and what
they subscribe to (fed by HEART_BEAT, emptied by UNREGISTER_CLIENT, channel close and expiry).

RocketMQ ``broker/src/main/java/org/apache/rocketmq/broker/client/ConsumerManager.java``,
``ConsumerGroupInfo.java``, ``ConsumerGroupEvent.java`` and ``DefaultConsumerIdsChangeListener.java``.
GET_CONSUMER_LIST_BY_GROUP answers from here (the client ids the C++ push consumer rebalances
over), and a pull without the subscription flag reads its subscription from here. When a group's
membership changes, the listener tells every member with NOTIFY_CONSUMER_IDS_CHANGED (oneway) so
the clients rebalance at once instead of at their next 20 s timer (``notifyConsumerIdsChangedEnable``).

The compensation table (RocketMQ 5) records the group and subscription of clients that pull
without heartbeating (the C++ PullConsumer): GET_CONSUME_STATS and the admin client then still
know what they subscribe to; it expires after ``subscriptionExpiredTimeout``.
"""

from __future__ import annotations

import enum
import logging
from collections.abc import Callable, Iterable
from typing import Any

from rmqlab.broker.client.client_channel_info import ClientChannelInfo
from rmqlab.remoting.protocol.header.broker.heartbeat import (ConsumeFromWhere, ConsumeType, MessageModel,
                                                              SubscriptionData)

log = logging.getLogger("rmqlab.broker")

CHANNEL_EXPIRED_TIMEOUT_MS = 1000 * 120       # BrokerConfig.channelExpiredTimeout
SUBSCRIPTION_EXPIRED_TIMEOUT_MS = 1000 * 60 * 10  # BrokerConfig.subscriptionExpiredTimeout


class ConsumerGroupEvent(enum.Enum):
    CHANGE = "CHANGE"                      # the group's channels changed: args = list of channels
    UNREGISTER = "UNREGISTER"              # the group has no consumer left
    REGISTER = "REGISTER"                  # a heartbeat registered subscriptions: args = subscriptions
    CLIENT_REGISTER = "CLIENT_REGISTER"    # a new client channel joined
    CLIENT_UNREGISTER = "CLIENT_UNREGISTER"  # a client channel left


ConsumerIdsChangeListener = Callable[..., None]


class ConsumerGroupInfo:
    def __init__(self, group_name: str, consume_type: ConsumeType | None = None,
                 message_model: MessageModel | None = None, consume_from_where: ConsumeFromWhere | None = None):
        self.group_name = group_name
        # Insertion-ordered: getAllClientId lists clients in the order they joined.
        self.channel_info_table: dict[int, ClientChannelInfo] = {}
        self.subscription_table: dict[str, SubscriptionData] = {}
        self.consume_type = consume_type
        self.message_model = message_model
        self.consume_from_where = consume_from_where
        self.last_update_timestamp = 0

    def find_channel(self, channel_or_client_id: Any) -> ClientChannelInfo | None:
        if isinstance(channel_or_client_id, str):
            for info in self.channel_info_table.values():
                if info.client_id == channel_or_client_id:
                    return info
            return None
        return self.channel_info_table.get(id(channel_or_client_id))

    def get_all_channel(self) -> list[Any]:
        return [info.channel for info in self.channel_info_table.values()]

    def get_all_client_id(self) -> list[str]:
        return [info.client_id for info in self.channel_info_table.values()]

    def unregister_channel(self, client_channel_info: ClientChannelInfo) -> bool:
        old = self.channel_info_table.pop(id(client_channel_info.channel), None)
        if old is not None:
            log.info("unregister a consumer[%s] from consumerGroupInfo %s", self.group_name, old)
            return True
        return False

    def do_channel_close_event(self, remote_addr: str, channel: Any) -> ClientChannelInfo | None:
        info = self.channel_info_table.pop(id(channel), None)
        if info is not None:
            log.warning("NETTY EVENT: remove not active channel[%s] from ConsumerGroupInfo groupChannelTable, "
                        "consumer group: %s", info, self.group_name)
        return info

    def update_channel(self, info_new: ClientChannelInfo, consume_type, message_model, consume_from_where,
                       now_ms: int) -> bool:
        """``updateChannel``: True when a new connection joined the group."""
        updated = False
        self.consume_type, self.message_model, self.consume_from_where = consume_type, message_model, consume_from_where
        info_old = self.channel_info_table.get(id(info_new.channel))
        if info_old is None:
            self.channel_info_table[id(info_new.channel)] = info_new
            log.info("new consumer connected, group: %s %s %s channel: %s", self.group_name, consume_type,
                     message_model, info_new)
            updated = True
            info_old = info_new
        elif info_old.client_id != info_new.client_id:
            log.error("ConsumerGroupInfo: consumer channel exists in broker, but clientId is not the same one, "
                      "group=%s, old clientChannelInfo=%s, new clientChannelInfo=%s", self.group_name, info_old, info_new)
            self.channel_info_table[id(info_new.channel)] = info_new
        self.last_update_timestamp = now_ms
        info_old.last_update_timestamp = now_ms
        return updated

    def update_subscription(self, sub_list: Iterable[SubscriptionData], now_ms: int) -> bool:
        """``updateSubscription``: add new topics, replace newer versions, drop topics no longer
        subscribed; True when the set of topics changed."""
        updated = False
        topics: set[str] = set()
        for sub in sub_list:
            old = self.subscription_table.get(sub.topic)
            if old is None:
                self.subscription_table[sub.topic] = sub
                updated = True
                log.info("subscription changed, add new topic, group: %s %s", self.group_name, sub)
            elif sub.sub_version > old.sub_version:
                if self.consume_type is ConsumeType.CONSUME_PASSIVELY:
                    log.info("subscription changed, group: %s OLD: %s NEW: %s", self.group_name, old, sub)
                self.subscription_table[sub.topic] = sub
            topics.add(sub.topic)
        for topic in [t for t in self.subscription_table if t not in topics]:
            log.warning("subscription changed, group: %s remove topic %s %s", self.group_name, topic,
                        self.subscription_table[topic])
            del self.subscription_table[topic]
            updated = True
        self.last_update_timestamp = now_ms
        return updated

    def get_subscribe_topics(self) -> set[str]:
        return set(self.subscription_table)

    def find_subscription_data(self, topic: str) -> SubscriptionData | None:
        return self.subscription_table.get(topic)


class ConsumerManager:
    def __init__(self, listener: ConsumerIdsChangeListener, clock: Callable[[], int], *,
                 channel_expired_timeout: int = CHANNEL_EXPIRED_TIMEOUT_MS,
                 subscription_expired_timeout: int = SUBSCRIPTION_EXPIRED_TIMEOUT_MS):
        self.listeners: list[ConsumerIdsChangeListener] = [listener]
        self.clock = clock
        self.channel_expired_timeout = channel_expired_timeout
        self.subscription_expired_timeout = subscription_expired_timeout
        self.consumer_table: dict[str, ConsumerGroupInfo] = {}
        self.topic_group_table: dict[str, set[str]] = {}
        self.consumer_compensation_table: dict[str, ConsumerGroupInfo] = {}

    def _call(self, event: ConsumerGroupEvent, group: str, *args: Any) -> None:
        for listener in self.listeners:
            try:
                listener(event, group, *args)
            except Exception:
                log.exception("failed to call ConsumerIdsChangeListener %s", listener)

    # -- lookups ------------------------------------------------------------------------------
    def find_channel(self, group: str, channel_or_client_id: Any) -> ClientChannelInfo | None:
        info = self.consumer_table.get(group)
        return info.find_channel(channel_or_client_id) if info else None

    def find_subscription_data(self, group: str, topic: str, from_compensation_table: bool = True):
        info = self.consumer_table.get(group)
        if info is not None:
            sub = info.find_subscription_data(topic)
            if sub is not None:
                return sub
        if from_compensation_table:
            comp = self.consumer_compensation_table.get(group)
            if comp is not None:
                return comp.find_subscription_data(topic)
        return None

    def get_consumer_group_info(self, group: str, from_compensation_table: bool = False) -> ConsumerGroupInfo | None:
        info = self.consumer_table.get(group)
        if info is None and from_compensation_table:
            info = self.consumer_compensation_table.get(group)
        return info

    def find_subscription_data_count(self, group: str) -> int:
        info = self.get_consumer_group_info(group)
        return len(info.subscription_table) if info else 0

    def query_topic_consume_by_who(self, topic: str) -> set[str]:
        return {g for g, info in self.consumer_table.items() if topic in info.subscription_table}

    # -- compensation (pulls without heartbeat) -----------------------------------------------
    def compensate_basic_consumer_info(self, group: str, consume_type: ConsumeType, message_model: MessageModel) -> None:
        info = self.consumer_compensation_table.setdefault(group, ConsumerGroupInfo(group))
        info.consume_type, info.message_model = consume_type, message_model

    def compensate_subscribe_data(self, group: str, topic: str, subscription_data: SubscriptionData) -> None:
        info = self.consumer_compensation_table.setdefault(group, ConsumerGroupInfo(group))
        info.subscription_table[topic] = subscription_data

    # -- registration -------------------------------------------------------------------------
    def register_consumer(self, group: str, client_channel_info: ClientChannelInfo, consume_type: ConsumeType,
                          message_model: MessageModel, consume_from_where: ConsumeFromWhere,
                          sub_list: list[SubscriptionData], is_notify_consumer_ids_changed_enable: bool,
                          update_subscription: bool = True) -> bool:
        """``registerConsumer``: True when the group's members or subscriptions changed."""
        now = self.clock()
        info = self.consumer_table.get(group)
        if info is None:
            info = self.consumer_table[group] = ConsumerGroupInfo(group, consume_type, message_model, consume_from_where)
        for sub in sub_list:
            self.topic_group_table.setdefault(sub.topic, set()).add(group)
        r1 = info.update_channel(client_channel_info, consume_type, message_model, consume_from_where, now)
        if r1:
            self._call(ConsumerGroupEvent.CLIENT_REGISTER, group, client_channel_info, {s.topic for s in sub_list})
        r2 = info.update_subscription(sub_list, now) if update_subscription else False
        if (r1 or r2) and is_notify_consumer_ids_changed_enable and info.message_model is not MessageModel.BROADCASTING:
            self._call(ConsumerGroupEvent.CHANGE, group, info.get_all_channel())
        self._call(ConsumerGroupEvent.REGISTER, group, sub_list, client_channel_info)
        return r1 or r2

    def register_consumer_without_sub(self, group: str, client_channel_info: ClientChannelInfo,
                                      consume_type: ConsumeType, message_model: MessageModel,
                                      consume_from_where: ConsumeFromWhere,
                                      is_notify_consumer_ids_changed_enable: bool) -> bool:
        """``registerConsumerWithoutSub`` (heartbeat v2 without subscriptions)."""
        info = self.consumer_table.get(group)
        if info is None:
            info = self.consumer_table[group] = ConsumerGroupInfo(group, consume_type, message_model, consume_from_where)
        for sub in info.subscription_table.values():
            self.topic_group_table.setdefault(sub.topic, set()).add(group)
        updated = info.update_channel(client_channel_info, consume_type, message_model, consume_from_where, self.clock())
        if updated and is_notify_consumer_ids_changed_enable and info.message_model is not MessageModel.BROADCASTING:
            self._call(ConsumerGroupEvent.CHANGE, group, info.get_all_channel())
        return updated

    def unregister_consumer(self, group: str, client_channel_info: ClientChannelInfo,
                            is_notify_consumer_ids_changed_enable: bool) -> None:
        info = self.consumer_table.get(group)
        if info is None:
            return
        if info.unregister_channel(client_channel_info):
            self._call(ConsumerGroupEvent.CLIENT_UNREGISTER, group, client_channel_info, info.get_subscribe_topics())
        if not info.channel_info_table:
            removed = self.consumer_table.pop(group, None)
            if removed is not None:
                log.info("unregister consumer ok, no any connection, and remove consumer group, %s", group)
                self._call(ConsumerGroupEvent.UNREGISTER, group)
                self._clear_topic_group_table(removed)
        if is_notify_consumer_ids_changed_enable and info.message_model is not MessageModel.BROADCASTING:
            self._call(ConsumerGroupEvent.CHANGE, group, info.get_all_channel())

    def _clear_topic_group_table(self, info: ConsumerGroupInfo) -> None:
        for topic in info.get_subscribe_topics():
            groups = self.topic_group_table.get(topic)
            if groups is not None:
                groups.discard(info.group_name)
                if not groups:
                    del self.topic_group_table[topic]

    # -- channel events and expiry ------------------------------------------------------------
    def do_channel_close_event(self, remote_addr: str, channel: Any) -> bool:
        removed = False
        for group, info in list(self.consumer_table.items()):
            client = info.do_channel_close_event(remote_addr, channel)
            if client is None:
                continue
            removed = True
            self._call(ConsumerGroupEvent.CLIENT_UNREGISTER, group, client, info.get_subscribe_topics())
            if not info.channel_info_table:
                gone = self.consumer_table.pop(group, None)
                if gone is not None:
                    log.info("unregister consumer ok, no any connection, and remove consumer group, %s", group)
                    self._call(ConsumerGroupEvent.UNREGISTER, group)
                    self._clear_topic_group_table(gone)
            if info.message_model is not MessageModel.BROADCASTING:
                self._call(ConsumerGroupEvent.CHANGE, group, info.get_all_channel())
        return removed

    def scan_not_active_channel(self) -> None:
        """``scanNotActiveChannel``: drop (and close) channels silent for channelExpiredTimeout."""
        now = self.clock()
        for group, info in list(self.consumer_table.items()):
            for key, client in list(info.channel_info_table.items()):
                if now - client.last_update_timestamp > self.channel_expired_timeout:
                    log.warning("SCAN: remove expired channel from ConsumerManager consumerTable. channel=%s, "
                                "consumerGroup=%s", getattr(client.channel, "remote_addr", "?"), group)
                    self._call(ConsumerGroupEvent.CLIENT_UNREGISTER, group, client, info.get_subscribe_topics())
                    close = getattr(client.channel, "close", None)
                    if close is not None:
                        close("expired")
                    info.channel_info_table.pop(key, None)
            if not info.channel_info_table:
                log.warning("SCAN: remove expired channel from ConsumerManager consumerTable, all clear, "
                            "consumerGroup=%s", group)
                self.consumer_table.pop(group, None)
        self.remove_expire_consumer_group_info()

    def remove_expire_consumer_group_info(self) -> None:
        now = self.clock()
        for group, info in list(self.consumer_compensation_table.items()):
            for topic in [t for t, s in info.subscription_table.items()
                          if now - s.sub_version > self.subscription_expired_timeout]:
                del info.subscription_table[topic]
                if not info.subscription_table:
                    self.consumer_compensation_table.pop(group, None)
