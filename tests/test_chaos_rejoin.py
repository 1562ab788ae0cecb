"""How long a replica takes to replicate again after a fault, in controller mode, and which of
RocketMQ's timers decide it.

A slave's AutoSwitchHAClient learns its master's HA address from nowhere but the result of a
NameServer registration (BrokerController.handleRegisterBrokerResult, with
updateMasterHAServerAddrPeriodically set in controller mode; RouteInfoManager.registerBroker answers
a slave with the HA address of the live broker registered as id 0). A broker registers when its role
changes (ReplicasManager.registerBrokerWhenRoleChange) and then on BrokerController's periodic
registerBrokerAll: 10 s after its start, then every registerNameServerPeriod (30 s, clamped to
[10 s, 60 s]). When the slave's role-change registration reaches the NameServer before the new
master's registration as id 0 (the controller notifies every member at once, and the master's
changeToMaster first waits for its dispatch), the slave gets no HA address and its HA client idles
in READY until the next periodic registration.

In apache/rocketmq: broker/src/main/java/org/apache/rocketmq/broker/BrokerController.java,
broker/.../broker/controller/ReplicasManager.java, store/.../store/ha/autoswitch/AutoSwitchHAClient.java
and AutoSwitchHAService.java, namesrv/.../namesrv/routeinfo/RouteInfoManager.java.
"""

from __future__ import annotations

import logging

from rmqlab.broker.broker_controller import FIRST_SCHEDULE_DELAY_MS
from rmqlab.checker import check_all, run_chaos
from rmqlab.checker.schedule import FaultOp, FaultSchedule
from rmqlab.cluster import Cluster
from rmqlab.config.broker import BrokerConfig
from rmqlab.remoting import RequestCode
from tests.sim_helpers import track

CLEAN = {"enableElectUncleanMaster": False}
CONTROLLERS = ["controller-n0", "controller-n1", "controller-n2"]
REGISTER = RequestCode.REGISTER_BROKER
# A request and its answer cross the simulated loopback in a few ms; events that are "at the same
# time" as a timer's slot are within this of it (RocketMQ's timers are whole seconds).
RPC_SLACK_MS = 50

# A machine crash of the master under ASYNC_FLUSH (its log is gone), its restart as a slave, the new
# master killed soon after it was elected and restarted, and the controller leader suspended across
# the re-election: the set's next master registers as id 0 more than 10 s after the crashed
# broker's start. (What random_schedule gives seed 408 with tests/test_controller_chaos.py's
# SCHEDULE options, written out so that it stays this schedule.)
REJOIN_SCHEDULE = FaultSchedule(408, (
    FaultOp(1692.0, "crash", "@master", {"torn_bytes": 0}, 0),
    FaultOp(3264.0, "partition", None, {"groups": [["broker-n2"], ["broker-n0", "broker-n1", *CONTROLLERS]]}, 1),
    FaultOp(6816.0, "heal", None, {}, 1),
    FaultOp(6934.0, "restart", "@master", {}, 0),
    FaultOp(8245.0, "kill", "@master", {}, 2),
    FaultOp(10309.0, "suspend", "controller-n1", {}, 3),
    FaultOp(13159.0, "restart", "@master", {}, 2),
    FaultOp(14000.0, "resume", "controller-n1", {}, 3),
), 14_000, 6_000)


def _requests(events, node, code):
    """(time sent, the answer's ext_fields, when it came) of `node`'s requests `code`; (None, None)
    if no answer came."""
    sent = {(e.fields["peer"], e.fields["opaque"]): e.time_ms for e in events
            if e.node == node and e.kind == "frame.send" and e.fields.get("code") == code}
    answers = {(e.fields["peer"], e.fields["opaque"]): (e.fields.get("ext_fields") or {}, e.time_ms) for e in events
               if e.node == node and e.kind == "frame.recv" and e.fields.get("flag") == 1}
    return sorted((t, *answers.get(key, (None, None))) for key, t in sent.items())


def test_a_restarted_replica_waits_for_its_periodic_name_server_registration_as_rocketmq_does():
    """The crashed master comes back as a slave with an empty log and replicates again only ~40 s
    after its restart, because in RocketMQ too its HA client learns the master's HA address only
    from a NameServer registration:

    1. restart: the broker starts (boot, ReplicasManager: controller metadata, CONTROLLER_REGISTER_BROKER
       answers "master = broker-n1, epoch 2"), changes to slave and registers with the NameServer
       at once — before broker-n1, notified at the same moment, registers as id 0 (its changeToMaster
       waits for its dispatch first): the answer carries no HA address, the HA client idles in READY
       (connectMaster fails, waitForRunning 5 s, again);
    2. broker-n1 is killed and restarted, the controller leader suspended meanwhile; its first
       CONTROLLER_ELECT_MASTER fails and ReplicasManager retries its start 5 s later
       (RETRY_INTERVAL_SECOND): re-elected (epoch 6), it registers as id 0 more than
       FIRST_SCHEDULE_DELAY_MS (10 s) after the slave's start;
    3. the slave's role-change registration for epoch 6 races broker-n1's again and loses; its
       periodic registerBrokerAll ran at start + 10 s, too early; the next is at
       start + 10 s + registerNameServerPeriod (30 s) = start + 40 s, whose answer carries the HA
       address: updateHaMasterAddress wakes the HA client, which connects at once;
    4. handshake (the empty log truncates nothing), then the first ack after haSendHeartbeatInterval.

    The rejoin takes start + FIRST_SCHEDULE_DELAY_MS + registerNameServerPeriod, and the chaos
    runner's default convergence window (counted from the producer's stop, quiet_ms after the last
    fault) must cover it and the first ack."""
    logging.disable(logging.WARNING)  # the faults' warnings
    try:
        run = run_chaos(408, schedule=REJOIN_SCHEDULE, controller_overrides=CLEAN)
    finally:
        logging.disable(logging.NOTSET)
    try:
        events = run.events
        crashed = next(e.node for e in events if e.kind == "node.crash")
        restart = next(e.time_ms for e in events if e.kind == "node.restart" and e.node == crashed)
        start = next(e.time_ms for e in events if e.kind == "node.start" and e.node == crashed
                     and e.fields.get("incarnation") == 1)
        ha_master = [e for e in events if e.kind == "namesrv.broker_register" and e.fields["broker_id"] == 0
                     and e.time_ms > restart]
        master, master_registered = ha_master[-1].fields["broker_addr"], ha_master[-1].time_ms
        connect = next(e.time_ms for e in events if e.node == crashed and e.kind == "state"
                       and e.fields.get("machine") == "AutoSwitchHAClient" and e.fields.get("to") == "HANDSHAKE"
                       and e.time_ms > restart)
        regs = [(t, ext) for t, ext, _ in _requests(events, crashed, REGISTER) if t > restart and ext is not None]
        # Every registration before the master's answered without an HA address...
        before = [ext for t, ext in regs if t < master_registered]
        assert len(before) >= 3 and not any(ext.get("haServerAddr") for ext in before), regs
        # ... and the HA client stayed unconnected until the first one after it brought the address.
        t_first, ext_first = next((t, ext) for t, ext in regs if t > master_registered)
        assert ext_first.get("masterAddr") == master and ext_first.get("haServerAddr")
        assert t_first <= connect <= t_first + RPC_SLACK_MS
        bc_period = BrokerConfig().get_register_name_server_period()  # the chaos cluster keeps the default
        # That registration is the periodic one at start + 10 s + 1 period: the master came after
        # start + 10 s, and nothing else would have told the slave.
        assert master_registered > start + FIRST_SCHEDULE_DELAY_MS
        assert abs(t_first - (start + FIRST_SCHEDULE_DELAY_MS + bc_period)) <= RPC_SLACK_MS
        rejoin_ms = connect - restart
        print(f"\n{crashed} restarted at {restart:.0f} ms (broker start {start - restart:.0f} ms later); "
              f"master {master} registered as id 0 at +{master_registered - restart:.0f} ms; "
              f"HA client connected at +{rejoin_ms:.0f} ms")
        assert FIRST_SCHEDULE_DELAY_MS + bc_period <= rejoin_ms <= FIRST_SCHEDULE_DELAY_MS + bc_period + (
            start - restart) + RPC_SLACK_MS
        # The runner waits long enough for it: the run converged and every checker agrees.
        assert run.converged
        results = check_all(run)
        assert all(r.valid for r in results.values()), {k: str(r) for k, r in results.items() if not r.valid}
    finally:
        run.cleanup()


def test_the_replicas_managers_polls_keep_their_fixed_rate_slots_when_a_poll_times_out(tmp_path):
    """ReplicasManager's tasks are scheduleAtFixedRate: a CONTROLLER_GET_REPLICA_INFO that waits out
    its timeout (a slave cut off from the controllers) does not push the next polls back — they stay
    on their first run's slot + n × syncBrokerMetadataPeriod. (Were the next run
    scheduled a period after the previous one ended, every poll after a timed-out one would come
    3 s late, and a master elected while it was cut off would learn it that much later.)"""
    c = track(Cluster("controller-standalone", seed=5, root_dir=str(tmp_path), controllers=3))
    c.start(60_000)
    c.run_until(lambda: (m := c.master()) is not None
                and len(c.components[m].replicas_manager.sync_state_set) == len(c.brokers), 60_000)
    slave = next(b for b in c.brokers if b != c.master())
    period = c.components[slave].broker_config.syncBrokerMetadataPeriod
    cut_at = c.sim.now_ms()
    c.sim.nemesis.partition([slave], CONTROLLERS)
    c.run_for(period + 2_000)  # at least one poll waits out its timeout
    c.sim.nemesis.heal()
    c.run_for(3 * period)
    polls = _requests(c.events(), slave, RequestCode.CONTROLLER_GET_REPLICA_INFO)
    # Cut off: no answer, or one that came after the partition healed, long after the request's timeout.
    timed_out = [t for t, _, answered in polls if answered is None or answered - t > RPC_SLACK_MS]
    assert any(t > cut_at for t in timed_out), f"no poll was cut off: {polls}"
    assert sum(t > timed_out[-1] for t, _, _ in polls) >= 2, polls
    first = polls[0][0]
    for t, _, _ in polls:
        slots = (t - first) / period
        assert abs(slots - round(slots)) * period <= RPC_SLACK_MS, (t, polls)
