"""ConsumerOffsetManager: committed consume offsets, persisted as ``<root>/config/consumerOffset.json``.

Implements ``broker/src/main/java/org/apache/rocketmq/broker/offset/ConsumerOffsetManager.java``.
RocketMQ serialises the manager object itself with fastjson, so the file holds every public getter
of the class, sorted by name::

    {
    	"dataVersion":{"counter":3,"stateVersion":0,"timestamp":1736661762584},
    	"groupTopicMap":{"<group>":["<topic>",...]},
    	"offsetTable":{
    		"<topic>@<group>":{0:250,1:248
    		}
    	}
    }

``groupTopicMap`` is derived from ``offsetTable`` (``getGroupTopicMap``) and ignored on load, and the
queue ids are written as bare integer keys (fastjson's map format).

Versioning (RIP-32; ``ConsumerOffsetManager.commitOffset``): unlike the other metadata files the
offsets change on every commit, so the data version advances only on every
``consumerOffsetUpdateVersionStep``-th commit (default 500), counted by an in-memory counter that
starts at 0 in every process.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable
from typing import Any

from rmqlab.common.config_manager import (
    ConfigManager,
    check_int_key,
    check_long,
    check_object,
    parse_fastjson,
    state_version_source,
    to_fastjson,
)
from rmqlab.common.data_version import DataVersion

log = logging.getLogger(__name__)

TOPIC_GROUP_SEPARATOR = "@"


class ConsumerOffsetManager(ConfigManager):
    """Offsets keyed ``"topic@group"`` -> ``{queueId: offset}`` (see the module docstring).

    ``use_server_side_reset_offset`` (BrokerConfig, default true) makes :meth:`query_offset` prefer an
    offset assigned by an admin reset until the client commits past it.
    """

    TOPIC_GROUP_SEPARATOR = TOPIC_GROUP_SEPARATOR

    def __init__(
        self,
        store_path_root_dir: str,
        clock: Callable[[], int],
        *,
        consumer_offset_update_version_step: int = 500,
        use_server_side_reset_offset: bool = True,
        state_machine_version: Callable[[], int] | None = None,
    ):
        super().__init__()
        if consumer_offset_update_version_step <= 0:
            # Java would throw ArithmeticException (modulo by zero) on the first commit.
            raise ValueError(
                f"consumerOffsetUpdateVersionStep must be positive, got {consumer_offset_update_version_step}"
            )
        self.store_path_root_dir = store_path_root_dir
        self.clock = clock
        self.consumer_offset_update_version_step = consumer_offset_update_version_step
        self.use_server_side_reset_offset = use_server_side_reset_offset
        self._state_machine_version = state_version_source(state_machine_version)
        self.data_version = DataVersion(timestamp=clock())
        self.offset_table: dict[str, dict[int, int]] = {}
        # Not persisted: admin resets waiting for the client, and pull (not yet committed) offsets.
        self.reset_offset_table: dict[str, dict[int, int]] = {}
        self.pull_offset_table: dict[str, dict[int, int]] = {}
        # Transient, as in Java: restarts count from 0 again.
        self.version_change_counter = 0

    @staticmethod
    def _key(topic: str, group: str) -> str:
        return topic + TOPIC_GROUP_SEPARATOR + group

    # -- commits and queries --------------------------------------------------------------------

    def commit_offset(self, client_host: str, group: str, topic: str, queue_id: int, offset: int) -> None:
        """``commitOffset``: store the offset; every step-th commit advances the data version."""
        key = self._key(topic, group)
        queues = self.offset_table.setdefault(key, {})
        previous = queues.get(queue_id)
        queues[queue_id] = offset
        if previous is not None and offset < previous:
            log.warning(
                "[NOTIFYME]update consumer offset less than store. clientHost=%s, key=%s, queueId=%s, "
                "requestOffset=%s, storeOffset=%s",
                client_host,
                key,
                queue_id,
                offset,
                previous,
            )
        self.version_change_counter += 1
        if self.version_change_counter % self.consumer_offset_update_version_step == 0:
            self.data_version.next_version(self.clock(), self._state_machine_version())

    def query_offset(self, group: str, topic: str, queue_id: int) -> int:
        """``queryOffset``: a pending reset offset, else the committed one, else -1."""
        key = self._key(topic, group)
        if self.use_server_side_reset_offset:
            reset = self.reset_offset_table.get(key)
            if reset is not None and queue_id in reset:
                return reset[queue_id]
        return self.offset_table.get(key, {}).get(queue_id, -1)

    def query_offset_table(self, group: str, topic: str) -> dict[int, int] | None:
        """``queryOffset(group, topic)``: all queues of one subscription, or None."""
        return self.offset_table.get(self._key(topic, group))

    def commit_pull_offset(self, client_host: str, group: str, topic: str, queue_id: int, offset: int) -> None:
        self.pull_offset_table.setdefault(self._key(topic, group), {})[queue_id] = offset

    def query_pull_offset(self, group: str, topic: str, queue_id: int) -> int:
        pulled = self.pull_offset_table.get(self._key(topic, group), {}).get(queue_id)
        return pulled if pulled is not None else self.query_offset(group, topic, queue_id)

    def clear_pull_offset(self, group: str, topic: str) -> None:
        self.pull_offset_table.pop(self._key(topic, group), None)

    def assign_reset_offset(self, topic: str, group: str, queue_id: int, offset: int) -> bool:
        """``assignResetOffset``: admin reset; also overwrites the committed offset (no version bump)."""
        if not topic or not group or queue_id < 0 or offset < 0:
            log.warning(
                "Illegal arguments when assigning reset offset. Topic=%s, group=%s, queueId=%s, offset=%s",
                topic,
                group,
                queue_id,
                offset,
            )
            return False
        key = self._key(topic, group)
        self.reset_offset_table.setdefault(key, {})[queue_id] = offset
        self.offset_table.setdefault(key, {})[queue_id] = offset
        return True

    def has_offset_reset(self, topic: str, group: str, queue_id: int) -> bool:
        return queue_id in self.reset_offset_table.get(self._key(topic, group), {})

    def query_then_erase_reset_offset(self, topic: str, group: str, queue_id: int) -> int | None:
        return self.reset_offset_table.get(self._key(topic, group), {}).pop(queue_id, None)

    def query_min_offset_in_all_group(
        self, topic: str, filter_groups: str, min_offset_in_queue: Callable[[str, int], int]
    ) -> dict[int, int]:
        """``queryMinOffsetInAllGroup``: per queue, the smallest committed offset of ``topic`` that is
        still in the store (>= ``min_offset_in_queue(topic, queueId)``), skipping the comma-separated
        ``filter_groups``.

        Deviation: RocketMQ filters by removing those groups from ``offsetTable.keySet()``, which
        deletes their offsets from the live table; rmqlab only skips them.
        """
        skipped = {g for g in filter_groups.split(",")} if filter_groups and filter_groups.strip() else set()
        result: dict[int, int] = {}
        for key, queues in self.offset_table.items():
            parts = key.split(TOPIC_GROUP_SEPARATOR)
            if parts[0] != topic or (len(parts) > 1 and parts[1] in skipped):
                continue
            for queue_id, offset in queues.items():
                if offset >= min_offset_in_queue(topic, queue_id):
                    result[queue_id] = min(offset, result.get(queue_id, offset))
        return result

    # -- whole-table views --------------------------------------------------------------------------

    def get_group_topic_map(self) -> dict[str, set[str]]:
        """``getGroupTopicMap``: group -> topics, from the keys that split into exactly two parts."""
        result: dict[str, set[str]] = {}
        for key in self.offset_table:
            parts = key.split(TOPIC_GROUP_SEPARATOR)
            if len(parts) == 2:
                result.setdefault(parts[1], set()).add(parts[0])
        return result

    def which_topic_by_consumer(self, group: str) -> set[str]:
        return self.get_group_topic_map().get(group, set())

    def which_group_by_topic(self, topic: str) -> set[str]:
        return {g for g, topics in self.get_group_topic_map().items() if topic in topics}

    def clone_offset(self, src_group: str, dest_group: str, topic: str) -> None:
        offsets = self.offset_table.get(self._key(topic, src_group))
        if offsets is not None:
            self.offset_table[self._key(topic, dest_group)] = dict(offsets)

    def _remove_where(self, table: dict[str, dict[int, int]], index: int, name: str) -> bool:
        doomed = [k for k in table if len(p := k.split(TOPIC_GROUP_SEPARATOR)) == 2 and p[index] == name]
        for key in doomed:
            del table[key]
        return bool(doomed)

    def clean_offset(self, group: str) -> None:
        """``cleanOffset``: drop the group's committed offsets (RocketMQ does not bump the version)."""
        self._remove_where(self.offset_table, 1, group)

    def clean_offset_by_topic(self, topic: str) -> None:
        for table in (self.offset_table, self.pull_offset_table, self.reset_offset_table):
            self._remove_where(table, 0, topic)

    def remove_offset(self, group: str) -> None:
        """``removeOffset``: drop the group from the committed, reset and pull tables."""
        for table in (self.offset_table, self.reset_offset_table, self.pull_offset_table):
            self._remove_where(table, 1, group)

    # -- ConfigManager ------------------------------------------------------------------------------

    def config_file_path(self) -> str:
        return os.path.join(self.store_path_root_dir, "config", "consumerOffset.json")

    def to_json_dict(self) -> dict[str, Any]:
        # Deviation: Java writes its hash maps in hash order; rmqlab sorts keys.
        group_topics = self.get_group_topic_map()
        return {
            "dataVersion": self.data_version.to_json_dict(),
            "groupTopicMap": {g: sorted(group_topics[g]) for g in sorted(group_topics)},
            "offsetTable": {
                key: {q: self.offset_table[key][q] for q in sorted(self.offset_table[key])}
                for key in sorted(self.offset_table)
            },
        }

    def encode(self, pretty: bool = False) -> str:
        return to_fastjson(self.to_json_dict(), pretty)

    def decode(self, json_str: str) -> None:
        """Replace the offset table and data version (``setOffsetTable``; not a merge)."""
        doc = check_object(parse_fastjson(json_str), "consumerOffset.json")
        table: dict[str, dict[int, int]] = {}
        for key, queues in check_object(doc.get("offsetTable", {}), "offsetTable").items():
            where = f"offsetTable.{key}"
            table[key] = {
                check_int_key(q, where): check_long(offset, f"{where}[{q}]")
                for q, offset in check_object(queues, where).items()
            }
        version = (
            DataVersion.from_json_dict(doc["dataVersion"], "dataVersion")
            if "dataVersion" in doc
            else DataVersion(timestamp=self.clock())
        )
        self.offset_table = table
        self.data_version = version
