"""BrokerLifecycleListener: told when a replica's heartbeat lapses or its channel closes
(``helper/BrokerLifecycleListener.java``, ``onBrokerInactive``).

A plain callable here. The controller manager registers one that, on the leader, triggers an
election when the inactive replica is its set's master (``ControllerManager``; trigger a.i of
"一文详解 RocketMQ 如何利用 Raft 进行高可用保障").
"""

from __future__ import annotations

from typing import Protocol


class BrokerLifecycleListener(Protocol):
    def __call__(self, cluster_name: str | None, broker_name: str, broker_id: int | None) -> None: ...
