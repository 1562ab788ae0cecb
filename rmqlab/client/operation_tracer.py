"""OperationTracer: every client operation as ``client`` trace events (rmqlab.trace.kinds).

A history checker must be able to tell, from the trace alone, which messages were acknowledged,
lost or duplicated. So every producer send, every pull of a pull consumer and every message a push
consumer hands to its listener is one Jepsen-style operation: an ``invoke`` when it starts, then
exactly one completion with the same ``process`` and ``op_id``:

* ``ok``   - it happened: the broker stored the message (any SendStatus, the message is stored
  whichever it is), the pull answered, the listener returned CONSUME_SUCCESS;
* ``fail`` - it certainly did not happen: no attempt reached a broker, or every broker refused it
  (an error response code), or the listener asked for RECONSUME_LATER;
* ``info`` - unknown: an attempt timed out or lost its connection after the request was written,
  a oneway send (nothing comes back).

``f`` is ``send``, ``pull`` or ``consume``. Values carry what a checker matches on: the message's
``UNIQ_KEY`` (the producer sets it on every message, the broker keeps it), its ``KEYS`` and
``TAGS``, its topic, the CRC of its body (so a checker can tell a corrupted delivery from the trace
alone, without the bodies), and once known its queue (``broker_name``, ``queue_id``,
``queue_offset``). See :func:`describe_message`.

``op_id`` counts the operations of the node (one tracer per client node, shared by all its
clients); ``process`` is the lowest number not used by an operation still in flight, so each
process runs one operation at a time, as the history format requires, while async sends and
parallel consumption overlap on several processes.
"""

from __future__ import annotations

import heapq
import zlib
from typing import TYPE_CHECKING, Any

from rmqlab.common.java_compat import crc32
from rmqlab.common.message.message import Message, MessageExt
from rmqlab.common.message.message_const import MessageConst

if TYPE_CHECKING:
    from rmqlab.remoting.protocol.header.broker.admin import MessageQueue
    from rmqlab.runtime.node import Node


_UNIQ_KEY = MessageConst.PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX
_KEYS = MessageConst.PROPERTY_KEYS
_TAGS = MessageConst.PROPERTY_TAGS


def describe_message(msg: Message, mq: MessageQueue | None = None) -> dict[str, Any]:
    """The identity of ``msg`` for a trace value: topic, UNIQ_KEY, keys, tags, body CRC, and the
    queue and store fields when they are known. ``body_crc`` is the commitlog's BODYCRC of the
    body (``UtilAll.crc32``), so it can be compared with the stored record too."""
    props = msg.properties
    body = msg.body
    value: dict[str, Any] = {
        "topic": msg.topic,
        "uniq_key": props.get(_UNIQ_KEY),
        "keys": props.get(_KEYS),  # Message.keys / Message.tags, read directly (hot path)
        "tags": props.get(_TAGS),
        # crc32() for what a Message holds (bytes), without its range checks; else the general one.
        "body_crc": zlib.crc32(body) & 0x7FFFFFFF if type(body) is bytes else crc32(body or b""),
    }
    if mq is not None:
        value["broker_name"] = mq.broker_name
        value["queue_id"] = mq.queue_id
    if isinstance(msg, MessageExt):
        value["queue_id"] = msg.queue_id
        value["queue_offset"] = msg.queue_offset
        value["reconsume_times"] = msg.reconsume_times
        value["msg_id"] = msg.msg_id
    return value


class ClientOperation:
    """One operation in flight; complete it once with :meth:`ok`, :meth:`fail` or :meth:`info`."""

    __slots__ = ("tracer", "process", "op_id", "f", "done")

    def __init__(self, tracer: OperationTracer, process: int, op_id: int, f: str):
        self.tracer, self.process, self.op_id, self.f = tracer, process, op_id, f
        self.done = False

    def ok(self, value: Any = None) -> None:
        self._complete("ok", value, None)

    def fail(self, value: Any = None, error: str | None = None) -> None:
        self._complete("fail", value, error)

    def info(self, value: Any = None, error: str | None = None) -> None:
        self._complete("info", value, error)

    def _complete(self, type_: str, value: Any, error: str | None) -> None:
        if self.done:
            raise RuntimeError(f"client operation {self.f} #{self.op_id} completed twice")
        self.done = True
        tracer = self.tracer
        # Keywords straight to trace (no intermediate dict); the field order does not reach the file.
        if error is None:
            tracer.node.trace("client", type=type_, process=self.process, f=self.f, op_id=self.op_id, value=value)
        else:
            tracer.node.trace("client", type=type_, process=self.process, f=self.f, op_id=self.op_id, value=value,
                              error=error)
        tracer._release(self.process)


class OperationTracer:
    """Hands out op ids and processes for one client node and emits the events."""

    def __init__(self, node: Node):
        self.node = node
        self._next_op_id = 0
        # The processes 0 .. _high-1 have been handed out; _free holds those of them not in use
        # (a heap), so the lowest unused number is _free[0], or _high when none is free: O(log n)
        # per operation instead of a scan over the busy ones (64 async sends in flight).
        self._high = 0
        self._free: list[int] = []

    def invoke(self, f: str, value: Any) -> ClientOperation:
        self._next_op_id += 1
        op_id = self._next_op_id
        if self._free:
            process = heapq.heappop(self._free)
        else:
            process = self._high
            self._high += 1
        op = ClientOperation(self, process, op_id, f)
        self.node.trace("client", type="invoke", process=process, f=f, op_id=op_id, value=value)
        return op

    def _release(self, process: int) -> None:
        heapq.heappush(self._free, process)
