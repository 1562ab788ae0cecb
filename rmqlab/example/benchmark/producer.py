"""The benchmark producer: RocketMQ's ``example/benchmark/Producer.java`` (run by ``benchmark/producer.sh``)
as ``rmqlab producer``, and as a client of a lab's Cluster on either runtime.

    rmqlab producer -n "127.0.0.1:9876" -t BenchmarkTest -s 128 -q 1000 [-w 4] [--sendMode async]
                    [-i 10] [--duration 60000] [-k "{name}-{i}"] [-l 3] [-g benchmark_producer]

One description, ``ProducerSpec``, is both the command line (``to_argv`` / ``spec_from_args``) and
what ``rmqlab.cluster.Cluster.add_producer`` builds on the simulator, so both runtimes run the same
``BenchmarkProducer`` component and trace the same ``send`` operations.

Flags (RocketMQ's letters where its benchmark has the option):

    -n  name server list "a;b" (else $NAMESRV_ADDR, as RocketMQ's clients read it)
    -t  topic (BenchmarkTest)           -g  producer group (benchmark_producer)
    -s  body size in bytes (128)        -q  messages to send, 0 = no limit (0)
    -w  sends in flight at a time (1)   --sendMode  sync | async | oneway (sync)
    -i  ms between the starts of two consecutive sends, 0 = as fast as the in-flight limit allows:
        the rate is 1000/i per second (0)
    --duration  ms after which no send starts, 0 = no limit (0)
    -k  key pattern, "{i}" the message's number, "{name}" the client's node name ("{name}-{i}");
        "" sends no keys    -l  tag count: message i gets tag "tag<i mod l>", 0 = no tag (0)
    --transaction  commit | rollback | unknown | check-commit: each message is a transaction
        (TransactionMQProducer; sync, remoting only): its local transaction commits, rolls back,
        stays unknown (every check answers UNKNOW, so the broker discards it after
        transactionCheckMax checks), or is unknown until the broker's check, which commits it
    --protocol  remoting: DefaultMQProducer, to the brokers (-n the name servers); grpc: rmqlab's
        5.x Producer (rmqlab.client.grpc), through a Proxy (--endpoints its addresses instead of
        -n; no producer group, no oneway sends in the 5.x protocol) (remoting)
    --shardingKeys  ordered sends: message i is one step of order "order-<i mod N>", sent with
        SelectMessageQueueByHash on that sharding key (``send(msg, selector, arg)``), so each
        order's messages share a queue, in send order; 0 = plain sends (0). Sync and remoting only
        (what RocketMQ's ordered-message example does).

The process ends after ``-q`` messages or ``--duration`` (whichever comes first: each in-flight
send completes first), or on SIGTERM, and prints one line:

    [Complete] Send Total: 1000 Send OK: 1000 Send Failed: 0 Send Unknown: 0 Send TPS: 812 Max RT(ms): 9 Average RT(ms):   1.208

Deviations from RocketMQ's tool, and why:

* ``-w`` defaults to 1 (Java: 64 threads) and also bounds async sends in flight (Java: one thread
  and a 10 000-request queue): a lab reads the trace operation by operation;
* ``-k`` takes a key pattern (Java: ``-k true`` sets the send second as the key) and bodies are
  built from the key (``message_body``), so a consumer can check every body it receives;
* ``-l`` picks the tag from the message number (Java: from the wall clock), which is repeatable on
  the simulator;
* ``-i``, ``--duration``, ``--sendMode``, ``--shardingKeys`` and ``--protocol`` are rmqlab's (Java has ``-y true`` for async only);
  delay levels, properties, ACL and message trace (``-d -e -p -a -m``) are left out;
* after a failed send a sender pauses 3 s, as Java does after remoting and broker errors, but after
  every failure (a cluster without a route must not make it spin).
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import string
from dataclasses import dataclass
from typing import ClassVar

from rmqlab.client.client_process import ClientProcess
from rmqlab.client.exceptions import ClientErrorCode, MQClientException, outcome_unknown
from rmqlab.client.producer import DefaultMQProducer
from rmqlab.client.producer.selector import SelectMessageQueueByHash
from rmqlab.common.message.message import Message
from rmqlab.common.topic.topic_validator import TopicValidator
from rmqlab.example.benchmark.client_spec import SpecDict, check, describe_failure, pause
from rmqlab.example.benchmark.message_body import build_body
from rmqlab.runtime.node import Node

DEFAULT_TOPIC = "BenchmarkTest"
DEFAULT_PRODUCER_GROUP = "benchmark_producer"
SEND_MODES = ("sync", "async", "oneway")
PROTOCOLS = ("remoting", "grpc")
TRANSACTIONS = ("commit", "rollback", "unknown", "check-commit")
KEY_FIELDS = ("i", "name")
# Java's benchmark sleeps this long after a RemotingException or MQBrokerException.
FAILURE_PAUSE_MS = 3000
# --transaction check-commit: how long the process waits, after its last send, for the broker to
# check every transaction it left unknown (the default check interval is 30 s, the first check
# waits transactionTimeOut 6 s).
CHECK_COMMIT_WAIT_MS = 120_000


def check_key_pattern(pattern: str, flag: str) -> None:
    """ValueError unless ``pattern`` formats with the fields ``i`` (an int) and ``name`` only."""
    try:
        fields = {f for _, f, _, _ in string.Formatter().parse(pattern) if f is not None}
    except ValueError as e:
        raise ValueError(f"{flag}: bad key pattern {pattern!r}: {e}") from None
    unknown = sorted(f for f in fields if f not in KEY_FIELDS)
    if unknown:
        raise ValueError(f"{flag}: bad key pattern {pattern!r}: unknown field(s) {', '.join(unknown)} "
                         f"(known: {{i}} the message number, {{name}} the client's name)")
    try:
        pattern.format(i=0, name="n")
    except (ValueError, IndexError, KeyError) as e:
        raise ValueError(f"{flag}: bad key pattern {pattern!r}: {e}") from None


@dataclass(frozen=True)
class ProducerSpec(SpecDict):
    """What a benchmark producer does: a plain, JSON-serializable value (``to_dict``), the same
    for ``rmqlab producer`` and for ``Cluster.add_producer``. Field -> flag in ``FLAGS``."""

    topic: str = DEFAULT_TOPIC
    group: str = DEFAULT_PRODUCER_GROUP
    count: int = 0
    interval_ms: float = 0
    duration_ms: float = 0
    body_size: int = 128
    keys: str = "{name}-{i}"
    tag_count: int = 0
    send_mode: str = "sync"
    in_flight: int = 1
    protocol: str = "remoting"
    # "" (plain sends) or a TRANSACTIONS mode: each message is a transaction (TransactionMQProducer).
    transaction: str = ""
    sharding_keys: int = 0

    kind: ClassVar[str] = "producer"
    FLAGS: ClassVar[dict[str, str]] = {
        "topic": "-t", "group": "-g", "count": "-q", "interval_ms": "-i", "duration_ms": "--duration",
        "body_size": "-s", "keys": "-k", "tag_count": "-l", "send_mode": "--sendMode", "in_flight": "-w",
        "protocol": "--protocol", "transaction": "--transaction", "sharding_keys": "--shardingKeys",
    }

    def __post_init__(self) -> None:
        f = self.FLAGS
        for name, validate in (("topic", TopicValidator.validate_topic), ("group", TopicValidator.validate_group)):
            value = getattr(self, name)
            check(isinstance(value, str), f"{f[name]} ({name})", "a str", value)
            result = validate(value)
            if not result.valid:
                raise ValueError(f"{f[name]} ({name}): {result.remark}")
        for name in ("count", "tag_count", "sharding_keys"):
            value = getattr(self, name)
            check(isinstance(value, int) and not isinstance(value, bool) and value >= 0,
                   f"{f[name]} ({name})", "an integer >= 0", value)
        for name in ("body_size", "in_flight"):
            value = getattr(self, name)
            check(isinstance(value, int) and not isinstance(value, bool) and value >= 1,
                   f"{f[name]} ({name})", "an integer >= 1", value)
        for name in ("interval_ms", "duration_ms"):
            value = getattr(self, name)
            check(isinstance(value, (int, float)) and not isinstance(value, bool) and value >= 0,
                   f"{f[name]} ({name})", "a number of ms >= 0", value)
        check(self.send_mode in SEND_MODES, f"{f['send_mode']} (send_mode)", " or ".join(SEND_MODES), self.send_mode)
        check(self.protocol in PROTOCOLS, f"{f['protocol']} (protocol)", " or ".join(PROTOCOLS), self.protocol)
        if self.protocol == "grpc" and self.send_mode == "oneway":
            raise ValueError(f"{f['send_mode']} (send_mode): the 5.x protocol (--protocol grpc) has no oneway send")
        check(self.transaction in ("", *TRANSACTIONS), f"{f['transaction']} (transaction)",
              " or ".join(TRANSACTIONS), self.transaction)
        if self.transaction and (self.protocol != "remoting" or self.send_mode != "sync"):
            raise ValueError(f"{f['transaction']} (transaction): transactions are sent synchronously over the "
                             "remoting protocol (--sendMode sync --protocol remoting)")
        if self.sharding_keys and (self.send_mode != "sync" or self.protocol != "remoting"):
            raise ValueError(f"{f['sharding_keys']} (sharding_keys): ordered sends are sync sends of the remoting "
                             "protocol (--sendMode sync --protocol remoting)")
        if self.transaction and self.sharding_keys:
            raise ValueError(f"{f['transaction']} (transaction) and {f['sharding_keys']} (sharding_keys): a "
                             "transactional send picks its own queue; choose one")
        check(isinstance(self.keys, str), f"{f['keys']} (keys)", "a str", self.keys)
        check_key_pattern(self.keys, f"{f['keys']} (keys)")

    def to_argv(self) -> list[str]:
        """The ``rmqlab producer`` flags of this description (without ``-n``)."""
        return ["-t", self.topic, "-g", self.group, "-q", str(self.count), "-i", _num(self.interval_ms),
                "--duration", _num(self.duration_ms), "-s", str(self.body_size), "-k", self.keys,
                "-l", str(self.tag_count), "--sendMode", self.send_mode, "-w", str(self.in_flight),
                "--protocol", self.protocol] + (["--transaction", self.transaction] if self.transaction else []) \
            + (["--shardingKeys", str(self.sharding_keys)] if self.sharding_keys else [])

    def to_dict(self) -> dict:
        """Without ``transaction`` and ``sharding_keys`` when they are off, so descriptions from
        before them read the same."""
        data = super().to_dict()
        if not self.transaction:
            del data["transaction"]
        if not self.sharding_keys:
            del data["sharding_keys"]
        return data


def _num(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else repr(float(value))


def add_arguments(p: argparse.ArgumentParser) -> None:
    d = ProducerSpec()
    p.add_argument("-n", "--namesrvAddr", dest="namesrv_addr",
                   help='name server address list, e.g. "127.0.0.1:9876;127.0.0.1:9877" (default: $NAMESRV_ADDR)')
    p.add_argument("-t", "--topic", default=d.topic, help=f"topic (default {d.topic})")
    p.add_argument("-g", "--producerGroup", dest="group", default=d.group, help=f"producer group (default {d.group})")
    p.add_argument("-s", "--messageSize", dest="body_size", type=int, default=d.body_size,
                   help=f"body size in bytes (default {d.body_size})")
    p.add_argument("-q", "--messageQuantity", dest="count", type=int, default=d.count,
                   help="messages to send; 0: no limit (default 0)")
    p.add_argument("-i", "--interval", dest="interval_ms", type=float, default=d.interval_ms,
                   help="ms between the starts of consecutive sends (rate 1000/i per s); 0: no pacing (default 0)")
    p.add_argument("--duration", dest="duration_ms", type=float, default=d.duration_ms,
                   help="ms after which no send starts; 0: no limit (default 0)")
    p.add_argument("-k", "--keys", dest="keys", default=d.keys,
                   help='key pattern: {i} the message number, {name} the client name; "" for no keys '
                        f'(default "{d.keys}")')
    p.add_argument("-l", "--tagCount", dest="tag_count", type=int, default=d.tag_count,
                   help="tags tag0..tag<l-1>, by message number; 0: no tags (default 0)")
    p.add_argument("--shardingKeys", dest="sharding_keys", type=int, default=d.sharding_keys,
                   help='ordered sends: message i goes to the queue of order "order-<i mod N>" '
                        "(SelectMessageQueueByHash); 0: plain sends (default 0)")
    p.add_argument("--sendMode", dest="send_mode", choices=SEND_MODES, default=d.send_mode,
                   help=f"sync, async or oneway (default {d.send_mode})")
    p.add_argument("-w", "--threadCount", dest="in_flight", type=int, default=d.in_flight,
                   help=f"sends in flight at a time (default {d.in_flight})")
    add_protocol_arguments(p)
    p.add_argument("--transaction", dest="transaction", choices=TRANSACTIONS, default=d.transaction,
                   help="send each message as a transaction (TransactionMQProducer): commit or rollback it, "
                        "leave it unknown (the broker's checks get UNKNOW until they run out), or check-commit "
                        "(unknown at first, committed when the broker checks; the process waits up to 120 s "
                        "for those checks) (default: plain sends)")


class BenchmarkTransactionListener:
    """The local transaction of ``--transaction``: what execute and check answer per mode."""

    def __init__(self, mode: str):
        from rmqlab.client.producer.local_transaction_state import LocalTransactionState as S
        self.execute_state, self.check_state = {
            "commit": (S.COMMIT_MESSAGE, S.COMMIT_MESSAGE), "rollback": (S.ROLLBACK_MESSAGE, S.ROLLBACK_MESSAGE),
            "unknown": (S.UNKNOW, S.UNKNOW), "check-commit": (S.UNKNOW, S.COMMIT_MESSAGE)}[mode]

        self.awaiting_check: set[str] = set()  # check-commit: executed, not yet checked

    def execute_local_transaction(self, msg, arg):
        if self.check_state is not self.execute_state:
            self.awaiting_check.add(msg.properties.get("UNIQ_KEY"))
        return self.execute_state

    def check_local_transaction(self, msg):
        self.awaiting_check.discard(msg.properties.get("UNIQ_KEY"))
        return self.check_state


def add_protocol_arguments(p: argparse.ArgumentParser) -> None:
    """--protocol and --endpoints, the same for the producer and the consumer."""
    p.add_argument("--protocol", dest="protocol", choices=PROTOCOLS, default="remoting",
                   help="remoting: to the brokers, found through the name servers (-n); grpc: the 5.x protocol, "
                        "through a Proxy (--endpoints) (default remoting)")
    p.add_argument("--endpoints", dest="endpoints",
                   help='--protocol grpc: the Proxy endpoints, e.g. "127.0.0.1:8081" or "127.0.0.2:8081;127.0.0.3:8081"')


def spec_from_args(args: argparse.Namespace) -> ProducerSpec:
    """ValueError naming the flag for a bad value."""
    return ProducerSpec(**{f.name: getattr(args, f.name) for f in dataclasses.fields(ProducerSpec)})


@dataclass
class ProducerStats:
    """StatsBenchmarkProducer's counters, split by the trace's outcomes."""

    ok: int = 0
    failed: int = 0
    unknown: int = 0     # a oneway send, or a timeout after the request was written
    rt_total_ms: float = 0.0
    rt_max_ms: float = 0.0
    begin_ms: float | None = None
    end_ms: float | None = None
    first_failure: str | None = None  # the first failed send's cause, for an operator to read

    @property
    def total(self) -> int:
        return self.ok + self.failed + self.unknown

    def summary_line(self) -> str:
        elapsed = (self.end_ms or 0) - (self.begin_ms or 0)
        tps = int(self.total * 1000 / elapsed) if elapsed > 0 else 0
        avg = self.rt_total_ms / self.ok if self.ok else 0.0
        return (f"[Complete] Send Total: {self.total} Send OK: {self.ok} Send Failed: {self.failed} "
                f"Send Unknown: {self.unknown} Send TPS: {tps} Max RT(ms): {int(self.rt_max_ms)} "
                f"Average RT(ms): {avg:7.3f}")


class BenchmarkProducer(ClientProcess):
    """A ClientProcess with one DefaultMQProducer that sends as its ProducerSpec says, from
    ``in_flight`` sender tasks, then finishes (ClientProcess.finish)."""

    def __init__(self, spec: ProducerSpec, address: str):
        """`address`: the name servers, or for protocol "grpc" the Proxy endpoints."""
        if spec.protocol == "grpc":
            from rmqlab.client.grpc import ClientConfiguration, Producer

            producer = Producer(ClientConfiguration(address), topics=[spec.topic])
        elif spec.transaction:
            from rmqlab.client.producer.transaction_mq_producer import TransactionMQProducer

            producer = TransactionMQProducer(spec.group, address,
                                             transaction_listener=BenchmarkTransactionListener(spec.transaction))
        else:
            producer = DefaultMQProducer(spec.group, address)
        super().__init__(producer=producer)
        self.spec = spec
        self.stats = ProducerStats()
        self._next_seq = 0
        self._stopping: asyncio.Event | None = None
        self._task: asyncio.Task | None = None
        self._summarized = False

    async def start(self, node: Node) -> None:
        await super().start(node)
        self._stopping = asyncio.Event()
        self._task = node.spawn(self._run(), name="benchmark producer")

    def _take(self) -> int | None:
        """The next message number, or None when the count or the duration is used up."""
        spec, now = self.spec, self.node.now_ms()
        if self._stopping.is_set() or (spec.count and self._next_seq >= spec.count):
            return None
        if spec.duration_ms and now - self.stats.begin_ms >= spec.duration_ms:
            return None
        seq = self._next_seq
        self._next_seq += 1
        return seq

    def build_message(self, seq: int) -> Message:
        spec = self.spec
        key = spec.keys.format(i=seq, name=self.node.name) if spec.keys else None
        msg = Message(spec.topic, build_body(key, spec.body_size))
        if key:
            msg.keys = key
        if spec.tag_count:
            msg.tags = f"tag{seq % spec.tag_count}"
        return msg

    async def _pause(self, ms: float) -> None:
        await pause(self.node, self._stopping, ms)

    async def _sender(self) -> None:
        producer = self.clients["producer"]  # DefaultMQProducer, or the 5.x Producer
        spec, stats = self.spec, self.stats
        while (seq := self._take()) is not None:
            if spec.interval_ms:
                await self._pause(stats.begin_ms + seq * spec.interval_ms - self.node.now_ms())
                if self._stopping.is_set():
                    return
            msg = self.build_message(seq)
            begin = self.node.now_ms()
            try:
                if spec.transaction:
                    await producer.send_message_in_transaction(msg)
                elif spec.sharding_keys:
                    await producer.send(msg, selector=SelectMessageQueueByHash(),
                                        arg=f"order-{seq % spec.sharding_keys}")
                elif spec.send_mode == "sync":
                    await producer.send(msg)
                elif spec.send_mode == "async":
                    await producer.send_async(msg)
                else:
                    await producer.send_oneway(msg)
            except asyncio.CancelledError:
                raise
            except Exception as e:
                # The trace has the operation's outcome; these counters mirror it.
                # maybe_stored: the remoting producer's mark; maybe_done: the 5.x producer's.
                if getattr(e, "maybe_stored", False) or getattr(e, "maybe_done", False) \
                        or (spec.send_mode == "oneway" and outcome_unknown(e)):
                    stats.unknown += 1
                else:
                    stats.failed += 1
                if stats.first_failure is None:
                    stats.first_failure = await self._explain(e)
                await self._pause(FAILURE_PAUSE_MS)
                continue
            if spec.send_mode == "oneway":
                stats.unknown += 1
                continue
            rt = self.node.now_ms() - begin
            stats.ok += 1
            stats.rt_total_ms += rt
            stats.rt_max_ms = max(stats.rt_max_ms, rt)

    async def _explain(self, e: Exception) -> str:
        """What a failed send says, and for "No route info" (which hides why there is no route)
        the name servers' own answer to the route request: e.g. none reachable, or no such topic."""
        text = describe_failure(e)
        if self.spec.protocol == "remoting" and isinstance(e, MQClientException) \
                and e.response_code == ClientErrorCode.NOT_FOUND_TOPIC_EXCEPTION:
            factory = self.clients["producer"].client_factory
            api = factory.mq_client_api_impl
            try:
                await api.get_topic_route_info_from_name_server(self.spec.topic,
                                                                factory.client_config.mq_client_api_timeout)
            except asyncio.CancelledError:
                raise
            except Exception as cause:
                text += f" (the route request to the name servers failed: {describe_failure(cause)})"
        return text

    async def _run(self) -> None:
        self.stats.begin_ms = self.node.now_ms()
        await asyncio.gather(*(self._sender() for _ in range(self.spec.in_flight)))
        self.stats.end_ms = self.node.now_ms()
        if self.spec.transaction == "check-commit":
            # The broker's checks need a live producer of the group: stay until each was answered.
            listener = self.clients["producer"].transaction_listener
            deadline = self.node.now_ms() + CHECK_COMMIT_WAIT_MS
            while listener.awaiting_check and not self._stopping.is_set() and self.node.now_ms() < deadline:
                await self._pause(100)
        if not self._stopping.is_set():
            await self.finish()

    def summary_line(self) -> str:
        return self.stats.summary_line()

    def failure(self) -> str | None:
        """Why the run failed, when sends were tried and none succeeded (for the exit code): Java's
        tool just counts; a process that sent nothing must not exit 0. A oneway send that left
        counts (its outcome is never known)."""
        s = self.stats
        succeeded = s.ok + (s.unknown if self.spec.send_mode == "oneway" else 0)
        if s.total == 0 or succeeded:
            return None
        return (f"no send succeeded ({s.failed} failed, {s.unknown} unknown); "
                f"the first failure: {s.first_failure or 'unknown cause'}")

    async def shutdown(self) -> None:
        """Stop starting sends, let those in flight complete (at most the send timeout), trace
        the summary, then shut the producer down (UNREGISTER_CLIENT)."""
        if self._stopping is not None and not self._stopping.is_set():
            self._stopping.set()
            task = self._task
            if task is not None and task is not asyncio.current_task() and not task.done():
                producer = self.clients["producer"]
                timeout_ms = producer.send_timeout_ms if self.spec.protocol == "grpc" else producer.send_msg_timeout
                grace_ms = timeout_ms + 1000
                done, _ = await asyncio.wait([task], timeout=grace_ms / 1000.0)
                if not done:
                    task.cancel()
                    await asyncio.gather(task, return_exceptions=True)
        if self.stats.end_ms is None and self.stats.begin_ms is not None:
            self.stats.end_ms = self.node.now_ms()
        if not self._summarized and self.stats.begin_ms is not None:
            self._summarized = True
            s = self.stats
            self.node.trace("log", level="INFO", message=self.summary_line(), logger="rmqlab.benchmark.producer",
                            sent=s.total, ok=s.ok, failed=s.failed, unknown=s.unknown)
        await super().shutdown()

