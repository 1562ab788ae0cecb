"""HAService: what DefaultHAService and AutoSwitchHAService share.

Mirrors org.apache.rocketmq.store.ha.HAService, the interface both implement: the accept service
on the HA port, the master's connections (counted from creation to close), push2SlaveMaxOffset and
the GroupTransferService that waiting SYNC_MASTER puts sit in, the slave's HAClient, and the
lifecycle. What each mode adds — the client it runs, which slaves count as in sync, role changes,
the epoch file and the SyncStateSet — is in its own module.
"""

from __future__ import annotations

from typing import Any

from rmqlab.ha.group_transfer_service import GroupCommitRequest
from rmqlab.ha.wait_notify_object import WaitNotifyObject
from rmqlab.runtime.node import Node


def role_name(config) -> str:
    """The broker role of a MessageStoreConfig as its name (MASTER, SLAVE, ...)."""
    return getattr(config.brokerRole, "name", config.brokerRole)


class HAService:
    """`config` is the broker's MessageStoreConfig (read live: RocketMQ's getters are live too).
    Subclasses create `group_transfer_service`, `accept_socket_service` and `ha_client`."""

    group_transfer_service: Any
    accept_socket_service: Any
    ha_client: Any

    def __init__(self, node: Node, store, config):
        self.node = node
        self.store = store
        self.config = config
        self.connection_list: list = []
        self.connection_count = 0  # connectionCount: connections created and not yet closed
        self.push2_slave_max_offset = 0
        self.wait_notify_object = WaitNotifyObject(node)
        self.stopped = False
        self.crashed = False

    # -- lifecycle ---------------------------------------------------------------------------
    async def start(self) -> None:
        await self.accept_socket_service.begin_accept()

    def shutdown(self) -> None:
        """Clean stop: the client, the listener, every connection, the waiting puts."""
        self.stopped = True
        if self.ha_client is not None:
            self.ha_client.shutdown()
        self.accept_socket_service.shutdown()
        self.destroy_connections()
        self.group_transfer_service.shutdown()

    def on_crash(self) -> None:
        """Process crash: the node cancelled the tasks and timers and the network closed the
        sockets; only in-memory state remains to drop, and nothing more is traced."""
        self.stopped = self.crashed = True
        if self.ha_client is not None:
            self.ha_client.on_crash()
        self.group_transfer_service.on_crash()

    @property
    def ha_listen_port(self) -> int:
        return self.accept_socket_service.port

    # -- slave side --------------------------------------------------------------------------
    def update_ha_master_address(self, new_addr: str | None) -> None:
        """The slave learns the master's HA address (a classic slave from its NameServer registration)."""
        if self.ha_client is not None:
            self.ha_client.update_ha_master_address(new_addr)

    def get_ha_client(self):
        return self.ha_client

    # -- master side: connections ------------------------------------------------------------
    def add_connection(self, conn) -> None:
        self.connection_list.append(conn)

    def remove_connection(self, conn) -> None:
        if conn in self.connection_list:
            self.connection_list.remove(conn)

    def destroy_connections(self) -> None:
        for conn in list(self.connection_list):
            conn.shutdown()
        self.connection_list.clear()

    def get_connection_count(self) -> int:
        return self.connection_count

    # -- master side: acknowledgements -------------------------------------------------------
    def put_request(self, request: GroupCommitRequest) -> None:
        self.group_transfer_service.put_request(request)

    def get_wait_notify_object(self) -> WaitNotifyObject:
        return self.wait_notify_object

    def notify_transfer_some(self, offset: int) -> None:
        """A slave acknowledged `offset`: push2SlaveMaxOffset only grows; waiting puts re-check.

        RocketMQ wakes GroupTransferService only when push2SlaveMaxOffset grew, but its thread also
        re-checks every 1 ms; re-checking on every ack gives the same result (a second slave
        reaching an offset the first already reported counts for ackNums >= 3)."""
        if offset > self.push2_slave_max_offset:
            self.push2_slave_max_offset = offset
        self.group_transfer_service.notify_transfer_some()

    def get_push2_slave_max_offset(self) -> int:
        return self.push2_slave_max_offset

    # -- observation -------------------------------------------------------------------------
    def _ha_client_runtime_info(self) -> dict[str, Any]:
        """HARuntimeInfo of a slave, as plain data (the admin command haStatus shows it)."""
        client = self.ha_client
        return {"master": False, "haClientRuntimeInfo": {
            "masterAddr": client.get_ha_master_address(), "maxOffset": self.store.get_max_phy_offset(),
            "lastReadTimestamp": client.get_last_read_timestamp(),
            "lastWriteTimestamp": client.get_last_write_timestamp(),
            "transferredByteInSecond": client.get_transferred_byte_in_second()}}
