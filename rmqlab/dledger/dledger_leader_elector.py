"""DLedgerLeaderElector (io.openmessaging.storage.dledger.DLedgerLeaderElector, 0.3.1.2).

Roles, terms, votes, heartbeats and leadership transfer on one member; the decisions themselves
are in protocol/dledger_protocol_core (its theory of operation explains the protocol), this
module does the I/O and keeps the clocks.

Timing. DLedger's StateMaintainer runs maintainState every 10 ms. Here it runs at its deadlines
(ShutdownAbleTask): a leader at lastSendHeartBeatTime + heartBeatTimeIntervalMs + 1 (DLedger:
"elapsed > interval", seen at the next 10 ms tick, so up to 10 ms later), a follower at
lastLeaderHeartBeatTime + maxHeartBeatLeak * interval + 1, a candidate at nextTimeToRequestVote,
and at once when something it waits for changes (a role change, needIncreaseTermImmediately),
where DLedger notices within 10 ms. As in DLedger, a heartbeat round or a vote round holds the
maintainer until its latch opens or its wait ends (heartBeatTimeIntervalMs; 2000 + rand(maxVote)).
Vote delays come from the node's seeded random: the same seed gives the same elections.

Role-change handlers (RoleChangeHandler: handle(term, role), startup(), shutdown()) are called in
the order added, synchronously with the change, as DLedger does; the broker's
DLedgerRoleChangeHandler registers with add_role_change_handler.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, Protocol

from rmqlab.dledger.member_state import MemberState, Role
from rmqlab.dledger.protocol.dledger_protocol_bodies import (HeartBeatRequest, HeartBeatResponse,
                                                             LeadershipTransferRequest, LeadershipTransferResponse,
                                                             ParseResult, VoteRequest, VoteResponse)
from rmqlab.dledger.protocol.dledger_protocol_core import (HeartBeatAction, HeartbeatOutcome, HeartbeatTally,
                                                           NextVote, VoteAction, VoteTally, handle_heart_beat,
                                                           handle_vote, heartbeat_outcome, parse_vote_result)
from rmqlab.dledger.protocol.dledger_response_code import DLedgerResponseCode
from rmqlab.dledger.shutdown_able_task import ShutdownAbleTask

if TYPE_CHECKING:
    from rmqlab.dledger.dledger_config import DLedgerConfig
    from rmqlab.runtime.node import Node


class RoleChangeHandler(Protocol):
    """DLedgerLeaderElector.RoleChangeHandler."""

    def handle(self, term: int, role: Role) -> None: ...

    def startup(self) -> None: ...

    def shutdown(self) -> None: ...


class ElectorRpc(Protocol):
    """What the elector sends (DLedgerRpcService); every call answers, failures as DLedger maps them
    (heartbeat: NETWORK_ERROR; vote: a VoteResponse with result UNKNOWN)."""

    def heart_beat(self, request: HeartBeatRequest) -> Awaitable[HeartBeatResponse]: ...

    def vote(self, request: VoteRequest) -> Awaitable[VoteResponse]: ...

    def leadership_transfer(self, request: LeadershipTransferRequest) -> Awaitable[LeadershipTransferResponse]: ...


def completed(value: Any) -> asyncio.Future:
    fut = asyncio.get_running_loop().create_future()
    fut.set_result(value)
    return fut


async def await_latch(node: Node, latch: asyncio.Future, timeout_ms: float) -> None:
    """CountDownLatch.await(timeout): until `latch` is set or `timeout_ms` passes on the node's clock."""
    if latch.done():
        return
    timer = node.call_later(timeout_ms, lambda: latch.done() or latch.set_result(None))
    try:
        await asyncio.shield(latch)
    finally:
        timer.cancel()


class DLedgerLeaderElector:
    def __init__(self, config: DLedgerConfig, member_state: MemberState, rpc: ElectorRpc, node: Node):
        self.dledger_config = config
        self.member_state = member_state
        self.rpc = rpc
        self.node = node
        self.random = node.random
        self.last_leader_heart_beat_time = -1
        self.last_send_heart_beat_time = -1
        self.last_succ_heart_beat_time = -1
        self.heart_beat_time_interval_ms = config.heart_beat_time_interval_ms
        self.max_heart_beat_leak = config.max_heart_beat_leak
        self.next_time_to_request_vote = -1
        self.need_increase_term_immediately = False
        self.min_vote_interval_ms = config.min_vote_interval_ms
        self.max_vote_interval_ms = config.max_vote_interval_ms
        self.role_change_handlers: list[RoleChangeHandler] = []
        # Called after every role change, before the handlers (the pusher's threads, which in DLedger
        # notice within 1 ms by polling).
        self.role_change_listeners: list[Callable[[int, Role], None]] = []
        self.last_parse_result = ParseResult.WAIT_TO_REVOTE
        self.last_vote_cost = 0
        self.state_maintainer = _StateMaintainer(self)
        self.take_leadership_task = _TakeLeadershipTask(self)
        self._traced: tuple | None = None

    # -- lifecycle ----------------------------------------------------------------------------------
    def startup(self) -> None:
        self._trace_state()
        self.state_maintainer.start()
        for handler in self.role_change_handlers:
            handler.startup()

    def shutdown(self) -> None:
        self.state_maintainer.shutdown()
        for handler in self.role_change_handlers:
            handler.shutdown()

    def add_role_change_handler(self, handler: RoleChangeHandler) -> None:
        if handler not in self.role_change_handlers:
            self.role_change_handlers.append(handler)

    def now(self) -> int:
        return int(self.node.now_ms())

    def elapsed(self, since: int) -> int:
        return self.now() - since

    # -- handlers -------------------------------------------------------------------------------------
    def handle_heart_beat(self, request: HeartBeatRequest) -> HeartBeatResponse:
        ms = self.member_state
        decision = handle_heart_beat(self_id=ms.self_id, peers=ms.peer_map, curr_term=ms.curr_term,
                                     leader_id=ms.leader_id, request_leader_id=request.leader_id,
                                     request_term=request.term)
        if decision.row in (1, 2):
            self.node.log.warning("[BUG] [HandleHeartBeat] selfId=%s remoteId=%s leaderId=%s: %s", ms.self_id,
                                  request.remote_id, request.leader_id, decision.code.name)
        if decision.action is HeartBeatAction.REFRESH:
            self.last_leader_heart_beat_time = self.now()
            self.state_maintainer.wakeup()  # the follower's deadline moved
        elif decision.action is HeartBeatAction.BECOME_FOLLOWER:
            self.change_role_to_follower(request.term, request.leader_id)
        elif decision.action is HeartBeatAction.BECOME_CANDIDATE:
            self.change_role_to_candidate(request.term)
            self.need_increase_term_immediately = True
            self.state_maintainer.wakeup()
        elif decision.row == 6:
            self.node.log.error("[%s][BUG] currTerm %d has leader %s, but received leader %s", ms.self_id,
                                ms.curr_term, ms.leader_id, request.leader_id)
        return HeartBeatResponse(term=decision.term, code=decision.code)

    def handle_vote(self, request: VoteRequest, is_self: bool) -> VoteResponse:
        ms = self.member_state
        decision = handle_vote(self_id=ms.self_id, peers=ms.peer_map, curr_term=ms.curr_term,
                               curr_vote_for=ms.curr_vote_for, leader_id=ms.leader_id,
                               ledger_end_term=ms.ledger_end_term, ledger_end_index=ms.ledger_end_index,
                               taking_leadership=self.is_taking_leadership(), request_leader_id=request.leader_id,
                               request_term=request.term, request_ledger_end_term=request.ledger_end_term,
                               request_ledger_end_index=request.ledger_end_index, is_self=is_self)
        if decision.action is VoteAction.STEP_DOWN:
            self.change_role_to_candidate(request.term)
            self.need_increase_term_immediately = True
            self.state_maintainer.wakeup()
        elif decision.action is VoteAction.ACCEPT:
            ms.set_curr_vote_for(request.leader_id)
        response = VoteResponse.of(request)
        response.term = decision.term
        response.vote_result = decision.result
        return response

    # -- role changes ---------------------------------------------------------------------------------
    def change_role_to_leader(self, term: int) -> None:
        ms = self.member_state
        if ms.curr_term == term:
            ms.change_to_leader(term)
            self.last_send_heart_beat_time = -1
            self.handle_role_change(term, Role.LEADER)
            self.node.log.info("[%s] [ChangeRoleToLeader] from term: %d and currTerm: %d", ms.self_id, term,
                               ms.curr_term)
        else:
            self.node.log.warning("[%s] skip to be the leader in term: %d, but currTerm is: %d", ms.self_id, term,
                                  ms.curr_term)

    def change_role_to_candidate(self, term: int) -> None:
        ms = self.member_state
        if term >= ms.curr_term:
            ms.change_to_candidate(term)
            self.handle_role_change(term, Role.CANDIDATE)
            self.node.log.info("[%s] [ChangeRoleToCandidate] from term: %d and currTerm: %d", ms.self_id, term,
                               ms.curr_term)
        else:
            self.node.log.info("[%s] skip to be candidate in term: %d, but currTerm: %d", ms.self_id, term,
                               ms.curr_term)

    def change_role_to_follower(self, term: int, leader_id: str) -> None:
        ms = self.member_state
        self.node.log.info("[%s][ChangeRoleToFollower] from term: %d leaderId: %s and currTerm: %d", ms.self_id,
                           term, leader_id, ms.curr_term)
        self.last_parse_result = ParseResult.WAIT_TO_REVOTE
        ms.change_to_follower(term, leader_id)
        self.last_leader_heart_beat_time = self.now()
        self.handle_role_change(term, Role.FOLLOWER)

    def handle_role_change(self, term: int, role: Role) -> None:
        try:
            self.take_leadership_task.check(term, role)
        except Exception:
            self.node.log.exception("takeLeadershipTask.check failed. term=%d, role=%s", term, role.name)
        self._trace_state()
        self.state_maintainer.wakeup()
        for listener in self.role_change_listeners:
            listener(term, role)
        for handler in self.role_change_handlers:
            try:
                handler.handle(term, role)
            except Exception:
                self.node.log.warning("Handle role change failed term=%d role=%s handler=%s", term, role.name,
                                      type(handler).__name__, exc_info=True)

    def _trace_state(self) -> None:
        """A dledger.role event when the member's (role, term, leader) differs from the last one traced."""
        ms = self.member_state
        key = (ms.role, ms.curr_term, ms.leader_id)
        if key == self._traced:
            return
        self._traced = key
        self.node.trace("dledger.role", group=ms.group, self_id=ms.self_id, role=ms.role.name, term=ms.curr_term,
                        leader=ms.leader_id, ledger_end_index=ms.ledger_end_index,
                        ledger_end_term=ms.ledger_end_term)

    # -- the state maintainer ------------------------------------------------------------------------
    async def maintain_state(self) -> None:
        if self.member_state.is_leader():
            await self.maintain_as_leader()
        elif self.member_state.is_follower():
            self.maintain_as_follower()
        else:
            await self.maintain_as_candidate()

    def next_deadline_ms(self) -> float | None:
        """When maintain_state has something to do next (see the module docstring), in ms from now."""
        ms, now = self.member_state, self.now()
        if ms.is_leader():
            return max(0, self.last_send_heart_beat_time + self.heart_beat_time_interval_ms + 1 - now)
        if ms.is_follower():
            due = self.last_leader_heart_beat_time + self.max_heart_beat_leak * self.heart_beat_time_interval_ms + 1
            return max(0, due - now)
        if self.need_increase_term_immediately:
            return 0
        return max(0, self.next_time_to_request_vote - now)

    async def maintain_as_leader(self) -> None:
        if self.elapsed(self.last_send_heart_beat_time) > self.heart_beat_time_interval_ms:
            ms = self.member_state
            if not ms.is_leader():
                return
            term, leader_id = ms.curr_term, ms.leader_id
            self.last_send_heart_beat_time = self.now()
            await self.send_heartbeats(term, leader_id)

    def maintain_as_follower(self) -> None:
        # DLedger looks only once 2 intervals passed, then applies the maxHeartBeatLeak bound.
        if self.elapsed(self.last_leader_heart_beat_time) > 2 * self.heart_beat_time_interval_ms:
            ms = self.member_state
            if ms.is_follower() and self.elapsed(self.last_leader_heart_beat_time) > (
                    self.max_heart_beat_leak * self.heart_beat_time_interval_ms):
                self.node.log.info("[%s][HeartBeatTimeOut] lastLeaderHeartBeatTime: %d heartBeatTimeIntervalMs: %d "
                                   "lastLeader=%s", ms.self_id, self.last_leader_heart_beat_time,
                                   self.heart_beat_time_interval_ms, ms.leader_id)
                self.change_role_to_candidate(ms.curr_term)

    async def send_heartbeats(self, term: int, leader_id: str) -> None:
        ms = self.member_state
        tally = HeartbeatTally()
        latch = asyncio.get_running_loop().create_future()
        start = self.now()
        for peer_id in ms.peer_map:
            if peer_id == ms.self_id:
                continue
            request = HeartBeatRequest(group=ms.group, local_id=ms.self_id, remote_id=peer_id, leader_id=leader_id,
                                       term=term)
            self.node.spawn(self._one_heartbeat(peer_id, request, tally, latch), name=f"dledger-heartbeat {peer_id}")
        await await_latch(self.node, latch, self.heart_beat_time_interval_ms)
        row, outcome = heartbeat_outcome(tally, term=term, peer_size=ms.peer_size(),
                                         ms_since_last_success=self.elapsed(self.last_succ_heart_beat_time),
                                         heart_beat_time_interval_ms=self.heart_beat_time_interval_ms,
                                         max_heart_beat_leak=self.max_heart_beat_leak)
        if outcome is HeartbeatOutcome.SUCCEEDED:
            self.last_succ_heart_beat_time = self.now()
            return
        self.node.log.info("[%s] Parse heartbeat responses in cost=%d term=%d allNum=%d succNum=%d notReadyNum=%d "
                           "inconsistLeader=%s maxTerm=%d peerSize=%d lastSuccHeartBeatTime=%d: %s", ms.self_id,
                           self.elapsed(start), term, tally.all_num, tally.succ_num, tally.not_ready_num,
                           tally.inconsistent_leader, tally.max_term, ms.peer_size(), self.last_succ_heart_beat_time,
                           outcome.name)
        if outcome is HeartbeatOutcome.RESEND_NOW:
            self.last_send_heart_beat_time = -1
        elif outcome is HeartbeatOutcome.STEP_DOWN_TO_MAX_TERM:
            self.change_role_to_candidate(tally.max_term)
        elif outcome is HeartbeatOutcome.STEP_DOWN:
            self.change_role_to_candidate(term)

    async def _one_heartbeat(self, peer_id: str, request: HeartBeatRequest, tally: HeartbeatTally,
                             latch: asyncio.Future) -> None:
        ms = self.member_state
        try:
            response = await self.rpc.heart_beat(request)
        except Exception:
            ms.peers_live_table[peer_id] = False
            tally.all_num += 1  # DLedger's finally block counts the failure
            self.node.log.exception("heartbeat response failed")
        else:
            tally.add(response.code, response.term)
            ms.peers_live_table[peer_id] = response.code != DLedgerResponseCode.NETWORK_ERROR
        if tally.can_decide(ms.peer_size()) and not latch.done():
            latch.set_result(None)

    def is_taking_leadership(self) -> bool:
        preferred = self.dledger_config.preferred_leader_ids
        if preferred is not None and self.member_state.term_to_take_leadership == self.member_state.curr_term:
            return self.member_state.self_id in preferred.split(";")
        return False

    def get_next_time_to_request_vote(self) -> int:
        cfg = self.dledger_config
        if self.is_taking_leadership():
            return self.now() + cfg.min_take_leadership_vote_interval_ms + self.random.randrange(
                cfg.max_take_leadership_vote_interval_ms - cfg.min_take_leadership_vote_interval_ms)
        return self.now() + self.min_vote_interval_ms + self.random.randrange(
            self.max_vote_interval_ms - self.min_vote_interval_ms)

    async def maintain_as_candidate(self) -> None:
        if self.now() < self.next_time_to_request_vote and not self.need_increase_term_immediately:
            return
        ms = self.member_state
        if not ms.is_candidate():
            return
        if self.last_parse_result is ParseResult.WAIT_TO_VOTE_NEXT or self.need_increase_term_immediately:
            prev_term = ms.curr_term
            term = ms.next_term()
            self.node.log.info("%s_[INCREASE_TERM] from %d to %d", ms.self_id, prev_term, term)
            self.last_parse_result = ParseResult.WAIT_TO_REVOTE
            self._trace_state()
        else:
            term = ms.curr_term
        ledger_end_index, ledger_end_term = ms.ledger_end_index, ms.ledger_end_term
        if self.need_increase_term_immediately:
            self.next_time_to_request_vote = self.get_next_time_to_request_vote()
            self.need_increase_term_immediately = False
            return

        start = self.now()
        tally = VoteTally(term)
        latch = asyncio.get_running_loop().create_future()
        for peer_id in ms.peer_map:
            request = VoteRequest(group=ms.group, ledger_end_index=ledger_end_index, ledger_end_term=ledger_end_term,
                                  leader_id=ms.self_id, term=term, remote_id=peer_id, local_id=ms.self_id)
            if peer_id == ms.self_id:
                self._count_vote(self.handle_vote(request, True), tally, latch)
            else:
                self.node.spawn(self._one_vote(request, tally, latch), name=f"dledger-vote {peer_id}")
        await await_latch(self.node, latch, 2000 + self.random.randrange(self.max_vote_interval_ms))
        self.last_vote_cost = self.elapsed(start)
        decision = parse_vote_result(tally, ms.peer_size())
        if decision.next_vote is NextVote.RANDOM:
            self.next_time_to_request_vote = self.get_next_time_to_request_vote()
        elif decision.next_vote is NextVote.RANDOM_PLUS_LEAK:
            self.next_time_to_request_vote = (self.get_next_time_to_request_vote()
                                              + self.heart_beat_time_interval_ms * self.max_heart_beat_leak)
        elif decision.next_vote is NextVote.RANDOM_PLUS_MAX:
            self.next_time_to_request_vote = self.get_next_time_to_request_vote() + self.max_vote_interval_ms
        if decision.adopt_term is not None:
            self.change_role_to_candidate(decision.adopt_term)
        self.last_parse_result = decision.result
        self.node.log.info("[%s] [PARSE_VOTE_RESULT] cost=%d term=%d memberNum=%d allNum=%d acceptedNum=%d "
                           "notReadyTermNum=%d biggerLedgerNum=%d alreadyHasLeader=%s maxTerm=%d result=%s",
                           ms.self_id, self.last_vote_cost, term, ms.peer_size(), tally.all_num, tally.accepted_num,
                           tally.not_ready_term_num, tally.bigger_ledger_num, tally.already_has_leader,
                           tally.known_max_term_in_group, decision.result.name)
        if decision.result is ParseResult.PASSED:
            self.node.log.info("[%s] [VOTE_RESULT] has been elected to be the leader in term %d", ms.self_id, term)
            self.change_role_to_leader(term)

    async def _one_vote(self, request: VoteRequest, tally: VoteTally, latch: asyncio.Future) -> None:
        try:
            response = await self.rpc.vote(request)
        except Exception:
            tally.all_num += 1
            self.node.log.exception("vote response failed")
            if tally.can_decide(self.member_state.peer_size()) and not latch.done():
                latch.set_result(None)
            return
        self._count_vote(response, tally, latch)

    def _count_vote(self, response: VoteResponse, tally: VoteTally, latch: asyncio.Future) -> None:
        tally.add(response.vote_result, response.term)
        if tally.can_decide(self.member_state.peer_size()) and not latch.done():
            latch.set_result(None)

    # -- leadership transfer ----------------------------------------------------------------------------
    async def handle_leadership_transfer(self, request: LeadershipTransferRequest) -> LeadershipTransferResponse:
        """On the leader: mark the transferee (appends now fail LEADER_TRANSFERRING) and ask it to take
        leadership; any failure clears the mark."""
        ms = self.member_state
        if ms.curr_term != request.term:
            return LeadershipTransferResponse(term=ms.curr_term, code=DLedgerResponseCode.INCONSISTENT_TERM)
        if not ms.is_leader():
            return LeadershipTransferResponse(term=ms.curr_term, code=DLedgerResponseCode.NOT_LEADER)
        if ms.transferee is not None:
            return LeadershipTransferResponse(term=ms.curr_term, code=DLedgerResponseCode.LEADER_TRANSFERRING)
        ms.set_transferee(request.transferee_id)
        take = LeadershipTransferRequest(group=ms.group, leader_id=ms.leader_id, local_id=ms.self_id,
                                         remote_id=request.transferee_id, term=request.term,
                                         take_leadership_ledger_index=ms.ledger_end_index, transfer_id=ms.self_id,
                                         transferee_id=request.transferee_id)
        response = await self.rpc.leadership_transfer(take)
        if response.code != DLedgerResponseCode.SUCCESS or (ms.curr_term == request.term
                                                             and ms.transferee is not None):
            self.node.log.warning("leadershipTransfer failed, set transferee to null")
            # MemberState.setTransferee checks the role; DLedger's would throw on a deposed leader too,
            # so only a leader clears it (changeToCandidate/Follower cleared it already).
            if ms.is_leader():
                ms.set_transferee(None)
        return response

    def handle_take_leadership(self, request: LeadershipTransferRequest) -> asyncio.Future:
        """On the transferee (once it has the leader's entries): become candidate of term + 1 with an
        immediate term bump; the answer comes when this member leads, follows, or sees a larger term."""
        ms = self.member_state
        if ms.curr_term != request.term:
            return completed(LeadershipTransferResponse(term=ms.curr_term,
                                                        code=DLedgerResponseCode.INCONSISTENT_TERM))
        target_term = request.term + 1
        ms.term_to_take_leadership = target_term
        response: asyncio.Future = asyncio.get_running_loop().create_future()
        self.take_leadership_task.update(request, response)
        self.change_role_to_candidate(target_term)
        self.need_increase_term_immediately = True
        self.state_maintainer.wakeup()
        return response


class _TakeLeadershipTask:
    def __init__(self, elector: DLedgerLeaderElector):
        self.elector = elector
        self.request: LeadershipTransferRequest | None = None
        self.response_future: asyncio.Future | None = None

    def update(self, request: LeadershipTransferRequest, response_future: asyncio.Future) -> None:
        self.request, self.response_future = request, response_future

    def check(self, term: int, role: Role) -> None:
        ms = self.elector.member_state
        if ms.term_to_take_leadership == -1 or self.response_future is None:
            return
        code: DLedgerResponseCode
        if term > ms.term_to_take_leadership:
            code = DLedgerResponseCode.EXPIRED_TERM
        elif term == ms.term_to_take_leadership:
            if role is Role.LEADER:
                code = DLedgerResponseCode.SUCCESS
            elif role is Role.FOLLOWER:
                code = DLedgerResponseCode.TAKE_LEADERSHIP_FAILED
            else:
                return
        else:
            # A heartbeat may make it follower before its term grew: that is a failure too.
            code = (DLedgerResponseCode.TAKE_LEADERSHIP_FAILED if role is Role.FOLLOWER
                    else DLedgerResponseCode.INTERNAL_ERROR)
        if not self.response_future.done():
            self.response_future.set_result(LeadershipTransferResponse(term=term, code=code))
        ms.term_to_take_leadership = -1
        self.response_future = None
        self.request = None


class _StateMaintainer(ShutdownAbleTask):
    def __init__(self, elector: DLedgerLeaderElector):
        super().__init__("StateMaintainer-" + elector.member_state.self_id, elector.node)
        self.elector = elector

    async def do_work(self) -> float | None:
        try:
            await self.elector.maintain_state()
        except asyncio.CancelledError:
            raise
        except Exception:
            self.log.exception("Error in heartbeat")
            return 10.0
        return self.elector.next_deadline_ms()
