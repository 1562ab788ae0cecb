"""The broker in DLedger CommitLog mode on the simulator: its configuration, DLedgerCommitLog (each
message one DLedger entry, consume queues only up to the commit point, a put answered once a
quorum holds it), the role changes (leader -> master, follower -> slave) and failover."""

from __future__ import annotations

import warnings
from pathlib import Path

import pytest

from rmqlab.config import ConfigError, load_broker_config
from rmqlab.config.broker import BrokerRole
from rmqlab.store.dledger.dledger_commit_log import dledger_config_of

PEERS = "n0-127.0.0.1:40911;n1-127.0.0.1:40912;n2-127.0.0.1:40913"
DLEDGER_CONF = f"enableDLegerCommitLog=true\ndLegerGroup=RaftNode00\ndLegerPeers={PEERS}\n"


def write(directory: Path, name: str, text: str) -> str:
    path = directory / name
    path.write_text(text, encoding="utf-8")
    return str(path)


# -- configuration --------------------------------------------------------------------------------
def test_dledger_keys_default_as_rocketmq_and_map_to_a_dledger_config(tmp_path):
    msc = load_broker_config().messageStoreConfig
    assert (msc.enableDLegerCommitLog, msc.dLegerGroup, msc.dLegerPeers, msc.dLegerSelfId) == (False, None, None, None)
    assert (msc.preferredLeaderId, msc.enableBatchPush, msc.storePathDLedgerCommitLog) == (None, False, None)
    b = load_broker_config(write(tmp_path, "b.conf", DLEDGER_CONF + "dLegerSelfId=n1\nfileReservedTime=48\n"
                                 "preferredLeaderId=n0\nenableBatchPush=true\nmappedFileSizeCommitLog=65536\n"
                                 f"storePathRootDir={tmp_path}/store\ndiskMaxUsedSpaceRatio=80\n"))
    config = dledger_config_of(b.messageStoreConfig)
    assert (config.group, config.self_id, config.peers) == ("RaftNode00", "n1", PEERS)
    assert config.file_reserved_hours == 49  # fileReservedTime + 1, as DLedgerCommitLog sets it
    assert (config.preferred_leader_ids, config.is_enable_batch_push) == ("n0", True)
    assert config.mapped_file_size_for_entry_data == 65536
    assert config.disk_space_ratio_to_check_expired == pytest.approx(0.80)
    assert config.get_data_store_path() == f"{tmp_path}/store/dledger-n1/data"
    assert b.brokerConfig.brokerId == -1  # BrokerStartup; the first role change sets it


def test_store_path_dledger_commit_log_moves_the_data_files(tmp_path):
    b = load_broker_config(write(tmp_path, "b.conf", DLEDGER_CONF + f"dLegerSelfId=n0\nstorePathRootDir={tmp_path}/s\n"
                                 f"storePathDLedgerCommitLog={tmp_path}/elsewhere\n"))
    assert dledger_config_of(b.messageStoreConfig).get_data_store_path() == f"{tmp_path}/elsewhere"


@pytest.mark.parametrize("body, message", [
    ("enableDLegerCommitLog=true\ndLegerPeers=" + PEERS + "\ndLegerSelfId=n0\n",
     r"b.conf:1: enableDLegerCommitLog = true needs dLegerGroup"),
    ("enableDLegerCommitLog=true\ndLegerGroup=g\ndLegerSelfId=n0\n",
     r"b.conf:1: enableDLegerCommitLog = true needs dLegerPeers"),
    (DLEDGER_CONF, r"b.conf:1: enableDLegerCommitLog = true needs dLegerSelfId"),
    (DLEDGER_CONF + "dLegerSelfId=n3\n", r"b.conf:4: dLegerSelfId = 'n3' is not one of the dLegerPeers ids"),
    (DLEDGER_CONF + "dLegerSelfId=broker0\n", r"b.conf:4: dLegerSelfId = 'broker0': expected n<digits>"),
    ("enableDLegerCommitLog=true\ndLegerGroup=g\ndLegerPeers=n0-127.0.0.1;n1-127.0.0.1:2\ndLegerSelfId=n0\n",
     r"b.conf:3: dLegerPeers = 'n0-127.0.0.1;n1-127.0.0.1:2': expected id-host:port entries"),
    ("enableDLegerCommitLog=true\ndLegerGroup=g\ndLegerPeers=n0-127.0.0.1:1;n0-127.0.0.1:2\ndLegerSelfId=n0\n",
     r"b.conf:3: dLegerPeers = .*peer id 'n0' appears twice"),
    ("enableDLegerCommitLog=true\ndLegerGroup=g\ndLegerPeers=n0-127.0.0.1:1;a-127.0.0.1:2\ndLegerSelfId=n0\n",
     r"b.conf:3: dLegerPeers id 'a': expected n<digits>"),
    (DLEDGER_CONF + "dLegerSelfId=n0\nenableControllerMode=true\ncontrollerAddr=127.0.0.1:9877\n",
     r"b.conf:1: enableControllerMode and enableDLegerCommitLog cannot both be true"),
])
def test_bad_dledger_configuration_is_refused_naming_the_key(tmp_path, body, message):
    with pytest.raises(ConfigError, match=message):
        load_broker_config(write(tmp_path, "b.conf", body))


def test_broker_id_and_role_of_the_file_are_ignored_with_a_warning(tmp_path):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        b = load_broker_config(write(tmp_path, "b.conf", DLEDGER_CONF + "dLegerSelfId=n2\nbrokerId=5\n"
                                     "brokerRole=SLAVE\npreferredLeaderId=n7\n"))
    texts = [str(w.message) for w in caught]
    assert any("brokerId ignored with enableDLegerCommitLog = true" in t for t in texts), texts
    assert any("brokerRole ignored with enableDLegerCommitLog = true" in t for t in texts), texts
    assert any("preferredLeaderId 'n7' is not one of the dLegerPeers ids" in t for t in texts), texts
    assert b.brokerConfig.brokerId == -1
    # A SLAVE with brokerId <= 0 would be refused outside DLedger mode; here the role is DLedger's.
    assert b.messageStoreConfig.brokerRole is BrokerRole.SLAVE
