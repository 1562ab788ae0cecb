"""The aligned master–slave → controller-mode upgrade on OS processes, as docs/upgrade-to-controller-mode.md
tells an operator to do it (RocketMQ's docs/en/controller/deploy.md "Upgrade Considerations").

A classic group (conf/2m-2s-async's broker-a and broker-a-s, `rmqlab broker -c <file>`), one name
server and one standalone controller (`rmqlab controller -c <file>`), started by rmqlab.cluster on
free ports. A producer sends, a push consumer consumes. Then the procedure, with the `rmqlab admin`
commands run as the operator runs them: stop writes (`updateBrokerConfig -k brokerPermission -v
4`), wait until `brokerStatus -c` shows the same commitLogMaxOffset on both brokers, stop the
consumer and the two brokers, add enableControllerMode=true to both files, start the master, check
it is elected (`getSyncStateSet`), start the slave, wait until it is in the SyncStateSet. A second
producer then sends to the upgraded group, and the restarted consumer reads every acknowledged
message once. Every wait is bounded; RealCluster stops every process it started, by PID.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys

import pytest

from rmqlab.checker.checkers import check_total_queue
from rmqlab.cluster import STANDALONE, Cluster, DeploymentMode
from tests.operator_helpers import admin, finished, properties, wait

pytestmark = pytest.mark.real

TOPIC, GROUP = "UpgradeTopic", "UpgradeGroup"
N = 40
MODE = DeploymentMode("1m-1s-async+controller", {n: f"2m-2s-async/{n}.properties" for n in ("broker-a", "broker-a-s")},
                      controllers=STANDALONE)




def max_offsets(namesrv: str) -> dict[str, int]:
    """Each broker's commitLogMaxOffset, from `rmqlab admin brokerStatus -c DefaultCluster`."""
    out = admin("brokerStatus", "-n", namesrv, "-c", "DefaultCluster")
    return {m[1]: int(m[2]) for m in re.finditer(r"^(\S+)\s+commitLogMaxOffset\s*: (\d+)$", out, re.M)}


def test_aligned_upgrade_with_the_operators_commands(tmp_path):
    c = Cluster(MODE, runtime="real", seed=3, controllers=1, relay=False, root_dir=str(tmp_path))
    try:
        c.add_consumer("consumer", topic=TOPIC, group=GROUP, start=False)
        c.add_producer("before", topic=TOPIC, count=N, interval_ms=20, body_size=64, start=False)
        c.add_producer("after", topic=TOPIC, count=N, interval_ms=20, body_size=64, start=False)
        c.start(timeout_ms=30_000)
        c.create_topic(TOPIC, timeout_ms=15_000)
        c.start_client("consumer")
        c.start_client("before")
        wait(lambda: finished(c, "before"), 60, "the first producer's sends")
        conf = {b: os.path.join(str(tmp_path), "conf", f"{b}.properties") for b in ("broker-a", "broker-a-s")}
        addr = {b: f"127.0.0.1:{properties(conf[b])['listenPort']}" for b in conf}

        # 1. Stop writes to the group; wait until the slave has the master's whole commitlog.
        admin("updateBrokerConfig", "-n", c.namesrv_addr, "-b", addr["broker-a"], "-k", "brokerPermission", "-v", "4")
        wait(lambda: len(set((o := max_offsets(c.namesrv_addr)).values())) == 1 and len(o) == 2, 60,
             "equal commitLogMaxOffset on the master and the slave")
        aligned = max_offsets(c.namesrv_addr)[addr["broker-a"]]
        assert aligned > 0
        # 2. Stop the consumer (its offsets are committed on the master), the slave, the master.
        c.stop_client("consumer")
        c.real.stop("broker-a-s")
        c.real.stop("broker-a")
        # 3. Controller mode in both files (controllerAddr is already there: the controller's address),
        #    and writes allowed again (RocketMQ's updateBrokerConfig would have written brokerPermission=4 there).
        for b in conf:
            assert properties(conf[b])["controllerAddr"] == c.controller_addr
            with open(conf[b], "a") as f:
                f.write("enableControllerMode=true\nbrokerPermission=6\n")
        # 4. The master first; the controller elects it; then the slave joins the SyncStateSet.
        c.nemesis.restart("broker-a")
        wait(lambda: c.master("broker-a") == "broker-a", 60, "broker-a elected")
        assert "#MasterAddr\t" + addr["broker-a"] in admin("getSyncStateSet", "-a", c.controller_addr, "-b", "broker-a")
        c.nemesis.restart("broker-a-s")
        wait(lambda: admin("getSyncStateSet", "-a", c.controller_addr, "-b", "broker-a")
             .count("InSyncReplica:") == 2, 60, "both replicas in the SyncStateSet")
        # 5. Writes again.
        c.nemesis.restart("consumer")
        c.start_client("after")
        wait(lambda: finished(c, "after"), 60, "the second producer's sends")
        wait(lambda: check_total_queue(c.events(), topic=TOPIC).stats["lost"] == 0, 60,
             "the consumer read every acknowledged message")
        stats = check_total_queue(c.events(), topic=TOPIC).stats
        assert stats["acknowledged"] == 2 * N and stats["read"] == 2 * N and stats["duplicated"] == 0, stats
        offsets = max_offsets(c.namesrv_addr)
        assert offsets[addr["broker-a"]] == offsets[addr["broker-a-s"]] > aligned, offsets
        # Both epoch files: epoch 1 from the offset where the logs were aligned, the first master's
        # maxPhyOffset, as RocketMQ writes it (the slave records the master's entry with the first
        # data it receives); the log kept from before the upgrade is in no epoch.
        epochs = admin("getBrokerEpoch", "-n", c.namesrv_addr, "-b", "broker-a")
        assert epochs.count(f"#Epoch: EpochEntry{{epoch=1, startOffset={aligned},") == 2, epochs
    finally:
        c.close()


def test_broker_status_needs_a_broker_or_a_cluster():
    done = subprocess.run([sys.executable, "-m", "rmqlab.cli", "admin", "brokerStatus", "-n", "127.0.0.1:9"],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 1 and "missing -b or -c" in done.stderr, (done.stdout, done.stderr)
