"""Pre-online (RIP-32): a broker of a slave-acting-master group with totalReplicas > 1 comes back
isolated and takes its group's metadata back before it registers; on the simulator.

RocketMQ's behaviour these tests hold the broker to:
broker/src/main/java/org/apache/rocketmq/broker/BrokerPreOnlineService.java (prepareForBrokerOnline,
prepareForMasterOnline, syncMetadataReverse, prepareForSlaveOnline), BrokerController (start,
startService, the isIsolated checks), store/.../ha/HAConnectionStateNotificationService.java (the wait
for TRANSFER), DefaultHAClient/ServiceThread.wakeup (BrokerController.onMasterOnline's
wakeupHAClient), and the "Pre-online mechanism" of the RIP-32 design
(https://github.com/apache/rocketmq/wiki/RIP-32-Slave-Acting-Master-Mode): without it, a master
that comes back registers with the consumer offsets it had and its consumers consume again what
they consumed from the acting slave.
"""

from __future__ import annotations

import pytest

from rmqlab.broker.broker_pre_online_service import MACHINE as PRE_ONLINE
from rmqlab.client import DefaultMQProducer
from rmqlab.common.data_version import DataVersion
from rmqlab.ha.ha_connection_state import HAConnectionState
from rmqlab.namesrv import NamesrvController
from rmqlab.remoting import RemotingClient, RemotingCommand, RequestCode, ResponseCode
from rmqlab.remoting.protocol.route.topic_route_data import TopicRouteData
from rmqlab.runtime.sim import Simulation
from rmqlab.store.timer.timer_checkpoint import DecodedTimerCheckpoint
from tests.broker_helpers import NS, CppClient, acting_master_group, broker_factory, close, props
from tests.client_helpers import NS as LAB_NS, Recorder, history, push_consumer, send_all

MASTER, S1, S2 = "127.0.0.1:10911", "127.0.0.1:10921", "127.0.0.1:10931"
MASTER_HA = "127.0.0.1:10912"
TOPIC_OF_GROUP = "broker-a"  # the topic every broker of the group has
NAMESRV_CODES = {RequestCode.REGISTER_BROKER, RequestCode.QUERY_DATA_VERSION, RequestCode.BROKER_HEARTBEAT}
REVERSE_SYNC = [RequestCode.EXCHANGE_BROKER_HA_INFO, RequestCode.GET_ALL_DELAY_OFFSET,
                RequestCode.GET_ALL_CONSUMER_OFFSET, RequestCode.GET_TIMER_CHECK_POINT]


def group(seed: int = 7, slaves: int = 2, **overrides) -> Simulation:
    """namesrv, broker-a (master, id 0), broker-a-s<i> (id i); every broker with slave acting
    master and totalReplicas = 1 + slaves (so each starts isolated and goes through pre-online)."""
    return acting_master_group(seed, slaves, **{"totalReplicas": str(1 + slaves), **overrides})


def b(sim: Simulation, name: str):
    return sim.components[name]


def live(sim: Simulation) -> set[str]:
    return {info.broker_addr for info in b(sim, "namesrv").route_info_manager.broker_live_table}


def requests_sent(sim: Simulation, node: str, since_ms: float = 0, before=None) -> list[tuple[float, str, int]]:
    """(time, peer, code) of every remoting request ``node`` sent since ``since_ms`` (and before the
    trace event ``before``, when given)."""
    events = sim.tracer.events
    if before is not None:
        events = events[:next(i for i, e in enumerate(events) if e is before)]
    return [(e.time_ms, e.fields["peer"], e.fields["code"]) for e in events
            if e.kind == "frame.send" and e.node == node and e.time_ms >= since_ms
            and e.fields.get("proto") == "remoting" and not e.fields["flag"] & 1]


def online_events(sim: Simulation, node: str, since_ms: float = 0) -> list:
    return [e for e in sim.tracer.events if e.kind == "state" and e.node == node and e.time_ms >= since_ms
            and e.fields["machine"] == PRE_ONLINE]


def restart(sim: Simulation, node: str):
    """Restart ``node``; its new component once its start() is through."""
    old = sim.components.get(node)
    sim.nemesis.restart(node)
    sim.run_until(lambda: sim.components.get(node) is not old and getattr(sim.components[node], "_started", True),
                  5_000)
    return sim.components[node]


def route_addrs(sim: Simulation, topic: str = TOPIC_OF_GROUP) -> dict[int, str]:
    """The members of broker-a that the name server's route of ``topic`` lists."""
    request = RemotingCommand.create_request_command(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": topic})
    response = sim.run(RemotingClient(sim.nodes["client"]).invoke_sync(NS, request, 3000))
    assert response.code == ResponseCode.SUCCESS, response
    return {broker_id: addr for data in TopicRouteData.decode(response.body).broker_datas
            if data.broker_name == "broker-a" for broker_id, addr in data.broker_addrs.items()}


def settle(sim: Simulation) -> None:
    """Every broker through its first pre-online and the member syncs settled on the master."""
    sim.run_until(lambda: all(not c.is_isolated for n, c in sim.components.items() if n.startswith("broker")),
                  10_000)
    sim.run_for(3_000)


def act(sim: Simulation) -> None:
    """The master dies; the name server drops it and slave 1 acts as master."""
    sim.nemesis.kill("broker-a")
    sim.run_until(lambda: b(sim, "broker-a-s1").special_service_running, 5_000)


def test_cold_start_every_broker_is_isolated_until_its_pre_online_started_it():
    """Empty member group (nobody registered yet): startService(ownId, ownAddr) at the first try;
    then the master is the group's smallest id and the special services are its alone."""
    sim = Simulation(seed=3)
    sim.add_node("namesrv", NamesrvController)
    sim.add_node("broker-a", broker_factory(sim, "broker-a", namesrv=NS, enableSlaveActingMaster="true",
                                            totalReplicas="2"))
    sim.start_all()
    master = b(sim, "broker-a")
    assert master.is_isolated and live(sim) == set()
    sim.run_until(lambda: not master.is_isolated, 3_000)
    assert live(sim) == {MASTER}
    [event] = online_events(sim, "broker-a")
    assert (event.fields["from"], event.fields["to"], event.fields["min_broker_id"]) == ("PREPARING", "ONLINE", 0)
    assert master.special_service_running
    close(sim)


def test_a_returning_master_takes_its_slaves_metadata_back_before_it_registers():
    """Steps of prepareForMasterOnline, members in ascending id order: 906 (HA info), wait for an HA
    connection in TRANSFER, then GET_ALL_DELAY_OFFSET, GET_ALL_CONSUMER_OFFSET, GET_TIMER_CHECK_POINT;
    each table adopted when the member's DataVersion is not older; then registration. Until then
    the broker is isolated: no registration (first, periodic, or for a new topic), no heartbeat."""
    # Consumer offsets: each commit moves the DataVersion (step 1), as every 500th would. Delay
    # offsets: a step no run reaches, so only the acting slave's delivery below moves a version (the
    # delivery tasks update the offset on every 100 ms check while their head is not due yet).
    sim = group(consumerOffsetUpdateVersionStep="1", delayOffsetUpdateVersionStep="1000000")
    settle(sim)
    master, s1, s2 = b(sim, "broker-a"), b(sim, "broker-a-s1"), b(sim, "broker-a-s2")
    master.consumer_offset_manager.commit_offset("c", "G", TOPIC_OF_GROUP, 0, 5)
    master.consumer_offset_manager.persist()
    c = CppClient(sim, "client", MASTER)
    for i in range(5):  # due in 10 s (delay level 3), after the master is gone
        assert c.send("TopicD", b"delayed-%d" % i, props(DELAY="3")).code == ResponseCode.SUCCESS
    timer_due = sim.nodes["client"].now_ms() + 15_000
    assert c.send("TopicT", b"timer", props(TIMER_DELIVER_MS=str(timer_due))).code == ResponseCode.SUCCESS
    end = master.message_store.get_max_phy_offset()
    sim.run_until(lambda: s1.message_store.get_max_phy_offset() == end == s2.message_store.get_max_phy_offset(),
                  3_000)
    master_timer_version = master.timer_message_store.timer_checkpoint.data_version.copy()
    act(sim)
    # While slave 1 acts, the consumers commit there (and once on slave 2), and it delivers
    # (escapes) four of the delayed messages and the timer message. (Its own delivery is stopped and
    # its tables set by hand: its tasks would write their own offsets back.)
    s1.change_special_service_status(False)
    for offset in (6, 7, 8):
        s1.consumer_offset_manager.commit_offset("c", "G", TOPIC_OF_GROUP, 0, offset)
    s2.consumer_offset_manager.commit_offset("c", "G2", TOPIC_OF_GROUP, 0, 3)
    now = sim.nodes["broker-a-s1"].now_ms()
    s1.schedule_message_service.offset_table[3] = 4
    s1.schedule_message_service.data_version.next_version(now)
    s1.timer_message_store.flush(flushed_phy_offset=1 << 62)  # its snapshots out: none rewrites the fields
    ckpt = s1.timer_message_store.timer_checkpoint
    ckpt.last_read_time_ms = timer_due + 1_000  # its slot read (timerPrecisionMs 1 s)
    # Newer than the master's (as if it had copied the master's checkpoint, then moved on).
    ckpt.data_version = DataVersion(0, now, master_timer_version.counter + 1)
    ckpt.flush()

    restarted = sim.now_ms()
    master = restart(sim, "broker-a")
    assert master.is_isolated
    # A topic created on the isolated master (a client with an old route) registers nothing either.
    created = RemotingClient(sim.nodes["client"]).invoke_sync(MASTER, RemotingCommand.create_request_command(
        RequestCode.UPDATE_AND_CREATE_TOPIC, {"topic": "NewTopic", "defaultTopic": "TBW102", "readQueueNums": "1",
                                              "writeQueueNums": "1", "perm": "6", "topicFilterType": "SINGLE_TAG",
                                              "topicSysFlag": "0", "order": "false"}),
        3000)
    assert sim.run(created).code == ResponseCode.SUCCESS
    sim.run_until(lambda: not master.is_isolated, 30_000)
    [online] = online_events(sim, "broker-a", restarted)
    before = [(peer, code) for _, peer, code in requests_sent(sim, "broker-a", restarted, online)]
    # The last request before it is online is its registration (startService); none before it.
    assert before[-1] == (NS, RequestCode.REGISTER_BROKER)
    assert not [c for _, c in before[:-1] if c in NAMESRV_CODES], before  # isolated: silent to the name servers
    members = [(peer, code) for peer, code in before if peer in (S1, S2)]
    assert members == [(S1, code) for code in REVERSE_SYNC] + [(S2, code) for code in REVERSE_SYNC]
    assert online.fields["min_broker_id"] == 0 and master.special_service_running
    sim.run_until(lambda: MASTER in live(sim), 3_000)

    # Adopted: slave 1's newer tables. Slave 2's consumer offsets are then older (one commit against
    # slave 1's three): not taken, so its G2 stays there; one table and one version per member.
    assert master.consumer_offset_manager.query_offset("G", TOPIC_OF_GROUP, 0) == 8
    assert master.consumer_offset_manager.data_version == s1.consumer_offset_manager.data_version
    assert master.consumer_offset_manager.query_offset("G2", TOPIC_OF_GROUP, 0) == -1
    assert master.schedule_message_service.data_version == s1.schedule_message_service.data_version
    assert master.timer_message_store.timer_checkpoint.data_version.compare(ckpt.data_version) >= 0
    # ... and persisted before it registered.
    on_disk = type(master.consumer_offset_manager)(master.message_store_config.storePathRootDir,
                                                sim.nodes["broker-a"].now_ms)
    on_disk.load()
    assert on_disk.query_offset("G", TOPIC_OF_GROUP, 0) == 8
    # The master delivers the fifth delayed message only (the first four were the slave's), and not
    # the timer message, whose slot the slave read.
    sim.run_until(lambda: sim.nodes["broker-a"].now_ms() > timer_due + 5_000, 30_000)
    assert master.schedule_message_service.offset_table.get(3) == 5
    assert master.message_store.get_max_offset_in_queue("TopicD", 0) == 1
    assert master.message_store.get_max_offset_in_queue("TopicT", 0) == 0
    close(sim)


def test_a_stale_member_version_is_not_adopted():
    """The master's own tables are newer (their DataVersion compares > the member's): kept."""
    sim = group(slaves=1, consumerOffsetUpdateVersionStep="1", delayOffsetUpdateVersionStep="1",
                syncBrokerMemberGroupPeriod="1000")
    settle(sim)
    master, s1 = b(sim, "broker-a"), b(sim, "broker-a-s1")
    for offset in range(1, 6):  # five commits the slave never synced (SlaveSynchronize: once a minute)
        master.consumer_offset_manager.commit_offset("c", "G", TOPIC_OF_GROUP, 0, offset * 10)
    for offset in range(1, 4):  # three delay-offset versions (the offset itself is clamped at load)
        master.schedule_message_service.update_offset(3, offset)
    master.consumer_offset_manager.persist()
    master.schedule_message_service.persist()
    act(sim)
    s1.consumer_offset_manager.commit_offset("c", "G", TOPIC_OF_GROUP, 0, 7)  # one commit: counter 1 < 5
    s1.schedule_message_service.update_offset(3, 1)
    assert s1.consumer_offset_manager.data_version.compare(master.consumer_offset_manager.data_version) < 0
    master = restart(sim, "broker-a")
    sim.run_until(lambda: not master.is_isolated, 30_000)
    assert master.consumer_offset_manager.query_offset("G", TOPIC_OF_GROUP, 0) == 50
    assert master.consumer_offset_manager.data_version.counter == 5
    assert master.schedule_message_service.data_version.counter == 3
    close(sim)


def test_a_member_that_never_reaches_transfer_keeps_the_master_isolated_and_retrying():
    """No HA connection from the member's host within 10 s: the attempt fails, the next one comes
    1 s later (906 again); the master stays out of the route meanwhile. Once the member replicates
    again, the next attempt goes through."""
    sim = group(slaves=1)
    settle(sim)
    act(sim)
    s1 = b(sim, "broker-a-s1")
    s1.ha_service.ha_client.shutdown()  # this member's HA client is gone: it never connects
    restarted = sim.now_ms()
    master = restart(sim, "broker-a")
    sim.run_for(40_000)  # past the first periodic registration (10 s) and many heartbeat periods
    assert master.is_isolated and MASTER not in live(sim)
    assert route_addrs(sim) == {1: S1}
    sent = requests_sent(sim, "broker-a", restarted)
    assert not [c for _, _, c in sent if c in NAMESRV_CODES]
    ha_info = [t for t, peer, code in sent if peer == S1 and code == RequestCode.EXCHANGE_BROKER_HA_INFO]
    assert len(ha_info) >= 3
    # Each try waited for the connection (10 s without one) and 1 s more before the next.
    assert all(later - earlier > 11_000 for earlier, later in zip(ha_info, ha_info[1:]))
    assert not [code for _, peer, code in sent if code == RequestCode.GET_ALL_CONSUMER_OFFSET]
    assert online_events(sim, "broker-a", restarted) == []

    # The member restarts (a new HA client, which learns the master's HA address from the next 906):
    # the master goes online.
    sim.nemesis.kill("broker-a-s1")
    restart(sim, "broker-a-s1")
    sim.run_until(lambda: not master.is_isolated, 30_000)
    sim.run_until(lambda: MASTER in live(sim), 3_000)
    assert route_addrs(sim)[0] == MASTER
    close(sim)


def test_a_returning_slave_replicates_before_it_registers():
    """prepareForSlaveOnline: the group has a master (minId 0): ask it for its HA info (906 without
    an address), replicate from its HA address, wait for its own HA client in TRANSFER, then
    startService(0, master): registered, no special services."""
    sim = group(slaves=1)
    settle(sim)
    sim.nemesis.kill("broker-a-s1")
    sim.run_for(2_000)
    restarted = sim.now_ms()
    s1 = restart(sim, "broker-a-s1")
    assert s1.is_isolated
    sim.run_until(lambda: not s1.is_isolated, 20_000)
    [online] = online_events(sim, "broker-a-s1", restarted)
    transfer = [e.time_ms for e in sim.tracer.events if e.kind == "state" and e.node == "broker-a-s1"
                and e.fields["machine"] == "DefaultHAClient" and e.fields["to"] == "TRANSFER"
                and e.time_ms >= restarted]
    assert transfer and transfer[0] <= online.time_ms
    sent = requests_sent(sim, "broker-a-s1", restarted, online)
    assert (MASTER, RequestCode.EXCHANGE_BROKER_HA_INFO) in [(p, c) for t, p, c in sent if t <= transfer[0]]
    assert sent[-1][1:] == (NS, RequestCode.REGISTER_BROKER)
    assert not [c for _, _, c in sent[:-1] if c in NAMESRV_CODES]
    assert s1.ha_service.ha_client.get_ha_master_address() == MASTER_HA
    assert (s1.min_broker_id_in_group, s1.special_service_running) == (0, False)
    sim.run_until(lambda: S1 in live(sim), 3_000)
    close(sim)


def test_a_returning_slave_without_a_master_starts_with_the_smallest_id():
    """Neither master nor empty group: startService(minId, addr) at once; the special services stay
    with slave 1."""
    sim = group(slaves=2)
    settle(sim)
    sim.nemesis.kill("broker-a-s2")
    act(sim)
    restarted = sim.now_ms()
    s2 = restart(sim, "broker-a-s2")
    sim.run_until(lambda: not s2.is_isolated, 5_000)
    [online] = online_events(sim, "broker-a-s2", restarted)
    assert (online.fields["min_broker_id"], online.fields["min_broker_addr"]) == (1, S1)
    assert (s2.min_broker_id_in_group, s2.special_service_running) == (1, False)
    assert b(sim, "broker-a-s1").special_service_running
    close(sim)


def test_the_master_s_return_wakes_the_slave_s_ha_client():
    """onMasterOnline wakes the HA client (wakeupHAClient): it connects when the notice comes, not at
    the end of its 5 s wait."""
    sim = group(slaves=1, totalReplicas="1", syncBrokerMemberGroupPeriod="600000")
    sim.run_for(5_000)
    s1 = b(sim, "broker-a-s1")
    assert s1.ha_service.ha_client.current_state is HAConnectionState.TRANSFER
    sim.nemesis.kill("broker-a")
    client = RemotingClient(sim.nodes["client"])

    def notify(**ext):
        request = RemotingCommand.create_request_command(RequestCode.NOTIFY_MIN_BROKER_ID_CHANGE,
                                                         {"brokerName": "broker-a", **ext})
        assert sim.run(client.invoke_sync(S1, request, 3000)).code == ResponseCode.SUCCESS

    notify(minBrokerId="1", minBrokerAddr=S1, offlineBrokerAddr=MASTER)
    assert s1.ha_service.ha_client.get_ha_master_address() is None
    restart(sim, "broker-a")
    sim.run_for(7_300)  # the client is somewhere in a 5 s wait
    assert s1.ha_service.ha_client.current_state is HAConnectionState.READY
    notified = sim.now_ms()
    notify(minBrokerId="0", minBrokerAddr=MASTER, haBrokerAddr=MASTER_HA)
    sim.run_until(lambda: s1.ha_service.ha_client.current_state is HAConnectionState.TRANSFER, 6_000)
    connected = [e.time_ms for e in sim.tracer.events if e.kind == "state" and e.node == "broker-a-s1"
                 and e.fields["machine"] == "DefaultHAClient" and e.fields["to"] == "TRANSFER"][-1]
    # The connect follows the notice (a few network round trips), not the retry timer.
    assert connected - notified < 100, connected - notified
    close(sim)


def test_timer_checkpoint_round_trips_through_get_timer_check_point():
    sim = group(slaves=1, totalReplicas="1")
    sim.run_for(2_000)
    master = b(sim, "broker-a")
    ckpt = master.timer_message_store.timer_checkpoint
    ckpt.last_read_time_ms, ckpt.last_timer_queue_offset, ckpt.master_timer_queue_offset = 5_000, 2, 3
    ckpt.data_version = DataVersion(4, 77, 9)
    got = sim.run(b(sim, "broker-a-s1").broker_outer_api.get_timer_check_point(MASTER))
    assert got == DecodedTimerCheckpoint(5_000, 0, 2, 3, DataVersion(4, 77, 9))
    assert DecodedTimerCheckpoint.decode(ckpt.encode()[:32]).data_version == DataVersion()
    with pytest.raises(ValueError, match="40 bytes"):
        DecodedTimerCheckpoint.decode(ckpt.encode()[:40])
    close(sim)


# ---------------------------------------------------------------------------------------------
# The point of it: consumers do not consume again what they consumed from the acting slave
# ---------------------------------------------------------------------------------------------

def acting_group(skip_pre_online: bool):
    acting = {"enableSlaveActingMaster": True, "totalReplicas": 2, "skipPreOnline": skip_pre_online}
    return [("broker-a", "broker-a", 0, "ASYNC_MASTER", 10911, acting),
            ("broker-a-s", "broker-a", 1, "SLAVE", 10931, {"slaveReadEnable": True, **acting})]


def reconsumed_after_master_returns(lab, skip_pre_online: bool) -> tuple[int, int]:
    """Consume a first batch from the master, a second from the acting slave, restart the master,
    then start the group's consumer again. Returns (messages consumed more than once, consumptions)
    counted from the trace's client operations."""
    lab = lab(acting_group(skip_pre_online), slave_synchronize_period_ms=3_000)
    sim = lab.sim
    sim.run_until(lambda: not sim.components["broker-a"].is_isolated
                  and not sim.components["broker-a-s"].is_isolated, 10_000)
    lab.create_topic()
    lab.add_client("producer", lambda: {"producer": DefaultMQProducer("PG", LAB_NS)})
    producer = lab.client("producer", "producer")
    recorder = Recorder("c")
    lab.add_client("consumer", lambda: {"consumer": push_consumer(recorder)})
    sim.run_for(2_000)
    send_all(lab, producer, [b"one-%d" % i for i in range(12)])
    sim.run_until(lambda: len(recorder.consumed) == 12, 10_000)
    sim.stop("consumer")  # its offsets to the master
    # The master persists them (every 5 s) and the slave copies them (SlaveSynchronize).
    sim.run_for(15_000)
    send_all(lab, producer, [b"two-%d" % i for i in range(12)])
    master, slave = sim.components["broker-a"], sim.components["broker-a-s"]
    sim.run_until(lambda: slave.message_store.get_max_phy_offset() == master.message_store.get_max_phy_offset(),
                  3_000)
    sim.nemesis.kill("broker-a")
    sim.run_until(lambda: slave.special_service_running, 5_000)
    # The consumer comes back while the master is away: it consumes the second batch from the slave
    # and commits there.
    sim.nemesis.restart("consumer")
    sim.run_until(lambda: len(recorder.consumed) == 24, 35_000)
    sim.stop("consumer")
    master = restart(sim, "broker-a")
    sim.run_until(lambda: not master.is_isolated, 30_000)
    sim.nemesis.restart("consumer")
    sim.run_for(15_000)
    _, acked, consumed = history(sim)
    assert set(consumed) == acked and len(acked) == 24  # nothing lost either way
    return sum(1 for n in consumed.values() if n > 1), sum(consumed.values())


@pytest.mark.parametrize("skip_pre_online", [False, True])
def test_pre_online_prevents_the_consumer_offset_rollback(lab, skip_pre_online):
    reconsumed, consumptions = reconsumed_after_master_returns(lab, skip_pre_online)
    if skip_pre_online:
        # RocketMQ's hazard: the master registers at once with the offsets it had before it died.
        assert reconsumed == 12 and consumptions == 36
    else:
        assert reconsumed == 0 and consumptions == 24


def test_offset_versions_carry_the_store_s_state_machine_version():
    """ConsumerOffsetManager.commitOffset and ScheduleMessageService.updateOffset step their
    DataVersion with ``nextVersion(messageStore.getStateMachineVersion())``: in controller mode the
    master epoch, so a newer epoch's tables compare newer whatever their counters."""
    from tests.replicas_helpers import br, rm, start_and_wait_running, world
    sim = world(5, brokers=("A",), A={"consumerOffsetUpdateVersionStep": "1", "delayOffsetUpdateVersionStep": "1"})
    start_and_wait_running(sim, "A")
    broker = br(sim, "A")
    epoch = rm(sim, "A").master_epoch
    assert epoch >= 1
    broker.consumer_offset_manager.commit_offset("c", "G", "T", 0, 1)
    broker.schedule_message_service.update_offset(1, 1)
    assert broker.consumer_offset_manager.data_version.state_version == epoch
    assert broker.schedule_message_service.data_version.state_version == epoch
    sim.close()
