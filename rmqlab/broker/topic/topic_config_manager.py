"""TopicConfigManager: the broker's topic table, persisted as ``<storePathRootDir>/config/topics.json``.

Implements ``broker/src/main/java/org/apache/rocketmq/broker/topic/TopicConfigManager.java`` (the
plain JSON manager a RocketMQ 5 broker uses unless RocksDB or LMQ is enabled), serialised through
``remoting/.../protocol/body/TopicConfigSerializeWrapper.java``::

    {
    	"dataVersion":{"counter":..,"stateVersion":..,"timestamp":..},
    	"topicConfigTable":{"<topic>":{"attributes":{},"order":false,"perm":6,...}}
    }

Start-up (``init()``) puts the system topics a broker always has into the table without bumping
the data version; ``load()`` then lays the stored file over them (``putAll``), so a stored
definition wins and the system topics reach topics.json on the next persist.
Every change through this class bumps the data version (``updateDataVersion``) and persists.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Iterable
from typing import Any

from rmqlab.common.config_manager import (
    ConfigManager,
    check_object,
    parse_fastjson,
    state_version_source,
    to_fastjson,
)
from rmqlab.common.constant.perm_name import PermName
from rmqlab.common.data_version import DataVersion
from rmqlab.common.mix_all import REPLY_TOPIC_POSTFIX
from rmqlab.common.topic.topic_validator import TopicValidator, ValidateResult
from rmqlab.common.topic_config import TopicConfig

# PopAckConstants.REVIVE_TOPIC and TimerMessageStore.TIMER_TOPIC
REVIVE_TOPIC_PREFIX = TopicValidator.SYSTEM_TOPIC_PREFIX + "REVIVE_LOG_"
TIMER_TOPIC = TopicValidator.SYSTEM_TOPIC_PREFIX + "wheel_timer"

log = logging.getLogger(__name__)


class TopicConfigManager(ConfigManager):
    """Topic table of one broker (see the module docstring).

    Arguments after ``clock`` are the BrokerConfig / MessageStoreConfig values ``init()`` reads,
    with RocketMQ's defaults. ``state_machine_version`` is the message store's
    ``getStateMachineVersion`` (the master epoch in controller mode), stamped into every new
    data version; it defaults to 0 as for a store outside controller mode.
    """

    SCHEDULE_TOPIC_QUEUE_NUM = 18

    def __init__(
        self,
        store_path_root_dir: str,
        clock: Callable[[], int],
        *,
        broker_cluster_name: str = "DefaultCluster",
        # RocketMQ defaults brokerName to the local host name (DEFAULT_BROKER if unknown); rmqlab
        # modules do not look the host up, so the broker's configuration passes it.
        broker_name: str = "DEFAULT_BROKER",
        auto_create_topic_enable: bool = True,
        default_topic_queue_nums: int = 8,
        cluster_topic_enable: bool = True,
        broker_topic_enable: bool = True,
        trace_topic_enable: bool = False,
        msg_trace_topic_name: str = TopicValidator.RMQ_SYS_TRACE_TOPIC,
        revive_queue_num: int = 8,
        timer_wheel_enable: bool = True,
        state_machine_version: Callable[[], int] | None = None,
    ):
        super().__init__()
        self.store_path_root_dir = store_path_root_dir
        self.clock = clock
        self._state_machine_version = state_version_source(state_machine_version)
        self.data_version = DataVersion(timestamp=clock())
        self.topic_config_table: dict[str, TopicConfig] = {}
        # Called with a topic the broker created on its own (registerBrokerData); set by the broker.
        self.register_broker_data: Callable[[TopicConfig], None] | None = None
        # This broker's TopicValidator.addSystemTopic additions (see TopicValidator.is_system_topic).
        self.system_topics: set[str] = set()
        self._init_system_topics(
            broker_cluster_name=broker_cluster_name,
            broker_name=broker_name,
            auto_create_topic_enable=auto_create_topic_enable,
            default_topic_queue_nums=default_topic_queue_nums,
            cluster_topic_enable=cluster_topic_enable,
            broker_topic_enable=broker_topic_enable,
            trace_topic_enable=trace_topic_enable,
            msg_trace_topic_name=msg_trace_topic_name,
            revive_queue_num=revive_queue_num,
            timer_wheel_enable=timer_wheel_enable,
        )

    def _init_system_topics(
        self,
        *,
        broker_cluster_name: str,
        broker_name: str,
        auto_create_topic_enable: bool,
        default_topic_queue_nums: int,
        cluster_topic_enable: bool,
        broker_topic_enable: bool,
        trace_topic_enable: bool,
        msg_trace_topic_name: str,
        revive_queue_num: int,
        timer_wheel_enable: bool,
    ) -> None:
        """``TopicConfigManager.init()``, in RocketMQ's order."""

        def system(name: str, queues: int | None = None, perm: int | None = None) -> None:
            tc = TopicConfig(name)
            if queues is not None:
                tc.read_queue_nums = tc.write_queue_nums = queues
            if perm is not None:
                tc.perm = perm
            self.system_topics.add(name)
            self.put_topic_config(tc)

        rw = PermName.PERM_READ | PermName.PERM_WRITE
        system(TopicValidator.RMQ_SYS_SELF_TEST_TOPIC, 1)
        if auto_create_topic_enable:
            # TBW102 is the template auto-created topics inherit from, hence PERM_INHERIT.
            system(TopicValidator.AUTO_CREATE_TOPIC_KEY_TOPIC, default_topic_queue_nums, PermName.PERM_INHERIT | rw)
        system(TopicValidator.RMQ_SYS_BENCHMARK_TOPIC, 1024)
        # The cluster-name and broker-name topics let clients route "to this cluster/broker".
        system(broker_cluster_name, None, PermName.PERM_INHERIT | (rw if cluster_topic_enable else 0))
        system(broker_name, 1, PermName.PERM_INHERIT | (rw if broker_topic_enable else 0))
        system(TopicValidator.RMQ_SYS_OFFSET_MOVED_EVENT, 1)
        system(TopicValidator.RMQ_SYS_SCHEDULE_TOPIC, self.SCHEDULE_TOPIC_QUEUE_NUM)
        if trace_topic_enable:
            system(msg_trace_topic_name, 1)
        system(f"{broker_cluster_name}_{REPLY_TOPIC_POSTFIX}", 1)
        system(REVIVE_TOPIC_PREFIX + broker_cluster_name, revive_queue_num)
        # RIP-32: lets an old name server answer GetBrokerMemberGroup through a topic route.
        system(TopicValidator.SYNC_BROKER_MEMBER_GROUP_PREFIX + broker_name, 1, PermName.PERM_INHERIT)
        system(TopicValidator.RMQ_SYS_TRANS_HALF_TOPIC, 1)
        system(TopicValidator.RMQ_SYS_TRANS_OP_HALF_TOPIC, 1)
        if timer_wheel_enable:
            system(TIMER_TOPIC, 1)

    # -- table access --------------------------------------------------------------------------

    def put_topic_config(self, topic_config: TopicConfig) -> TopicConfig | None:
        """Put without versioning or persisting (``putTopicConfig``); returns the replaced entry."""
        old = self.topic_config_table.get(topic_config.topic_name)
        self.topic_config_table[topic_config.topic_name] = topic_config
        return old

    def select_topic_config(self, topic: str) -> TopicConfig | None:
        return self.topic_config_table.get(topic)

    def contains_topic(self, topic: str) -> bool:
        return topic in self.topic_config_table

    def is_order_topic(self, topic: str) -> bool:
        tc = self.topic_config_table.get(topic)
        return tc is not None and tc.order

    def is_system_topic(self, topic: str) -> bool:
        return TopicValidator.is_system_topic(topic, self.system_topics)

    def validate_topic_for_update(self, topic: str) -> ValidateResult:
        """The name checks ``AdminBrokerProcessor.updateAndCreateTopic`` runs before
        ``updateTopicConfig`` (``validateSystemTopicWhenUpdateTopic`` defaults to true)."""
        result = TopicValidator.validate_topic(topic)
        if not result.valid:
            return result
        if self.is_system_topic(topic):
            return ValidateResult(False, f"The topic[{topic}] is conflict with system topic.")
        return ValidateResult(True, "")

    # -- changes (each bumps the data version) ----------------------------------------------------

    def update_data_version(self) -> None:
        self.data_version.next_version(self.clock(), self._state_machine_version())

    def _update_single_topic_config_without_persist(self, topic_config: TopicConfig) -> None:
        # Deviation: RocketMQ validates the name in the request processor, not here; rmqlab checks
        # it here as well so no name RocketMQ would reject can reach topics.json.
        result = TopicValidator.validate_topic(topic_config.topic_name)
        if not result.valid:
            raise ValueError(result.remark)
        # Deviation: RocketMQ merges "+key"/"-key" attribute edits against TopicAttributes.ALL
        # (AttributeUtil.alterCurrentAttributes); rmqlab stores the attributes it is given.
        self.put_topic_config(topic_config)
        self.update_data_version()

    def update_topic_config(self, topic_config: TopicConfig) -> None:
        """``updateTopicConfig``: create or replace, bump the data version, persist."""
        self._update_single_topic_config_without_persist(topic_config)
        self.persist()

    def update_topic_config_list(self, topic_configs: Iterable[TopicConfig]) -> None:
        """``updateTopicConfigList``: one data-version bump per topic, one persist."""
        for tc in topic_configs:
            self._update_single_topic_config_without_persist(tc)
        self.persist()

    def create_topic_if_absent(self, topic_config: TopicConfig) -> TopicConfig:
        """``createTopicIfAbsent``: the stored entry if there is one, else store ``topic_config``."""
        if not topic_config.topic_name:
            raise ValueError("TopicName")
        existing = self.topic_config_table.get(topic_config.topic_name)
        if existing is not None:
            return existing
        self.put_topic_config(topic_config)
        self.update_data_version()
        self.persist()
        return topic_config

    # -- topics the broker creates on its own (auto-create, retry/DLQ) ----------------------------

    def _register_broker_data(self, topic_config: TopicConfig) -> None:
        # TopicConfigManager.registerBrokerData: tell the name servers about the new topic at once
        # (BrokerController.registerIncrementBrokerData); the broker installs the callback.
        if self.register_broker_data is not None:
            self.register_broker_data(topic_config)

    def create_topic_in_send_message_method(self, topic: str, default_topic: str, remote_address: str,
                                            client_default_topic_queue_nums: int, topic_sys_flag: int,
                                            *, auto_create_topic_enable: bool = True) -> TopicConfig | None:
        """``createTopicInSendMessageMethod``: a topic a producer sends to before anyone created
        it inherits from ``default_topic`` (TBW102) when that topic carries PERM_INHERIT: queues
        ``min(client's defaultTopicQueueNums, TBW102's write queues)``, TBW102's perm without
        INHERIT, its filter type. None when there is no such template or it does not inherit.

        Quirk kept from RocketMQ: with ``autoCreateTopicEnable=false`` a stored TBW102 loses its
        INHERIT bit right here (its perm is set to READ|WRITE in the table)."""
        existing = self.topic_config_table.get(topic)
        if existing is not None:
            return existing
        topic_config: TopicConfig | None = None
        default_config = self.topic_config_table.get(default_topic)
        if default_config is not None:
            if default_topic == TopicValidator.AUTO_CREATE_TOPIC_KEY_TOPIC and not auto_create_topic_enable:
                default_config.perm = PermName.PERM_READ | PermName.PERM_WRITE
            if PermName.is_inherited(default_config.perm):
                queue_nums = max(0, min(client_default_topic_queue_nums, default_config.write_queue_nums))
                topic_config = TopicConfig(topic, queue_nums, queue_nums,
                                           default_config.perm & ~PermName.PERM_INHERIT,
                                           default_config.topic_filter_type, topic_sys_flag)
            else:
                log.warning("Create new topic failed, because the default topic[%s] has no perm [%s] producer:[%s]",
                            default_topic, default_config.perm, remote_address)
        else:
            log.warning("Create new topic failed, because the default topic[%s] not exist. producer:[%s]",
                        default_topic, remote_address)
        if topic_config is not None:
            log.info("Create new topic by default topic:[%s] config:[%s] producer:[%s]", default_topic,
                     topic_config, remote_address)
            self.put_topic_config(topic_config)
            self.update_data_version()
            self.persist()
            self._register_broker_data(topic_config)
        return topic_config

    def create_topic_in_send_message_back_method(self, topic: str, client_default_topic_queue_nums: int, perm: int,
                                                 topic_sys_flag: int, is_order: bool = False) -> TopicConfig:
        """``createTopicInSendMessageBackMethod``: create a retry or DLQ topic (or fix the order
        flag of an existing one)."""
        existing = self.topic_config_table.get(topic)
        if existing is not None:
            if is_order != existing.order:
                existing.order = is_order
                self.update_topic_config(existing)
            return existing
        topic_config = TopicConfig(topic, client_default_topic_queue_nums, client_default_topic_queue_nums, perm,
                                   topic_sys_flag=topic_sys_flag, order=is_order)
        log.info("create new topic %s", topic_config)
        self.put_topic_config(topic_config)
        self.update_data_version()
        self.persist()
        self._register_broker_data(topic_config)
        return topic_config

    def update_order_topic_config(self, order_topics: Iterable[str]) -> None:
        """``updateOrderTopicConfig``: mark the topics the name server lists as ordered
        (the ORDER_TOPIC_CONFIG kv table a registration returns)."""
        changed = False
        for topic in order_topics:
            tc = self.topic_config_table.get(topic)
            if tc is not None and not tc.order:
                tc.order = True
                changed = True
                log.info("update order topic config, topic=%s, order=%s", topic, True)
        if changed:
            self.update_data_version()
            self.persist()

    def delete_topic_config(self, topic: str) -> bool:
        """``deleteTopicConfig``: True if the topic existed (then versioned and persisted)."""
        if self.topic_config_table.pop(topic, None) is None:
            return False
        self.update_data_version()
        self.persist()
        return True

    # -- ConfigManager ------------------------------------------------------------------------------

    def config_file_path(self) -> str:
        return os.path.join(self.store_path_root_dir, "config", "topics.json")

    def to_json_dict(self) -> dict[str, Any]:
        # Deviation: Java writes the ConcurrentHashMap in hash order; rmqlab sorts by name so a
        # file's bytes depend only on its content.
        return {
            "dataVersion": self.data_version.to_json_dict(),
            "topicConfigTable": {
                name: self.topic_config_table[name].to_json_dict() for name in sorted(self.topic_config_table)
            },
        }

    def encode(self, pretty: bool = False) -> str:
        return to_fastjson(self.to_json_dict(), pretty)

    def decode(self, json_str: str) -> None:
        doc = check_object(parse_fastjson(json_str), "topics.json")
        table_json = check_object(doc.get("topicConfigTable", {}), "topicConfigTable")
        table: dict[str, TopicConfig] = {}
        for name, entry in table_json.items():
            where = f"topicConfigTable.{name}"
            tc = TopicConfig.from_json_dict(entry, where)
            if tc.topic_name != name:
                raise ValueError(f"{where}.topicName: {tc.topic_name!r} differs from its key {name!r}")
            table[name] = tc
        # The wrapper's default is a fresh DataVersion when the file has none.
        version = (
            DataVersion.from_json_dict(doc["dataVersion"], "dataVersion")
            if "dataVersion" in doc
            else DataVersion(timestamp=self.clock())
        )
        # Everything parsed: only now change state, so a bad file leaves the manager untouched.
        self.topic_config_table.update(table)
        self.data_version.assign_new_one(version)
