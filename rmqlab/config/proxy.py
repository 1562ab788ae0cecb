"""Proxy configuration: ProxyConfig, read from rmq-proxy.json (JSON, not .properties).

proxy/src/main/java/org/apache/rocketmq/proxy/config/ProxyConfig.java at commit 8fc57f1; seed
000 "Cluster模式部署": in Cluster mode the Proxy runs as its own process beside NameServer and
Brokers, one Proxy cluster per Broker cluster, chosen with rocketMQClusterName.
"""

from __future__ import annotations

from dataclasses import dataclass

from rmqlab.config.addresses import check_addr_list
from rmqlab.common.delay_level import parse_delay_level
from rmqlab.config.broker import check_delay_levels
from rmqlab.config.fields import bool_field, int_field, long_field, str_field

CLUSTER_MODE = "CLUSTER"
LOCAL_MODE = "LOCAL"


def _check_proxy_mode(value: str) -> str | None:
    # ProxyMode.isClusterMode / isLocalMode compare the upper-cased value.
    if value.upper() not in (CLUSTER_MODE, LOCAL_MODE):
        return f"{CLUSTER_MODE} or {LOCAL_MODE} (any case)"
    return None


@dataclass
class ProxyConfig:
    """Settings of a Proxy (RocketMQ's mqproxy) in Cluster mode."""

    rocketMQClusterName: str = str_field("DefaultCluster", nonempty=True)
    proxyClusterName: str = str_field("DefaultCluster", nonempty=True)
    # RocketMQ defaults to the host name, falling back to "DEFAULT_PROXY"; rmqlab uses the
    # fallback so the configuration does not depend on the machine.
    proxyName: str = str_field("DEFAULT_PROXY", nonempty=True)
    # Empty until init_data (ProxyConfig.initData) fills it in.
    localServeAddr: str = str_field("")
    heartbeatSyncerTopicClusterName: str = str_field("")
    heartbeatSyncerTopicName: str = str_field("DefaultHeartBeatSyncerTopic", nonempty=True)
    # As for brokers, rmqlab does not fall back to $NAMESRV_ADDR (see BrokerConfig.namesrvAddr).
    namesrvAddr: str | None = str_field(None, check=check_addr_list)
    proxyMode: str = str_field(CLUSTER_MODE, check=_check_proxy_mode)
    grpcServerPort: int = int_field(8081, min=0, max=65535)
    remotingListenPort: int = int_field(8080, min=0, max=65535)
    remotingAccessAddr: str = str_field("")
    maxMessageSize: int = int_field(4 * 1024 * 1024, min=1)
    grpcMaxInboundMessageSize: int = int_field(130 * 1024 * 1024, min=1)
    maxUserPropertySize: int = int_field(16 * 1024, min=1)
    userPropertyMaxNum: int = int_field(128, min=1)
    maxMessageGroupSize: int = int_field(64, min=1)
    defaultInvisibleTimeMills: int = long_field(60 * 1000, min=1)
    minInvisibleTimeMillsForRecv: int = long_field(10 * 1000, min=1)
    maxInvisibleTimeMills: int = long_field(12 * 3600 * 1000, min=1)
    maxDelayTimeMills: int = long_field(24 * 3600 * 1000, min=1)
    grpcClientProducerMaxAttempts: int = int_field(3, min=1)
    grpcClientProducerBackoffInitialMillis: int = long_field(10, min=0)
    grpcClientProducerBackoffMaxMillis: int = long_field(1000, min=0)
    grpcClientProducerBackoffMultiplier: int = int_field(2, min=1)
    grpcClientConsumerMinLongPollingTimeoutMillis: int = long_field(5 * 1000, min=0)
    grpcClientConsumerMaxLongPollingTimeoutMillis: int = long_field(20 * 1000, min=0)
    longPollingReserveTimeInMillis: int = long_field(100, min=0)
    topicRouteServiceCacheExpiredSeconds: int = int_field(300, min=1)
    topicRouteServiceCacheRefreshSeconds: int = int_field(20, min=1)
    enableProxyAutoRenew: bool = bool_field(True)
    # Transactions through the Proxy (RocketMQ's ProxyConfig, the same defaults).
    maxTransactionRecoverySecond: int = long_field(3600, min=0)
    transactionDataExpireMillis: int = long_field(30 * 1000, min=1)
    transactionDataMaxNum: int = int_field(15, min=1)
    transactionHeartbeatPeriodSecond: int = int_field(20, min=1)
    transactionDataExpireScanPeriodMillis: int = long_field(10 * 1000, min=1)
    useDelayLevel: bool = bool_field(False)
    messageDelayLevel: str = str_field("1s 5s 10s 30s 1m 2m 3m 4m 5m 6m 7m 8m 9m 10m 20m 30m 1h 2h",
                                       check=check_delay_levels)

    def init_data(self) -> None:
        """ProxyConfig.initData: fill the addresses left empty. RocketMQ takes the machine's
        address for localServeAddr; rmqlab's labs are loopback-only, so it takes 127.0.0.1."""
        if not self.localServeAddr:
            self.localServeAddr = "127.0.0.1"
        if not self.remotingAccessAddr.strip():
            self.remotingAccessAddr = self.localServeAddr
        if not self.heartbeatSyncerTopicClusterName.strip():
            self.heartbeatSyncerTopicClusterName = self.rocketMQClusterName

    def is_cluster_mode(self) -> bool:
        return self.proxyMode.upper() == CLUSTER_MODE

    def get_delay_level_table(self) -> dict[int, int]:
        return parse_delay_level(self.messageDelayLevel)

    def compute_delay_level(self, time_ms: int, now_ms: int) -> int:
        """``computeDelayLevel``: the first level (by delay) longer than the time left, else the last."""
        table = sorted(self.get_delay_level_table().items(), key=lambda e: e[1])
        interval = time_ms - now_ms
        for level, delay in table:
            if delay > interval:
                return level
        return table[-1][0]
