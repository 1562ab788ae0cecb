"""TopicConfig and TopicFilterType.

* :class:`TopicConfig` - ``common/src/main/java/org/apache/rocketmq/common/TopicConfig.java``
  (defaults: 16 read and 16 write queues, perm READ|WRITE, SINGLE_TAG, sysFlag 0, not ordered).
* :class:`TopicFilterType` - ``common/src/main/java/org/apache/rocketmq/common/TopicFilterType.java``.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import Any

from rmqlab.common.config_manager import check_bool, check_int, check_object, check_str, check_str_map
from rmqlab.common.constant.perm_name import PermName


class TopicFilterType(enum.Enum):
    SINGLE_TAG = "SINGLE_TAG"
    MULTI_TAG = "MULTI_TAG"


DEFAULT_READ_QUEUE_NUMS = 16
DEFAULT_WRITE_QUEUE_NUMS = 16


@dataclass
class TopicConfig:
    """One entry of topics.json's ``topicConfigTable`` (RocketMQ ``TopicConfig``)."""

    topic_name: str
    read_queue_nums: int = DEFAULT_READ_QUEUE_NUMS
    write_queue_nums: int = DEFAULT_WRITE_QUEUE_NUMS
    perm: int = PermName.PERM_READ | PermName.PERM_WRITE
    topic_filter_type: TopicFilterType = TopicFilterType.SINGLE_TAG
    topic_sys_flag: int = 0
    order: bool = False
    # RocketMQ: keys and values must not contain ' ' (TopicConfig.encode splits on it).
    attributes: dict[str, str] = field(default_factory=dict)

    def to_json_dict(self) -> dict[str, Any]:
        """fastjson bean properties, sorted by name (``getTopicMessageType`` is not serialised)."""
        return {
            "attributes": dict(self.attributes),
            "order": self.order,
            "perm": self.perm,
            "readQueueNums": self.read_queue_nums,
            "topicFilterType": self.topic_filter_type.value,
            "topicName": self.topic_name,
            "topicSysFlag": self.topic_sys_flag,
            "writeQueueNums": self.write_queue_nums,
        }

    @classmethod
    def from_json_dict(cls, data: Any, where: str) -> TopicConfig:
        """Parse one entry; absent properties keep the Java defaults, as fastjson leaves them."""
        obj = check_object(data, where)
        if "topicName" not in obj or obj["topicName"] is None:
            raise ValueError(f"{where}: topicName is missing")
        filter_name = check_str(obj.get("topicFilterType", "SINGLE_TAG"), f"{where}.topicFilterType")
        try:
            filter_type = TopicFilterType(filter_name)
        except ValueError:
            raise ValueError(
                f"{where}.topicFilterType: {filter_name!r} is not one of SINGLE_TAG, MULTI_TAG"
            ) from None
        return cls(
            topic_name=check_str(obj["topicName"], f"{where}.topicName"),
            read_queue_nums=check_int(obj.get("readQueueNums", DEFAULT_READ_QUEUE_NUMS), f"{where}.readQueueNums"),
            write_queue_nums=check_int(
                obj.get("writeQueueNums", DEFAULT_WRITE_QUEUE_NUMS), f"{where}.writeQueueNums"
            ),
            perm=check_int(obj.get("perm", PermName.PERM_READ | PermName.PERM_WRITE), f"{where}.perm"),
            topic_filter_type=filter_type,
            topic_sys_flag=check_int(obj.get("topicSysFlag", 0), f"{where}.topicSysFlag"),
            order=check_bool(obj.get("order", False), f"{where}.order"),
            attributes=check_str_map(obj.get("attributes", {}), f"{where}.attributes"),
        )

    def copy(self) -> TopicConfig:
        return TopicConfig(
            self.topic_name,
            self.read_queue_nums,
            self.write_queue_nums,
            self.perm,
            self.topic_filter_type,
            self.topic_sys_flag,
            self.order,
            dict(self.attributes),
        )
