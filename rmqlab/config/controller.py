"""Controller configuration: ControllerConfig (RIP-44, automatic master/slave switching).

common/src/main/java/org/apache/rocketmq/common/ControllerConfig.java at commit 8fc57f1
(RocketMQ's "主备自动切换模式部署", "Controller 部署"). The same keys configure a standalone
controller (mqcontroller -c controller.conf) and one embedded in a name server
(enableControllerInNamesrv=true in the name server's file).
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from rmqlab.config.addresses import check_dleger_peers, parse_dleger_peers
from rmqlab.config.fields import bool_field, int_field, long_field, path_field, resolve_path, str_field

DLEDGER_CONTROLLER = "DLedger"
JRAFT_CONTROLLER = "jRaft"


def _check_controller_type(value: str) -> str | None:
    # RocketMQ compares with "jRaft" and treats every other string as DLedger; rmqlab names both
    # spellings so a typo is not silently taken for DLedger.
    if value not in (DLEDGER_CONTROLLER, JRAFT_CONTROLLER):
        return f"one of {DLEDGER_CONTROLLER}, {JRAFT_CONTROLLER}"
    return None


@dataclass
class ControllerConfig:
    """Settings of a controller node (a DLedger Raft group member that elects broker masters)."""

    controllerType: str = str_field(DLEDGER_CONTROLLER, check=_check_controller_type)
    scanNotActiveBrokerInterval: int = long_field(5 * 1000, min=1)
    controllerThreadPoolNums: int = int_field(16, min=1)
    controllerRequestThreadPoolQueueCapacity: int = int_field(50000, min=1)
    # The Raft group: its name, every member as id-host:port, and this node's id ("Controller 部署").
    # In RocketMQ the DLedger controller also serves brokers on its own peer address, which is
    # why a broker's controllerAddr lists the peer addresses.
    controllerDLegerGroup: str | None = str_field(None)
    controllerDLegerPeers: str | None = str_field(None, check=check_dleger_peers)
    controllerDLegerSelfId: str | None = str_field(None)
    mappedFileSize: int = int_field(1024 * 1024 * 1024, min=1)
    # Empty means ~/<controllerType>Controller (RocketMQ's getter); read get_controller_store_path.
    controllerStorePath: str | None = path_field(None)
    electMasterMaxRetryCount: int = int_field(3, min=1)
    enableElectUncleanMaster: bool = bool_field(False)
    # The Java field is isProcessReadEvent, but MixAll.properties2Object derives keys from
    # setters (setProcessReadEvent), so the key a file must use is processReadEvent.
    processReadEvent: bool = bool_field(False)
    notifyBrokerRoleChanged: bool = bool_field(True)
    scanInactiveMasterInterval: int = long_field(5 * 1000, min=1)
    configStorePath: str = path_field("~/controller/controller.properties")
    # Keys UPDATE_CONTROLLER_CONFIG (1009) refuses with NO_PERMISSION (rocketmqHome always).
    configBlackList: str = str_field("configBlackList;configStorePath")

    def get_controller_store_path(self) -> str:
        """controllerStorePath, or ~/<controllerType>Controller when unset (as in RocketMQ)."""
        if self.controllerStorePath:
            return self.controllerStorePath
        return resolve_path(os.path.join("~", f"{self.controllerType}Controller"))

    def get_peers(self) -> dict[str, str]:
        """controllerDLegerPeers as {id: "host:port"} in file order (empty when unset)."""
        return parse_dleger_peers(self.controllerDLegerPeers) if self.controllerDLegerPeers else {}

    def get_self_addr(self) -> str:
        """This node's peer address, where it serves both Raft and broker requests."""
        peers = self.get_peers()
        if self.controllerDLegerSelfId not in peers:
            raise KeyError(f"controllerDLegerSelfId {self.controllerDLegerSelfId!r} is not among the peers {sorted(peers)}")
        return peers[self.controllerDLegerSelfId]

    def effective_values(self) -> dict[str, object]:
        return {"controllerStorePath": self.get_controller_store_path()}
