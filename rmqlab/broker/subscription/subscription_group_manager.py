"""SubscriptionGroupManager: consumer-group settings, persisted as ``<root>/config/subscriptionGroup.json``.

Implements ``broker/src/main/java/org/apache/rocketmq/broker/subscription/SubscriptionGroupManager.java``
(the JSON manager a RocketMQ 5 broker uses unless RocksDB or LMQ is enabled). RocketMQ serialises
the manager itself, so the file holds its getters, sorted by name::

    {
    	"dataVersion":{...},
    	"forbiddenTable":{"<group>":{"<topic>":<bits>}},
    	"subscriptionGroupTable":{"<group>":{"attributes":{},"brokerId":0,...}}
    }

Start-up (``init()``) registers the system groups without bumping the data version; ``load()``
lays the stored file over them. Every change bumps the data version and persists (except
``disableConsume``, which RocketMQ only versions).
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Iterable
from typing import Any

from rmqlab.common.config_manager import (
    ConfigManager,
    check_int,
    check_object,
    parse_fastjson,
    state_version_source,
    to_fastjson,
)
from rmqlab.common.data_version import DataVersion
from rmqlab.common.topic.topic_validator import TopicValidator
from rmqlab.remoting.protocol.subscription.subscription_group_config import SubscriptionGroupConfig

log = logging.getLogger(__name__)

# MixAll group names.
TOOLS_CONSUMER_GROUP = "TOOLS_CONSUMER"
FILTERSRV_CONSUMER_GROUP = "FILTERSRV_CONSUMER"
SELF_TEST_CONSUMER_GROUP = "SELF_TEST_C_GROUP"
ONS_HTTP_PROXY_GROUP = "CID_ONS-HTTP-PROXY"
CID_ONSAPI_PULL_GROUP = "CID_ONSAPI_PULL"
CID_ONSAPI_PERMISSION_GROUP = "CID_ONSAPI_PERMISSION"
CID_ONSAPI_OWNER_GROUP = "CID_ONSAPI_OWNER"
CID_SYS_RMQ_TRANS = "CID_RMQ_SYS_TRANS"
CID_RMQ_SYS_PREFIX = "CID_RMQ_SYS_"

# SubscriptionGroupManager.init(), in order.
SYSTEM_GROUPS = (
    TOOLS_CONSUMER_GROUP,
    FILTERSRV_CONSUMER_GROUP,
    SELF_TEST_CONSUMER_GROUP,
    ONS_HTTP_PROXY_GROUP,
    CID_ONSAPI_PULL_GROUP,
    CID_ONSAPI_PERMISSION_GROUP,
    CID_ONSAPI_OWNER_GROUP,
    CID_SYS_RMQ_TRANS,
)


class SubscriptionGroupManager(ConfigManager):
    """Consumer-group table of one broker (see the module docstring)."""

    def __init__(
        self,
        store_path_root_dir: str,
        clock: Callable[[], int],
        *,
        auto_create_subscription_group: bool = True,
        enable_create_sys_group: bool = True,
        state_machine_version: Callable[[], int] | None = None,
    ):
        super().__init__()
        self.store_path_root_dir = store_path_root_dir
        self.clock = clock
        self.auto_create_subscription_group = auto_create_subscription_group
        self.enable_create_sys_group = enable_create_sys_group
        self._state_machine_version = state_version_source(state_machine_version)
        self.data_version = DataVersion(timestamp=clock())
        self.subscription_group_table: dict[str, SubscriptionGroupConfig] = {}
        # group -> topic -> bit set of forbidden operations (persisted).
        self.forbidden_table: dict[str, dict[str, int]] = {}
        for name in SYSTEM_GROUPS:
            # Java also calls setConsumeBroadcastEnable(true) on most of them: already the default.
            self.put_subscription_group_config(SubscriptionGroupConfig(group_name=name))

    # -- table access --------------------------------------------------------------------------

    def put_subscription_group_config(self, config: SubscriptionGroupConfig) -> SubscriptionGroupConfig | None:
        """Put without versioning or persisting; returns the replaced entry."""
        old = self.subscription_group_table.get(config.group_name)
        self.subscription_group_table[config.group_name] = config
        return old

    def contains_subscription_group(self, group: str | None) -> bool:
        if group is None or not group.strip():
            return False
        return group in self.subscription_group_table

    def find_subscription_group_config(self, group: str) -> SubscriptionGroupConfig | None:
        """``findSubscriptionGroupConfig``: the group's config, auto-created (and persisted) when
        ``autoCreateSubscriptionGroup`` is on or it is a ``CID_RMQ_SYS_`` group and
        ``enableCreateSysGroup`` is on; None if absent otherwise or the name is invalid."""
        config = self.subscription_group_table.get(group)
        if config is not None:
            return config
        is_sys = self.enable_create_sys_group and group.startswith(CID_RMQ_SYS_PREFIX)
        if not (self.auto_create_subscription_group or is_sys):
            return None
        if not TopicValidator.validate_group(group).valid:
            return None
        config = SubscriptionGroupConfig(group_name=group)
        self.subscription_group_table[group] = config
        log.info("auto create a subscription group, %s", config)
        self.update_data_version()
        self.persist()
        return config

    # -- changes ------------------------------------------------------------------------------------

    def update_data_version(self) -> None:
        self.data_version.next_version(self.clock(), self._state_machine_version())

    def _update_without_persist(self, config: SubscriptionGroupConfig) -> None:
        # Deviation: RocketMQ validates the name in the request processor; rmqlab also checks here.
        result = TopicValidator.validate_group(config.group_name)
        if not result.valid:
            raise ValueError(result.remark)
        # Deviation: RocketMQ merges "+key"/"-key" attribute edits against
        # SubscriptionGroupAttributes.ALL; rmqlab stores the attributes it is given.
        old = self.put_subscription_group_config(config)
        if old is not None:
            log.info("update subscription group config, old: %s new: %s", old, config)
        else:
            log.info("create new subscription group, %s", config)
        self.update_data_version()

    def update_subscription_group_config(self, config: SubscriptionGroupConfig) -> None:
        self._update_without_persist(config)
        self.persist()

    def update_subscription_group_config_list(self, configs: Iterable[SubscriptionGroupConfig]) -> None:
        configs = list(configs)
        if not configs:
            return
        for config in configs:
            self._update_without_persist(config)
        self.persist()

    def delete_subscription_group_config(self, group: str) -> bool:
        """``deleteSubscriptionGroupConfig``: also drops the group's forbidden bits."""
        old = self.subscription_group_table.pop(group, None)
        self.forbidden_table.pop(group, None)
        if old is None:
            log.warning("delete subscription group failed, subscription groupName: %s not exist", group)
            return False
        self.update_data_version()
        self.persist()
        return True

    def disable_consume(self, group: str) -> None:
        """``disableConsume``: versioned but, as in RocketMQ, not persisted until the next persist."""
        config = self.subscription_group_table.get(group)
        if config is not None:
            config.consume_enable = False
            self.update_data_version()

    # -- forbidden bits (per group and topic) -----------------------------------------------------

    def get_forbidden(self, group: str, topic: str) -> int:
        value = self.forbidden_table.get(group, {}).get(topic)
        return value if value is not None and value >= 0 else 0

    def is_forbidden(self, group: str, topic: str, forbidden_index: int) -> bool:
        bit = 1 << forbidden_index
        return self.get_forbidden(group, topic) & bit == bit

    def set_forbidden(self, group: str, topic: str, forbidden_index: int) -> None:
        self._update_forbidden_value(group, topic, self.get_forbidden(group, topic) | (1 << forbidden_index))

    def clear_forbidden(self, group: str, topic: str, forbidden_index: int) -> None:
        self._update_forbidden_value(group, topic, self.get_forbidden(group, topic) & ~(1 << forbidden_index))

    def update_forbidden(self, group: str, topic: str, forbidden_index: int, set_or_clear: bool) -> None:
        if set_or_clear:
            self.set_forbidden(group, topic, forbidden_index)
        else:
            self.clear_forbidden(group, topic, forbidden_index)

    def _update_forbidden_value(self, group: str, topic: str, forbidden: int) -> None:
        if forbidden <= 0:
            # Quirk kept from RocketMQ: a value of 0 drops the forbidden bits of *every* topic of
            # the group, and neither versions nor persists the change.
            self.forbidden_table.pop(group, None)
            log.info("clear group forbidden, %s@%s", group, topic)
            return
        self.forbidden_table.setdefault(group, {})[topic] = forbidden
        self.update_data_version()
        self.persist()

    # -- ConfigManager ------------------------------------------------------------------------------

    def config_file_path(self) -> str:
        return os.path.join(self.store_path_root_dir, "config", "subscriptionGroup.json")

    def to_json_dict(self) -> dict[str, Any]:
        # Deviation: Java writes its hash maps in hash order; rmqlab sorts keys.
        return {
            "dataVersion": self.data_version.to_json_dict(),
            "forbiddenTable": {
                g: {t: self.forbidden_table[g][t] for t in sorted(self.forbidden_table[g])}
                for g in sorted(self.forbidden_table)
            },
            "subscriptionGroupTable": {
                g: self.subscription_group_table[g].to_json_dict() for g in sorted(self.subscription_group_table)
            },
        }

    def encode(self, pretty: bool = False) -> str:
        return to_fastjson(self.to_json_dict(), pretty)

    def decode(self, json_str: str) -> None:
        """Merge the stored groups and forbidden bits (``putAll``) and adopt the data version."""
        doc = check_object(parse_fastjson(json_str), "subscriptionGroup.json")
        groups: dict[str, SubscriptionGroupConfig] = {}
        for name, entry in check_object(doc.get("subscriptionGroupTable", {}), "subscriptionGroupTable").items():
            where = f"subscriptionGroupTable.{name}"
            config = SubscriptionGroupConfig.from_json_dict(entry, where)
            if config.group_name != name:
                raise ValueError(f"{where}.groupName: {config.group_name!r} differs from its key {name!r}")
            groups[name] = config
        forbidden: dict[str, dict[str, int]] = {}
        raw_forbidden = doc.get("forbiddenTable")
        if raw_forbidden is not None:
            for group, topics in check_object(raw_forbidden, "forbiddenTable").items():
                where = f"forbiddenTable.{group}"
                forbidden[group] = {t: check_int(v, f"{where}.{t}") for t, v in check_object(topics, where).items()}
        # The manager object fastjson builds has a fresh DataVersion when the file has none.
        version = (
            DataVersion.from_json_dict(doc["dataVersion"], "dataVersion")
            if "dataVersion" in doc
            else DataVersion(timestamp=self.clock())
        )
        self.subscription_group_table.update(groups)
        self.forbidden_table.update(forbidden)
        self.data_version.assign_new_one(version)
