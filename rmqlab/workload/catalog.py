"""The public practice workloads: short recorded scenarios over every deployment
mode of RocketMQ's deployment guide and every fault kind, committed as datasets/workloads/<name>.parquet by
`rmqlab record --all --out-dir datasets/workloads`.

    from rmqlab.workload.catalog import CATALOG
    CATALOG["ctrl-embedded-kill-master"]          # a Workload

Every workload runs the same kind of traffic: a producer sending a 64-byte message every 100 ms
(ProducerSpec, sync sends, one in flight; the gRPC Producer through the Proxy in the proxy rows),
some a push consumer group too, on one topic of 4 queues, for 16-34 virtual seconds after t=0.

Lab settings, as in rmqlab.demo.mode_comparison (they shorten waits without changing what is
taught): every broker gets LAB_BROKER_SETTINGS (slaves serve reads; the timer wheel and the 5 s
consumer-offset flush, which no workload here uses, are off because on the simulator they only cost
wall time), and the clients refresh their routes every second (pollNameServerInterval 1000;
RocketMQ: 30 s) and avoid a broker that just failed (sendLatencyFaultEnable), so a producer follows
a failover within a short workload.

In controller mode broker-n0 is the first master on the simulator (it is started first and the
controllers elect the first replica that asks; on real processes whichever asks first wins);
workloads that must cut a *given* replica off (partitions, the unclean-election pair) name it, the
others use "@master".

Names end in `.real` for the workloads recorded from real OS processes (recorded_runtime "real");
their files replay on the simulator like the others (the outcome then is the simulator's, the
recorded one is kept in the file).
"""

from __future__ import annotations

from rmqlab.checker.schedule import MASTER, FaultOp
from rmqlab.example.benchmark import ConsumerSpec, ProducerSpec
from rmqlab.workload.spec import TopicSpec, Workload, WorkloadClient, schedule_of

TOPIC = "WorkloadTopic"
SEND_EVERY_MS = 100
# rmqlab.demo.mode_comparison.LAB_BROKER_SETTINGS, written out: a workload file holds every setting.
LAB_BROKER_SETTINGS = {"slaveReadEnable": True, "timerWheelEnable": False, "flushConsumerOffsetInterval": 60_000,
                       "flushDelayOffsetInterval": 60_000}
LAB_CLIENT_SETTINGS = {"pollNameServerInterval": 1_000, "sendLatencyFaultEnable": True}

CATALOG: dict[str, Workload] = {}


def _fault(at_ms: float, f: str, node: str | None = None, fault_id: int = 0, **value) -> FaultOp:
    return FaultOp(float(at_ms), f, node, dict(value), fault_id)


def process_fault(kind: str, node: str, at_ms: float, until_ms: float, fault_id: int = 0, **value) -> list[FaultOp]:
    """A process fault and its undo (restart after kill/crash, resume after suspend)."""
    undo = "resume" if kind == "suspend" else "restart"
    return [_fault(at_ms, kind, node, fault_id, **value), _fault(until_ms, undo, node, fault_id)]


def partition(groups: list[list[str]], at_ms: float, until_ms: float, fault_id: int = 0) -> list[FaultOp]:
    return [_fault(at_ms, "partition", None, fault_id, groups=[sorted(g) for g in groups]),
            _fault(until_ms, "heal", None, fault_id)]


def loss(node: str, peers: list[str], rate: float, at_ms: float, until_ms: float, fault_id: int = 0) -> list[FaultOp]:
    value = {"node": node, "peers": sorted(peers), "rate": rate}
    return [FaultOp(float(at_ms), "loss", None, value, fault_id), FaultOp(float(until_ms), "loss-heal", None, dict(value),
                                                                          fault_id)]


def add(name: str, mode: str, description: str, faults: list[FaultOp], *, seed: int, proxy: str | None = None,
        duration_ms: float = 20_000, consumer: bool = False, controller_overrides: dict | None = None,
        broker_overrides: dict | None = None, producer: dict | None = None, client_overrides: dict | None = None,
        consumer_spec: dict | None = None, runtime: str = "sim") -> Workload:
    """Register a workload; `broker_overrides` are settings for every broker on top of
    LAB_BROKER_SETTINGS, `client_overrides` the clients' on top of LAB_CLIENT_SETTINGS; `producer`
    and `consumer_spec`: ProducerSpec / ConsumerSpec fields on top of the common ones."""
    grpc = proxy is not None
    clients = [WorkloadClient("producer", ProducerSpec(**{
        "topic": TOPIC, "group": "workload_producer", "interval_ms": SEND_EVERY_MS, "body_size": 64,
        "protocol": "grpc" if grpc else "remoting", **(producer or {})}), 0.0, None)]
    if consumer:
        clients.append(WorkloadClient("consumer", ConsumerSpec(**{
            "topic": TOPIC, "group": "workload_consumer", "consume_from_where": "CONSUME_FROM_FIRST_OFFSET",
            **(consumer_spec or {})}), 500.0, None))
    w = Workload(name=name, mode=mode, seed=seed, description=description, proxy=proxy,
                 overrides={"*": {**LAB_BROKER_SETTINGS, **(broker_overrides or {})}},
                 controller_overrides=dict(controller_overrides or {}),
                 client_overrides={**LAB_CLIENT_SETTINGS, **(client_overrides or {})}, topics=(TopicSpec(TOPIC, 4),), clients=tuple(clients),
                 faults=schedule_of(sorted(faults, key=lambda op: op.time_ms)), duration_ms=float(duration_ms),
                 recorded_runtime=runtime)
    if name in CATALOG:
        raise ValueError(f"catalog: duplicate workload name {name!r}")
    CATALOG[name] = w
    return w


# --- single-master ----------------------------------------------------------------------------------------------
add("single-kill", "single-master", "The only broker is killed (kill -9) for 6 s: no writes until it is back; its "
    "page cache survives, so nothing acknowledged is lost.", process_fault("kill", "broker-a", 5_000, 11_000), seed=1)
add("single-crash", "single-master", "The only broker's machine loses power for 5 s: writes stop until it is "
    "back; only what it had not flushed yet (ASYNC_FLUSH, every 500 ms) could be lost.", process_fault("crash", "broker-a", 5_000, 10_000), seed=2,
    consumer=True)
add("single-suspend", "single-master", "The only broker is frozen (SIGSTOP) for 4 s: sends time out, then it "
    "resumes with everything.", process_fault("suspend", "broker-a", 5_000, 9_000), seed=3)
add("single-partition", "single-master", "The broker is cut off from the name server for 8 s: routes stay cached "
    "(the 120 s expiry is far), so clients keep writing.", partition([["broker-a"], ["namesrv"]], 4_000, 12_000),
    seed=4)
add("single-kill.real", "single-master", "single-kill recorded from real OS processes.",
    process_fault("kill", "broker-a", 5_000, 11_000), seed=1, runtime="real")

# --- 2m-noslave ------------------------------------------------------------------------------------------------
add("2m-noslave-kill-a", "2m-noslave", "broker-a is killed for 8 s: broker-b takes the writes; broker-a's "
    "messages wait for it.", process_fault("kill", "broker-a", 4_000, 12_000), seed=5, consumer=True)
add("2m-noslave-crash-a", "2m-noslave", "broker-a's machine crashes (a torn write-back of 64 bytes): broker-b "
    "takes the writes; broker-a's unflushed tail is lost.", process_fault("crash", "broker-a", 4_000, 10_000,
                                                                           torn_bytes=64), seed=6)
add("2m-noslave-partition", "2m-noslave", "broker-a is cut off from the name server and broker-b for 8 s.",
    partition([["broker-a"], ["broker-b", "namesrv"]], 4_000, 12_000), seed=7)
add("2m-noslave-loss", "2m-noslave", "30% packet loss between broker-b and the others for 10 s.",
    loss("broker-b", ["broker-a", "namesrv"], 0.3, 4_000, 14_000), seed=8)

# --- 2m-2s-async -----------------------------------------------------------------------------------------------
add("async-kill-master", "2m-2s-async", "Master broker-a is killed for 8 s: its slave keeps serving reads, writes "
    "go to broker-b; the slave never takes over (classic mode).", process_fault("kill", "broker-a", 4_000, 12_000),
    seed=9)
add("async-crash-master", "2m-2s-async", "Master broker-a's machine crashes: what it had not flushed is gone from "
    "its disk; a classic slave is never promoted and gives nothing back, so acknowledged messages are lost.", process_fault("crash", "broker-a", 4_000, 10_000),
    seed=10)
add("async-kill-slave", "2m-2s-async", "Slave broker-a-s is killed for 6 s: asynchronous replication does not "
    "wait for it; it catches up after the restart.", process_fault("kill", "broker-a-s", 4_000, 10_000), seed=11)
add("async-suspend-master", "2m-2s-async", "Master broker-b is frozen for 5 s.",
    process_fault("suspend", "broker-b", 4_000, 9_000), seed=12)
add("async-partition-slave", "2m-2s-async", "Slave broker-a-s is cut off from its master for 8 s, then catches up.",
    partition([["broker-a-s"], ["broker-a", "broker-b", "broker-b-s", "namesrv"]], 4_000, 12_000), seed=13)
add("async-kill-master.real", "2m-2s-async", "async-kill-master recorded from real OS processes.",
    process_fault("kill", "broker-a", 4_000, 12_000), seed=9, runtime="real")

# --- 2m-2s-sync ------------------------------------------------------------------------------------------------
add("sync-kill-master", "2m-2s-sync", "Master broker-a is killed for 8 s: writes go to broker-b; nothing "
    "acknowledged is lost (every ack waited for the slave).", process_fault("kill", "broker-a", 4_000, 12_000), seed=14)
add("sync-crash-master", "2m-2s-sync", "Master broker-a's machine crashes for 6 s and restarts without its "
    "unflushed tail, behind its slave; as in RocketMQ the slave's report counts as an ack, so broker-a "
    "acknowledges sync sends at offsets where broker-a-s holds the lost tail and the logs diverge silently; "
    "nothing acknowledged is lost here because consumers read from broker-a.",
    process_fault("crash", "broker-a", 4_000, 10_000), seed=15, consumer=True)
add("sync-kill-slave", "2m-2s-sync", "Slave broker-a-s is killed for 8 s: broker-a's sends answer "
    "SLAVE_NOT_AVAILABLE / FLUSH_SLAVE_TIMEOUT (stored, not acknowledged) until it is back.",
    process_fault("kill", "broker-a-s", 4_000, 12_000), seed=16)
add("sync-partition-slave", "2m-2s-sync", "Slave broker-b-s is cut off from its master for 8 s.",
    partition([["broker-b-s"], ["broker-a", "broker-a-s", "broker-b", "namesrv"]], 4_000, 12_000), seed=17)
add("sync-loss", "2m-2s-sync", "50% packet loss between master broker-a and its slave for 8 s.",
    loss("broker-a", ["broker-a-s"], 0.5, 4_000, 12_000), seed=18)

# --- controller-embedded ---------------------------------------------------------------------------------------
EMB = "controller-embedded"
EMB_SERVERS = ["namesrv-n0", "namesrv-n1", "namesrv-n2", "broker-n0", "broker-n1", "broker-n2"]
add("ctrl-embedded-kill-master", EMB, "The master is killed: the controllers elect a replica of the "
    "SyncStateSet; the old master returns as a slave and truncates to the consistent point.",
    process_fault("kill", MASTER, 4_000, 12_000), seed=19)
add("ctrl-embedded-crash-master", EMB, "The master's machine crashes: failover, then the old master returns without "
    "its unflushed tail and catches up.", process_fault("crash", MASTER, 4_000, 10_000), seed=20, consumer=True)
add("ctrl-embedded-suspend-master", EMB, "The master is frozen for 14 s, longer than the controllers' broker "
    "heartbeat timeout: a new master is elected; the frozen one wakes up as a stale master of an old epoch.",
    process_fault("suspend", MASTER, 3_000, 17_000), seed=21, duration_ms=24_000)
add("ctrl-embedded-partition-master", EMB, "broker-n0, the first master, is cut off from everyone for 14 s: the "
    "controllers elect another replica; back, broker-n0 truncates what only it had.",
    partition([["broker-n0"], [n for n in EMB_SERVERS if n != "broker-n0"]], 3_000, 17_000), seed=22,
    duration_ms=24_000)
add("ctrl-embedded-double-failover", EMB, "Two failovers in a row: the master is killed, comes back as a slave; "
    "the next master is killed too.", process_fault("kill", MASTER, 3_000, 8_000, 0)
    + process_fault("kill", MASTER, 12_000, 17_000, 1), seed=23, duration_ms=22_000)
add("ctrl-embedded-loss", EMB, "40% packet loss between the controllers (namesrv-n0) and the brokers for 8 s.",
    loss("namesrv-n0", ["broker-n0", "broker-n1", "broker-n2"], 0.4, 4_000, 12_000), seed=24)
add("ctrl-embedded-kill-master.real", EMB, "ctrl-embedded-kill-master recorded from real OS processes.",
    process_fault("kill", MASTER, 4_000, 12_000), seed=19, runtime="real")

# The unclean-election pair (RocketMQ's "主备自动切换模式部署" documentation on
# enableElectUncleanMaster: "可能会选取数据落后的副本作为 Master 而丢失消息"):
# both slaves go down, the SyncStateSet shrinks to the master, which goes on acknowledging alone;
# then the master dies and the slaves come back behind it.
# The slaves die one after the other (each death shrinks the SyncStateSet by one: two shrinks at
# once race, and the controllers keep the first), the master acknowledges alone for a few seconds,
# then dies; the slaves come back behind it.
_UNCLEAN = (process_fault("kill", "broker-n1", 1_000, 13_000, 0) + process_fault("kill", "broker-n2", 2_500, 13_000, 1)
            + process_fault("kill", "broker-n0", 12_000, 18_000, 2))
add("ctrl-embedded-unclean", EMB, "enableElectUncleanMaster=true: both slaves are down while the master "
    "acknowledges alone, then the master dies; a slave from outside the SyncStateSet is elected and what only "
    "the master had is lost (its return truncates it).", _UNCLEAN, seed=25, duration_ms=24_000,
    controller_overrides={"enableElectUncleanMaster": True})
add("ctrl-embedded-clean", EMB, "The same faults as ctrl-embedded-unclean with unclean elections off: no master "
    "until broker-n0 returns, nothing acknowledged is lost.", _UNCLEAN, seed=25, duration_ms=24_000)

# --- controller-standalone -------------------------------------------------------------------------------------
STD = "controller-standalone"
STD_SERVERS = ["namesrv", "controller-n0", "controller-n1", "controller-n2", "broker-n0", "broker-n1", "broker-n2"]
add("ctrl-standalone-kill-master", STD, "The master is killed: failover among the SyncStateSet; the old master "
    "rejoins as a slave.", process_fault("kill", MASTER, 4_000, 12_000), seed=26, consumer=True)
add("ctrl-standalone-crash-master", STD, "The master's machine crashes (a torn write-back of 7 bytes).",
    process_fault("crash", MASTER, 4_000, 10_000, torn_bytes=7), seed=27)
add("ctrl-standalone-kill-controller", STD, "A controller is killed for 8 s, and the master 2 s later: two "
    "controllers are still a majority and elect a new master.",
    process_fault("kill", "controller-n0", 3_000, 11_000, 0) + process_fault("kill", MASTER, 5_000, 13_000, 1),
    seed=28)
add("ctrl-standalone-partition-controllers", STD, "controller-n0 is cut off from every other node for 8 s (the other "
    "two controllers are a majority), then the master is killed and they elect a new one.",
    partition([["controller-n0"], [n for n in STD_SERVERS if n != "controller-n0"]], 3_000, 11_000, 0)
    + process_fault("kill", MASTER, 6_000, 14_000, 1), seed=29)
add("ctrl-standalone-partition-master", STD, "The brokers are cut off from the controllers and the name "
    "server for 6 s (the replicas still reach each other), then the master is killed.",
    partition([["broker-n0", "broker-n1", "broker-n2"], ["namesrv", "controller-n0", "controller-n1", "controller-n2"]],
              3_000, 9_000, 0) + process_fault("kill", MASTER, 11_000, 16_000, 1), seed=30, duration_ms=22_000)
add("ctrl-standalone-loss-replicas", STD, "30% packet loss between broker-n0 and the other replicas for 10 s: "
    "acknowledgements wait for the SyncStateSet; it may shrink.",
    loss("broker-n0", ["broker-n1", "broker-n2"], 0.3, 3_000, 13_000), seed=31)
add("ctrl-standalone-suspend-slave", STD, "Slave broker-n2 is frozen for 12 s: its connection stays open, so it "
    "stays in the SyncStateSet (haMaxTimeSlaveNotCatchup has not passed), and with allAckInSyncStateSet every "
    "write waits for it until it resumes.", process_fault("suspend", "broker-n2", 3_000, 15_000), seed=32,
    duration_ms=22_000)
# The two below make the SyncStateSet and election rules decide what no other workload here asks
# them (graded by lab 02's and lab 03's exercises): a replica that stays behind for longer than
# haMaxTimeSlaveNotCatchup, and an unclean election between a newer epoch and more bytes.
add("ctrl-standalone-slow-replication", STD, "No process fails, but replication is throttled to 1.6 KB/s "
    "(haFlowControlEnable, maxHaTransferByteInSecond) while the producer writes ~2.9 KB/s, acknowledged by the "
    "master alone (allAckInSyncStateSet=false): the slaves stay behind for longer than haMaxTimeSlaveNotCatchup "
    "(15 s), the master shrinks the SyncStateSet to itself, and they rejoin once they catch up after the "
    "producer stops.", [], seed=37, duration_ms=24_000,
    broker_overrides={"haFlowControlEnable": True, "maxHaTransferByteInSecond": 1_600, "allAckInSyncStateSet": False})
_A, _B, _C = "broker-n0", "broker-n1", "broker-n2"
add("ctrl-standalone-unclean-epochs", STD, "enableElectUncleanMaster=true, acknowledged by the master alone "
    "(allAckInSyncStateSet=false). broker-n0, the first master, is cut off from both slaves (100% loss) and "
    "acknowledges alone for 12 s; then it is killed (and broker-n2 restarted): broker-n1 becomes master in "
    "epoch 2 and broker-n2 follows it. broker-n2 is killed again and comes back cut off from broker-n1, as "
    "broker-n0 does; when broker-n1 is killed, neither is in the SyncStateSet, and the unclean election weighs "
    "broker-n0 (epoch 1, more bytes) against broker-n2 (epoch 2, fewer bytes): DefaultElectPolicy takes the "
    "newer epoch, and what only broker-n0 had is lost.",
    loss(_A, [_B, _C], 1.0, 2_000, 32_000, 0) + process_fault("kill", _A, 14_000, 20_000, 1)
    + process_fault("kill", _C, 14_000, 16_000, 2) + loss(_C, [_B], 1.0, 22_000, 32_000, 3)
    + process_fault("kill", _C, 22_000, 24_000, 4) + process_fault("kill", _B, 26_000, 32_000, 5), seed=38,
    duration_ms=38_000, controller_overrides={"enableElectUncleanMaster": True},
    broker_overrides={"allAckInSyncStateSet": False})

# --- Proxy (5.x clients over gRPC) ------------------------------------------------------------------------------
add("proxy-local-kill-a", "2m-noslave", "Local mode: broker-a and the Proxy in its process are killed for 8 s; the "
    "gRPC producer goes on through broker-b's Proxy.", process_fault("kill", "broker-a", 4_000, 12_000), seed=33,
    proxy="local")
add("proxy-local-crash-b", "2m-noslave", "Local mode: broker-b's machine crashes with its Proxy.",
    process_fault("crash", "broker-b", 4_000, 10_000), seed=34, proxy="local")
add("proxy-cluster-kill-a", "2m-noslave", "Cluster mode: broker-a is killed; the Proxy survives and sends to "
    "broker-b.", process_fault("kill", "broker-a", 4_000, 12_000), seed=35, proxy="cluster")
add("proxy-cluster-suspend-proxy", "2m-noslave", "Cluster mode: the one Proxy is frozen for 5 s: every send waits for "
    "it until it resumes.", process_fault("suspend", "proxy", 4_000, 9_000), seed=36, proxy="cluster")

# --- slave acting master (RIP-32) -----------------------------------------------------------------------------------
# Two groups of three replicas (conf/acting-master): the name server shows the smallest live slave of a group
# without master as its read-only master (supportActingMaster), and that slave runs the group's special services.
ACT = "acting-master"
# The timer wheel stays on (RocketMQ's default): a returning master's pre-online asks every member for its
# timer checkpoint, and without the wheel the answer is an error and the master never comes back online.
_ACT = {"timerWheelEnable": True}
add("acting-kill-master", ACT, "broker-a's master is killed for 10 s: the name server lists broker-a-s1 as broker-a's "
    "read-only master, the producer sends to broker-b only, the consumer goes on reading broker-a's queues from "
    "broker-a-s1; the master comes back through pre-online and takes over again.",
    process_fault("kill", "broker-a", 5_000, 15_000), seed=39, duration_ms=26_000, consumer=True, broker_overrides=_ACT)
add("acting-kill-two-masters", ACT, "Both masters are killed for 8 s: each group is read-only, served by its first "
    "slave; no send can be acknowledged until a master is back, and consumers read on.",
    process_fault("kill", "broker-a", 5_000, 13_000, 0) + process_fault("kill", "broker-b", 6_000, 13_000, 1),
    seed=40, duration_ms=24_000, consumer=True, broker_overrides=_ACT)
add("acting-kill-master-and-slave", ACT, "broker-a's master, then its first slave, are killed: the acting master "
    "moves from broker-a-s1 to broker-a-s2, and back when they return.",
    process_fault("kill", "broker-a", 4_000, 16_000, 0) + process_fault("kill", "broker-a-s1", 8_000, 14_000, 1),
    seed=41, duration_ms=26_000, consumer=True, broker_overrides=_ACT)
add("acting-crash-master", ACT, "broker-a's master's machine loses power (unflushed bytes gone) for 8 s while the "
    "consumer commits its offsets to the acting slave; pre-online makes the returning master take those offsets "
    "back before it registers.", process_fault("crash", "broker-a", 5_000, 13_000), seed=42, duration_ms=26_000,
    consumer=True, broker_overrides=_ACT)

# --- transactional messages ------------------------------------------------------------------------------------
# Every message is a transaction whose local outcome is unknown until the broker's check asks
# (`rmqlab producer --transaction check-commit`): 200 of them, one every 100 ms, then the producer
# stays to answer checks until the workload ends. Lab settings: a check every 5 s (RocketMQ: 30 s)
# of half messages older than 1 s (transactionTimeOut; RocketMQ: 6 s), above
# transactionOpBatchInterval (3 s), or a check could ask again before the previous answer's op
# record is written and commit twice; and the producer heartbeats to the brokers every second
# (RocketMQ: 30 s): a broker checks through a producer's heartbeat channel, and a master that is
# new or back would otherwise find none ("channel is null") and count the checks up to
# transactionCheckMax, then discard.
_TX = {"transactionCheckInterval": 5_000, "transactionTimeOut": 1_000}
_TX_PRODUCER = {"transaction": "check-commit", "count": 200}
_TX_CLIENT = {"heartbeatBrokerInterval": 1_000}
add("tx-async-kill-master", "2m-2s-async", "Every message is a transaction committed at the broker's check. "
    "broker-a's master is killed for 8 s: its half messages wait on it (a slave runs no check), new "
    "transactions go to broker-b; back, it checks them and commits them.",
    process_fault("kill", "broker-a", 5_000, 13_000), seed=43, duration_ms=32_000,
    broker_overrides=_TX, producer=_TX_PRODUCER, client_overrides=_TX_CLIENT)
add("tx-ctrl-embedded-kill-master", EMB, "Every message is a transaction committed at the broker's check. The "
    "master is killed: the replica the controllers elect holds the half messages and checks them, so no "
    "transaction waits for the old master.", process_fault("kill", MASTER, 5_000, 13_000), seed=44,
    duration_ms=32_000, broker_overrides=_TX, producer=_TX_PRODUCER, client_overrides=_TX_CLIENT)
add("tx-acting-kill-master", ACT, "Every message is a transaction committed at the broker's check. broker-a's "
    "master is killed: its smallest-id slave runs the check as acting master and escapes each committed "
    "message to broker-b (RIP-32).", process_fault("kill", "broker-a", 5_000, 13_000), seed=45, duration_ms=32_000,
    broker_overrides={**_ACT, **_TX}, producer=_TX_PRODUCER, client_overrides=_TX_CLIENT)

# --- orderly consumption ---------------------------------------------------------------------------------------
# Ordered sends (8 sharding keys, SelectMessageQueueByHash: one key, one queue) and an orderly push
# consumer, which consumes a queue only while the queue's master (brokerId 0 in its route) has
# granted it the queue's lock (LOCK_BATCH_MQ), and checks each queue's order (queue-order). (A
# 2m-2s-async row is left out for the catalog's size: while its master is down, a RocketMQ 5 slave
# answers every pull that finds nothing with PULL_RETRY_IMMEDIATELY — BrokerController's
# minBrokerIdInGroup is 0 without RIP-32 — and a caught-up consumer asks again at once, ~20,000 pulls
# in 8 virtual seconds.)
_ORDERED = {"sharding_keys": 8}
_ORDERLY = {"orderly": True}
add("orderly-ctrl-embedded-kill-master", EMB, "Ordered sends and an orderly consumer. The master is killed: the "
    "elected replica grants the queues' locks again and orderly consumption resumes there, in order.",
    process_fault("kill", MASTER, 5_000, 13_000), seed=47, duration_ms=24_000, consumer=True, producer=_ORDERED,
    consumer_spec=_ORDERLY)
add("orderly-acting-kill-master", ACT, "Ordered sends and an orderly consumer. broker-a's master is killed: the "
    "acting slave grants the locks of broker-a's queues (read-only: new ordered sends go to broker-b), and the "
    "returning master takes them back (RIP-32).", process_fault("kill", "broker-a", 5_000, 13_000), seed=48,
    duration_ms=24_000, consumer=True, broker_overrides=_ACT, producer=_ORDERED, consumer_spec=_ORDERLY)

# --- DLedger CommitLog mode -------------------------------------------------------------------------------------
# One group of three replicas whose commitlog is a DLedger Raft log (conf/dledger/, group RaftNode00): the Raft
# leader is the master, a send is acknowledged once a majority (2 of 3) stores its entry. Which member is the
# first leader depends on the seed (DLedger's election timeouts are random); the workloads that hit a given
# member name the first leader (or its followers) of their seed, the kill uses "@master".
DL = "dledger"
DL_SERVERS = ["namesrv", "broker-n0", "broker-n1", "broker-n2"]
add("dledger-kill-leader", DL, "The leader (the master) is killed for 12 s: after missing its heartbeats for 5 s "
    "the two followers elect a new leader, which becomes master; the old leader returns as a follower (slave) "
    "and nothing acknowledged is lost.", process_fault("kill", MASTER, 3_000, 15_000), seed=49, duration_ms=22_000)
add("dledger-partition-leader", DL, "broker-n2, the first leader, is cut off from the other members and the name "
    "server for 14 s (the producer still reaches it): its appends get no quorum and are never acknowledged, it "
    "steps down, the other two elect a leader that takes the writes; back, broker-n2 follows it and its "
    "uncommitted entries are truncated.",
    partition([["broker-n2"], [n for n in DL_SERVERS if n != "broker-n2"]], 3_000, 17_000), seed=50,
    duration_ms=24_000)
add("dledger-two-down", DL, "Both followers of broker-n2, the leader, are killed for 8 s: with 1 of 3 alive no "
    "send is acknowledged (no quorum; the leader steps down after 6 s) until they are back and a leader is "
    "elected; nothing acknowledged is lost.",
    process_fault("kill", "broker-n0", 4_000, 12_000, 0) + process_fault("kill", "broker-n1", 4_000, 12_000, 1),
    seed=51, duration_ms=22_000)
add("dledger-crash-follower", DL, "Follower broker-n2's machine loses power for 6 s: the leader and the other "
    "follower are a majority and acknowledge every send; broker-n2 recovers its flushed log and catches up.",
    process_fault("crash", "broker-n2", 4_000, 10_000), seed=52, duration_ms=18_000, consumer=True)
