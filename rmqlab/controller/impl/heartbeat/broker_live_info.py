"""BrokerLiveInfo: a replica's last heartbeat (``impl/heartbeat/BrokerLiveInfo.java``).

What the election policy ranks on: ``epoch`` (the last epoch in the broker's epoch file),
``max_offset`` (its commitlog max offset) and ``election_priority`` (smaller is preferred).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass
class BrokerLiveInfo:
    broker_name: str | None
    broker_addr: str | None
    broker_id: int
    last_update_timestamp: int
    heartbeat_timeout_millis: int
    channel: Any
    epoch: int
    max_offset: int
    election_priority: int
    confirm_offset: int = 0
