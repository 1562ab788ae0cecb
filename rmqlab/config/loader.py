"""Loading a component's configuration the way RocketMQ's start-up classes do.

RocketMQ reads one ``-c`` file into a Properties object and offers it to every configuration
object of the process (MixAll.properties2Object): mqbroker to BrokerConfig, NettyServerConfig,
NettyClientConfig and MessageStoreConfig; mqnamesrv to NamesrvConfig and the Netty configs (plus
ControllerConfig when enableControllerInNamesrv=true); mqcontroller to ControllerConfig and the
Netty configs. A key sets every object that has a field of that name. The command line (``-n``)
is applied after the file. The proxy reads rmq-proxy.json into ProxyConfig and then applies
``-n``. (RocketMQ's deployment guide "部署方式" and "主备自动切换模式部署"; ``BrokerStartup``,
``NamesrvStartup``, ``ControllerStartup``.)

rmqlab does the same and adds what RocketMQ leaves out: every key is accounted for (a typo is a
warning naming the closest key; a RocketMQ key rmqlab does not implement is a warning saying so),
every value is checked against its Java type, and the start-up checks RocketMQ performs (a slave
needs brokerId > 0, controller mode excludes the DLedger CommitLog, ...) run at load time.

Order of application: defaults, the file, Python ``overrides``, then ``namesrv_addr`` (the
command line's ``-n``, which in RocketMQ also comes after the file).
"""

from __future__ import annotations

import dataclasses
import difflib
import os
import re
import warnings
from dataclasses import dataclass, field
from typing import Any, ClassVar
from collections.abc import Mapping

from rmqlab.config.addresses import parse_addr, parse_dleger_peers, split_addr_list
from rmqlab.config.broker import MASTER_ID, BrokerConfig, BrokerRole, MessageStoreConfig
from rmqlab.config.controller import JRAFT_CONTROLLER, ControllerConfig
from rmqlab.config.errors import ConfigError, ConfigWarning
from rmqlab.config.fields import BadValue, config_fields, format_value, parse_python, parse_text, spec_of
from rmqlab.config.jsonconf import read_json_file
from rmqlab.config.namesrv import NamesrvConfig
from rmqlab.config.netty import CONTROLLER_LISTEN_PORT, NAMESRV_LISTEN_PORT, NettyClientConfig, NettyServerConfig
from rmqlab.config.properties import read_properties_file
from rmqlab.config.proxy import LOCAL_MODE, ProxyConfig
from rmqlab.config.rocketmq_keys import COMPONENT_CLASSES, RETIRED_KEYS, ROCKETMQ_KEYS

# Which process reads each RocketMQ class, for "this key belongs to another component" warnings.
_CLASS_OWNER = {
    "BrokerConfig": "broker",
    "MessageStoreConfig": "broker",
    "NamesrvConfig": "name server",
    "ControllerConfig": "controller",
    "JraftConfig": "controller",
    "ProxyConfig": "proxy",
}
_COMPONENT_TITLE = {"broker": "broker", "namesrv": "name server", "controller": "controller", "proxy": "proxy"}


# ---------------------------------------------------------------------------------------------
# Bundles: the configuration objects of one process, as its start-up class holds them
# ---------------------------------------------------------------------------------------------


@dataclass(kw_only=True)
class _Bundle:
    configFile: str | None = None
    # Every warning raised while loading, as the text also sent through the warnings module.
    warnings: list[str] = field(default_factory=list)
    # key -> where its value came from ("conf/x.properties:5", "overrides", "-n").
    origins: dict[str, str] = field(default_factory=dict)

    component: ClassVar[str] = ""

    def where(self, *keys: str) -> str:
        """Location to cite: where the first of ``keys`` that was set came from, else the file,
        else "<defaults>"."""
        for key in keys:
            if key in self.origins:
                return self.origins[key]
        return self.configFile or "<defaults>"


@dataclass(kw_only=True)
class BrokerStartupConfig(_Bundle):
    """What mqbroker's BrokerStartup builds from ``-c`` and ``-n`` (a ConfigContext)."""

    brokerConfig: BrokerConfig = field(default_factory=BrokerConfig)
    messageStoreConfig: MessageStoreConfig = field(default_factory=MessageStoreConfig)
    nettyServerConfig: NettyServerConfig = field(default_factory=NettyServerConfig)
    nettyClientConfig: NettyClientConfig = field(default_factory=NettyClientConfig)

    component: ClassVar[str] = "broker"

    def config_objects(self) -> list[tuple[str, Any]]:
        # The order BrokerStartup logs them in.
        return [
            ("BrokerConfig", self.brokerConfig),
            ("NettyServerConfig", self.nettyServerConfig),
            ("NettyClientConfig", self.nettyClientConfig),
            ("MessageStoreConfig", self.messageStoreConfig),
        ]

    @property
    def broker_addr(self) -> str:
        """brokerIP1:listenPort, the address registered with the name server."""
        return f"{self.brokerConfig.brokerIP1}:{self.nettyServerConfig.listenPort}"

    @property
    def ha_addr(self) -> str:
        """brokerIP2:haListenPort, where slaves connect for replication."""
        port = self.messageStoreConfig.get_ha_listen_port(self.nettyServerConfig.listenPort)
        return f"{self.brokerConfig.brokerIP2}:{port}"


@dataclass(kw_only=True)
class NamesrvStartupConfig(_Bundle):
    """What NamesrvStartup builds; controllerConfig is set only with enableControllerInNamesrv."""

    namesrvConfig: NamesrvConfig = field(default_factory=NamesrvConfig)
    nettyServerConfig: NettyServerConfig = field(default_factory=lambda: NettyServerConfig(listenPort=NAMESRV_LISTEN_PORT))
    nettyClientConfig: NettyClientConfig = field(default_factory=NettyClientConfig)
    controllerConfig: ControllerConfig | None = None

    component: ClassVar[str] = "namesrv"

    def config_objects(self) -> list[tuple[str, Any]]:
        objects: list[tuple[str, Any]] = [
            ("NamesrvConfig", self.namesrvConfig),
            ("NettyServerConfig", self.nettyServerConfig),
            ("NettyClientConfig", self.nettyClientConfig),
        ]
        if self.controllerConfig is not None:
            objects.append(("ControllerConfig", self.controllerConfig))
        return objects


@dataclass(kw_only=True)
class ControllerStartupConfig(_Bundle):
    """What mqcontroller's ControllerStartup builds."""

    controllerConfig: ControllerConfig = field(default_factory=ControllerConfig)
    nettyServerConfig: NettyServerConfig = field(default_factory=lambda: NettyServerConfig(listenPort=CONTROLLER_LISTEN_PORT))
    nettyClientConfig: NettyClientConfig = field(default_factory=NettyClientConfig)

    component: ClassVar[str] = "controller"

    def config_objects(self) -> list[tuple[str, Any]]:
        return [
            ("ControllerConfig", self.controllerConfig),
            ("NettyServerConfig", self.nettyServerConfig),
            ("NettyClientConfig", self.nettyClientConfig),
        ]


@dataclass(kw_only=True)
class ProxyStartupConfig(_Bundle):
    """What mqproxy's Configuration builds from rmq-proxy.json and ``-n``."""

    proxyConfig: ProxyConfig = field(default_factory=ProxyConfig)

    component: ClassVar[str] = "proxy"

    def config_objects(self) -> list[tuple[str, Any]]:
        return [("ProxyConfig", self.proxyConfig)]


# ---------------------------------------------------------------------------------------------
# Applying entries
# ---------------------------------------------------------------------------------------------


class _Applier:
    """Feeds (key, value) entries to a bundle's objects, accounting for every key."""

    def __init__(self, bundle: _Bundle, targets: list[Any]) -> None:
        self.bundle = bundle
        self.component = bundle.component
        self.fields: dict[str, list[tuple[Any, dataclasses.Field]]] = {}
        for obj in targets:
            for f in config_fields(obj):
                self.fields.setdefault(f.name, []).append((obj, f))
        own_classes = COMPONENT_CLASSES[self.component]
        self.rocketmq_keys: dict[str, str] = {}
        for cls in own_classes:
            for key in ROCKETMQ_KEYS[cls]:
                self.rocketmq_keys.setdefault(key, cls)
        self.foreign_keys: dict[str, str] = {}
        for cls, keys in ROCKETMQ_KEYS.items():
            if cls not in own_classes:
                for key in keys:
                    self.foreign_keys.setdefault(key, cls)
        self.suggestion_pool = sorted(set(self.fields) | set(self.rocketmq_keys))
        self.seen: dict[str, tuple[str, int]] = {}  # key -> (raw value text, line) from the file

    def _suggest(self, key: str) -> str | None:
        for candidate in self.suggestion_pool:
            if candidate.lower() == key.lower():
                return candidate
        close = difflib.get_close_matches(key, self.suggestion_pool, n=1, cutoff=0.6)
        return close[0] if close else None

    def _not_applied(self, key: str, loc: str) -> str:
        """Why ``key`` sets nothing, as a sentence starting with the location."""
        if key in RETIRED_KEYS.get(self.component, {}):
            return f"{loc}: '{key}' {RETIRED_KEYS[self.component][key]}; ignored"
        if key in self.rocketmq_keys:
            return f"{loc}: '{key}' is a RocketMQ {self.rocketmq_keys[key]} setting that rmqlab does not implement; ignored"
        if key in self.foreign_keys:
            cls = self.foreign_keys[key]
            owner = _CLASS_OWNER.get(cls, "another component")
            return (f"{loc}: '{key}' is a {cls} setting (read by the {owner}), which the "
                    f"{_COMPONENT_TITLE[self.component]} does not read; ignored")
        suggestion = self._suggest(key)
        if suggestion is not None:
            return f"{loc}: unknown key '{key}' — did you mean {suggestion}?"
        close = difflib.get_close_matches(key, sorted(self.foreign_keys), n=1, cutoff=0.8)
        if close:
            cls = self.foreign_keys[close[0]]
            return (f"{loc}: unknown key '{key}' — did you mean {close[0]}? (a {cls} setting, read by the "
                    f"{_CLASS_OWNER.get(cls, 'another component')}, not by the {_COMPONENT_TITLE[self.component]})")
        return f"{loc}: unknown key '{key}'"

    def _set(self, key: str, value: Any, loc: str, shown: str, python: bool) -> None:
        for obj, f in self.fields[key]:
            spec = spec_of(f)
            try:
                parsed = parse_python(spec, value) if python else parse_text(spec, value)
            except BadValue as e:
                raise ConfigError(f"{loc}: {key} = {shown}: expected {e.expected}") from None
            setattr(obj, key, parsed)
        self.bundle.origins[key] = loc

    def apply_file_entry(self, key: str, value: Any, line: int, source: str) -> None:
        loc = f"{source}:{line}"
        if isinstance(value, (dict, list)):
            if key in self.fields:
                raise ConfigError(f"{loc}: {key}: expected a single value, not a JSON {'object' if isinstance(value, dict) else 'array'}")
        elif not isinstance(value, str):
            # A JSON scalar: fastjson converts numbers and booleans to the field's type, so
            # rmqlab reads them as their text (8081 -> "8081", true -> "true", null -> "").
            value = "" if value is None else format_value(value)
        text = value if isinstance(value, str) else repr(value)
        previous = self.seen.get(key)
        if previous is not None and previous[0] != text:
            self.bundle.warnings.append(
                f"{loc}: '{key}' was already set on line {previous[1]} to '{previous[0]}'; "
                f"the last one wins, as in RocketMQ")
        self.seen[key] = (text, line)
        if key not in self.fields:
            self.bundle.warnings.append(self._not_applied(key, loc))
            return
        self._set(key, value, loc, f"'{text}'", python=False)

    def apply_overrides(self, overrides: Mapping[str, Any]) -> None:
        for key, value in overrides.items():
            if key not in self.fields:
                # A Python caller gets an error, not a warning: nobody reads a notebook's warnings.
                raise ConfigError(self._not_applied(key, "overrides").removesuffix("; ignored"))
            self._set(key, value, "overrides", repr(value), python=True)

    def apply_command_line(self, key: str, value: str, flag: str) -> None:
        self._set(key, value.strip(), flag, f"'{value}'", python=False)


def why_not_settable(bundle: StartupConfig, key: str) -> str:
    """Why ``key`` sets nothing in ``bundle``'s objects, in the words a file's loader uses (a typo and
    its closest key, a RocketMQ setting rmqlab does not implement, another component's key); for a
    key given at runtime (``updateBrokerConfig``)."""
    applier = _Applier(bundle, [obj for _, obj in bundle.config_objects()])
    return applier._not_applied(key, "").removeprefix(": ").removesuffix("; ignored")


def _apply_file(applier: _Applier, path: str | os.PathLike | None, json_file: bool = False) -> str | None:
    if path is None:
        return None
    source = os.fspath(path)
    entries = read_json_file(source) if json_file else read_properties_file(source)
    for entry in entries:
        applier.apply_file_entry(entry.key, entry.value, entry.line, source)
    return source


def _finish(bundle: _Bundle) -> None:
    # stacklevel 3: the warning points at the code that called load_*_config.
    for message in bundle.warnings:
        warnings.warn(message, ConfigWarning, stacklevel=3)


# ---------------------------------------------------------------------------------------------
# Cross-field checks RocketMQ performs at start-up
# ---------------------------------------------------------------------------------------------


def _check_broker(b: BrokerStartupConfig) -> None:
    bc, msc, nsc = b.brokerConfig, b.messageStoreConfig, b.nettyServerConfig

    if msc.enableDLegerCommitLog:
        if bc.enableControllerMode:
            # BrokerStartup: "The config enableControllerMode and enableDLegerCommitLog cannot
            # both be true." (exit -4)
            raise ConfigError(f"{b.where('enableDLegerCommitLog')}: enableControllerMode and enableDLegerCommitLog "
                              f"cannot both be true (RocketMQ refuses this combination too)")
        _check_dledger_commit_log(b)
    elif not bc.enableControllerMode:
        # BrokerStartup: outside controller mode the role decides the id.
        if msc.brokerRole in (BrokerRole.ASYNC_MASTER, BrokerRole.SYNC_MASTER):
            if bc.brokerId != MASTER_ID:
                b.warnings.append(
                    f"{b.where('brokerId')}: brokerId = {bc.brokerId} ignored: a master "
                    f"(brokerRole = {msc.brokerRole.name}) always has brokerId 0 outside controller mode, "
                    f"as in RocketMQ; using 0")
                bc.brokerId = MASTER_ID
        elif bc.brokerId <= MASTER_ID:
            raise ConfigError(f"{b.where('brokerId', 'brokerRole')}: brokerId = {bc.brokerId}: a SLAVE needs brokerId > 0 "
                              f"(RocketMQ: \"Slave's brokerId must be > 0\"); the master of the group has 0")
    else:
        # Controller mode: the controller assigns brokerId and role (RIP-44); it must be reachable.
        if not bc.controllerAddr.strip():
            raise ConfigError(f"{b.where('enableControllerMode')}: enableControllerMode = true needs controllerAddr, "
                              f"e.g. controllerAddr=127.0.0.1:9877;127.0.0.1:9878;127.0.0.1:9879")
        if bc.fetchControllerAddrByDnsLookup and len(split_addr_list(bc.controllerAddr)) != 1:
            raise ConfigError(f"{b.where('controllerAddr')}: controllerAddr = '{bc.controllerAddr}': with "
                              f"fetchControllerAddrByDnsLookup = true it must be a single domain:port")

    # MessageStoreConfig.setHaListenPort turns a negative port into 0; BrokerStartup then uses
    # listenPort + 1 for 0.
    if msc.haListenPort <= 0:
        if nsc.listenPort == 0:
            raise ConfigError(f"{b.where('listenPort')}: listenPort = 0 (an ephemeral port) needs an explicit "
                              f"haListenPort > 0; RocketMQ would derive listenPort + 1 = 1")
        msc.haListenPort = nsc.listenPort + 1
    if msc.haListenPort == nsc.listenPort:
        raise ConfigError(f"{b.where('haListenPort')}: haListenPort = {msc.haListenPort} is the same port as "
                          f"listenPort; the HA server needs its own port")


_DLEDGER_PEERS_EXAMPLE = "n0-127.0.0.1:40911;n1-127.0.0.1:40912;n2-127.0.0.1:40913"


def _check_dledger_commit_log(b: BrokerStartupConfig) -> None:
    """DLedger CommitLog mode (``BrokerStartup``, ``DLedgerCommitLog``'s constructor): the group, the
    peers and this member's id are required (RocketMQ fails later, on a null or unparsable one);
    the id is ``n<digits>``, because RocketMQ derives the slave brokerId from the number
    (``Integer.parseInt(selfId.substring(1)) + 1``), and one of the peers. brokerId and brokerRole
    come from the Raft role (DLedgerRoleChangeHandler): BrokerStartup sets brokerId = -1."""
    bc, msc = b.brokerConfig, b.messageStoreConfig
    for key, example in (("dLegerGroup", "RaftNode00"), ("dLegerPeers", _DLEDGER_PEERS_EXAMPLE),
                         ("dLegerSelfId", "n0")):
        if not (getattr(msc, key) or "").strip():
            raise ConfigError(f"{b.where(key, 'enableDLegerCommitLog')}: enableDLegerCommitLog = true needs {key}, "
                              f"e.g. {key}={example}")
    peers = parse_dleger_peers(msc.dLegerPeers)  # syntax already checked by the field
    self_id = msc.dLegerSelfId
    if not re.fullmatch(r"n[0-9]+", self_id):
        raise ConfigError(f"{b.where('dLegerSelfId')}: dLegerSelfId = '{self_id}': expected n<digits> (n0, n1, ...); "
                          f"RocketMQ parses the number after the 'n' to derive the broker id of a slave")
    if self_id not in peers:
        raise ConfigError(f"{b.where('dLegerSelfId', 'dLegerPeers')}: dLegerSelfId = '{self_id}' is not one of the "
                          f"dLegerPeers ids {sorted(peers)}")
    for peer_id in peers:
        if not re.fullmatch(r"n[0-9]+", peer_id):
            raise ConfigError(f"{b.where('dLegerPeers')}: dLegerPeers id '{peer_id}': expected n<digits>, as "
                              f"dLegerSelfId (each member of the group is some broker's dLegerSelfId)")
    if msc.preferredLeaderId:
        for peer_id in msc.preferredLeaderId.split(";"):
            if peer_id not in peers:
                # DLedger logs "preferredLeaderId = x is not a peer member" at every check; say it once here.
                b.warnings.append(f"{b.where('preferredLeaderId')}: preferredLeaderId '{peer_id}' is not one of the "
                                  f"dLegerPeers ids {sorted(peers)}; it will never be chosen")
    for key in ("brokerId", "brokerRole"):
        if key in b.origins:
            b.warnings.append(f"{b.where(key)}: {key} ignored with enableDLegerCommitLog = true: the broker's "
                              f"role and id follow its DLedger role (master 0 when leader, else "
                              f"{self_id} number + 1), as in RocketMQ")
    bc.brokerId = -1  # BrokerStartup; the first role change sets it


def _check_controller(c: ControllerConfig, b: _Bundle) -> None:
    if c.controllerType == JRAFT_CONTROLLER:
        raise ConfigError(f"{b.where('controllerType')}: controllerType = 'jRaft': rmqlab implements the DLedger "
                          f"controller configuration (controllerDLegerGroup/Peers/SelfId) only")
    example = "n0-127.0.0.1:9877;n1-127.0.0.1:9878;n2-127.0.0.1:9879"
    if not c.controllerDLegerGroup:
        raise ConfigError(f"{b.where('controllerDLegerGroup')}: controllerDLegerGroup is required "
                          f"(the Raft group name, the same on every controller, e.g. group1)")
    if not c.controllerDLegerPeers:
        raise ConfigError(f"{b.where('controllerDLegerPeers')}: controllerDLegerPeers is required, e.g. {example}")
    peers = parse_dleger_peers(c.controllerDLegerPeers)  # syntax already checked by the field
    if not c.controllerDLegerSelfId:
        raise ConfigError(f"{b.where('controllerDLegerSelfId')}: controllerDLegerSelfId is required "
                          f"(this node's id, one of {', '.join(peers)})")
    if c.controllerDLegerSelfId not in peers:
        raise ConfigError(f"{b.where('controllerDLegerSelfId')}: controllerDLegerSelfId = '{c.controllerDLegerSelfId}' "
                          f"must be one of the peers {', '.join(peers)} (controllerDLegerPeers)")


def _check_port_clash(b: _Bundle, nsc: NettyServerConfig, c: ControllerConfig) -> None:
    # An embedded controller serves on its peer address beside the name server's listenPort.
    _, port = parse_addr(c.get_self_addr())
    if port == nsc.listenPort:
        raise ConfigError(f"{b.where('controllerDLegerPeers')}: this node's peer address "
                          f"{c.get_self_addr()} uses the name server's listenPort {nsc.listenPort}")


# ---------------------------------------------------------------------------------------------
# Public API
# ---------------------------------------------------------------------------------------------


def load_broker_config(path: str | os.PathLike | None = None, *, namesrv_addr: str | None = None,
                       overrides: Mapping[str, Any] | None = None) -> BrokerStartupConfig:
    """Load a broker's configuration like ``mqbroker -c path -n namesrv_addr``.

    Returns a BrokerStartupConfig with .brokerConfig, .messageStoreConfig, .nettyServerConfig,
    .nettyClientConfig and .warnings. Raises ConfigError for a missing file, a malformed value
    or a combination RocketMQ refuses at start-up."""
    bundle = BrokerStartupConfig()
    # BrokerStartup sets listenPort 10911 and haListenPort 0 ("listenPort + 1") before reading
    # the file, so a broker that sets only listenPort gets listenPort + 1 for HA. (At commit
    # 8fc57f1 these two assignments were moved after the file is read, which makes mqbroker ignore
    # listenPort/haListenPort from the file; rmqlab keeps the documented, long-standing order.)
    bundle.nettyServerConfig.listenPort = 10911
    bundle.messageStoreConfig.haListenPort = 0
    applier = _Applier(bundle, [bundle.brokerConfig, bundle.nettyServerConfig, bundle.nettyClientConfig,
                                bundle.messageStoreConfig])
    bundle.configFile = _apply_file(applier, path)
    if overrides:
        applier.apply_overrides(overrides)
    if namesrv_addr is not None:
        applier.apply_command_line("namesrvAddr", namesrv_addr, "-n")
    _check_broker(bundle)
    _finish(bundle)
    return bundle


def load_namesrv_config(path: str | os.PathLike | None = None, *,
                        overrides: Mapping[str, Any] | None = None) -> NamesrvStartupConfig:
    """Load a name server's configuration like ``mqnamesrv -c path``.

    With enableControllerInNamesrv=true the same file configures the embedded controller
    (.controllerConfig); otherwise .controllerConfig is None and controller keys only warn."""
    bundle = NamesrvStartupConfig()
    controller = ControllerConfig()
    applier = _Applier(bundle, [bundle.namesrvConfig, bundle.nettyServerConfig, bundle.nettyClientConfig, controller])
    bundle.configFile = _apply_file(applier, path)
    if bundle.configFile is not None:
        bundle.namesrvConfig.configStorePath = os.path.abspath(bundle.configFile)  # as NamesrvStartup does
    if overrides:
        applier.apply_overrides(overrides)
    namesrv_keys = {f.name for obj in (bundle.namesrvConfig, bundle.nettyServerConfig, bundle.nettyClientConfig)
                    for f in config_fields(obj)}
    if bundle.namesrvConfig.enableControllerInNamesrv:
        bundle.controllerConfig = controller
        _check_controller(controller, bundle)
        _check_port_clash(bundle, bundle.nettyServerConfig, controller)
    else:
        for key, loc in bundle.origins.items():
            if key not in namesrv_keys:
                bundle.warnings.append(f"{loc}: '{key}' is a ControllerConfig setting; it has no effect unless "
                                       f"enableControllerInNamesrv = true")
    _finish(bundle)
    return bundle


def load_controller_config(path: str | os.PathLike | None = None, *,
                           overrides: Mapping[str, Any] | None = None) -> ControllerStartupConfig:
    """Load a standalone controller's configuration like ``mqcontroller -c path``."""
    bundle = ControllerStartupConfig()
    applier = _Applier(bundle, [bundle.controllerConfig, bundle.nettyServerConfig, bundle.nettyClientConfig])
    bundle.configFile = _apply_file(applier, path)
    if overrides:
        applier.apply_overrides(overrides)
    _check_controller(bundle.controllerConfig, bundle)
    _finish(bundle)
    return bundle


def load_proxy_config(path: str | os.PathLike | None = None, *, namesrv_addr: str | None = None,
                      overrides: Mapping[str, Any] | None = None, local: bool = False) -> ProxyStartupConfig:
    """Load a proxy's configuration like ``mqproxy -pc rmq-proxy.json -n namesrv_addr``, or with
    `local` for the Proxy of ``mqbroker --enable-proxy`` (proxyMode becomes LOCAL).

    Without a file the defaults are used (RocketMQ would look for
    $ROCKETMQ_HOME/conf/rmq-proxy.json)."""
    bundle = ProxyStartupConfig()
    applier = _Applier(bundle, [bundle.proxyConfig])
    bundle.configFile = _apply_file(applier, path, json_file=True)
    if overrides:
        applier.apply_overrides(overrides)
    if namesrv_addr is not None and namesrv_addr.strip():
        # ProxyStartup applies -n only when it is not blank.
        applier.apply_command_line("namesrvAddr", namesrv_addr, "-n")
    if local:
        bundle.proxyConfig.proxyMode = LOCAL_MODE
    elif bundle.proxyConfig.proxyMode.upper() == LOCAL_MODE:
        raise ConfigError(f"{bundle.where('proxyMode')}: proxyMode = '{bundle.proxyConfig.proxyMode}': `rmqlab proxy` "
                          f"runs the proxy in Cluster mode only; Local mode embeds it in the broker process: "
                          f"rmqlab broker ... --enable-proxy")
    bundle.proxyConfig.init_data()
    _finish(bundle)
    return bundle


StartupConfig = BrokerStartupConfig | NamesrvStartupConfig | ControllerStartupConfig | ProxyStartupConfig


def format_config(bundle: StartupConfig) -> str:
    """Every effective ``key=value``, grouped under a ``# ClassName`` line per configuration
    object, like RocketMQ's ``-p`` (MixAll.printObjectProperties). Derived values (the commitlog
    path, the HA port, ...) are printed as the component will use them, so the output is itself a
    valid configuration file."""
    lines: list[str] = []
    for name, obj in bundle.config_objects():
        if lines:
            lines.append("")
        lines.append(f"# {name}")
        effective = obj.effective_values() if hasattr(obj, "effective_values") else {}
        for f in config_fields(obj):
            lines.append(f"{f.name}={format_value(effective.get(f.name, getattr(obj, f.name)))}")
    return "\n".join(lines) + "\n"
