"""DLedger mode → controller mode, on the simulator: no in-place upgrade with the data.

RocketMQ's "Deployment and upgrade guidelines" (docs/en/controller/deploy.md, docs/cn/controller/
deploy.md 「升级注意事项」): the DLedger commitlog stores every message inside a DLedger entry, a format
the controller-mode commitlog cannot read, so the group's messages are not carried over. Stop writes
to the group until its messages have all been consumed; then (the Chinese page) clear the broker's
store except `config/topics.json` and `config/subscriptionGroup.json`, and start the brokers in
controller mode on that otherwise empty disk. Everything else is rebuilt or new: the commitlog,
consume queues, index and checkpoint, the consumer and delay offsets (`consumerOffset.json`,
`delayOffset.json`), the broker identity (assigned by the controller) and the epoch file.

What clearing `consumerOffset.json` implies: the new commitlog's consume queues start again at
offset 0, so every offset of the old files points past their end. With the file gone the
consumer group has no offset; the broker answers the consumer's query for a queue whose first
message (offset 0) is still in memory with 0 (RocketMQ's ConsumerManageProcessor.queryConsumerOffset),
and a restarted consumer reads the new queue from its first message. CASES:

* "procedure": as above: the master made read-only, the producers' route refresh awaited (see
  "no-route-wait"), the group drained; the consumers stopped before the brokers and started again
  after the producers have resumed, so the new queues already hold messages when they ask.
* "offsets-kept": the same, but `config/consumerOffset.json` is kept too. The restarted consumer
  asks for its old offsets, which lie beyond the new queues' ends, and resumes there (a master
  corrects an offset past a queue's end to that end, OFFSET_OVERFLOW_BADLY → PULL_OFFSET_MOVED in
  DefaultMessageStore.getMessage; a slave does not, offsetCheckInSlave): the messages sent since
  the upgrade below that point are never read — why the procedure deletes the file.
* "consumer-running": the procedure's files, but the consumer process runs through the upgrade.
  Its offsets live in its memory (RemoteBrokerOffsetStore), and it goes on from them: the messages
  the new queues hold below those offsets are never read. Stop the consumers too.
* "no-route-wait": the procedure, but the group is drained right after the master is made read-only.
  brokerPermission=4 does not refuse sends (RocketMQ refuses them only for ordered topics,
  AbstractSendMessageProcessor.msgCheck): producers stop sending to the group only when they
  refresh its route (pollNameServerInterval, 30 s). What the old group acknowledges after the
  drain goes with its DLedger files.

The deployment: conf/dledger's three brokers (group RaftNode00) beside one standalone controller
(`rmqlab controller -c conf/controller/controller-n0.conf`) that no broker uses yet. A producer
sends every 100 ms, a push consumer consumes throughout.
"""

from __future__ import annotations

import logging
import os
import shutil
from dataclasses import dataclass

from rmqlab.checker.checkers import check_total_queue
from rmqlab.checker.result import CheckResult
from rmqlab.cluster import STANDALONE, Cluster, DeploymentMode
from rmqlab.trace import client_ops

log = logging.getLogger("rmqlab.demo")

GROUP = "RaftNode00"                      # the broker group (brokerName = dLegerGroup)
BROKERS = tuple(f"broker-n{i}" for i in range(3))
TOPIC, CONSUMER_GROUP = "UpgradeTopic", "UpgradeGroup"
# A topic and a subscription group no client uses (so no broker auto-creates them): after the
# upgrade they can only come from the kept files.
KEPT_TOPIC, KEPT_TOPIC_QUEUES, KEPT_GROUP = "KeptTopic", 2, "KeptOrderlyGroup"
CASES = ("procedure", "offsets-kept", "consumer-running", "no-route-wait")
KEPT = ("topics.json", "subscriptionGroup.json")   # under config/: what the procedure keeps
PERM_READ, PERM_READ_WRITE = 4, 6
SEND_EVERY_MS = 100
# A producer refreshes its routes every pollNameServerInterval (ClientConfig, 30 s); until then it
# sends to the read-only master, which accepts the sends (below).
ROUTE_REFRESH_MS = 30_000
WARM_MS = 20_000
AFTER_MS = 40_000                        # producing after the upgrade (routes refresh every 30 s)
DRAIN_MS = 30_000

# conf/dledger with a standalone controller beside the name server; the brokers run DLedger mode
# until their configuration says otherwise.
UPGRADE_MODE = DeploymentMode("dledger+controller", {b: f"dledger/{b}.conf" for b in BROKERS}, controllers=STANDALONE)


@dataclass
class DLedgerUpgradeRun:
    case: str
    cluster: Cluster
    drained: dict[int, int]              # queue id -> the group's offset on the old master = its max offset
    kept_files: dict[str, list[str]]     # broker -> the files left in its store when it restarted
    elected: str | None                  # the group's master after the upgrade
    sync_state_set: set[int]
    metadata_kept: dict[str, bool]       # broker -> it knows KEPT_TOPIC (its queue count) and KEPT_GROUP (orderly) after the upgrade
    committed_after: dict[int, int]      # queue id -> the group's offset on the new master at the end
    max_after: dict[int, int]            # queue id -> the new master's max queue offset at the end
    resumed_at: dict[int, int]           # queue id -> the first offset consumed after the upgrade
    total_queue: CheckResult
    restarted_seq: int                   # the trace's last event before the brokers restarted
    acked_after_drain: list[str]         # uniq keys of sends the old group acknowledged after the drain

    @property
    def lost(self) -> int:
        return self.total_queue.stats["lost"]


def build(seed: int = 7, root_dir: str | None = None) -> Cluster:
    c = Cluster(UPGRADE_MODE, seed=seed, controllers=1, root_dir=root_dir)
    try:
        c.add_consumer("consumer", topic=TOPIC, group=CONSUMER_GROUP, start=False)
        c.add_producer("producer", topic=TOPIC, interval_ms=SEND_EVERY_MS, start=False)
        c.start(60_000)
        c.create_topic(TOPIC)
        c.create_group(CONSUMER_GROUP)
        c.create_topic(KEPT_TOPIC, queues=KEPT_TOPIC_QUEUES)
        c.create_group(KEPT_GROUP, orderly=True)
        c.start_client("consumer")
        c.start_client("producer")
        c.run_for(WARM_MS)
    except BaseException:
        c.close()
        raise
    return c


def queue_state(c: Cluster, broker: str) -> tuple[dict[int, int], dict[int, int]]:
    """(committed offset, max offset) per queue of TOPIC on `broker`."""
    b = c.components[broker]
    committed = {q: b.consumer_offset_manager.query_offset(CONSUMER_GROUP, TOPIC, q) for q in range(4)}
    maxes = {q: b.message_store.get_max_offset_in_queue(TOPIC, q) for q in range(4)}
    return committed, maxes


def stop_writes_and_drain(c: Cluster, timeout_ms: float = 60_000, wait_for_routes: bool = True) -> dict[int, int]:
    """`rmqlab admin updateBrokerConfig -b <master> -k brokerPermission -v 4`, wait until the
    producers' routes have been refreshed (`wait_for_routes`), then until the consumer group has
    consumed everything (`rmqlab admin consumerProgress -g <group>`: diff 0)."""
    master = c.master(GROUP)
    addr = f"127.0.0.1:{c.components[master].netty_server_config.listenPort}"

    async def read_only(admin, now_ms) -> None:
        await admin.update_broker_config(addr, {"brokerPermission": str(PERM_READ)})

    c.admin(read_only)
    # brokerPermission=4 does not make the broker refuse a send (RocketMQ's AbstractSendMessageProcessor
    # .msgCheck refuses only ordered topics); the master registers its topics read-only, and a
    # producer stops sending to it when it next refreshes its route. Wait that long.
    c.run_for(ROUTE_REFRESH_MS + 5_000 if wait_for_routes else 1_000)

    def drained() -> bool:
        committed, maxes = queue_state(c, master)
        return all(committed[q] == maxes[q] for q in maxes)

    c.run_until(drained, timeout_ms, 500)
    return queue_state(c, master)[0]


def clear_store(store_dir: str, keep: tuple[str, ...]) -> list[str]:
    """Remove everything under `store_dir` except config/<keep>; returns what is left (relative paths)."""
    for entry in os.listdir(store_dir):
        path = os.path.join(store_dir, entry)
        if entry == "config" and os.path.isdir(path):
            for name in os.listdir(path):
                if name not in keep:
                    p = os.path.join(path, name)
                    shutil.rmtree(p) if os.path.isdir(p) else os.remove(p)
        elif os.path.isdir(path):
            shutil.rmtree(path)
        else:
            os.remove(path)
    return sorted(os.path.relpath(os.path.join(d, f), store_dir) for d, _, fs in os.walk(store_dir) for f in fs)


def to_controller_mode(c: Cluster, broker: str) -> None:
    """The configuration change, read when `broker` next starts: controller mode as conf/controller's
    brokers set it (brokerId -1: the controller assigns it), the DLedger commitlog off, writes allowed."""
    c.overrides[broker] = {"enableDLegerCommitLog": False, "enableControllerMode": True,
                           "controllerAddr": c.controller_addr, "brokerId": -1, "brokerRole": "SLAVE",
                           "allAckInSyncStateSet": True, "brokerPermission": PERM_READ_WRITE}


def run_upgrade(case: str = "procedure", seed: int = 7, root_dir: str | None = None) -> DLedgerUpgradeRun:
    """Run one case of CASES; the caller closes `run.cluster`."""
    if case not in CASES:
        raise ValueError(f"case must be one of {', '.join(CASES)}, not {case!r}")
    c = build(seed, root_dir)
    try:
        return _upgrade(c, case)
    except BaseException:
        c.close()
        raise


def _upgrade(c: Cluster, case: str) -> DLedgerUpgradeRun:
    drained = stop_writes_and_drain(c, wait_for_routes=case != "no-route-wait")
    drained_at = c.now_ms()
    if case != "consumer-running":
        c.stop_client("consumer")   # it commits its offsets (already the queues' ends)
    for b in BROKERS:
        c.backend.stop(b)
    keep = KEPT + (("consumerOffset.json",) if case == "offsets-kept" else ())
    kept = {b: clear_store(c.store_dir(b), keep) for b in BROKERS}
    log.info("%s: drained at %s; kept %s", case, drained, kept)
    for b in BROKERS:
        to_controller_mode(c, b)
    restarted = c.sim.tracer.events[-1].seq
    acked_after_drain = [op for op in client_ops(c.events()) if op.f == "send" and op.type == "ok"
                         and op.complete_time_ms > drained_at]
    for b in BROKERS:
        c.nemesis.restart(b)
    c.run_until(lambda: c.master(GROUP) is not None, 60_000)
    # The consumers come back after the producers (which resume at their next route refresh): the
    # new queues already hold messages when a consumer first asks for its offsets.
    c.run_until(lambda: any(op.f == "send" and op.type == "ok" and op.invoke_seq > restarted
                            for op in client_ops(c.events())), 60_000, 500)
    c.run_for(5_000)
    if case != "consumer-running":
        c.nemesis.restart("consumer")   # a new process: it asks the broker for its offsets
    c.run_for(AFTER_MS)
    c.backend.stop("producer")
    try:  # the consumer reads what is left; in the cases that keep old offsets some of it never comes
        c.run_until(lambda: check_total_queue(c.events(), topic=TOPIC).stats["lost"] == 0, DRAIN_MS, 2_000)
    except TimeoutError:
        pass
    elected = c.master(GROUP)
    broker = c.components[elected] if elected else None
    committed, maxes = queue_state(c, elected) if elected else ({}, {})
    metadata_kept = {b: _knows_kept_metadata(c.components[b]) for b in BROKERS}
    return DLedgerUpgradeRun(case, c, drained, kept, elected,
                             set(broker.replicas_manager.sync_state_set) if broker else set(), metadata_kept,
                             committed, maxes, _resumed_at(c.events(), restarted),
                             check_total_queue(c.events(), topic=TOPIC), restarted,
                             [op.invoke_value["uniq_key"] for op in acked_after_drain])


def _knows_kept_metadata(broker) -> bool:
    topic = broker.topic_config_manager.topic_config_table.get(KEPT_TOPIC)
    group = broker.subscription_group_manager.subscription_group_table.get(KEPT_GROUP)
    return (topic is not None and topic.write_queue_nums == KEPT_TOPIC_QUEUES
            and group is not None and group.consume_message_orderly)


def _resumed_at(events, since_seq: int) -> dict[int, int]:
    out: dict[int, int] = {}
    for op in client_ops(events):
        v = op.invoke_value
        if op.f == "consume" and op.invoke_seq > since_seq and v.get("broker_name") == GROUP:
            q = v["queue_id"]
            out[q] = min(out.get(q, v["queue_offset"]), v["queue_offset"])
    return out
