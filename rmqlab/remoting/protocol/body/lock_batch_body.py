"""The bodies of LOCK_BATCH_MQ (41) and UNLOCK_BATCH_MQ (42).

RocketMQ's ``remoting/src/main/java/org/apache/rocketmq/remoting/protocol/body/`` ``LockBatchRequestBody``,
``LockBatchResponseBody`` and ``UnlockBatchRequestBody``, written the way fastjson writes them: bean
properties in alphabetical order, null ones left out, each ``Set<MessageQueue>`` a JSON array in the
order the Java ``HashSet`` iterates it::

    {"clientId":"127.0.0.1@c","consumerGroup":"G","mqSet":[{"brokerName":"broker-a","queueId":0,
        "topic":"T"}],"onlyThisBroker":false}
    {"lockOKMQSet":[{"brokerName":"broker-a","queueId":0,"topic":"T"}]}

``onlyThisBroker`` (RIP-32) tells a broker to lock or unlock on itself only: a broker that forwards a
lock to the other members of its group for the strict-mode quorum sets it, so they do not forward
again.

A HashSet iterates its table bucket by bucket (bucket = ``MessageQueue.hashCode()`` with its high half
folded in, masked by the table size) and each bucket in insertion order; the table size depends on how
the set was built (``new HashSet<>()``: 16; ``new HashSet<>(n)``: n rounded up to a power of two),
doubling while more than 3/4 full. Here a set is a list of distinct queues in insertion order with
the initial capacity of the Java set it stands for (16 unless said otherwise: what fastjson reads a
set into), and :func:`java_hash_set_order` gives the order Java would write it in. Not modelled: a bucket of 8 or
more colliding queues turning into a tree.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from rmqlab.common.config_manager import check_object
from rmqlab.common.java_compat import java_string_hash_code, to_int32
from rmqlab.remoting.exceptions import RemotingCommandError
from rmqlab.remoting.protocol import remoting_serializable
from rmqlab.remoting.protocol.header.broker.admin import MessageQueue

# The table size of a HashSet made with ``new HashSet<>()``, and of the one fastjson fills when it
# reads a Set property.
DEFAULT_HASH_SET_CAPACITY = 16


def message_queue_hash_code(mq: MessageQueue) -> int:
    """``MessageQueue.hashCode()``: 31-based over brokerName, queueId and topic (Java int arithmetic)."""
    result = 1
    result = to_int32(31 * result + (0 if mq.broker_name is None else java_string_hash_code(mq.broker_name)))
    result = to_int32(31 * result + mq.queue_id)
    return to_int32(31 * result + (0 if mq.topic is None else java_string_hash_code(mq.topic)))


def java_hash_set_order(mqs: Iterable[MessageQueue], initial_capacity: int = DEFAULT_HASH_SET_CAPACITY
                        ) -> list[MessageQueue]:
    """The order a ``HashSet<MessageQueue>`` built with ``initial_capacity`` iterates ``mqs``, given in
    insertion order (duplicates dropped, as the set drops them)."""
    unique = list(dict.fromkeys(mqs))
    capacity = remoting_serializable.hash_map_capacity(len(unique), initial_capacity)
    mask = capacity - 1

    def bucket(mq: MessageQueue) -> int:
        h = message_queue_hash_code(mq) & 0xFFFFFFFF
        return (h ^ (h >> 16)) & mask  # HashMap.hash()

    return sorted(unique, key=bucket)  # stable: a bucket keeps its insertion order


def _check_opt_str(value: Any, where: str) -> str | None:
    if value is not None and not isinstance(value, str):
        raise ValueError(f"{where}: expected a string, got {type(value).__name__}")
    return value


def _read_mq_set(value: Any, where: str) -> list[MessageQueue]:
    if value is None:
        return []
    if not isinstance(value, list):
        raise ValueError(f"{where}: expected an array of message queues, got {type(value).__name__}")
    out: dict[MessageQueue, None] = {}
    for i, item in enumerate(value):
        mq = MessageQueue.from_json_dict(item, f"{where}[{i}]")
        _check_opt_str(mq.topic, f"{where}[{i}].topic")
        _check_opt_str(mq.broker_name, f"{where}[{i}].brokerName")
        out[mq] = None
    return list(out)


def _write_mq_set(mqs: Iterable[MessageQueue], initial_capacity: int) -> list[dict[str, Any]]:
    return [mq.to_json_dict() for mq in java_hash_set_order(mqs, initial_capacity)]


def _read_bool(value: Any, where: str) -> bool:
    if value is None:
        return False
    if not isinstance(value, bool):
        raise ValueError(f"{where}: expected true or false, got {value!r}")
    return value


@dataclass
class LockBatchRequestBody:
    """``LockBatchRequestBody``: lock these queues of ``consumer_group`` for ``client_id``."""

    consumer_group: str | None = None
    client_id: str | None = None
    only_this_broker: bool = False
    mq_set: list[MessageQueue] = field(default_factory=list)  # a set, in insertion order
    # The initial capacity of the Java set ``mq_set`` stands for: it decides the order it is written in.
    mq_set_capacity: int = field(default=DEFAULT_HASH_SET_CAPACITY, compare=False, repr=False)

    _NAME = "LockBatchRequestBody"

    def to_json_dict(self) -> dict[str, Any]:
        return {"clientId": self.client_id, "consumerGroup": self.consumer_group,
                "mqSet": _write_mq_set(self.mq_set, self.mq_set_capacity), "onlyThisBroker": self.only_this_broker}

    def encode(self) -> bytes:
        return remoting_serializable.encode(self.to_json_dict())

    @classmethod
    def decode(cls, body: bytes | None):
        """RemotingCommandError (a ValueError) naming what is wrong: a bad request, answered
        SYSTEM_ERROR without a traceback."""
        try:
            return cls._decode(body)
        except RemotingCommandError:
            raise
        except ValueError as e:
            raise RemotingCommandError(str(e)) from None

    @classmethod
    def _decode(cls, body: bytes | None):
        name = cls._NAME
        obj = check_object(remoting_serializable.decode_json(body, name), name)
        return cls(_check_opt_str(obj.get("consumerGroup"), f"{name}.consumerGroup"),
                   _check_opt_str(obj.get("clientId"), f"{name}.clientId"),
                   _read_bool(obj.get("onlyThisBroker"), f"{name}.onlyThisBroker"),
                   _read_mq_set(obj.get("mqSet"), f"{name}.mqSet"))


@dataclass
class UnlockBatchRequestBody(LockBatchRequestBody):
    """``UnlockBatchRequestBody``: the same four properties; the answer has no body."""

    _NAME = "UnlockBatchRequestBody"


@dataclass
class LockBatchResponseBody:
    """``LockBatchResponseBody``: the queues the lock was granted for (``lockOKMQSet``)."""

    lock_ok_mq_set: list[MessageQueue] = field(default_factory=list)  # a set, in insertion order
    lock_ok_mq_set_capacity: int = field(default=DEFAULT_HASH_SET_CAPACITY, compare=False, repr=False)

    def encode(self) -> bytes:
        return remoting_serializable.encode({"lockOKMQSet": _write_mq_set(self.lock_ok_mq_set,
                                                                          self.lock_ok_mq_set_capacity)})

    @classmethod
    def decode(cls, body: bytes | None) -> LockBatchResponseBody:
        try:
            obj = check_object(remoting_serializable.decode_json(body, "LockBatchResponseBody"),
                               "LockBatchResponseBody")
            return cls(_read_mq_set(obj.get("lockOKMQSet"), "LockBatchResponseBody.lockOKMQSet"))
        except RemotingCommandError:
            raise
        except ValueError as e:
            raise RemotingCommandError(str(e)) from None
