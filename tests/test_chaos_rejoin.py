"""How long a replica takes to replicate again after a fault, in controller mode, and which of
RocketMQ's timers decide it.

A slave's AutoSwitchHAClient learns its master's HA address from nowhere but the result of a
NameServer registration (BrokerController.handleRegisterBrokerResult, with
updateMasterHAServerAddrPeriodically set in controller mode; the NameServer answers a slave with
the HA address of the broker registered as id 0). A broker registers when its role changes
(ReplicasManager.registerBrokerWhenRoleChange) and then on BrokerController's periodic
registerBrokerAll: 10 s after its start, then every registerNameServerPeriod (30 s, clamped to
[10 s, 60 s]). When the slave's role-change registration reaches the NameServer before the new
master's registration as id 0 (the controller notifies every member at once, and the master's
changeToMaster first waits for its dispatch), the slave gets no HA address and its HA client idles
in READY until the next periodic registration.
"""

from __future__ import annotations

from rmqlab.cluster import Cluster
from rmqlab.remoting import RequestCode
from tests.sim_helpers import track

CONTROLLERS = ["controller-n0", "controller-n1", "controller-n2"]
# A request and its answer cross the simulated loopback in a few ms; events that are "at the same
# time" as a timer's slot are within this of it (RocketMQ's timers are whole seconds).
RPC_SLACK_MS = 50

def _requests(events, node, code):
    """(time sent, the answer's ext_fields, when it came) of `node`'s requests `code`; (None, None)
    if no answer came."""
    sent = {(e.fields["peer"], e.fields["opaque"]): e.time_ms for e in events
            if e.node == node and e.kind == "frame.send" and e.fields.get("code") == code}
    answers = {(e.fields["peer"], e.fields["opaque"]): (e.fields.get("ext_fields") or {}, e.time_ms) for e in events
               if e.node == node and e.kind == "frame.recv" and e.fields.get("flag") == 1}
    return sorted((t, *answers.get(key, (None, None))) for key, t in sent.items())


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
