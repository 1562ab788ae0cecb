"""DLedger CommitLog mode on real processes with the Apache RocketMQ C++ client (PyPI `rocketmq`
0.4.4), through a SIGKILL of the leader.

The deployment is `Cluster("dledger", runtime="real", relay=False)`: one `rmqlab namesrv` and
three `rmqlab broker -c` processes from conf/dledger/ (group RaftNode00, three DLedger members)
on free ports, connected directly (the C++ client dials the addresses the brokers advertise).
The topic is created on all three members: a follower copies topic configs from its master only
at its SlaveSynchronize run, every 10 s, and the follower elected next must know the topic.

The test: the C++ producer sends every 20 ms; a C++ push consumer, group CID-live, consumes. The
leader, which is master, gets SIGKILL. The followers stop hearing its heartbeats and, after
maxHeartBeatLeak (3) x heartBeatTimeIntervalMs (2 s), elect a new leader; DLedgerRoleChangeHandler
makes it master once it has applied what the old leader committed, and it registers as brokerId 0.
Meanwhile the producer's sends fail (allowed). Then a fresh group, CID-fresh, starts. Both groups
must get every message the producer saw acknowledged (SEND_OK), before and after the kill:
Jepsen's total queue (rmqlab.checker.checkers.check_total_queue) over a history built from the
clients' output (each send an operation from its start to its result, each delivery a consume).

How long the C++ client takes (rocketmq-client-cpp 1.2.x; tests/test_cpp_controller_failover.py
says more): the producer refreshes its routes 3 s after start, then every 30 s, and sends to the
master of its cached route until a refresh shows another; a consumer's pull long-polling on the
dead master ends at its 30 s timeout. A refresh that falls in the election (the name server
dropped the dead master when its connection closed) finds no writable queue, and from then on
every send fetches the route: sends resume as soon as the new master has registered (observed:
6.5 s after the kill, the election's 6 s plus ~0.5 s). A refresh that falls before the kill and
none during the election would leave them failing until the next, up to 30 s later. The waits
are bounded accordingly; the test takes about 60 s.
"""

from __future__ import annotations

import os
import time
import zlib

import pytest

from rmqlab.checker.checkers import check_total_queue
from rmqlab.cluster import Cluster
from rmqlab.trace.event import TraceEvent
from tests.cpp_helpers import CppClient, write_keys
from tests.deployment_helpers import poll

TOPIC, PREFIX, GROUP = "TopicDLedger", "dl", "RaftNode00"


def create_topic_on_every_member(c: Cluster) -> None:
    """updateTopic on each of the group's three members, once all three registered."""
    from rmqlab.common.topic_config import TopicConfig

    async def create(admin, now_ms) -> None:
        info = await admin.examine_broker_cluster_info()
        addrs = list(info.broker_addr_table[GROUP].broker_addrs.values())
        assert len(addrs) == 3, addrs
        for addr in addrs:
            await admin.create_and_update_topic_config(addr, TopicConfig(TOPIC, 4, 4))

    poll(lambda: c.admin(create) or True, 30, "the topic created on all three members", interval_s=0.3)


def route_master(c: Cluster) -> str | None:
    """RaftNode00's brokerId 0 in the name server's cluster info."""
    found: list[str | None] = []

    async def fn(admin, now_ms) -> None:
        data = (await admin.examine_broker_cluster_info()).broker_addr_table.get(GROUP)
        found.append(data.broker_addrs.get(0) if data is not None else None)

    c.admin(fn)
    return found[0]


def history(sent: list[dict], consumed: dict[str, list[dict]]) -> list[TraceEvent]:
    """The clients' output as Jepsen-style `client` events. The message key (PREFIX-key-i) stands
    for the UNIQ_KEY: the C++ client resends an unanswered attempt under a new message id and
    reports only the last, so one logical send may be stored under several ids. A send answered
    with an exception is indeterminate (info): it may have been stored before the error."""
    events: list[tuple[float, str, dict]] = []

    def msg(key: str, body: str) -> dict:
        return {"topic": TOPIC, "uniq_key": key, "body_crc": zlib.crc32(body.encode())}

    for r in sent:
        key, op = f"{PREFIX}-key-{r['i']}", {"process": 0, "f": "send", "op_id": r["i"]}
        events.append((r["start"], "producer", {**op, "type": "invoke", "value": msg(key, f"{PREFIX} body {r['i']}")}))
        if "error" in r:
            events.append((r["end"], "producer", {**op, "type": "info", "value": None, "error": r["error"]}))
        else:
            events.append((r["end"], "producer", {**op, "type": "ok", "value": {
                "send_status": "SEND_OK" if r["status"] == 0 else str(r["status"]), "queue_offset": r["offset"]}}))
    for node, deliveries in consumed.items():
        for n, d in enumerate(deliveries):
            op = {"process": 0, "f": "consume", "op_id": n}
            value = {**msg(d["keys"], d["body"]), "queue_id": d["queue_id"], "queue_offset": d["queue_offset"]}
            events.append((d["t"], node, {**op, "type": "invoke", "value": value}))
            events.append((d["t"], node, {**op, "type": "ok", "value": None}))
    events.sort(key=lambda e: e[0])  # stable: an invoke stays before its completion
    return [TraceEvent(seq, t * 1000, node, "client", fields) for seq, (t, node, fields) in enumerate(events)]


def test_the_clients_output_as_a_history_finds_what_the_total_queue_forbids():
    """`history` feeds check_total_queue what it needs: an acknowledged send never consumed is
    lost, a send answered with an exception is indeterminate, a key consumed twice is no
    violation, a key never sent is unexpected."""
    sent = [{"i": 0, "start": 1.0, "end": 1.1, "status": 0, "offset": 0},
            {"i": 1, "start": 1.2, "end": 1.3, "status": 0, "offset": 1},
            {"i": 2, "start": 1.4, "end": 4.0, "error": "send timeout"}]

    def got(i: int, t: float) -> dict:
        return {"t": t, "keys": f"{PREFIX}-key-{i}", "body": f"{PREFIX} body {i}", "queue_id": 0, "queue_offset": i}

    ok = check_total_queue(history(sent, {"c": [got(0, 2.0), got(1, 2.1), got(1, 2.2)]}), topic=TOPIC)
    assert ok.valid and ok.stats["acknowledged"] == 2, ok
    lost = check_total_queue(history(sent, {"c": [got(0, 2.0), got(2, 5.0)]}), topic=TOPIC)
    assert [v.what for v in lost.violations] == ["lost"] and f"{PREFIX}-key-1" in lost.violations[0].message
    stray = check_total_queue(history(sent, {"c": [got(0, 2.0), got(1, 2.1), got(7, 2.2)]}), topic=TOPIC)
    assert [v.what for v in stray.violations] == ["unexpected"], stray


@pytest.mark.real
def test_cpp_producer_and_consumers_ride_through_a_sigkilled_dledger_leader(tmp_path):
    os.makedirs(tmp_path / "home")
    stop, keys_file = tmp_path / "stop-producer", tmp_path / "acked-keys.txt"
    c = Cluster("dledger", runtime="real", seed=20, root_dir=str(tmp_path / "cluster"), relay=False)
    clients: list[CppClient] = []
    try:
        c.start(timeout_ms=30_000)
        c.run_until(lambda: c.master() is not None, 30_000, poll_ms=200)
        create_topic_on_every_member(c)
        old, old_addr = c.master(), route_master(c)
        producer = CppClient(tmp_path, "producer", "cpp_producer_stream.py", c.namesrv_addr, TOPIC, PREFIX, "20",
                             str(stop), "120")
        clients.append(producer)

        def acked(rs) -> list[dict]:
            return [r for r in rs if r.get("status") == 0]

        poll(lambda: len(acked(producer.lines())) >= 10, 30, "acknowledged sends")
        live = CppClient(tmp_path, "live", "cpp_push_keys.py", c.namesrv_addr, TOPIC, "CID-live", str(keys_file),
                         "120")
        clients.append(live)
        poll(lambda: len(live.lines()) >= 10, 30, "CID-live to consume")

        c.nemesis.kill(old)
        killed_at = time.time()
        # The followers elect after 3 missed heartbeats (6 s); the new leader becomes master and
        # registers as brokerId 0.
        c.run_until(lambda: c.master() not in (None, old), 30_000, poll_ms=200)
        new = c.master()
        poll(lambda: route_master(c) not in (None, old_addr), 20, "the new master as brokerId 0 in the route")
        # Sends resume at the producer's next route refresh (every 30 s): 20 acknowledged after the kill.
        poll(lambda: sum(1 for r in acked(producer.lines()) if r["start"] > killed_at) >= 20, 50,
             "20 acknowledged sends after the kill")
        stop.touch()
        sent = producer.finish(30)

        ok = acked(sent)
        before = [r for r in sent if r["end"] < killed_at]
        ok_after = [r for r in ok if r["start"] > killed_at]
        assert before and all(r.get("status") == 0 for r in before), before[-3:]
        first_ok_after = min(r["i"] for r in ok_after)
        assert all(r.get("status") == 0 for r in sent if r["i"] >= first_ok_after), [
            r for r in sent if r["i"] >= first_ok_after and r.get("status") != 0]
        # No send is acknowledged between the kill and the new leader's becoming master: a write
        # needs a leader, and a quorum.
        became_master = min(e.time_ms for e in c.events() if e.kind == "role" and e.node == new
                            and e.fields.get("component", "broker") == "broker"
                            and e.fields.get("to") == "SYNC_MASTER") / 1000
        assert not [r for r in ok if killed_at < r["end"] < became_master], "acknowledged without a master"
        assert min(r["end"] for r in ok_after) >= became_master

        write_keys(keys_file, {f"{PREFIX}-key-{r['i']}" for r in ok})
        fresh = CppClient(tmp_path, "fresh", "cpp_push_keys.py", c.namesrv_addr, TOPIC, "CID-fresh", str(keys_file),
                          "60")
        clients.append(fresh)
        consumed = {"live": live.finish(120), "fresh": fresh.finish(70)}
        assert not c.alive(old)
    finally:
        for client in clients:
            client.kill()
        c.close()

    for node, deliveries in consumed.items():
        result = check_total_queue(history(sent, {node: deliveries}), topic=TOPIC)
        assert result.valid and result.stats["lost"] == 0 and result.stats["acknowledged"] == len(ok), (node, result)
    # CID-live consumed on both sides of the kill: messages of the old leader, and of the new one.
    assert any(d["t"] < killed_at for d in consumed["live"])
    assert any(d["keys"] in {f"{PREFIX}-key-{r['i']}" for r in ok_after} for d in consumed["live"])
    print(f"sends: {len(before)} acknowledged before the kill, {len(ok_after)} after; producer outage "
          f"{min(r['end'] for r in ok_after) - killed_at:.1f} s (new master after "
          f"{became_master - killed_at:.1f} s); CID-live delivered {len(consumed['live'])}, "
          f"CID-fresh {len(consumed['fresh'])}")
