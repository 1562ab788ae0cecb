"""ClientConfig: the settings every RocketMQ client shares (``client/ClientConfig.java``).

A producer, a consumer and an admin client each carry one; clients on the same node with the same
client id (``clientIP@instanceName``) share one MQClientInstance, as Java clients in one JVM share
one through ``MQClientManager``.

Defaults are RocketMQ 5's. Deviations:

* ``client_ip`` defaults to 127.0.0.1 rather than the machine's first non-loopback address
  (``NetworkUtil.getLocalAddress``): rmqlab's clusters run on loopback, and a fixed value keeps the
  simulator's traces independent of the machine;
* an ``instance_name`` left at ``DEFAULT`` becomes the node's name when the client starts, where
  Java writes ``pid#nanoTime`` (``changeInstanceNameToPID``): a node is one process, its name is
  unique in the cluster, and it is the same in every run of a seed;
* ``rebalance_interval`` is a setting here; Java reads the system property
  ``rocketmq.client.rebalance.waitInterval`` (20 s). The C++ client (PyPI ``rocketmq``
  0.4.4) rebalances every 10 s; either way the broker's NOTIFY_CONSUMER_IDS_CHANGED triggers one at once.
"""

from __future__ import annotations

from dataclasses import dataclass

from rmqlab.config.addresses import split_addr_list

DEFAULT_INSTANCE_NAME = "DEFAULT"


@dataclass
class ClientConfig:
    # "host:port;host:port" of the name servers (the client's -n).
    namesrv_addr: str | None = None
    client_ip: str = "127.0.0.1"
    instance_name: str = DEFAULT_INSTANCE_NAME
    unit_name: str | None = None
    # Route refresh of every topic in use (MQClientInstance.startScheduledTask).
    poll_name_server_interval: int = 30_000
    # Heartbeats to every known broker; a broker expires a silent client after 120 s.
    heartbeat_broker_interval: int = 30_000
    # Consumers write their offsets to the brokers this often (first after 10 s).
    persist_consumer_offset_interval: int = 5_000
    # Timeout of the client's own requests to name servers and brokers (routes, offsets, ...).
    mq_client_api_timeout: int = 3_000
    # MQFaultStrategy.sendLatencyFaultEnable: avoid brokers that were slow or failed lately.
    send_latency_enable: bool = False
    # RebalanceService: the wait between rebalances, and the shorter one while unbalanced.
    rebalance_interval: int = 20_000
    rebalance_min_interval: int = 1_000

    def build_mq_client_id(self) -> str:
        """``buildMQClientId``: clientIP@instanceName[@unitName]."""
        client_id = f"{self.client_ip}@{self.instance_name}"
        if self.unit_name:
            client_id += f"@{self.unit_name}"
        return client_id

    def change_instance_name_to_node(self, node_name: str) -> None:
        """``changeInstanceNameToPID``, with the node's name for the process id (module docstring)."""
        if self.instance_name == DEFAULT_INSTANCE_NAME:
            self.instance_name = node_name

    def namesrv_addr_list(self) -> list[str]:
        """The name-server addresses in the order given; empty when none is set."""
        return split_addr_list(self.namesrv_addr) if self.namesrv_addr else []

    def clone_client_config(self) -> ClientConfig:
        """``cloneClientConfig``: the MQClientInstance keeps its own copy."""
        return ClientConfig(**{name: getattr(self, name) for name in self.__dataclass_fields__})
