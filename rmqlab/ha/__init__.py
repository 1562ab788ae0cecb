"""High availability: replicating a broker's commitlog to its slaves.

Layout mirrors org.apache.rocketmq.store.ha:

* classic master–slave HA (its 4.x form is described in the article "RocketMQ原理解析-HA"):
  ``default_ha_service`` (DefaultHAService, AcceptSocketService), ``default_ha_connection`` (the
  master's end: DefaultHAConnection with its ReadSocketService and WriteSocketService),
  ``default_ha_client`` (the slave's end, DefaultHAClient), and ``default_ha_protocol``, the
  socket-free core with the wire format and both ends' state machines;
* shared by every HA service: the bases both modes build on, named after RocketMQ's interfaces —
  ``ha_service`` (HAService), ``ha_connection`` (HAConnection and its ReadSocketService),
  ``ha_client`` (HAClient) and ``ha_protocol`` (frame layouts, HAProtocolError, the slave's offset
  reports, the read buffer) — and ``ha_connection_state`` (HAConnectionState),
  ``group_transfer_service`` (SYNC_MASTER acknowledgements), ``wait_notify_object``,
  ``flow_monitor``;
* controller-mode HA (AutoSwitchHAService, RIP-44) goes in ``rmqlab.ha.autoswitch``.
"""

from rmqlab.ha.default_ha_client import DefaultHAClient
from rmqlab.ha.default_ha_connection import DefaultHAConnection, ReadSocketService, WriteSocketService
from rmqlab.ha.default_ha_protocol import (REPORT_HEADER_SIZE, TRANSFER_HEADER_SIZE, ClientProtocol,
                                           ConnectionProtocol, HAProtocolError, TransferFrame)
from rmqlab.ha.default_ha_service import AcceptSocketService, DefaultHAService
from rmqlab.ha.flow_monitor import FlowMonitor
from rmqlab.ha.group_transfer_service import ALL_ACK_IN_SYNC_STATE_SET, GroupCommitRequest, GroupTransferService
from rmqlab.ha.ha_connection_state import HAConnectionState
from rmqlab.ha.wait_notify_object import WaitNotifyObject

__all__ = [
    "DefaultHAService", "AcceptSocketService", "DefaultHAConnection", "ReadSocketService", "WriteSocketService",
    "DefaultHAClient", "ClientProtocol", "ConnectionProtocol", "HAProtocolError", "TransferFrame",
    "TRANSFER_HEADER_SIZE", "REPORT_HEADER_SIZE", "GroupTransferService", "GroupCommitRequest",
    "ALL_ACK_IN_SYNC_STATE_SET", "HAConnectionState", "WaitNotifyObject", "FlowMonitor",
]
