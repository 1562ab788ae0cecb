"""ClientProcess: an application process that uses RocketMQ clients, as a Component on a Node.

RocketMQ's clients live inside an application; rmqlab's application is this component: it owns
some clients (producers, consumers, an admin client), starts them when the node starts (in the
order given) and shuts them down in reverse order on a clean stop, as an application's shutdown
hook would. A crash only drops them (``on_crash``): no offsets written, no UNREGISTER_CLIENT - the
brokers notice the closed connections, and offsets are where the last persist left them.

    sim.add_node("consumer-1", lambda: ClientProcess(consumer=make_consumer()))
    sim.start("consumer-1")
    consumer = sim.components["consumer-1"].clients["consumer"]

The factory builds fresh clients for every start, so a restarted node is a new process (a new
MQClientInstance, no offsets in memory) that resumes from what the brokers kept.

An application may end by itself (a benchmark that sent its messages): ``finish()`` asks the
runtime to stop the node (``Node.exit``), which then shuts the clients down as on SIGTERM and
traces ``node.stop`` with reason "finished", on the simulator as on the real runtime.
"""

from __future__ import annotations

from typing import Any

from rmqlab.runtime.component import Component
from rmqlab.runtime.node import Node


class ClientProcess(Component):
    component_type = "client"

    def __init__(self, **clients: Any):
        """``clients``: name -> a client with ``start(node)``, ``shutdown()`` and ``on_crash()``."""
        self.clients: dict[str, Any] = dict(clients)
        self._shut_down = False

    def __getitem__(self, name: str) -> Any:
        return self.clients[name]

    async def start(self, node: Node) -> None:
        self.node = node
        for client in self.clients.values():
            await client.start(node)

    async def shutdown(self) -> None:
        """Shut the clients down, last started first. Idempotent."""
        if self._shut_down:
            return
        self._shut_down = True
        for client in reversed(list(self.clients.values())):
            await client.shutdown()

    async def finish(self) -> None:
        """The application is done: the runtime stops the node cleanly (``shutdown()``, which
        subclasses extend, then ``node.stop`` with reason "finished")."""
        self.node.exit("finished")

    def on_crash(self) -> None:
        for client in self.clients.values():
            client.on_crash()
