"""Lab 05's experiments: slave acting master (RIP-32) on the simulator, every number from the trace.

One schedule, on the `acting-master` deployment (conf/acting-master: two groups of three replicas,
a name server with supportActingMaster and notifyMinBrokerIdChanged):

    warm-up     the cluster starts, the topic is created on every broker, WARMUP_MS pass
    workload    a producer sends a message every SEND_EVERY_MS; a second one sends DELAYED
                messages at delay level DELAY_LEVEL (10 s) early on, so they fall due while
                broker-a's master is down; a push consumer group consumes everything; a
                RouteWatcher asks the name server for the topic's route every ROUTE_EVERY_MS
    kill        KILL_AT_MS into the workload broker-a's master is killed (kill -9)
    restart     OUTAGE_MS later it is started again; the workload goes on AFTER_MS

`run_outage` runs it with RIP-32 on or off (every broker's enableSlaveActingMaster, and with it
enableRemoteEscape) and with or without pre-online (skipPreOnline). The readers below take their
facts from the trace only: the routes the watcher was given, the name server's
NOTIFY_MIN_BROKER_ID_CHANGE frames, the brokers' `state` events (machines
BrokerController.minBrokerIdInGroup and BrokerController.specialService), and the clients' send
and consume operations.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from rmqlab.client import ClientProcess, DefaultMQProducer
from rmqlab.client.client_config import ClientConfig
from rmqlab.cluster import Cluster
from rmqlab.common.message.message import Message
from rmqlab.demo.mode_comparison import LAB_BROKER_SETTINGS, LAB_POLL_NAME_SERVER_INTERVAL_MS, create_topic_everywhere
from rmqlab.demo.route_watcher import RouteWatcher
from rmqlab.example.benchmark import ProducerSpec
from rmqlab.trace import TraceEvent
from rmqlab.viz.acting_master import DELAYED_KEYS

MODE = "acting-master"
TOPIC = "ActingDemo"
GROUP = "acting_consumer"
PRODUCER, DELAYED, CONSUMER, WATCHER = "producer", "delayed-producer", "consumer", "route-watcher"
SEND_EVERY_MS = 500
DELAY_LEVEL = 3          # messageDelayLevel "1s 5s 10s ...": level 3 is 10 s
DELAYED_SENDS = 8        # one every DELAYED_EVERY_MS from DELAYED_FROM_MS: due from 11 s, in the outage
DELAYED_FROM_MS = 1_000
DELAYED_EVERY_MS = 500
WARMUP_MS = 5_000
KILL_AT_MS = 6_000
OUTAGE_MS = 16_000
AFTER_MS = 14_000
ROUTE_EVERY_MS = 250
VICTIM = "broker-a"
# The timer wheel is on here, as RocketMQ's default has it (the other labs turn it off to save wall
# time): a returning master's pre-online asks each member for its timer checkpoint
# (GET_TIMER_CHECK_POINT, BrokerPreOnlineService.syncMetadataReverse) whether or not timers are on,
# and a member without the wheel answers SYSTEM_ERROR "The checkpoint is null": the master would
# retry its pre-online every second and never come back.
ACTING_SETTINGS = {"timerWheelEnable": True}


@dataclass
class OutageRun:
    """One run of the schedule: its settings, its trace and when the fault struck (virtual ms)."""

    acting: bool
    pre_online: bool
    seed: int
    events: list[TraceEvent] = field(repr=False)
    start_ms: float
    kill_ms: float
    restart_ms: float
    end_ms: float


class DelayedSender:
    """A client of a ClientProcess: DELAYED_SENDS messages at delay level DELAY_LEVEL, keys
    "delayed-<i>" (the trace's send operations carry the keys, which is how readers tell them)."""

    def __init__(self, namesrv_addr: str):
        config = ClientConfig(namesrv_addr=namesrv_addr, poll_name_server_interval=LAB_POLL_NAME_SERVER_INTERVAL_MS)
        self.producer = DefaultMQProducer("delayed_producer", client_config=config)
        self._task = None

    async def start(self, node) -> None:
        self.node = node
        await self.producer.start(node)
        self._task = node.spawn(self._run(), name="delayed-sends")

    async def _run(self) -> None:
        await self.node.sleep(DELAYED_FROM_MS)
        for i in range(DELAYED_SENDS):
            msg = Message(TOPIC, f"delayed message {i}".encode())
            msg.keys = f"{DELAYED_KEYS}{i}"
            msg.delay_time_level = DELAY_LEVEL
            try:
                await self.producer.send(msg)
            except Exception:  # noqa: BLE001 -- the trace has the failed send; the next one goes on
                pass
            await self.node.sleep(DELAYED_EVERY_MS)

    async def shutdown(self) -> None:
        if self._task is not None:
            self._task.cancel()
        await self.producer.shutdown()

    def on_crash(self) -> None:
        self.producer.on_crash()


def build(seed: int, *, acting: bool = True, pre_online: bool = True) -> Cluster:
    settings = {**LAB_BROKER_SETTINGS, **ACTING_SETTINGS, "enableSlaveActingMaster": acting,
                "enableRemoteEscape": acting, "skipPreOnline": not pre_online}
    return Cluster(MODE, seed=seed, overrides={"*": settings})


def _with_workload(cluster: Cluster) -> None:
    """Start `cluster`, create the topic on every broker, warm up, add the workload's clients."""
    cluster.start(60_000)
    create_topic_everywhere(cluster, TOPIC)
    cluster.run_for(WARMUP_MS)
    addr = cluster.namesrv_addr
    cluster.add_client(WATCHER, lambda: ClientProcess(watcher=RouteWatcher(addr, TOPIC, ROUTE_EVERY_MS)))
    cluster.add_consumer(CONSUMER, topic=TOPIC, group=GROUP, consume_from_where="CONSUME_FROM_FIRST_OFFSET")
    cluster.add_producer(PRODUCER, ProducerSpec(topic=TOPIC, group="acting_producer", interval_ms=SEND_EVERY_MS,
                                                body_size=64))
    cluster.add_client(DELAYED, lambda: ClientProcess(delayed=DelayedSender(addr)))


def start_live(seed: int = 5, *, acting: bool = True, pre_online: bool = True) -> Cluster:
    """The workload running on the simulator for a lab's live section (fault buttons); the
    caller closes the cluster."""
    cluster = build(seed, acting=acting, pre_online=pre_online)
    try:
        _with_workload(cluster)
        cluster.run_for(2_000)
    except BaseException:
        cluster.close()
        raise
    return cluster


def run_outage(seed: int = 5, *, acting: bool = True, pre_online: bool = True) -> OutageRun:
    """The module docstring's schedule; the cluster is closed before it returns."""
    cluster = build(seed, acting=acting, pre_online=pre_online)
    try:
        _with_workload(cluster)
        start = cluster.now_ms()
        cluster.run_for(KILL_AT_MS)
        kill = cluster.now_ms()
        cluster.nemesis.kill(VICTIM)
        cluster.run_for(OUTAGE_MS)
        restart = cluster.now_ms()
        cluster.nemesis.restart(VICTIM)
        cluster.run_for(AFTER_MS)
        return OutageRun(acting, pre_online, seed, list(cluster.events()), start, kill, restart, cluster.now_ms())
    finally:
        cluster.close()


# --- the lock quorum (lockInStrictMode) ------------------------------------------------------------------------------
LOCKER, LOCK_GROUP = "locker", "orderly_group"
LOCK_CASES = (("every member up", ()), ("master down", ("broker-a",)), ("master and slave 1 down", ("broker-a", "broker-a-s1")))


class Locker:
    """A client of a ClientProcess that asks the group's route master (broker id 0) for the lock of
    broker-a's queues, as an orderly consumer's rebalance does (LOCK_BATCH_MQ), and records each
    answer as a client operation f="lock": {"asked": [...queue ids], "locked": [...]}."""

    def __init__(self, namesrv_addr: str):
        from rmqlab.client.admin.default_mq_admin_ext import DefaultMQAdminExt

        self.admin = DefaultMQAdminExt(namesrv_addr, admin_ext_group="locker")

    async def start(self, node) -> None:
        from rmqlab.client.operation_tracer import OperationTracer

        self.node = node
        self.tracer = OperationTracer(node)
        await self.admin.start(node)

    async def lock(self, label: str, queue_ids: tuple[int, ...] = (0, 1, 2, 3)) -> None:
        from rmqlab.remoting.protocol.body.lock_batch_body import LockBatchRequestBody
        from rmqlab.remoting.protocol.header.broker.admin import MessageQueue

        op = self.tracer.invoke("lock", {"case": label, "asked": list(queue_ids)})
        try:
            route = await self.admin.examine_topic_route_info(TOPIC)
            addr = next(bd.broker_addrs.get(0) for bd in route.broker_datas if bd.broker_name == VICTIM)
            if addr is None:
                raise RuntimeError("the route lists no broker id 0 for broker-a")
            body = LockBatchRequestBody(LOCK_GROUP, f"{self.node.name}@lab", False,
                                        [MessageQueue(TOPIC, VICTIM, q) for q in queue_ids])
            locked = await self.admin.client_factory.mq_client_api_impl.lock_batch_mq(addr, body, 3_000)
        except Exception as e:  # noqa: BLE001 -- the answer, whatever it is, is the fact
            op.fail({"case": label}, str(e) or type(e).__name__)
        else:
            op.ok({"case": label, "asked_at": addr, "locked": sorted(mq.queue_id for mq in locked)})

    async def shutdown(self) -> None:
        await self.admin.shutdown()

    def on_crash(self) -> None:
        self.admin.on_crash()


def run_lock_quorum(seed: int = 5, *, strict: bool = True) -> list[TraceEvent]:
    """For each of LOCK_CASES, on a fresh acting-master cluster (totalReplicas 3, lockInStrictMode
    `strict`): stop those members, wait for the route to follow, ask for the lock. The trace."""
    events: list[TraceEvent] = []
    for label, down in LOCK_CASES:
        settings = {**LAB_BROKER_SETTINGS, **ACTING_SETTINGS, "lockInStrictMode": strict}
        cluster = Cluster(MODE, seed=seed, overrides={"*": settings})
        try:
            cluster.start(60_000)
            create_topic_everywhere(cluster, TOPIC)
            cluster.run_for(WARMUP_MS)
            addr = cluster.namesrv_addr
            cluster.add_client(LOCKER, lambda: ClientProcess(locker=Locker(addr)))
            for node in down:
                cluster.nemesis.kill(node)
            cluster.run_for(5_000)  # the name server drops them; the members' syncs see it
            cluster.sim.run(cluster.sim.components[LOCKER]["locker"].lock(label))
            events += [e for e in cluster.events() if e.kind == "client" and e.node == LOCKER]
        finally:
            cluster.close()
    return events


__all__ = ["OutageRun", "DelayedSender", "run_outage", "start_live", "build", "Locker", "run_lock_quorum", "LOCK_CASES"]
