"""MQClientManager: the MQClientInstances of one client process (``client/impl/MQClientManager.java``).

Java keeps one MQClientManager per JVM, and in it one MQClientInstance per client id
(``clientIP@instanceName``): a producer and a consumer of one process with the default instance
name share one instance - one connection per broker, one heartbeat carrying both. rmqlab runs
many client processes in one Python process on the simulator, so the manager is per node (one
node = one process), and a restarted node (a new Node object) starts with none. The node's
OperationTracer lives here too: op ids must be unique within the node, whichever client traces.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from rmqlab.client.operation_tracer import OperationTracer

if TYPE_CHECKING:
    from rmqlab.client.client_config import ClientConfig
    from rmqlab.client.impl.mq_client_instance import MQClientInstance
    from rmqlab.runtime.node import Node


class MQClientManager:
    def __init__(self, node: Node):
        self.node = node
        self.factory_table: dict[str, MQClientInstance] = {}
        self.tracer = OperationTracer(node)

    @classmethod
    def get_instance(cls, node: Node) -> MQClientManager:
        # Kept on the node object itself: a class-level WeakKeyDictionary never let go of a node, since
        # its value (this manager) refers to the node, so every finished simulation stayed alive.
        manager = node.__dict__.get("_mq_client_manager")
        if manager is None:
            manager = node.__dict__["_mq_client_manager"] = cls(node)
        return manager

    def get_or_create_mq_client_instance(self, client_config: ClientConfig) -> MQClientInstance:
        from rmqlab.client.impl.mq_client_instance import MQClientInstance

        client_config.change_instance_name_to_node(self.node.name)
        client_id = client_config.build_mq_client_id()
        instance = self.factory_table.get(client_id)
        if instance is None:
            instance = MQClientInstance(self.node, client_config.clone_client_config(), client_id, self)
            self.factory_table[client_id] = instance
        return instance

    def remove_client_factory(self, client_id: str) -> None:
        self.factory_table.pop(client_id, None)
