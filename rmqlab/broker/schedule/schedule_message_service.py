"""ScheduleMessageService: delay levels and their delivery progress (``<root>/config/delayOffset.json``).

Implements the metadata half of
``broker/src/main/java/org/apache/rocketmq/broker/schedule/ScheduleMessageService.java``:

* the delay-level table parsed from MessageStoreConfig ``messageDelayLevel``
  (default ``"1s 5s 10s 30s 1m 2m 3m 4m 5m 6m 7m 8m 9m 10m 20m 30m 1h 2h"``; level *n* is the
  *n*-th entry and is stored in queue *n-1* of ``SCHEDULE_TOPIC_XXXX``);
* the per-level offset into that queue up to which messages have been re-delivered, persisted
  through ``DelayOffsetSerializeWrapper`` as
  ``{"dataVersion":{...},"offsetTable":{1:12,2:0}}`` (bare integer keys, fastjson's map format).

The data version advances on every ``delayOffsetUpdateVersionStep``-th offset update (default
200), counted in memory from 0 in every process (``ScheduleMessageService.updateOffset``).

Delivering delayed messages (the per-level timer tasks that read SCHEDULE_TOPIC_XXXX and put the
messages back on their real topics) and ``correctDelayOffset`` (clamping the offsets into the
consume queue's range at load) need the message store: they are in
``rmqlab.broker.schedule.deliver_delayed_message_timer_task``, started and stopped by
``BrokerController.change_special_service_status``.
"""

from __future__ import annotations

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
from rmqlab.common.delay_level import DEFAULT_MESSAGE_DELAY_LEVEL, compute_deliver_timestamp, parse_delay_level

class ScheduleMessageService(ConfigManager):
    """Delay-level table and delayOffset.json (see the module docstring).

    Deviation: RocketMQ parses ``messageDelayLevel`` inside ``load()`` and turns a bad value into
    ``load() == false``; rmqlab parses it in the constructor and raises ``ValueError`` at once.
    """

    def __init__(
        self,
        store_path_root_dir: str,
        clock: Callable[[], int],
        *,
        message_delay_level: str = DEFAULT_MESSAGE_DELAY_LEVEL,
        delay_offset_update_version_step: int = 200,
        state_machine_version: Callable[[], int] | None = None,
    ):
        super().__init__()
        if delay_offset_update_version_step <= 0:
            # Java would throw ArithmeticException (modulo by zero) on the first update.
            raise ValueError(f"delayOffsetUpdateVersionStep must be positive, got {delay_offset_update_version_step}")
        self.store_path_root_dir = store_path_root_dir
        self.clock = clock
        self.delay_offset_update_version_step = delay_offset_update_version_step
        self._state_machine_version = state_version_source(state_machine_version)
        self.delay_level_table: dict[int, int] = parse_delay_level(message_delay_level)
        self.max_delay_level = max(self.delay_level_table)
        self.offset_table: dict[int, int] = {}
        self.data_version = DataVersion(timestamp=clock())
        self.version_change_counter = 0  # transient, as in Java

    @staticmethod
    def queue_id2_delay_level(queue_id: int) -> int:
        return queue_id + 1

    @staticmethod
    def delay_level2_queue_id(delay_level: int) -> int:
        return delay_level - 1

    def compute_deliver_timestamp(self, delay_level: int, store_timestamp: int) -> int:
        """``computeDeliverTimestamp``: store time + the level's delay (unknown level: + 1 s)."""
        return compute_deliver_timestamp(self.delay_level_table, delay_level, store_timestamp)

    def update_offset(self, delay_level: int, offset: int) -> None:
        """``updateOffset``: record delivery progress; every step-th update advances the version."""
        self.offset_table[delay_level] = offset
        self.version_change_counter += 1
        if self.version_change_counter % self.delay_offset_update_version_step == 0:
            self.data_version.next_version(self.clock(), self._state_machine_version())

    def query_offset(self, delay_level: int) -> int:
        """The stored offset of a level; the delivery task starts from 0 when there is none."""
        return self.offset_table.get(delay_level, 0)

    # -- ConfigManager ------------------------------------------------------------------------------

    def config_file_path(self) -> str:
        return os.path.join(self.store_path_root_dir, "config", "delayOffset.json")

    def to_json_dict(self) -> dict[str, Any]:
        return {
            "dataVersion": self.data_version.to_json_dict(),
            "offsetTable": {level: self.offset_table[level] for level in sorted(self.offset_table)},
        }

    def encode(self, pretty: bool = False) -> str:
        return to_fastjson(self.to_json_dict(), pretty)

    @staticmethod
    def decode_data_version(json_str: str) -> DataVersion | None:
        """The ``dataVersion`` of a delayOffset.json text (``DelayOffsetSerializeWrapper.fromJson``),
        None when it has none (a file from before data versions)."""
        doc = check_object(parse_fastjson(json_str), "delayOffset.json")
        version = doc.get("dataVersion")
        return DataVersion.from_json_dict(version, "dataVersion") if version is not None else None

    def decode(self, json_str: str) -> None:
        """Merge the stored offsets (``putAll``); adopt the stored data version if the file has one
        (files written before data versions existed do not)."""
        doc = check_object(parse_fastjson(json_str), "delayOffset.json")
        offsets = {
            check_int_key(level, "offsetTable"): check_long(offset, f"offsetTable[{level}]")
            for level, offset in check_object(doc.get("offsetTable", {}), "offsetTable").items()
        }
        version = doc.get("dataVersion")
        parsed = DataVersion.from_json_dict(version, "dataVersion") if version is not None else None
        self.offset_table.update(offsets)
        if parsed is not None:
            self.data_version.assign_new_one(parsed)
