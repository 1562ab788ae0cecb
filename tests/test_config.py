"""Tests for rmqlab.config: RocketMQ's configuration keys, defaults, files and start-up checks.

Defaults are RocketMQ's at commit 8fc57f1 (BrokerConfig, MessageStoreConfig, ControllerConfig,
NamesrvConfig); deployment templates follow RocketMQ's deployment guide ("部署方式"). Every test works
on files it writes under tmp_path or on conf/, and never opens a socket or starts a server.
"""

from __future__ import annotations

import os
import re
import warnings
from pathlib import Path

import pytest

from rmqlab.cli import main
from rmqlab.config import (
    BrokerConfig,
    BrokerRole,
    ConfigError,
    ControllerStartupConfig,
    ConfigWarning,
    ControllerConfig,
    FlushDiskType,
    MessageStoreConfig,
    NamesrvConfig,
    NettyClientConfig,
    NettyServerConfig,
    ProxyConfig,
    format_config,
    load_broker_config,
    load_controller_config,
    load_namesrv_config,
    load_proxy_config,
    parse_properties,
)
from rmqlab.config.fields import config_fields
from rmqlab.config.jsonconf import parse_json_object
from rmqlab.config.rocketmq_keys import RMQLAB_KEYS, ROCKETMQ_KEYS

REPO = Path(__file__).resolve().parents[1]
CONF = REPO / "conf"

BROKER_TEMPLATES = sorted([CONF / "broker.conf", *CONF.glob("2m-*/*.properties"), *CONF.glob("controller/broker-*.conf"),
                           *CONF.glob("dledger*/broker-*.conf")])
NAMESRV_TEMPLATES = sorted(CONF.glob("controller/namesrv-*.conf"))
CONTROLLER_TEMPLATES = sorted(CONF.glob("controller/controller-*.conf"))


def write(directory: Path, name: str, text: str) -> str:
    path = directory / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return str(path)


def load_quietly(loader, *args, **kwargs):
    """Load while recording ConfigWarnings; returns (bundle, recorded warning texts)."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        bundle = loader(*args, **kwargs)
    return bundle, [str(w.message) for w in caught if issubclass(w.category, ConfigWarning)]


# --------------------------------------------------------------------------- templates


def test_template_set_is_complete():
    names = {str(p.relative_to(CONF)) for p in CONF.rglob("*") if p.is_file()}
    expected = {
        "README.md", "broker.conf", "rmq-proxy.json",
        "2m-noslave/broker-a.properties", "2m-noslave/broker-b.properties",
        *(f"{mode}/broker-{b}.properties" for mode in ("2m-2s-async", "2m-2s-sync") for b in ("a", "b", "a-s", "b-s")),
        *(f"controller/{kind}-n{i}.conf" for kind in ("namesrv", "controller", "broker") for i in range(3)),
        "acting-master/namesrv.conf",
        *(f"acting-master/broker-{g}{m}.properties" for g in "ab" for m in ("", "-s1", "-s2")),
        *(f"dledger/broker-n{i}.conf" for i in range(3)),
        *(f"dledger-5/broker-n{i}.conf" for i in range(5)),
        *(f"chaos/{name}.toml" for name in ("seed003", "seed003-fast", "smoke")),  # campaigns, not server templates
    }
    assert names == expected


@pytest.mark.parametrize("path", BROKER_TEMPLATES, ids=lambda p: str(p.relative_to(CONF)))
def test_broker_templates_load_without_warnings(path):
    bundle, caught = load_quietly(load_broker_config, path)
    assert caught == [] and bundle.warnings == []
    text = path.read_text(encoding="utf-8")
    header = [line for line in text.splitlines()[:6] if line.startswith("#")]
    # The header names its deployment mode as RocketMQ's documentation titles it ("...模式...").
    assert text.startswith("#") and any(re.search(r'"[^"]*模式[^"]*"', line) for line in header)
    assert bundle.brokerConfig.namesrvAddr == "127.0.0.1:9876"
    assert bundle.nettyServerConfig.bindAddress == "127.0.0.1"
    assert bundle.messageStoreConfig.haListenPort == bundle.nettyServerConfig.listenPort + 1
    assert bundle.messageStoreConfig.storePathRootDir == os.path.abspath(f"./store/{_store_suffix(path)}")


def _store_suffix(path: Path) -> str:
    rel = path.relative_to(CONF)
    if rel.parts == ("broker.conf",):
        return "single/broker-a"
    return f"{rel.parts[0]}/{rel.stem}"


@pytest.mark.parametrize("path", NAMESRV_TEMPLATES + CONTROLLER_TEMPLATES, ids=lambda p: str(p.relative_to(CONF)))
def test_controller_templates_load_without_warnings(path):
    loader = load_namesrv_config if path.name.startswith("namesrv") else load_controller_config
    bundle, caught = load_quietly(loader, path)
    assert caught == [] and bundle.warnings == []
    assert path.read_text(encoding="utf-8").startswith("#")
    controller = bundle.controllerConfig
    node = path.stem.split("-")[1]
    assert controller.controllerDLegerGroup == "group1"
    assert controller.get_peers() == {"n0": "127.0.0.1:9877", "n1": "127.0.0.1:9878", "n2": "127.0.0.1:9879"}
    assert controller.controllerDLegerSelfId == node
    assert controller.get_self_addr() == f"127.0.0.1:{9877 + int(node[1])}"
    assert controller.get_controller_store_path() == os.path.abspath(f"./store/controller/{path.stem}")
    if path.name.startswith("namesrv"):
        assert bundle.namesrvConfig.enableControllerInNamesrv
        assert bundle.nettyServerConfig.listenPort == 9876 + 10 * int(node[1])
        assert bundle.namesrvConfig.configStorePath == str(path)


def test_proxy_template_loads_without_warnings():
    bundle, caught = load_quietly(load_proxy_config, CONF / "rmq-proxy.json")
    assert caught == [] and bundle.warnings == []
    p = bundle.proxyConfig
    assert (p.rocketMQClusterName, p.namesrvAddr, p.grpcServerPort, p.remotingListenPort) == \
        ("DefaultCluster", "127.0.0.1:9876", 8081, 8080)
    assert p.is_cluster_mode() and p.localServeAddr == "127.0.0.1"


@pytest.mark.parametrize("mode", ["2m-noslave", "2m-2s-async", "2m-2s-sync", "controller"])
def test_brokers_of_one_deployment_never_share_a_port_or_store(mode):
    bundles = [load_broker_config(p) for p in BROKER_TEMPLATES if p.parent.name == mode]
    ports = [port for b in bundles for port in (b.nettyServerConfig.listenPort, b.messageStoreConfig.haListenPort)]
    stores = [b.messageStoreConfig.storePathRootDir for b in bundles]
    assert len(set(ports)) == len(ports) and len(set(stores)) == len(stores)


@pytest.mark.parametrize("mode, master_role", [("2m-2s-async", BrokerRole.ASYNC_MASTER), ("2m-2s-sync", BrokerRole.SYNC_MASTER)])
def test_master_slave_templates_pair_by_broker_name(mode, master_role):
    for group in ("a", "b"):
        master = load_broker_config(CONF / mode / f"broker-{group}.properties")
        slave = load_broker_config(CONF / mode / f"broker-{group}-s.properties")
        assert master.brokerConfig.brokerName == slave.brokerConfig.brokerName == f"broker-{group}"
        assert (master.brokerConfig.brokerId, master.messageStoreConfig.brokerRole) == (0, master_role)
        assert (slave.brokerConfig.brokerId, slave.messageStoreConfig.brokerRole) == (1, BrokerRole.SLAVE)


def test_controller_mode_broker_templates():
    for i in range(3):
        b = load_broker_config(CONF / "controller" / f"broker-n{i}.conf")
        assert b.brokerConfig.enableControllerMode
        assert b.brokerConfig.get_controller_addr_list() == ["127.0.0.1:9877", "127.0.0.1:9878", "127.0.0.1:9879"]
        assert b.brokerConfig.brokerName == "broker-a"
        # Controller mode skips the master-id rule: the controller assigns ids.
        assert b.brokerConfig.brokerId == -1


# --------------------------------------------------------------------------- defaults


def test_broker_defaults_match_rocketmq():
    b = load_broker_config()
    bc, msc, nsc = b.brokerConfig, b.messageStoreConfig, b.nettyServerConfig
    assert (bc.brokerClusterName, bc.brokerId, bc.brokerPermission, bc.defaultTopicQueueNums) == ("DefaultCluster", 0, 6, 8)
    assert (bc.registerNameServerPeriod, bc.registerBrokerTimeoutMills, bc.forceRegister) == (30000, 24000, True)
    assert (bc.enableControllerMode, bc.controllerAddr, bc.fetchControllerAddrByDnsLookup) == (False, "", False)
    assert (bc.syncBrokerMetadataPeriod, bc.checkSyncStateSetPeriod, bc.syncControllerMetadataPeriod) == (5000, 5000, 10000)
    assert (bc.controllerHeartBeatTimeoutMills, bc.brokerElectionPriority) == (10000, 2147483647)
    assert (bc.enableSlaveActingMaster, bc.enableRemoteEscape, bc.skipPreOnline, bc.lockInStrictMode) == (False,) * 4
    assert (bc.brokerHeartbeatInterval, bc.brokerNotActiveTimeoutMillis, bc.sendHeartbeatTimeoutMillis) == (1000, 10000, 1000)
    assert (bc.compatibleWithOldNameSrv, bc.syncBrokerMemberGroupPeriod) == (True, 1000)
    assert (bc.consumerOffsetUpdateVersionStep, bc.delayOffsetUpdateVersionStep) == (500, 200)
    assert (bc.autoCreateTopicEnable, bc.slaveReadEnable) == (True, False)
    assert nsc.listenPort == 10911 and msc.haListenPort == 10912  # listenPort + 1
    assert msc.storePathRootDir == os.path.join(os.path.expanduser("~"), "store")
    assert (msc.mappedFileSizeCommitLog, msc.mappedFileSizeConsumeQueue) == (1073741824, 6000000)
    assert (msc.brokerRole, msc.flushDiskType) == (BrokerRole.ASYNC_MASTER, FlushDiskType.ASYNC_FLUSH)
    assert (msc.haTransferBatchSize, msc.haMaxGapNotInSync) == (32768, 268435456)
    assert (msc.haSendHeartbeatInterval, msc.haHousekeepingInterval) == (5000, 20000)
    assert (msc.slaveTimeout, msc.syncFlushTimeout, msc.putMessageTimeout) == (3000, 5000, 8000)
    assert (msc.maxMessageSize, msc.flushIntervalCommitLog, msc.flushCommitLogLeastPages) == (4194304, 500, 4)
    assert (msc.flushCommitLogThoroughInterval, msc.flushIntervalConsumeQueue) == (10000, 1000)
    assert (msc.deleteWhen, msc.fileReservedTime, msc.accessMessageInMemoryMaxRatio) == ("04", 72, 40)
    assert (msc.totalReplicas, msc.inSyncReplicas, msc.minInSyncReplicas) == (1, 1, 1)
    assert (msc.allAckInSyncStateSet, msc.enableAutoInSyncReplicas, msc.asyncLearner, msc.syncFromLastFile) == (False,) * 4
    assert (msc.haMaxTimeSlaveNotCatchup, msc.enableDLegerCommitLog, msc.readUnCommitted) == (15000, False, False)
    assert msc.messageDelayLevel == "1s 5s 10s 30s 1m 2m 3m 4m 5m 6m 7m 8m 9m 10m 20m 30m 1h 2h"


def test_other_component_defaults_match_rocketmq():
    n = load_namesrv_config()
    assert n.nettyServerConfig.listenPort == 9876 and n.controllerConfig is None
    assert (n.namesrvConfig.enableControllerInNamesrv, n.namesrvConfig.supportActingMaster) == (False, False)
    assert (n.namesrvConfig.scanNotActiveBrokerInterval, n.namesrvConfig.notifyMinBrokerIdChanged) == (5000, False)
    c = ControllerConfig()
    assert (c.controllerType, c.scanNotActiveBrokerInterval, c.scanInactiveMasterInterval) == ("DLedger", 5000, 5000)
    assert (c.enableElectUncleanMaster, c.notifyBrokerRoleChanged, c.electMasterMaxRetryCount) == (False, True, 3)
    assert (c.mappedFileSize, c.processReadEvent, c.controllerThreadPoolNums) == (1073741824, False, 16)
    assert c.get_controller_store_path() == os.path.join(os.path.expanduser("~"), "DLedgerController")
    assert ControllerStartupConfig().nettyServerConfig.listenPort == 19876
    p = ProxyConfig()
    assert (p.rocketMQClusterName, p.proxyMode, p.grpcServerPort, p.remotingListenPort) == ("DefaultCluster", "CLUSTER", 8081, 8080)
    assert NettyClientConfig().connectTimeoutMillis == 3000


def test_every_field_is_a_rocketmq_key_of_its_class_or_a_labelled_rmqlab_option():
    for cls in (BrokerConfig, MessageStoreConfig, NettyServerConfig, NettyClientConfig, NamesrvConfig,
                ControllerConfig, ProxyConfig):
        names = {f.name for f in config_fields(cls)}
        ours = RMQLAB_KEYS.get(cls.__name__, frozenset())
        assert names <= ROCKETMQ_KEYS[cls.__name__] | ours, names - ROCKETMQ_KEYS[cls.__name__] - ours
    # rmqlab's own options say so in their name, and none shadows a RocketMQ key.
    for cls_name, ours in RMQLAB_KEYS.items():
        assert all(k.startswith("rmqlab") for k in ours), ours
        assert not ours & ROCKETMQ_KEYS[cls_name]


# --------------------------------------------------------------------------- derived values


def test_derived_store_paths(tmp_path):
    path = write(tmp_path, "b.properties", f"storePathRootDir={tmp_path}/s\n")
    msc = load_broker_config(path).messageStoreConfig
    root = f"{tmp_path}/s"
    assert msc.get_store_path_commit_log() == f"{root}/commitlog"
    assert msc.get_store_path_consume_queue() == f"{root}/consumequeue"
    assert msc.get_store_checkpoint() == f"{root}/checkpoint"
    assert msc.get_abort_file() == f"{root}/abort"
    assert msc.get_store_path_epoch_file() == f"{root}/epochFileCheckpoint"
    assert msc.get_store_path_broker_identity() == f"{root}/brokerIdentity"
    assert msc.get_config_dir() == f"{root}/config"
    assert msc.get_topic_config_path() == f"{root}/config/topics.json"
    # Explicit values win; an empty value means "derived", like RocketMQ's null.
    path = write(tmp_path, "c.properties", f"storePathRootDir={tmp_path}/s\nstorePathCommitLog={tmp_path}/cl\nstorePathEpochFile=\n")
    msc = load_broker_config(path).messageStoreConfig
    assert msc.get_store_path_commit_log() == f"{tmp_path}/cl"
    assert msc.get_store_path_epoch_file() == f"{root}/epochFileCheckpoint"


def test_relative_and_home_paths_resolve_at_load_time(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    write(tmp_path, "b.properties", "storePathRootDir=./store/x\nstorePathCommitLog=~/cl\n")
    msc = load_broker_config("b.properties").messageStoreConfig
    monkeypatch.chdir(REPO)  # a later chdir does not move the store
    assert msc.storePathRootDir == str(tmp_path / "store" / "x")
    assert msc.storePathCommitLog == os.path.join(os.path.expanduser("~"), "cl")


def test_ha_listen_port_rules(tmp_path):
    # Unset: listenPort + 1 (BrokerStartup); explicit: kept; negative: 0, then listenPort + 1.
    assert load_broker_config(write(tmp_path, "a", "listenPort=10921\n")).messageStoreConfig.haListenPort == 10922
    assert load_broker_config(write(tmp_path, "b", "listenPort=10921\nhaListenPort=20000\n")).messageStoreConfig.haListenPort == 20000
    assert load_broker_config(write(tmp_path, "c", "listenPort=10921\nhaListenPort=-5\n")).messageStoreConfig.haListenPort == 10922
    assert MessageStoreConfig(haListenPort=0).get_ha_listen_port(30911) == 30912
    with pytest.raises(ConfigError, match=r"haListenPort = 10921 is the same port as listenPort"):
        load_broker_config(write(tmp_path, "d", "listenPort=10921\nhaListenPort=10921\n"))
    with pytest.raises(ConfigError, match=r"listenPort = 0 .* needs an explicit haListenPort"):
        load_broker_config(write(tmp_path, "e", "listenPort=0\n"))


def test_small_derivations():
    assert MessageStoreConfig(mappedFileSizeConsumeQueue=1001).get_mapped_file_size_consume_queue() == 1020
    assert MessageStoreConfig().get_delay_level_table()[1] == 1000 and MessageStoreConfig().get_delay_level_table()[18] == 7200000
    assert BrokerConfig(registerNameServerPeriod=1000).get_register_name_server_period() == 10000
    assert BrokerConfig(registerNameServerPeriod=90000).get_register_name_server_period() == 60000
    assert BrokerConfig(brokerName="broker-a", brokerId=1).get_canonical_name() == "DefaultCluster_broker-a_1"
    b = load_broker_config(overrides={"listenPort": 10921, "brokerIP2": "127.0.0.2"})
    assert (b.broker_addr, b.ha_addr) == ("127.0.0.1:10921", "127.0.0.2:10922")


# --------------------------------------------------------------------------- bad input


def test_typo_warning_names_file_line_and_closest_key(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    write(tmp_path, "conf/x.properties", "brokerName=broker-a\n# a comment\nbrokerRol=SLAVE\n")
    with pytest.warns(ConfigWarning) as record:
        bundle = load_broker_config("conf/x.properties")
    expected = "conf/x.properties:3: unknown key 'brokerRol' — did you mean brokerRole?"
    assert [str(w.message) for w in record] == [expected]
    assert bundle.warnings == [expected]
    assert bundle.messageStoreConfig.brokerRole is BrokerRole.ASYNC_MASTER  # the typo set nothing


def test_unknown_key_with_nothing_close_lists_no_suggestion(tmp_path):
    path = write(tmp_path, "x.properties", "zzzqqq=1\n")
    bundle, caught = load_quietly(load_broker_config, path)
    assert caught == bundle.warnings == [f"{path}:1: unknown key 'zzzqqq'"]


def test_rocketmq_keys_rmqlab_does_not_implement_and_foreign_keys(tmp_path):
    path = write(tmp_path, "x.properties", "traceTopicEnable=true\nkvConfigPath=/tmp/kv.json\nisProcessReadEvent=true\n")
    bundle, _ = load_quietly(load_broker_config, path)
    assert bundle.warnings[0] == f"{path}:1: 'traceTopicEnable' is a RocketMQ BrokerConfig setting that rmqlab does not implement; ignored"
    assert bundle.warnings[1].startswith(f"{path}:2: 'kvConfigPath' is a NamesrvConfig setting (read by the name server)")
    # RocketMQ derives keys from setters: the controller key is processReadEvent.
    controller, _ = load_quietly(load_controller_config, write(tmp_path, "c.conf",
                                 "controllerDLegerGroup=g\ncontrollerDLegerPeers=n0-127.0.0.1:9877\n"
                                 "controllerDLegerSelfId=n0\nisProcessReadEvent=true\n"))
    assert controller.warnings == [f"{tmp_path}/c.conf:4: unknown key 'isProcessReadEvent' — did you mean processReadEvent?"]


def test_retired_rip44_key_is_explained(tmp_path):
    path = write(tmp_path, "x", "controllerDeployedStandAlone=true\n")
    bundle, _ = load_quietly(load_broker_config, path)
    assert bundle.warnings == [f"{path}:1: 'controllerDeployedStandAlone' is listed among RIP-44's broker parameters "
                               f"but RocketMQ removed it in July 2022 (commit 3d8296e): a broker sends its "
                               f"heartbeat to the controller however the controller is deployed; ignored"]


@pytest.mark.parametrize("line, message", [
    ("listenPort=10911x", "listenPort = '10911x': expected an integer in 0..65535 (Java int)"),
    ("listenPort=70000", "listenPort = '70000': expected an integer in 0..65535 (Java int)"),
    ("mappedFileSizeCommitLog=2147483648",
     "mappedFileSizeCommitLog = '2147483648': expected an integer in 1..2147483647 (Java int)"),
    ("brokerId=9223372036854775808",
     "brokerId = '9223372036854775808': expected an integer in -9223372036854775808..9223372036854775807 (Java long)"),
    ("enableControllerMode=ture", "enableControllerMode = 'ture': expected true or false"),
    ("slaveReadEnable=1", "slaveReadEnable = '1': expected true or false"),
    ("brokerRole=MASTER", "brokerRole = 'MASTER': expected one of ASYNC_MASTER, SYNC_MASTER, SLAVE"),
    ("flushDiskType=sync_flush", "flushDiskType = 'sync_flush': expected one of SYNC_FLUSH, ASYNC_FLUSH"),
    ("namesrvAddr=127.0.0.1", "namesrvAddr = '127.0.0.1': expected host:port entries separated by ';', e.g. 127.0.0.1:9876;127.0.0.1:9886"),
    ("brokerPermission=8", "brokerPermission = '8': expected an integer in 0..7 (Java int)"),
])
def test_malformed_values_raise_config_error_with_location(tmp_path, line, message):
    path = write(tmp_path, "x.properties", f"brokerName=broker-a\n\n{line}\n")
    with pytest.raises(ConfigError) as info:
        load_broker_config(path)
    assert str(info.value) == f"{path}:3: {message}"


def test_booleans_accept_any_case(tmp_path):
    b = load_broker_config(write(tmp_path, "x", "slaveReadEnable=TRUE\nautoCreateTopicEnable=False\n"))
    assert b.brokerConfig.slaveReadEnable is True and b.brokerConfig.autoCreateTopicEnable is False


def test_missing_file_is_a_clear_error(tmp_path):
    with pytest.raises(ConfigError, match=r"nope\.properties: configuration file not found"):
        load_broker_config(tmp_path / "nope.properties")
    with pytest.raises(ConfigError, match="configuration file not found"):
        load_proxy_config(tmp_path / "rmq-proxy.json")


def test_repeated_key_with_different_value_warns_and_last_wins(tmp_path):
    path = write(tmp_path, "x", "listenPort=10911\nlistenPort=10911\nlistenPort=10921\n")
    bundle, _ = load_quietly(load_broker_config, path)
    assert bundle.nettyServerConfig.listenPort == 10921
    assert bundle.warnings == [f"{path}:3: 'listenPort' was already set on line 2 to '10911'; the last one wins, as in RocketMQ"]


# --------------------------------------------------------------------------- start-up checks


def test_slave_needs_positive_broker_id(tmp_path):
    path = write(tmp_path, "x", "brokerName=broker-a\nbrokerRole=SLAVE\n")
    with pytest.raises(ConfigError, match=rf"^{path}:2: brokerId = 0: a SLAVE needs brokerId > 0"):
        load_broker_config(path)


def test_master_broker_id_is_forced_to_zero_with_a_warning(tmp_path):
    path = write(tmp_path, "x", "brokerRole=SYNC_MASTER\nbrokerId=2\n")
    with pytest.warns(ConfigWarning, match="brokerId = 2 ignored"):
        bundle = load_broker_config(path)
    assert bundle.brokerConfig.brokerId == 0
    assert bundle.warnings[0].startswith(f"{path}:2: brokerId = 2 ignored: a master (brokerRole = SYNC_MASTER)")


def test_dleger_commitlog_needs_its_keys_and_excludes_controller_mode(tmp_path):
    with pytest.raises(ConfigError, match="enableDLegerCommitLog = true needs dLegerGroup"):
        load_broker_config(write(tmp_path, "a", "enableDLegerCommitLog=true\n"))
    with pytest.raises(ConfigError, match="enableControllerMode and enableDLegerCommitLog cannot both be true"):
        load_broker_config(write(tmp_path, "b", "enableDLegerCommitLog=true\nenableControllerMode=true\ncontrollerAddr=127.0.0.1:9877\n"))


def test_controller_mode_needs_controller_addr(tmp_path):
    path = write(tmp_path, "x", "enableControllerMode=true\n")
    with pytest.raises(ConfigError, match=rf"^{path}:1: enableControllerMode = true needs controllerAddr"):
        load_broker_config(path)
    with pytest.raises(ConfigError, match="single domain:port"):
        load_broker_config(write(tmp_path, "y", "enableControllerMode=true\nfetchControllerAddrByDnsLookup=true\n"
                                                 "controllerAddr=a:1;b:2\n"))


@pytest.mark.parametrize("body, message", [
    ("controllerDLegerPeers=n0-127.0.0.1:9877\ncontrollerDLegerSelfId=n0\n", "controllerDLegerGroup is required"),
    ("controllerDLegerGroup=g\ncontrollerDLegerSelfId=n0\n", "controllerDLegerPeers is required"),
    ("controllerDLegerGroup=g\ncontrollerDLegerPeers=n0-127.0.0.1:9877;n1-127.0.0.1:9878\ncontrollerDLegerSelfId=n3\n",
     ":3: controllerDLegerSelfId = 'n3' must be one of the peers n0, n1 (controllerDLegerPeers)"),
    ("controllerDLegerGroup=g\ncontrollerDLegerPeers=n0:127.0.0.1:9877\ncontrollerDLegerSelfId=n0\n",
     ":2: controllerDLegerPeers = 'n0:127.0.0.1:9877': expected id-host:port entries separated by ';'"),
    ("controllerDLegerGroup=g\ncontrollerDLegerPeers=n0-127.0.0.1:9877;n0-127.0.0.1:9878\ncontrollerDLegerSelfId=n0\n",
     "peer id 'n0' appears twice"),
    ("controllerType=jRaft\n", "rmqlab implements the DLedger controller configuration"),
    ("controllerType=dledger\n", "controllerType = 'dledger': expected one of DLedger, jRaft"),
])
def test_controller_checks(tmp_path, body, message):
    with pytest.raises(ConfigError) as info:
        load_controller_config(write(tmp_path, "c.conf", body))
    assert message in str(info.value)


def test_namesrv_embedded_controller(tmp_path):
    off, _ = load_quietly(load_namesrv_config, write(tmp_path, "a", "controllerDLegerGroup=g\nscanNotActiveBrokerInterval=3000\n"))
    assert off.controllerConfig is None and off.namesrvConfig.scanNotActiveBrokerInterval == 3000
    assert off.warnings == [f"{tmp_path}/a:1: 'controllerDLegerGroup' is a ControllerConfig setting; "
                            f"it has no effect unless enableControllerInNamesrv = true"]
    on = load_namesrv_config(CONF / "controller" / "namesrv-n1.conf", overrides={"scanNotActiveBrokerInterval": 7000})
    # One key sets every object that has it, as MixAll.properties2Object does.
    assert on.namesrvConfig.scanNotActiveBrokerInterval == on.controllerConfig.scanNotActiveBrokerInterval == 7000
    with pytest.raises(ConfigError, match="uses the name server's listenPort 9877"):
        load_namesrv_config(CONF / "controller" / "namesrv-n0.conf", overrides={"listenPort": 9877})


# --------------------------------------------------------------------------- overrides and -n


def test_namesrv_addr_argument_overrides_the_file(tmp_path):
    path = write(tmp_path, "x", "namesrvAddr=127.0.0.1:9876\n")
    b = load_broker_config(path, namesrv_addr="127.0.0.1:9876;127.0.0.1:9886")
    assert b.brokerConfig.namesrvAddr == "127.0.0.1:9876;127.0.0.1:9886"
    assert b.brokerConfig.get_namesrv_addr_list() == ["127.0.0.1:9876", "127.0.0.1:9886"]
    assert b.origins["namesrvAddr"] == "-n"
    with pytest.raises(ConfigError, match=r"^-n: namesrvAddr = 'localhost': expected host:port"):
        load_broker_config(path, namesrv_addr="localhost")
    assert load_proxy_config(CONF / "rmq-proxy.json", namesrv_addr="127.0.0.1:9886").proxyConfig.namesrvAddr == "127.0.0.1:9886"


def test_python_overrides(tmp_path):
    b = load_broker_config(CONF / "2m-2s-sync" / "broker-a.properties",
                           overrides={"brokerName": "b", "listenPort": "10951", "flushDiskType": FlushDiskType.SYNC_FLUSH,
                                      "slaveReadEnable": True, "storePathRootDir": tmp_path / "st"})
    assert b.brokerConfig.brokerName == "b" and b.nettyServerConfig.listenPort == 10951
    assert b.messageStoreConfig.haListenPort == 10912  # the file's explicit value stays
    assert b.messageStoreConfig.flushDiskType is FlushDiskType.SYNC_FLUSH and b.brokerConfig.slaveReadEnable is True
    assert b.messageStoreConfig.storePathRootDir == str(tmp_path / "st")
    with pytest.raises(ConfigError, match=r"^overrides: unknown key 'brokerRol' — did you mean brokerRole\?$"):
        load_broker_config(overrides={"brokerRol": "SLAVE"})
    with pytest.raises(ConfigError, match=r"^overrides: listenPort = True: expected an integer in 0\.\.65535"):
        load_broker_config(overrides={"listenPort": True})
    with pytest.raises(ConfigError, match="'traceTopicEnable' is a RocketMQ BrokerConfig setting that rmqlab does not implement"):
        load_broker_config(overrides={"traceTopicEnable": True})


# --------------------------------------------------------------------------- .properties parser


def test_properties_separators_comments_and_line_numbers():
    text = ("# comment\n"
            "! also a comment\n"
            "\n"
            "a=1\n"
            "b : 2\n"
            "c 3\n"
            "  d\t=\t4  \n"
            "e=\n"
            "f==5\n"
            "g\n")
    entries = parse_properties(text)
    assert [(e.key, e.value, e.line) for e in entries] == [
        ("a", "1", 4), ("b", "2", 5), ("c", "3", 6), ("d", "4", 7), ("e", "", 8), ("f", "=5", 9), ("g", "", 10)]


def test_properties_continuation_and_escapes():
    text = ("peers = n0-127.0.0.1:9877;\\\n"
            "        n1-127.0.0.1:9878\n"
            "# a comment line ending in a backslash does not continue \\\n"
            "name=caf\\u00e9\n"
            "key\\=with\\:seps\\ x = v\\tw\n"
            "path=C:\\\\dir\n"
            "last=x\r\n"
            "crlf=y\r\n"
            "odd=a\\\\\\\n"
            "  b\n"
            "emoji=\\uD83D\\uDE00\n")
    entries = parse_properties(text)
    assert [(e.key, e.value, e.line) for e in entries] == [
        ("peers", "n0-127.0.0.1:9877;n1-127.0.0.1:9878", 1),
        ("name", "café", 4),
        ("key=with:seps x", "v\tw", 5),
        ("path", "C:\\dir", 6),
        ("last", "x", 7),
        ("crlf", "y", 8),
        ("odd", "a\\b", 9),
        ("emoji", "\U0001F600", 11),
    ]


def test_properties_bad_unicode_escape():
    with pytest.raises(ConfigError, match=r"^f\.properties:2: malformed \\uxxxx escape"):
        parse_properties("a=1\nb=\\u12g4\n", "f.properties")


def test_properties_file_must_be_utf8(tmp_path):
    path = tmp_path / "x.properties"
    path.write_bytes(b"brokerName=a\nbrokerClusterName=\xff\n")
    with pytest.raises(ConfigError, match=r"x\.properties:2: not valid UTF-8"):
        load_broker_config(path)


# --------------------------------------------------------------------------- proxy JSON


def test_proxy_json_comments_lines_and_checks(tmp_path):
    path = write(tmp_path, "rmq-proxy.json",
                 '// header\n{\n  "rocketMQClusterName": "C1", /* inline */\n  "grpcServerPort": "9081",\n'
                 '  "proxyMod": "cluster",\n  "url": "http://x//y"\n}\n')
    bundle, caught = load_quietly(load_proxy_config, path)
    assert bundle.proxyConfig.rocketMQClusterName == "C1" and bundle.proxyConfig.grpcServerPort == 9081
    assert bundle.proxyConfig.heartbeatSyncerTopicClusterName == "C1"  # initData
    assert caught == [f"{path}:5: unknown key 'proxyMod' — did you mean proxyMode?", f"{path}:6: unknown key 'url'"]
    assert [(e.key, e.line) for e in parse_json_object('{"a": {"b": 1},\n"c": [1]}')] == [("a", 1), ("c", 2)]
    with pytest.raises(ConfigError, match=r"rmq-proxy\.json:3: grpcServerPort = '1\.5': expected an integer"):
        load_proxy_config(write(tmp_path, "rmq-proxy.json", '{\n"proxyName": "p",\n"grpcServerPort": 1.5}'))
    with pytest.raises(ConfigError, match="runs the proxy in Cluster mode only; .* --enable-proxy"):
        load_proxy_config(write(tmp_path, "rmq-proxy.json", '{"proxyMode": "local"}'))
    local = load_proxy_config(write(tmp_path, "rmq-proxy.json", '{"proxyMode": "cluster"}'), local=True)
    assert local.proxyConfig.proxyMode == "LOCAL" and not local.proxyConfig.is_cluster_mode()
    with pytest.raises(ConfigError, match=r"rmq-proxy\.json:2: expected ',' or '}'"):
        load_proxy_config(write(tmp_path, "rmq-proxy.json", '{"proxyName": "p"\n "x": 1}'))


# --------------------------------------------------------------------------- -p and the CLI


def test_format_config_prints_every_key_grouped_and_reloads_cleanly(tmp_path):
    bundle = load_broker_config(CONF / "2m-2s-sync" / "broker-a.properties")
    text = format_config(bundle)
    groups = [line for line in text.splitlines() if line.startswith("# ")]
    assert groups == ["# BrokerConfig", "# NettyServerConfig", "# NettyClientConfig", "# MessageStoreConfig"]
    assert "brokerName=broker-a\n" in text and "brokerRole=SYNC_MASTER\n" in text and "namesrvAddr=127.0.0.1:9876\n" in text
    assert f"storePathCommitLog={os.path.abspath('./store/2m-2s-sync/broker-a')}/commitlog\n" in text
    keys = [line.split("=", 1)[0] for line in text.splitlines() if line and not line.startswith("#")]
    assert len(keys) == len(set(keys)) == sum(len(config_fields(obj)) for _, obj in bundle.config_objects())
    again, caught = load_quietly(load_broker_config, write(tmp_path, "printed.properties", text))
    assert caught == [] and format_config(again) == text


def test_cli_print_config(capsys, monkeypatch):
    monkeypatch.chdir(REPO)
    assert main(["broker", "-c", "conf/2m-2s-sync/broker-a.properties", "-p"]) == 0
    out, err = capsys.readouterr()
    assert "brokerName=broker-a\n" in out and "listenPort=10911\n" in out and err == ""
    assert main(["namesrv", "-c", "conf/controller/namesrv-n0.conf", "-p"]) == 0
    out, _ = capsys.readouterr()
    assert "# ControllerConfig\n" in out and "controllerDLegerSelfId=n0\n" in out
    assert main(["proxy", "-pc", "conf/rmq-proxy.json", "-n", "127.0.0.1:9886", "-p"]) == 0
    assert "namesrvAddr=127.0.0.1:9886\n" in capsys.readouterr().out


def test_cli_broker_enable_proxy_prints_both_configurations(capsys, monkeypatch):
    monkeypatch.chdir(REPO)
    assert main(["broker", "-c", "conf/broker.conf", "-pc", "conf/rmq-proxy.json"]) == 1
    assert capsys.readouterr().err == ("rmqlab broker: error: -pc names the Local-mode proxy's rmq-proxy.json: "
                                       "it needs --enable-proxy\n")
    assert main(["broker", "-c", "conf/broker.conf", "--enable-proxy", "-pc", "conf/rmq-proxy.json", "-p"]) == 0
    out = capsys.readouterr().out
    assert "brokerName=broker-a" in out and "proxyMode=LOCAL" in out and "grpcServerPort=8081" in out


def test_cli_bad_file_returns_1_with_message(capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    write(tmp_path, "bad.properties", "brokerName=broker-a\nbrokerRole=MASTER\n")
    assert main(["broker", "-c", "bad.properties", "-p"]) == 1
    out, err = capsys.readouterr()
    assert out == ""
    assert err == ("rmqlab broker: error: bad.properties:2: brokerRole = 'MASTER': expected one of "
                   "ASYNC_MASTER, SYNC_MASTER, SLAVE\n")
    assert main(["broker", "-c", "missing.properties"]) == 1
    assert capsys.readouterr().err == "rmqlab broker: error: missing.properties: configuration file not found\n"


def test_cli_prints_warnings_to_stderr(capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    write(tmp_path, "w.properties", "brokerName=broker-a\nbrokerRol=SLAVE\n")
    assert main(["broker", "-c", "w.properties", "-p"]) == 0
    out, err = capsys.readouterr()
    assert err == "rmqlab broker: warning: w.properties:2: unknown key 'brokerRol' — did you mean brokerRole?\n"
    assert "brokerRole=ASYNC_MASTER\n" in out
    assert main(["namesrv", "-n", "127.0.0.1:9876", "-p"]) == 0
    assert capsys.readouterr().err == "rmqlab namesrv: warning: -n 127.0.0.1:9876 has no effect on the name server\n"
