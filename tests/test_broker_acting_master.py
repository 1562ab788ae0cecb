"""Slave acting master (RIP-32), the broker's side, on the simulator.

A group "broker-a" of one master (id 0) and two slaves (ids 1 and 2), every broker with
``enableSlaveActingMaster=true``, and a name server with its default configuration (no
NOTIFY_MIN_BROKER_ID_CHANGE, no route rewrite): the brokers learn the group's smallest live id by
themselves (the member-group sync, every ``syncBrokerMemberGroupPeriod``). The notification path
(905) is driven directly, as the name server would send it. RocketMQ's behaviour these tests hold
the broker to: ``BrokerController`` (sendHeartbeat, syncBrokerMemberGroup, updateMinBroker,
onMinBrokerChange, changeSpecialServiceStatus) and ``AdminBrokerProcessor`` (notifyMinBrokerIdChange,
updateBrokerHaInfo) in broker/src/main/java/org/apache/rocketmq/broker/.
"""

from __future__ import annotations

import asyncio

import pytest

from rmqlab.common.topic.topic_validator import TopicValidator
from rmqlab.remoting import RemotingClient, RemotingCommand, RequestCode, ResponseCode
from rmqlab.runtime.sim import Simulation
from tests.broker_helpers import NS, CppClient, acting_master_group, close, props

MASTER, S1, S2 = "127.0.0.1:10911", "127.0.0.1:10921", "127.0.0.1:10931"
MASTER_HA = "127.0.0.1:10912"
MIN_MACHINE, SERVICE_MACHINE = "BrokerController.minBrokerIdInGroup", "BrokerController.specialService"


def group(seed: int = 7, slaves: int = 2, master_overrides: dict | None = None, **overrides) -> Simulation:
    """namesrv, broker-a (master), broker-a-s1 (id 1), broker-a-s2 (id 2), client."""
    return acting_master_group(seed, slaves, master_overrides, **overrides)


def b(sim: Simulation, name: str):
    return sim.components[name]


def states(sim: Simulation, node: str, machine: str) -> list[tuple]:
    return [(e.fields["from"], e.fields["to"]) for e in sim.tracer.events
            if e.kind == "state" and e.node == node and e.fields["machine"] == machine]


def sent_codes(sim: Simulation, node: str, peer: str) -> list[int]:
    return [e.fields["code"] for e in sim.tracer.events if e.kind == "frame.send" and e.node == node
            and e.fields.get("proto") == "remoting" and e.fields["peer"] == peer and not e.fields["flag"] & 1]


def request(sim: Simulation, addr: str, code: int, ext: dict) -> RemotingCommand:
    client = RemotingClient(sim.nodes["client"])
    return sim.run(client.invoke_sync(addr, RemotingCommand.create_request_command(code, ext), 3000))


def special_services(broker) -> tuple[bool, bool, bool, bool]:
    """(flag, delay levels delivering, POP revive on, timer dequeue on)."""
    return (broker.special_service_running, bool(broker._deliver_tasks), broker.pop_revive_service.should_run_pop_revive,
            broker.timer_message_store.should_running_dequeue)


RUNNING, STOPPED = (True,) * 4, (False,) * 4


def test_the_smallest_slave_takes_the_special_services_while_the_master_is_away_and_gives_them_back():
    sim = group()
    master, s1, s2 = b(sim, "broker-a"), b(sim, "broker-a-s1"), b(sim, "broker-a-s2")
    assert (special_services(master), special_services(s1), special_services(s2)) == (RUNNING, STOPPED, STOPPED)
    c = CppClient(sim, "client")
    # Due 10 s after the send (level 3, and a timer message): they fall due while the master is away.
    assert c.send("TopicD", b"delayed", props(DELAY="3")).code == 0
    deliver_ms = sim.nodes["client"].now_ms() + 10_000
    assert c.send("TopicT", b"timer", props(TIMER_DELIVER_MS=str(deliver_ms))).code == 0
    sim.run_until(lambda: s1.message_store.get_max_phy_offset() == master.message_store.get_max_phy_offset()
                  and s2.message_store.get_max_phy_offset() == master.message_store.get_max_phy_offset(), 30_000)
    sim.run_for(3_000)  # several member-group syncs: the smallest id is the master's, nothing moves
    assert (s1.min_broker_id_in_group, s2.min_broker_id_in_group) == (0, 0)
    assert states(sim, "broker-a-s1", MIN_MACHINE) == []

    s1_end = s1.message_store.get_max_phy_offset()
    sim.nemesis.kill("broker-a")
    killed = sim.now_ms()
    sim.run_until(lambda: s1.special_service_running, timeout_ms=3_000)
    # Within about one syncBrokerMemberGroupPeriod (1 s) of the name server dropping the master.
    assert sim.now_ms() - killed <= 2 * s1.broker_config.syncBrokerMemberGroupPeriod
    sim.run_for(1_000)
    assert special_services(s1) == RUNNING and special_services(s2) == STOPPED
    assert (s1.min_broker_id_in_group, s2.min_broker_id_in_group) == (1, 1)
    assert s1.min_broker_addr_in_group == S1
    assert states(sim, "broker-a-s1", MIN_MACHINE) == [("0", "1")]
    assert states(sim, "broker-a-s1", SERVICE_MACHINE) == [("STOPPED", "RUNNING")]
    assert states(sim, "broker-a-s2", MIN_MACHINE) == [("0", "1")] and states(sim, "broker-a-s2", SERVICE_MACHINE) == []
    # The delayed and timer messages fall due on the acting slave, which has no remote escape yet:
    # they are not written into the slave's own store (a slave's log is the master's), and the
    # delay level waits.
    sim.run_for(12_000)
    assert s1.message_store.get_max_phy_offset() == s1_end
    assert s1.message_store.get_max_offset_in_queue("TopicD", 0) == 0
    assert s1.message_store.get_max_offset_in_queue("TopicT", 0) == 0
    assert s1.schedule_message_service.offset_table.get(3, 0) == 0

    sim.nemesis.restart("broker-a")
    sim.run_until(lambda: not b(sim, "broker-a-s1").special_service_running, timeout_ms=5_000)
    sim.run_for(1_000)
    master = b(sim, "broker-a")
    assert special_services(master) == RUNNING and special_services(s1) == STOPPED
    assert special_services(s2) == STOPPED
    assert (s1.min_broker_id_in_group, s2.min_broker_id_in_group) == (0, 0)
    assert states(sim, "broker-a-s1", MIN_MACHINE) == [("0", "1"), ("1", "0")]
    assert states(sim, "broker-a-s1", SERVICE_MACHINE) == [("STOPPED", "RUNNING"), ("RUNNING", "STOPPED")]
    assert states(sim, "broker-a-s2", MIN_MACHINE) == [("0", "1"), ("1", "0")]
    # The master is back: the slaves asked it for its HA address (906) and replicate from it again.
    assert RequestCode.EXCHANGE_BROKER_HA_INFO in sent_codes(sim, "broker-a-s1", MASTER)
    assert s1.ha_service.ha_client.get_ha_master_address() == MASTER_HA
    # The returning master delivers what fell due meanwhile.
    sim.run_until(lambda: master.message_store.get_max_offset_in_queue("TopicD", 0) == 1
                  and master.message_store.get_max_offset_in_queue("TopicT", 0) == 1, timeout_ms=5_000)
    close(sim)


def test_without_slave_acting_master_no_slave_takes_the_special_services():
    sim = group(enableSlaveActingMaster="false")
    s1 = b(sim, "broker-a-s1")
    sim.nemesis.kill("broker-a")
    sim.run_for(5_000)
    assert special_services(s1) == STOPPED and s1.min_broker_id_in_group == 0
    assert [e for e in sim.tracer.events if e.kind == "state" and e.fields["machine"] in (MIN_MACHINE, SERVICE_MACHINE)] \
        == []
    # No heartbeat and no member-group sync either: only the registration talks to the name server.
    codes = set(sent_codes(sim, "broker-a-s1", NS))
    assert codes == {RequestCode.REGISTER_BROKER}, codes
    close(sim)


@pytest.mark.parametrize("compatible", [True, False])
def test_heartbeats_and_member_sync_keep_the_name_server_entry_fresh(compatible):
    """compatibleWithOldNameSrv picks QUERY_DATA_VERSION + GET_ROUTEINFO_BY_TOPIC (the system
    topic's route), else BROKER_HEARTBEAT + GET_BROKER_MEMBER_GROUP. With a 3 s
    brokerNotActiveTimeoutMillis and registrations 30 s apart, only the heartbeats keep the name
    server's live entry: stop them and it expires."""
    sim = group(slaves=1, compatibleWithOldNameSrv=str(compatible).lower(), brokerNotActiveTimeoutMillis="3000")
    s1 = b(sim, "broker-a-s1")
    rim = b(sim, "namesrv").route_info_manager
    sim.run_for(25_000)  # registrations at 0 and 10 s, the next at 40 s
    expired = [e for e in sim.tracer.events if e.kind == "namesrv.channel_expired"]
    assert expired == []
    assert {info.broker_addr for info in rim.broker_live_table} == {MASTER, S1}
    # Registration carries the switch and the timeout (only with slave acting master).
    assert {live.heartbeat_timeout_millis for live in rim.broker_live_table.values()} == {3000}
    assert rim.broker_addr_table["broker-a"].enable_acting_master is True
    codes = sent_codes(sim, "broker-a-s1", NS)
    heartbeat = RequestCode.QUERY_DATA_VERSION if compatible else RequestCode.BROKER_HEARTBEAT
    sync = RequestCode.GET_ROUTEINFO_BY_TOPIC if compatible else RequestCode.GET_BROKER_MEMBER_GROUP
    other = {RequestCode.BROKER_HEARTBEAT, RequestCode.GET_BROKER_MEMBER_GROUP} if compatible else \
        {RequestCode.QUERY_DATA_VERSION, RequestCode.GET_ROUTEINFO_BY_TOPIC}
    assert codes.count(heartbeat) >= 20 and codes.count(sync) >= 20 and not other & set(codes)
    if compatible:
        topics = {e.fields["ext_fields"]["topic"] for e in sim.tracer.events if e.kind == "frame.send"
                  and e.node == "broker-a-s1" and e.fields.get("code") == RequestCode.GET_ROUTEINFO_BY_TOPIC}
        assert topics == {TopicValidator.SYNC_BROKER_MEMBER_GROUP_PREFIX + "broker-a"}
        hb = next(e for e in sim.tracer.events if e.kind == "frame.send" and e.node == "broker-a-s1"
                  and e.fields.get("code") == RequestCode.QUERY_DATA_VERSION)
        assert hb.fields["flag"] == 2 and hb.fields["body_size"] > 0  # oneway, with the DataVersion
    assert s1.message_store.get_alive_replica_num_in_group() == 2
    assert s1.broker_member_group.broker_addrs == {0: MASTER, 1: S1}
    # The check: without the slave's heartbeats its entry expires (timeout + one 5 s scan).
    s1._timers.pop("BrokerHeartbeat").cancel()
    sim.run_for(9_000)
    expired = [e.fields["broker_addr"] for e in sim.tracer.events if e.kind == "namesrv.channel_expired"]
    assert expired == [S1]
    assert {info.broker_addr for info in rim.broker_live_table} == {MASTER}
    close(sim)


def notify(sim: Simulation, addr: str, **fields) -> RemotingCommand:
    ext = {"brokerName": "broker-a", **{k: str(v) for k, v in fields.items()}}
    return request(sim, addr, RequestCode.NOTIFY_MIN_BROKER_ID_CHANGE, ext)


def test_notify_min_broker_id_change_moves_the_services_and_refuses_bad_notices():
    # A member-group sync that never comes after the first (1 s, the master's id): only 905 moves things.
    sim = group(syncBrokerMemberGroupPeriod="600000")
    master, s1, s2 = b(sim, "broker-a"), b(sim, "broker-a-s1"), b(sim, "broker-a-s2")
    sim.run_until(lambda: s2.slave_synchronize.master_addr == MASTER
                  and s2.ha_service.ha_client.get_ha_master_address() == MASTER_HA, 5_000)
    sim.run_for(2_000)

    # Bad notices change nothing: another group, no id, an id that is not a number.
    r = notify(sim, S2, brokerName="broker-b", minBrokerId=2, minBrokerAddr=S2, offlineBrokerAddr=MASTER)
    assert r.code == ResponseCode.INVALID_PARAMETER and "broker-b" in r.remark
    r = notify(sim, S2, minBrokerAddr=S2, offlineBrokerAddr=MASTER)
    assert r.code == ResponseCode.SYSTEM_ERROR and "minBrokerId" in r.remark
    r = notify(sim, S2, minBrokerId="two", minBrokerAddr=S2)
    assert r.code == ResponseCode.SYSTEM_ERROR
    # The master ignores notices (updateMinBroker acts on slaves only).
    assert notify(sim, MASTER, minBrokerId=2, minBrokerAddr=S2).code == ResponseCode.SUCCESS
    assert special_services(master) == RUNNING and special_services(s2) == STOPPED
    assert (master.min_broker_id_in_group, s2.min_broker_id_in_group) == (0, 0)

    # The name server says the master went offline and broker 2 is now the smallest (as if 1 were gone too).
    assert notify(sim, S2, minBrokerId=2, minBrokerAddr=S2, offlineBrokerAddr=MASTER).code == ResponseCode.SUCCESS
    assert special_services(s2) == RUNNING and s2.min_broker_id_in_group == 2
    # onMasterOffline: no metadata sync and no replication from the old master.
    assert s2.slave_synchronize.master_addr is None
    assert s2.ha_service.ha_client.get_ha_master_address() is None
    assert states(sim, "broker-a-s2", MIN_MACHINE) == [("0", "2")]
    event = next(e for e in sim.tracer.events if e.kind == "state" and e.node == "broker-a-s2"
                 and e.fields["machine"] == MIN_MACHINE)
    assert (event.fields["source"], event.fields["offline_broker_addr"], event.fields["broker_set"]) == \
        ("notify", MASTER, "broker-a")
    # The same notice again changes nothing.
    assert notify(sim, S2, minBrokerId=2, minBrokerAddr=S2).code == ResponseCode.SUCCESS
    assert states(sim, "broker-a-s2", SERVICE_MACHINE) == [("STOPPED", "RUNNING")]
    # Broker 1 is not the smallest: its services stay off.
    assert notify(sim, S1, minBrokerId=2, minBrokerAddr=S2).code == ResponseCode.SUCCESS
    assert special_services(s1) == STOPPED and s1.min_broker_id_in_group == 2

    # The master is back, with its HA address in the notice: no need to ask it (no 906).
    ha_asks = sent_codes(sim, "broker-a-s2", MASTER).count(RequestCode.EXCHANGE_BROKER_HA_INFO)
    assert notify(sim, S2, minBrokerId=0, minBrokerAddr=MASTER, haBrokerAddr=MASTER_HA).code == ResponseCode.SUCCESS
    assert special_services(s2) == STOPPED and s2.min_broker_id_in_group == 0
    assert s2.ha_service.ha_client.get_ha_master_address() == MASTER_HA
    assert sent_codes(sim, "broker-a-s2", MASTER).count(RequestCode.EXCHANGE_BROKER_HA_INFO) == ha_asks
    # Without it, the slave asks the master (EXCHANGE_BROKER_HA_INFO) before it answers.
    assert notify(sim, S1, minBrokerId=0, minBrokerAddr=MASTER).code == ResponseCode.SUCCESS
    assert sent_codes(sim, "broker-a-s1", MASTER).count(RequestCode.EXCHANGE_BROKER_HA_INFO) == 1
    assert s1.ha_service.ha_client.get_ha_master_address() == MASTER_HA
    assert states(sim, "broker-a-s1", MIN_MACHINE) == [("0", "2"), ("2", "0")]
    assert states(sim, "broker-a-s1", SERVICE_MACHINE) == []
    close(sim)


def test_exchange_broker_ha_info_both_directions():
    """906 is served with or without slave acting master (RocketMQ does): asked, a master answers
    its HA address, its max offset at load (brokerInitMaxOffset) and its address; told, a
    slave replicates from the address it is given."""
    sim = group(slaves=1, enableSlaveActingMaster="false", syncMasterFlushOffsetWhenStartup="true")
    c = CppClient(sim, "client")
    for i in range(3):
        assert c.send("TopicHA", f"m{i}".encode()).code == 0
    sim.stop("broker-a")
    sim.nemesis.restart("broker-a")
    sim.run_for(500)
    master, s1 = b(sim, "broker-a"), b(sim, "broker-a-s1")
    init = master.message_store.get_max_phy_offset()
    assert init > 0 and master.broker_init_max_offset == init
    c = CppClient(sim, "client")
    assert c.send("TopicHA", b"after").code == 0
    assert master.message_store.get_max_phy_offset() > init
    r = request(sim, MASTER, RequestCode.EXCHANGE_BROKER_HA_INFO, {})
    assert r.code == ResponseCode.SUCCESS
    assert (r.ext_fields["masterHaAddress"], r.ext_fields["masterFlushOffset"], r.ext_fields["masterAddress"]) == \
        (MASTER_HA, str(init), MASTER)
    # A slave asked has nothing to tell.
    r = request(sim, S1, RequestCode.EXCHANGE_BROKER_HA_INFO, {})
    assert r.code == ResponseCode.SUCCESS and not {"masterHaAddress", "masterFlushOffset"} & set(r.ext_fields or {})
    # Told: the HA address to replicate from, and (syncMasterFlushOffsetWhenStartup, none known yet) the offset.
    assert s1.message_store.store_checkpoint.master_flushed_offset == 0
    r = request(sim, S1, RequestCode.EXCHANGE_BROKER_HA_INFO,
                {"masterHaAddress": "127.0.0.1:20912", "masterFlushOffset": "123", "masterAddress": "127.0.0.1:20911"})
    assert r.code == ResponseCode.SUCCESS
    assert s1.ha_service.ha_client.get_ha_master_address() == "127.0.0.1:20912"
    assert s1.message_store.store_checkpoint.master_flushed_offset == 123
    # A known flushed offset is kept.
    request(sim, S1, RequestCode.EXCHANGE_BROKER_HA_INFO, {"masterHaAddress": MASTER_HA, "masterFlushOffset": "456"})
    assert s1.message_store.store_checkpoint.master_flushed_offset == 123
    assert s1.ha_service.ha_client.get_ha_master_address() == MASTER_HA
    close(sim)


def test_skip_pre_online_serves_at_once_in_a_group_of_three_replicas():
    sim = group(slaves=1, totalReplicas="3", skipPreOnline="true")
    master, s1 = b(sim, "broker-a"), b(sim, "broker-a-s1")
    assert not master.is_isolated and not s1.is_isolated
    assert special_services(master) == RUNNING and special_services(s1) == STOPPED
    rim = b(sim, "namesrv").route_info_manager
    assert {info.broker_addr for info in rim.broker_live_table} == {MASTER, S1}
    close(sim)


def test_pulls_held_by_an_acting_slave_go_back_to_the_master_when_it_returns():
    """While broker 2 acts as master it holds a pull that finds nothing (long polling, as a master
    does); the notice that the master is back answers it at once with "retry at the master"
    (onMinBrokerChange: notifyMasterOnline), instead of at the end of its 15 s suspension."""
    sim = group(syncBrokerMemberGroupPeriod="600000")
    s2 = b(sim, "broker-a-s2")
    sim.run_for(2_000)
    assert notify(sim, S2, minBrokerId=2, minBrokerAddr=S2, offlineBrokerAddr=MASTER).code == ResponseCode.SUCCESS
    c = CppClient(sim, "client", S2)
    node = sim.nodes["client"]

    async def scenario():
        # "broker-a", the topic every broker of the group has (one queue).
        pull = asyncio.ensure_future(c.request(RequestCode.PULL_MESSAGE,
                                               c.pull_ext("broker-a", 0, sys_flag=6, suspend_ms=15_000)))
        await node.sleep(1_000)
        held = (pull.done(), s2.pull_request_hold_service.held_count())
        answer = await RemotingClient(node).invoke_sync(S2, RemotingCommand.create_request_command(
            RequestCode.NOTIFY_MIN_BROKER_ID_CHANGE,
            {"brokerName": "broker-a", "minBrokerId": "0", "minBrokerAddr": MASTER, "haBrokerAddr": MASTER_HA}), 3000)
        released = s2.pull_request_hold_service.held_count() == 0  # by the notice, not by its timeout
        r = await pull
        return held, answer.code, released, r

    held, code, released, r = sim.run(scenario())
    assert held == (False, 1) and code == ResponseCode.SUCCESS and released
    assert (r.code, r.ext_fields["suggestWhichBrokerId"]) == (ResponseCode.PULL_RETRY_IMMEDIATELY, "0")
    close(sim)


@pytest.mark.parametrize("settings, outcome", [
    ({"enableSlaveActingMaster": "false"}, "FLUSH_SLAVE_TIMEOUT"),
    ({}, "IN_SYNC_REPLICAS_NOT_ENOUGH"),
    ({"enableAutoInSyncReplicas": "true"}, "SUCCESS"),
    ({"enableAutoInSyncReplicas": "true", "minInSyncReplicas": "2"}, "IN_SYNC_REPLICAS_NOT_ENOUGH"),
])
def test_a_sync_master_whose_slave_died_counts_acks_from_the_replicas_alive(settings, outcome):
    # SYNC_MASTER with inSyncReplicas=2 (one slave must ack); the slave dies. Classic: every put is
    # written and waits slaveTimeout (3 s) for an ack that never comes: FLUSH_SLAVE_TIMEOUT. With
    # slave acting master, CommitLog counts the replicas both alive in the group (the member-group
    # sync) and in sync: 1 of the 2 asked -> refused before anything is written, unless
    # enableAutoInSyncReplicas lowers the ask to what is there (not below minInSyncReplicas).
    sim = group(slaves=1, inSyncReplicas="2", master_overrides={"brokerRole": "SYNC_MASTER"}, **settings)
    master = b(sim, "broker-a")
    c = CppClient(sim, "client")
    sim.run_until(lambda: master.ha_service.in_sync_replicas_nums(master.message_store.get_max_phy_offset()) == 2,
                  10_000)
    assert c.send("TopicS", b"both alive").code == ResponseCode.SUCCESS
    sim.nemesis.kill("broker-a-s1")
    sim.run_for(15_000)  # the name server drops the slave's channel; the master's next syncs see it
    if master.broker_config.enableSlaveActingMaster:
        assert master.message_store.get_alive_replica_num_in_group() == 1
    end, started = master.message_store.get_max_phy_offset(), sim.now_ms()
    r = c.send("TopicS", b"slave gone")
    waited = sim.now_ms() - started
    if outcome == "FLUSH_SLAVE_TIMEOUT":
        assert r.code == ResponseCode.FLUSH_SLAVE_TIMEOUT and waited >= 3_000
        assert master.message_store.get_max_phy_offset() > end
    elif outcome == "SUCCESS":
        assert r.code == ResponseCode.SUCCESS and waited < 100
    else:
        assert r.code == ResponseCode.SYSTEM_ERROR and "in-sync replicas not enough" in (r.remark or "")
        assert master.message_store.get_max_phy_offset() == end
    close(sim)
