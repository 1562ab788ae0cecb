"""Deployment modes as data: which nodes an operator starts, in which role, from which conf/
template ("部署方式", RocketMQ's docs/cn/operation.md and conf/README.md).

A mode names its brokers and their templates, its classic name servers, and where its controllers
run, if it has any (RocketMQ's docs/cn/controller/deploy.md: embedded in the name servers with
enableControllerInNamesrv=true, or standalone `mqcontroller` processes). `server_nodes()` turns it
into the list of nodes both backends run (rmqlab.cluster.sim_backend, rmqlab.cluster.real_backend),
so a new mode is one more DeploymentMode — in MODES, or given to Cluster directly — and no change
to either backend:

    DeploymentMode("1m-1s-sync", {"broker-a": "2m-2s-sync/broker-a.properties",
                                  "broker-a-s": "2m-2s-sync/broker-a-s.properties"},
                   broker_settings={"*": {"enableSlaveActingMaster": True}})
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field

CONF_DIR = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))), "conf")

# Roles: the `rmqlab` command a node runs.
NAMESRV, CONTROLLER, BROKER, PROXY = "namesrv", "controller", "broker", "proxy"
# Where the controllers run.
EMBEDDED, STANDALONE = "embedded", "standalone"
CONTROLLER_COUNTS = (1, 3, 5)   # a Raft group of an odd size
PROXY_NODE = "proxy"            # proxy="cluster": the Proxy's node
PROXY_TEMPLATE = "rmq-proxy.json"


@dataclass(frozen=True)
class ServerNode:
    """One server node of a deployment: its name, role and template under conf/ (None: the
    defaults, `rmqlab namesrv` without -c). `controller_index` i: the node is controller n<i>
    (a standalone controller, or an embedded controller's name server)."""

    name: str
    role: str
    template: str | None
    controller_index: int | None = None


@dataclass(frozen=True)
class DeploymentMode:
    """`brokers`: broker node -> template under conf/ (the node names are the templates' names).
    `namesrvs`: the name servers, node -> template or None (default: one "namesrv" with the
    defaults); not for EMBEDDED controllers, whose name servers are the controllers.
    `controllers`: None, EMBEDDED or STANDALONE; their count is the Cluster's `controllers`.
    `broker_settings`: settings on top of the templates, by broker node or "*" for every broker
    (a Cluster's `overrides` come after them).
    `own_hosts`: on the real runtime each broker advertises the host its connections come from
    (brokerIP1 = brokerIP2 = bindAddress = its node's loopback address), as on a machine of its
    own. RIP-32's pre-online needs it: BrokerPreOnlineService.waitForHaHandshakeComplete finds a
    member's HA connection by the host of the member's advertised address, and a broker whose
    connections come from elsewhere (behind the fault relay, which keeps each node's source
    address, or behind NAT) is never found: the returning master never goes online."""

    name: str
    brokers: Mapping[str, str]
    namesrvs: Mapping[str, str | None] | None = None
    controllers: str | None = None
    broker_settings: Mapping[str, Mapping[str, object]] = field(default_factory=dict)
    own_hosts: bool = False

    def __post_init__(self) -> None:
        if self.controllers not in (None, EMBEDDED, STANDALONE):
            raise ValueError(f"mode {self.name!r}: controllers must be None, {EMBEDDED!r} or {STANDALONE!r}, "
                             f"not {self.controllers!r}")
        if self.controllers == EMBEDDED and self.namesrvs is not None:
            raise ValueError(f"mode {self.name!r}: embedded controllers are the name servers; give no namesrvs")
        if not self.brokers:
            raise ValueError(f"mode {self.name!r} has no brokers")
        unknown = set(self.broker_settings) - {"*", *self.brokers}
        if unknown:
            raise ValueError(f"mode {self.name!r}: broker_settings for nodes it does not have: "
                             f"{', '.join(sorted(unknown))}")

    def dleger_commit_log(self) -> bool:
        """DLedger CommitLog mode: the brokers' templates set enableDLegerCommitLog = true."""
        return all(self.broker_template_value(n, "enableDLegerCommitLog") == "true" for n in self.brokers)

    def broker_template_value(self, name: str, key: str) -> str | None:
        """The value `key` has in broker `name`'s template, as text (None when it is not set)."""
        from rmqlab.config import read_properties_file

        value = None
        for entry in read_properties_file(os.path.join(CONF_DIR, self.brokers[name])):
            if entry.key == key:
                value = entry.value  # the last one wins, as in RocketMQ
        return value

    def check_broker_groups(self, overrides: Mapping[str, Mapping[str, object]] | None = None) -> None:
        """DLedger CommitLog members (brokers whose template sets dLegerSelfId) must describe one
        group: each broker alone cannot tell (rmqlab.broker.dledger.dledger_group_check). Raises
        ConfigError."""
        from rmqlab.broker.dledger.dledger_group_check import check_dledger_groups

        members = [n for n in self.brokers if self.broker_template_value(n, "dLegerSelfId")]
        if members:
            check_dledger_groups({n: self.broker_config(n, overrides) for n in members})

    def controller_nodes(self, controllers: int = 3) -> list[str]:
        """The controllers' node names: namesrv-n<i> (embedded) or controller-n<i> (standalone)."""
        if self.controllers is None:
            return []
        prefix = NAMESRV if self.controllers == EMBEDDED else CONTROLLER
        return [f"{prefix}-n{i}" for i in range(controllers)]

    def server_nodes(self, controllers: int = 3, proxy: str | None = None) -> list[ServerNode]:
        """Every server node, in start order: name servers, controllers, brokers, then the Proxy
        of proxy="cluster" (proxy="local" runs inside the brokers)."""
        nodes: list[ServerNode] = []
        controller_nodes = [ServerNode(n, NAMESRV if self.controllers == EMBEDDED else CONTROLLER,
                                       controller_template(n), i)
                            for i, n in enumerate(self.controller_nodes(controllers))]
        if self.controllers == EMBEDDED:
            nodes += controller_nodes
        else:
            nodes += [ServerNode(n, NAMESRV, t) for n, t in (self.namesrvs or {NAMESRV: None}).items()]
            nodes += controller_nodes
        nodes += [ServerNode(n, BROKER, t) for n, t in self.brokers.items()]
        if proxy == "cluster":
            nodes.append(ServerNode(PROXY_NODE, PROXY, PROXY_TEMPLATE))
        return nodes

    def broker_overrides(self, name: str,
                         overrides: Mapping[str, Mapping[str, object]] | None = None) -> dict[str, object]:
        """What broker `name` sets on top of its template: the mode's settings, then `overrides`
        (node name or "*")."""
        overrides = overrides or {}
        return {**self.broker_settings.get("*", {}), **self.broker_settings.get(name, {}),
                **overrides.get("*", {}), **overrides.get(name, {})}

    def broker_config(self, name: str, overrides: Mapping[str, Mapping[str, object]] | None = None):
        """Broker `name`'s configuration as its template and settings give it (before a backend
        sets its store, ports and name server addresses): brokerName, brokerId, role, ..."""
        from rmqlab.config import load_broker_config

        return load_broker_config(os.path.join(CONF_DIR, self.brokers[name]),
                                  overrides=self.broker_overrides(name, overrides))


def controller_template(name: str) -> str:
    """conf/controller/<name>.conf; n3 and n4 (five controllers) are written like n0."""
    prefix, index = name.rsplit("-n", 1)
    return f"controller/{prefix}-n{index if int(index) < 3 else 0}.conf"


_FOUR = ("broker-a", "broker-a-s", "broker-b", "broker-b-s")
_CONTROLLER_BROKERS = {f"broker-n{i}": f"controller/broker-n{i}.conf" for i in range(3)}
# Slave acting master (RIP-32): two groups of three replicas (id 0, 1, 2), conf/acting-master/.
_ACTING_MASTER_BROKERS = {f"broker-{g}{m}": f"acting-master/broker-{g}{m}.properties"
                          for g in ("a", "b") for m in ("", "-s1", "-s2")}

MODES: dict[str, DeploymentMode] = {m.name: m for m in (
    DeploymentMode("single-master", {"broker-a": "broker.conf"}),
    DeploymentMode("2m-noslave", {n: f"2m-noslave/{n}.properties" for n in ("broker-a", "broker-b")}),
    DeploymentMode("2m-2s-async", {n: f"2m-2s-async/{n}.properties" for n in _FOUR}),
    DeploymentMode("2m-2s-sync", {n: f"2m-2s-sync/{n}.properties" for n in _FOUR}),
    # Controller mode ("主备自动切换模式部署"): broker set broker-a of three replicas, conf/controller/.
    DeploymentMode("controller-embedded", _CONTROLLER_BROKERS, controllers=EMBEDDED),
    DeploymentMode("controller-standalone", _CONTROLLER_BROKERS, controllers=STANDALONE),
    # DLedger CommitLog mode ("Dledger集群搭建", apache/rocketmq docs/cn/dledger/deploy_guide.md): one group
    # RaftNode00 of three (or five) replicas whose commitlog is a DLedger Raft log; the leader is
    # master. No HA service and no controller: DLedger elects and replicates (conf/dledger/).
    DeploymentMode("dledger", {f"broker-n{i}": f"dledger/broker-n{i}.conf" for i in range(3)}),
    DeploymentMode("dledger-5", {f"broker-n{i}": f"dledger-5/broker-n{i}.conf" for i in range(5)}),
    # Its name server rewrites routes (supportActingMaster) and notifies members of a group's
    # minimum id (notifyMinBrokerIdChanged); the brokers enable slave acting master. Three replicas
    # per group, so that a group keeps an acting master and a quorum after losing its master.
    DeploymentMode("acting-master", _ACTING_MASTER_BROKERS, namesrvs={NAMESRV: "acting-master/namesrv.conf"},
                   own_hosts=True),
)}


def dledger_modes() -> list[str]:
    """The modes whose brokers run DLedger CommitLog mode (their templates set enableDLegerCommitLog)."""
    return [name for name, m in MODES.items() if m.dleger_commit_log()]


def controller_modes() -> list[str]:
    return [name for name, m in MODES.items() if m.controllers]
