"""TimerMessageStore: RocketMQ 5 timer messages (RIP-43), delivered at an arbitrary time.

Follows ``store/src/main/java/org/apache/rocketmq/store/timer/TimerMessageStore.java``. The send
path (``rmqlab.broker.util.hook_utils``) parks a message with ``TIMER_DELIVER_MS`` /
``TIMER_DELAY_SEC`` / ``TIMER_DELAY_MS`` in queue 0 of ``rmq_sys_wheel_timer`` with
``TIMER_OUT_MS`` (its deliver time rounded down to a ``timerPrecisionMs`` slot), ``REAL_TOPIC`` and
``REAL_QID``. This store then:

1. **enqueue** (``TimerEnqueueGetService`` + ``TimerEnqueuePutService``): reads the units of
   ``rmq_sys_wheel_timer`` from its queue offset and schedules each under its slot
   ``TIMER_OUT_MS``. A unit whose slot is already before the current write time
   (``currWriteTimeMs`` = now rounded down to the precision) goes straight to delivery, marked
   ``TIMER_ENQUEUE_MS`` = Long.MAX_VALUE ("never enqueued"), as RocketMQ does;
2. **dequeue** (``TimerDequeueGetService`` + the get/put message services): a slot is read once the
   write time has passed it (``currReadTimeMs < currWriteTimeMs``), so a message is delivered at
   the first precision boundary at or after its deliver time. Slots are read in time order; in a
   slot the delete markers (``TIMER_DEL_UNIQKEY``: cancel the message of that real topic + UNIQ_KEY
   in the same slot) first, then the messages in the order they were enqueued. Each message is
   converted back (``convert`` / ``convertMessage``: ``TIMER_ENQUEUE_MS`` and ``TIMER_DEQUEUE_MS``
   added, topic and queue from ``REAL_TOPIC`` / ``REAL_QID``, ``WAIT=false``) and put into the
   local store (EscapeBridge on the master). ``doPut``'s outcome table: PUT_OK done;
   MESSAGE_ILLEGAL, PROPERTIES_SIZE_EXCEEDED, WHEEL_TIMER_* dropped; SERVICE_NOT_AVAILABLE,
   FLUSH_DISK_TIMEOUT, FLUSH_SLAVE_TIMEOUT, OS_PAGE_CACHE_BUSY, CREATE_MAPPED_FILE_FAILED,
   SLAVE_NOT_AVAILABLE and anything else retried every 500 ms (at 1 s precision) — at most 3
   attempts in all unless ``timerEnableRetryUntilSuccess``, then dropped, as in RocketMQ. (A
   *_TIMEOUT / SLAVE_NOT_AVAILABLE put is stored already, so its retries are duplicates: RocketMQ's
   behaviour too.)
3. Only the group's master dequeues (``shouldRunningDequeue``, switched by the broker's
   ``changeSpecialServiceStatus``); the loops run on the broker's Node, so every time is the node's
   clock (virtual on the simulator).

**Quirk** kept from RocketMQ: ``convertMessage`` takes the properties string before it clears
``REAL_TOPIC`` / ``REAL_QID`` and sets ``WAIT=false``, so the delivered message carries on disk
``TIMER_DELIVER_MS`` (or ``TIMER_DELAY_SEC`` / ``_MS``), ``TIMER_OUT_MS``, ``REAL_TOPIC``,
``REAL_QID``, ``TIMER_ENQUEUE_MS`` and ``TIMER_DEQUEUE_MS`` (consumers see them), and its
``WAIT`` as sent.

**Deviation** (rmqlab): RocketMQ writes every enqueued unit to a timer log (``timerlog/``) and a
time wheel file (``timerwheel``, 7 days of slots, messages beyond ``timerRollWindowSlot`` are
"rolled": re-put to the timer topic, ``TIMER_ROLL_TIMES``). rmqlab keeps the schedule in memory (a
heap ordered by slot, then queue offset) and rebuilds it on start from the ``rmq_sys_wheel_timer``
consume queue, beginning at a checkpoint: nothing is rolled, there are no timer-log or wheel files,
no timer metrics (``timermetrics``), no flow control (``timerCongestNumEachSlot``, unlimited by
default anyway), no warm-up service. The checkpoint is RocketMQ's file, ``config/timercheck``, with
rmqlab's meaning for its fields (:mod:`rmqlab.store.timer.timer_checkpoint`):

* C (``lastTimerQueueOffset``): the oldest queue offset not yet delivered;
* E (``masterTimerQueueOffset``): how far the queue had been read;
* R (``lastReadTimeMs``): every unit in [C, E) whose slot is before R has been delivered, every
  one at or after R has not.

A snapshot (R, C, E) is taken only where it is exact: when no slot is partly delivered (the next
pending slot is later than every delivered one). Every ``timerFlushIntervalMs`` the newest
snapshot is written into the mapped page (a process crash keeps it), and the newest one whose
deliveries the commit log has flushed is forced (what a machine crash keeps: a delivered message
lost with the commit log's unflushed tail is thus delivered again, never lost). On start (and when
a slave becomes master) the units in [C, E) are read again: slots before R are skipped, the others
scheduled; from E on the queue is read as new.

Duplicates therefore happen only after a crash (kill -9 or machine crash) or a role change: the
messages delivered since the last snapshot written (kill: at most ``timerFlushIntervalMs`` plus a
slot; machine crash: since the commit log's last flush) are delivered again. A clean shutdown stops
the dequeue at a slot boundary and writes the exact snapshot, so nothing is delivered twice; a
promoted slave starts from its own checkpoint (RocketMQ's slave copies the master's with
``SlaveSynchronize.syncTimerCheckPoint``, which rmqlab lacks), so it re-delivers what the old master
delivered after that checkpoint. Enqueue times of units rebuilt from [C, E) are their store time
rounded down to the precision (RocketMQ reads them from the timer log).
"""

from __future__ import annotations

import heapq
import logging
from collections import deque
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

from rmqlab.common.java_compat import java_parse_int
from rmqlab.common.message.message import MessageExt, MessageExtBrokerInner
from rmqlab.common.message.message_const import MessageConst
from rmqlab.common.message.message_decoder import decode
from rmqlab.store.put_message_result import PutMessageResult, PutMessageStatus
from rmqlab.store.timer.timer_checkpoint import TimerCheckpoint

log = logging.getLogger("rmqlab.store")

TIMER_TOPIC = "rmq_sys_wheel_timer"  # TopicValidator.SYSTEM_TOPIC_PREFIX + "wheel_timer"
TIMER_OUT_MS = MessageConst.PROPERTY_TIMER_OUT_MS
TIMER_ENQUEUE_MS = MessageConst.PROPERTY_TIMER_ENQUEUE_MS
TIMER_DEQUEUE_MS = MessageConst.PROPERTY_TIMER_DEQUEUE_MS
TIMER_DELETE_UNIQUE_KEY = MessageConst.PROPERTY_TIMER_DEL_UNIQKEY
PUT_OK, PUT_NEED_RETRY, PUT_NO_RETRY = 0, 1, 2
MAGIC_DEFAULT, MAGIC_ROLL, MAGIC_DELETE = 1, 1 << 1, 1 << 2
LONG_MAX_VALUE = (1 << 63) - 1
_NO_RETRY = {PutMessageStatus.MESSAGE_ILLEGAL, PutMessageStatus.PROPERTIES_SIZE_EXCEEDED,
             PutMessageStatus.WHEEL_TIMER_NOT_ENABLE, PutMessageStatus.WHEEL_TIMER_MSG_ILLEGAL}


def build_delete_key(real_topic: str | None, unique_key: str) -> str:
    """``buildDeleteKey``: what a delete marker's ``TIMER_DEL_UNIQKEY`` holds."""
    return f"{real_topic}+{unique_key}"


@dataclass(order=True)
class TimerRequest:
    """One scheduled unit (RocketMQ's TimerRequest): ordered by slot, then queue offset."""

    delay_time: int  # the slot: TIMER_OUT_MS
    queue_offset: int
    offset_py: int = field(compare=False)
    size_py: int = field(compare=False)
    enqueue_time: int = field(compare=False)  # LONG_MAX_VALUE: delivered without entering the wheel
    magic: int = field(compare=False, default=MAGIC_DEFAULT)


@dataclass(frozen=True)
class _Snapshot:
    read_time_ms: int       # R
    commit_offset: int      # C
    enqueued_offset: int    # E
    required_phy_offset: int  # the commit log end once its deliveries were put


class TimerMessageStore:
    """See the module docstring. ``put_message`` is the escape bridge (an awaitable put into the
    local store); ``state_machine_version`` feeds the checkpoint's data version."""

    INITIAL, RUNNING, SHUTDOWN = 0, 1, 3

    def __init__(self, message_store, store_config, timer_checkpoint: TimerCheckpoint, *,
                 clock: Callable[[], int],
                 put_message: Callable[[MessageExtBrokerInner], Awaitable[PutMessageResult | None]],
                 state_machine_version: Callable[[], int] = lambda: 0):
        self.message_store = message_store
        self.store_config = store_config
        self.timer_checkpoint = timer_checkpoint
        self.clock = clock
        self.put_message = put_message
        self.state_machine_version = state_machine_version
        self.precision_ms = store_config.get_timer_precision_ms()
        self.state = self.INITIAL
        self.should_running_dequeue = False
        self._generation = 0  # bumped at every start/stop of the dequeue, so a stale loop ends
        self._stopping = False  # a clean shutdown ends the dequeue at the next slot boundary
        self._reset_from(self._checkpoint_snapshot())
        self._last_written = self._last_flushed = self._latest

    # -- state ------------------------------------------------------------------------------------
    def _checkpoint_snapshot(self) -> _Snapshot:
        ckpt = self.timer_checkpoint
        return _Snapshot(ckpt.last_read_time_ms, ckpt.last_timer_queue_offset, ckpt.master_timer_queue_offset, 0)

    def _reset_from(self, snap: _Snapshot) -> None:
        self.curr_queue_offset = snap.enqueued_offset
        self.curr_read_time_ms = snap.read_time_ms
        self._heap: list[TimerRequest] = []
        self._pending_offsets: list[int] = []  # a heap; offsets no longer pending are in _done
        self._done: set[int] = set()
        self._max_delivered_slot = -1
        self._in_slot = False
        self._snapshots: deque[_Snapshot] = deque([snap])  # not yet forced, oldest first
        self._latest = snap

    def format_time_ms(self, time_ms: int) -> int:
        return time_ms // self.precision_ms * self.precision_ms

    def _timer_queue(self):
        return self.message_store.consume_queue_table.get((TIMER_TOPIC, 0))

    def get_message_by_commit_offset(self, offset_py: int, size_py: int) -> MessageExt | None:
        data = self.message_store.commit_log.get_message(offset_py, size_py)
        if len(data) != size_py:
            return None
        try:
            return decode(data, check_crc=False)
        except (ValueError, IndexError):
            return None

    # -- load / recover ---------------------------------------------------------------------------
    def load(self) -> bool:
        """``load`` + ``recover``: rebuild the schedule from the checkpoint (module docstring)."""
        self.recover(self._checkpoint_snapshot())
        return True

    def recover(self, snap: _Snapshot) -> None:
        cq = self._timer_queue()
        low = cq.get_min_offset_in_queue() if cq else 0
        high = cq.get_max_offset_in_queue() if cq else 0
        commit = min(max(snap.commit_offset, low), high)
        enqueued = min(max(snap.enqueued_offset, commit), high)
        if (commit, enqueued) != (snap.commit_offset, snap.enqueued_offset):
            log.warning("Timer checkpoint queue offsets %d..%d corrected to %d..%d (queue %d..%d)",
                        snap.commit_offset, snap.enqueued_offset, commit, enqueued, low, high)
        self._reset_from(_Snapshot(snap.read_time_ms, commit, enqueued, snap.required_phy_offset))
        offset, skipped = commit, 0
        while cq is not None and offset < enqueued:
            units = cq.get_units(offset, min(1024, enqueued - offset))
            if not units:
                break
            for offset_py, size_py, _tags in units:
                msg = self.get_message_by_commit_offset(offset_py, size_py)
                delay_time = self._delay_time(msg)
                if delay_time is not None and delay_time >= snap.read_time_ms:
                    self._schedule(TimerRequest(delay_time, offset, offset_py, size_py,
                                                self.format_time_ms(msg.store_timestamp), self._magic(msg)))
                else:
                    skipped += 1
                offset += 1
        self.curr_queue_offset = enqueued
        log.info("Timer recover ok currReadTimeMs:%d currQueueOffset:%d commitQueueOffset:%d pending:%d skipped:%d",
                 self.curr_read_time_ms, enqueued, commit, len(self._heap), skipped)

    @staticmethod
    def _delay_time(msg: MessageExt | None) -> int | None:
        if msg is None:
            return None
        try:
            return java_parse_int(msg.properties.get(TIMER_OUT_MS) or "", 64)
        except ValueError:
            log.error("Timer message without a valid %s: %s", TIMER_OUT_MS, msg.properties)
            return None

    @staticmethod
    def _magic(msg: MessageExt) -> int:
        return MAGIC_DEFAULT | (MAGIC_DELETE if msg.properties.get(TIMER_DELETE_UNIQUE_KEY) is not None else 0)

    def _schedule(self, req: TimerRequest) -> None:
        heapq.heappush(self._heap, req)
        heapq.heappush(self._pending_offsets, req.queue_offset)

    def _finished(self, req: TimerRequest) -> None:
        self._done.add(req.queue_offset)
        while self._pending_offsets and self._pending_offsets[0] in self._done:
            self._done.discard(heapq.heappop(self._pending_offsets))

    # -- lifecycle --------------------------------------------------------------------------------
    def start(self, should_running_dequeue: bool = False) -> None:
        self.state = self.RUNNING
        self.should_running_dequeue = should_running_dequeue
        log.info("Timer start ok currReadTimerMs:[%d] queueOffset:[%d]", self.curr_read_time_ms,
                 self.curr_queue_offset)

    def set_should_running_dequeue(self, should_running_dequeue: bool) -> int | None:
        """Master or not. Becoming master rebuilds the schedule from the newest snapshot (what the
        checkpoint page holds) and returns the generation the caller's ``run`` loop must carry;
        stopping ends the running loop at its next slot boundary."""
        if should_running_dequeue == self.should_running_dequeue:
            return None
        self.should_running_dequeue = should_running_dequeue
        self._generation += 1
        if should_running_dequeue:
            self._stopping = False
            self.recover(self._latest)
            return self._generation
        return None

    def sync_last_read_time_ms(self) -> None:
        """``syncLastReadTimeMs``: while this broker does not dequeue, the checkpoint's
        lastReadTimeMs is where its next dequeue starts. RocketMQ re-reads it on every idle turn of
        the dequeue loop; rmqlab when told the checkpoint changed under it (pre-online took a
        member's, whose slots before that time were delivered there while it acted as master). It
        becomes the newest snapshot's R, already in the checkpoint, so no flush rewrites it."""
        if self.should_running_dequeue:
            return
        read_time, latest = self.timer_checkpoint.last_read_time_ms, self._latest
        if read_time == latest.read_time_ms:
            return
        snap = _Snapshot(read_time, latest.commit_offset, latest.enqueued_offset, latest.required_phy_offset)
        self._snapshots.append(snap)
        self.curr_read_time_ms = read_time
        self._latest = self._last_written = self._last_flushed = snap

    def is_running_dequeue(self, generation: int) -> bool:
        return (self.state == self.RUNNING and self.should_running_dequeue and generation == self._generation
                and self.message_store.running)

    async def run(self, generation: int, sleep: Callable[[float], Awaitable[None]]) -> None:
        """The enqueue and dequeue services as one loop on the node: read new units, deliver the
        due slots, wait ``100 * precision / 1000`` ms."""
        idle_ms = 100 * self.precision_ms / 1000
        while self.is_running_dequeue(generation) and not self._stopping:
            try:
                self.enqueue()
                await self.dequeue(generation, sleep)
            except Exception:
                log.exception("Timer: error in the enqueue/dequeue loop")
            self.commit()
            await sleep(idle_ms)

    # -- enqueue ----------------------------------------------------------------------------------
    def enqueue(self) -> bool:
        """``enqueue(0)``: schedule the units written since the last call."""
        cq = self._timer_queue()
        if cq is None:
            return False
        if self.curr_queue_offset < cq.get_min_offset_in_queue():
            log.warning("Timer currQueueOffset:%d is smaller than minOffsetInQueue:%d", self.curr_queue_offset,
                        cq.get_min_offset_in_queue())
            self.curr_queue_offset = cq.get_min_offset_in_queue()
        count = 0
        while True:
            units = cq.get_units(self.curr_queue_offset, 1024)
            if not units:
                break
            for offset_py, size_py, _tags in units:
                offset = self.curr_queue_offset
                self.curr_queue_offset += 1
                count += 1
                msg = self.get_message_by_commit_offset(offset_py, size_py)
                delay_time = self._delay_time(msg)
                if delay_time is None:
                    continue  # enqueue_get_miss (or unparsable: skipped, as timerSkipUnknownError)
                write_time = self.format_time_ms(self.clock())  # maybeMoveWriteTime
                # putMessageToTimerWheel: already due -> straight to the put, "never enqueued".
                enqueue_time = LONG_MAX_VALUE if delay_time < write_time else write_time
                self._schedule(TimerRequest(delay_time, offset, offset_py, size_py, enqueue_time, self._magic(msg)))
        return count > 0

    # -- dequeue ----------------------------------------------------------------------------------
    async def dequeue(self, generation: int, sleep: Callable[[float], Awaitable[None]]) -> None:
        """Deliver every slot before the current write time, one slot at a time."""
        while self._heap and self.is_running_dequeue(generation) and not self._stopping:
            write_time = self.format_time_ms(self.clock())
            slot = self._heap[0].delay_time
            if slot >= write_time:
                self.curr_read_time_ms = max(self.curr_read_time_ms, write_time)
                break
            batch = []
            while self._heap and self._heap[0].delay_time == slot:
                batch.append(heapq.heappop(self._heap))
            self._in_slot = True
            try:
                rest = await self._dequeue_slot(slot, batch, generation, sleep)
            finally:
                self._in_slot = False
            self._max_delivered_slot = max(self._max_delivered_slot, slot)
            if rest:  # stopped in the middle: the rest stays scheduled (and no snapshot is exact)
                for req in rest:
                    heapq.heappush(self._heap, req)
                return
            self.curr_read_time_ms = max(self.curr_read_time_ms, slot + self.precision_ms)
            self.commit()
        if not self._heap:
            self.curr_read_time_ms = max(self.curr_read_time_ms, self.format_time_ms(self.clock()))

    async def _dequeue_slot(self, slot: int, batch: list[TimerRequest], generation: int,
                            sleep: Callable[[float], Awaitable[None]]) -> list[TimerRequest]:
        """One slot: delete markers first, then the messages in enqueue order. Returns what was
        not processed because the dequeue stopped."""
        delete_keys: set[str] = set()
        normal = []
        for req in batch:
            in_wheel = req.enqueue_time != LONG_MAX_VALUE
            if req.magic & MAGIC_DELETE and in_wheel:
                msg = self.get_message_by_commit_offset(req.offset_py, req.size_py)
                key = msg.properties.get(TIMER_DELETE_UNIQUE_KEY) if msg is not None else None
                if key is not None:
                    delete_keys.add(key)
                self._finished(req)
            else:
                normal.append(req)
        for i, req in enumerate(normal):
            if not self.is_running_dequeue(generation):
                return normal[i:]
            msg = self.get_message_by_commit_offset(req.offset_py, req.size_py)
            if msg is None:
                self._finished(req)  # dequeue_get_msg_miss
                continue
            unique_key = msg.properties.get(MessageConst.PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX)
            if (unique_key is not None and req.enqueue_time != LONG_MAX_VALUE
                    and build_delete_key(msg.properties.get(MessageConst.PROPERTY_REAL_TOPIC), unique_key) in delete_keys):
                self._finished(req)  # dequeue_delete
                continue
            if req.enqueue_time == LONG_MAX_VALUE:
                msg.properties[TIMER_ENQUEUE_MS] = str(LONG_MAX_VALUE)
            if not await self._put_with_retries(msg, req, generation, sleep):
                return normal[i:]
            self._finished(req)
        return []

    async def _put_with_retries(self, msg: MessageExt, req: TimerRequest, generation: int,
                                sleep: Callable[[float], Awaitable[None]]) -> bool:
        """TimerDequeuePutMessageService's loop. False: the dequeue stopped before it was done."""
        inner = self.convert(msg, req.enqueue_time, False)
        retry_count = 0
        while True:
            if not self.is_running_dequeue(generation):
                return False
            result = await self.do_put(inner, False)
            if result == PUT_OK:
                return True
            if result == PUT_NO_RETRY:
                log.warning("Skipping message due to unrecoverable error. Msg: %s", inner)
                return True
            retry_count += 1
            if not self.store_config.timerEnableRetryUntilSuccess and retry_count >= 3:
                log.error("Message processing failed after %d retries. Msg: %s", retry_count, inner)
                return True
            await sleep(500 * self.precision_ms / 1000)

    def convert(self, msg_ext: MessageExt, enqueue_time: int, need_roll: bool) -> MessageExtBrokerInner:
        """``convert``: the timer properties, then ``convertMessage``."""
        if enqueue_time != -1:
            msg_ext.properties[TIMER_ENQUEUE_MS] = str(enqueue_time)
        msg_ext.properties[TIMER_DEQUEUE_MS] = str(self.clock())
        return convert_message(msg_ext, need_roll)

    async def do_put(self, message: MessageExtBrokerInner, roll: bool) -> int:
        """``doPut``: 0 done, 1 retry, 2 do not retry."""
        if not roll and message.properties.get(TIMER_DELETE_UNIQUE_KEY) is not None:
            log.warning("Trying do put delete timer msg:[%s] roll:[%s]", message, roll)
            return PUT_NO_RETRY
        result = await self.put_message(message)
        if result is None or result.put_message_status is None:
            return PUT_NEED_RETRY
        status = result.put_message_status
        if status is PutMessageStatus.PUT_OK:
            return PUT_OK
        if status in _NO_RETRY:
            return PUT_NO_RETRY
        return PUT_NEED_RETRY  # the retryable ones, and UNKNOWN_ERROR without timerSkipUnknownError

    # -- checkpoint -------------------------------------------------------------------------------
    def commit(self) -> None:
        """Take a snapshot if it is exact now (module docstring)."""
        if not self.should_running_dequeue or self._in_slot:
            return
        if self._heap and self._heap[0].delay_time <= self._max_delivered_slot:
            return  # a slot is partly delivered
        read_time = self._heap[0].delay_time if self._heap else max(self.curr_read_time_ms, self._latest.read_time_ms)
        commit_offset = self._pending_offsets[0] if self._pending_offsets else self.curr_queue_offset
        latest = self._latest
        if (read_time, commit_offset, self.curr_queue_offset) == \
                (latest.read_time_ms, latest.commit_offset, latest.enqueued_offset):
            return
        snap = _Snapshot(read_time, commit_offset, self.curr_queue_offset, self.message_store.get_max_phy_offset())
        self._snapshots.append(snap)
        self._latest = snap

    def _store(self, snap: _Snapshot, new_version: bool) -> None:
        """``prepareTimerCheckPoint``: the snapshot into the checkpoint's fields; the data version
        advances once per new snapshot (``updateDateVersion``)."""
        ckpt = self.timer_checkpoint
        ckpt.last_read_time_ms = snap.read_time_ms
        ckpt.last_timer_log_flush_pos = 0
        ckpt.last_timer_queue_offset = snap.commit_offset
        ckpt.master_timer_queue_offset = snap.enqueued_offset
        if new_version:
            ckpt.data_version.next_version(self.clock(), self.state_machine_version())

    def flush(self, flushed_phy_offset: int | None = None) -> None:
        """``TimerFlushService`` step (every ``timerFlushIntervalMs``): force the newest snapshot
        whose deliveries are flushed in the commit log, then write the newest one unforced."""
        if flushed_phy_offset is None:
            flushed_phy_offset = self.message_store.commit_log.flushed_where()
        durable = None
        while self._snapshots and self._snapshots[0].required_phy_offset <= flushed_phy_offset:
            durable = self._snapshots.popleft()
        forced = False
        if durable is not None and durable != self._last_flushed:
            self._store(durable, new_version=durable != self._last_written)
            self.timer_checkpoint.flush()
            self._last_flushed, forced = durable, True
        if self._latest != durable and (forced or self._latest != self._last_written):
            # the newest snapshot back into the page (unforced: a process crash keeps it)
            self._store(self._latest, new_version=self._latest != self._last_written)
            self.timer_checkpoint.write()
        self._last_written = self._latest

    async def stop_dequeue(self, sleep: Callable[[float], Awaitable[None]], wait_ms: float = 10_000) -> None:
        """First step of a clean shutdown: let the slot being delivered finish (up to ``wait_ms``),
        take the final snapshot, end the dequeue."""
        if not self.should_running_dequeue:
            return
        self._stopping = True
        waited = 0.0
        while self._in_slot and waited < wait_ms:
            await sleep(10)
            waited += 10
        self.commit()
        self.should_running_dequeue = False
        self._generation += 1

    def shutdown(self) -> None:
        """Clean shutdown, right before the message store's (which flushes the whole commit log,
        so every snapshot counts as flushed): write and force the newest snapshot."""
        if self.state == self.SHUTDOWN:
            return
        self.flush(flushed_phy_offset=1 << 62)
        self.state = self.SHUTDOWN
        self.timer_checkpoint.close()

    def kill(self) -> None:
        """Process crash: nothing more is written (the page keeps what was written)."""
        self.state = self.SHUTDOWN
        self._generation += 1
        self.timer_checkpoint.close()

    # -- introspection ----------------------------------------------------------------------------
    def pending(self) -> int:
        return len(self._heap)

    def get_dequeue_behind_messages(self) -> int:
        return len(self._heap)


def convert_message(msg_ext: MessageExt, need_roll: bool) -> MessageExtBrokerInner:
    """``convertMessage`` (see the quirk in the module docstring)."""
    from rmqlab.common.message.message_decoder import properties_to_java_string

    props = dict(msg_ext.properties)
    inner = MessageExtBrokerInner(topic=msg_ext.topic, body=msg_ext.body, flag=msg_ext.flag)
    inner.properties = props
    inner.properties_string = properties_to_java_string(msg_ext.properties)
    inner.sys_flag = msg_ext.sys_flag
    inner.born_timestamp = msg_ext.born_timestamp
    inner.born_host = msg_ext.born_host
    inner.store_host = msg_ext.store_host
    inner.reconsume_times = msg_ext.reconsume_times
    props[MessageConst.PROPERTY_WAIT_STORE_MSG_OK] = "false"
    if need_roll:
        inner.queue_id = msg_ext.queue_id
    else:
        inner.topic = props.get(MessageConst.PROPERTY_REAL_TOPIC)
        inner.queue_id = java_parse_int(props.get(MessageConst.PROPERTY_REAL_QUEUE_ID) or "")
        props.pop(MessageConst.PROPERTY_REAL_TOPIC, None)
        props.pop(MessageConst.PROPERTY_REAL_QUEUE_ID, None)
    return inner
