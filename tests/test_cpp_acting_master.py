"""Slave acting master (RIP-32) on real processes with the Apache RocketMQ C++ client (PyPI
`rocketmq` 0.4.4).

The deployment is conf/acting-master/ started as an operator starts it (`rmqlab namesrv -c`,
`rmqlab broker -c`, tests.deployment_helpers.start_acting_deployment): group broker-a with its
three replicas (ids 0, 1, 2) and broker-b's master, every broker with enableSlaveActingMaster and
enableRemoteEscape, the name server with supportActingMaster and notifyMinBrokerIdChanged.

The test, once with pre-online and once with skipPreOnline=true:
1. C++ group CID-live consumes from the start. The producer sends plain messages, then delayed
   ones (delay level 3, 10 s), to both groups.
2. broker-a's master gets SIGKILL before the delayed messages fall due. The name server shows
   broker-a-s1 as broker-a's brokerId 0, read-only.
3. broker-a-s1 delivers the delayed messages that fall due meanwhile: its schedule service sends
   them through EscapeBridge to broker-b's master, and CID-live gets them on time.
4. A new group, CID-fresh, consumes every message of broker-a from the acting master, then stops.
   The producer, started again, sends only to broker-b.
5. The master comes back, and CID-fresh starts again. It reads its offsets from the master, which
   is brokerId 0 again:
   * with pre-online, the master took the acting master's consumer offsets before it registered:
     nothing is consumed twice;
   * with skipPreOnline, the master registered with its own offsets, which never saw CID-fresh:
     the group consumes broker-a's messages again (the rollback pre-online prevents).

bench/bench_acting_master.py times steps 2 to 4 on the same deployment.
"""

from __future__ import annotations

import os
import time

import pytest

from rmqlab.common.constant.perm_name import PermName
from rmqlab.common.topic.topic_validator import TopicValidator
from tests.cpp_helpers import CppClient, stored_copies, write_keys
from tests.deployment_helpers import ACTING_GROUP_A, ACTING_TOPIC, create_topic, poll, route_of_a, start_acting_deployment

pytestmark = pytest.mark.real

TOPIC = ACTING_TOPIC

SCHEDULE_TOPIC = TopicValidator.RMQ_SYS_SCHEDULE_TOPIC
DELAY_LEVEL, DELAY_S = "3", 10.0    # messageDelayLevel "1s 5s 10s ...": level 3 is 10 s
# How late a delayed message that fell due in the outage may arrive: the acting master's schedule
# service looks at each level every 100 ms; then the escape to broker-b and CID-live's long poll.
LATE_S = 3.0


def offsets_file(store_dir: str) -> str:
    """A broker's config/consumerOffset.json as it is on disk ("" before its first persist)."""
    try:
        with open(os.path.join(store_dir, "config", "consumerOffset.json")) as f:
            return f.read()
    except FileNotFoundError:
        return ""


@pytest.mark.parametrize("pre_online", [True, False], ids=["pre-online", "skipPreOnline"])
def test_cpp_clients_ride_through_a_killed_master_with_slave_acting_master(tmp_path, pre_online):
    os.makedirs(tmp_path / "home")
    dep = start_acting_deployment(str(tmp_path), skip_pre_online=not pre_online)
    master, acting = dep.brokers["broker-a"], dep.brokers["broker-a-s1"]
    store = {node: dep.cluster.store_dir(node) for node in dep.brokers}
    clients: list[CppClient] = []

    def run(name: str, script: str, *args: str) -> CppClient:
        client = CppClient(tmp_path, name, script, *args)
        clients.append(client)
        return client

    try:
        poll(lambda: create_topic(dep, TOPIC) or True, 30, "the topic created on every broker")
        poll(lambda: route_of_a(dep) == (master, PermName.PERM_READ | PermName.PERM_WRITE), 30,
             "broker-a's master in the route, read-write")
        live_keys = tmp_path / "live-keys.txt"
        live = run("live", "cpp_push_keys.py", dep.namesrv, TOPIC, "CID-live", str(live_keys), "120")

        # 1. Plain messages, consumed by CID-live (which commits its offsets to broker-a's master).
        plain = run("plain", "cpp_producer.py", dep.namesrv, TOPIC, "24", "pl").finish(60)
        assert all(r.get("status") == 0 for r in plain), plain
        if pre_online:
            # A cluster that has run for a while: each slave has taken the master's consumer offsets
            # and their DataVersion (SlaveSynchronize, once a minute) and the master has persisted
            # them. See the module docstring for why pre-online needs it.
            poll(lambda: all(f"{TOPIC}@CID-live" in offsets_file(store[n]) for n in ACTING_GROUP_A), 120,
                 "the slaves' first metadata sync with the master", interval_s=0.5)
        # Then delayed messages, to both groups.
        delayed = run("delayed", "cpp_producer.py", dep.namesrv, TOPIC, "8", "dl", DELAY_LEVEL).finish(60)
        assert all(r.get("status") == 0 for r in delayed), delayed
        # The master's share, read from its commit log; both slaves must hold it before the kill
        # (asynchronous replication: a message not yet copied is lost with the master, as RocketMQ's).
        on_master = set(stored_copies(store["broker-a"], TOPIC))
        delayed_on_master = set(stored_copies(store["broker-a"], SCHEDULE_TOPIC))
        assert on_master and delayed_on_master, "the producer sent nothing to broker-a"
        for slave in ("broker-a-s1", "broker-a-s2"):
            poll(lambda: on_master <= set(stored_copies(store[slave], TOPIC))
                 and delayed_on_master <= set(stored_copies(store[slave], SCHEDULE_TOPIC)), 20,
                 f"{slave} to replicate broker-a's messages")
        due = {f"dl-key-{r['i']}": r["end"] + DELAY_S for r in delayed}
        assert time.time() < min(due.values()) - 1, "the delayed messages fell due before the kill"

        # 2. SIGKILL: the smallest-id slave is brokerId 0 of a read-only group.
        dep.cluster.nemesis.kill("broker-a")
        killed_at = time.time()
        poll(lambda: route_of_a(dep) == (acting, PermName.PERM_READ), 20,
             "broker-a-s1 as broker-a's brokerId 0, read-only")

        # 3. The delayed messages fall due in the outage: delivered on time through the escape.
        write_keys(live_keys, set(due) | {f"pl-key-{r['i']}" for r in plain})
        consumed_live = live.finish(90)
        got = {}
        for c in consumed_live:
            got.setdefault(c["keys"], c["t"])
        assert set(due) <= set(got), sorted(set(due) - set(got))
        for key in delayed_on_master:
            assert due[key] - 0.5 <= got[key] <= due[key] + LATE_S, (key, got[key] - due[key])
        escaped = stored_copies(store["broker-b"], TOPIC)
        assert delayed_on_master <= set(escaped), "the acting master's deliveries are not on broker-b"
        assert all(m.store_timestamp / 1000 > killed_at for k in delayed_on_master for m in escaped[k])

        # 4. A new group consumes every message of broker-a from the acting master; the producer
        # sends to broker-b only.
        fresh_keys = tmp_path / "fresh-keys.txt"
        write_keys(fresh_keys, on_master)
        consumed_fresh = run("fresh", "cpp_push_keys.py", dep.namesrv, TOPIC, "CID-fresh", str(fresh_keys),
                             "60").finish(90)
        assert on_master <= {c["keys"] for c in consumed_fresh}
        during = run("during", "cpp_producer.py", dep.namesrv, TOPIC, "16", "du").finish(60)
        assert all(r.get("status") == 0 for r in during), during
        on_b = set(stored_copies(store["broker-b"], TOPIC))
        assert {f"du-key-{r['i']}" for r in during} <= on_b
        assert not any(k.startswith("du-") for k in stored_copies(store["broker-a-s1"], TOPIC))

        # 5. The master returns; CID-fresh starts again and reads its offsets from it.
        dep.cluster.nemesis.restart("broker-a")
        poll(lambda: route_of_a(dep) == (master, PermName.PERM_READ | PermName.PERM_WRITE), 60,
             "broker-a's master back in the route, read-write")
        after = run("after", "cpp_producer.py", dep.namesrv, TOPIC, "16", "af").finish(60)
        assert all(r.get("status") == 0 for r in after), after
        after_on_a = set(stored_copies(store["broker-a"], TOPIC)) - on_master
        assert after_on_a, "the returning master took no new message"
        write_keys(fresh_keys, after_on_a)
        again = run("fresh-again", "cpp_push_keys.py", dep.namesrv, TOPIC, "CID-fresh", str(fresh_keys),
                    "60").finish(90)
        assert after_on_a <= {c["keys"] for c in again}
        consumed_twice = on_master & {c["keys"] for c in again}
        if pre_online:
            assert not consumed_twice, sorted(consumed_twice)
        else:
            assert consumed_twice == on_master, sorted(on_master - consumed_twice)
        print(f"pre_online={pre_online}: broker-a held {len(on_master)} plain and {len(delayed_on_master)} "
              f"delayed messages; delayed lateness "
              f"{sorted(round(got[k] - due[k], 2) for k in delayed_on_master)} s; "
              f"CID-fresh consumed {len(consumed_twice)} of broker-a's messages twice")
    finally:
        for client in clients:
            client.kill()
        dep.cluster.close()
