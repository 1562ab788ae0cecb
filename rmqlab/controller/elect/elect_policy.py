"""ElectPolicy: who becomes master (``elect/ElectPolicy.java``)."""

from __future__ import annotations

import abc
from collections.abc import Set


class ElectPolicy(abc.ABC):
    @abc.abstractmethod
    def elect(self, cluster_name: str | None, broker_name: str, sync_state_brokers: Set[int] | None,
              all_replica_brokers: Set[int] | None, old_master: int | None, broker_id: int | None) -> int | None:
        """The new master's broker id, or None when nobody qualifies.

        ``sync_state_brokers``: the SyncStateSet; ``all_replica_brokers``: every registered replica,
        passed only when unclean election is enabled (else None); ``old_master``: the current
        master (None if there is none); ``broker_id``: a preferred or designated id, or None."""
