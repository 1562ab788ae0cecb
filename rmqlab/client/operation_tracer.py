"""OperationTracer: every client operation as ``client`` trace events (rmqlab.trace.kinds, issue 3 §5).

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

from typing import TYPE_CHECKING, Any

from rmqlab.common.java_compat import crc32
from rmqlab.common.message.message import Message, MessageExt
from rmqlab.common.message.message_const import MessageConst

if TYPE_CHECKING:
    from rmqlab.remoting.protocol.header.broker.admin import MessageQueue
    from rmqlab.runtime.node import Node


def describe_message(msg: Message, mq: "MessageQueue | None" = None) -> dict[str, Any]:
    """The identity of ``msg`` for a trace value: topic, UNIQ_KEY, keys, tags, body CRC, and the
    queue and store fields when they are known. ``body_crc`` is the commitlog's BODYCRC of the
    body (``UtilAll.crc32``), so it can be compared with the stored record too."""
    value: dict[str, Any] = {
        "topic": msg.topic,
        "uniq_key": msg.properties.get(MessageConst.PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX),
        "keys": msg.keys,
        "tags": msg.tags,
        "body_crc": crc32(msg.body or b""),
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

    def __init__(self, tracer: "OperationTracer", process: int, op_id: int, f: str):
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
        fields: dict[str, Any] = dict(type=type_, process=self.process, f=self.f, op_id=self.op_id, value=value)
        if error is not None:
            fields["error"] = error
        self.tracer.node.trace("client", **fields)
        self.tracer._busy.discard(self.process)


class OperationTracer:
    """Hands out op ids and processes for one client node and emits the events."""

    def __init__(self, node: "Node"):
        self.node = node
        self._next_op_id = 0
        self._busy: set[int] = set()

    def invoke(self, f: str, value: Any) -> ClientOperation:
        self._next_op_id += 1
        process = 0
        while process in self._busy:
            process += 1
        self._busy.add(process)
        op = ClientOperation(self, process, self._next_op_id, f)
        self.node.trace("client", type="invoke", process=process, f=f, op_id=op.op_id, value=value)
        return op
