"""Name server configuration: NamesrvConfig.

common/src/main/java/org/apache/rocketmq/common/namesrv/NamesrvConfig.java at commit 8fc57f1
(the RIP-32 keys, and enableControllerInNamesrv). The name server's
port is its NettyServerConfig.listenPort (9876, set by NamesrvStartup).
"""

from __future__ import annotations

from dataclasses import dataclass

from rmqlab.config.fields import bool_field, int_field, long_field, path_field


@dataclass
class NamesrvConfig:
    """Settings of the NameServer (RocketMQ's mqnamesrv)."""

    kvConfigPath: str = path_field("~/namesrv/kvConfig.json")
    # NamesrvStartup overwrites this with the -c file; the loader does the same.
    configStorePath: str = path_field("~/namesrv/namesrv.properties")
    orderMessageEnable: bool = bool_field(False)
    returnOrderTopicConfigToBroker: bool = bool_field(True)
    scanNotActiveBrokerInterval: int = long_field(5 * 1000, min=1)
    # RIP-32: rewrite routes so the smallest-id slave of a masterless group serves as read-only
    # master (RIP-32 "Slave Acting Master Mode", "Configuration in nameserver"; ``RouteInfoManager``).
    supportActingMaster: bool = bool_field(False)
    enableAllTopicList: bool = bool_field(True)
    enableTopicList: bool = bool_field(True)
    # RIP-32: send NOTIFY_MIN_BROKER_ID_CHANGE to a group's members when its smallest broker id
    # changes, so the smallest-id slave takes over or hands back the master-only services.
    notifyMinBrokerIdChanged: bool = bool_field(False)
    # Run a controller inside this name server ("Controller 嵌入 NameServer 部署" in RocketMQ's
    # "主备自动切换模式部署"); when
    # true the same file also configures a ControllerConfig.
    enableControllerInNamesrv: bool = bool_field(False)
    needWaitForService: bool = bool_field(False)
    waitSecondsForService: int = int_field(45, min=0)
    deleteTopicWithBrokerRegistration: bool = bool_field(False)
