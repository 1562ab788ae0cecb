"""DLedger mode → controller mode on OS processes, as docs/upgrade-to-controller-mode.md tells an
operator to do it (RocketMQ's docs/cn/controller/deploy.md 「升级注意事项」): no data is carried over.

conf/dledger's group of three (`rmqlab broker -c <file>`), one name server and one standalone
controller that no broker uses yet, started by rmqlab.cluster on free ports. A producer sends, a
push consumer consumes. Then the procedure, with the `rmqlab admin` commands the operator runs:
stop writes (`updateBrokerConfig -k brokerPermission -v 4` on the master), wait until
`consumerProgress -g <group>` shows a diff of 0, stop the consumer and the three brokers, clear
each store but config/topics.json and config/subscriptionGroup.json, switch the files to
controller mode, start the brokers, wait until `getSyncStateSet` shows three in-sync replicas.
(The docs wait 35 s after the first step for the producers' route refresh; here the producer has
finished before it, and the test checks the route says read-only.) A
second producer then sends to the upgraded group, and the restarted consumer reads every
acknowledged message once. Every wait is bounded; RealCluster stops every process it started, by PID.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys

import pytest

from rmqlab.checker.checkers import check_total_queue
from rmqlab.cluster import Cluster
from rmqlab.demo.dledger_to_controller import BROKERS, GROUP, KEPT, UPGRADE_MODE
from tests.operator_helpers import admin, finished, properties, wait

pytestmark = pytest.mark.real

TOPIC, CONSUMER_GROUP = "UpgradeTopic", "UpgradeGroup"
N = 40
# docs/upgrade-to-controller-mode.md, run in the broker's storePathRootDir.
CLEAR = ["find", ".", "-mindepth", "1", "!", "-path", "./config", "!", "-path", "./config/topics.json",
         "!", "-path", "./config/subscriptionGroup.json", "-delete"]




def diff_total(namesrv: str) -> int | None:
    """`rmqlab admin consumerProgress -g UpgradeGroup`'s Diff Total (None while the group has no
    committed offset: the command then fails, "maybe the consumer not consume any message")."""
    done = subprocess.run([sys.executable, "-m", "rmqlab.cli", "admin", "consumerProgress", "-n", namesrv,
                           "-g", CONSUMER_GROUP], capture_output=True, text=True, timeout=60)
    m = re.search(r"^Diff Total: (\d+)$", done.stdout, re.M) if done.returncode == 0 else None
    return int(m[1]) if m else None


def in_sync_replicas(controller: str) -> int:
    """InSyncReplica lines of `rmqlab admin getSyncStateSet -b RaftNode00` (0 while the controller
    does not know the broker set yet: the command then fails)."""
    done = subprocess.run([sys.executable, "-m", "rmqlab.cli", "admin", "getSyncStateSet", "-a", controller, "-b", GROUP],
                          capture_output=True, text=True, timeout=60)
    return done.stdout.count("InSyncReplica:") if done.returncode == 0 else 0


def test_dledger_to_controller_mode_with_the_operators_commands(tmp_path):
    c = Cluster(UPGRADE_MODE, runtime="real", seed=3, controllers=1, relay=False, root_dir=str(tmp_path))
    try:
        c.add_consumer("consumer", topic=TOPIC, group=CONSUMER_GROUP, start=False)
        c.add_producer("before", topic=TOPIC, count=N, interval_ms=20, body_size=64, start=False)
        c.add_producer("after", topic=TOPIC, count=N, interval_ms=20, body_size=64, start=False)
        c.start(timeout_ms=60_000)
        c.create_topic(TOPIC, timeout_ms=15_000)
        c.start_client("consumer")
        c.start_client("before")
        wait(lambda: finished(c, "before"), 60, "the first producer's sends")
        conf = {b: os.path.join(str(tmp_path), "conf", f"{b}.properties") for b in BROKERS}
        master = c.master(GROUP)
        assert master in BROKERS

        # 1. Stop writes to the group; wait until the consumer group has read everything.
        admin("updateBrokerConfig", "-n", c.namesrv_addr, "-b", f"127.0.0.1:{properties(conf[master])['listenPort']}",
              "-k", "brokerPermission", "-v", "4")
        # The route now says read-only (producers stop at their next refresh; the docs wait 35 s,
        # this test's producer has finished already).
        wait(lambda: '"perm":4' in admin("topicRoute", "-n", c.namesrv_addr, "-t", TOPIC), 30, "the route read-only")
        wait(lambda: diff_total(c.namesrv_addr) == 0, 60, "consumerProgress: Diff Total 0")
        # 2. Stop the consumer and the three brokers.
        c.stop_client("consumer")
        for b in BROKERS:
            c.real.stop(b)
        # 3. Clear each store but config/topics.json and config/subscriptionGroup.json, with the
        #    docs' command.
        for b in BROKERS:
            store = properties(conf[b])["storePathRootDir"]
            assert os.path.isdir(os.path.join(store, f"dledger-{properties(conf[b])['dLegerSelfId']}"))
            subprocess.run(CLEAR, cwd=store, check=True, timeout=60)
            left = sorted(os.path.relpath(os.path.join(d, f), store) for d, _, fs in os.walk(store) for f in fs)
            assert left == [f"config/{name}" for name in sorted(KEPT)], left
        # 4. Controller mode in the files (controllerAddr is already there), the DLedger commitlog
        #    off, writes allowed again.
        for b in BROKERS:
            assert properties(conf[b])["controllerAddr"] == c.controller_addr
            with open(conf[b], "a") as f:
                f.write("enableDLegerCommitLog=false\nenableControllerMode=true\nbrokerId=-1\nbrokerRole=SLAVE\n"
                        "allAckInSyncStateSet=true\nbrokerPermission=6\n")
        # 5. Start the brokers; the controller elects one, the others join the SyncStateSet.
        for b in BROKERS:
            c.nemesis.restart(b)
        wait(lambda: in_sync_replicas(c.controller_addr) == 3, 90, "three replicas in the SyncStateSet")
        # 6. Writes again; the consumer, restarted, reads the new queues from their first message.
        c.nemesis.restart("consumer")
        c.start_client("after")
        wait(lambda: finished(c, "after"), 90, "the second producer's sends")
        wait(lambda: check_total_queue(c.events(), topic=TOPIC).stats["lost"] == 0, 90,
             "the consumer read every acknowledged message")
        stats = check_total_queue(c.events(), topic=TOPIC).stats
        assert stats["acknowledged"] == 2 * N and stats["read"] == 2 * N and stats["duplicated"] == 0, stats
        # The consumer commits its new offsets (every 5 s) to the new master: its progress is complete.
        wait(lambda: diff_total(c.namesrv_addr) == 0, 30, "consumerProgress after the upgrade: Diff Total 0")
    finally:
        c.close()
