"""The Apache RocketMQ C++ client's orderly push consumer (PyPI ``rocketmq`` 0.4.4:
``PushConsumer(group, orderly=True)``, rocketmq-client-cpp's ConsumeMessageOrderlyService) against
rmqlab's NameServer and Broker as real OS processes, with messages sent by the same client's
``Producer.send_orderly`` (its hashing selector: queue = sharding key mod queue count).

What it shows: the consumer locks its queues at the broker (LOCK_BATCH_MQ) before it consumes,
consumes each queue in offset order (each order's messages in send order), renews the locks
(its lockAll every 20 s), and a second consumer of the group cannot take the queues of a first one
that was killed (no UNLOCK_BATCH_MQ) until the broker's lock on them expires, 60 s after the first
one's last renewal; then it consumes them, in order.

Two ways this client (librocketmq 1.0.1, bundled by the wheel) differs from the Java client, seen in
its log under HOME and in the broker's trace: its rebalance adds a queue without locking it (the
consume request locks it, LOCK_BATCH_MQ for the one queue, before the first message), and a refused
lock is asked again at once rather than 3 s later -- about a thousand LOCK_BATCH_MQ a second from
the waiting consumer here.
"""

from __future__ import annotations

import os
import sys
import time

import pytest

from rmqlab.remoting import RequestCode
from rmqlab.runtime.real_cluster import RealCluster, free_ports
from tests.cpp_helpers import CppClient, lines, template, write_conf
from tests.oracles import run_cpp

pytestmark = pytest.mark.real

TOPIC, GROUP = "TopicOrder", "CID-orderly"
ORDERS = 4  # sharding keys 0..3: one queue each on a 4-queue topic
LOCK_MAX_LIVE_S = 60  # RebalanceLockManager.REBALANCE_LOCK_MAX_LIVE_TIME
LOCK_INTERVAL_S = 20  # the client's RebalanceLockInterval: lockAll's period


def start_cluster(tmp_path) -> tuple[RealCluster, str]:
    """A NameServer and broker-a (conf/broker.conf) as `rmqlab namesrv` / `rmqlab broker`, on free
    ports, once the broker registered."""
    cluster = RealCluster(str(tmp_path / "cluster"))
    ns_port, listen, ha = free_ports(3)
    namesrv = f"127.0.0.1:{ns_port}"
    conf = write_conf(tmp_path / "namesrv.conf", {"listenPort": ns_port})
    cluster.add_node("namesrv", [sys.executable, "-m", "rmqlab.cli", "namesrv", "-c", conf], ports=[ns_port])
    values = template("broker.conf") | {"namesrvAddr": namesrv, "listenPort": listen, "haListenPort": ha,
                                        "storePathRootDir": cluster.store_dir("broker-a"),
                                        "mappedFileSizeCommitLog": 1024 * 1024}
    conf = write_conf(tmp_path / "broker-a.properties", values)
    cluster.add_node("broker-a", [sys.executable, "-m", "rmqlab.cli", "broker", "-c", conf], ports=[listen, ha])
    cluster.start_all(timeout_s=60)
    wait_until(lambda: any(e.kind == "namesrv.broker_register" for e in cluster.events("namesrv")), 30,
               "the broker's registration")
    return cluster, namesrv


def wait_until(condition, timeout_s: float, what: str) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, f"timed out after {timeout_s:.0f} s waiting for {what}"
        time.sleep(0.1)


def deliveries(client: CppClient) -> list[dict]:
    return [line for line in client.lines() if "keys" in line]


def assert_in_order(got: list[dict]) -> None:
    by_queue: dict[int, list[int]] = {}
    by_order: dict[int, list[int]] = {}
    for d in got:
        by_queue.setdefault(d["queue_id"], []).append(d["queue_offset"])
        by_order.setdefault(d["seq"] % ORDERS, []).append(d["seq"])
    for q, offsets in by_queue.items():
        assert offsets == sorted(offsets) and len(set(offsets)) == len(offsets), (q, offsets)
    for o, seqs in by_order.items():
        assert seqs == sorted(seqs), (o, seqs)
    assert all(d["queue_id"] == d["seq"] % ORDERS for d in got)  # one order, one queue


def lock_frames(cluster, code: int = RequestCode.LOCK_BATCH_MQ) -> list:
    return [e for e in cluster.events("broker-a") if e.kind == "frame.recv" and e.fields.get("code") == code]


def test_cpp_orderly_consumer_locks_consumes_in_order_renews_and_a_second_waits_for_the_lock(tmp_path):
    home = str(tmp_path / "home")
    os.makedirs(home)
    cluster, namesrv = start_cluster(tmp_path)
    a = b = None
    try:
        sent = lines(run_cpp("cpp_producer_orderly.py", namesrv, TOPIC, "40", str(ORDERS), "o1", home=home))
        assert [s.get("status") for s in sent] == [0] * 40, sent
        a = CppClient(tmp_path, "a", "cpp_push_orderly.py", namesrv, TOPIC, GROUP, "80", "300")
        wait_until(lambda: len(deliveries(a)) >= 40, 60, "the orderly consumer consumed the first 40")
        assert_in_order(deliveries(a))
        # It locked the queues first (its rebalance locks each queue it consumes), and renews them:
        # lockAll, 20 s after start and every 20 s after.
        a_locks = lock_frames(cluster)
        assert a_locks
        a_peers = {e.fields["peer"] for e in a_locks}
        first = min(e.time_ms for e in a_locks)
        wait_until(lambda: any(e.time_ms - first > 19_000 for e in lock_frames(cluster)), 40, "a lockAll renewal")

        # A second member: the group splits the queues. Then the first is killed: it unlocks nothing.
        b = CppClient(tmp_path, "b", "cpp_push_orderly.py", namesrv, TOPIC, GROUP, "40", "300")
        wait_until(lambda: any("started" in line for line in b.lines()), 30, "the second consumer started")
        time.sleep(5)  # its heartbeat, both rebalances, the unlocks of the queues the first gave up
        # Who holds which queue now: 8 more messages, two a queue.
        sent = lines(run_cpp("cpp_producer_orderly.py", namesrv, TOPIC, "8", str(ORDERS), "m", home=home))
        assert [s.get("status") for s in sent] == [0] * 8, sent

        def mid(c: CppClient) -> list[dict]:
            return [d for d in deliveries(c) if d["keys"].startswith("m-")]

        wait_until(lambda: len(mid(a)) + len(mid(b)) >= 8, 30, "the 8 consumed by the two")
        held_by_a = {d["queue_id"] for d in mid(a)}
        assert held_by_a and {d["queue_id"] for d in mid(b)} == set(range(ORDERS)) - held_by_a
        a.kill()
        killed_at = time.time()
        sent = lines(run_cpp("cpp_producer_orderly.py", namesrv, TOPIC, "40", str(ORDERS), "o2", home=home))
        assert [s.get("status") for s in sent] == [0] * 40, sent
        wait_until(lambda: len({d["keys"] for d in deliveries(b) if d["keys"].startswith("o2")}) >= 40,
                   LOCK_MAX_LIVE_S + 60, "the second consumer consumed the 40 sent after the kill")
        got = [d for d in deliveries(b) if d["keys"].startswith("o2")]
        assert_in_order(got)
        # The queues the killed consumer held were consumed only once its locks could have expired.
        late = [d for d in got if d["queue_id"] in held_by_a]
        took_over = min(d["time"] for d in late)
        # Not before the broker's lock expired: 60 s after the killed consumer's last renewal, which
        # was at most one lockAll interval (20 s) before the kill.
        assert took_over - killed_at > LOCK_MAX_LIVE_S - LOCK_INTERVAL_S
        # Meanwhile the second one asked for those locks, in vain.
        b_peers = {e.fields["peer"] for e in lock_frames(cluster)} - a_peers
        assert [e for e in lock_frames(cluster) if e.fields["peer"] in b_peers
                and killed_at < e.time_ms / 1000 < took_over - 1]
    finally:
        for c in (a, b):
            if c is not None:
                c.kill()
        cluster.close()
