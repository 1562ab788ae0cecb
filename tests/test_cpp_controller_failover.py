"""Controller-mode failover on real processes with the Apache RocketMQ C++ client (PyPI `rocketmq`
0.4.4).

The deployment is the one conf/README.md describes for standalone controllers, started as an
operator starts it: `rmqlab namesrv`, three `rmqlab controller -c controller-n*.conf` and three
`rmqlab broker -c broker-n*.conf` (broker set broker-a, allAckInSyncStateSet=true), the conf/
templates rewritten with free 127.0.0.1 ports and the lab's short timeouts (LAB_CONTROLLER,
LAB_BROKER), under a RealCluster without the fault relay (clients dial the brokers' advertised
addresses directly) that stops every process by PID. bench/bench_failover.py times the same
deployment.

The test: the C++ producer sends every 20 ms; a C++ push consumer (group CID-live) consumes; once
the SyncStateSet holds all three replicas and sends were acknowledged and consumed, the master gets
SIGKILL. Its connections close, the controller leader hears the close (BrokerHousekeepingService)
and elects a replica of the SyncStateSet, which becomes master and registers with the name server
as brokerId 0. The producer's sends fail meanwhile (counted, allowed) and succeed again once the
client's route names the new master. CID-live goes on consuming from the new master, and a fresh
group, CID-fresh, started afterwards, consumes there too: each gets every message the producer saw
acknowledged (SEND_OK), body, tags and keys intact, at the queue and offset the new master stores
it at.

How long the C++ client takes (rocketmq-client-cpp 1.2.x, what PyPI rocketmq 0.4.4 bundles; the
servers are done within about 0.3 s, bench/bench_failover.py):
* producer: `MQClientFactory` refreshes routes 3 s after start and then every 30 s, fixed; a send
  retries (5 attempts) at the master address of its cached route and does not refresh it on a
  failure; only a cached route without a writable queue (its group has no master) makes every send
  fetch the route. So sends recover at the first periodic refresh after the kill: here
  usually the one 3 s after start (an outage of about 2 s), at worst 30 s later.
* push consumer: a pull long-polling on the master when it dies (brokerSuspendMaxTime 15 s) is not
  failed when its connection closes (as observed here); it ends at its 30 s timeout (`m_asyncPullTimeout`), and the
  next pull goes to the new master. So CID-live resumes about 30 s after the kill.
The waits are bounded accordingly; the test takes about 45 s.
"""

from __future__ import annotations

import os
import time

import pytest

from tests.cpp_helpers import CppClient, stored_copies
from tests.deployment_helpers import broker_addrs, poll, start_deployment, wait_ready

pytestmark = pytest.mark.real


def check_consumed(consumed: list[dict], prefix: str, on_new: dict) -> None:
    """Each delivery intact (key, body, tags, seq as sent) and one of the copies the new master
    stores of its key (a send the dying master stored and replicated but never answered is resent
    by the client, under a new message id: at least once)."""
    for c in consumed:
        i = c["seq"]
        assert (c["keys"], c["body"], c["tags"]) == (f"{prefix}-key-{i}", f"{prefix} body {i}",
                                                     "TagA" if int(i) % 2 == 0 else "TagB"), c
        assert (c["queue_id"], c["queue_offset"], c["id"]) in {
            (m.queue_id, m.queue_offset, m.properties["UNIQ_KEY"]) for m in on_new[c["keys"]]}, c


def test_cpp_producer_and_consumers_ride_through_a_sigkilled_controller_mode_master(tmp_path):
    """C++ producer sending every 20 ms; C++ push group CID-live consuming since before the kill;
    SIGKILL of the master; then a fresh group, CID-fresh. Both groups get every acknowledged message
    from the new master."""
    topic, prefix = "TopicFailover", "cfo"
    os.makedirs(tmp_path / "home")
    stop, keys_file = tmp_path / "stop-producer", tmp_path / "acked-keys.txt"
    dep = start_deployment(str(tmp_path))
    clients: list[CppClient] = []
    try:
        old_master = wait_ready(dep)
        old_node = dep.broker_node(old_master)
        producer = CppClient(tmp_path, "producer", "cpp_producer_stream.py", dep.namesrv, topic, prefix, "20",
                             str(stop), "75")
        clients.append(producer)

        def acked(rs) -> list[dict]:
            return [r for r in rs if r.get("status") == 0]

        # Acknowledged sends (the topic exists), a consumer that receives them, then SIGKILL of
        # the master mid-stream.
        poll(lambda: len(acked(producer.lines())) >= 10, 30, "acknowledged sends")
        live = CppClient(tmp_path, "live", "cpp_push_keys.py", dep.namesrv, topic, "CID-live", str(keys_file), "90")
        clients.append(live)
        poll(lambda: len(live.lines()) >= 10, 30, "CID-live to consume")
        dep.cluster.nemesis.kill(old_node)
        killed_at = time.time()

        # A new master is elected from the SyncStateSet and registers as id 0.
        new_master = poll(lambda: (a := broker_addrs(dep).get(0)) not in (None, old_master) and a, 20,
                          "the name server to list a new master as brokerId 0")
        new_node = dep.broker_node(new_master)
        # The producer's sends are acknowledged again: 20 of them. (Up to the client's 30 s route
        # refresh: see the module docstring.)
        poll(lambda: sum(1 for r in acked(producer.lines()) if r["start"] > killed_at) >= 20, 50,
             "20 acknowledged sends after the kill")
        stop.touch()
        sent = producer.finish(30)

        before = [r for r in sent if r["end"] < killed_at]
        failed = [r for r in sent if r["end"] >= killed_at and r.get("status") != 0]
        ok = acked(sent)
        ok_after = [r for r in ok if r["start"] > killed_at]
        assert before and all(r.get("status") == 0 for r in before), before[-3:]
        # Sends succeed again, and keep succeeding, once they do.
        first_ok_after = min(r["i"] for r in ok_after)
        assert all(r.get("status") == 0 for r in sent if r["i"] >= first_ok_after), [
            r for r in sent if r["i"] >= first_ok_after and r.get("status") != 0]

        # Every acknowledged message is on the new master (replicated before its SEND_OK), at the
        # queue offset its SendResult reported; those acknowledged after the kill were stored by the
        # new master: the dead master's files, read from disk, never had them. (The C++ SendResult
        # carries the client's message id, which names no broker.)
        keys = {f"{prefix}-key-{r['i']}": r for r in ok}
        on_new = stored_copies(dep.cluster.store_dir(new_node), topic)
        on_old = stored_copies(dep.cluster.store_dir(old_node), topic)
        assert set(keys) <= set(on_new), sorted(set(keys) - set(on_new))[:5]
        assert all(r["offset"] in {m.queue_offset for m in on_new[k]} for k, r in keys.items())
        assert all(f"{prefix}-key-{r['i']}" in on_old for r in before)
        assert not any(f"{prefix}-key-{r['i']}" in on_old for r in ok_after)

        # The consumers stop once they have every acknowledged key (written atomically: CID-live
        # polls for the file).
        keys_file.with_suffix(".tmp").write_text("".join(k + "\n" for k in sorted(keys)))
        os.replace(keys_file.with_suffix(".tmp"), keys_file)
        fresh = CppClient(tmp_path, "fresh", "cpp_push_keys.py", dep.namesrv, topic, "CID-fresh", str(keys_file), "40")
        clients.append(fresh)
        consumed_live, consumed_fresh = live.finish(90), fresh.finish(60)
        for consumed in (consumed_live, consumed_fresh):
            assert set(keys) <= {c["keys"] for c in consumed}, sorted(set(keys) - {c["keys"] for c in consumed})[:5]
            check_consumed(consumed, prefix, on_new)
        # CID-live consumed on both sides of the kill: the old master's messages before, the new
        # master's after (the ones only the new master ever stored).
        assert any(c["t"] < killed_at for c in consumed_live)
        assert any(c["keys"] not in on_old for c in consumed_live)
        assert not dep.cluster.alive(old_node)
        print(f"sends: {len(before)} acknowledged before the kill, {len(failed)} failed during the outage, "
              f"{len(ok_after)} acknowledged by the new master; producer outage "
              f"{min(r['end'] for r in ok_after) - killed_at:.1f} s; CID-live delivered "
              f"{len(consumed_live)}, CID-fresh {len(consumed_fresh)}")
    finally:
        for client in clients:
            client.kill()
        dep.cluster.close()
