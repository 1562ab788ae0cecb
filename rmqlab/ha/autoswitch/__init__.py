"""Controller-mode HA (RIP-44): AutoSwitchHAService and its two ends.

Design: RocketMQ's controller design document (docs/en/controller/design.md,
docs/cn/controller/design.md).

Layout mirrors org.apache.rocketmq.store.ha.autoswitch:

* ``auto_switch_ha_protocol``: the socket-free core — the four frames' codecs (and the 5.0-5.1.0
  handshake, as history), both ends' state tables, and the pure decisions: doTruncate, transfer
  planning (one batch = one epoch), SyncStateSet shrink/expand, the confirm offset, the write-ack rule;
* ``auto_switch_ha_service``: AutoSwitchHAService (role changes, SyncStateSet, confirm offset),
  its accept service and its GroupTransferService;
* ``auto_switch_ha_connection``: the master's end of one slave (AutoSwitchHAConnection);
* ``auto_switch_ha_client``: the slave's end (AutoSwitchHAClient).

The store-side pieces are in ``rmqlab.store.store_truncation`` (truncateFiles, truncateInvalidMsg)
and CommitLog (which asks the service for the controller-mode write-ack rule); the epoch file is
``rmqlab.store.epoch_file_cache``.
"""

from rmqlab.ha.autoswitch.auto_switch_ha_client import AutoSwitchHAClient
from rmqlab.ha.autoswitch.auto_switch_ha_connection import AutoSwitchHAConnection
from rmqlab.ha.autoswitch.auto_switch_ha_protocol import (ClientProtocol, ConnectionProtocol, HAProtocolError,
                                                          SyncStateSetState, TruncateDecision, WriteAckDecision,
                                                          decide_write_ack, do_truncate, plan_batch)
from rmqlab.ha.autoswitch.auto_switch_ha_service import (AutoSwitchAcceptSocketService,
                                                         AutoSwitchGroupTransferService, AutoSwitchHAService)

__all__ = [
    "AutoSwitchHAService", "AutoSwitchAcceptSocketService", "AutoSwitchGroupTransferService", "AutoSwitchHAConnection",
    "AutoSwitchHAClient", "ClientProtocol", "ConnectionProtocol", "HAProtocolError", "SyncStateSetState",
    "TruncateDecision", "WriteAckDecision", "decide_write_ack", "do_truncate", "plan_batch",
]
