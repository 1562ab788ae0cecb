"""DLedgerEntryPusher (io.openmessaging.storage.dledger.DLedgerEntryPusher, 0.3.1.2), and AppendFuture.

On the leader, one EntryDispatcher per follower pushes the log (COMPARE -> TRUNCATE -> APPEND,
with COMMIT when idle) and a QuorumAckChecker turns the followers' acknowledged indexes (the
watermarks, kept per term) into the commit index and completes the AppendFutures waiting on it;
on a follower, the EntryHandler applies what the leader pushes, in index order. The decisions are
in protocol/dledger_protocol_core (decide_compare, quorum_index; its docstring explains the
protocol).

Timing. DLedger's three kinds of threads poll every 1 ms. Here each runs when woken (an append,
an acknowledgement, a role change, a push arriving) or at its next deadline: the dispatcher's
COMMIT when nothing was pushed for 1000 ms, its re-push of watermark+1 after maxPushTimeOutMs;
the checker's next AppendFuture timeout (maxWaitAckTimeMs after its creation) and its 1 s leak
check while futures are pending; the follower's 1 s check of parked APPENDs while some are
parked. "Elapsed > N" deadlines fire at N + 1 ms, where DLedger sees them at its next 1 ms poll.
Deviation: the quota throttle of a follower more than 1000 entries and 300 MiB behind
(checkQuotaAndWait) is not modelled.

Like DLedger's, a deposed leader's pending futures stay pending: the checker only works on a
leader (they complete with TERM_CHANGED if the member leads again).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable
from typing import TYPE_CHECKING, Protocol

from rmqlab.dledger.entry.dledger_entry import DLedgerEntry
from rmqlab.dledger.member_state import MemberState, Role
from rmqlab.dledger.protocol.dledger_protocol_bodies import (AppendEntryResponse, PushEntryRequest, PushEntryResponse,
                                                             PushEntryType)
from rmqlab.dledger.protocol.dledger_protocol_core import decide_compare, quorum_index, revise_compare_index
from rmqlab.dledger.protocol.dledger_response_code import DLedgerException, DLedgerResponseCode, check
from rmqlab.dledger.shutdown_able_task import ShutdownAbleTask, node_loop

if TYPE_CHECKING:
    from rmqlab.dledger.dledger_config import DLedgerConfig
    from rmqlab.dledger.store.dledger_store import DLedgerStore
    from rmqlab.runtime.node import Node

APPEND, COMMIT, COMPARE, TRUNCATE = (PushEntryType.APPEND, PushEntryType.COMMIT, PushEntryType.COMPARE,
                                     PushEntryType.TRUNCATE)
# EntryDispatcher.maxPendingSize: unacknowledged APPENDs per follower.
MAX_PENDING_SIZE = 1000
# The follower's TimeoutFuture for a push, and the compare/truncate queue (ArrayBlockingQueue(1024)).
PUSH_FUTURE_TIMEOUT_MS = 1000
COMPARE_OR_TRUNCATE_QUEUE_SIZE = 1024
# doCompare / doTruncate wait for the follower's answer: responseFuture.get(3, SECONDS).
COMPARE_WAIT_MS = 3000


class PusherRpc(Protocol):
    def push(self, request: PushEntryRequest) -> Awaitable[PushEntryResponse]: ...


class TimeoutFuture(asyncio.Future):
    """TimeoutFuture: a future that knows when it was created and when it counts as timed out."""

    def __init__(self, node: Node, timeout_ms: float = 1000):
        super().__init__(loop=node_loop(node))
        self.create_time_ms = int(node.now_ms())
        self.time_out_ms = timeout_ms

    def is_time_out(self, now_ms: float) -> bool:
        return now_ms - self.create_time_ms >= self.time_out_ms

    def complete(self, value) -> bool:
        """CompletableFuture.complete: false when already done."""
        if self.done():
            return False
        self.set_result(value)
        return True


class AppendFuture(TimeoutFuture):
    """AppendFuture: the answer to one append, with the entry's position (-1 when it failed)."""

    def __init__(self, node: Node, timeout_ms: float = 1000, pos: int = -1):
        super().__init__(node, timeout_ms)
        self.pos = pos

    @classmethod
    def new_completed_future(cls, node: Node, pos: int, value) -> AppendFuture:
        future = cls(node, pos=pos)
        future.set_result(value)
        return future


async def get_with_timeout(node: Node, awaitable: Awaitable, timeout_ms: float):
    """Future.get(timeout) on the node's clock: TimeoutError when it does not answer in time."""
    task = asyncio.ensure_future(awaitable)
    done = asyncio.get_running_loop().create_future()
    timer = node.call_later(timeout_ms, lambda: done.done() or done.set_result(None))
    task.add_done_callback(lambda _t: done.done() or done.set_result(None))
    try:
        await done
    finally:
        timer.cancel()
    if not task.done():
        task.cancel()
        raise TimeoutError(f"no answer within {timeout_ms:.0f} ms")
    return task.result()


class DLedgerEntryPusher:
    def __init__(self, config: DLedgerConfig, member_state: MemberState, store: DLedgerStore, rpc: PusherRpc,
                 node: Node):
        self.dledger_config = config
        self.member_state = member_state
        self.dledger_store = store
        self.rpc = rpc
        self.node = node
        self.peer_water_marks_by_term: dict[int, dict[str, int]] = {}
        self.pending_append_responses_by_term: dict[int, dict[int, AppendFuture]] = {}
        self.entry_handler = EntryHandler(self)
        self.quorum_ack_checker = QuorumAckChecker(self)
        self.dispatcher_map = {peer: EntryDispatcher(self, peer) for peer in member_state.peer_map
                               if peer != member_state.self_id}

    def now(self) -> int:
        return int(self.node.now_ms())

    def startup(self) -> None:
        self.entry_handler.start()
        self.quorum_ack_checker.start()
        for dispatcher in self.dispatcher_map.values():
            dispatcher.start()

    def shutdown(self) -> None:
        self.entry_handler.shutdown()
        self.quorum_ack_checker.shutdown()
        for dispatcher in self.dispatcher_map.values():
            dispatcher.shutdown()

    def on_role_change(self, term: int, role: Role) -> None:
        """DLedger's threads notice a role change by polling; here they are woken."""
        self.entry_handler.wakeup()
        self.quorum_ack_checker.wakeup()
        self.wake_up_dispatchers()

    def handle_push(self, request: PushEntryRequest) -> asyncio.Future:
        return self.entry_handler.handle_push(request)

    # -- watermarks and pending futures -------------------------------------------------------------------
    def check_term_for_water_mark(self, term: int) -> None:
        if term not in self.peer_water_marks_by_term:
            self.peer_water_marks_by_term[term] = {peer: -1 for peer in self.member_state.peer_map}

    def check_term_for_pending_map(self, term: int) -> None:
        self.pending_append_responses_by_term.setdefault(term, {})

    def update_peer_water_mark(self, term: int, peer_id: str, index: int) -> None:
        self.check_term_for_water_mark(term)
        marks = self.peer_water_marks_by_term[term]
        if marks[peer_id] < index:
            marks[peer_id] = index

    def get_peer_water_mark(self, term: int, peer_id: str) -> int:
        self.check_term_for_water_mark(term)
        return self.peer_water_marks_by_term[term][peer_id]

    def is_pending_full(self, curr_term: int) -> bool:
        self.check_term_for_pending_map(curr_term)
        return len(self.pending_append_responses_by_term[curr_term]) > self.dledger_config.max_pending_requests_num

    def wait_ack(self, entry: DLedgerEntry) -> AppendFuture:
        """Park the leader's append until a quorum holds it (or maxWaitAckTimeMs passes)."""
        self.update_peer_water_mark(entry.term, self.member_state.self_id, entry.index)
        self.check_term_for_pending_map(entry.term)
        future = AppendFuture(self.node, self.dledger_config.max_wait_ack_time_ms, entry.pos)
        old = self.pending_append_responses_by_term[entry.term].get(entry.index)
        self.pending_append_responses_by_term[entry.term][entry.index] = future
        if old is not None:
            self.node.log.warning("[MONITOR] get old wait at index=%d", entry.index)
        # DLedger's checker and dispatchers poll every 1 ms; here the append wakes them.
        self.quorum_ack_checker.wakeup()
        self.wake_up_dispatchers()
        return future

    def wake_up_dispatchers(self) -> None:
        for dispatcher in self.dispatcher_map.values():
            dispatcher.wakeup()

    def _ack_response(self, term: int, index: int, pos: int) -> AppendEntryResponse:
        ms = self.member_state
        return AppendEntryResponse(group=ms.group, term=term, index=index, leader_id=ms.self_id, pos=pos)

    def check_response_futures_timeout(self, begin_index: int) -> None:
        """From begin_index up, complete the consecutive timed-out futures with WAIT_QUORUM_ACK_TIMEOUT."""
        term = self.member_state.curr_term
        responses = self.pending_append_responses_by_term.get(term)
        if responses is None:
            return
        now = self.now()
        i = begin_index
        while True:
            future = responses.get(i)
            if future is None or not future.is_time_out(now):
                break
            future.complete(AppendEntryResponse(group=self.member_state.group,
                                                code=DLedgerResponseCode.WAIT_QUORUM_ACK_TIMEOUT, term=term, index=i,
                                                leader_id=self.member_state.self_id))
            i += 1

    def check_response_futures_elapsed(self, end_index: int) -> None:
        term = self.member_state.curr_term
        responses = self.pending_append_responses_by_term[term]
        for index in list(responses):
            if index <= end_index:
                future = responses.pop(index)
                future.complete(self._ack_response(term, index, future.pos))

    def update_committed_index(self, term: int, committed_index: int) -> None:
        self.dledger_store.update_committed_index(term, committed_index)


class QuorumAckChecker(ShutdownAbleTask):
    """On the leader: the commit index is the watermark a quorum reached; complete the futures up to it."""

    def __init__(self, pusher: DLedgerEntryPusher):
        super().__init__("QuorumAckChecker-" + pusher.member_state.self_id, pusher.node)
        self.pusher = pusher
        self.last_check_leak_time_ms = pusher.now()
        self.last_quorum_index = -1
        self._traced_commit: tuple[int, int] | None = None

    async def do_work(self) -> float | None:
        try:
            while True:
                ack_num = self.one_pass()
                if ack_num is None:  # not the leader
                    return None
                if ack_num == 0:
                    return self.next_deadline_ms()
                await asyncio.sleep(0)  # as DLedger: loop again at once after progress
        except asyncio.CancelledError:
            raise
        except Exception:
            self.log.exception("Error in %s", self.name)
            return 100.0

    def next_deadline_ms(self) -> float | None:
        p = self.pusher
        responses = p.pending_append_responses_by_term.get(p.member_state.curr_term)
        if not responses:
            return None
        now = p.now()
        deadlines = [self.last_check_leak_time_ms + 1001 - now]
        # The next future the timeout check would reach: those it completed stay in the map, as in DLedger.
        index = self.last_quorum_index + 1
        while index in responses and responses[index].done():
            index += 1
        head = responses.get(index)
        if head is not None:
            deadlines.append(head.create_time_ms + head.time_out_ms - now)
        return max(0.0, min(deadlines))

    def one_pass(self) -> int | None:
        """One doWork pass; the number of futures it acknowledged (None when not the leader)."""
        p = self.pusher
        ms = p.member_state
        if not ms.is_leader():
            return None
        curr_term = ms.curr_term
        p.check_term_for_pending_map(curr_term)
        p.check_term_for_water_mark(curr_term)
        for term in [t for t in p.pending_append_responses_by_term if t != curr_term]:
            for index, future in p.pending_append_responses_by_term.pop(term).items():
                self.log.info("[TermChange] Will clear the pending response index=%d for term changed from %d to %d",
                              index, term, curr_term)
                future.complete(AppendEntryResponse(group=ms.group, index=index,
                                                    code=DLedgerResponseCode.TERM_CHANGED, leader_id=ms.leader_id))
        for term in [t for t in p.peer_water_marks_by_term if t != curr_term]:
            del p.peer_water_marks_by_term[term]

        quorum = quorum_index(p.peer_water_marks_by_term[curr_term])
        p.update_committed_index(curr_term, quorum)
        responses = p.pending_append_responses_by_term[curr_term]
        need_check = False
        ack_num = 0
        i = quorum
        while i > self.last_quorum_index:
            future = responses.pop(i, None)
            if future is None:
                need_check = True
                break
            if not future.done():
                future.complete(p._ack_response(curr_term, i, future.pos))
            ack_num += 1
            i -= 1
        if ack_num == 0:
            p.check_response_futures_timeout(quorum + 1)
        if p.now() - self.last_check_leak_time_ms > 1000 or need_check:
            p.update_peer_water_mark(curr_term, ms.self_id, p.dledger_store.get_ledger_end_index())
            p.check_response_futures_elapsed(quorum)
            self.last_check_leak_time_ms = p.now()
        self._trace_commit(curr_term, quorum, ack_num)
        self.last_quorum_index = quorum
        return ack_num

    def _trace_commit(self, term: int, quorum: int, ack_num: int) -> None:
        """A dledger.commit event per pass that advanced the commit index of the term."""
        previous = self._traced_commit
        if quorum < 0 or (previous is not None and previous[0] == term and previous[1] >= quorum):
            return
        self._traced_commit = (term, quorum)
        ms = self.pusher.member_state
        self.node.trace("dledger.commit", group=ms.group, self_id=ms.self_id, term=term, commit_index=quorum,
                        previous=previous[1] if previous is not None and previous[0] == term else -1, acked=ack_num,
                        ledger_end_index=self.pusher.dledger_store.get_ledger_end_index())


class EntryDispatcher(ShutdownAbleTask):
    """On the leader, for one follower: COMPARE -> TRUNCATE -> APPEND (-> COMMIT when idle)."""

    def __init__(self, pusher: DLedgerEntryPusher, peer_id: str):
        super().__init__(f"EntryDispatcher-{pusher.member_state.self_id}-{peer_id}", pusher.node)
        self.pusher = pusher
        self.peer_id = peer_id
        self.type = COMPARE
        self.last_push_commit_time_ms = -1
        self.compare_index = -1
        self.write_index = -1
        self.max_pending_size = MAX_PENDING_SIZE
        self.term = -1
        self.leader_id: str | None = None
        self.last_check_leak_time_ms = pusher.now()
        self.pending_map: dict[int, int] = {}
        self.batch_pending_map: dict[int, tuple[int, int]] = {}
        self.batch_append_entry_request = PushEntryRequest()

    @property
    def store(self) -> DLedgerStore:
        return self.pusher.dledger_store

    def check_and_fresh_state(self) -> bool:
        ms = self.pusher.member_state
        if not ms.is_leader():
            return False
        if self.term != ms.curr_term or self.leader_id is None or self.leader_id != ms.leader_id:
            check(ms.self_id == ms.leader_id, DLedgerResponseCode.UNKNOWN, "leader is not self")
            self.term = ms.curr_term
            self.leader_id = ms.self_id
            self.change_state(-1, COMPARE)
        return True

    def build_push_request(self, entry: DLedgerEntry | None, target: PushEntryType) -> PushEntryRequest:
        ms = self.pusher.member_state
        return PushEntryRequest(group=ms.group, remote_id=self.peer_id, leader_id=self.leader_id, local_id=ms.self_id,
                                term=self.term, entry=entry, type=target,
                                commit_index=self.store.get_committed_index())

    def reset_batch_append_entry_request(self) -> None:
        ms = self.pusher.member_state
        r = self.batch_append_entry_request
        r.group, r.remote_id, r.leader_id, r.local_id = ms.group, self.peer_id, self.leader_id, ms.self_id
        r.term, r.type = self.term, APPEND
        r.clear()

    def change_state(self, index: int, target: PushEntryType) -> None:
        self.log.info("[Push-%s]Change state from %s to %s at %d", self.peer_id, self.type.name, target.name, index)
        if target is APPEND:
            self.compare_index = -1
            self.pusher.update_peer_water_mark(self.term, self.peer_id, index)
            self.pusher.quorum_ack_checker.wakeup()
            self.write_index = index + 1
            if self.pusher.dledger_config.is_enable_batch_push:
                self.reset_batch_append_entry_request()
        elif target is COMPARE:
            if self.type is APPEND:
                self.compare_index = -1
                if self.pusher.dledger_config.is_enable_batch_push:
                    self.batch_pending_map.clear()
                else:
                    self.pending_map.clear()
        elif target is TRUNCATE:
            self.compare_index = -1
        self.type = target
        self.wakeup()

    # -- APPEND ------------------------------------------------------------------------------------------
    def get_dledger_entry_for_append(self, index: int) -> DLedgerEntry | None:
        try:
            return self.store.get(index)
        except DLedgerException as e:
            if e.code is DLedgerResponseCode.INDEX_LESS_THAN_LOCAL_BEGIN:
                self.log.info("[Push-%s]Get INDEX_LESS_THAN_LOCAL_BEGIN when requested index is %d, try to compare",
                              self.peer_id, index)
                self.change_state(-1, COMPARE)
                return None
            raise

    def do_append_inner(self, index: int) -> None:
        entry = self.get_dledger_entry_for_append(index)
        if entry is None:
            return
        request = self.build_push_request(entry, APPEND)
        self.pending_map[index] = self.pusher.now()
        self.node.spawn(self._append_response(request), name=f"dledger-push {self.peer_id}")
        self.last_push_commit_time_ms = self.pusher.now()

    async def _append_response(self, request: PushEntryRequest) -> None:
        response = await self.pusher.rpc.push(request)
        code = DLedgerResponseCode.value_of(response.code)
        if code is DLedgerResponseCode.SUCCESS:
            self.pending_map.pop(response.index, None)
            self.pusher.update_peer_water_mark(response.term, self.peer_id, response.index)
            self.pusher.quorum_ack_checker.wakeup()
        elif code is DLedgerResponseCode.INCONSISTENT_STATE:
            self.log.info("[Push-%s]Get INCONSISTENT_STATE when push index=%s term=%d", self.peer_id, response.index,
                          response.term)
            self.change_state(-1, COMPARE)
        else:
            self.log.warning("[Push-%s]Get error response code %s %s", self.peer_id, code.name, response.base_info())

    def do_commit(self) -> None:
        if self.pusher.now() - self.last_push_commit_time_ms > 1000:
            request = self.build_push_request(None, COMMIT)
            self.node.spawn(self.pusher.rpc.push(request), name=f"dledger-commit {self.peer_id}")  # result ignored
            self.last_push_commit_time_ms = self.pusher.now()

    def do_check_append_response(self) -> None:
        peer_water_mark = self.pusher.get_peer_water_mark(self.term, self.peer_id)
        send_time_ms = self.pending_map.get(peer_water_mark + 1)
        if send_time_ms is not None and self.pusher.now() - send_time_ms > self.pusher.dledger_config.max_push_time_out_ms:
            self.log.warning("[Push-%s]Retry to push entry at %d", self.peer_id, peer_water_mark + 1)
            self.do_append_inner(peer_water_mark + 1)

    def do_append(self) -> None:
        while True:
            if not self.check_and_fresh_state() or self.type is not APPEND:
                break
            if self.write_index > self.store.get_ledger_end_index():
                self.do_commit()
                self.do_check_append_response()
                break
            if len(self.pending_map) >= self.max_pending_size or self.pusher.now() - self.last_check_leak_time_ms > 1000:
                peer_water_mark = self.pusher.get_peer_water_mark(self.term, self.peer_id)
                for index in [i for i in self.pending_map if i < peer_water_mark]:
                    del self.pending_map[index]
                self.last_check_leak_time_ms = self.pusher.now()
            if len(self.pending_map) >= self.max_pending_size:
                self.do_check_append_response()
                break
            self.do_append_inner(self.write_index)
            self.write_index += 1

    # -- batch APPEND ---------------------------------------------------------------------------------------
    def send_batch_append_entry_request(self) -> None:
        request = self.batch_append_entry_request
        request.commit_index = self.store.get_committed_index()
        # The request object is reused (cleared) by DLedger after sending: send a copy.
        sent = PushEntryRequest().copy_base_info(request)
        sent.type, sent.commit_index = APPEND, request.commit_index
        for entry in request.batch_entry:
            sent.add_entry(entry)
        self.batch_pending_map[sent.get_first_entry_index()] = (self.pusher.now(), sent.get_count())
        self.node.spawn(self._batch_append_response(sent), name=f"dledger-push {self.peer_id}")
        self.last_push_commit_time_ms = self.pusher.now()
        request.clear()

    async def _batch_append_response(self, request: PushEntryRequest) -> None:
        response = await self.pusher.rpc.push(request)
        code = DLedgerResponseCode.value_of(response.code)
        if code is DLedgerResponseCode.SUCCESS:
            self.batch_pending_map.pop(response.index, None)
            last = response.index if response.count == 0 else response.index + response.count - 1
            self.pusher.update_peer_water_mark(response.term, self.peer_id, last)
            self.pusher.quorum_ack_checker.wakeup()  # DLedger's batch path does not wake it: it polls
        elif code is DLedgerResponseCode.INCONSISTENT_STATE:
            self.log.info("[Push-%s]Get INCONSISTENT_STATE when batch push index=%s term=%d", self.peer_id,
                          response.index, response.term)
            self.change_state(-1, COMPARE)
        else:
            self.log.warning("[Push-%s]Get error response code %s %s", self.peer_id, code.name, response.base_info())

    def do_batch_append_inner(self, index: int) -> None:
        entry = self.get_dledger_entry_for_append(index)
        if entry is None:
            return
        self.batch_append_entry_request.add_entry(entry)
        if self.batch_append_entry_request.total_size >= self.pusher.dledger_config.max_batch_push_size:
            self.send_batch_append_entry_request()

    def do_check_batch_append_response(self) -> None:
        peer_water_mark = self.pusher.get_peer_water_mark(self.term, self.peer_id)
        pair = self.batch_pending_map.get(peer_water_mark + 1)
        if pair is not None and self.pusher.now() - pair[0] > self.pusher.dledger_config.max_push_time_out_ms:
            first, last = peer_water_mark + 1, peer_water_mark + pair[1]
            self.log.warning("[Push-%s]Retry to push entry from %d to %d", self.peer_id, first, last)
            self.batch_append_entry_request.clear()
            for i in range(first, last + 1):
                self.batch_append_entry_request.add_entry(self.store.get(i))
            self.send_batch_append_entry_request()

    def do_batch_append(self) -> None:
        while True:
            if not self.check_and_fresh_state() or self.type is not APPEND:
                break
            if self.write_index > self.store.get_ledger_end_index():
                if self.batch_append_entry_request.get_count() > 0:
                    self.send_batch_append_entry_request()
                self.do_commit()
                self.do_check_batch_append_response()
                break
            if (len(self.batch_pending_map) >= self.max_pending_size
                    or self.pusher.now() - self.last_check_leak_time_ms > 1000):
                peer_water_mark = self.pusher.get_peer_water_mark(self.term, self.peer_id)
                for first, (_, count) in list(self.batch_pending_map.items()):
                    if first + count - 1 <= peer_water_mark:
                        del self.batch_pending_map[first]
                self.last_check_leak_time_ms = self.pusher.now()
            if len(self.batch_pending_map) >= self.max_pending_size:
                self.do_check_batch_append_response()
                break
            self.do_batch_append_inner(self.write_index)
            self.write_index += 1

    # -- COMPARE / TRUNCATE -----------------------------------------------------------------------------------
    async def do_truncate(self, truncate_index: int) -> None:
        check(self.type is TRUNCATE, DLedgerResponseCode.UNKNOWN, "not in TRUNCATE")
        truncate_entry = self.store.get(truncate_index)
        self.log.info("[Push-%s]Will push data to truncate truncateIndex=%d pos=%d", self.peer_id, truncate_index,
                      truncate_entry.pos)
        request = self.build_push_request(truncate_entry, TRUNCATE)
        response = await get_with_timeout(self.node, self.pusher.rpc.push(request), COMPARE_WAIT_MS)
        check(response.code == DLedgerResponseCode.SUCCESS, DLedgerResponseCode.value_of(response.code),
              f"truncateIndex={truncate_index}")
        self.last_push_commit_time_ms = self.pusher.now()
        self.change_state(truncate_index, APPEND)

    async def do_compare(self) -> None:
        store = self.store
        while True:
            if not self.check_and_fresh_state():
                break
            if self.type is not COMPARE and self.type is not TRUNCATE:
                break
            if self.compare_index == -1 and store.get_ledger_end_index() == -1:
                break  # nothing to compare while the leader's log is empty
            self.compare_index = revise_compare_index(self.compare_index, store.get_ledger_begin_index(),
                                                      store.get_ledger_end_index())
            entry = store.get(self.compare_index)
            request = self.build_push_request(entry, COMPARE)
            response = await get_with_timeout(self.node, self.pusher.rpc.push(request), COMPARE_WAIT_MS)
            check(response.code in (DLedgerResponseCode.INCONSISTENT_STATE, DLedgerResponseCode.SUCCESS),
                  DLedgerResponseCode.value_of(response.code), f"compareIndex={self.compare_index}")
            decision = decide_compare(compare_index=self.compare_index, code=response.code,
                                      follower_begin=response.begin_index, follower_end=response.end_index,
                                      leader_begin=store.get_ledger_begin_index(),
                                      leader_end=store.get_ledger_end_index())
            if decision.next_type is APPEND:
                self.change_state(decision.index, APPEND)
                break
            if decision.next_type is TRUNCATE:
                self.change_state(decision.index, TRUNCATE)
                await self.do_truncate(decision.index)
                break
            self.compare_index = decision.index

    # -- the loop ---------------------------------------------------------------------------------------------
    async def do_work(self) -> float | None:
        try:
            if not self.check_and_fresh_state():
                return None
            if self.type is APPEND:
                if self.pusher.dledger_config.is_enable_batch_push:
                    self.do_batch_append()
                else:
                    self.do_append()
            else:
                await self.do_compare()
            return self.next_deadline_ms()
        except asyncio.CancelledError:
            raise
        except Exception as e:
            self.log.warning("[Push-%s]Error in %s writeIndex=%d compareIndex=%d: %r", self.peer_id, self.name,
                             self.write_index, self.compare_index, e)
            self.change_state(-1, COMPARE)
            await self.node.sleep(500)
            return 0.0

    def next_deadline_ms(self) -> float | None:
        """The next thing due: a COMMIT after 1000 ms idle, a re-push of watermark+1 after maxPushTimeOutMs."""
        if not self.pusher.member_state.is_leader():
            return None
        if self.type is not APPEND:
            return 0.0 if self.pusher.dledger_store.get_ledger_end_index() != -1 else None
        if self.write_index <= self.store.get_ledger_end_index() and len(self.pending_map) < self.max_pending_size:
            return 0.0
        now = self.pusher.now()
        deadlines = [self.last_push_commit_time_ms + 1001 - now]
        peer_water_mark = self.pusher.get_peer_water_mark(self.term, self.peer_id)
        pending = (self.batch_pending_map.get(peer_water_mark + 1, (None,))[0]
                   if self.pusher.dledger_config.is_enable_batch_push else self.pending_map.get(peer_water_mark + 1))
        if pending is not None:
            deadlines.append(pending + self.pusher.dledger_config.max_push_time_out_ms + 1 - now)
        return max(0.0, min(deadlines))


class EntryHandler(ShutdownAbleTask):
    """On a follower: applies pushed entries in index order; COMPARE/TRUNCATE/COMMIT through a queue."""

    def __init__(self, pusher: DLedgerEntryPusher):
        super().__init__("EntryHandler-" + pusher.member_state.self_id, pusher.node)
        self.pusher = pusher
        self.last_check_fast_forward_time_ms = pusher.now()
        self.write_request_map: dict[int, tuple[PushEntryRequest, TimeoutFuture]] = {}
        self.compare_or_truncate_requests: list[tuple[PushEntryRequest, TimeoutFuture]] = []

    @property
    def store(self) -> DLedgerStore:
        return self.pusher.dledger_store

    def handle_push(self, request: PushEntryRequest) -> TimeoutFuture:
        future = TimeoutFuture(self.node, PUSH_FUTURE_TIMEOUT_MS)
        if request.type is APPEND:
            if request.is_batch():
                check(request.get_count() > 0, DLedgerResponseCode.UNEXPECTED_ARGUMENT, "empty batch")
            else:
                check(request.entry is not None, DLedgerResponseCode.UNEXPECTED_ARGUMENT, "no entry")
            index = request.get_first_entry_index()
            old = self.write_request_map.get(index)
            if old is None:
                self.write_request_map[index] = (request, future)
            else:
                self.log.warning("[MONITOR]The index %d has already existed with %s and curr is %s", index,
                                 old[0].base_info(), request.base_info())
                future.complete(self.build_response(request, DLedgerResponseCode.REPEATED_PUSH))
        elif request.type is COMMIT:
            self._offer(request, future)
        else:  # COMPARE, TRUNCATE
            check(request.entry is not None, DLedgerResponseCode.UNEXPECTED_ARGUMENT, "no entry")
            self.write_request_map.clear()
            self._offer(request, future)
        self.wakeup()
        return future

    def _offer(self, request: PushEntryRequest, future: TimeoutFuture) -> None:
        if len(self.compare_or_truncate_requests) >= COMPARE_OR_TRUNCATE_QUEUE_SIZE:
            self.log.warning("compareOrTruncateRequests blockingQueue is full when put %s request", request.type.name)
            future.complete(self.build_response(request, DLedgerResponseCode.PUSH_REQUEST_IS_FULL))
        else:
            self.compare_or_truncate_requests.append((request, future))

    def build_response(self, request: PushEntryRequest, code: int) -> PushEntryResponse:
        response = PushEntryResponse(group=request.group, code=code, term=request.term)
        if request.type is not COMMIT:
            response.index = request.get_first_entry_index()
            response.count = request.get_count()
        response.begin_index = self.store.get_ledger_begin_index()
        response.end_index = self.store.get_ledger_end_index()
        return response

    def handle_do_append(self, write_index: int, request: PushEntryRequest, future: TimeoutFuture) -> None:
        try:
            check(write_index == request.entry.index, DLedgerResponseCode.INCONSISTENT_STATE, "index")
            entry = self.store.append_as_follower(request.entry, request.term, request.leader_id)
            check(entry.index == write_index, DLedgerResponseCode.INCONSISTENT_STATE, "index")
            future.complete(self.build_response(request, DLedgerResponseCode.SUCCESS))
            self.pusher.update_committed_index(request.term, request.commit_index)
        except Exception as e:
            self.log.warning("[HandleDoAppend] writeIndex=%d: %r", write_index, e)
            future.complete(self.build_response(request, DLedgerResponseCode.INCONSISTENT_STATE))

    def handle_do_compare(self, compare_index: int, request: PushEntryRequest, future: TimeoutFuture) -> None:
        try:
            check(compare_index == request.entry.index, DLedgerResponseCode.UNKNOWN, "index")
            local = self.store.get(compare_index)
            check(request.entry == local, DLedgerResponseCode.INCONSISTENT_STATE, "entries differ")
            future.complete(self.build_response(request, DLedgerResponseCode.SUCCESS))
        except Exception as e:
            self.log.info("[HandleDoCompare] compareIndex=%d: %r", compare_index, e)
            future.complete(self.build_response(request, DLedgerResponseCode.INCONSISTENT_STATE))

    def handle_do_commit(self, committed_index: int, request: PushEntryRequest, future: TimeoutFuture) -> None:
        try:
            self.pusher.update_committed_index(request.term, committed_index)
            future.complete(self.build_response(request, DLedgerResponseCode.SUCCESS))
        except Exception as e:
            self.log.warning("[HandleDoCommit] committedIndex=%d: %r", committed_index, e)
            future.complete(self.build_response(request, DLedgerResponseCode.UNKNOWN))

    def handle_do_truncate(self, truncate_index: int, request: PushEntryRequest, future: TimeoutFuture) -> None:
        try:
            self.log.info("[HandleDoTruncate] truncateIndex=%d pos=%d", truncate_index, request.entry.pos)
            check(truncate_index == request.entry.index, DLedgerResponseCode.UNKNOWN, "index")
            index = self.store.truncate(request.entry, request.term, request.leader_id)
            check(index == truncate_index, DLedgerResponseCode.INCONSISTENT_STATE, f"truncated at {index}")
            future.complete(self.build_response(request, DLedgerResponseCode.SUCCESS))
            self.pusher.update_committed_index(request.term, request.commit_index)
        except Exception as e:
            self.log.warning("[HandleDoTruncate] truncateIndex=%d: %r", truncate_index, e)
            future.complete(self.build_response(request, DLedgerResponseCode.INCONSISTENT_STATE))

    def handle_do_batch_append(self, write_index: int, request: PushEntryRequest, future: TimeoutFuture) -> None:
        try:
            check(write_index == request.get_first_entry_index(), DLedgerResponseCode.INCONSISTENT_STATE, "index")
            for entry in request.batch_entry:
                self.store.append_as_follower(entry, request.term, request.leader_id)
            future.complete(self.build_response(request, DLedgerResponseCode.SUCCESS))
            self.pusher.update_committed_index(request.term, request.commit_index)
        except Exception as e:
            self.log.warning("[HandleDoBatchAppend]: %r", e)
            future.complete(self.build_response(request, DLedgerResponseCode.INCONSISTENT_STATE))

    def check_append_future(self, end_index: int) -> None:
        """Parked APPENDs already in the log get SUCCESS (if equal); the oldest timed-out one behind a
        gap gets INCONSISTENT_STATE, which sends the leader back to COMPARE."""
        now = self.pusher.now()
        min_fast_forward_index: int | None = None
        for request, future in list(self.write_request_map.values()):
            first, last = request.get_first_entry_index(), request.get_last_entry_index()
            if last <= end_index:
                try:
                    entries = request.batch_entry if request.is_batch() else [request.entry]
                    for entry in entries:
                        check(entry == self.store.get(entry.index), DLedgerResponseCode.INCONSISTENT_STATE, "differs")
                    future.complete(self.build_response(request, DLedgerResponseCode.SUCCESS))
                except Exception:
                    future.complete(self.build_response(request, DLedgerResponseCode.INCONSISTENT_STATE))
                self.write_request_map.pop(first, None)
                continue
            if first == end_index + 1:
                return
            if not future.is_time_out(now):
                continue
            if min_fast_forward_index is None or first < min_fast_forward_index:
                min_fast_forward_index = first
        if min_fast_forward_index is None:
            return
        pair = self.write_request_map.get(min_fast_forward_index)
        if pair is None:
            return
        self.log.warning("[PushFastForward] ledgerEndIndex=%d entryIndex=%d", end_index, min_fast_forward_index)
        pair[1].complete(self.build_response(pair[0], DLedgerResponseCode.INCONSISTENT_STATE))

    def check_abnormal_future(self, end_index: int) -> None:
        if self.pusher.now() - self.last_check_fast_forward_time_ms < 1000:
            return
        self.last_check_fast_forward_time_ms = self.pusher.now()
        if self.write_request_map:
            self.check_append_future(end_index)

    def clear_compare_or_truncate_requests_if_need(self) -> None:
        if not self.pusher.member_state.is_follower() and self.compare_or_truncate_requests:
            drained, self.compare_or_truncate_requests = self.compare_or_truncate_requests, []
            for request, future in drained:
                future.complete(self.build_response(request, DLedgerResponseCode.NOT_FOLLOWER))

    async def do_work(self) -> float | None:
        try:
            while True:
                if not self.pusher.member_state.is_follower():
                    self.clear_compare_or_truncate_requests_if_need()
                    return None
                if self.compare_or_truncate_requests:
                    request, future = self.compare_or_truncate_requests.pop(0)
                    if request.type is TRUNCATE:
                        self.handle_do_truncate(request.entry.index, request, future)
                    elif request.type is COMPARE:
                        self.handle_do_compare(request.entry.index, request, future)
                    elif request.type is COMMIT:
                        self.handle_do_commit(request.commit_index, request, future)
                    continue
                next_index = self.store.get_ledger_end_index() + 1
                pair = self.write_request_map.pop(next_index, None)
                if pair is None:
                    self.check_abnormal_future(self.store.get_ledger_end_index())
                    if not self.write_request_map:
                        return None
                    return max(0.0, self.last_check_fast_forward_time_ms + 1000 - self.pusher.now())
                request, future = pair
                if request.is_batch():
                    self.handle_do_batch_append(next_index, request, future)
                else:
                    self.handle_do_append(next_index, request, future)
        except asyncio.CancelledError:
            raise
        except Exception:
            self.log.exception("Error in %s", self.name)
            return 100.0
