"""The claims of "一文详解 RocketMQ 如何利用 Raft 进行高可用保障" about controller mode, on a
whole cluster, as seeded simulator experiments (also RocketMQ's "主备自动切换模式部署" and the
controller design document, docs/en/controller/design.md).

Each experiment builds a controller-mode deployment with rmqlab.cluster from conf/controller/ (a
name server, three controllers, broker set broker-a of three replicas broker-n0..n2 with
allAckInSyncStateSet=true), drives it with rmqlab's producer and pull consumer, injects the fault
of the claim, and judges the outcome from the event trace: acknowledged sends are `client`
operations (rmqlab.trace.client_ops), masters and controller leaders are `role` events
(Cluster.master, Cluster.controller_leader, Cluster.master_changes). The replicas' files are
compared on disk at the end of the truncation experiments. Virtual failover times are printed
(`pytest -s`) and named in the assertions' messages.
"""

from __future__ import annotations

from tests.controller_mode_helpers import (ALL_IDS, BROKERS, acked_keys, assert_replicas_consistent, controller_id,
                                           fail_over, log_lines, ok, readable_keys, rm, send, start, sync_state_set,
                                           unclean_schedule, wait_writable)


# --- a. 3S tolerates 2n failures of 2n+1 ----------------------------------------------------------
def test_a_broker_set_keeps_writing_after_two_of_three_replicas_die():
    """The Raft article's "3S Algorithm": with an election centre, a set of 2n+1 replicas survives 2n
    failures as long as one SyncStateSet member is left; a Raft group of three would stop at two
    (the controllers' own group shows it: with two of three dead no leader is elected)."""
    c = start(seed=11)
    assert len(ok(send(c, 20, "warm"))) == 20
    first, second, t1 = fail_over(c, c.nemesis.kill)
    print(f"\n3S: first failover {first} -> {second} in {t1:.0f} virtual ms")
    c.run_until(lambda: sync_state_set(c) == {controller_id(c, n) for n in BROKERS if n != first}, 60_000)
    assert wait_writable(c, "after-first") >= 0
    _, third, t2 = fail_over(c, c.nemesis.kill)
    print(f"3S: second failover {second} -> {third} in {t2:.0f} virtual ms")
    assert third not in (first, second)
    writable = wait_writable(c, "after-second")
    print(f"3S: writes accepted again {writable:.0f} virtual ms after the new master")
    results = send(c, 20, "alone")
    assert len(ok(results)) == 20, f"one surviving replica of three should take every write: {results}"
    assert {r.message_queue.broker_name for r in ok(results)} == {"broker-a"}
    assert t1 < 5_000 and t2 < 5_000, f"failovers took {t1:.0f} and {t2:.0f} virtual ms"
    assert acked_keys(c) <= readable_keys(c, "reader"), "an acknowledged message went missing"
    # The contrast with majority quorums: two of the three controllers down, no leader at all.
    leader = c.controller_leader()
    for name in [n for n in c.controller_nodes if n != leader][:1] + [leader]:
        c.nemesis.kill(name)
    c.run_for(15_000)
    assert c.controller_leader() is None


# --- b. the data plane does not depend on the control plane -----------------------------------------
def test_b_losing_the_controllers_stops_failover_not_the_master():
    """The Raft article's "控制面/数据面分离" and chaos result c ("Controller 任意形式下的故障 ... 均不影响
    Broker 的正常运转"); "主备自动切换模式部署": a controller outage "只影响切换能力，不影响存量集群的正常收发"."""
    c = start(seed=12)
    master = c.master()
    assert len(ok(send(c, 10, "warm"))) == 10
    leader = c.controller_leader()
    followers = [n for n in c.controller_nodes if n != leader]
    c.nemesis.kill(leader)
    c.nemesis.kill(followers[0])  # the majority is gone
    c.run_for(20_000)
    assert c.controller_leader() is None
    results = send(c, 20, "no-majority")
    assert len(ok(results)) == 20, f"the master should keep taking writes without a controller majority: {results}"
    c.nemesis.kill(followers[1])  # no controller at all
    c.run_for(20_000)
    results = send(c, 20, "no-controller")
    assert len(ok(results)) == 20, f"the master should keep taking writes without controllers: {results}"
    assert c.master() == master and acked_keys(c) <= readable_keys(c, "reader-1")

    # Now the master dies: no election until the controllers return.
    down_at = c.sim.now_ms()
    c.nemesis.kill(master)
    c.run_for(30_000)
    assert c.master() is None and not [t for t, _, _ in c.master_changes() if t > down_at]
    back_at = c.sim.now_ms()
    for name in c.controller_nodes:
        c.nemesis.restart(name)
    c.run_until(lambda: c.master() is not None, 60_000)
    elected = [t for t, _, _ in c.master_changes() if t > down_at][0] - back_at
    print(f"\ncontrollers back: new master {c.master()} elected after {elected:.0f} virtual ms")
    assert elected < 30_000, f"election took {elected:.0f} virtual ms after the controllers returned"
    wait_writable(c, "after")
    assert acked_keys(c) <= readable_keys(c, "reader-2")


# --- c. the four election triggers ------------------------------------------------------------------
def test_c1_heartbeat_loss_elects_a_new_master():
    """The Raft article's trigger a.i ("HeartbeatManager 监听到有 broker 心跳失效"): the master's channel closes
    (killed process) or its heartbeats stop (a suspended process keeps its connections); the
    controller elects from the SyncStateSet and the old master comes back as a slave. Embedded
    deployment: the controllers run inside the three name servers."""
    c = start(seed=13, mode="controller-embedded")
    assert len(ok(send(c, 10, "warm"))) == 10
    killed, second, t_kill = fail_over(c, c.nemesis.kill)
    inactive = f"The master {controller_id(c, killed)} of broker-set broker-a is inactive"
    assert any(log_lines(c, n, inactive) for n in c.controller_nodes), "the controller saw no inactive master"
    print(f"\nheartbeat trigger: channel closed (kill) -> new master in {t_kill:.0f} virtual ms")
    c.nemesis.restart(killed)
    c.run_until(lambda: sync_state_set(c) == ALL_IDS, 60_000)
    suspended, third, t_suspend = fail_over(c, c.nemesis.suspend)
    print(f"heartbeat trigger: heartbeats lapsed (suspend) -> new master in {t_suspend:.0f} virtual ms")
    assert t_kill < 5_000, f"a closed channel should trigger at once, took {t_kill:.0f} virtual ms"
    # controllerHeartBeatTimeoutMills (10 s) plus at most one scanNotActiveBrokerInterval (5 s).
    assert 10_000 <= t_suspend <= 16_000, f"heartbeat expiry took {t_suspend:.0f} virtual ms"
    c.nemesis.resume(suspended)  # a stale master: it learns the newer epoch and follows
    c.run_until(lambda: rm(c, suspended).master_broker_id == controller_id(c, third), 30_000)
    assert c.master() == third
    wait_writable(c, "after")
    assert acked_keys(c) <= readable_keys(c, "reader")


def test_c2_a_sync_state_set_without_a_live_master_is_re_elected_by_the_new_leader():
    """The Raft article's trigger a.ii ("Controller 检测到有一组 Sync-State Set 不存在 master"): the master and
    the controller leader die together; the next leader never saw the master's channel close as
    leader, and its scan for sets without a live master (scanInactiveMasterInterval) elects one."""
    c = start(seed=14)
    old_leader, master = c.controller_leader(), c.master()
    t0 = c.sim.now_ms()
    c.nemesis.kill(old_leader)
    c.nemesis.kill(master)
    c.run_until(lambda: c.master() not in (None, master), 60_000)
    took = c.master_changes()[-1][0] - t0
    leader = c.controller_leader()
    print(f"\nno-master scan: new master {c.master()} after {took:.0f} virtual ms (leader {leader})")
    assert log_lines(c, leader, "Elect a new master in broker-set: broker-a done", t0)
    assert not log_lines(c, leader, "The master", t0), "the channel-close trigger should not have fired"
    wait_writable(c, "after")


def test_c3_a_broker_nominates_itself_at_register_and_when_polling_finds_no_master():
    """The Raft article's trigger b.ii ("Broker 向 controller 注册完后，仍未从 controller 获取到 master 信息")
    and b.i ("Broker 向 controller 查询元数据时，没找到master信息")."""
    c = start(seed=15)
    # b.ii: the set's first master is the first broker that registered and asked to be elected.
    first = [e for e in c.events() if e.kind == "log" and e.node in BROKERS
             and e.fields["message"].startswith("brokerElect: controller answered master")]
    assert first and first[0].fields["message"].endswith("epoch 1")
    assert c.master_changes()[0][1:] == (first[0].node, 1)
    # b.i: the two slaves lose the controllers (their heartbeats lapse), then the master dies: the
    # controller finds no live SyncStateSet member and records "no master" under a new epoch.
    master = c.master()
    slaves = [n for n in BROKERS if n != master]
    c.nemesis.partition(slaves, c.controller_nodes)
    c.run_for(20_000)
    t0 = c.sim.now_ms()
    c.nemesis.kill(master)
    c.run_for(10_000)
    assert c.master() is None
    c.nemesis.heal()  # the slaves poll again, find the newer epoch without a master, nominate themselves
    c.run_until(lambda: c.master() is not None, 30_000)
    new = c.master()
    nominated = log_lines(c, new, "brokerElect: controller answered master", t0)
    assert nominated, "the new master should have been elected at its own request"
    assert not [e for e in c.events() if e.node == new and e.kind == "node.restart"], "it polled, not registered"
    print(f"\nself-nomination after polling: {new} master {c.master_changes()[-1][0] - t0:.0f} virtual ms "
          "after the old master died")
    wait_writable(c, "after")


def test_c4_admin_elect_master_hands_the_role_to_the_designated_broker():
    """The Raft article's trigger c ("通过 RocketMQ Admin Tools 发起"): mqadmin electMaster names a slave of the
    SyncStateSet; it becomes master and the old master a slave; writes continue."""
    c = start(seed=16)
    master = c.master()
    target = [n for n in BROKERS if n != master][0]
    admin = c.sim.components["admin"]["admin"]
    t0 = c.sim.now_ms()
    header, _members = c.sim.run(admin.elect_master(c.controller_addr, "DefaultCluster", "broker-a",
                                                    controller_id(c, target)))
    assert header.master_broker_id == controller_id(c, target)
    c.run_until(lambda: c.master() == target and not rm(c, master).is_master_state(), 30_000)
    print(f"\nelectMaster: {master} -> {target} in {c.master_changes()[-1][0] - t0:.0f} virtual ms")
    wait_writable(c, "after")
    assert acked_keys(c) <= readable_keys(c, "reader")


# --- e. unclean election: the loss it permits ---------------------------------------------------------
def test_e_unclean_election_loses_what_the_lost_master_acknowledged_clean_waits_and_loses_nothing():
    """"主备自动切换模式部署": "enableElectUncleanMaster：是否可以从 SyncStateSet 以外选举 Master，若为 true，可能会选取
    数据落后的副本作为 Master 而丢失消息"; allAckInSyncStateSet=true "可以保证消息不丢失"."""
    c, s = unclean_schedule(seed=17, unclean=True)
    assert c.master() == s["y"], "unclean: the replica outside the SyncStateSet is elected"
    print(f"\nunclean: {s['y']} elected {c.master_changes()[-1][0] - s['t0']:.0f} virtual ms after {s['x']} died")
    c.nemesis.heal()
    wait_writable(c, "after")
    lost = acked_keys(c) - readable_keys(c, "reader")
    print(f"unclean: {len(lost)} acknowledged messages lost ({len(lost & s['x_acked'])} of them acknowledged "
          f"by {s['x']} alone)")
    # What Y missed while outside the SyncStateSet: acknowledged by A and X, then by X alone.
    assert s["x_acked"] <= lost, "everything the lost master acknowledged alone is gone"
    assert not lost & s["y_has"], "nothing acknowledged while Y was in the SyncStateSet is lost"

    c, s = unclean_schedule(seed=17, unclean=False)
    assert c.master() is None, "clean: no replica outside the SyncStateSet may be elected"
    c.nemesis.heal()
    c.nemesis.restart(s["x"])  # the only SyncStateSet member returns and nominates itself
    c.run_until(lambda: c.master() == s["x"], 60_000)
    wait_writable(c, "after")
    assert acked_keys(c) <= readable_keys(c, "reader"), "clean election lost an acknowledged message"


# --- f. truncation on the whole cluster ------------------------------------------------------------
def test_f1_async_flush_loss_on_the_old_master_is_repaired_from_the_new_one():
    """A machine crash of the ASYNC_FLUSH master loses its unflushed tail (a torn write left behind);
    it returns as a slave, cuts the torn record, truncates to the consistent point with the new
    master's epochs and catches up: nothing acknowledged is lost (allAckInSyncStateSet=true)."""
    c = start(seed=18)
    assert len(ok(send(c, 40, "burst"))) == 40
    old, new, took = fail_over(c, lambda n: c.nemesis.crash(n, torn_bytes=lambda _file, _unflushed: 7))
    crash = [e for e in c.events() if e.kind == "node.crash" and e.node == old][-1]
    print(f"\nmachine crash: {crash.fields['lost_bytes']} unflushed bytes lost on {old}; {new} master in "
          f"{took:.0f} virtual ms")
    assert crash.fields["lost_bytes"] > 0
    wait_writable(c, "after")
    assert len(ok(send(c, 10, "more"))) == 10
    c.nemesis.restart(old)
    confirm = assert_replicas_consistent(c)
    print(f"machine crash: replicas equal up to confirm offset {confirm}")
    assert acked_keys(c) <= readable_keys(c, "reader")


def test_f2_two_failovers_in_a_row_leave_three_equal_replicas():
    c = start(seed=19)
    assert len(ok(send(c, 20, "e1"))) == 20
    first, second, t1 = fail_over(c, c.nemesis.kill)
    c.run_until(lambda: sync_state_set(c) == {controller_id(c, n) for n in BROKERS if n != first}, 60_000)
    wait_writable(c, "e2")
    assert len(ok(send(c, 20, "e2"))) == 20
    _, third, t2 = fail_over(c, c.nemesis.kill)
    wait_writable(c, "e3")
    assert len(ok(send(c, 20, "e3"))) == 20
    print(f"\ntwo failovers: {first} -> {second} ({t1:.0f} ms) -> {third} ({t2:.0f} ms)")
    c.nemesis.restart(first)
    c.nemesis.restart(second)
    assert_replicas_consistent(c)
    assert [e.epoch for e in rm(c, third).get_epoch_entries()] == [1, 2, 3]
    assert acked_keys(c) <= readable_keys(c, "reader")


def test_f3_a_slave_that_wrote_under_an_epoch_the_new_master_never_saw_truncates_it():
    """The unclean schedule of test e: X wrote under epoch 2, Y (master of epoch 3) never saw epoch
    2. X returns: its epoch 2 is not in Y's cache, the consistent point is the end of epoch 1 as Y
    has it, X cuts everything after it and replicates epoch 3 (EpochFileCache.findConsistentPoint,
    AutoSwitchHAClient.doTruncate)."""
    c, s = unclean_schedule(seed=20, unclean=True)
    x, y = s["x"], s["y"]
    assert c.master() == y
    assert 2 not in [e.epoch for e in rm(c, y).get_epoch_entries()]
    x_end = c.components[x].message_store.get_max_phy_offset()
    c.nemesis.heal()
    wait_writable(c, "epoch3")
    assert len(ok(send(c, 10, "epoch3"))) == 10
    c.nemesis.restart(x)
    c.nemesis.restart(s["a"])
    assert_replicas_consistent(c)
    assert 2 not in [e.epoch for e in rm(c, x).get_epoch_entries()]
    print(f"\nX truncated its epoch-2 tail (it had {x_end} bytes)")


# --- "主备自动切换模式部署": one controller -------------------------------------------------------------
def test_a_single_controller_still_fails_over_and_its_loss_stops_only_failover():
    """"主备自动切换模式部署", "Controller 部署": "Controller 若只部署单副本也能完成 Broker Failover，但若该单点
    Controller 故障，会影响切换能力，但不会影响存量集群的正常收发"."""
    c = start(seed=21, controllers=1)
    _, new, took = fail_over(c, c.nemesis.kill)
    print(f"\none controller: failover in {took:.0f} virtual ms")
    wait_writable(c, "after")
    c.nemesis.kill(c.controller_nodes[0])
    c.run_for(10_000)
    assert len(ok(send(c, 10, "no-controller"))) == 10 and c.master() == new
