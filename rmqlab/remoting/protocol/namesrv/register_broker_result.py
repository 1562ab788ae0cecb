"""RegisterBrokerResult: what a name server answers a registering broker (``RegisterBrokerResult.java``).

For a slave it names the group's master (the broker registered as id 0) and the master's HA
address, which is how a classic slave finds where to replicate from
(``BrokerController.registerBrokerAll``, ``DefaultHAService``). The
name server also returns its ORDER_TOPIC_CONFIG key-value table as the response body; rmqlab's name
server keeps no key-value configuration, so ``kv_table`` stays None.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class RegisterBrokerResult:
    ha_server_addr: str | None = None
    master_addr: str | None = None
    kv_table: dict[str, str] | None = None
