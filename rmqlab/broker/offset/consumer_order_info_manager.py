"""ConsumerOrderInfoManager: the in-flight batch of every orderly (FIFO) POP queue, persisted as
``<root>/config/consumerOrderInfo.json`` (RocketMQ 5
``broker/src/main/java/org/apache/rocketmq/broker/offset/ConsumerOrderInfoManager.java`` and
``ConsumerOrderInfoLockManager.java``).

An orderly pop writes no checkpoint. Instead, per (topic, group, queueId), the broker remembers
the batch it handed out (:class:`OrderInfo`: pop time, invisible time, the queue offsets, which of
them are acknowledged, per-offset visibility changes and how often each offset was delivered).
While a message of the batch is unacknowledged and within its invisible time the queue is
*blocked*: pops of the group get nothing from it (:meth:`check_block`). When the invisible time
ends, the next pop reads again from the committed consumer offset, so the same messages come
again and their consumed count goes up (the client turns it into reconsumeTimes). An ack commits
the consumer offset up to the first unacknowledged message of the batch (:meth:`commit_and_next`).

ConsumerOrderInfoLockManager (``enableNotifyAfterPopOrderLockRelease``): when a queue's block will
end at a known time, a timer on the node's clock wakes the pops held for it then.

The file is fastjson's rendering of the manager: ``{"table":{"<topic>@<group>":{<queueId>:{...}}}}``
with OrderInfo's short names (``a`` attemptId, ``cm`` commit bits, ``i`` invisibleTime, ``l`` last
consume time, ``o`` offsets (first, then differences), ``oc`` consumed counts, ``ot`` next visible
times, ``popTime``), integer map keys bare as fastjson writes them.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from rmqlab.common.config_manager import (ConfigManager, check_int_key, check_object, parse_fastjson,
                                          to_fastjson)
from rmqlab.remoting.protocol.header import extra_info_util as eiu

if TYPE_CHECKING:
    from rmqlab.broker.broker_controller import BrokerController

log = logging.getLogger("rmqlab.broker")

TOPIC_GROUP_SEPARATOR = "@"
CLEAN_SPAN_FROM_LAST = 24 * 3600 * 1000


def build_offset_list(queue_offset_list: list[int]) -> list[int]:
    """``OrderInfo.buildOffsetList``: the first offset, then each other one minus the first."""
    if len(queue_offset_list) == 1:
        return list(queue_offset_list)
    first = queue_offset_list[0]
    return [first] + [o - first for o in queue_offset_list[1:]]


def _queue_offset(offset_list: list[int], index: int) -> int:
    return offset_list[0] if index == 0 else offset_list[0] + offset_list[index]


@dataclass
class OrderInfo:
    pop_time: int = 0
    invisible_time: int | None = None
    offset_list: list[int] = field(default_factory=list)
    offset_next_visible_time: dict[int, int] | None = None
    offset_consumed_count: dict[int, int] | None = None
    last_consume_timestamp: int = 0
    commit_offset_bit: int = 0
    attempt_id: str | None = None

    @classmethod
    def create(cls, attempt_id: str | None, pop_time: int, invisible_time: int, queue_offset_list: list[int],
               last_consume_timestamp: int, commit_offset_bit: int = 0) -> OrderInfo:
        return cls(pop_time=pop_time, invisible_time=invisible_time, offset_list=build_offset_list(queue_offset_list),
                   last_consume_timestamp=last_consume_timestamp, commit_offset_bit=commit_offset_bit,
                   attempt_id=attempt_id)

    def get_queue_offset(self, index: int) -> int:
        return _queue_offset(self.offset_list, index)

    def is_not_ack(self, index: int) -> bool:
        return (self.commit_offset_bit & (1 << index)) == 0

    def _next_visible_time(self, index: int) -> int:
        next_visible = self.pop_time + (self.invisible_time or 0)
        if self.offset_next_visible_time is not None:
            t = self.offset_next_visible_time.get(self.get_queue_offset(index))
            if t is not None:
                next_visible = t
        return next_visible

    def need_block(self, attempt_id: str | None, current_invisible_time: int, now_ms: int) -> bool:
        """``needBlock``: an unacknowledged message is still invisible (a retry of the same
        attempt is never blocked)."""
        if not self.offset_list:
            return False
        if self.attempt_id is not None and self.attempt_id == attempt_id:
            return False
        if self.invisible_time is None or self.invisible_time <= 0:
            self.invisible_time = current_invisible_time
        return any(self.is_not_ack(i) and now_ms < self._next_visible_time(i) for i in range(len(self.offset_list)))

    def get_lock_free_timestamp(self, now_ms: int) -> int | None:
        """``getLockFreeTimestamp``: when the queue stops being blocked (now if it is not)."""
        if not self.offset_list:
            return None
        for i in range(len(self.offset_list)):
            if self.is_not_ack(i):
                if self.invisible_time is None or self.invisible_time <= 0:
                    return None
                t = self._next_visible_time(i)
                if now_ms < t:
                    return t
        return now_ms

    def update_offset_next_visible_time(self, queue_offset: int, next_visible_time: int) -> None:
        if self.offset_next_visible_time is None:
            self.offset_next_visible_time = {}
        self.offset_next_visible_time[queue_offset] = next_visible_time

    def get_next_offset(self) -> int:
        """``getNextOffset``: the first unacknowledged offset, or one past the batch when all are."""
        if not self.offset_list:
            return -2
        for i in range(len(self.offset_list)):
            if self.is_not_ack(i):
                return self.get_queue_offset(i)
        return self.get_queue_offset(len(self.offset_list) - 1) + 1

    def merge_offset_consumed_count(self, pre_attempt_id: str | None, pre_offset_list: list[int],
                                    prev_offset_consumed_count: dict[int, int] | None) -> None:
        """``mergeOffsetConsumedCount``: offsets delivered again count one more delivery."""
        prev = prev_offset_consumed_count or {}
        if pre_attempt_id is not None and pre_attempt_id == self.attempt_id:
            self.offset_consumed_count = prev
            return
        pre_offsets = {_queue_offset(pre_offset_list, i) for i in range(len(pre_offset_list))}
        counts: dict[int, int] = {}
        for i in range(len(self.offset_list)):
            offset = self.get_queue_offset(i)
            if offset in pre_offsets:
                counts[offset] = prev.get(offset, 0) + 1
        self.offset_consumed_count = counts

    # -- JSON (fastjson of the Java object; see the module docstring) ---------------------------
    def to_json_dict(self) -> dict[str, Any]:
        doc: dict[str, Any] = {
            "a": self.attempt_id, "cm": self.commit_offset_bit, "i": self.invisible_time,
            "l": self.last_consume_timestamp, "o": self.offset_list,
            "oc": None if self.offset_consumed_count is None else dict(sorted(self.offset_consumed_count.items())),
            "ot": None if self.offset_next_visible_time is None else dict(sorted(self.offset_next_visible_time.items())),
            "popTime": self.pop_time}
        return {k: v for k, v in doc.items() if v is not None}

    @classmethod
    def from_json_dict(cls, doc: dict[str, Any], where: str) -> OrderInfo:
        def int_map(value: Any, name: str) -> dict[int, int] | None:
            if value is None:
                return None
            return {check_int_key(str(k), f"{where}.{name}"): int(v) for k, v in check_object(value, where).items()}

        offsets = doc.get("o", doc.get("offsetList")) or []
        if not isinstance(offsets, list) or not all(isinstance(o, int) for o in offsets):
            raise ValueError(f"{where}.o: expected a list of integers, got {offsets!r}")
        return cls(pop_time=int(doc.get("popTime", 0)), invisible_time=doc.get("i", doc.get("invisibleTime")),
                   offset_list=list(offsets), offset_next_visible_time=int_map(doc.get("ot"), "ot"),
                   offset_consumed_count=int_map(doc.get("oc"), "oc"), last_consume_timestamp=int(doc.get("l", 0)),
                   commit_offset_bit=int(doc.get("cm", 0)), attempt_id=doc.get("a"))


class ConsumerOrderInfoManager(ConfigManager):
    def __init__(self, store_path_root_dir: str, clock: Callable[[], int],
                 broker: BrokerController | None = None):
        super().__init__()
        self.store_path_root_dir = store_path_root_dir
        self.clock = clock
        self.broker = broker
        self.table: dict[str, dict[int, OrderInfo]] = {}
        # ConsumerOrderInfoLockManager: one timer per blocked queue, at its lock-free time.
        self._lock_timers: dict[tuple[str, str, int], Any] = {}

    @staticmethod
    def build_key(topic: str, group: str) -> str:
        return topic + TOPIC_GROUP_SEPARATOR + group

    def get(self, topic: str, group: str, queue_id: int) -> OrderInfo | None:
        return self.table.get(self.build_key(topic, group), {}).get(queue_id)

    def update(self, attempt_id: str | None, is_retry: bool, topic: str, group: str, queue_id: int, pop_time: int,
               invisible_time: int, msg_queue_offset_list: list[int], order_info_builder: list[str]) -> None:
        """``update``: remember the batch an orderly pop returned, and append its counts to
        ``order_info_builder`` (the response's orderCountInfo)."""
        qs = self.table.setdefault(self.build_key(topic, group), {})
        now = self.clock()
        old = qs.get(queue_id)
        info = OrderInfo.create(attempt_id, pop_time, invisible_time, msg_queue_offset_list, now, 0)
        if old is not None:
            info.merge_offset_consumed_count(old.attempt_id, old.offset_list, old.offset_consumed_count)
        qs[queue_id] = info
        counts = info.offset_consumed_count
        min_consumed_times = 2 ** 31 - 1
        if counts is not None:
            for offset in sorted(counts):  # Java iterates a HashMap<Long, Integer>: ascending for small offsets
                consumed = counts.get(offset, 0)
                eiu.build_queue_offset_order_count_info(order_info_builder, topic, queue_id, offset, consumed)
                min_consumed_times = min(min_consumed_times, consumed)
            if len(counts) != len(info.offset_list):
                min_consumed_times = 0
        else:
            min_consumed_times = 0
        eiu.build_queue_id_order_count_info(order_info_builder, topic, queue_id, min_consumed_times)
        self._update_lock_free_timestamp(topic, group, queue_id, info)

    def check_block(self, attempt_id: str | None, topic: str, group: str, queue_id: int, invisible_time: int) -> bool:
        info = self.table.setdefault(self.build_key(topic, group), {}).get(queue_id)
        if info is None:
            return False
        return info.need_block(attempt_id, invisible_time, self.clock())

    def clear_block(self, topic: str, group: str, queue_id: int) -> None:
        qs = self.table.get(self.build_key(topic, group))
        if qs is not None:
            qs.pop(queue_id, None)

    def commit_and_next(self, topic: str, group: str, queue_id: int, queue_offset: int, pop_time: int) -> int:
        """``commitAndNext``: mark ``queue_offset`` acknowledged; the offset to commit next, -1 when
        it is not part of the batch (or the batch is empty), -2 when ``pop_time`` names an older
        batch."""
        key = self.build_key(topic, group)
        qs = self.table.get(key)
        if qs is None:
            return queue_offset + 1
        info = qs.get(queue_id)
        if info is None:
            log.warning("OrderInfo is null, %s, %s, %s", key, queue_offset, info)
            return queue_offset + 1
        if not info.offset_list:
            log.warning("OrderInfo is empty, %s, %s, %s", key, queue_offset, info)
            return -1
        if pop_time != info.pop_time:
            log.warning("popTime is not equal to orderInfo saved. key: %s, offset: %s, orderInfo: %s, popTime: %s",
                        key, queue_offset, info, pop_time)
            return -2
        for i in range(len(info.offset_list)):
            if info.get_queue_offset(i) == queue_offset:
                break
        else:
            log.warning("OrderInfo not found commit offset, %s, %s, %s", key, queue_offset, info)
            return -1
        info.commit_offset_bit |= 1 << i
        next_offset = info.get_next_offset()
        self._update_lock_free_timestamp(topic, group, queue_id, info)
        return next_offset

    def update_next_visible_time(self, topic: str, group: str, queue_id: int, queue_offset: int, pop_time: int,
                                 next_visible_time: int) -> None:
        key = self.build_key(topic, group)
        info = self.table.get(key, {}).get(queue_id)
        if info is None:
            log.warning("orderInfo is null, key: %s, queueOffset: %s, queueId: %s", key, queue_offset, queue_id)
            return
        if pop_time != info.pop_time:
            log.warning("popTime is not equal to orderInfo saved. key: %s, queueOffset: %s, orderInfo: %s, "
                        "popTime: %s", key, queue_offset, info, pop_time)
            return
        info.update_offset_next_visible_time(queue_offset, next_visible_time)
        self._update_lock_free_timestamp(topic, group, queue_id, info)

    # -- ConsumerOrderInfoLockManager ---------------------------------------------------------
    def _update_lock_free_timestamp(self, topic: str, group: str, queue_id: int, info: OrderInfo) -> None:
        broker = self.broker
        if broker is None or broker.node is None or not broker.broker_config.enableNotifyAfterPopOrderLockRelease:
            return
        key = (topic, group, queue_id)
        old = self._lock_timers.pop(key, None)
        if old is not None:
            old.cancel()
        now = self.clock()
        free_at = info.get_lock_free_timestamp(now)
        if free_at is None or free_at <= now:
            return
        self._lock_timers[key] = broker.node.call_later(free_at - now, self._lock_released, key)

    def _lock_released(self, key: tuple[str, str, int]) -> None:
        self._lock_timers.pop(key, None)
        broker = self.broker
        if broker is None or broker.is_shutdown():
            return
        topic, group, queue_id = key
        try:
            broker.pop_message_processor.notify_long_polling_request_if_need(topic, group, queue_id)
        except Exception:
            log.exception("ConsumerOrderInfoLockManager: notify failed for %s", key)

    def shutdown(self) -> None:
        for timer in self._lock_timers.values():
            timer.cancel()
        self._lock_timers.clear()

    # -- housekeeping and the file ------------------------------------------------------------
    def auto_clean(self) -> None:
        """``autoClean``: forget topics, groups and queues that are gone or idle for a day."""
        broker = self.broker
        if broker is None:
            return
        now = self.clock()
        for key in list(self.table):
            qs = self.table[key]
            parts = key.split(TOPIC_GROUP_SEPARATOR)
            if len(parts) != 2:
                continue
            topic, group = parts
            tc = broker.topic_config_manager.select_topic_config(topic)
            if tc is None or not broker.subscription_group_manager.contains_subscription_group(group) or not qs:
                del self.table[key]
                continue
            for qid in list(qs):
                if qid >= tc.read_queue_nums or now - qs[qid].last_consume_timestamp > CLEAN_SPAN_FROM_LAST:
                    del qs[qid]

    def config_file_path(self) -> str:
        return f"{self.store_path_root_dir}/config/consumerOrderInfo.json"

    def encode(self, pretty: bool = False) -> str:
        self.auto_clean()
        table = {key: {qid: self.table[key][qid].to_json_dict() for qid in sorted(self.table[key])}
                 for key in sorted(self.table)}
        return to_fastjson({"table": table}, pretty)

    def decode(self, json_str: str) -> None:
        doc = check_object(parse_fastjson(json_str), "consumerOrderInfo.json")
        table: dict[str, dict[int, OrderInfo]] = {}
        for key, qs in check_object(doc.get("table", {}), "table").items():
            where = f"table.{key}"
            table[key] = {check_int_key(str(q), where): OrderInfo.from_json_dict(check_object(v, f"{where}[{q}]"),
                                                                                 f"{where}[{q}]")
                          for q, v in check_object(qs, where).items()}
        self.table = table
