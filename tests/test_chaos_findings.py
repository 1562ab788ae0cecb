"""Findings of the chaos campaigns (conf/chaos/seed003-fast.toml), each pinned by a small seeded
simulator scenario: what DLedger or RocketMQ does by design is asserted as such (a hazard), what
was rmqlab's is asserted fixed."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from rmqlab.checker.checkers import check_dledger_replicas
from rmqlab.client import ClientProcess, DefaultMQProducer, SendStatus
from rmqlab.cluster import Cluster
from rmqlab.common.message.message import Message
from rmqlab.config.broker import BrokerRole
from rmqlab.dledger.entry.dledger_entry import BODY_OFFSET
from tests.cluster_helpers import TOPIC, send, start

# A power loss keeps this many of a file's unflushed bytes: the torn entry's 48-byte DLedger header
# and the first 16 bytes of its body (a sector written back, the next one not).
TORN_BYTES = BODY_OFFSET + 16


def dledger_cluster(seed: int) -> Cluster:
    """A DLedger group started, a master elected, the topic routed and known to every member
    (SlaveSynchronize), and a producer "p1" that neither retries nor gives up before DLedger answers."""
    c = start("dledger", seed=seed)
    c.run_until(lambda: c.master() is not None, 30_000)
    c.add_client("p1", lambda: ClientProcess(producer=DefaultMQProducer(
        "PG1", c.namesrv_addr, send_msg_timeout=20_000, retry_times_when_send_failed=0)))
    send(c, 1, "warm")
    c.run_for(13_000)
    return c


def send_one(c: Cluster, body: str):
    return c.sim.run(c.sim.components["p1"]["producer"].send(Message(TOPIC, body.encode())))


def dledger_store(c: Cluster, node: str):
    return c.components[node].message_store.commit_log.dledger_file_store


def followers(c: Cluster) -> list[str]:
    return [b for b in c.brokers if b != c.master()]


@dataclass
class TornFollowerRun:
    leader: str
    torn: str               # the follower whose machine lost power right after acknowledging entry `index`
    index: int
    end_after_restart: int  # its ledger end once DLedger's recovery ran
    leader_entry: object
    torn_entry: object
    committed: int          # the leader's commit index once the follower caught up
    replicas: object        # check_dledger_replicas on the history and the files
    behind_before_failover: int
    master_after_failover: str | None
    role_after_failover: BrokerRole | None
    behind_after_failover: int | None


@pytest.fixture(scope="module")
def torn_follower_run() -> TornFollowerRun:
    """A follower's machine loses power within DLedger's 10 ms flush interval after it acknowledged
    an entry, keeping TORN_BYTES of it; it restarts 2 s later; three more messages are sent; then
    the leader is killed (seed 15: the torn follower is elected)."""
    c = dledger_cluster(seed=15)
    try:
        leader, torn = c.master(), followers(c)[0]
        send(c, 3, "before")
        c.run_for(100)  # everything so far flushed on every member
        assert send_one(c, "torn").send_status is SendStatus.SEND_OK
        index = dledger_store(c, leader).get_ledger_end_index()
        c.nemesis.crash(torn, torn_bytes=lambda _file, unflushed: min(TORN_BYTES, unflushed))
        c.run_for(2_000)
        c.nemesis.restart(torn)
        c.run_until(lambda: c.components[torn].message_store is not None, 10_000)
        end_after_restart = dledger_store(c, torn).get_ledger_end_index()
        assert all(r.send_status is SendStatus.SEND_OK for r in send(c, 3, "after"))
        lead = dledger_store(c, leader)
        c.run_until(lambda: dledger_store(c, torn).get_committed_index() == lead.get_committed_index(), 20_000)
        c.run_for(500)  # the torn member's dispatcher
        run = TornFollowerRun(leader, torn, index, end_after_restart, lead.get(index), dledger_store(c, torn).get(index),
                              lead.get_committed_index(),
                              check_dledger_replicas(c.events(), {n: c.sim.store_dir(n) for n in c.brokers}),
                              c.components[torn].message_store.dispatch_behind_bytes(), None, None, None)
        c.nemesis.kill(leader)
        try:
            c.run_until(lambda: c.master() not in (None, leader), 30_000)
        except TimeoutError:
            pass
        run.master_after_failover = c.master() if c.master() != leader else None
        broker = c.components[torn]
        run.role_after_failover = broker.message_store_config.brokerRole
        run.behind_after_failover = broker.message_store.dispatch_behind_bytes()
        return run
    finally:
        c.close()


def test_dledger_keeps_a_followers_entry_torn_inside_its_body_and_the_group_commits_it(torn_follower_run):
    """DLedger 0.3.1.2's own behaviour (io.openmessaging.storage.dledger: DLedgerMmapFileStore.recover,
    DLedgerEntryPusher): a follower acknowledges an entry from its page cache (flushed every 10 ms)
    and loses power before the flush with the entry's header on disk but not its whole body.
    Recovery checks magic, size, pos, index and term, never the body (0.3.1.2 never fills bodyCrc),
    so the entry stays. The leader counted it in that follower's watermark, so after the restart it
    pushes watermark + 1 and the follower appends after the torn entry: no COMPARE, no TRUNCATE
    (Raft's log matching: equal index and term mean equal entries). The torn copy is now committed
    on that member, different from the leader's — one member's power loss, not a majority's."""
    run = torn_follower_run
    assert run.end_after_restart == run.index  # recovery kept the torn entry as the log's last
    header = ("index", "term", "pos", "size", "magic")
    assert [getattr(run.torn_entry, k) for k in header] == [getattr(run.leader_entry, k) for k in header]
    assert run.torn_entry.body[:16] == run.leader_entry.body[:16]
    assert set(run.torn_entry.body[16:]) == {0} and run.torn_entry.body != run.leader_entry.body
    assert run.committed > run.index
    diverged = [v for v in run.replicas.violations if v.what == "entries-diverged"]
    assert [(v.node, v.details["index"]) for v in diverged] == [(run.torn, run.index)], run.replicas


def test_a_leader_holding_a_torn_entry_steps_over_it_and_becomes_master(torn_follower_run):
    """RocketMQ's ReputMessageService.doReput steps over a record whose fields do not add up to its
    TOTALSIZE ("[BUG]read total count not equals msg total size"), and in DLedger CommitLog mode
    over an unreadable one too; it never waits on it. So the torn member's dispatcher catches up,
    and when it is elected, DLedgerRoleChangeHandler (which waits for dispatchBehindBytes() == 0)
    makes it master: the group is writable again (its copy of the torn message is not served)."""
    run = torn_follower_run
    assert run.behind_before_failover == 0
    assert run.master_after_failover == run.torn
    assert run.role_after_failover is BrokerRole.SYNC_MASTER
    assert run.behind_after_failover == 0


def body_at(c, node: str, queue_id: int, offset: int) -> str:
    from rmqlab.common.message.message_decoder import decode

    result = c.components[node].message_store.get_message("reader", TOPIC, queue_id, offset, 1)
    return decode(result.message_buffers[0]).body.decode() if result.message_buffers else ""


def test_a_classic_master_back_from_a_power_loss_gives_new_messages_the_queue_offsets_of_lost_ones():
    """RocketMQ's behaviour (CommitLog.recoverAbnormally, ConsumeQueue.truncateDirtyLogicFiles,
    recoverTopicQueueTable), a hazard: under ASYNC_FLUSH the commitlog is flushed once 4 pages are
    dirty or every flushCommitLogThoroughInterval (10 s), so a master's power loss takes the last
    seconds of acknowledged messages; recovery cuts its consume queues to the commitlog that is
    left and the next queue offset is the queue's recovered length. The messages sent after the
    restart take the lost ones' queue offsets, while the slave still holds the lost messages at
    those offsets: a consumer that committed offset 3 on broker-a's queue skips the new 0..2."""
    c = start("2m-2s-async", seed=3)
    try:
        c.run_for(10_000)  # the slaves connected; the masters' first thorough flush (nothing yet) done
        before = send(c, 24, "before")  # three per queue, 8 queues on two masters
        assert all(r.send_status is SendStatus.SEND_OK for r in before)
        c.run_for(2_000)  # the slave has them all
        assert c.components["broker-a-s"].message_store.get_max_offset_in_queue(TOPIC, 0) == 3
        c.nemesis.crash("broker-a")  # within 10 s of the last flush: none of the 12 messages durable
        c.run_for(3_000)
        assert [e.fields["lost_bytes"] for e in c.events() if e.kind == "node.crash"][-1] > 0
        c.nemesis.restart("broker-a")
        c.run_for(5_000)
        assert all(c.components["broker-a"].message_store.get_max_offset_in_queue(TOPIC, q) == 0 for q in range(4))
        after = send(c, 8, "after")
        assert all(r.send_status is SendStatus.SEND_OK for r in after)
        c.run_for(100)  # dispatched
        offsets = {(r.message_queue.broker_name, r.message_queue.queue_id): r.queue_offset for r in after}
        assert offsets == {**{("broker-a", q): 0 for q in range(4)}, **{("broker-b", q): 3 for q in range(4)}}
        for q in range(4):
            assert c.components["broker-a-s"].message_store.get_max_offset_in_queue(TOPIC, q) == 3
            assert body_at(c, "broker-a", q, 0).startswith("after-")
            assert body_at(c, "broker-a-s", q, 0).startswith("before-")  # one queue offset, two messages
    finally:
        c.close()
