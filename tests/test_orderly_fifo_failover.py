"""5.x FIFO message groups through the Proxy across a controller-mode master failover, with Apache's
5.x gRPC client (rocketmq-python-client 5.1.2) on real processes.

The set-up of tests/test_proxy_failover.py (standalone controllers, broker-a of three replicas with
allAckInSyncStateSet, a Proxy in cluster mode): a FIFO topic, an orderly consumer group
(consumeMessageOrderly, which the Proxy serves as FIFO), a producer sending every 40 ms with message
groups g0, g1, g2 (message i in group g<i mod 3>), a PushConsumer consuming while the master gets
SIGKILL.

Checked: every acknowledged message is consumed (at least once: the new master serves the group
from the consumer offset and pop state it replicated, so messages handed out just before the kill
come again). Within each message group the first delivery of each message follows the send order
in most runs, but not in all: in 1 of 5 runs here a later message of a group (g0: 36) was first
delivered before earlier ones (24..33) sent around the kill. A likely cause, not yet confirmed: a pop
answered by the old master that never reached the client leaves those messages invisible on the new
master (the pop checkpoints are replicated), while the group's FIFO block is not (the broker's
ConsumerOrderInfoManager: RocketMQ's SlaveSynchronize.syncAll, broker/src/main/java/org/apache/
rocketmq/broker/slave/SlaveSynchronize.java, copies topics, offsets, delay offsets, subscription
groups and request modes, not it), so the new master hands out the group's next messages first.
The order is therefore not asserted here until that is settled: a test that may fail either way
would prove nothing.
"""

from __future__ import annotations

import json
import os
import time

import pytest

from rmqlab.cluster import Cluster
from tests.deployment_helpers import LAB_BROKER, LAB_CONTROLLER, poll
from tests.oracles import python5_client_python
from tests.proxy_helpers import in_sync_replicas, start_py5

pytestmark = pytest.mark.real

TOPIC, GROUP = "FifoFailoverTopic", "GID_fifo_failover"


def first_deliveries(received: list[dict], acked: dict, g: str) -> list[int]:
    """The seq of each acknowledged message of group ``g`` in the order it was first delivered."""
    out: list[int] = []
    for r in received:
        if r["group"] == g and r["message_id"] in acked and int(r["properties"]["seq"]) not in out:
            out.append(int(r["properties"]["seq"]))
    return out


def failover_run(tmp_path) -> tuple[dict, list[dict]]:
    """(acknowledged sends by message id, the consumer's acknowledged deliveries)."""
    python5_client_python()
    home = str(tmp_path / "home")
    os.makedirs(home)
    children: list = []
    c = Cluster("controller-standalone", runtime="real", root_dir=str(tmp_path / "cluster"), relay=False,
                proxy="cluster", overrides={"*": dict(LAB_BROKER)}, controller_overrides=dict(LAB_CONTROLLER),
                proxy_overrides={"topicRouteServiceCacheRefreshSeconds": 1})
    try:
        c.start()
        c.create_topic(TOPIC, message_type="FIFO")
        c.create_group(GROUP, orderly=True)
        poll(lambda: in_sync_replicas(c) == 3, 60, "all three replicas in the SyncStateSet", 0.3)
        old_master = c.master()
        assert old_master is not None
        expect_file = str(tmp_path / "expect")
        push = start_py5(home, "push", c.proxy_endpoints[0], TOPIC, GROUP, "1000000", "150", "0", expect_file)
        producer = start_py5(home, "produce", c.proxy_endpoints[0], TOPIC, "150", "ff", "fifo", "0", "0.04")
        children += [push, producer]
        time.sleep(2.0)
        c.nemesis.kill(old_master)
        killed_at = time.time()
        out, err = producer.communicate(timeout=120)
        assert producer.returncode == 0, err[-3000:]
        sent = [json.loads(line) for line in out.splitlines() if line.startswith("{")]
        acked = {s["message_id"]: s for s in sent if "message_id" in s}
        assert c.master() not in (None, old_master)
        with open(expect_file, "w") as f:
            f.write(str(len(acked)))
        out, err = push.communicate(timeout=180)
        assert push.returncode == 0, err[-3000:]
    finally:
        for child in children:  # the clients this test started, stopped by PID
            if child.poll() is None:
                child.kill()
                child.wait()
        c.close()

    # The groups went on through the failover: acknowledged messages from before and after the kill.
    assert {s["sent_at"] < killed_at for s in acked.values()} == {True, False}
    received = [json.loads(line) for line in out.splitlines() if line.startswith("{") and json.loads(line).get("acked")]
    return acked, received


def test_fifo_message_groups_are_all_consumed_across_a_controller_mode_master_failover(tmp_path):
    acked, received = failover_run(tmp_path)
    assert set(acked) <= {r["message_id"] for r in received}
    for g in ("g0", "g1", "g2"):
        assert sorted(first_deliveries(received, acked, g)) == \
            sorted(int(s["i"]) for s in acked.values() if int(s["i"]) % 3 == int(g[1]))
