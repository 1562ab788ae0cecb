"""TracingTCPTransport: pysyncobj's own TCP transport, with its frames in the trace.

On the real runtime pysyncobj keeps its normal TCPTransport — its sockets, its poller, its
autoTick thread; rmqlab does not reimplement any of it. This subclass only reports what goes
through it: every message sent to a connected peer (frame.send) and every message received from
one (frame.recv), with the fields of `rmqlab.raft.wire.frame_fields` and the frame's size on the
wire (TcpConnection's bytes, recomputed — the transport does not expose them). Both hooks run on
pysyncobj's tick thread; `report` must be thread-safe (a Tracer is).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from pysyncobj.node import Node
from pysyncobj.transport import TCPTransport

FrameReport = Callable[[str, Node, Any], None]  # report(kind, peer node, message)


class TracingTCPTransport(TCPTransport):
    """Built by SyncObj as `transportClass(syncObj, selfNode, otherNodes)`; bind `report` with
    functools.partial."""

    def __init__(self, syncObj, selfNode, otherNodes, *, report: FrameReport):
        self._report = report  # before TCPTransport.__init__, which already wires the callbacks
        super().__init__(syncObj, selfNode, otherNodes)

    def send(self, node: Node, message: Any) -> bool:
        sent = super().send(node, message)
        if sent:
            self._report("frame.send", node, message)
        return sent

    def _onMessageReceived(self, node: Node, message: Any) -> None:
        # TCPTransport binds this method (functools.partial(self._onMessageReceived, node)) to each
        # connection once the peer is known, so every Raft message of a partner passes here.
        self._report("frame.recv", node, message)
        super()._onMessageReceived(node, message)
