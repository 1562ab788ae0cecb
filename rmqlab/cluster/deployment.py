"""A deployment: a mode resolved for one Cluster — its server nodes and the settings each is
given on top of its template. Both backends run it; they choose only the addresses (the
templates' ports on the simulator, free ports on the real runtime) and the store directories, and
ask the Deployment for everything else, so a backend knows roles, not modes."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field

from rmqlab.cluster.modes import (BROKER, CONF_DIR, CONTROLLER, NAMESRV, PROXY, PROXY_TEMPLATE, DeploymentMode,
                                  ServerNode)


@dataclass
class Deployment:
    mode: DeploymentMode
    controller_count: int = 3
    proxy: str | None = None
    overrides: Mapping[str, Mapping[str, object]] = field(default_factory=dict)
    controller_overrides: Mapping[str, object] = field(default_factory=dict)
    proxy_overrides: Mapping[str, object] = field(default_factory=dict)
    mapped_file_size: int = 1024 * 1024

    def __post_init__(self) -> None:
        self.nodes: list[ServerNode] = self.mode.server_nodes(self.controller_count, self.proxy)
        self.mode.check_broker_groups(self.overrides)

    # -- the nodes -------------------------------------------------------------------------------
    def of_role(self, role: str) -> list[ServerNode]:
        return [n for n in self.nodes if n.role == role]

    @property
    def namesrvs(self) -> list[ServerNode]:
        return self.of_role(NAMESRV)

    @property
    def controller_nodes(self) -> list[ServerNode]:
        """The nodes that run a controller: standalone controllers, or the embedding name servers."""
        return [n for n in self.nodes if n.controller_index is not None]

    @property
    def standalone_controllers(self) -> list[ServerNode]:
        return self.of_role(CONTROLLER)

    @property
    def brokers(self) -> list[ServerNode]:
        return self.of_role(BROKER)

    @property
    def proxy_node(self) -> ServerNode | None:
        nodes = self.of_role(PROXY)
        return nodes[0] if nodes else None

    @property
    def embedded(self) -> bool:
        """The controllers run inside the name servers."""
        return any(n.role == NAMESRV and n.controller_index is not None for n in self.nodes)

    @staticmethod
    def template_path(template: str) -> str:
        return os.path.join(CONF_DIR, template)

    @property
    def proxy_template_path(self) -> str:
        return self.template_path(PROXY_TEMPLATE)

    # -- what differs from the templates ----------------------------------------------------------
    def controller_settings(self, node: ServerNode, peers: Mapping[str, str], store_dir: str) -> dict[str, object]:
        """What differs from the template of controller `node`: the peers (for 1 or 5 controllers,
        or the free ports of the real runtime), its own id, and its store."""
        return {"controllerDLegerPeers": ";".join(f"{n}-{a}" for n, a in peers.items()),
                "controllerDLegerSelfId": f"n{node.controller_index}",
                "controllerStorePath": os.path.join(store_dir, "controller"),
                **self.controller_overrides}

    def broker_settings(self, name: str, store_dir: str, namesrv_addr: str, controller_addr: str,
                        host: Mapping[str, object] | None = None) -> dict[str, object]:
        """What differs from broker `name`'s template: its store, the name servers, the commitlog
        file size, the controllers (controller modes), `host` (a backend's addresses for it), then
        the mode's and the Cluster's overrides."""
        values: dict[str, object] = {"storePathRootDir": store_dir, "namesrvAddr": namesrv_addr,
                                     "mappedFileSizeCommitLog": self.mapped_file_size}
        if self.controller_nodes:
            values["controllerAddr"] = controller_addr
        values.update(host or {})
        return {**values, **self.mode.broker_overrides(name, self.overrides)}

    def broker_peer_ids(self) -> dict[str, str]:
        """Broker node -> its dLegerSelfId, for the brokers whose template sets one (DLedger
        CommitLog mode); a backend gives each such member a DLedger address of its own."""
        ids = {n.name: self.mode.broker_template_value(n.name, "dLegerSelfId") for n in self.brokers}
        return {name: peer_id for name, peer_id in ids.items() if peer_id}

    def broker_template(self, name: str):
        """Broker `name`'s BrokerConfig as its template and the overrides give it (brokerName,
        brokerId, brokerClusterName, ...), without what a backend sets."""
        return self.mode.broker_config(name, self.overrides).brokerConfig
