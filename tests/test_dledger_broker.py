"""The broker in DLedger CommitLog mode on the simulator: its configuration, DLedgerCommitLog (each
message one DLedger entry, consume queues only up to the commit point, a put answered once a
quorum holds it), the role changes (leader -> master, follower -> slave) and failover."""

from __future__ import annotations

import warnings
from pathlib import Path

import pytest

from rmqlab.checker.checkers import check_total_queue, send_acknowledged
from rmqlab.client import ClientProcess, DefaultMQProducer, DefaultMQPullConsumer, SendStatus
from rmqlab.client.exceptions import MQBrokerException
from rmqlab.cluster import Cluster
from rmqlab.common.message.message import Message
from rmqlab.common.message.message_decoder import decode, decode_message_id
from rmqlab.config import ConfigError, load_broker_config
from rmqlab.config.broker import BrokerRole
from rmqlab.dledger.entry import dledger_entry_coder
from rmqlab.dledger.protocol.dledger_response_code import DLedgerResponseCode as Code
from rmqlab.store.dledger.dledger_commit_log import dledger_config_of, put_message_status_of
from rmqlab.store.put_message_result import PutMessageStatus
from rmqlab.trace import client_ops
from tests.cluster_helpers import TOPIC, send, start

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


# -- DLedgerCommitLog ----------------------------------------------------------------------------
@pytest.mark.parametrize("code, status", [
    (Code.SUCCESS, PutMessageStatus.PUT_OK),
    (Code.INCONSISTENT_LEADER, PutMessageStatus.SERVICE_NOT_AVAILABLE),
    (Code.NOT_LEADER, PutMessageStatus.SERVICE_NOT_AVAILABLE),
    (Code.LEADER_NOT_READY, PutMessageStatus.SERVICE_NOT_AVAILABLE),
    (Code.DISK_FULL, PutMessageStatus.SERVICE_NOT_AVAILABLE),
    (Code.WAIT_QUORUM_ACK_TIMEOUT, PutMessageStatus.IN_SYNC_REPLICAS_NOT_ENOUGH),
    (Code.LEADER_PENDING_FULL, PutMessageStatus.OS_PAGE_CACHE_BUSY),
    (Code.TERM_CHANGED, PutMessageStatus.UNKNOWN_ERROR),
    (Code.NETWORK_ERROR, PutMessageStatus.UNKNOWN_ERROR),
])
def test_a_completed_append_maps_to_rocketmq_put_status(code, status):
    assert put_message_status_of(int(code)) is status


# -- a DLedger group of brokers on the simulator ---------------------------------------------------
def dledger_cluster(seed: int, mode: str = "dledger", **overrides) -> Cluster:
    """The mode's group started, a master elected, and a producer that neither retries nor gives
    up before DLedger answers (each send shows the broker's own answer)."""
    c = start(mode, seed=seed, **overrides)
    c.run_until(lambda: c.master() is not None, 30_000)
    c.add_client("p1", lambda: ClientProcess(producer=DefaultMQProducer(
        "PG1", c.namesrv_addr, send_msg_timeout=20_000, retry_times_when_send_failed=0)))
    send(c, 1, "warm")  # the topic is created on the master and routed
    # The slaves learn the topic from SlaveSynchronize (syncAll when 10 s passed, checked every 3 s);
    # a slave elected master before that does not know it, in RocketMQ as here.
    c.run_for(13_000)
    return c


def send_one(c: Cluster, body: str):
    p = c.sim.components["p1"]["producer"]

    async def go():
        try:
            return await p.send(Message(TOPIC, body.encode()))
        except Exception as e:  # noqa: BLE001 - the failure is the result
            return e

    return c.sim.run(go())


def broker_error(e: BaseException | object) -> tuple[int, str] | None:
    """The broker's answer behind a failed send (the producer wraps it once it gives up)."""
    while isinstance(e, BaseException) and not isinstance(e, MQBrokerException):
        e = e.__cause__
    return (e.response_code, e.error_message) if isinstance(e, MQBrokerException) else None


def dledger_store(c: Cluster, node: str):
    return c.components[node].message_store.commit_log.dledger_file_store


def holders(c: Cluster, end_offset: int) -> int:
    """How many running replicas have written DLedger data up to `end_offset`."""
    return sum(1 for b in c.brokers if c.alive(b)
               and dledger_store(c, b).get_data_file_list().get_max_wrote_position() >= end_offset)


def followers(c: Cluster) -> list[str]:
    return [b for b in c.brokers if b != c.master()]


def sent_ok_after(c: Cluster, t: float) -> list:
    return [op for op in client_ops(c.events()) if op.f == "send" and send_acknowledged(op) and op.invoke_time_ms > t]


@pytest.mark.parametrize("batch_push", [False, True])
def test_send_ok_only_once_a_majority_stored_the_entry_and_every_replica_holds_the_same_bytes(batch_push):
    c = dledger_cluster(seed=11, enableBatchPush=batch_push)
    try:
        leader, others = c.master(), followers(c)
        # Slow the leader's pushes: an answer given before a follower stored the entry would show.
        c.nemesis.set_delay([leader], others, 40, 40)
        p = c.sim.components["producer"]["producer"]
        seen = []

        async def go():
            for i in range(10):
                r = await p.send(Message(TOPIC, f"m-{i}".encode()))
                _, offset = decode_message_id(r.offset_msg_id)
                size = len(c.components[leader].message_store.commit_log.get_message(offset, 4))
                assert size == 4
                total = int.from_bytes(c.components[leader].message_store.commit_log.get_message(offset, 4), "big")
                seen.append((r, offset, total, holders(c, offset + total)))

        c.sim.run(go())
        assert all(r.send_status is SendStatus.SEND_OK for r, *_ in seen)
        assert all(h >= 2 for *_, h in seen), [h for *_, h in seen]
        c.nemesis.heal()
        c.run_for(2_000)  # the followers learn the last commit index (COMMIT when idle, 1 s)
        for r, offset, total, _ in seen:
            datas = {b: c.components[b].message_store.commit_log.get_message(offset - 48, 48 + total) for b in c.brokers}
            assert len(set(datas.values())) == 1, r  # the same entry, byte for byte, on every replica
            entry = next(iter(datas.values()))
            msg = decode(entry[48:], 0)
            # The message sits in the body of a DLedger entry at pos = offset - 48, and says so.
            assert msg.commit_log_offset == offset and dledger_entry_coder.decode(entry).pos == offset - 48
            assert msg.queue_offset == r.queue_offset
        queues = {b: [c.components[b].message_store.get_max_offset_in_queue(TOPIC, q) for q in range(4)]
                  for b in c.brokers}
        assert len({tuple(v) for v in queues.values()}) == 1 and sum(queues[leader]) == 11
    finally:
        c.close()


def test_consume_queues_hold_only_committed_messages():
    """A leader cut off from its followers still appends, but neither it nor anyone dispatches
    the entries a quorum does not hold: consumers cannot read them, and they are gone (truncated by
    the next leader) when it rejoins."""
    c = dledger_cluster(seed=12)
    try:
        leader, others = c.master(), followers(c)
        store = c.components[leader].message_store
        c.run_for(100)  # the warm-up message dispatched
        before = [store.get_max_offset_in_queue(TOPIC, q) for q in range(4)]
        committed = dledger_store(c, leader).get_committed_index()
        c.nemesis.partition([leader], others)
        t0 = c.now_ms()
        p = c.sim.components["p1"]["producer"]
        task = c.sim.nodes["p1"].spawn(p.send(Message(TOPIC, b"cut-off")))
        c.run_for(1_000)
        assert dledger_store(c, leader).get_ledger_end_index() == committed + 1  # appended...
        assert dledger_store(c, leader).get_committed_index() == committed      # ...not committed
        assert [store.get_max_offset_in_queue(TOPIC, q) for q in range(4)] == before  # nor dispatched
        assert store.dispatch_behind_bytes() == 0 and store.get_max_phy_offset() == dledger_store(c, leader).get_committed_pos()
        c.run_until(task.done, 10_000)
        # maxWaitAckTimeMs (2.5 s) without a quorum: IN_SYNC_REPLICAS_NOT_ENOUGH, SYSTEM_ERROR to the client.
        assert broker_error(task.exception()) == (1, "in-sync replicas not enough")
        c.run_until(lambda: c.master() not in (None, leader), 30_000)
        c.nemesis.heal()
        c.run_until(lambda: dledger_store(c, leader).get_ledger_end_index()
                    == dledger_store(c, c.master()).get_ledger_end_index(), 20_000)
        new = dledger_store(c, c.master())
        old = dledger_store(c, leader)
        end = new.get_ledger_end_index()
        assert [old.get(i) for i in range(end + 1)] == [new.get(i) for i in range(end + 1)]
        assert b"cut-off" not in b"".join(new.get(i).body for i in range(end + 1))  # truncated away
        assert not sent_ok_after(c, t0)
        read_all(c, "reader")
        result = check_total_queue(c.events(), topic=TOPIC)
        assert result.valid, result
    finally:
        c.close()


def read_all(c: Cluster, name: str) -> set[str]:
    """A fresh pull consumer reads every queue of the topic from the master (its pulls are in the
    trace, where check_total_queue finds them); the UNIQ_KEYs read."""
    return set(read_messages(c, name))


def read_messages(c: Cluster, name: str) -> dict:
    """read_all's messages, by UNIQ_KEY."""
    c.add_client(name, lambda: ClientProcess(consumer=DefaultMQPullConsumer(name, c.namesrv_addr)))
    consumer = c.sim.components[name]["consumer"]

    async def read():
        found = {}
        for mq in await consumer.fetch_subscribe_message_queues(TOPIC):
            offset = 0
            while True:
                r = await consumer.pull(mq, "*", offset, 32)
                if not r.msg_found_list:
                    break
                found.update((m.get_property("UNIQ_KEY"), m) for m in r.msg_found_list)
                offset = r.next_begin_offset
        return found

    return c.sim.run(read())


def acked_keys(c: Cluster) -> set[str]:
    return {op.invoke_value["uniq_key"] for op in client_ops(c.events()) if op.f == "send" and send_acknowledged(op)}


def test_a_new_leader_becomes_master_after_the_leader_is_killed_and_nothing_acknowledged_is_lost():
    c = dledger_cluster(seed=13)
    try:
        old = c.master()
        send(c, 20, "before")
        t_kill = c.now_ms()
        c.nemesis.kill(old)
        # The followers notice after maxHeartBeatLeak x heartBeatTimeIntervalMs (6 s) and elect a
        # leader, which becomes master once it has committed and dispatched its log.
        c.run_until(lambda: c.master() not in (None, old), 30_000)
        new = c.master()
        broker = c.components[new]
        assert broker.broker_config.brokerId == 0 and broker.message_store_config.brokerRole is BrokerRole.SYNC_MASTER
        store = dledger_store(c, new)
        assert store.get_ledger_end_index() == store.get_committed_index()
        # The name server's route names it master (id 0), the other survivor a slave (its n + 1).
        table = c.components["namesrv"].route_info_manager.broker_addr_table["RaftNode00"].broker_addrs
        assert table[0] == c.components[new].broker_addr
        survivor = next(b for b in c.brokers if b not in (old, new))
        assert table[int(survivor[-1]) + 1] == c.components[survivor].broker_addr
        c.run_for(35_000)  # the producer's route refresh (30 s)
        after = send(c, 20, "after")
        assert all(getattr(r, "send_status", None) is SendStatus.SEND_OK for r in after), after
        c.nemesis.restart(old)  # it rejoins as a follower, and a slave
        c.run_until(lambda: c.components[old].message_store_config.brokerRole is BrokerRole.SLAVE
                    if c.alive(old) and c.components[old].message_store is not None else False, 30_000)
        assert c.master() == new and c.components[old].broker_config.brokerId == int(old[-1]) + 1
        keys = read_all(c, "reader")
        assert acked_keys(c) <= keys and len(acked_keys(c)) == 41
        result = check_total_queue(c.events(), topic=TOPIC)
        assert result.valid, result
        assert sent_ok_after(c, t_kill)
    finally:
        c.close()


def test_two_of_three_down_sends_fail_and_nothing_is_acknowledged_until_a_majority_is_back():
    c = dledger_cluster(seed=14)
    try:
        leader, others = c.master(), followers(c)
        send(c, 5, "before")
        t_down = c.now_ms()
        for node in others:
            c.nemesis.kill(node)
        first = send_one(c, "alone-1")
        # No quorum within maxWaitAckTimeMs: IN_SYNC_REPLICAS_NOT_ENOUGH -> SYSTEM_ERROR (1).
        assert broker_error(first) == (1, "in-sync replicas not enough")
        # Without a quorum's heartbeats for 6 s the leader steps down (CANDIDATE): the broker is a
        # SLAVE and refuses sends at once, SYSTEM_BUSY (2), as a RocketMQ slave does (rejectRequest).
        c.run_until(lambda: c.components[leader].message_store_config.brokerRole is BrokerRole.SLAVE, 20_000)
        later = send_one(c, "alone-2")
        assert broker_error(later) == (2, "[REJECTREQUEST]system busy, start flow control for a while")
        assert not sent_ok_after(c, t_down)
        t_back = c.now_ms()
        c.nemesis.restart(others[0])  # a majority again: a leader, a master, sends succeed
        c.run_until(lambda: c.master() is not None and c.master() in (leader, others[0])
                    and any(e.kind == "role" and e.time_ms > t_back and e.fields["to"] == "SYNC_MASTER"
                            for e in c.events()), 60_000)
        c.run_for(35_000)
        back = send(c, 5, "back")
        assert all(getattr(r, "send_status", None) is SendStatus.SEND_OK for r in back), back
        keys = read_all(c, "reader")
        assert acked_keys(c) <= keys
        result = check_total_queue(c.events(), topic=TOPIC)
        assert result.stats["lost"] == 0
        # RocketMQ's quirk: a put that timed out waiting for the quorum stays in the leader's log,
        # and is committed once a majority is back under that leader (the longest log wins the
        # vote), so a send the producer was told failed (SYSTEM_ERROR, no retry here) can be read.
        # The history records such a send as indeterminate (info: rmqlab.client.exceptions.
        # outcome_unknown), so reading it is no violation; the test shows some were read.
        timed_out = {op.invoke_value["uniq_key"] for op in client_ops(c.events()) if op.f == "send"
                     and op.type == "info" and "CODE: 1  DESC" in str(op.error)}  # SYSTEM_ERROR
        assert timed_out and timed_out & keys and result.valid, result
    finally:
        c.close()


def test_a_follower_machine_crash_and_restart_catches_up():
    c = dledger_cluster(seed=15)
    try:
        leader = c.master()
        follower = followers(c)[0]
        send(c, 10, "before")
        c.nemesis.crash(follower)  # power loss: its unflushed tail is gone
        during = send(c, 10, "during")  # two of three: still a quorum
        assert all(getattr(r, "send_status", None) is SendStatus.SEND_OK for r in during), during
        c.nemesis.restart(follower)
        lead, back = dledger_store(c, leader), lambda: dledger_store(c, follower)
        c.run_until(lambda: c.components[follower].message_store is not None
                    and back().get_committed_index() == lead.get_committed_index(), 30_000)
        c.run_for(500)  # its dispatcher
        assert [back().get(i) for i in range(lead.get_ledger_end_index() + 1)] == \
            [lead.get(i) for i in range(lead.get_ledger_end_index() + 1)]
        for q in range(4):
            assert (c.components[follower].message_store.get_max_offset_in_queue(TOPIC, q)
                    == c.components[leader].message_store.get_max_offset_in_queue(TOPIC, q))
        assert c.components[follower].message_store_config.brokerRole is BrokerRole.SLAVE
        read_all(c, "reader")
        result = check_total_queue(c.events(), topic=TOPIC)
        assert result.valid, result
    finally:
        c.close()


def test_a_body_corrupted_on_a_members_disk_stops_its_recovery_scan_and_is_served_once_it_leads():
    """RocketMQ's hazard: nothing on the read path checks a message's BODYCRC in DLedger mode.
    DLedger 0.3.1.2 never fills its entries' bodyCrc; abnormal recovery (checkCRCOnRecover) stops
    its scan at the bad message and logs it, but ReputMessageService dispatches the rest again
    without a CRC check (doReput, checkCRC=false), and the client decodes without one
    (MessageDecoder.decodesBatch). Nothing acknowledged is missing; one body is wrong, and only the
    history's checker notices."""
    from rmqlab.common.java_compat import crc32  # UtilAll.crc32

    c = dledger_cluster(seed=21, preferredLeaderId="n0")
    try:
        c.run_until(lambda: c.master() == "broker-n0", 30_000)
        send(c, 10, "before")
        c.run_for(2_000)
        data_file = dledger_store(c, "broker-n0").get_data_file_list().get_mapped_files()[0].file_name
        c.nemesis.kill("broker-n0")
        c.run_until(lambda: c.master() not in (None, "broker-n0"), 30_000)
        raw = bytearray(Path(data_file).read_bytes())
        at = raw.index(b"before-1")
        raw[at] ^= 0xFF  # one byte of one body, as a bad sector would
        Path(data_file).write_bytes(bytes(raw))
        c.nemesis.restart("broker-n0")
        c.run_until(lambda: c.master() == "broker-n0", 60_000)  # preferred, and caught up
        scan = c.components["broker-n0"].message_store.load_report.recovery
        assert scan.mode == "abnormal" and scan.stop_reason.startswith("invalid message in the entry at ")
        c.run_for(35_000)  # the new master's consumers route to it
        messages = read_messages(c, "reader")
        result = check_total_queue(c.events(), topic=TOPIC)  # the checker compares what was read with what was sent
        assert result.stats["lost"] == 0 and result.stats["acknowledged"] == result.stats["read"] == 11, result
        assert [v.what for v in result.violations] == ["corrupted"], result
        bodies = sorted(m.body for m in messages.values())
        assert b"before-1" not in bodies and bytes([ord("b") ^ 0xFF]) + b"efore-1" in bodies
        bad = [m for m in messages.values() if crc32(m.body) != m.body_crc]
        assert [m.body for m in bad] == [bytes([ord("b") ^ 0xFF]) + b"efore-1"]
    finally:
        c.close()


@pytest.mark.parametrize("how", ["stop", "kill", "crash"])
def test_the_whole_group_restarts_and_serves_what_it_acknowledged(how):
    """A clean stop (normal recovery: consume queues cut to DLedger's written end), a process
    crash of every member (abnormal recovery: the committed messages dispatched again), or a power
    loss of every machine once DLedger flushed (every 10 ms) what they acknowledged."""
    c = dledger_cluster(seed=16)
    try:
        send(c, 15, "before")
        c.run_for(2_000)  # every member's commit index, hence its consume queues, caught up
        queues = {b: [c.components[b].message_store.get_max_offset_in_queue(TOPIC, q) for q in range(4)]
                  for b in c.brokers}
        for b in c.brokers:
            if how == "stop":
                c.sim.stop(b)
            elif how == "kill":
                c.nemesis.kill(b)
            else:
                c.nemesis.crash(b)
        for b in c.brokers:
            c.nemesis.restart(b)
        c.run_until(lambda: c.master() is not None and all(
            c.alive(b) and c.components[b].message_store is not None for b in c.brokers), 30_000)
        in_queues = lambda b: [c.components[b].message_store.get_max_offset_in_queue(TOPIC, q)  # noqa: E731
                               for q in range(4)]
        # A leader becomes master only once its log is committed and dispatched.
        assert in_queues(c.master()) == queues[c.master()]
        c.run_for(3_000)  # the others learn the commit index with the next push or COMMIT (1 s idle)
        for b in c.brokers:
            assert c.components[b].message_store.load_report.last_exit_ok is (how == "stop")
            assert in_queues(b) == queues[b]
        c.run_for(35_000)
        assert all(getattr(r, "send_status", None) is SendStatus.SEND_OK for r in send(c, 5, "after"))
        read_all(c, "reader")
        result = check_total_queue(c.events(), topic=TOPIC)
        assert result.valid and result.stats["acknowledged"] == 21, result
    finally:
        c.close()


def test_five_replicas_keep_writing_with_two_down_and_stop_with_three():
    c = dledger_cluster(seed=17, mode="dledger-5")
    try:
        others = followers(c)
        assert len(others) == 4
        c.nemesis.kill(others[0])
        c.nemesis.kill(others[1])
        assert send_one(c, "three-of-five-2").send_status is SendStatus.SEND_OK  # 3 of 5: a majority
        t = c.now_ms()
        c.nemesis.kill(others[2])
        assert broker_error(send_one(c, "two-of-five")) == (1, "in-sync replicas not enough")
        assert not sent_ok_after(c, t)
    finally:
        c.close()


def test_a_crashed_leader_does_not_dispatch_its_uncommitted_entries_on_recovery():
    """Deviation from RocketMQ (which dispatches every written entry in abnormal recovery): the
    entries the cut-off leader could not commit are truncated when it rejoins, so consume-queue
    units for them would point at other messages' bytes."""
    c = dledger_cluster(seed=18)
    try:
        leader, others = c.master(), followers(c)

        def units(b):
            cqs = c.components[b].message_store.consume_queue_table
            return {q: cqs[(TOPIC, q)].get_units(0, 100) for q in range(4) if (TOPIC, q) in cqs}

        c.run_for(100)
        before = units(leader)
        c.nemesis.partition([leader], others)
        p = c.sim.components["p1"]["producer"]
        for i in range(3):
            c.sim.nodes["p1"].spawn(p.send(Message(TOPIC, f"cut-off-{i}".encode())))
        c.run_for(1_000)
        assert dledger_store(c, leader).get_ledger_end_index() > dledger_store(c, leader).get_committed_index()
        c.nemesis.kill(leader)
        c.nemesis.restart(leader)  # still cut off: its log keeps the uncommitted entries
        c.run_until(lambda: c.components[leader].message_store is not None, 5_000)
        assert c.components[leader].message_store.load_report.last_exit_ok is False
        assert units(leader) == before
        c.nemesis.kill(leader)
        c.nemesis.heal()
        c.run_until(lambda: c.master() not in (None, leader), 30_000)
        c.run_for(35_000)
        send(c, 10, "new-term")  # the new leader writes where the cut-off entries were
        c.nemesis.restart(leader)
        new = c.master()
        c.run_until(lambda: c.components[leader].message_store is not None
                    and dledger_store(c, leader).get_committed_index() == dledger_store(c, new).get_committed_index(),
                    30_000)
        c.run_for(2_000)
        for q in range(4):
            units = [c.components[b].message_store.consume_queue_table[(TOPIC, q)].get_units(0, 100)
                     for b in (leader, new)]
            assert units[0] == units[1], q
        read_all(c, "reader")
        assert check_total_queue(c.events(), topic=TOPIC).stats["lost"] == 0
    finally:
        c.close()


@pytest.mark.parametrize("settings, message", [
    ({"broker-n2": {"dLegerPeers": "n0-127.0.0.1:40911;n1-127.0.0.1:40912;n2-127.0.0.1:40999"}},
     r"dLegerGroup RaftNode00: broker-n2's dLegerPeers \(n0-127.0.0.1:40911;n1-127.0.0.1:40912;"
     r"n2-127.0.0.1:40999\) differ from broker-n0's"),
    ({"broker-n1": {"dLegerSelfId": "n0"}}, r"broker-n0 and broker-n1 both have dLegerSelfId n0"),
    ({"broker-n1": {"brokerName": "Other"}}, r"its members have different brokerNames \['Other', 'RaftNode00'\]"),
])
def test_members_that_describe_different_groups_are_refused_before_anything_starts(settings, message):
    from rmqlab.cluster import MODES, DeploymentMode

    mode = DeploymentMode("dledger-bad", dict(MODES["dledger"].brokers), broker_settings=settings)
    with pytest.raises(ConfigError, match=message):
        Cluster(mode)


def test_preferred_leader_id_moves_the_master_to_the_preferred_member():
    """preferredLeaderId: a leader that is not preferred hands leadership to the preferred member
    once it is alive and caught up (DLedgerServer.checkPreferredLeader, every second); the broker
    roles follow, and sends go on to the new master."""
    c = start("dledger", seed=21, preferredLeaderId="n2")
    try:
        c.run_until(lambda: c.master() == "broker-n2", 30_000)
        masters = [(e.node, e.fields["term"]) for e in c.events() if e.kind == "role" and e.fields["to"] == "SYNC_MASTER"]
        assert masters[0][0] != "broker-n2" and masters[-1] == ("broker-n2", masters[0][1] + 1)  # a transfer
        assert c.components["broker-n2"].broker_config.brokerId == 0
        assert {c.components[b].message_store_config.brokerRole for b in ("broker-n0", "broker-n1")} == \
            {BrokerRole.SLAVE}
        c.run_for(35_000)
        assert all(getattr(r, "send_status", None) is SendStatus.SEND_OK for r in send(c, 5, "to-n2"))
        c.nemesis.kill("broker-n2")
        c.run_until(lambda: c.master() not in (None, "broker-n2"), 30_000)
        c.nemesis.restart("broker-n2")  # back and caught up: leadership returns to it
        c.run_until(lambda: c.master() == "broker-n2", 60_000)
    finally:
        c.close()


def test_a_leader_machine_crash_right_after_its_acks_loses_nothing_a_quorum_acknowledged():
    """Each acknowledged message is on a majority: the leader's power loss takes its unflushed
    tail, the follower elected in its place still has every acknowledged entry (in its page cache,
    which survived), and the old leader gets them back from it."""
    c = dledger_cluster(seed=20)
    try:
        old = c.master()
        # Slow pushes: an acknowledgement given before a follower holds the entry would show.
        c.nemesis.set_delay([old], followers(c), 20, 20)
        p = c.sim.components["producer"]["producer"]
        held = []

        async def burst():
            for i in range(20):
                r = await p.send(Message(TOPIC, f"burst-{i}".encode()))
                assert r.send_status is SendStatus.SEND_OK
                _, offset = decode_message_id(r.offset_msg_id)
                held.append(holders(c, offset + 1))  # replicas holding (the start of) the message

        c.sim.run(burst())
        assert min(held) >= 2, held
        c.nemesis.crash(old)  # at once: nothing of the burst flushed on the leader's machine
        c.nemesis.heal()
        assert any(e.kind == "node.crash" and e.node == old and e.fields["lost_bytes"] > 0 for e in c.events())
        c.run_until(lambda: c.master() not in (None, old), 30_000)
        c.nemesis.restart(old)
        new = c.master()
        c.run_until(lambda: c.components[old].message_store is not None and dledger_store(c, old).get_committed_index()
                    == dledger_store(c, new).get_committed_index(), 30_000)
        c.run_for(35_000)
        keys = read_all(c, "reader")
        assert acked_keys(c) <= keys and len(acked_keys(c)) == 21
        assert check_total_queue(c.events(), topic=TOPIC).valid
    finally:
        c.close()


def test_a_leader_reelected_after_a_power_loss_takes_puts_before_it_is_master_and_acknowledged_messages_are_lost():
    """RocketMQ's hazard in DLedger mode (reading its code; not run against RocketMQ itself): the
    leader's machine loses power for 6 s, and it comes back just as the followers' heartbeat wait
    (3 x 2 s) runs out; they voted for it in term 1, so it is elected again in term 1 (DLedger's
    handleVote accepts a vote it already gave). DLedgerCommitLog.asyncPutMessage takes a put
    whenever DLedger leads; the broker becomes master only later, when DLedgerRoleChangeHandler
    has seen the log committed and dispatched and rebuilt the queue-offset table
    (recoverTopicQueueTable). Producers still route to it (its registration has not expired), and
    the puts it takes in between get queue offsets from the table recovered at start, behind the
    entries that become committed: two messages share each such queue offset, and consumers read
    only the one the consume queue holds. The history's total-queue check finds the acknowledged
    messages that no consumer can read, all of them puts taken in that window."""
    run = leader_crash_run()
    events = run.events
    terms = [(e.node, e.fields["role"], e.fields["term"]) for e in events if e.kind == "dledger.role"]
    assert terms[-3:] == [("broker-n1", "LEADER", 1), ("broker-n0", "FOLLOWER", 1), ("broker-n2", "FOLLOWER", 1)], terms
    led = next(e.time_ms for e in reversed(events) if e.kind == "dledger.role" and e.fields["role"] == "LEADER")
    master = next(e.time_ms for e in events if e.kind == "role" and e.node == "broker-n1" and e.time_ms > led)
    early = [op for op in client_ops(events) if op.f == "send" and send_acknowledged(op) and led <= op.complete_time_ms < master]
    assert early, "no put was acknowledged between the election and the master role"
    lost = {v.details["uniq_key"] for v in check_total_queue(events).violations if v.what == "lost"}
    assert lost and lost <= {op.invoke_value["uniq_key"] for op in early}, (len(lost), len(early))
    assert run.outcome["invariants"]["no-acknowledged-loss"]["holds"] is False


def leader_crash_run(**broker_settings):
    """dledger-crash-follower's cluster and seed (broker-n1 leads first), with broker-n1's machine
    losing power from 4 s to 10 s instead: back just as its followers' heartbeat wait runs out."""
    import dataclasses

    from rmqlab.workload.catalog import CATALOG, process_fault
    from rmqlab.workload.runner import run_workload
    from rmqlab.workload.spec import schedule_of

    w = CATALOG["dledger-crash-follower"]
    return run_workload(dataclasses.replace(
        w, name="dledger-crash-leader", faults=schedule_of(process_fault("crash", "broker-n1", 4_000, 10_000)),
        overrides={"*": {**w.overrides["*"], **broker_settings}}))


def test_with_rmqlabs_guard_the_reelected_leader_takes_no_put_before_it_is_master_and_nothing_is_lost():
    """rmqlabDLedgerPutOnlyAsMaster=true (an rmqlab-only setting): the same run, but a put is
    refused until DLedgerRoleChangeHandler has made the broker master in the current term; the
    producer retries, and every acknowledged message is read."""
    run = leader_crash_run(rmqlabDLedgerPutOnlyAsMaster=True)
    events = run.events
    assert [(e.node, e.fields["role"], e.fields["term"]) for e in events if e.kind == "dledger.role"][-3] == \
        ("broker-n1", "LEADER", 1)  # the same re-election as without the guard
    led = next(e.time_ms for e in reversed(events) if e.kind == "dledger.role" and e.fields["role"] == "LEADER")
    master = next(e.time_ms for e in events if e.kind == "role" and e.node == "broker-n1" and e.time_ms > led)
    assert not [op for op in client_ops(events) if op.f == "send" and send_acknowledged(op)
                and led <= op.complete_time_ms < master]
    assert check_total_queue(events).stats["lost"] == 0
    assert run.outcome["invariants"]["no-acknowledged-loss"]["holds"] is True
