"""Component: a server or client that runs on a Node, on either runtime.

The lifecycle the runtimes drive: `start(node)` once; then exactly one of `shutdown()` (a clean
stop: flush, deregister, close) or `on_crash()` (the process died: release OS resources without
flushing — the node's tasks are already cancelled and its connections closed). A restart builds a
new component from the same configuration and store directory, as a new process would.
"""

from __future__ import annotations

import abc

from rmqlab.runtime.node import Node


class Component(abc.ABC):
    node: Node
    component_type = "component"  # namesrv, broker, controller, proxy or client (traced in node.start)

    @abc.abstractmethod
    async def start(self, node: Node) -> None:
        """Bind listeners, load state, spawn the periodic tasks."""

    async def shutdown(self) -> None:
        """Clean stop; the default has nothing to flush."""

    def on_crash(self) -> None:
        """Process crash: drop in-memory state; never flush (the page cache keeps what was written)."""
