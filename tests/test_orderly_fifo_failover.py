"""5.x FIFO message groups through the Proxy across a controller-mode master failover, with Apache's
5.x gRPC client (rocketmq-python-client 5.1.2) on real processes.

The set-up of tests/test_proxy_failover.py (standalone controllers, broker-a of three replicas with
allAckInSyncStateSet, a Proxy in cluster mode): a FIFO topic, an orderly consumer group
(consumeMessageOrderly, which the Proxy serves as FIFO), a producer sending every 40 ms with message
groups g0, g1, g2 (message i in group g<i mod 3>), a PushConsumer consuming while the master gets
SIGKILL.

The master is killed only once both slaves have copied the topic (message.type=FIFO) and the
orderly group: `updateTopic -c` / `updateSubGroup -c` reach the masters only, a slave copies them in
SlaveSynchronize.syncAll every 10 s in controller mode (RocketMQ's ReplicasManager.
handleSlaveSynchronize). A failover inside that window breaks the order within a group, in
RocketMQ as here: the new master creates the group with defaults on the first pop
(consumeMessageOrderly=false; SubscriptionGroupManager.findSubscriptionGroupConfig), the Proxy's
metadata cache reads that from it and pops without `order` from then on (no per-queue block), and
several receives get messages of one queue at once. Without the wait the kill can fall inside
that window, and a later message of a group is then first delivered before earlier ones sent around
the kill; tests/test_fifo_failover_sim.py shows such a run, and its mechanism step by step, on the
simulator.

Checked: every acknowledged message is consumed (at least once: the new master serves the group
from the consumer offsets it copied at its last sync, so messages handed out before the kill come
again), and within each message group the first delivery of each message follows the send order.
"""

from __future__ import annotations

import json
import os
import time

import pytest

from rmqlab.cluster import Cluster
from tests.deployment_helpers import LAB_BROKER, LAB_CONTROLLER, admin_call, poll
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


def slaves_copied_the_metadata(c: Cluster) -> bool:
    """Both slaves of broker-a hold the orderly group and the FIFO topic (SlaveSynchronize ran)."""
    async def fn(admin):
        addrs = (await admin.examine_broker_cluster_info()).broker_addr_table["broker-a"].broker_addrs
        slaves = [addr for broker_id, addr in addrs.items() if broker_id != 0]
        for addr in slaves:
            group = await admin._api.get_subscription_group_config(addr, GROUP, 2000)
            topic = await admin._api.get_topic_config(addr, TOPIC, 2000)
            if not group.consume_message_orderly or topic.attributes.get("message.type") != "FIFO":
                return False
        return len(slaves) == 2
    return admin_call(c.namesrv_addr, fn)


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
        poll(lambda: slaves_copied_the_metadata(c), 40, "the slaves' copy of the orderly group and FIFO topic", 1.0)
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


def test_fifo_message_groups_stay_in_order_across_a_controller_mode_master_failover(tmp_path):
    acked, received = failover_run(tmp_path)
    assert set(acked) <= {r["message_id"] for r in received}
    for g in ("g0", "g1", "g2"):
        assert first_deliveries(received, acked, g) == \
            sorted(int(s["i"]) for s in acked.values() if int(s["i"]) % 3 == int(g[1]))
