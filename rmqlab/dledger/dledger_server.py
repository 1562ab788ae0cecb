"""DLedgerServer (io.openmessaging.storage.dledger.DLedgerServer, 0.3.1.2): one member of a DLedger group.

It owns the MemberState, the log (any DLedgerStore: `store_factory(config, member_state)`, the
in-memory store by default, as DLedger's storeType MEMORY; the broker passes the mapped-file
store), the RPC service, the entry pusher and the leader elector, and answers the requests:

  handle_append     leader only: append to the log, answer when a quorum holds the entry
                    (an AppendFuture; any failure answers at once, pos -1)
  handle_get        leader only: the entry at beginIndex
  handle_metadata   the group, its peers and the leader
  handle_push       to the pusher's EntryHandler (followers)
  handle_vote, handle_heart_beat, handle_leadership_transfer   to the elector

Each first checks that the request is for this member (remoteId, UNKNOWN_MEMBER) and group
(UNKNOWN_GROUP). It runs on a Node (either runtime): `await startup()`, `await shutdown()`.
With preferredLeaderIds set, a leader that is not preferred checks every second whether to hand
leadership to a preferred member that is alive and less than maxLeadershipTransferWaitIndex behind.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from rmqlab.dledger.dledger_entry_pusher import AppendFuture, DLedgerEntryPusher
from rmqlab.dledger.dledger_leader_elector import DLedgerLeaderElector
from rmqlab.dledger.dledger_rpc_service import DLedgerRpcNettyService
from rmqlab.dledger.entry.dledger_entry import DLedgerEntry
from rmqlab.dledger.member_state import MemberState
from rmqlab.dledger.protocol.dledger_protocol_bodies import (AppendEntryRequest, AppendEntryResponse,
                                                             GetEntriesRequest, GetEntriesResponse, HeartBeatRequest,
                                                             HeartBeatResponse, LeadershipTransferRequest,
                                                             LeadershipTransferResponse, MetadataRequest,
                                                             MetadataResponse, PushEntryRequest, PushEntryResponse,
                                                             VoteRequest, VoteResponse)
from rmqlab.dledger.protocol.dledger_response_code import DLedgerException, DLedgerResponseCode, check
from rmqlab.dledger.store.dledger_memory_store import DLedgerMemoryStore

if TYPE_CHECKING:
    from rmqlab.dledger.dledger_config import DLedgerConfig
    from rmqlab.dledger.protocol.request_or_response import RequestOrResponse
    from rmqlab.dledger.store.dledger_store import DLedgerStore
    from rmqlab.runtime.node import Node, Timer

StoreFactory = Callable[["DLedgerConfig", MemberState], "DLedgerStore"]

# DLedgerServer.startup: scheduleAtFixedRate(checkPreferredLeader, 1000, 1000 ms).
CHECK_PREFERRED_LEADER_PERIOD_MS = 1000
# The transferee polls its ledger end every 10 ms while catching up with the leader.
TAKE_LEADERSHIP_POLL_MS = 10


def _failed(response: RequestOrResponse, request: RequestOrResponse, e: DLedgerException,
            leader_id: str | None) -> RequestOrResponse:
    response.copy_base_info(request)
    response.code = e.code
    response.leader_id = leader_id
    return response


class DLedgerServer:
    def __init__(self, config: DLedgerConfig, node: Node, store_factory: StoreFactory | None = None, *,
                 listen_address: str | None = None):
        self.dledger_config = config
        self.node = node
        self.member_state = MemberState(config)
        self.dledger_store: DLedgerStore = (store_factory or DLedgerMemoryStore)(config, self.member_state)
        self.dledger_rpc_service = DLedgerRpcNettyService(self, node, listen_address)
        self.dledger_entry_pusher = DLedgerEntryPusher(config, self.member_state, self.dledger_store,
                                                       self.dledger_rpc_service, node)
        self.dledger_leader_elector = DLedgerLeaderElector(config, self.member_state, self.dledger_rpc_service, node)
        self.dledger_leader_elector.role_change_listeners.append(self.dledger_entry_pusher.on_role_change)
        self._preferred_timer: Timer | None = None
        self._checking_preferred = False
        self.is_started = False

    # -- lifecycle ----------------------------------------------------------------------------------------
    async def startup(self) -> None:
        if self.is_started:
            return
        self.dledger_store.startup()
        await self.dledger_rpc_service.startup()
        self.dledger_entry_pusher.startup()
        self.dledger_leader_elector.startup()
        if self.dledger_config.preferred_leader_ids is not None:
            # Without preferred leaders checkPreferredLeader returns at once: no timer then.
            self._preferred_timer = self.node.call_later(CHECK_PREFERRED_LEADER_PERIOD_MS, self._preferred_tick)
        self.is_started = True

    async def shutdown(self) -> None:
        if not self.is_started:
            return
        self.dledger_leader_elector.shutdown()
        self.dledger_entry_pusher.shutdown()
        await self.dledger_rpc_service.shutdown()
        self.dledger_store.shutdown()
        if self._preferred_timer is not None:
            self._preferred_timer.cancel()
        self.is_started = False

    def on_crash(self) -> None:
        """The process died: the node cancelled the tasks; nothing is flushed."""
        if self._preferred_timer is not None:
            self._preferred_timer.cancel()
        self.is_started = False

    def is_leader(self) -> bool:
        return self.member_state.is_leader()

    def get_member_state(self) -> MemberState:
        return self.member_state

    def get_dledger_store(self) -> DLedgerStore:
        return self.dledger_store

    def get_dledger_leader_elector(self) -> DLedgerLeaderElector:
        return self.dledger_leader_elector

    def _check_target(self, request: RequestOrResponse) -> None:
        ms = self.member_state
        check(ms.self_id == request.remote_id, DLedgerResponseCode.UNKNOWN_MEMBER, f"{request.remote_id} != {ms.self_id}")
        check(ms.group == request.group, DLedgerResponseCode.UNKNOWN_GROUP, f"{request.group} != {ms.group}")

    # -- handlers ----------------------------------------------------------------------------------------------
    async def handle_heart_beat(self, request: HeartBeatRequest) -> HeartBeatResponse:
        try:
            self._check_target(request)
            return self.dledger_leader_elector.handle_heart_beat(request)
        except DLedgerException as e:
            self.node.log.error("[%s][HandleHeartBeat] failed: %s", self.member_state.self_id, e)
            return _failed(HeartBeatResponse(), request, e, self.member_state.leader_id)

    async def handle_vote(self, request: VoteRequest) -> VoteResponse:
        try:
            self._check_target(request)
            return self.dledger_leader_elector.handle_vote(request, False)
        except DLedgerException as e:
            self.node.log.error("[%s][HandleVote] failed: %s", self.member_state.self_id, e)
            return _failed(VoteResponse(), request, e, self.member_state.leader_id)

    def append_future(self, request: AppendEntryRequest) -> AppendFuture:
        """handleAppend's future: completes when a quorum holds the entry, or at once on failure
        (with pos -1). The broker awaits it; handle_append is the RPC's view of it."""
        ms = self.member_state
        try:
            self._check_target(request)
            check(ms.is_leader(), DLedgerResponseCode.NOT_LEADER, f"{ms.self_id} is not the leader")
            check(ms.transferee is None, DLedgerResponseCode.LEADER_TRANSFERRING, f"transferring to {ms.transferee}")
            curr_term = ms.curr_term
            if self.dledger_entry_pusher.is_pending_full(curr_term):
                response = AppendEntryResponse(group=ms.group, code=DLedgerResponseCode.LEADER_PENDING_FULL,
                                               term=curr_term, leader_id=ms.self_id)
                return AppendFuture.new_completed_future(self.node, -1, response)
            entry = DLedgerEntry(body=request.body or b"")
            stored = self.dledger_store.append_as_leader(entry)
            return self.dledger_entry_pusher.wait_ack(stored)
        except DLedgerException as e:
            self.node.log.error("[%s][HandleAppend] failed: %s", ms.self_id, e)
            return AppendFuture.new_completed_future(self.node, -1, _failed(AppendEntryResponse(), request, e, ms.leader_id))

    async def handle_append(self, request: AppendEntryRequest) -> AppendEntryResponse:
        return await self.append_future(request)

    async def handle_get(self, request: GetEntriesRequest) -> GetEntriesResponse:
        ms = self.member_state
        try:
            self._check_target(request)
            check(ms.is_leader(), DLedgerResponseCode.NOT_LEADER, f"{ms.self_id} is not the leader")
            entry = self.dledger_store.get(request.begin_index if request.begin_index is not None else -1)
            return GetEntriesResponse(group=ms.group, entries=[entry])
        except DLedgerException as e:
            self.node.log.error("[%s][HandleGet] failed: %s", ms.self_id, e)
            return _failed(GetEntriesResponse(), request, e, ms.leader_id)

    async def handle_metadata(self, request: MetadataRequest) -> MetadataResponse:
        ms = self.member_state
        try:
            self._check_target(request)
            return MetadataResponse(group=ms.group, peers=dict(ms.peer_map), leader_id=ms.leader_id)
        except DLedgerException as e:
            return _failed(MetadataResponse(), request, e, ms.leader_id)

    async def handle_push(self, request: PushEntryRequest) -> PushEntryResponse:
        try:
            self._check_target(request)
            return await self.dledger_entry_pusher.handle_push(request)
        except DLedgerException as e:
            self.node.log.error("[%s][HandlePush] failed: %s", self.member_state.self_id, e)
            return _failed(PushEntryResponse(), request, e, self.member_state.leader_id)

    async def handle_leadership_transfer(self, request: LeadershipTransferRequest) -> LeadershipTransferResponse:
        ms = self.member_state
        try:
            self._check_target(request)
            if ms.self_id == request.transfer_id:
                # The leader, told to hand over.
                check(ms.is_peer_member(request.transferee_id), DLedgerResponseCode.UNKNOWN_MEMBER,
                      f"transferee={request.transferee_id} is not a peer member")
                check(ms.curr_term == request.term, DLedgerResponseCode.INCONSISTENT_TERM,
                      f"currTerm({ms.curr_term}) != request.term({request.term})")
                check(ms.is_leader(), DLedgerResponseCode.NOT_LEADER, f"selfId={ms.self_id} is not leader")
                fall_behind = self.dledger_store.get_ledger_end_index() - self.dledger_entry_pusher.get_peer_water_mark(
                    request.term, request.transferee_id)
                check(fall_behind < self.dledger_config.max_leadership_transfer_wait_index,
                      DLedgerResponseCode.FALL_BEHIND_TOO_MUCH, f"transferee fall behind too much, diff={fall_behind}")
                return await self.dledger_leader_elector.handle_leadership_transfer(request)
            if ms.self_id == request.transferee_id:
                # The transferee, told to take over once it has the leader's entries.
                check(request.transfer_id == ms.leader_id, DLedgerResponseCode.INCONSISTENT_LEADER,
                      f"transfer={request.transfer_id} is not leader")
                start = self.node.now_ms()
                while request.take_leadership_ledger_index - ms.ledger_end_index > 0:
                    if self.node.now_ms() - start > self.dledger_config.leadership_transfer_wait_timeout:
                        raise DLedgerException(DLedgerResponseCode.TAKE_LEADERSHIP_FAILED,
                                               "transferee fall behind, wait timeout")
                    # DLedger polls every 10 ms, for at most leadershipTransferWaitTimeout: kept as is.
                    await self.node.sleep(TAKE_LEADERSHIP_POLL_MS)
                return await self.dledger_leader_elector.handle_take_leadership(request)
            return LeadershipTransferResponse(term=ms.curr_term, code=DLedgerResponseCode.UNEXPECTED_ARGUMENT)
        except DLedgerException as e:
            self.node.log.error("[%s][handleLeadershipTransfer] failed: %s", ms.self_id, e)
            return _failed(LeadershipTransferResponse(), request, e, ms.leader_id)

    # -- preferred leader -------------------------------------------------------------------------------------
    def _preferred_tick(self) -> None:
        self._preferred_timer = self.node.call_later(CHECK_PREFERRED_LEADER_PERIOD_MS, self._preferred_tick)
        # scheduleAtFixedRate never overlaps runs: a transfer still in progress skips this tick.
        if not self._checking_preferred:
            self.node.spawn(self._check_preferred_leader_task(), name="dledger-check-preferred-leader")

    async def _check_preferred_leader_task(self) -> None:
        self._checking_preferred = True
        try:
            await self.check_preferred_leader()
        except Exception:
            self.node.log.exception("[checkPreferredLeader] error")
        finally:
            self._checking_preferred = False

    def choose_transferee(self) -> str | None:
        """checkPreferredLeader's choice: among the preferred members that are peers and were alive in
        the last heartbeat round, the least behind; None when this leader is preferred itself, or none
        qualifies (or it is maxLeadershipTransferWaitIndex or more behind)."""
        ms, cfg = self.member_state, self.dledger_config
        if not ms.is_leader() or cfg.preferred_leader_ids is None or ms.transferee is not None:
            return None
        preferred = cfg.preferred_leader_ids.split(";")
        if cfg.self_id in preferred:
            return None
        candidates = []
        for peer_id in preferred:
            if not ms.is_peer_member(peer_id):
                self.node.log.warning("preferredLeaderId = %s is not a peer member", peer_id)
                continue
            if not ms.peers_live_table.get(peer_id, False):
                self.node.log.warning("preferredLeaderId = %s is not online", peer_id)
                continue
            candidates.append(peer_id)
        if not candidates:
            return None
        end = self.dledger_store.get_ledger_end_index()
        best, min_fall_behind = candidates[0], None
        for peer_id in candidates:
            fall_behind = end - self.dledger_entry_pusher.get_peer_water_mark(ms.curr_term, peer_id)
            if min_fall_behind is None or fall_behind < min_fall_behind:
                best, min_fall_behind = peer_id, fall_behind
        if min_fall_behind is None or min_fall_behind >= cfg.max_leadership_transfer_wait_index:
            return None
        return best

    async def check_preferred_leader(self) -> LeadershipTransferResponse | None:
        transferee = self.choose_transferee()
        if transferee is None:
            return None
        request = LeadershipTransferRequest(term=self.member_state.curr_term, transferee_id=transferee)
        start = self.node.now_ms()
        response = await self.dledger_leader_elector.handle_leadership_transfer(request)
        self.node.log.info("transfer finished. transferee=%s code=%d cost=%dms", transferee, response.code,
                           self.node.now_ms() - start)
        return response

