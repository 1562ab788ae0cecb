"""The benchmark consumer: RocketMQ's ``example/benchmark/Consumer.java`` (run by ``benchmark/consumer.sh``)
as ``rmqlab consumer``, and as a client of a lab's Cluster on either runtime.

    rmqlab consumer -n "127.0.0.1:9876" -t BenchmarkTest -g benchmark_consumer [-e "tag0 || tag1"]
                    [--consumerType pull] [--consumeFromWhere CONSUME_FROM_FIRST_OFFSET] [-r 0.1]
                    [-w 20] [-q 1000] [--duration 60000]

One description, ``ConsumerSpec``, is both the command line (``to_argv`` / ``spec_from_args``) and
what ``rmqlab.cluster.Cluster.add_consumer`` builds on the simulator, so both runtimes run the same
``BenchmarkConsumer`` component and trace the same operations: ``consume`` for a push consumer,
``pull`` for a pull consumer.

Flags (RocketMQ's letters where its benchmark has the option):

    -n  name server list "a;b" (else $NAMESRV_ADDR)  -t  topic (BenchmarkTest)
    -g  consumer group (benchmark_consumer)         -e  tag expression, "*" or "TagA || TagB" ("*")
    --consumerType  push: DefaultMQPushConsumer (rebalancing in the group, offsets committed by
                    the client); pull: DefaultMQPullConsumer, this process pulls every queue of
                    the topic itself and records its offsets; simple: rmqlab's 5.x SimpleConsumer
                    (receive, then ack each message; the broker keeps the group's state, POP)
                    (push; simple with --protocol grpc, the only type it has)
    --protocol  remoting (push, pull: -n the name servers) or grpc (simple, through a Proxy:
                    --endpoints its addresses) (remoting)
    --consumeFromWhere  CONSUME_FROM_LAST_OFFSET | CONSUME_FROM_FIRST_OFFSET: where a group
                    without a stored offset starts (CONSUME_FROM_LAST_OFFSET)
    --orderly  push only: consume orderly (MessageListenerOrderly: each queue's messages one at a
        time, in order, by the member holding the queue's lock at the broker); -r's failures
        answer SUSPEND_CURRENT_QUEUE_A_MOMENT (the queue retries that message first)
    -r  share of messages answered RECONSUME_LATER (push), or left unacked to come back after their
        invisible time (simple), seeded on the simulator (0)
    -w  consume tasks at a time (push: consumeThreadMax) (20)
    -q  messages to consume, then stop (messages already handed out are consumed too: a pull's
        whole batch, the push consume tasks running); 0 = no limit (0)
    --duration  ms, then stop; 0 = no limit (0)

Each consumed message's body is checked against its key (``message_body``): a body that does not
belong to its key is traced as a WARN ``log`` event naming the message (``body_mismatch``). The
process ends after ``-q`` messages or ``--duration``, or on SIGTERM (offsets written first), and
prints one line:

    [Complete] Consume Total: 1000 Consume OK: 1000 Consume Failed: 0 Body Mismatch: 0 Consume TPS: 790

Deviations from RocketMQ's tool, and why: the group is used as given (Java appends a random suffix
unless ``-p false``: a lab's consumer must find its committed offsets again after a restart); ``-e``
is the tag expression itself (Java: ``-f TAG -e <file>``; SQL92 filtering is not served by rmqlab's
broker); ``-q``, ``--duration``, ``--consumerType``, ``--consumeFromWhere``, ``--orderly`` and
``--protocol`` are rmqlab's. A simple consumer makes one receive call at a time, for up to 16 messages, invisible for
15 s, waiting up to 5 s for them, on the route's queues in turn (four in a row on each broker of a
4-queue topic: an idle broker holds it 5 s a call); where a new group starts is the broker's POP
rule, whatever ``--consumeFromWhere``.
Clustering consumption only: rmqlab's consumers implement no BROADCASTING (no local offset store).
The pull consumer takes the topic's queues once, at start (Java's pull applications watch them
with a MessageQueueListener).
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
from dataclasses import dataclass
from typing import ClassVar

from rmqlab.client.client_process import ClientProcess
from rmqlab.client.consumer import (ConsumeConcurrentlyStatus, ConsumeOrderlyStatus, DefaultMQPullConsumer,
                                    DefaultMQPushConsumer, MessageListenerOrderly, PullStatus)
from rmqlab.common.message.message import MessageExt
from rmqlab.common.message.message_const import MessageConst
from rmqlab.common.topic.topic_validator import TopicValidator
from rmqlab.example.benchmark.client_spec import SpecDict, check, describe_failure, pause
from rmqlab.example.benchmark.message_body import body_matches
from rmqlab.example.benchmark.producer import PROTOCOLS, add_protocol_arguments
from rmqlab.remoting.protocol.header.broker.admin import MessageQueue
from rmqlab.remoting.protocol.header.broker.heartbeat import ConsumeFromWhere, build_subscription_data
from rmqlab.runtime.node import Node

DEFAULT_TOPIC = "BenchmarkTest"
DEFAULT_CONSUMER_GROUP = "benchmark_consumer"
CONSUMER_TYPES = ("push", "pull", "simple")
PROTOCOL_CONSUMER_TYPES = {"remoting": ("push", "pull"), "grpc": ("simple",)}  # the first: the default
SIMPLE_BATCH = 16
SIMPLE_INVISIBLE_MS = 15_000
SIMPLE_AWAIT_MS = 5_000
CONSUME_FROM = (ConsumeFromWhere.CONSUME_FROM_LAST_OFFSET.name, ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET.name)
PULL_BATCH_SIZE = 32
# DefaultMQPushConsumer's pullTimeDelayMillsWhenException: the pause after a failed pull.
PULL_TIME_DELAY_MILLS_WHEN_EXCEPTION = 3000


@dataclass(frozen=True)
class ConsumerSpec(SpecDict):
    """What a benchmark consumer does: a plain, JSON-serializable value (``to_dict``), the same
    for ``rmqlab consumer`` and for ``Cluster.add_consumer``. Field -> flag in ``FLAGS``."""

    topic: str = DEFAULT_TOPIC
    group: str = DEFAULT_CONSUMER_GROUP
    expression: str = "*"
    consumer_type: str = ""  # "": the protocol's default (push; simple for grpc)
    consume_from_where: str = ConsumeFromWhere.CONSUME_FROM_LAST_OFFSET.name
    fail_rate: float = 0.0
    threads: int = 20
    count: int = 0
    duration_ms: float = 0
    protocol: str = "remoting"
    orderly: bool = False

    kind: ClassVar[str] = "consumer"
    FLAGS: ClassVar[dict[str, str]] = {
        "topic": "-t", "group": "-g", "expression": "-e", "consumer_type": "--consumerType",
        "consume_from_where": "--consumeFromWhere", "fail_rate": "-r", "threads": "-w", "count": "-q",
        "duration_ms": "--duration", "protocol": "--protocol", "orderly": "--orderly",
    }

    def __post_init__(self) -> None:
        f = self.FLAGS
        for name, validate in (("topic", TopicValidator.validate_topic), ("group", TopicValidator.validate_group)):
            value = getattr(self, name)
            check(isinstance(value, str), f"{f[name]} ({name})", "a str", value)
            result = validate(value)
            if not result.valid:
                raise ValueError(f"{f[name]} ({name}): {result.remark}")
        try:
            build_subscription_data(self.topic, self.expression)
        except (ValueError, TypeError) as e:
            raise ValueError(f"{f['expression']} (expression): bad tag expression {self.expression!r}: {e}") from None
        check(self.protocol in PROTOCOLS, f"{f['protocol']} (protocol)", " or ".join(PROTOCOLS), self.protocol)
        types = PROTOCOL_CONSUMER_TYPES[self.protocol]
        if not self.consumer_type:
            object.__setattr__(self, "consumer_type", types[0])
        check(self.consumer_type in types, f"{f['consumer_type']} (consumer_type)",
               f"{' or '.join(types)} with --protocol {self.protocol}", self.consumer_type)
        check(isinstance(self.orderly, bool), f"{f['orderly']} (orderly)", "true or false", self.orderly)
        if self.orderly and self.consumer_type != "push":
            raise ValueError(f"{f['orderly']} (orderly) applies to push consumers only (--consumerType push)")
        check(self.consume_from_where in CONSUME_FROM, f"{f['consume_from_where']} (consume_from_where)",
               " or ".join(CONSUME_FROM), self.consume_from_where)
        check(isinstance(self.fail_rate, (int, float)) and not isinstance(self.fail_rate, bool)
               and 0 <= self.fail_rate < 1, f"{f['fail_rate']} (fail_rate)", "a number in [0, 1)", self.fail_rate)
        if self.fail_rate and self.consumer_type == "pull":
            raise ValueError(f"{f['fail_rate']} (fail_rate) applies to push consumers only (and simple ones, "
                             "which leave the message unacked): a pull consumer has no listener to answer "
                             "RECONSUME_LATER")
        check(isinstance(self.threads, int) and not isinstance(self.threads, bool) and self.threads >= 1,
               f"{f['threads']} (threads)", "an integer >= 1", self.threads)
        check(isinstance(self.count, int) and not isinstance(self.count, bool) and self.count >= 0,
               f"{f['count']} (count)", "an integer >= 0", self.count)
        check(isinstance(self.duration_ms, (int, float)) and not isinstance(self.duration_ms, bool)
               and self.duration_ms >= 0, f"{f['duration_ms']} (duration_ms)", "a number of ms >= 0",
               self.duration_ms)

    def to_argv(self) -> list[str]:
        """The ``rmqlab consumer`` flags of this description (without ``-n``)."""
        duration = str(int(self.duration_ms)) if float(self.duration_ms).is_integer() else repr(float(self.duration_ms))
        return ["-t", self.topic, "-g", self.group, "-e", self.expression, "--consumerType", self.consumer_type,
                "--consumeFromWhere", self.consume_from_where, "-r", repr(float(self.fail_rate)),
                "-w", str(self.threads), "-q", str(self.count), "--duration", duration, "--protocol", self.protocol] \
            + (["--orderly"] if self.orderly else [])

    def to_dict(self) -> dict:
        # orderly only when set: a description without it is the one stored before it existed.
        d = super().to_dict()
        if not self.orderly:
            d.pop("orderly")
        return d


def add_arguments(p: argparse.ArgumentParser) -> None:
    d = ConsumerSpec()
    p.add_argument("-n", "--namesrvAddr", dest="namesrv_addr",
                   help='name server address list, e.g. "127.0.0.1:9876;127.0.0.1:9877" (default: $NAMESRV_ADDR)')
    p.add_argument("-t", "--topic", default=d.topic, help=f"topic (default {d.topic})")
    p.add_argument("-g", "--consumerGroup", dest="group", default=d.group, help=f"consumer group (default {d.group})")
    p.add_argument("-e", "--expression", default=d.expression, help='tag expression, "*" or "TagA || TagB" (default *)')
    p.add_argument("--consumerType", dest="consumer_type", choices=CONSUMER_TYPES, default="",
                   help="push or pull (remoting), simple (grpc) (default push; simple with --protocol grpc)")
    p.add_argument("--consumeFromWhere", dest="consume_from_where", choices=CONSUME_FROM, default=d.consume_from_where,
                   help=f"where a group without a stored offset starts (default {d.consume_from_where})")
    p.add_argument("--orderly", dest="orderly", action="store_true",
                   help="push only: consume each queue in order, holding its lock at the broker (default off)")
    p.add_argument("-r", "--failRate", dest="fail_rate", type=float, default=d.fail_rate,
                   help="share of messages answered RECONSUME_LATER, push only (default 0)")
    p.add_argument("-w", "--threadCount", dest="threads", type=int, default=d.threads,
                   help=f"consume tasks at a time (default {d.threads})")
    p.add_argument("-q", "--messageQuantity", dest="count", type=int, default=d.count,
                   help="messages to consume (at least), then stop; 0: no limit (default 0)")
    p.add_argument("--duration", dest="duration_ms", type=float, default=d.duration_ms,
                   help="ms, then stop; 0: no limit (default 0)")
    add_protocol_arguments(p)


def spec_from_args(args: argparse.Namespace) -> ConsumerSpec:
    """ValueError naming the flag for a bad value."""
    return ConsumerSpec(**{f.name: getattr(args, f.name) for f in dataclasses.fields(ConsumerSpec)})


@dataclass
class ConsumerStats:
    ok: int = 0
    failed: int = 0          # answered RECONSUME_LATER (-r)
    mismatched: int = 0      # bodies that do not belong to their key
    begin_ms: float | None = None
    end_ms: float | None = None
    first_failure: str | None = None  # the first failed route lookup, pull or receive (pull, simple)

    def summary_line(self) -> str:
        total = self.ok + self.failed
        elapsed = (self.end_ms or 0) - (self.begin_ms or 0)
        tps = int(total * 1000 / elapsed) if elapsed > 0 else 0
        return (f"[Complete] Consume Total: {total} Consume OK: {self.ok} Consume Failed: {self.failed} "
                f"Body Mismatch: {self.mismatched} Consume TPS: {tps}")


class BenchmarkConsumer(ClientProcess):
    """A ClientProcess with one push, pull or simple consumer that consumes as its ConsumerSpec
    says, then finishes (ClientProcess.finish)."""

    def __init__(self, spec: ConsumerSpec, address: str):
        """`address`: the name servers, or for protocol "grpc" the Proxy endpoints."""
        self.spec = spec
        where = ConsumeFromWhere[spec.consume_from_where]
        if spec.consumer_type == "simple":
            from rmqlab.client.grpc import ClientConfiguration, SimpleConsumer

            consumer = SimpleConsumer(ClientConfiguration(address), spec.group, {spec.topic: spec.expression},
                                      await_duration_ms=SIMPLE_AWAIT_MS)
        elif spec.consumer_type == "push":
            consumer = DefaultMQPushConsumer(spec.group, address, consume_from_where=where,
                                             consume_thread_max=spec.threads)
            consumer.subscribe(spec.topic, spec.expression)
            consumer.register_message_listener(MessageListenerOrderly(self._orderly_listener) if spec.orderly
                                               else self._listener)
        else:
            consumer = DefaultMQPullConsumer(spec.group, address)
            consumer.consume_from_where = where
        super().__init__(consumer=consumer)
        self.stats = ConsumerStats()
        self._stopping: asyncio.Event | None = None
        self._tasks: list[asyncio.Task] = []
        self._summarized = False

    async def start(self, node: Node) -> None:
        self._stopping = asyncio.Event()
        self.stats.begin_ms = node.now_ms()
        await super().start(node)
        if self.spec.consumer_type == "pull":
            self._tasks.append(node.spawn(self._pull_all(), name="benchmark pull consumer"))
        elif self.spec.consumer_type == "simple":
            self._tasks.append(node.spawn(self._receive_loop(), name="benchmark simple consumer"))
        if self.spec.duration_ms:
            self._tasks.append(node.spawn(self._stop_after(self.spec.duration_ms), name="benchmark duration"))

    # -- what every consumed message goes through -------------------------------------------------
    def _check_body(self, msg: MessageExt) -> None:
        if not body_matches(msg.keys, msg.body):
            self.stats.mismatched += 1
            uniq_key = msg.properties.get(MessageConst.PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX)
            self.node.trace("log", level="WARN", message=f"body_mismatch: the body of {uniq_key} does not "
                            f"belong to its key {msg.keys!r}", logger="rmqlab.benchmark.consumer",
                            uniq_key=uniq_key, keys=msg.keys, body_size=len(msg.body))

    def _counted(self, n: int) -> None:
        self.stats.ok += n
        if self.spec.count and self.stats.ok >= self.spec.count and not self._stopping.is_set():
            self._stopping.set()
            # After the consume service has traced the operation and moved the offset.
            self.node.spawn(self.finish(), name="benchmark consumer finish")

    def _listener(self, msgs: list[MessageExt], context) -> ConsumeConcurrentlyStatus:
        for msg in msgs:
            self._check_body(msg)
        if self.spec.fail_rate and self.node.random.random() < self.spec.fail_rate:
            self.stats.failed += len(msgs)
            return ConsumeConcurrentlyStatus.RECONSUME_LATER
        self._counted(len(msgs))
        return ConsumeConcurrentlyStatus.CONSUME_SUCCESS

    def _orderly_listener(self, msgs: list[MessageExt], context) -> ConsumeOrderlyStatus:
        for msg in msgs:
            self._check_body(msg)
        if self.spec.fail_rate and self.node.random.random() < self.spec.fail_rate:
            self.stats.failed += len(msgs)
            return ConsumeOrderlyStatus.SUSPEND_CURRENT_QUEUE_A_MOMENT
        self._counted(len(msgs))
        return ConsumeOrderlyStatus.SUCCESS

    # -- the pull consumer's loop ------------------------------------------------------------------
    async def _pause(self, ms: float) -> None:
        await pause(self.node, self._stopping, ms)

    async def _pull_all(self) -> None:
        consumer: DefaultMQPullConsumer = self.clients["consumer"]
        while not self._stopping.is_set():
            try:
                mqs = await consumer.fetch_subscribe_message_queues(self.spec.topic)
            except Exception as e:  # no route yet: ask again later
                self.node.log.warning("fetchSubscribeMessageQueues %s failed: %s", self.spec.topic, e)
                self._failed(f"fetchSubscribeMessageQueues {self.spec.topic}", e)
                mqs = []
            if mqs:
                await asyncio.gather(*(self._pull_queue(mq) for mq in mqs))
                return
            await self._pause(PULL_TIME_DELAY_MILLS_WHEN_EXCEPTION)

    async def _start_offset(self, mq: MessageQueue) -> int | None:
        """The group's stored offset, else where consume_from_where says (None: stopping)."""
        consumer: DefaultMQPullConsumer = self.clients["consumer"]
        while not self._stopping.is_set():
            try:
                offset = await consumer.fetch_consume_offset(mq, True)
                if offset == -1:  # the group has none for this queue
                    first = self.spec.consume_from_where == ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET.name
                    offset = await (consumer.min_offset(mq) if first else consumer.max_offset(mq))
                if offset >= 0:
                    return offset
            except Exception as e:
                self.node.log.warning("the start offset of %s: %s", mq, e)
                self._failed(f"the start offset of {mq}", e)
            await self._pause(PULL_TIME_DELAY_MILLS_WHEN_EXCEPTION)
        return None

    async def _pull_queue(self, mq: MessageQueue) -> None:
        consumer: DefaultMQPullConsumer = self.clients["consumer"]
        offset = await self._start_offset(mq)
        while offset is not None and not self._stopping.is_set():
            try:
                result = await consumer.pull_block_if_not_found(mq, self.spec.expression, offset, PULL_BATCH_SIZE)
            except asyncio.CancelledError:
                raise
            except Exception as e:
                self.node.log.warning("pull %s from %d failed: %s", mq, offset, e)
                self._failed(f"pull {mq} from {offset}", e)
                await self._pause(PULL_TIME_DELAY_MILLS_WHEN_EXCEPTION)
                continue
            if result.pull_status is PullStatus.FOUND:
                for msg in result.msg_found_list:
                    self._check_body(msg)
            offset = result.next_begin_offset
            consumer.update_consume_offset(mq, offset)
            if result.pull_status is PullStatus.FOUND:
                self._counted(len(result.msg_found_list))

    # -- the simple consumer's loop -------------------------------------------------------------------
    async def _receive_loop(self) -> None:
        from rmqlab.client.grpc import ClientException

        consumer = self.clients["consumer"]
        while not self._stopping.is_set():
            try:
                views = await consumer.receive(SIMPLE_BATCH, SIMPLE_INVISIBLE_MS)
            except ClientException as e:
                self.node.log.warning("receive from %s failed: %s", self.spec.topic, e)
                self._failed(f"receive from {self.spec.topic}", e)
                await self._pause(PULL_TIME_DELAY_MILLS_WHEN_EXCEPTION)
                continue
            for view in views:
                self._check_body(view.to_message_ext())
                if self.spec.fail_rate and self.node.random.random() < self.spec.fail_rate:
                    self.stats.failed += 1  # not acked: it comes back after its invisible time
                    continue
                try:
                    await consumer.ack(view)
                except ClientException as e:
                    self.node.log.warning("ack of %s failed: %s", view.message_id, e)
                    continue
                self._counted(1)

    async def _stop_after(self, ms: float) -> None:
        await self._pause(ms)
        if not self._stopping.is_set():
            self._stopping.set()
            await self.finish()

    # -- stopping ------------------------------------------------------------------------------------
    def summary_line(self) -> str:
        return self.stats.summary_line()

    def _failed(self, what: str, e: Exception) -> None:
        if self.stats.first_failure is None:
            self.stats.first_failure = f"{what}: {describe_failure(e)}"

    def failure(self) -> str | None:
        """Why the run failed, when nothing was consumed and a lookup, pull or receive failed (for
        the exit code). Nothing consumed from a healthy, empty topic is no failure. A push
        consumer's lookups and pulls run inside the client library, which only logs them."""
        if self.stats.ok or self.stats.first_failure is None:
            return None
        return f"nothing consumed; the first failure: {self.stats.first_failure}"

    async def shutdown(self) -> None:
        """Stop pulling, trace the summary, shut the consumer down (it writes its offsets)."""
        if self._stopping is not None:
            self._stopping.set()
            current = asyncio.current_task()
            waiting = [t for t in self._tasks if t is not current and not t.done()]
            for t in waiting:  # a pull (or receive) may be held by the broker: do not wait for it
                t.cancel()
            await asyncio.gather(*waiting, return_exceptions=True)
        if not self._summarized and self.stats.begin_ms is not None:
            self._summarized = True
            self.stats.end_ms = self.node.now_ms()
            s = self.stats
            self.node.trace("log", level="INFO", message=self.summary_line(), logger="rmqlab.benchmark.consumer",
                            consumed=s.ok, failed=s.failed, mismatched=s.mismatched)
        await super().shutdown()
