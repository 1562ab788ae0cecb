"""AckMsg: one acknowledgement, as stored in the revive topic (RocketMQ 5
``store/src/main/java/org/apache/rocketmq/store/pop/AckMsg.java``).

It names the checkpoint it belongs to the way the revive service looks checkpoints up (topic,
group, queueId, the checkpoint's ``startOffset`` and ``popTime``, brokerName) and the acknowledged
message's queue offset (``ackOffset``). The body is fastjson's rendering of the object, short names
sorted (``{"ao":7,"bn":"broker-a","c":"CG","pt":...,"q":0,"so":5,"t":"TopicTest"}``); parsing also
accepts the long names (``alternateNames``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from rmqlab.common.config_manager import parse_fastjson, to_fastjson


@dataclass
class AckMsg:
    ack_offset: int = 0            # ao
    start_offset: int = 0          # so
    consumer_group: str | None = None  # c
    topic: str | None = None       # t
    queue_id: int = 0              # q
    pop_time: int = 0              # pt
    broker_name: str | None = None  # bn

    def to_json_dict(self) -> dict[str, Any]:
        doc: dict[str, Any] = {"ao": self.ack_offset, "bn": self.broker_name, "c": self.consumer_group,
                               "pt": self.pop_time, "q": self.queue_id, "so": self.start_offset, "t": self.topic}
        return {k: v for k, v in doc.items() if v is not None}

    def encode(self) -> bytes:
        return to_fastjson(self.to_json_dict()).encode("utf-8")

    @classmethod
    def from_json(cls, text: str | bytes) -> AckMsg:
        if isinstance(text, bytes):
            text = text.decode("utf-8")
        doc = parse_fastjson(text)
        if not isinstance(doc, dict):
            raise ValueError(f"an ack is a JSON object, got {text[:80]!r}")

        def get(short: str, long: str, default: Any = None) -> Any:
            return doc.get(short, doc.get(long, default))

        values = {"ack_offset": get("ao", "ackOffset", 0), "start_offset": get("so", "startOffset", 0),
                  "queue_id": get("q", "queueId", 0), "pop_time": get("pt", "popTime", 0)}
        for name, value in values.items():
            if not isinstance(value, int) or isinstance(value, bool):
                raise ValueError(f"ack field {name}: {value!r} is not an integer")
        return cls(consumer_group=get("c", "consumerGroup"), topic=get("t", "topic"),
                   broker_name=get("bn", "brokerName"), **values)

    def __str__(self) -> str:
        return (f"AckMsg{{ackOffset={self.ack_offset}, startOffset={self.start_offset}, "
                f"consumerGroup='{self.consumer_group}', topic='{self.topic}', queueId={self.queue_id}, "
                f"popTime={self.pop_time}, brokerName={self.broker_name}}}")
