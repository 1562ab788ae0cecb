"""PopCheckPoint: what one POP read from one queue, as stored in the revive topic (RocketMQ 5
``store/src/main/java/org/apache/rocketmq/store/pop/PopCheckPoint.java``).

A checkpoint names a queue (topic, queueId, brokerName), the consumer group (``cid``), where the
read started (``startOffset``), the messages it returned as offsets relative to the start
(``queueOffsetDiff``, "d"; ``num`` of them), when (``popTime``) and for how long they are
invisible (``invisibleTime``); ``bitMap`` marks the acknowledged ones (bit i = the i-th message).
The revive time is ``popTime + invisibleTime``. ``reviveOffset`` is not meaningful in the stored
body: the revive service sets it to the checkpoint message's own offset in the revive queue.

The message body is the checkpoint as fastjson 1.2.83 writes the Java object
(``JSON.toJSONString(ck)``): the ``@JSONField`` short names, fields sorted by name, nulls left out,
and the getter-only ``reviveTime`` included::

    {"bm":0,"bn":"broker-a","c":"CG","d":[0,1],"it":60000,"n":2,"pt":1700000000000,"q":1,
     "reviveTime":1700000060000,"ro":0,"so":5,"t":"TopicTest"}
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from rmqlab.common.config_manager import parse_fastjson, to_fastjson


@dataclass
class PopCheckPoint:
    start_offset: int = 0          # so
    pop_time: int = 0              # pt
    invisible_time: int = 0        # it
    bit_map: int = 0               # bm
    num: int = 0                   # n (a Java byte)
    queue_id: int = 0              # q
    topic: str | None = None       # t
    cid: str | None = None         # c
    revive_offset: int = 0         # ro
    queue_offset_diff: list[int] | None = None  # d
    broker_name: str | None = None  # bn
    re_put_times: str | None = None  # rp

    @property
    def revive_time(self) -> int:
        return self.pop_time + self.invisible_time

    def add_diff(self, diff: int) -> None:
        if self.queue_offset_diff is None:
            self.queue_offset_diff = []
        self.queue_offset_diff.append(diff)

    def index_of_ack(self, ack_offset: int) -> int:
        """``indexOfAck``: the bit of ``ack_offset`` in this checkpoint, -1 if not one of its messages."""
        if ack_offset < self.start_offset:
            return -1
        if not self.queue_offset_diff:  # old version of checkpoint
            return ack_offset - self.start_offset if ack_offset - self.start_offset < self.num else -1
        try:
            return self.queue_offset_diff.index(ack_offset - self.start_offset)
        except ValueError:
            return -1

    def ack_offset_by_index(self, index: int) -> int:
        if not self.queue_offset_diff:
            return self.start_offset + index
        return self.start_offset + self.queue_offset_diff[index]

    def parse_re_put_times(self) -> int:
        if self.re_put_times is None:
            return 0
        try:
            return int(self.re_put_times)
        except ValueError:
            return 127  # Byte.MAX_VALUE

    def is_acked(self, index: int) -> bool:
        """``DataConverter.getBit(bitMap, index)``."""
        return (self.bit_map >> index) & 1 == 1

    def set_acked(self, index: int) -> None:
        self.bit_map |= 1 << index

    # -- JSON ---------------------------------------------------------------------------------
    def to_json_dict(self) -> dict[str, Any]:
        doc: dict[str, Any] = {"bm": self.bit_map, "bn": self.broker_name, "c": self.cid,
                               "d": self.queue_offset_diff, "it": self.invisible_time, "n": self.num,
                               "pt": self.pop_time, "q": self.queue_id, "reviveTime": self.revive_time,
                               "ro": self.revive_offset, "rp": self.re_put_times, "so": self.start_offset,
                               "t": self.topic}
        return {k: v for k, v in doc.items() if v is not None}

    def to_json(self) -> str:
        return to_fastjson(self.to_json_dict())

    def encode(self) -> bytes:
        return self.to_json().encode("utf-8")

    @classmethod
    def from_json(cls, text: str | bytes) -> PopCheckPoint:
        """Parse a checkpoint body; ValueError when it is not one."""
        if isinstance(text, bytes):
            text = text.decode("utf-8")
        doc = parse_fastjson(text)
        if not isinstance(doc, dict):
            raise ValueError(f"a checkpoint is a JSON object, got {text[:80]!r}")

        def num(key: str, long_key: str) -> int:
            value = doc.get(key, doc.get(long_key, 0))
            if not isinstance(value, int) or isinstance(value, bool):
                raise ValueError(f"checkpoint field {key}: {value!r} is not an integer")
            return value

        diff = doc.get("d", doc.get("queueOffsetDiff"))
        if diff is not None and not (isinstance(diff, list) and all(isinstance(d, int) for d in diff)):
            raise ValueError(f"checkpoint field d: {diff!r} is not a list of integers")
        rp = doc.get("rp", doc.get("rePutTimes"))
        return cls(start_offset=num("so", "startOffset"), pop_time=num("pt", "popTime"),
                   invisible_time=num("it", "invisibleTime"), bit_map=num("bm", "bitMap"), num=num("n", "num"),
                   queue_id=num("q", "queueId"), topic=doc.get("t", doc.get("topic")),
                   cid=doc.get("c", doc.get("cid")), revive_offset=num("ro", "reviveOffset"),
                   queue_offset_diff=list(diff) if diff is not None else None,
                   broker_name=doc.get("bn", doc.get("brokerName")), re_put_times=None if rp is None else str(rp))

    def __str__(self) -> str:
        return (f"PopCheckPoint [topic={self.topic}, cid={self.cid}, queueId={self.queue_id}, "
                f"startOffset={self.start_offset}, bitMap={self.bit_map}, num={self.num}, "
                f"reviveTime={self.revive_time}, reviveOffset={self.revive_offset}, diff={self.queue_offset_diff}, "
                f"brokerName={self.broker_name}, rePutTimes={self.re_put_times}]")


def merge_key(topic: str | None, cid: str | None, queue_id: int, start_offset: int, pop_time: int,
              broker_name: str | None) -> str:
    """The key PopReviveService matches acks to checkpoints with (plain concatenation, as Java)."""
    return f"{topic}{cid}{queue_id}{start_offset}{pop_time}{broker_name}"


