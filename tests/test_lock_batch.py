"""Queue locks (LOCK_BATCH_MQ 41, UNLOCK_BATCH_MQ 42) and RIP-32's strict-mode lock quorum, on the simulator.

What these tests hold rmqlab to is RocketMQ's: ``RebalanceLockManager`` (broker/.../client/rebalance/),
``AdminBrokerProcessor.lockBatchMQ`` / ``unlockBatchMQ``, ``BrokerOuterAPI.lockBatchMQAsync`` /
``unlockBatchMQAsync``, ``SendMessageProcessor.handleRetryAndDLQ`` (broker/src/main/java/org/apache/rocketmq/broker/),
the bodies of remoting/.../protocol/body/ and ``MQClientAPIImpl.lockBatchMQ`` / ``unlockBatchMQ``. The
lock quorum is the "Lock Quorum" section of RIP-32 (Slave Acting Master Mode, RocketMQ's wiki): with
``lockInStrictMode`` a queue is locked only when a quorum (``totalReplicas / 2 + 1``) of the broker
group's members locked it, so that a consumer locking the acting slave and one locking the master
that comes back cannot both hold the queue.

The group: "broker-a" with a master (id 0) and two slaves (ids 1, 2), ``enableSlaveActingMaster``,
``totalReplicas=3`` and ``skipPreOnline=true`` (pre-online is not built yet); the brokers learn who is
alive from the member-group sync (every second). Clients talk to a broker's address directly.
"""

from __future__ import annotations

import pytest

from rmqlab.client.exceptions import MQBrokerException
from rmqlab.client.impl.mq_client_api_impl import MQClientAPIImpl
from rmqlab.namesrv import NamesrvController
from rmqlab.remoting import RemotingClient, RemotingCommand, RequestCode, ResponseCode
from rmqlab.remoting.protocol.body.lock_batch_body import (LockBatchRequestBody, LockBatchResponseBody,
                                                          UnlockBatchRequestBody, java_hash_set_order)
from rmqlab.remoting.protocol.header.broker.admin import MessageQueue
from rmqlab.runtime.sim import Simulation
from tests.broker_helpers import BROKER, NS, CppClient, Idle, broker_factory, close, world

MASTER, S1, S2 = "127.0.0.1:10911", "127.0.0.1:10921", "127.0.0.1:10931"
GROUP, TOPIC = "GID_ORDER", "TopicOrder"
QUEUES = [MessageQueue(TOPIC, "broker-a", q) for q in range(4)]
LIVE_MS = 60_000  # REBALANCE_LOCK_MAX_LIVE_TIME


def replicas(seed: int = 11, **overrides) -> Simulation:
    """namesrv, broker-a (master), broker-a-s1 (id 1), broker-a-s2 (id 2), clients c1 and c2."""
    sim = Simulation(seed=seed)
    sim.add_node("namesrv", NamesrvController)
    common = {"enableSlaveActingMaster": "true", "totalReplicas": "3", "skipPreOnline": "true",
              "lockInStrictMode": "true", **overrides}
    sim.add_node("broker-a", broker_factory(sim, "broker-a", namesrv=NS, **common))
    for i in (1, 2):
        sim.add_node(f"broker-a-s{i}", broker_factory(sim, f"broker-a-s{i}", port=10911 + 10 * i, namesrv=NS,
                                                      brokerRole="SLAVE", brokerId=i, slaveReadEnable="true",
                                                      **common))
    for name in ("c1", "c2"):
        sim.add_node(name, Idle)
    sim.start_all()
    sim.run_until(lambda: all(len(sim.components[n].broker_member_group.broker_addrs) == 3
                              for n in ("broker-a", "broker-a-s1", "broker-a-s2")), 5_000)
    return sim


def api(sim: Simulation, client: str) -> MQClientAPIImpl:
    node = sim.nodes[client]
    return MQClientAPIImpl(node, RemotingClient(node))


def lock(sim: Simulation, client: str, addr: str, mqs=QUEUES, group: str = GROUP) -> list[MessageQueue]:
    """LOCK_BATCH_MQ from ``client`` (its client id is its node name), as a Java consumer's lockAll sends it."""
    body = LockBatchRequestBody(group, client, False, list(mqs))
    return sim.run(api(sim, client).lock_batch_mq(addr, body, 5_000))


def unlock(sim: Simulation, client: str, addr: str, mqs=QUEUES, group: str = GROUP) -> None:
    sim.run(api(sim, client).unlock_batch_mq(addr, UnlockBatchRequestBody(group, client, False, list(mqs)), 5_000))


def locks(sim: Simulation, broker: str, mqs=QUEUES, group: str = GROUP) -> list[str | None]:
    """Who holds each queue on ``broker`` (None: nobody, or expired)."""
    manager = sim.components[broker].admin_broker_processor.rebalance_lock_manager
    return [manager.lock_holder(group, mq) for mq in mqs]


def frames(sim: Simulation, node: str, code: int, peer: str | None = None) -> list:
    return [e for e in sim.tracer.events if e.kind == "frame.send" and e.node == node
            and e.fields.get("code") == code and not e.fields["flag"] & 1
            and (peer is None or e.fields["peer"] == peer)]


def members(sim: Simulation, broker: str) -> set[int]:
    return set(sim.components[broker].broker_member_group.broker_addrs)


# -- RebalanceLockManager semantics, on one broker (no strict mode) ---------------------------------

def test_a_queue_held_by_one_client_is_refused_to_another_until_the_lock_expires():
    sim = world(clients=("c1", "c2"))
    q0, q1, q2 = QUEUES[:3]
    assert lock(sim, "c1", BROKER, [q0, q1]) == [q0, q1]
    assert lock(sim, "c2", BROKER, [q1, q2]) == [q2]  # q1 is c1's
    assert locks(sim, "broker-a", [q0, q1, q2]) == ["c1", "c1", "c2"]
    # c1 renews q0 only, 50 s later: q1 keeps its old time.
    sim.run_for(50_000)
    assert lock(sim, "c1", BROKER, [q0]) == [q0]
    sim.run_for(LIVE_MS - 50_000 - 1_000)
    assert lock(sim, "c2", BROKER, [q0, q1]) == []  # 59 s after c1 locked q1: still c1's
    sim.run_for(2_000)
    # q1 expired (61 s without a renewal): c2 takes it. q0 was renewed at 50 s: still c1's.
    assert lock(sim, "c2", BROKER, [q0, q1]) == [q1]
    assert locks(sim, "broker-a", [q0, q1]) == ["c1", "c2"]
    # The holder renewing keeps the queue: c1 at 50 s, 60 s later again -- never 60 s apart.
    sim.run_for(45_000)
    assert lock(sim, "c1", BROKER, [q0]) == [q0]
    sim.run_for(45_000)
    assert lock(sim, "c2", BROKER, [q0]) == []
    close(sim)


def test_unlock_frees_only_the_callers_queues():
    sim = world(clients=("c1", "c2"))
    q0, q1 = QUEUES[:2]
    assert lock(sim, "c1", BROKER, [q0, q1]) == [q0, q1]
    unlock(sim, "c2", BROKER, [q0, q1])  # not c2's: nothing happens
    assert locks(sim, "broker-a", [q0, q1]) == ["c1", "c1"]
    unlock(sim, "c1", BROKER, [q0])
    assert lock(sim, "c2", BROKER, [q0, q1]) == [q0]
    # Another group's locks are its own.
    assert lock(sim, "c2", BROKER, [q1], group="GID_OTHER") == [q1]
    # Oneway, as a consumer unlocks when it shuts down.
    sim.run(api(sim, "c1").unlock_batch_mq(BROKER, UnlockBatchRequestBody(GROUP, "c1", False, [q1]), 5_000,
                                           oneway=True))
    sim.run_for(100)
    assert locks(sim, "broker-a", [q0, q1]) == ["c2", None]
    close(sim)


def test_retries_of_a_group_holding_a_live_lock_go_straight_to_the_dlq():
    """``handleRetryAndDLQ``: a group that holds a queue lock consumes orderly, and a message it sends
    back goes to ``%DLQ%<group>`` at once, whatever its reconsume count; once every lock expired,
    retries are retries again."""
    sim = world(clients=("c1",))
    store = sim.components["broker-a"].message_store
    c = CppClient(sim, "c1")

    def sent_back(body: bytes) -> tuple[int, int]:
        """(messages in %RETRY%<group>, in %DLQ%<group>) once ``body`` is stored."""
        assert c.send("%RETRY%" + GROUP, body).code == ResponseCode.SUCCESS
        sim.run_for(100)  # the reput makes it visible in its queue
        return (store.get_max_offset_in_queue("%RETRY%" + GROUP, 0),
                store.get_max_offset_in_queue("%DLQ%" + GROUP, 0))  # DLQ_NUMS_PER_GROUP = 1

    assert sent_back(b"before") == (1, 0)
    assert lock(sim, "c1", BROKER, QUEUES[:1]) == QUEUES[:1]
    assert sent_back(b"locked") == (1, 1)
    sim.run_for(LIVE_MS + 1_000)
    assert sent_back(b"expired") == (2, 1)
    close(sim)


def test_a_bad_lock_request_is_refused_and_locks_nothing(caplog):
    """No group, no client, or a body that is not one: SYSTEM_ERROR naming it, and no traceback logged."""
    sim = world(clients=("c1",))
    client = RemotingClient(sim.nodes["c1"])
    for body, missing in ((b'{"clientId":"c1","mqSet":[]}', "consumerGroup"),
                          (b'{"consumerGroup":"G","mqSet":[{"brokerName":"broker-a","queueId":0,"topic":"T"}]}',
                           "clientId")):
        r = sim.run(client.invoke_sync(BROKER, RemotingCommand.create_request_command(RequestCode.LOCK_BATCH_MQ, {},
                                                                                      body), 3_000))
        assert r.code == ResponseCode.SYSTEM_ERROR and missing in r.remark
    r = sim.run(client.invoke_sync(BROKER, RemotingCommand.create_request_command(RequestCode.LOCK_BATCH_MQ, {},
                                                                                  b'{"mqSet":7}'), 3_000))
    assert r.code == ResponseCode.SYSTEM_ERROR and "mqSet" in r.remark

    def unlock_raw(body: bytes) -> RemotingCommand:
        return sim.run(client.invoke_sync(BROKER, RemotingCommand.create_request_command(
            RequestCode.UNLOCK_BATCH_MQ, {}, body), 3_000))

    r = unlock_raw(b'{"clientId":"c1","mqSet":[]}')
    assert r.code == ResponseCode.SYSTEM_ERROR and "consumerGroup" in r.remark
    assert unlock_raw(b'{"consumerGroup":"G","mqSet":[]}').code == ResponseCode.SUCCESS  # unlocks nobody's
    assert sim.components["broker-a"].admin_broker_processor.rebalance_lock_manager.mq_lock_table == {}
    assert [rec.getMessage() for rec in caplog.records if rec.exc_info] == []
    close(sim)


# -- strict mode: the lock quorum (RIP-32) -----------------------------------------------------------

def test_strict_mode_all_members_alive_locks_on_every_member_and_unlocks_everywhere():
    sim = replicas()
    assert lock(sim, "c1", MASTER) == QUEUES
    for broker in ("broker-a", "broker-a-s1", "broker-a-s2"):
        assert locks(sim, broker) == ["c1"] * 4, broker
    # Forwarded once to each other member, marked onlyThisBroker (so they do not forward again).
    assert [f.fields["peer"] for f in frames(sim, "broker-a", RequestCode.LOCK_BATCH_MQ)] == [S1, S2]
    assert frames(sim, "broker-a-s1", RequestCode.LOCK_BATCH_MQ) == []
    # A second client finds the queues held.
    assert lock(sim, "c2", MASTER) == []
    # The unlock goes to every member, the master itself included, and is answered at once.
    unlock(sim, "c1", MASTER)
    sim.run_for(100)
    assert sorted(f.fields["peer"] for f in frames(sim, "broker-a", RequestCode.UNLOCK_BATCH_MQ)) == [MASTER, S1, S2]
    for broker in ("broker-a", "broker-a-s1", "broker-a-s2"):
        assert locks(sim, broker) == [None] * 4, broker
    assert lock(sim, "c2", MASTER) == QUEUES
    close(sim)


def test_strict_mode_master_down_the_acting_slave_and_one_more_slave_reach_the_quorum():
    sim = replicas()
    sim.nemesis.kill("broker-a")
    sim.run_until(lambda: members(sim, "broker-a-s1") == {1, 2}, 5_000)
    assert sim.components["broker-a-s1"].min_broker_id_in_group == 1  # acting master
    # Quorum 2 of 3: broker 1 and broker 2.
    assert lock(sim, "c1", S1) == QUEUES
    assert locks(sim, "broker-a-s1") == locks(sim, "broker-a-s2") == ["c1"] * 4
    assert [f.fields["peer"] for f in frames(sim, "broker-a-s1", RequestCode.LOCK_BATCH_MQ)] == [S2]
    # The master comes back (no locks: they live in memory) and c2 locks there: it holds only the
    # master's lock, broker 1 and 2 say no, so it gets nothing -- two consumers cannot both hold a queue.
    sim.nemesis.restart("broker-a")
    sim.run_until(lambda: all(members(sim, n) == {0, 1, 2} for n in ("broker-a", "broker-a-s1", "broker-a-s2")),
                  10_000)
    assert lock(sim, "c2", MASTER) == []
    assert locks(sim, "broker-a") == ["c2"] * 4  # the local lock stays, as in RocketMQ
    # c1 cannot renew at the master either: only the queues locked locally are forwarded, and the
    # master's are c2's. Nobody holds the queues until those locks expire; then c1 gets them back.
    assert lock(sim, "c1", MASTER) == []
    sim.run_for(LIVE_MS + 1_000)
    assert lock(sim, "c1", MASTER) == QUEUES
    assert locks(sim, "broker-a") == locks(sim, "broker-a-s1") == locks(sim, "broker-a-s2") == ["c1"] * 4
    close(sim)


def test_strict_mode_two_members_down_the_lock_is_refused_though_the_local_lock_succeeded():
    sim = replicas()
    sim.nemesis.kill("broker-a")
    sim.nemesis.kill("broker-a-s2")
    sim.run_until(lambda: members(sim, "broker-a-s1") == {1}, 5_000)
    assert lock(sim, "c1", S1) == []
    assert locks(sim, "broker-a-s1") == ["c1"] * 4  # locked here, but 1 < quorum 2
    assert frames(sim, "broker-a-s1", RequestCode.LOCK_BATCH_MQ) == []  # nobody to ask
    close(sim)


def test_strict_mode_a_dead_member_still_listed_counts_as_not_locked():
    """Right after broker 2 dies the acting slave's member group still lists it: the forward fails
    (no connection) and the lock is refused."""
    sim = replicas(syncBrokerMemberGroupPeriod="600000")  # the group seen at start, never refreshed
    sim.nemesis.kill("broker-a")
    sim.nemesis.kill("broker-a-s2")
    sim.run_for(100)
    assert members(sim, "broker-a-s1") == {0, 1, 2}
    assert lock(sim, "c1", S1) == []
    assert [f.fields["peer"] for f in frames(sim, "broker-a-s1", RequestCode.LOCK_BATCH_MQ)] == []  # never connected
    close(sim)


def test_strict_mode_a_member_that_does_not_answer_in_time_counts_as_not_locked():
    """Broker 2 is frozen (SIGSTOP): the acting slave waits 2000 ms for it, then answers with what it
    has, 1 < 2. When broker 2 wakes up it serves the forwarded lock anyway (RocketMQ does not roll
    remote locks back), too late to count."""
    sim = replicas()
    sim.nemesis.kill("broker-a")
    sim.run_until(lambda: members(sim, "broker-a-s1") == {1, 2}, 5_000)
    sim.nemesis.suspend("broker-a-s2")
    node = sim.nodes["c1"]

    async def timed_lock():
        begin = node.now_ms()
        granted = await api(sim, "c1").lock_batch_mq(S1, LockBatchRequestBody(GROUP, "c1", False, QUEUES), 5_000)
        return granted, node.now_ms() - begin

    granted, waited = sim.run(timed_lock())
    assert granted == []
    assert 2_000 <= waited < 2_100  # the quorum wait (virtual time), not the 1000 ms request timeout's scan
    assert [f.fields["peer"] for f in frames(sim, "broker-a-s1", RequestCode.LOCK_BATCH_MQ)] == [S2]
    assert locks(sim, "broker-a-s2") == [None] * 4
    sim.nemesis.resume("broker-a-s2")
    sim.run_for(500)
    assert locks(sim, "broker-a-s2") == ["c1"] * 4
    close(sim)


def test_strict_mode_without_slave_acting_master_grants_nothing():
    """The member group is refreshed only by the member-group sync of enableSlaveActingMaster; without
    it a broker knows only itself, so with totalReplicas=3 no lock reaches its quorum (RocketMQ's
    behaviour: lockInStrictMode is meant for RIP-32 groups)."""
    sim = Simulation(seed=11)
    sim.add_node("namesrv", NamesrvController)
    sim.add_node("broker-a", broker_factory(sim, "broker-a", namesrv=NS, totalReplicas="3", lockInStrictMode="true"))
    sim.add_node("c1", Idle)
    sim.start_all()
    sim.run_for(3_000)
    assert members(sim, "broker-a") == {0}
    assert lock(sim, "c1", MASTER) == []
    assert locks(sim, "broker-a") == ["c1"] * 4
    close(sim)


@pytest.mark.parametrize("overrides", [{"lockInStrictMode": "false"}, {"totalReplicas": "1"}],
                         ids=["not-strict", "quorum-1"])
def test_without_a_quorum_to_reach_the_local_lock_is_the_answer(overrides):
    """Not strict (the default), or strict with a quorum of 1: the broker answers its own lock and
    asks nobody, even with the master and broker 2 down."""
    sim = replicas(**overrides)
    sim.nemesis.kill("broker-a")
    sim.nemesis.kill("broker-a-s2")
    sim.run_until(lambda: members(sim, "broker-a-s1") == {1}, 5_000)
    assert lock(sim, "c1", S1) == QUEUES
    assert lock(sim, "c2", S1) == []
    assert frames(sim, "broker-a-s1", RequestCode.LOCK_BATCH_MQ) == []
    unlock(sim, "c1", S1)
    sim.run_for(100)
    # A strict-mode unlock goes through the members whatever the quorum: here broker 1 itself.
    strict = overrides.get("lockInStrictMode", "true") == "true"
    assert [f.fields["peer"] for f in frames(sim, "broker-a-s1", RequestCode.UNLOCK_BATCH_MQ)] == ([S1] if strict else [])
    assert locks(sim, "broker-a-s1") == [None] * 4
    close(sim)


def test_a_broker_error_is_an_mq_broker_exception():
    sim = world(clients=("c1",))
    with pytest.raises(MQBrokerException) as e:
        sim.run(api(sim, "c1").lock_batch_mq(BROKER, LockBatchRequestBody(None, "c1", False, QUEUES), 3_000))
    assert e.value.response_code == ResponseCode.SYSTEM_ERROR
    close(sim)


# -- bodies -------------------------------------------------------------------------------------------

# Golden JSON: the queue order is what java.util.HashSet iterates (checked with a JDK 17 HashSet of a
# class with MessageQueue's hashCode/equals); the rest is fastjson's default writer (properties in
# alphabetical order, null ones left out).
LOCK_REQUEST = (b'{"clientId":"127.0.0.1@c1","consumerGroup":"G","mqSet":[{"brokerName":"b","queueId":2,"topic":"T"},'
                b'{"brokerName":"b","queueId":0,"topic":"T"},{"brokerName":"b","queueId":1,"topic":"T"},'
                b'{"brokerName":"broker-b","queueId":7,"topic":"TopicOrder"}],"onlyThisBroker":false}')
LOCK_REQUEST_8_BUCKETS = (b'{"clientId":"127.0.0.1@c1","consumerGroup":"G","mqSet":[{"brokerName":"b","queueId":2,'
                          b'"topic":"T"},{"brokerName":"broker-b","queueId":7,"topic":"TopicOrder"},'
                          b'{"brokerName":"b","queueId":0,"topic":"T"},{"brokerName":"b","queueId":1,"topic":"T"}],'
                          b'"onlyThisBroker":false}')
UNLOCK_REQUEST_NO_CLIENT = (b'{"consumerGroup":"G","mqSet":[{"brokerName":"b","queueId":0,"topic":"T"}],'
                            b'"onlyThisBroker":true}')


def test_bodies_are_written_as_fastjson_writes_them_and_read_back():
    mqs = [MessageQueue("T", "b", q) for q in range(3)] + [MessageQueue("TopicOrder", "broker-b", 7)]
    body = LockBatchRequestBody("G", "127.0.0.1@c1", False, mqs)
    assert body.encode() == LOCK_REQUEST
    assert LockBatchRequestBody.decode(LOCK_REQUEST) == LockBatchRequestBody("G", "127.0.0.1@c1", False,
                                                                             java_hash_set_order(mqs))
    # The same set as a new HashSet<>(4) (what a broker forwards: tryLockBatch's set) grows to 8 buckets.
    assert LockBatchRequestBody("G", "127.0.0.1@c1", False, mqs, mq_set_capacity=4).encode() == LOCK_REQUEST_8_BUCKETS
    unlock_body = UnlockBatchRequestBody("G", None, True, mqs[:1])
    assert unlock_body.encode() == UNLOCK_REQUEST_NO_CLIENT
    assert UnlockBatchRequestBody.decode(UNLOCK_REQUEST_NO_CLIENT) == unlock_body
    # lockOKMQSet: 20 queues of a HashSet made with new HashSet<>(20) (tryLockBatch's, 32 buckets)
    # start at queue 12; with 4 queues (4 buckets) the order is the queue ids'.
    many = [MessageQueue("TopicOrder", "broker-a", q) for q in range(20)]
    written = LockBatchResponseBody(many, 20).encode()
    assert written.startswith(b'{"lockOKMQSet":[{"brokerName":"broker-a","queueId":12,"topic":"TopicOrder"},'
                              b'{"brokerName":"broker-a","queueId":13,')
    assert written.endswith(b'{"brokerName":"broker-a","queueId":11,"topic":"TopicOrder"}]}')
    assert set(LockBatchResponseBody.decode(written).lock_ok_mq_set) == set(many)
    assert LockBatchResponseBody(QUEUES, 4).encode() == (
        b'{"lockOKMQSet":[' + b",".join(b'{"brokerName":"broker-a","queueId":%d,"topic":"TopicOrder"}' % q
                                        for q in range(4)) + b"]}")
    # The empty answer, and a set written twice over is one set.
    assert LockBatchResponseBody().encode() == b'{"lockOKMQSet":[]}'
    assert LockBatchResponseBody.decode(b'{"lockOKMQSet":[{"brokerName":"b","queueId":0,"topic":"T"},'
                                        b'{"brokerName":"b","queueId":0,"topic":"T"}]}').lock_ok_mq_set == mqs[:1]


@pytest.mark.parametrize("text, where", [
    (b'[]', "LockBatchRequestBody"),
    (b'{"mqSet":{}}', "mqSet"),
    (b'{"mqSet":[{"brokerName":"b","queueId":"x","topic":"T"}]}', "queueId"),
    (b'{"mqSet":[{"brokerName":3,"queueId":0,"topic":"T"}]}', "brokerName"),
    (b'{"onlyThisBroker":"yes"}', "onlyThisBroker"),
    (b'{"clientId":5}', "clientId"),
    (b'not json', "LockBatchRequestBody"),
])
def test_a_bad_body_is_refused_naming_what_is_wrong(text, where):
    with pytest.raises(ValueError, match=where):
        LockBatchRequestBody.decode(text)
