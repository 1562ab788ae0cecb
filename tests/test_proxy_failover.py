"""Controller-mode failover under the Proxy, with Apache's 5.x gRPC client.

Real processes (rmqlab namesrv / controller / broker / proxy; the standalone-controller deployment
of conf/controller/ with the lab's short timeouts), the official client (rocketmq-python-client
5.1.2) in its own venv. A producer sends every 40 ms and a PushConsumer consumes while the master
gets SIGKILL. The controllers elect a replica of the SyncStateSet (allAckInSyncStateSet=true:
every acknowledged message is on it); it registers with the name server as brokerId 0; the Proxy
sees the new master at its next route reload (topicRouteServiceCacheRefreshSeconds=1 here, 20 s
by default) and the client never learns anything changed: its route names the Proxy.

Checked: sends go on after the kill (a few may fail within the client's 3 attempts; those are
not acknowledged and not counted), and every acknowledged message is consumed, by the live push
consumer and by a fresh group afterwards, bodies intact. Duplicates are allowed here: the new
master starts from the consumer offsets and pop checkpoints it has replicated, so what was popped
or acknowledged on the old master just before the kill may come again (RocketMQ behaves the same).
"""

from __future__ import annotations

import json
import os
import time

import pytest

from rmqlab.cluster import Cluster
from tests.oracles import python5_client_python
from tests.deployment_helpers import LAB_BROKER, LAB_CONTROLLER, poll
from tests.proxy_helpers import in_sync_replicas, py5, start_py5

pytestmark = pytest.mark.real

TOPIC = "ProxyFailoverTopic"
RECOVERED_S = 4.0


def test_official_client_keeps_producing_and_consuming_through_a_master_failover(tmp_path):
    python5_client_python()
    home = str(tmp_path / "home")
    os.makedirs(home)
    children: list = []
    c = Cluster("controller-standalone", runtime="real", root_dir=str(tmp_path / "cluster"), relay=False,
                proxy="cluster", overrides={"*": dict(LAB_BROKER)}, controller_overrides=dict(LAB_CONTROLLER),
                proxy_overrides={"topicRouteServiceCacheRefreshSeconds": 1})
    try:
        c.start()
        c.create_topic(TOPIC)
        # Only once every replica is in the SyncStateSet is every acknowledged message on each of
        # them (allAckInSyncStateSet) and any of them electable.
        poll(lambda: in_sync_replicas(c) == 3, 60, "all three replicas in the SyncStateSet", 0.3)
        old_master = c.master()
        assert old_master is not None
        expect_file = str(tmp_path / "expect")
        push = start_py5(home, "push", c.proxy_endpoints[0], TOPIC, "GID_live", "1000000", "120", "0", expect_file)
        producer = start_py5(home, "produce", c.proxy_endpoints[0], TOPIC, "200", "fo", "normal", "0", "0.04")
        children += [push, producer]
        time.sleep(2.0)
        c.nemesis.kill(old_master)
        killed_at = time.time()
        out, err = producer.communicate(timeout=120)
        assert producer.returncode == 0, err[-3000:]
        sent = [json.loads(line) for line in out.splitlines() if line.startswith("{")]
        acked = {s["message_id"]: s for s in sent if "message_id" in s}
        # The outage: sends fail (no writable queue, then the dead address) until the controllers
        # elected a new master and the Proxy's route shows it (about a second here); after
        # RECOVERED_S every send must succeed again.
        late = [s for s in sent if s["sent_at"] > killed_at + RECOVERED_S]
        assert late and all("message_id" in s for s in late), \
            [(s["i"], round(s["sent_at"] - killed_at, 2), s.get("error")) for s in sent if "error" in s]
        new_master = c.master()
        assert new_master not in (None, old_master)
        with open(expect_file, "w") as f:
            f.write(str(len(acked)))
        out, err = push.communicate(timeout=150)
        assert push.returncode == 0, err[-3000:]
        live = {json.loads(line)["message_id"] for line in out.splitlines()
                if line.startswith("{") and json.loads(line).get("acked")}
        assert set(acked) <= live, f"live group missed {len(set(acked) - live)} acknowledged messages"
        fresh = py5(home, "simple", c.proxy_endpoints[0], TOPIC, "GID_fresh", str(len(acked)), "30", "ack", "60")
        got = {r["message_id"]: r for r in fresh if r.get("acked")}
        assert set(acked) <= set(got), f"fresh group missed {len(set(acked) - set(got))} acknowledged messages"
        for mid, s in acked.items():
            assert got[mid]["body"] == f"fo body {s['i']}"
    finally:
        for child in children:  # the clients this test started, stopped by PID
            if child.poll() is None:
                child.kill()
                child.wait()
        c.close()
