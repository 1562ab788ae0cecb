"""The deployment-mode comparison of lab 01 and `rmqlab demo`: the guide's pros and cons, measured.

Every mode of RocketMQ's deployment guide (its docs' 「部署方式」 and 「主备自动切换模式部署」), and beside them
RIP-32's slave acting master and RocketMQ 4.5's DLedger CommitLog mode, runs the same recorded workload
on the simulator and suffers the same fault:

    warm-up     the cluster starts; the topic is created on every broker (`mqadmin updateTopic`)
                and WARMUP_MS pass (slaves connect to their masters)
    workload    a producer sends message i at i * SEND_EVERY_MS, open loop (whatever became of the
                earlier sends); a consumer group pulls everything as it arrives
    crash       CRASH_AT_MS into the workload the machine under broker set broker-a's master loses
                power (`node.crash`: what was not flushed is gone); it stays down OUTAGE_MS, longer
                than the name server's 120 s broker expiry, so every consequence of the crash shows
    reader      READ_AT_MS after the crash a new consumer group reads every queue from the start:
                what a consumer can still get of broker-a's messages while its master is down
    restart     the machine comes back (recovering what was flushed); the workload goes on AFTER_MS
    read-back   a last new group reads everything: an acknowledged message it cannot read and the
                outage reader did not get either is on no broker any more: lost

Every number comes from the event trace (sends and pulls are `client` operations, the crash a
`node.crash` event, roles `role` events, broker addresses the brokers' own REGISTER_BROKER frames),
never from component internals, so `judge` works on any recorded trace of this schedule; `claims`
sets the guide's words next to the numbers.

Modes are a registry (`MODES`, `register_mode`): a `ModeSpec` says how to build the cluster, which
node to crash, what the guide says, and how to add the workload's clients. The Proxy rows (the guide's
"Local模式部署" / "Cluster模式部署") are 2m-noslave behind a Proxy with rmqlab's 5.x producer.

Lab settings, where RocketMQ's defaults only add waiting or wall time (each explained where set):
the clients refresh their routes every second (LAB_POLL_NAME_SERVER_INTERVAL_MS; RocketMQ: 30 s),
so the waiting that stays is the servers' own (the name server's 120 s expiry, the controllers'
10 s heartbeat timeout), which is what the modes differ in; the producer avoids a broker that
failed (sendLatencyFaultEnable); brokers skip services the workload never uses
(LAB_BROKER_SETTINGS); the topic goes to the slaves at once (`create_topic_everywhere`).
"""

from __future__ import annotations

import functools
import hashlib
import html
import logging
import os
import pickle
import statistics
import sys
import tempfile
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

from rmqlab.checker.checkers import send_acknowledged
from rmqlab.client import ClientProcess, DefaultMQAdminExt, DefaultMQProducer, DefaultMQPullConsumer
from rmqlab.cluster import MASTER_ROLES, Cluster
from rmqlab.common.cpu_quota import available_processors
from rmqlab.common.message.message import Message
from rmqlab.common.message.message_decoder import decode_message_id
from rmqlab.common.topic_config import TopicConfig
from rmqlab.example.benchmark import ConsumerSpec, build_client
from rmqlab.trace import TraceEvent, client_ops
from rmqlab.viz import LOGGERS
from rmqlab.viz.sends import Roles, broker_nodes_by_addr, broker_sets, register_frames

TOPIC = "DemoModes"
SEND_EVERY_MS = 200
WARMUP_MS = 12_000
CRASH_AT_MS = 8_000          # into the workload
OUTAGE_MS = 130_000          # the name server drops a silent broker after 120 s: its expiry scan (every 5 s)
                             # or its idle close of the broker's connection (serverChannelMaxIdleTimeSeconds)
READ_AT_MS = 122_000         # after the crash: once the name server has dropped the crashed master
# Workload after the restart. 20 s: a classic slave reconnects to its restarted master ~10 s after
# the restart (its HA client re-reads the master address from the name server), and what the
# master acknowledges after that is what 2m-2s-sync's restart teaches.
AFTER_MS = 20_000
SENDS = (CRASH_AT_MS + OUTAGE_MS + AFTER_MS) // SEND_EVERY_MS
LIVE_SENDS = 10 ** 6         # a live section's producer: as long as anyone clicks
# RocketMQ's clients poll the name server every 30 s; the lab's every second (module docstring).
LAB_POLL_NAME_SERVER_INTERVAL_MS = 1_000
# Every broker: slaves serve reads (conf/README.md), and two services this workload never uses are
# quieted, since on the simulator they only cost wall time: the timer wheel (no timer messages are
# sent) and the 5 s persisting of consumer offsets (fsyncs of metadata files nothing here reads
# back; they are still written at every clean shutdown).
LAB_BROKER_SETTINGS = {"slaveReadEnable": True, "timerWheelEnable": False, "flushConsumerOffsetInterval": 60_000,
                       "flushDelayOffsetInterval": 60_000}
BROKER_SET = "broker-a"      # the broker set whose master's machine crashes
PRODUCER, CONSUMER, OUTAGE_READER, FINAL_READER = "producer", "consumer", "reader-outage", "reader-after"
ADMIN = "lab-admin"
# Latencies are taken from the sends of the steady state: after the first seconds (the first
# sends of a fresh cluster also wait for routes and connections) and before the crash.
LATENCY_FROM_MS = 2_000


# --- the workload --------------------------------------------------------------------------------------
class WorkloadProducer(ClientProcess):
    """The recorded workload's producer, open loop: message i is sent at start + i * SEND_EVERY_MS
    whatever became of the earlier ones (each send is its own client operation), so every mode is
    offered exactly the same sends at the same virtual times. `send(client, i)` sends message i
    with the wrapped client (rmqlab's DefaultMQProducer here; a Proxy row wraps a gRPC producer)."""

    def __init__(self, client, send: Callable[[object, int], Awaitable[object]], count: int):
        super().__init__(producer=client)
        self._send, self.count = send, count

    async def start(self, node) -> None:
        await super().start(node)
        node.spawn(self._run(), name="workload producer")

    async def _run(self) -> None:
        begin = self.node.now_ms()
        for i in range(self.count):
            await self.node.sleep(max(0.0, begin + i * SEND_EVERY_MS - self.node.now_ms()))
            self.node.spawn(self._one(i), name=f"send {i}")

    async def _one(self, i: int) -> None:
        try:
            await self._send(self.clients["producer"], i)
        except Exception:  # traced as a failed or unknown send; the workload goes on, as a client would
            pass


def _lab_client_config(client) -> None:
    """The lab's client settings (module docstring): route refresh every second, and the producer's
    sendLatencyFaultEnable, so a dead master is taken out of the round robin for 10 s after a
    failed send instead of being tried first by every send."""
    client.client_config.poll_name_server_interval = LAB_POLL_NAME_SERVER_INTERVAL_MS
    client.client_config.send_latency_enable = True


def _send_message(producer, i: int) -> Awaitable[object]:
    """Message i of the workload, with either producer (both send rmqlab's Message)."""
    msg = Message(TOPIC, f"message-{i}".encode())
    msg.keys = f"message-{i}"
    return producer.send(msg)


def add_remoting_clients(cluster: Cluster, sends: int = SENDS) -> None:
    """The workload's clients over remoting: the open-loop producer (rmqlab's DefaultMQProducer)
    and a consumer group pulling everything as it arrives (the benchmark pull consumer)."""
    def producer() -> ClientProcess:
        # No retries: a send here fails by timing out, after which RocketMQ's producer has no time
        # left to retry (its 3 s budget is spent). rmqlab's producer would retry with 0 ms left, each
        # retry failing at once and, with fault avoidance, isolating the healthy broker it picked.
        client = DefaultMQProducer("mode_producer", cluster.namesrv_addr, retry_times_when_send_failed=0)
        _lab_client_config(client)
        return WorkloadProducer(client, _send_message, sends)

    cluster.add_client(PRODUCER, producer)
    _add_consumer(cluster)


def _add_consumer(cluster: Cluster) -> None:
    """The consumer group that pulls everything as it arrives (the benchmark pull consumer)."""
    def consumer() -> ClientProcess:
        process = build_client(ConsumerSpec(topic=TOPIC, group="mode_consumer", consumer_type="pull",
                                            consume_from_where="CONSUME_FROM_FIRST_OFFSET"), cluster.namesrv_addr)
        _lab_client_config(process["consumer"])
        return process

    cluster.add_client(CONSUMER, consumer)


def add_grpc_clients(cluster: Cluster, sends: int = SENDS) -> None:
    """The Proxy rows' clients: the open-loop producer is rmqlab's 5.x Producer, sending through
    the Proxy endpoints (all of them: the client's access point); the consumer group stays the
    remoting pull consumer (what is stored is read back from the brokers either way)."""
    from rmqlab.client.grpc import ClientConfiguration, Producer

    def producer() -> ClientProcess:
        client = Producer(ClientConfiguration(";".join(cluster.proxy_endpoints)), topics=[TOPIC])
        return WorkloadProducer(client, _send_message, sends)

    cluster.add_client(PRODUCER, producer)
    _add_consumer(cluster)


# --- the modes ------------------------------------------------------------------------------------------
def classic_victim(cluster: Cluster) -> str:
    """The classic modes: broker-a, the master of set broker-a (brokerId 0 in its template)."""
    return "broker-a"


def elected_victim(cluster: Cluster) -> str:
    """Controller mode: whichever replica of broker-a the controllers made master."""
    master = cluster.master(BROKER_SET)
    if master is None:
        raise RuntimeError("no master of broker-a to crash: the controllers elected none")
    return master


@dataclass(frozen=True)
class ModeSpec:
    """One row of the comparison: a mode of the guide and how to run the workload on it."""

    name: str
    heading: str                   # the guide's heading for the mode
    guide_says: str                 # its pros and cons, in short
    cluster_mode: str              # rmqlab.cluster mode
    cluster_kwargs: dict = field(default_factory=dict)
    victim: Callable[[Cluster], str] = classic_victim
    # Adds the nodes PRODUCER (`sends` messages, open loop) and CONSUMER.
    add_clients: Callable[..., None] = add_remoting_clients
    broker_settings: dict = field(default_factory=dict)   # over LAB_BROKER_SETTINGS, every broker

    def build(self, seed: int) -> Cluster:
        return Cluster(self.cluster_mode, seed=seed, overrides={"*": {**LAB_BROKER_SETTINGS, **self.broker_settings}},
                       **self.cluster_kwargs)


MODES: dict[str, ModeSpec] = {}


def register_mode(spec: ModeSpec) -> ModeSpec:
    """Add a row to the comparison (the Proxy rows come this way)."""
    MODES[spec.name] = spec
    return spec


register_mode(ModeSpec(
    "single-master", "单组节点单副本模式",
    "risky: one broker; a restart or crash makes the whole service unavailable", "single-master"))
register_mode(ModeSpec(
    "2m-noslave", "多组节点(集群)单副本模式",
    "one master down does not stop the application; its unconsumed messages wait for it; "
    "async flush may lose a few messages on a machine crash", "2m-noslave"))
register_mode(ModeSpec(
    "2m-2s-async", "多节点(集群)多副本模式-异步复制",
    "consumers continue from the slave; about as fast as 2m-noslave; a master disk failure may lose "
    "a few messages", "2m-2s-async"))
register_mode(ModeSpec(
    "2m-2s-sync", "多节点(集群)多副本模式-同步双写",
    "no single point of failure for data; about 10% slower; the slave does not take over", "2m-2s-sync"))
register_mode(ModeSpec(
    "controller-embedded", "Controller 嵌入 NameServer 部署",
    "the controllers (inside the name servers) elect a new master from the SyncStateSet; with "
    "allAckInSyncStateSet nothing acknowledged is lost", "controller-embedded", victim=elected_victim))
register_mode(ModeSpec(
    "controller-standalone", "Controller 独立部署",
    "the same failover with the controllers as processes of their own (a name server is still "
    "needed for routes)", "controller-standalone", victim=elected_victim))

register_mode(ModeSpec(
    "proxy-local", "Local模式部署",
    "the Proxy runs inside each broker's process (mqbroker --enable-proxy): it goes down with its broker; "
    "clients continue through the other brokers' Proxies", "2m-noslave", {"proxy": "local"},
    add_clients=add_grpc_clients))
register_mode(ModeSpec(
    "proxy-cluster", "Cluster模式部署",
    "the Proxy is deployed apart from the brokers (mqproxy): it survives a broker's crash and sends to the "
    "brokers that are left; one more hop per send", "2m-noslave", {"proxy": "cluster"},
    add_clients=add_grpc_clients))
# Not a mode of the deployment guide: RIP-32's upgrade of the master-slave mode (lab 05). The timer
# wheel stays on, RocketMQ's default: a returning master's pre-online asks every member for its timer
# checkpoint, and a member without the wheel answers an error, so the master would never come back.
register_mode(ModeSpec(
    "acting-master", "Slave Acting Master (RIP-32)",
    "the smallest-id live slave acts as a read-only master: consumers and master-only requests go on "
    "without client changes; a lightweight heartbeat (10 s timeout) drops a dead master instead of the "
    "120 s expiry", "acting-master",
    broker_settings={"timerWheelEnable": True}))


# DLedger CommitLog mode (RocketMQ 4.5; docs/cn/dledger/deploy_guide.md): one group of three replicas
# whose commitlog is a DLedger Raft log (conf/dledger/); the Raft leader is the master. Lab setting:
# the group is named broker-a (conf/dledger names it RaftNode00), as every row's crashed set is.
register_mode(ModeSpec(
    "dledger", "Dledger集群搭建 (RocketMQ on DLedger)",
    "every message is a Raft log entry: a majority of the group must store it before the send is "
    "answered; the Raft leader is the master and a new leader is elected when it dies; a group needs "
    "at least 3 replicas and stops taking writes when a majority is gone", "dledger", victim=elected_victim,
    broker_settings={"brokerName": BROKER_SET}))


# --- the result -----------------------------------------------------------------------------------------
@dataclass
class ModeResult:
    mode: str
    sent: int
    acknowledged: int             # SEND_OK: stored as the mode promises (replicated, in sync modes)
    failed: int
    indeterminate: int            # unknown outcome: timed out, or stored without the promised replication
    acknowledged_lost: int        # acknowledged, and on no broker: not on a replica, not after recovery
    missing_after_recovery: int   # acknowledged, not readable once broker-a's master is back
    acked_during_outage: int
    sends_during_outage: int
    p50_ms: float                 # send latency before the crash (virtual ms)
    p99_ms: float
    readable_during_outage: int   # of on_broker_a: what a fresh consumer group read while the master was down
    on_broker_a: int              # acknowledged by broker set broker-a before the crash
    guide_says: str
    victim: str = ""              # the node whose machine crashed
    read_from: str = "none"       # where the outage reader got broker-a's messages: "slave broker-a-s", ...
    first_ack_after_crash_ms: float | None = None   # the application writes again (any broker)
    set_writable_after_ms: float | None = None      # broker-a's set takes writes again
    new_master: str | None = None                   # a replica elected master during the outage
    failover_ms: float | None = None                # crash -> that election
    route_dropped_after_ms: float | None = None     # crash -> the name server expired the master
    endpoints_during_outage: str = ""               # Proxy rows: the endpoints that acknowledged sends then
    # Acknowledged by the restarted victim at commitlog offsets its slave already held other bytes
    # for: classic HA takes the report of a slave ahead of its master as an ack (acked_behind_slave).
    acked_behind_slave: int = 0
    # DLedger mode: broker master roles taken by a node that was not its group's Raft leader of
    # that term (the broker role must follow the Raft role); None without DLedger members.
    masters_not_raft_leader: int | None = None

    @property
    def lost_if_disk_destroyed(self) -> int:
        """Acknowledged by broker-a before the crash and on no other replica: what the master's
        disk alone held (the guide: "磁盘损坏情况下会丢失少量消息")."""
        return self.on_broker_a - self.readable_during_outage


@dataclass
class ModeRun:
    """A mode's result with the trace it was judged from (for figures)."""

    result: ModeResult
    events: list[TraceEvent]
    crash_at_ms: float
    restart_at_ms: float
    workload_start_ms: float


# --- running ------------------------------------------------------------------------------------------
def simulate_mode(mode: str, seed: int) -> ModeRun:
    """Run the schedule of the module docstring on `mode` (a key of MODES); the trace and the result."""
    if mode not in MODES:
        raise ValueError(f"unknown mode {mode!r}; expected one of {', '.join(MODES)}")
    spec = MODES[mode]
    cluster = _warmed_up(spec, seed)
    try:
        victim = spec.victim(cluster)
        sim = cluster.sim
        spec.add_clients(cluster)
        start = sim.now_ms()
        crash_at, restart_at = start + CRASH_AT_MS, start + CRASH_AT_MS + OUTAGE_MS
        sim.at(crash_at, lambda: cluster.nemesis.crash(victim))
        cluster.run_for(CRASH_AT_MS + READ_AT_MS)
        _read_back(cluster, OUTAGE_READER, deadline_ms=restart_at)
        cluster.run_for(restart_at - sim.now_ms())
        cluster.nemesis.restart(victim)
        cluster.run_for(AFTER_MS + 2_000)  # the producer's last sends complete
        _read_back(cluster, FINAL_READER)
        events = list(cluster.events())
    finally:
        cluster.close()
    return ModeRun(judge(mode, events, victim, start, crash_at, restart_at), events, crash_at, restart_at, start)


def start_live(mode: str, seed: int) -> Cluster:
    """`mode` running on the simulator with the workload's clients, warmed up like the comparison's
    runs, for a lab's live section: the producer goes on sending every SEND_EVERY_MS for as long as
    virtual time runs (the caller closes the cluster)."""
    spec = MODES[mode]
    cluster = _warmed_up(spec, seed)
    try:
        spec.add_clients(cluster, sends=LIVE_SENDS)
        cluster.run_for(2_000)
    except BaseException:
        cluster.close()
        raise
    return cluster


def _warmed_up(spec: ModeSpec, seed: int) -> Cluster:
    """The mode's cluster started, the topic on every broker, WARMUP_MS later."""
    cluster = spec.build(seed)
    try:
        cluster.start(60_000)
        create_topic_everywhere(cluster)
        cluster.run_for(WARMUP_MS)
    except BaseException:
        cluster.close()
        raise
    return cluster


def run_mode(mode: str, seed: int) -> ModeResult:
    return simulate_mode(mode, seed).result


def simulate_modes(seed: int, modes: list[str] | None = None, workers: int = 1) -> dict[str, ModeRun]:
    """`simulate_mode` for each of `modes` (default: every registered one), in that order. With
    `workers` > 1 the modes run in that many worker processes at once (each run is seeded and
    self-contained, so the results are the same; a notebook on 2 cores halves its wait), but never
    more than the CPUs this process may use: on Binder's 1-CPU quota a pool would only add
    processes (and memory) sharing that one CPU.

    With RMQLAB_MODE_CACHE_DIR set (tests/conftest.py sets it for one pytest run), a comparison
    already computed from the same sources, seed and modes is read back from there instead of
    simulated again: a run is a pure function of those, so it is the same result and trace. The
    key leaves out the installed dependencies (pysyncobj, ...): the directory is meant for one run."""
    names = list(modes or MODES)
    path = _cache_path(seed, names)
    if path is not None:
        try:
            with open(path, "rb") as f:
                return pickle.load(f)
        except FileNotFoundError:
            pass
    runs = _simulate_modes(seed, names, workers)
    if path is not None:
        # Written whole, then renamed: a reader never sees half a file.
        fd, tmp = tempfile.mkstemp(dir=os.path.dirname(path), suffix=".tmp")
        try:
            with os.fdopen(fd, "wb") as f:
                pickle.dump(runs, f, protocol=pickle.HIGHEST_PROTOCOL)
            os.replace(tmp, path)
        except BaseException:
            os.unlink(tmp)
            raise
    return runs


MODE_CACHE_ENV = "RMQLAB_MODE_CACHE_DIR"


@functools.lru_cache(maxsize=1)
def _sources_digest() -> str:
    """What a run's result can depend on: every file of the rmqlab package and the conf/ templates
    beside it, with the Python version (pickles, hash seeds)."""
    package = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    return _tree_digest([package, os.path.join(os.path.dirname(package), "conf")], sys.version)


def _tree_digest(tops: list[str], salt: str = "") -> str:
    """sha256 of the files under `tops` (names and contents; compiled bytecode left out)."""
    h = hashlib.sha256(salt.encode())
    for i, top in enumerate(tops):
        for root, dirs, files in os.walk(top):
            dirs[:] = sorted(d for d in dirs if d != "__pycache__")
            for name in sorted(files):
                if name.endswith((".pyc", ".pyo")):
                    continue
                full = os.path.join(root, name)
                h.update(f"{i}/{os.path.relpath(full, top)}".encode() + b"\0")
                with open(full, "rb") as f:
                    h.update(hashlib.sha256(f.read()).digest())
    return h.hexdigest()


def _cache_path(seed: int, names: list[str]) -> str | None:
    """Where this comparison is cached, or None: no cache directory is set, or a mode or
    simulate_mode is not this module's own (registered by a notebook, replaced by a test), which
    the sources do not describe."""
    directory = os.environ.get(MODE_CACHE_ENV)
    if not directory or simulate_mode is not _SIMULATE_MODE or any(MODES.get(n) is not _BUILTIN_MODES.get(n)
                                                                     for n in names):
        return None
    key = hashlib.sha256(repr((_sources_digest(), seed, names)).encode()).hexdigest()
    os.makedirs(directory, exist_ok=True)
    return os.path.join(directory, f"modes-{key}.pickle")


def _simulate_modes(seed: int, names: list[str], workers: int) -> dict[str, ModeRun]:
    workers = min(workers, available_processors())
    if workers <= 1 or len(names) == 1:
        return {name: simulate_mode(name, seed) for name in names}
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    # forkserver: workers start from a clean process, not a fork of a kernel's threads. They log
    # at the levels set here (a lab's notebook_setup quiets rmqlab: a worker's stderr would land
    # in the notebook).
    levels = {name: logging.getLogger(name).level for name in LOGGERS}
    with ProcessPoolExecutor(min(workers, len(names)), mp_context=multiprocessing.get_context("forkserver"),
                             initializer=_set_log_levels, initargs=(levels,)) as pool:
        runs = pool.map(simulate_mode, names, [seed] * len(names))
        return dict(zip(names, runs))


def _set_log_levels(levels: dict[str, int]) -> None:
    for name, level in levels.items():
        logging.getLogger(name).setLevel(level)


def run_comparison(seed: int, modes: list[str] | None = None, workers: int = 1) -> list[ModeResult]:
    return [run.result for run in simulate_modes(seed, modes, workers).values()]


def create_topic_everywhere(cluster: Cluster, topic: str = TOPIC) -> None:
    """`mqadmin updateTopic -c` (every master), then `updateTopic -b` on every other broker too:
    a slave copies a new topic from its master only at its SlaveSynchronize run, a minute after it
    started (BrokerController: syncAll once 60 s have passed), and a slave without the topic
    answers pulls with TOPIC_NOT_EXIST. A long-running cluster's slaves would have it; the lab
    skips that minute."""
    cluster.create_topic(topic)
    addrs = sorted({f["ext_fields"]["brokerAddr"] for f in register_frames(cluster.events())})
    cluster.add_client(ADMIN, lambda: ClientProcess(admin=DefaultMQAdminExt(cluster.namesrv_addr)))
    admin = cluster.sim.components[ADMIN]["admin"]

    async def create() -> None:
        for addr in addrs:
            await admin.create_and_update_topic_config(addr, TopicConfig(topic, 4, 4))

    cluster.sim.run(create())
    cluster.stop_client(ADMIN)


def _read_back(cluster: Cluster, name: str, deadline_ms: float | None = None) -> None:
    """A fresh pull consumer group reads every queue of TOPIC from offset 0 until a pull finds
    nothing (its pulls are in the trace). Stops at `deadline_ms` (virtual) if given."""
    def reader() -> ClientProcess:
        client = DefaultMQPullConsumer(name, cluster.namesrv_addr)
        _lab_client_config(client)
        return ClientProcess(consumer=client)

    cluster.add_client(name, reader)
    consumer = cluster.sim.components[name]["consumer"]
    sim = cluster.sim

    async def read() -> None:
        try:
            queues = await consumer.fetch_subscribe_message_queues(TOPIC)
        except Exception:  # no route at all: every broker of the topic is down
            return
        for mq in queues:
            offset = 0
            while deadline_ms is None or sim.now_ms() < deadline_ms:
                try:
                    r = await consumer.pull(mq, "*", offset, 32)
                except Exception:  # traced as a failed pull: this queue cannot be read now
                    break
                if not r.msg_found_list:
                    break
                offset = r.next_begin_offset

    sim.run(read())
    cluster.stop_client(name)


# --- judging, from the trace alone ---------------------------------------------------------------------
def judge(mode: str, events: list[TraceEvent], victim: str, start: float, crash_at: float,
          restart_at: float) -> ModeResult:
    ops = client_ops(events)
    sends = [op for op in ops if op.node == PRODUCER and op.f == "send" and op.invoke_value.get("topic") == TOPIC]
    acked = [op for op in sends if send_acknowledged(op)]
    latencies = sorted(op.complete_time_ms - op.invoke_time_ms for op in acked
                       if start + LATENCY_FROM_MS <= op.invoke_time_ms < crash_at)
    during = [op for op in sends if crash_at <= op.invoke_time_ms < restart_at]
    acked_keys = {op.invoke_value["uniq_key"] for op in acked}
    # Where a message was stored: its send's result names the broker set, except through a Cluster
    # mode Proxy (the Proxy picked it); then any pull that returned it does.
    stored_in = {m["uniq_key"]: m.get("broker_name") for op in ops if op.f == "pull" and op.type == "ok"
                 for m in op.value["messages"]}
    on_a = {op.invoke_value["uniq_key"] for op in acked if op.complete_time_ms < crash_at
            and op.value.get("broker_name", stored_in.get(op.invoke_value["uniq_key"])) == BROKER_SET}

    by_addr, roles = broker_nodes_by_addr(events), Roles(events)
    reads: dict[str, set[str]] = {OUTAGE_READER: set(), FINAL_READER: set()}
    sources: dict[str, int] = {}
    for op in ops:
        if op.node not in reads or op.f != "pull" or op.type != "ok":
            continue
        keys = {m["uniq_key"] for m in op.value["messages"]}
        reads[op.node] |= keys
        if op.node == OUTAGE_READER and keys & on_a:
            node = by_addr.get(op.value.get("broker_addr"), op.value.get("broker_addr"))
            role = roles.at(node, op.complete_time_ms)
            where = f"{'master' if role in MASTER_ROLES else 'slave'} {node}"
            sources[where] = sources.get(where, 0) + len(keys & on_a)
    during_outage, after = reads[OUTAGE_READER], reads[FINAL_READER]

    acks_after = sorted(op.complete_time_ms for op in acked if op.complete_time_ms >= crash_at)
    set_acks_after = sorted(op.complete_time_ms for op in acked if op.complete_time_ms >= crash_at
                            and op.value.get("broker_name", stored_in.get(op.invoke_value["uniq_key"])) == BROKER_SET)
    endpoints: dict[str, int] = {}
    for op in during:
        if send_acknowledged(op) and op.value.get("endpoint"):
            endpoints[op.value["endpoint"]] = endpoints.get(op.value["endpoint"], 0) + 1
    elected = [e for e in events if e.kind == "role" and crash_at <= e.time_ms < restart_at
               and e.fields.get("component", "broker") == "broker" and e.fields.get("to") in MASTER_ROLES
               and e.node != victim]
    return ModeResult(
        mode=mode, sent=len(sends), acknowledged=len(acked), failed=sum(op.type == "fail" for op in sends),
        indeterminate=len(sends) - len(acked) - sum(op.type == "fail" for op in sends),
        acknowledged_lost=len(acked_keys - after - during_outage),
        missing_after_recovery=len(acked_keys - after),
        acked_during_outage=sum(send_acknowledged(op) for op in during), sends_during_outage=len(during),
        p50_ms=statistics.median(latencies) if latencies else 0.0,
        p99_ms=latencies[int(0.99 * (len(latencies) - 1))] if latencies else 0.0,
        readable_during_outage=len(on_a & during_outage), on_broker_a=len(on_a),
        guide_says=MODES[mode].guide_says if mode in MODES else "", victim=victim,
        read_from=", ".join(f"{where} ({n})" for where, n in sorted(sources.items())) or "none",
        first_ack_after_crash_ms=acks_after[0] - crash_at if acks_after else None,
        set_writable_after_ms=set_acks_after[0] - crash_at if set_acks_after else None,
        new_master=elected[0].node if elected else None,
        failover_ms=elected[0].time_ms - crash_at if elected else None,
        route_dropped_after_ms=_route_dropped(events, victim, crash_at, restart_at),
        endpoints_during_outage=", ".join(f"{e} ({n})" for e, n in sorted(endpoints.items())),
        acked_behind_slave=acked_behind_slave(events, acked, victim, restart_at),
        masters_not_raft_leader=masters_not_raft_leader(events))


def masters_not_raft_leader(events: list[TraceEvent]) -> int | None:
    """DLedger CommitLog mode: how many times a DLedger member's broker became master (a broker
    `role` event to a master role) while the member was not LEADER of the same term, by its last
    `dledger.role` event of its current life (DLedgerRoleChangeHandler: leader -> master; the term
    is the role event's epoch). None when the trace has no DLedger member."""
    members = {e.node for e in events if e.kind == "dledger.role"}
    if not members:
        return None
    raft: dict[str, tuple[str, int]] = {}
    bad = 0
    for e in events:
        if e.kind == "dledger.role":
            raft[e.node] = (e.fields["role"], e.fields["term"])
        elif e.kind in ("node.kill", "node.crash", "node.stop", "node.start"):
            raft.pop(e.node, None)
        elif e.kind == "role" and e.node in members and e.fields.get("component", "broker") == "broker" \
                and e.fields.get("to") in MASTER_ROLES:
            bad += raft.get(e.node) != ("LEADER", int(e.fields.get("epoch") or 0))
    return bad


def acked_behind_slave(events: list[TraceEvent], acked: list, victim: str, restart_at: float) -> int:
    """Sends the victim acknowledged after its restart at commitlog offsets (from their offsetMsgId)
    below the end of what a slave of its set had written by then. A master that lost its unflushed
    tail restarts behind its slave, and RocketMQ's classic HA takes the slave's report as its ack
    offset (DefaultHAConnection.ReadSocketService), so a SYNC_MASTER acknowledges these with the
    slave holding other bytes at their offsets (rmqlab.ha.default_ha_protocol). 0 when the victim
    is no master after its restart (controller modes) or its sends carry no offsetMsgId."""
    sets, roles, by_addr = broker_sets(events), Roles(events), broker_nodes_by_addr(events)
    slaves = {n for n, s in sets.items()
              if s == sets.get(victim) and n != victim and roles.at(n, restart_at) == "SLAVE"}
    ahead = max((e.fields["value"] for e in events if e.kind == "offset" and e.fields.get("which") == "written"
                 and e.node in slaves and e.time_ms < restart_at), default=None)
    if ahead is None:
        return 0
    count = 0
    for op in acked:
        offset_msg_id = op.value.get("offset_msg_id") if op.complete_time_ms >= restart_at else None
        if offset_msg_id:
            (host, port), offset = decode_message_id(offset_msg_id)
            count += by_addr.get(f"{host}:{port}") == victim and offset < ahead
    return count


def _route_dropped(events: list[TraceEvent], victim: str, crash_at: float, restart_at: float) -> float | None:
    """Crash -> the first time a name server expired or dropped the victim's address
    (namesrv.channel_expired, namesrv.channel_destroy)."""
    addrs = {f.get("ext_fields", {}).get("brokerAddr") for f in register_frames(events, victim)}
    addrs.discard(None)
    for e in events:
        if crash_at <= e.time_ms < restart_at and e.kind in ("namesrv.channel_expired", "namesrv.channel_destroy") \
                and e.fields["broker_addr"] in addrs:
            return e.time_ms - crash_at
    return None


# --- the deployment guide's claims, next to what was measured -----------------------------------------
GUIDE = "RocketMQ's deployment guide (部署方式)"
RIP32 = "the design page \"RIP 32 Slave Acting Master Mode\""
RAFT_ARTICLE = "the article 「一文详解 RocketMQ 如何利用 Raft 进行高可用保障」, section 「Raft 在 RocketMQ 中的初期形态」"


@dataclass(frozen=True)
class Claim:
    mode: str
    quote: str        # the deployment guide, verbatim
    gloss: str        # in English: a translation, nothing the guide does not say
    measured: str     # what this run shows
    holds: bool       # whether the measurement bears the claim out (for a machine crash, as run here)
    criterion: str = ""  # what `holds` tests, in words: the reading of the claim that was measured
    source: str = GUIDE  # where the quote is from


def _s(ms: float | None) -> str:
    return "— (not during the run)" if ms is None else f"{ms / 1000:.1f} s"


def claims(results: dict[str, ModeResult] | list[ModeResult]) -> list[Claim]:
    """The guide's pros and cons of every mode that ran, each with the measurement that tests it.
    Claims comparing two modes need both."""
    r = results if isinstance(results, dict) else {m.mode: m for m in results}
    out: list[Claim] = []

    def claim(mode: str, quote: str, gloss: str, measured: str, holds: bool, criterion: str = "",
              source: str = GUIDE) -> None:
        out.append(Claim(mode, quote, gloss, measured, bool(holds), criterion, source))

    if "single-master" in r:
        m = r["single-master"]
        claim(m.mode, "一旦Broker重启或者宕机时,会导致整个服务不可用",
              "once the broker restarts or goes down, the whole service is unavailable",
              f"{m.acked_during_outage} of {m.sends_during_outage} sends acknowledged during the outage; "
              f"writes again after {_s(m.set_writable_after_ms)}, once the broker was back",
              m.acked_during_outage == 0 and m.sends_during_outage > 0,
              "no send acknowledged while the broker was down")
    if "2m-noslave" in r:
        m = r["2m-noslave"]
        claim(m.mode, "单个Master宕机或重启维护对应用无影响",
              "one master down or restarting does not affect the application",
              f"{m.acked_during_outage} of {m.sends_during_outage} sends acknowledged during the outage "
              f"(by broker-b; the others were in flight to broker-a when it died, or retried it)",
              m.acked_during_outage >= 0.8 * m.sends_during_outage,
              "at least 80 % of the sends made during the outage acknowledged (by the other master)")
        claim(m.mode, "单台机器宕机期间,这台机器上未被消费的消息在机器恢复之前不可订阅",
              "while a machine is down, its unconsumed messages cannot be consumed until it recovers",
              f"a new consumer group read {m.readable_during_outage} of broker-a's {m.on_broker_a} messages "
              "during the outage", m.readable_during_outage == 0 and m.on_broker_a > 0,
              "none of broker-a's messages readable while its machine was down")
        claim(m.mode, "异步刷盘丢失少量消息",
              "with asynchronous flush a few messages are lost (when the machine goes down)",
              f"{m.acknowledged_lost} acknowledged messages lost for good: broker-a had not flushed them "
              f"(of {m.on_broker_a} it acknowledged before the crash)", m.acknowledged_lost > 0,
              "at least one acknowledged message lost; the guide's 'a few' is not measured")
    if "2m-2s-async" in r:
        m = r["2m-2s-async"]
        claim(m.mode, "Master宕机后,消费者仍然可以从Slave消费,而且此过程对应用透明,不需要人工干预",
              "after the master goes down, consumers still consume from the slave, transparently",
              f"a new consumer group read {m.readable_during_outage} of broker-a's {m.on_broker_a} messages from "
              f"{m.read_from}, after the name server dropped the dead master "
              f"({_s(m.route_dropped_after_ms)} after the crash)",
              m.on_broker_a > 0 and m.readable_during_outage == m.on_broker_a and "slave" in m.read_from,
              "every message broker-a acknowledged before the crash read from the slave during the outage, "
              "with no operator action ('transparently' is not timed)")
        if "2m-noslave" in r:
            n = r["2m-noslave"]
            claim(m.mode, "性能同多Master模式几乎一样", "performance almost the same as multi-master without slaves",
                  f"median send latency {m.p50_ms:.2f} ms, 2m-noslave {n.p50_ms:.2f} ms",
                  m.p50_ms <= 1.25 * n.p50_ms,
                  "median send latency at most 25 % above 2m-noslave's")
        claim(m.mode, "Master宕机,磁盘损坏情况下会丢失少量消息",
              "if the master goes down and its disk is damaged, a few messages are lost",
              f"{m.lost_if_disk_destroyed} of broker-a's {m.on_broker_a} acknowledged messages were on its disk "
              f"alone when it crashed; {m.acknowledged_lost} lost with the disk intact",
              m.acknowledged_lost == 0 and m.lost_if_disk_destroyed <= max(1, 0.05 * m.on_broker_a),
              "nothing lost with the disk intact, and at most 5 % of broker-a's acknowledged messages on its "
              "disk alone")
    if "2m-2s-sync" in r:
        m = r["2m-2s-sync"]
        claim(m.mode, "数据与服务都无单点故障,Master宕机情况下,消息无延迟",
              "no single point of failure for data or service; with the master down, messages are not delayed",
              f"{m.acknowledged_lost} acknowledged messages lost; {m.on_broker_a - m.lost_if_disk_destroyed} of "
              f"broker-a's {m.on_broker_a} were on the slave when the master crashed (read from {m.read_from}; "
              f"consumers got there once the name server dropped the dead master, "
              f"{_s(m.route_dropped_after_ms)} after the crash: failover time, which the claim is not about)"
              + (f"; after its restart broker-a acknowledged {m.acked_behind_slave} sync sends that no replica holds "
                 "(it lost its unflushed tail, and RocketMQ's master takes the report of its slave, ahead of it, as "
                 "an ack: the two logs now differ at those offsets)" if m.acked_behind_slave else ""),
              m.acknowledged_lost == 0 and m.lost_if_disk_destroyed == 0 and m.acked_behind_slave == 0,
              "「消息无延迟」 read as no replication lag: every message broker-a acknowledged was already on the "
              "slave when the master crashed, none lost, and none acknowledged that no replica holds")
        if "2m-2s-async" in r:
            a = r["2m-2s-async"]
            claim(m.mode, "性能比异步复制模式略低(大约低10%左右),发送单个消息的RT会略高",
                  "a little slower than asynchronous replication (about 10%); a single send's RT is a little higher",
                  f"median send latency {m.p50_ms:.2f} ms, 2m-2s-async {a.p50_ms:.2f} ms "
                  f"({m.p50_ms / a.p50_ms:.1f}x: each send also waits for the slave's ack; on the simulator a send "
                  f"costs little but its network hops, so the extra hop weighs more than on real disks)",
                  a.p50_ms < m.p50_ms <= 1.25 * a.p50_ms,
                  "median send latency above 2m-2s-async's by at most 25 % ('about 10 %')")
        claim(m.mode, "目前版本在主节点宕机后,备机不能自动切换为主机",
              "in this version the slave cannot become master automatically when the master goes down",
              "no broker of broker-a became master during the outage; broker-a took writes again: "
              + (f"{_s(m.set_writable_after_ms)} after the crash, once restarted" if m.set_writable_after_ms is not None
                 else "not during the run"),
              m.new_master is None and (m.set_writable_after_ms is None or m.set_writable_after_ms >= OUTAGE_MS),
              "no replica of broker-a became master, and broker-a took no write before its machine came back")
    for mode in ("controller-embedded", "controller-standalone"):
        if mode not in r:
            continue
        m = r[mode]
        claim(mode, "Controller 组件提供选主能力" if mode == "controller-embedded" else
              "配置参数与内嵌模式相同",
              "the Controller component provides master election" if mode == "controller-embedded" else
              "the configuration parameters are the same as in embedded mode",
              f"{m.new_master} became master {_s(m.failover_ms)} after the crash; broker-a took writes again after "
              f"{_s(m.set_writable_after_ms)}",
              m.new_master is not None and m.set_writable_after_ms is not None and m.set_writable_after_ms < OUTAGE_MS,
              "a replica elected master, and broker-a writable again, before the old master's machine came back"
              + ("" if mode == "controller-embedded" else " (what the same parameters should give: the same "
                 "failover as embedded controllers)"))
        claim(mode, "allAckInSyncStateSet:若该值为 true,则一条消息需要复制到 SyncStateSet 中的每一个副本才会向客户端"
              "返回成功,可以保证消息不丢失",
              "allAckInSyncStateSet=true: a message is acknowledged once every SyncStateSet replica has it, so no "
              "message is lost",
              f"{m.acknowledged_lost} acknowledged messages lost; {m.missing_after_recovery} missing once the old "
              f"master had rejoined (of {m.acknowledged})",
              m.acknowledged_lost == 0 and m.missing_after_recovery == 0,
              "no acknowledged message lost, none missing after the old master rejoined")
    if "proxy-local" in r:
        m = r["proxy-local"]
        claim(m.mode, "在 Local 模式下,Broker 和 Proxy 是同进程部署",
              "in Local mode the Broker and the Proxy are deployed in the same process",
              f"{m.acked_during_outage} of {m.sends_during_outage} sends acknowledged during the outage, through "
              f"{m.endpoints_during_outage or 'no endpoint'}",
              m.acked_during_outage >= 0.8 * m.sends_during_outage and m.endpoints_during_outage.count("(") == 1,
              "what a shared process implies for a machine crash: broker-a's Proxy went down with it, and at least "
              "80 % of the outage's sends were acknowledged through one other endpoint")
    if "proxy-cluster" in r:
        m = r["proxy-cluster"]
        local = r.get("proxy-local")
        claim(m.mode, "在 Cluster 模式下,Broker 和 Proxy 分别部署",
              "in Cluster mode the Broker and the Proxy are deployed separately",
              f"{m.acked_during_outage} of {m.sends_during_outage} sends acknowledged during the outage through "
              f"{m.endpoints_during_outage or 'no endpoint'}"
              + (f"; median send latency {m.p50_ms:.2f} ms, Local mode {local.p50_ms:.2f} ms" if local else ""),
              m.acked_during_outage >= 0.8 * m.sends_during_outage and (local is None or m.p50_ms > local.p50_ms),
              "what separate deployment implies: the Proxy outlived broker-a (at least 80 % of the outage's sends "
              "acknowledged) and every send paid one more hop (median latency above Local mode's)")
    if "acting-master" in r:
        m = r["acting-master"]
        claim(m.mode, "when the master goes offline, the slave can consume normally",
              "consumers read the group's messages from a slave while its master is down",
              f"a new consumer group read {m.readable_during_outage} of broker-a's {m.on_broker_a} messages from "
              f"{m.read_from}, once the name server had dropped the dead master "
              f"({_s(m.route_dropped_after_ms)} after the crash)",
              m.on_broker_a > 0 and m.readable_during_outage == m.on_broker_a and "slave" in m.read_from,
              "every message broker-a acknowledged before the crash read from a slave during the outage",
              source=RIP32)
        claim(m.mode, "the slave acts as the master in read-only mode in the client view",
              "the route shows the slave as brokerId 0 with read-only queues (perm 4)",
              f"{m.acked_during_outage} of {m.sends_during_outage} sends acknowledged during the outage, none by "
              f"broker-a's set, which took writes again {_s(m.set_writable_after_ms)} after the crash, once its "
              f"master was back; no replica became master",
              m.new_master is None and m.set_writable_after_ms is not None and m.set_writable_after_ms >= OUTAGE_MS,
              "no write to broker-a's set before its master's machine came back, and no election", source=RIP32)
        claim(m.mode, "brokerNotActiveTimeoutMillis: broker inactive timeout, more than the time namesrv is still "
              "not yet received the broker heartbeat, then determine the broker offline, the default 10 s",
              "the lightweight heartbeat: a broker silent for 10 s is taken offline",
              f"the name server dropped the crashed master {_s(m.route_dropped_after_ms)} after the crash"
              + (f" (2m-2s-async, without the heartbeat: {_s(r['2m-2s-async'].route_dropped_after_ms)})"
                 if "2m-2s-async" in r else ""),
              m.route_dropped_after_ms is not None and m.route_dropped_after_ms <= 16_000,
              "dropped within the 10 s timeout plus the name server's 5 s scan interval "
              "(scanNotActiveBrokerInterval) and one 1 s heartbeat interval", source=RIP32)
    if "dledger" in r:
        m = r["dledger"]
        claim(m.mode, "raft 角色透传给外部 broker 角色,leader 对应原来的 master,follower 和 candidate 对应原来的 slave",
              "the Raft role is passed through to the broker: the leader is the master, followers and candidates "
              "are slaves",
              f"{m.new_master} became master {_s(m.failover_ms)} after the crash (the followers' election); "
              f"{m.masters_not_raft_leader} master roles taken by a member that was not the Raft leader of that term; "
              f"broker-a took writes again after {_s(m.set_writable_after_ms)}",
              m.new_master is not None and m.masters_not_raft_leader == 0 and m.set_writable_after_ms is not None
              and m.set_writable_after_ms < OUTAGE_MS,
              "a new master before the old leader's machine came back, and every master role of the run taken by "
              "the Raft leader of the same term", source=RAFT_ARTICLE)
        claim(m.mode, "Raft 多数派限制导致三副本副本必须两副本响应才能返回",
              "the Raft majority: with three replicas two must answer before a send returns",
              f"{m.acknowledged_lost} acknowledged messages lost and {m.missing_after_recovery} missing once the old "
              f"leader had rejoined, though its machine lost power (of {m.acknowledged}); with 2 of 3 alive "
              f"{m.acked_during_outage} of {m.sends_during_outage} sends acknowledged during the outage",
              m.acknowledged_lost == 0 and m.missing_after_recovery == 0 and m.acked_during_outage > 0,
              "what a majority ack implies for the leader's power loss: nothing acknowledged lost or missing, and "
              "the two replicas left (a majority) still take writes", source=RAFT_ARTICLE)
        if "2m-2s-async" in r:
            a = r["2m-2s-async"]
            others = "".join(f", {n} {r[n].p50_ms:.2f} ms" for n in ("2m-2s-sync", "controller-embedded") if n in r)
            claim(m.mode, "ACK 是不够灵活的,这也导致“发送延迟低”和“副本冗余小”两种要求很难做到",
                  "the ack is not flexible: low send latency and little redundancy are hard to have together",
                  f"median send latency {m.p50_ms:.2f} ms (2m-2s-async {a.p50_ms:.2f} ms{others}): every send "
                  "waits for a follower's round trip; there is no asynchronous setting",
                  m.p50_ms > a.p50_ms,
                  "median send latency above 2m-2s-async's (no replica wait): three replicas cannot buy "
                  "asynchronous replication's latency", source=RAFT_ARTICLE)
    return out


def _html_table(headers: list[str], rows: list[list[str]]) -> str:
    head = "".join(f"<th style='text-align:left'>{html.escape(h)}</th>" for h in headers)
    body = "".join("<tr>" + "".join(f"<td style='text-align:left'>{c}</td>" for c in row) + "</tr>" for row in rows)
    return f"<table><tr>{head}</tr>{body}</table>"


def claims_html(items: list[Claim]) -> str:
    """The claims as an HTML table: mode, the guide's words (or, named under them, another
    source's), what they mean, what was measured, and whether that bears the claim out by the
    stated criterion."""
    return _html_table(["mode", "the deployment guide says", "", "measured here", "holds?", "criterion"], [
        [html.escape(c.mode), html.escape(c.quote) + ("" if c.source == GUIDE else f"<br><i>({html.escape(c.source)})</i>"),
         html.escape(c.gloss), html.escape(c.measured),
         "✔ yes" if c.holds else "✘ no", html.escape(c.criterion)] for c in items])


def results_html(results: list[ModeResult]) -> str:
    """The comparison's numbers, one row per mode."""
    def ms(v: float | None) -> str:
        return "—" if v is None else f"{v / 1000:.1f} s"

    return _html_table(
        ["mode", "acknowledged / sent", "acknowledged during the outage", "broker-a writable again after",
         "new master (after)", "broker-a's messages read during the outage", "lost", "missing after recovery",
         "p50 / p99 send ms"],
        [[html.escape(m.mode), f"{m.acknowledged} / {m.sent}", f"{m.acked_during_outage} / {m.sends_during_outage}",
          ms(m.set_writable_after_ms), "—" if m.new_master is None else f"{m.new_master} ({ms(m.failover_ms)})",
          f"{m.readable_during_outage} / {m.on_broker_a}" + (f" from {html.escape(m.read_from)}" if m.readable_during_outage
                                                             else ""), str(m.acknowledged_lost),
          str(m.missing_after_recovery), f"{m.p50_ms:.2f} / {m.p99_ms:.2f}"] for m in results])


# What _cache_path trusts: the modes registered above and simulate_mode as defined here.
_BUILTIN_MODES = dict(MODES)
_SIMULATE_MODE = simulate_mode
