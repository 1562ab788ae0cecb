"""Master–slave → controller mode in place, with the data kept, on the simulator.

RocketMQ's "Upgrade Considerations" (docs/en/controller/deploy.md, docs/cn/controller/deploy.md
"升级注意事项"): the name server needs nothing (or controllers are deployed standalone beside the
old one); then for each broker group, stop the master and the slave, make sure their CommitLogs
are aligned (stop writes to the group for a while, or copy the store), change the configuration
(enableControllerMode=true, controllerAddr) and restart. If they are not aligned, the master must
come online before the slave, "otherwise messages may be lost to truncation".

The deployment is conf/2m-2s-async's four brokers (groups broker-a and broker-b, each a master and
a slave) with one standalone controller (`rmqlab controller -c conf/controller/controller-n0.conf`)
beside the classic name server: the compatibility table's "old name server + standalone
controller". A producer sends every 100 ms and a push consumer consumes throughout; group broker-b
keeps taking the writes while broker-a is down. Group broker-a is then upgraded, in one of three
ways (CASES):

* "aligned": the operator's procedure. Writes to the group are stopped (`updateBrokerConfig -k
  brokerPermission -v 4` on the master: the producer moves to broker-b), the slave catches up (the
  two brokers' commitLogMaxOffset are equal), both stop, both restart in controller mode, master
  first, with brokerPermission=6 in the new configuration (RocketMQ's updateBrokerConfig writes
  the read-only permission into the broker's file; docs/upgrade-to-controller-mode.md).
* "master-first": no alignment. The slave stops first (as the docs' later upgrade notes advise) and
  the asynchronous master acknowledges writes alone for two seconds before it stops: its log is
  longer. The old master restarts first, the controller elects it (the first broker of a never
  elected set to ask becomes master), then the old slave joins and catches up.
* "slave-first": the same misalignment, but the old slave restarts first and is elected. What the
  old master acknowledged alone is not on the new master: the hazard the docs warn of.

The consumer stops before the group does (its offsets are committed on the master) and starts
again after the upgrade, so the run shows where it resumes.

What the epoch file starts from. On its first election a broker appends (epoch, maxPhyOffset) to an
empty epoch file (RocketMQ's AutoSwitchHAService.changeToMaster, called by
ReplicasManager.changeToMaster): the log it had before the upgrade lies below every epoch. A slave
whose epoch file is empty skips truncation (AutoSwitchHAClient.doTruncate: "Slave local epochCache
is empty, skip truncate log") and reports its max offset, from which the master transfers. With
equal logs that offset is the first epoch's start and the transfer goes on. A shorter slave log asks
for an offset below it, which no epoch covers (AutoSwitchHAConnection: "Failed to find an
epochEntry to match nextTransferFromWhere"), and is never served: in RocketMQ's code the
master-first order the docs recommend leaves the slave behind for good, out of the SyncStateSet, and
so does a new replica on an empty disk (it asks for the first file). rmqlab can start the first
epoch at the commitlog's min offset instead (rmqlabFirstEpochFromMinOffset=true, an rmqlab-only
fix, off by default); then the master-first case and the new replica catch up. A longer
slave log (slave-first) is not truncated at all: the old master reports its own max offset, is
taken into the SyncStateSet, and holds bytes the new master never had — its commitlog diverges.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field

from rmqlab.checker.checkers import check_total_queue, read_commitlog, read_epochs
from rmqlab.checker.result import CheckResult
from rmqlab.cluster import STANDALONE, Cluster, DeploymentMode
from rmqlab.trace import client_ops

log = logging.getLogger("rmqlab.demo")

GROUP = "broker-a"                      # the broker group upgraded
MASTER, SLAVE = "broker-a", "broker-a-s"
TOPIC, CONSUMER_GROUP = "UpgradeTopic", "UpgradeGroup"
CASES = ("aligned", "master-first", "slave-first")
ROUTE_REFRESH_WAIT_MS = 35_000  # the producers' pollNameServerInterval (30 s, RocketMQ's default) and a margin
PERM_READ = 4                           # PermName.PERM_READ: brokerPermission 4 takes no writes
PERM_READ_WRITE = 6                     # PERM_READ | PERM_WRITE, BrokerConfig's default
SEND_EVERY_MS = 100
# A classic slave copies the master's topics and consumer offsets every 60 s (SlaveSynchronize,
# BrokerController.initializeBrokerScheduledTasks): a slave elected earlier would not know the topic.
WARM_MS = 62_000
MASTER_ALONE_MS = 2_000                 # the misaligned cases: the master acknowledges alone this long
AFTER_MS = 35_000                       # producing after the upgrade (the producer refreshes its routes every 30 s)
DRAIN_MS = 30_000                       # then the consumer gets this long to read the rest

# conf/2m-2s-async with a standalone controller beside the classic name server; the brokers are
# classic until their configuration says enableControllerMode=true.
UPGRADE_MODE = DeploymentMode(
    "2m-2s-async+controller",
    {n: f"2m-2s-async/{n}.properties" for n in ("broker-a", "broker-a-s", "broker-b", "broker-b-s")},
    controllers=STANDALONE)


@dataclass
class UpgradeRun:
    case: str
    cluster: Cluster
    stopped_at: dict[str, int]            # each broker of the group: its commitlog's max offset when it stopped
    started_first: str
    elected: str | None                   # the group's master after the upgrade
    epochs: dict[str, list[tuple[int, int]]]   # each broker's epoch file after the upgrade: (epoch, startOffset)
    max_offsets: dict[str, int]           # each broker's commitlog max offset at the end
    sync_state_set: set[int]              # the master's SyncStateSet (controller ids) at the end
    committed_before: dict[int, int]      # queue id -> the consumer group's offset on the old master
    resumed_at: dict[int, int]            # queue id -> the first offset consumed on the group after the upgrade
    total_queue: CheckResult
    lost_acked_by_master_alone: set[str] = field(default_factory=set)  # lost keys the old master acked alone
    first_difference: int | None = None   # the first offset where the two commitlogs differ (None: one prefix of the other)

    @property
    def lost(self) -> int:
        return self.total_queue.stats["lost"]


def build(seed: int = 7, root_dir: str | None = None) -> Cluster:
    """The classic cluster running under the producer and the consumer, with a standalone
    controller that no broker uses yet."""
    c = Cluster(UPGRADE_MODE, seed=seed, controllers=1, root_dir=root_dir)
    c.add_consumer("consumer", topic=TOPIC, group=CONSUMER_GROUP, start=False)
    c.add_producer("producer", topic=TOPIC, interval_ms=SEND_EVERY_MS, start=False)
    c.start(60_000)
    c.create_topic(TOPIC)
    c.start_client("consumer")
    c.start_client("producer")
    c.run_for(WARM_MS)
    return c


def to_controller_mode(c: Cluster, broker: str, first_epoch_from_min_offset: bool = False) -> None:
    """The upgrade's configuration change, read when `broker` next starts (the simulator builds a
    restarted node from its template and the Cluster's overrides; on real processes the operator
    edits the broker's file the same way: docs/upgrade-to-controller-mode.md).
    `first_epoch_from_min_offset`: rmqlab's rmqlabFirstEpochFromMinOffset (module docstring)."""
    c.overrides[broker] = {"enableControllerMode": True, "controllerAddr": c.controller_addr,
                           "brokerPermission": PERM_READ_WRITE,
                           "rmqlabFirstEpochFromMinOffset": first_epoch_from_min_offset}


def max_offset(c: Cluster, broker: str) -> int:
    return c.components[broker].message_store.get_max_phy_offset()


def committed_offsets(c: Cluster, broker: str) -> dict[int, int]:
    cof = c.components[broker].consumer_offset_manager
    return {q: cof.query_offset(CONSUMER_GROUP, TOPIC, q) for q in range(4)}


def stop_writes(c: Cluster, broker: str, timeout_ms: float = 30_000) -> None:
    """`rmqlab admin updateBrokerConfig -b <master> -k brokerPermission -v 4`, then wait out the
    producers' route refresh, then until the slave's commitlog has caught up with the master's
    (`rmqlab admin brokerStatus -c`). A read-only master still stores what a producer sends it
    (RocketMQ's msgCheck refuses only ordered topics): producers stop only when their route says
    read-only, at their next refresh (pollNameServerInterval, 30 s)."""
    addr = f"127.0.0.1:{c.components[broker].netty_server_config.listenPort}"

    async def read_only(admin, now_ms) -> None:
        await admin.update_broker_config(addr, {"brokerPermission": str(PERM_READ)})

    c.admin(read_only)
    c.run_for(ROUTE_REFRESH_WAIT_MS)
    c.run_until(lambda: max_offset(c, SLAVE) == max_offset(c, MASTER), timeout_ms)


def run_upgrade(case: str, seed: int = 7, root_dir: str | None = None, *,
                first_epoch_from_min_offset: bool = False) -> UpgradeRun:
    """Run one case of CASES (RocketMQ's behaviour; `first_epoch_from_min_offset`: with rmqlab's
    fix, module docstring); the caller closes `run.cluster`."""
    if case not in CASES:
        raise ValueError(f"case must be one of {', '.join(CASES)}, not {case!r}")
    c = build(seed, root_dir)
    try:
        return _upgrade(c, case, first_epoch_from_min_offset)
    except BaseException:
        c.close()
        raise


def _upgrade(c: Cluster, case: str, first_epoch_from_min_offset: bool) -> UpgradeRun:
    if case == "aligned":
        stop_writes(c, MASTER)
    c.stop_client("consumer")  # it commits its offsets to the master
    committed = committed_offsets(c, MASTER)
    alone_from = None
    if case == "aligned":
        c.backend.stop(SLAVE)
        c.backend.stop(MASTER)
    else:
        c.backend.stop(SLAVE)
        alone_from = c.sim.tracer.events[-1].seq
        c.run_for(MASTER_ALONE_MS)
        c.backend.stop(MASTER)
    stopped_at = {b: max_offset(c, b) for b in (MASTER, SLAVE)}
    log.info("%s: stopped at %s", case, stopped_at)
    for b in (MASTER, SLAVE):
        to_controller_mode(c, b, first_epoch_from_min_offset)
    first, second = (SLAVE, MASTER) if case == "slave-first" else (MASTER, SLAVE)
    restarted = c.sim.tracer.events[-1].seq
    c.nemesis.restart(first)
    c.run_until(lambda: c.master(GROUP) == first, 30_000)
    c.nemesis.restart(second)
    c.nemesis.restart("consumer")  # a new process: it asks the brokers for its offsets
    c.run_for(AFTER_MS)
    c.backend.stop("producer")
    try:  # the consumer reads what is left; in the slave-first case some of it never comes
        c.run_until(lambda: _all_read(c), DRAIN_MS, 2_000)
    except TimeoutError:
        pass
    elected = c.master(GROUP)
    members = (MASTER, SLAVE)
    epochs = {b: read_epochs(c.store_dir(b)) for b in members}
    rm = c.components[elected].replicas_manager if elected else None
    events = c.events()
    total = check_total_queue(events, topic=TOPIC)
    lost = {v.details["uniq_key"] for v in total.violations if v.what == "lost"}
    alone = set()
    if alone_from is not None:
        alone = {op.invoke_value["uniq_key"] for op in client_ops(events)
                 if op.f == "send" and op.type == "ok" and alone_from < op.complete_seq
                 and op.value.get("broker_name") == GROUP}
    logs = {b: read_commitlog(c.store_dir(b)) for b in members}
    common = min(max_offset(c, b) for b in members)
    first_difference = next((i for i in range(common) if logs[MASTER][i] != logs[SLAVE][i]), None)
    return UpgradeRun(case, c, stopped_at, first, elected, epochs, {b: max_offset(c, b) for b in members},
                      set(rm.sync_state_set) if rm else set(), committed, _resumed_at(events, restarted),
                      total, lost & alone, first_difference)


def _all_read(c: Cluster) -> bool:
    stats = check_total_queue(c.events(), topic=TOPIC).stats
    return stats["lost"] == 0


def _resumed_at(events, since_seq: int) -> dict[int, int]:
    """Queue id -> the lowest offset of group broker-a consumed after `since_seq`."""
    out: dict[int, int] = {}
    for op in client_ops(events):
        v = op.invoke_value
        if op.f == "consume" and op.invoke_seq > since_seq and v.get("broker_name") == GROUP:
            q = v["queue_id"]
            out[q] = min(out.get(q, v["queue_offset"]), v["queue_offset"])
    return out


def add_empty_replica(c: Cluster, name: str = "broker-a-s2", port: int = 10951) -> str:
    """A third replica of the upgraded group, in controller mode on an empty disk (how a group
    grows to the three replicas the controller docs recommend). Returns its node name; it starts
    at once."""
    from rmqlab.broker import BrokerController
    from rmqlab.config import load_broker_config

    template = c.deployment.template_path(UPGRADE_MODE.brokers[SLAVE])
    settings = {**c.deployment.broker_settings(SLAVE, c.sim.store_dir(name), c.namesrv_addr, c.controller_addr),
                "storePathRootDir": c.sim.store_dir(name), "listenPort": port, "haListenPort": port + 1,
                "brokerId": 2, "enableControllerMode": True}

    def build():
        broker = c.components[name] = BrokerController(load_broker_config(template, overrides=settings))
        return broker

    c.sim.add_node(name, build)
    c.sim.start(name)
    return name
