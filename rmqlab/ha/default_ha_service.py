"""DefaultHAService: classic master–slave replication of the commitlog.

Mirrors org.apache.rocketmq.store.ha.DefaultHAService, on a Node instead of threads:

* AcceptSocketService listens on the HA port (haListenPort; a broker passes
  ``config.get_ha_listen_port(listenPort)``) and gives each accepted slave a DefaultHAConnection.
  Like RocketMQ, every broker listens, a slave too.
* A SLAVE (brokerRole at construction) also runs a DefaultHAClient that replicates from the
  master's HA address: ``haMasterAddress`` when configured (BrokerController.initialize does the
  same), else whatever the broker passes to ``update_ha_master_address`` after registering with a
  NameServer (RegisterBrokerResult.haServerAddr).
* A SYNC_MASTER put that needs acknowledgements (CommitLog.handleHA, needAckNums = inSyncReplicas
  >= 2) waits in GroupTransferService until enough slaves report its end offset, else
  FLUSH_SLAVE_TIMEOUT after slaveTimeout.

The service attaches itself to the store (``DefaultMessageStore.set_ha_service``), which is how
the store's SYNC_MASTER path finds it. The store's clock must be the node's (``node.now_ms``): the
store stamps a request's deadline, this service's timers enforce it.

Sync vs async replication, and RocketMQ 5 (RIP-34)
--------------------------------------------------
RocketMQ's deployment guide ("部署方式") describes the "sync double write" mode as: a send
succeeds only once master *and* slave have written it. Since RIP-34, CommitLog.asyncPutMessage
waits for ``inSyncReplicas`` replicas, master included, and returns at once when that is 0 or 1 —
and inSyncReplicas defaults to 1. So a SYNC_MASTER with RocketMQ 5's defaults replicates exactly
like an ASYNC_MASTER; RocketMQ's upgrade advice is to set totalReplicas=2 and inSyncReplicas=2
(rmqlab's conf/2m-2s-sync templates do).
"""

from __future__ import annotations

import logging
from typing import Any

from rmqlab.common.decision_points import DecisionPoints
from rmqlab.common.decision_points import of as decision_points_of
from rmqlab.ha.default_ha_client import DefaultHAClient
from rmqlab.ha.default_ha_connection import DefaultHAConnection
from rmqlab.ha.group_transfer_service import GroupTransferService
from rmqlab.ha.ha_service import HAService, role_name
from rmqlab.runtime.node import Listener, Node

log = logging.getLogger("rmqlab.ha")


class AcceptSocketService:
    """DefaultHAService.AcceptSocketService: accept slaves on the HA port (each mode's subclass
    names the connection it creates, createConnection)."""

    LOG_NAME = "HAService"  # how the accept log line names the service

    def __init__(self, ha_service: Any, host: str, port: int):
        self.ha_service = ha_service
        self.host = host
        self.port = port
        self.listener: Listener | None = None

    async def begin_accept(self) -> None:
        self.listener = await self.ha_service.node.listen(self.host, self.port, self._on_accept)
        if self.port == 0:
            # As RocketMQ: the OS picked the port, and haListenPort now says which.
            self.port = self.listener.port
            self.ha_service.config.haListenPort = self.port
            log.info("OS picked up %d to listen for HA", self.port)

    def create_connection(self, reader, writer) -> DefaultHAConnection:
        return DefaultHAConnection(self.ha_service, reader, writer)

    async def _on_accept(self, reader, writer) -> None:
        ha = self.ha_service
        if ha.stopped:
            writer.close()
            return
        conn = self.create_connection(reader, writer)
        log.info("%s receive new connection, %s", self.LOG_NAME, conn.client_address)
        ha.add_connection(conn)
        await conn.run()

    def shutdown(self) -> None:
        if self.listener is not None:
            self.listener.close()
            self.listener = None


class DefaultHAService(HAService):
    """The HA service a broker owns; see the module docstring.

    `config` is the broker's MessageStoreConfig (read live: RocketMQ's getters are live too).
    `host` / `port` are where AcceptSocketService listens; the port defaults to haListenPort.
    `decision_points`: its transfer_ok goes to the GroupTransferService (None: RocketMQ's rule).
    Lifecycle, connections and acknowledgements are HAService's.
    """

    connection_list: list[DefaultHAConnection]
    ha_client: DefaultHAClient | None

    def __init__(self, node: Node, store, config, *, host: str = "0.0.0.0", port: int | None = None,
                 decision_points: DecisionPoints | None = None):
        super().__init__(node, store, config)
        self.group_transfer_service = GroupTransferService(
            self, transfer_ok=decision_points_of(decision_points).transfer_ok)
        self.accept_socket_service = AcceptSocketService(self, host, config.haListenPort if port is None else port)
        self.ha_client = DefaultHAClient(self) if role_name(config) == "SLAVE" else None
        store.set_ha_service(self)

    async def start(self) -> None:
        await super().start()
        if self.ha_client is not None:
            addr = self.config.haMasterAddress
            if addr is not None and len(addr) >= 6:  # BrokerController.initialize's test
                self.ha_client.update_ha_master_address(addr)
            self.ha_client.start()

    def wakeup_ha_client(self) -> None:
        """``DefaultMessageStore.wakeupHAClient``: a slave's HA client stops waiting and connects."""
        if self.ha_client is not None:
            self.ha_client.wakeup()

    # -- master side: acknowledgements -------------------------------------------------------
    def is_slave_ok(self, master_put_where: int) -> bool:
        """isSlaveOK: a slave is connected and push2SlaveMaxOffset is within haMaxGapNotInSync.

        What the article "RocketMQ原理解析-HA" describes (RocketMQ 4.x): a SYNC_MASTER put first
        asks isSlaveOK; if no slave is connected or the slave lags more than haMaxGapNotInSync
        (256 MiB) behind, the put returns SLAVE_NOT_AVAILABLE at once instead of waiting (and the
        producer may resend, duplicating the message, which is already in the commitlog).

        What RocketMQ 5 does (the code rmqlab mirrors): nothing calls isSlaveOK any more. The
        store never produces SLAVE_NOT_AVAILABLE; a SYNC_MASTER put with inSyncReplicas >= 2
        waits for acknowledgements even with no slave connected, and gets FLUSH_SLAVE_TIMEOUT
        after slaveTimeout (3 s). The status now only comes back from escaped remote sends. The
        method stays, as in RocketMQ, for whoever wants the check (tests, the labs, admin tools).
        """
        return (self.connection_count > 0
                and master_put_where - self.push2_slave_max_offset < self.config.haMaxGapNotInSync)

    def is_in_sync_slave(self, master_put_where: int, conn: DefaultHAConnection) -> bool:
        return master_put_where - conn.slave_ack_offset < self.config.haMaxGapNotInSync

    def in_sync_replicas_nums(self, master_put_where: int) -> int:
        """1 (the master) + the connections whose ack offset is within haMaxGapNotInSync.

        As in RocketMQ, a connection that has not reported yet (ack offset -1) counts while the
        master's log is shorter than haMaxGapNotInSync."""
        return 1 + sum(1 for conn in self.connection_list if self.is_in_sync_slave(master_put_where, conn))

    # -- observation -------------------------------------------------------------------------
    def get_runtime_info(self, master_put_where: int) -> dict[str, Any]:
        """HARuntimeInfo, as plain data (the admin command haStatus shows it)."""
        if self.ha_client is not None:
            return self._ha_client_runtime_info()
        connections = []
        for conn in self.connection_list:
            connections.append({
                "addr": conn.client_address, "slaveAckOffset": conn.slave_ack_offset,
                "diff": master_put_where - conn.slave_ack_offset, "inSync": self.is_in_sync_slave(master_put_where, conn),
                "transferredByteInSecond": conn.get_transferred_byte_in_second(),
                "transferFromWhere": conn.get_transfer_from_where()})
        return {"master": True, "masterCommitLogMaxOffset": master_put_where,
                "inSyncSlaveNums": sum(c["inSync"] for c in connections), "haConnectionInfo": connections}
