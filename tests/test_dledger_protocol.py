"""DLedger's protocol core without a network: every row of the vote, tally, heartbeat and compare
tables, the quorum index, and the bodies' JSON as DLedger 0.3.1.2 sends them."""

from __future__ import annotations

import json

import pytest

from rmqlab.dledger.entry.dledger_entry import DLedgerEntry
from rmqlab.dledger.protocol import dledger_protocol_core as core
from rmqlab.dledger.protocol.dledger_protocol_bodies import (AppendEntryRequest, HeartBeatResponse,
                                                             LeadershipTransferRequest, MetadataResponse, ParseResult,
                                                             PushEntryRequest, PushEntryResponse, PushEntryType,
                                                             VoteRequest, VoteResponse, VoteResult)
from rmqlab.dledger.protocol.dledger_request_code import DLedgerRequestCode
from rmqlab.dledger.protocol.dledger_response_code import DLedgerResponseCode as Code
from rmqlab.dledger.protocol.dledger_protocol_core import (HeartBeatAction, HeartbeatOutcome, HeartbeatTally, NextVote,
                                                           VoteAction, VoteTally)

PEERS = ("n0", "n1", "n2")


# ---------------------------------------------------------------------------------------------
# handleVote: one case per row of VOTE_TABLE

def vote(**over):
    """n0 votes; by default: term 5, no vote, no leader, log end (term 3, index 10); n1 asks with
    term 5 and the same log."""
    args = dict(self_id="n0", peers=PEERS, curr_term=5, curr_vote_for=None, leader_id=None, ledger_end_term=3,
                ledger_end_index=10, taking_leadership=False, request_leader_id="n1", request_term=5,
                request_ledger_end_term=3, request_ledger_end_index=10, is_self=False)
    args.update(over)
    return core.handle_vote(**args)


@pytest.mark.parametrize("row, over, result, term, action", [
    (1, dict(request_leader_id="n9"), VoteResult.REJECT_UNKNOWN_LEADER, 5, VoteAction.NONE),
    (2, dict(request_leader_id="n0"), VoteResult.REJECT_UNEXPECTED_LEADER, 5, VoteAction.NONE),
    (3, dict(request_ledger_end_term=2, request_ledger_end_index=99, request_term=9),
     VoteResult.REJECT_EXPIRED_LEDGER_TERM, 5, VoteAction.NONE),
    (4, dict(request_ledger_end_index=9, request_term=9), VoteResult.REJECT_SMALL_LEDGER_END_INDEX, 5, VoteAction.NONE),
    (5, dict(request_term=4), VoteResult.REJECT_EXPIRED_VOTE_TERM, 5, VoteAction.NONE),
    (6, dict(curr_vote_for="n2", leader_id="n2"), VoteResult.REJECT_ALREADY_HAS_LEADER, 5, VoteAction.NONE),
    (7, dict(curr_vote_for="n2"), VoteResult.REJECT_ALREADY_VOTED, 5, VoteAction.NONE),
    (8, dict(request_term=6), VoteResult.REJECT_TERM_NOT_READY, 5, VoteAction.STEP_DOWN),
    (9, dict(curr_term=2, request_term=2), VoteResult.REJECT_TERM_SMALL_THAN_LEDGER, 3, VoteAction.NONE),
    (10, dict(taking_leadership=True), VoteResult.REJECT_TAKING_LEADERSHIP, 5, VoteAction.NONE),
    (11, dict(), VoteResult.ACCEPT, 5, VoteAction.ACCEPT),
])
def test_handle_vote_rows(row, over, result, term, action):
    decision = vote(**over)
    assert (decision.row, decision.result, decision.term, decision.action) == (row, result, term, action)
    assert core.VOTE_TABLE[row - 1][2] is result


def test_handle_vote_edges_of_the_rows():
    # The self-vote passes row 2; a repeated vote for the same candidate is let through (row 6/7).
    assert vote(request_leader_id="n0", is_self=True).result is VoteResult.ACCEPT
    assert vote(curr_vote_for="n1", leader_id="n1").result is VoteResult.ACCEPT
    # A longer log of an older term loses to a newer term (row 3 checks the term first) ...
    assert vote(request_ledger_end_term=2, request_ledger_end_index=1000).row == 3
    # ... and a newer log term wins even with a shorter log.
    assert vote(request_ledger_end_term=4, request_ledger_end_index=0).result is VoteResult.ACCEPT
    # Row 10 only refuses candidates whose log is not ahead of the one taking leadership.
    assert vote(taking_leadership=True, request_ledger_end_index=11).result is VoteResult.ACCEPT
    assert vote(taking_leadership=True, is_self=True, request_leader_id="n0").result is VoteResult.ACCEPT


# ---------------------------------------------------------------------------------------------
# The candidate's tally: one case per row of TALLY_TABLE

def tally(term, results, peers=3):
    t = VoteTally(term)
    for result, rterm in results:
        t.add(result, rterm)
    return core.parse_vote_result(t, peers)


A, NR, UNK = VoteResult.ACCEPT, VoteResult.REJECT_TERM_NOT_READY, VoteResult.UNKNOWN


@pytest.mark.parametrize("row, results, parse, next_vote, adopt", [
    (1, [(A, 5), (VoteResult.REJECT_EXPIRED_VOTE_TERM, 7), (A, 5)], ParseResult.WAIT_TO_VOTE_NEXT, NextVote.RANDOM, 7),
    (1, [(A, 5), (VoteResult.REJECT_TERM_SMALL_THAN_LEDGER, 6), (UNK, -1)], ParseResult.WAIT_TO_VOTE_NEXT,
     NextVote.RANDOM, 6),
    (2, [(A, 5), (A, 5), (VoteResult.REJECT_ALREADY_HAS_LEADER, 5)], ParseResult.WAIT_TO_REVOTE,
     NextVote.RANDOM_PLUS_LEAK, None),
    (3, [(A, 5), (UNK, -1), (UNK, -1)], ParseResult.WAIT_TO_REVOTE, NextVote.RANDOM, None),
    (4, [(A, 5), (VoteResult.REJECT_SMALL_LEDGER_END_INDEX, 5), (VoteResult.REJECT_EXPIRED_LEDGER_TERM, 5)],
     ParseResult.WAIT_TO_REVOTE, NextVote.RANDOM_PLUS_MAX, None),
    (5, [(A, 5), (A, 5), (UNK, -1)], ParseResult.PASSED, NextVote.NONE, None),
    (6, [(A, 5), (NR, 5), (UNK, -1)], ParseResult.REVOTE_IMMEDIATELY, NextVote.UNCHANGED, None),
    (7, [(A, 5), (VoteResult.REJECT_ALREADY_VOTED, 5), (VoteResult.REJECT_ALREADY_VOTED, 5)],
     ParseResult.WAIT_TO_VOTE_NEXT, NextVote.RANDOM, None),
])
def test_tally_rows(row, results, parse, next_vote, adopt):
    decision = tally(5, results)
    assert (decision.row, decision.result, decision.next_vote, decision.adopt_term) == (row, parse, next_vote, adopt)


def test_tally_latch_opens_on_quorum_or_when_everyone_answered():
    t = VoteTally(1)
    t.add(A, 1)
    assert not t.can_decide(3)
    t.add(NR, 1)
    assert t.can_decide(3)  # ACCEPT + NOT_READY is a quorum: revote at once
    t = VoteTally(1)
    for result in (A, VoteResult.REJECT_ALREADY_VOTED):
        t.add(result, 1)
    assert not t.can_decide(3)
    t.add(UNK, -1)
    assert t.can_decide(3) and t.valid_num == 2 and t.all_num == 3
    # 5 members: 2 ACCEPT is not a quorum, 3 is.
    t = VoteTally(1)
    t.add(A, 1)
    t.add(A, 1)
    assert core.parse_vote_result(t, 5).result is not ParseResult.PASSED
    t.add(A, 1)
    assert core.parse_vote_result(t, 5).result is ParseResult.PASSED


# ---------------------------------------------------------------------------------------------
# HEART_BEAT on the receiver: one case per row

def heart_beat(**over):
    args = dict(self_id="n0", peers=PEERS, curr_term=4, leader_id="n1", request_leader_id="n1", request_term=4)
    args.update(over)
    return core.handle_heart_beat(**args)


@pytest.mark.parametrize("row, over, code, term, action", [
    (1, dict(request_leader_id="n7"), Code.UNKNOWN_MEMBER, 4, HeartBeatAction.NONE),
    (2, dict(request_leader_id="n0"), Code.UNEXPECTED_MEMBER, 4, HeartBeatAction.NONE),
    (3, dict(request_term=3), Code.EXPIRED_TERM, 4, HeartBeatAction.NONE),
    (4, dict(), Code.SUCCESS, -1, HeartBeatAction.REFRESH),
    (5, dict(leader_id=None), Code.SUCCESS, -1, HeartBeatAction.BECOME_FOLLOWER),
    (6, dict(leader_id="n2"), Code.INCONSISTENT_LEADER, -1, HeartBeatAction.NONE),
    (7, dict(request_term=9), Code.TERM_NOT_READY, -1, HeartBeatAction.BECOME_CANDIDATE),
])
def test_heart_beat_rows(row, over, code, term, action):
    decision = heart_beat(**over)
    assert (decision.row, decision.code, decision.term, decision.action) == (row, code, term, action)


# ---------------------------------------------------------------------------------------------
# The leader's heartbeat round: one case per row of HEARTBEAT_OUTCOME_TABLE

def outcome(codes, peers=3, since=0, term=4):
    t = HeartbeatTally()
    for code, rterm in codes:
        t.add(code, rterm)
    return core.heartbeat_outcome(t, term=term, peer_size=peers, ms_since_last_success=since,
                                  heart_beat_time_interval_ms=2000, max_heart_beat_leak=3)


@pytest.mark.parametrize("codes, since, row, result", [
    ([(Code.SUCCESS, -1), (Code.NETWORK_ERROR, -1)], 99_999, 1, HeartbeatOutcome.SUCCEEDED),
    ([(Code.TERM_NOT_READY, -1), (Code.NETWORK_ERROR, -1)], 0, 2, HeartbeatOutcome.RESEND_NOW),
    ([(Code.EXPIRED_TERM, 9), (Code.NETWORK_ERROR, -1)], 0, 3, HeartbeatOutcome.STEP_DOWN_TO_MAX_TERM),
    ([(Code.INCONSISTENT_LEADER, -1), (Code.NETWORK_ERROR, -1)], 0, 4, HeartbeatOutcome.STEP_DOWN),
    ([(Code.NETWORK_ERROR, -1), (Code.NETWORK_ERROR, -1)], 6001, 5, HeartbeatOutcome.STEP_DOWN),
    ([(Code.NETWORK_ERROR, -1), (Code.NETWORK_ERROR, -1)], 6000, 6, HeartbeatOutcome.KEEP),
])
def test_heartbeat_outcome_rows(codes, since, row, result):
    assert outcome(codes, since=since) == (row, result)


def test_heartbeat_a_leader_alone_in_five_keeps_failing():
    # 5 members: self + 1 success is not a quorum.
    assert outcome([(Code.SUCCESS, -1)] + [(Code.NETWORK_ERROR, -1)] * 3, peers=5, since=10)[1] is HeartbeatOutcome.KEEP
    assert outcome([(Code.SUCCESS, -1)] * 2 + [(Code.NETWORK_ERROR, -1)] * 2, peers=5)[1] is HeartbeatOutcome.SUCCEEDED


# ---------------------------------------------------------------------------------------------
# The dispatcher: COMPARE answers, one case per row of COMPARE_TABLE

def compare(ci, code, fb, fe, lb=0, le=10):
    return core.decide_compare(compare_index=ci, code=code, follower_begin=fb, follower_end=fe, leader_begin=lb,
                               leader_end=le)


@pytest.mark.parametrize("args, row, next_type, index", [
    ((10, Code.SUCCESS, 0, 10), 1, PushEntryType.APPEND, 10),
    ((8, Code.SUCCESS, 0, 12), 2, PushEntryType.TRUNCATE, 8),
    ((10, Code.INCONSISTENT_STATE, 20, 30, 0, 10), 3, PushEntryType.TRUNCATE, 0),
    ((4, Code.INCONSISTENT_STATE, 5, 30, 3, 10), 4, PushEntryType.TRUNCATE, 3),
    ((2, Code.INCONSISTENT_STATE, 5, 30, 0, 10), 4, PushEntryType.TRUNCATE, 0),
    ((10, Code.INCONSISTENT_STATE, 0, 4), 5, PushEntryType.COMPARE, 4),
    ((10, Code.INCONSISTENT_STATE, 0, 12), 6, PushEntryType.COMPARE, 9),
    ((3, Code.INCONSISTENT_STATE, 0, 12, 3, 10), 7, PushEntryType.TRUNCATE, 3),
])
def test_compare_rows(args, row, next_type, index):
    decision = compare(*args)
    assert (decision.row, decision.next_type, decision.index) == (row, next_type, index)


def test_compare_walk_from_a_diverged_follower_ends_in_truncate_then_append():
    """Leader log terms [1,1,1,2,2] (0..4), follower [1,1,1,1,1,1,1] (0..6): walk back to index 2."""
    leader = {i: t for i, t in enumerate([1, 1, 1, 2, 2])}
    follower = {i: t for i, t in enumerate([1, 1, 1, 1, 1, 1, 1])}
    ci = core.revise_compare_index(-1, 0, 4)
    steps = []
    while True:
        code = Code.SUCCESS if follower.get(ci) == leader[ci] else Code.INCONSISTENT_STATE
        decision = compare(ci, code, 0, max(follower), 0, max(leader))
        steps.append((ci, decision.row))
        if decision.next_type is not PushEntryType.COMPARE:
            break
        ci = decision.index
    assert steps == [(4, 6), (3, 6), (2, 2)]
    assert decision.next_type is PushEntryType.TRUNCATE and decision.index == 2
    assert (PushEntryType.TRUNCATE, "TRUNCATE answered SUCCESS") in core.DISPATCHER_TRANSITIONS


def test_revise_compare_index():
    assert core.revise_compare_index(-1, 0, 9) == 9
    assert core.revise_compare_index(12, 0, 9) == 9
    assert core.revise_compare_index(2, 3, 9) == 9
    assert core.revise_compare_index(5, 0, 9) == 5


# ---------------------------------------------------------------------------------------------
# The quorum index

@pytest.mark.parametrize("marks, expected", [
    ({"n0": 9, "n1": 7, "n2": -1}, 7),
    ({"n0": 9, "n1": -1, "n2": -1}, -1),
    ({"n0": 9, "n1": 9, "n2": 3}, 9),
    ({"n0": 10, "n1": 8, "n2": 6, "n3": 4, "n4": -1}, 6),
    ({"n0": 10, "n1": 8, "n2": -1, "n3": -1, "n4": -1}, -1),
    ({"n0": 4}, 4),
])
def test_quorum_index(marks, expected):
    assert core.quorum_index(marks) == expected


def test_is_quorum():
    assert [core.is_quorum(n, 3) for n in range(4)] == [False, False, True, True]
    assert [core.is_quorum(n, 5) for n in range(6)] == [False, False, False, True, True, True]
    assert [core.is_quorum(n, 4) for n in range(5)] == [False, False, False, True, True]


# ---------------------------------------------------------------------------------------------
# The bodies on the wire

def test_request_codes_are_dledgers():
    assert {c.name: int(c) for c in DLedgerRequestCode} == {
        "UNKNOWN": -1, "METADATA": 50000, "APPEND": 50001, "GET": 50002, "VOTE": 51001, "HEART_BEAT": 51002,
        "PULL": 51003, "PUSH": 51004, "LEADERSHIP_TRANSFER": 51005}
    assert DLedgerRequestCode.value_of(12345) is DLedgerRequestCode.UNKNOWN


def test_vote_json_has_fastjsons_getter_names_sorted_without_nulls():
    request = VoteRequest(group="g0", remote_id="n1", local_id="n0", leader_id="n0", term=3, ledger_end_index=7,
                          ledger_end_term=2)
    assert request.encode() == (b'{"code":200,"group":"g0","leaderId":"n0","ledgerEndIndex":7,"ledgerEndTerm":2,'
                                b'"localId":"n0","remoteId":"n1","term":3}')
    response = VoteResponse.of(request)
    response.vote_result = VoteResult.REJECT_TERM_NOT_READY
    assert json.loads(response.encode())["voteResult"] == "REJECT_TERM_NOT_READY"
    assert VoteResponse.decode(response.encode()) == response
    assert HeartBeatResponse().encode() == b'{"code":200,"term":-1}'


def test_push_json_carries_the_computed_getters_and_base64_bodies():
    entry = DLedgerEntry(index=4, term=2, pos=96, body=b"\x00hello\xff")
    entry.compute_size_in_bytes()
    request = PushEntryRequest(group="g0", term=2, leader_id="n0", type=PushEntryType.COMPARE, entry=entry,
                               commit_index=3)
    obj = json.loads(request.encode())
    assert list(obj) == sorted(obj)
    assert obj["entry"] == {"body": "AGhlbGxv/w==", "bodyCrc": 0, "chainCrc": 0, "channel": 0, "index": 4, "magic": 1,
                            "pos": 96, "size": 55, "term": 2}
    assert (obj["batch"], obj["count"], obj["firstEntryIndex"], obj["lastEntryIndex"], obj["totalSize"]) == (
        False, 1, 4, 4, 0)
    assert obj["type"] == "COMPARE" and obj["batchEntry"] == [] and obj["commitIndex"] == 3
    back = PushEntryRequest.decode(request.encode())
    assert back.entry == entry and back.type is PushEntryType.COMPARE and back.commit_index == 3
    # A COMMIT has no entry: the property is left out; the response's null index too.
    assert "entry" not in json.loads(PushEntryRequest(type=PushEntryType.COMMIT).encode())
    assert "index" not in json.loads(PushEntryResponse().encode())
    assert json.loads(AppendEntryRequest(body=b"abc").encode())["body"] == "YWJj"


def test_batch_push_round_trip_and_order_check():
    request = PushEntryRequest(type=PushEntryType.APPEND)
    for i in (5, 6, 7):
        e = DLedgerEntry(index=i, term=1, body=b"x")
        e.compute_size_in_bytes()
        request.add_entry(e)
    assert (request.get_first_entry_index(), request.get_last_entry_index(), request.get_count(),
            request.total_size) == (5, 7, 3, 147)
    back = PushEntryRequest.decode(request.encode())
    assert [e.index for e in back.batch_entry] == [5, 6, 7] and back.is_batch()
    with pytest.raises(Exception, match="wrong order"):
        request.add_entry(DLedgerEntry(index=9))


def test_metadata_and_transfer_bodies():
    body = json.loads(MetadataResponse(group="g", peers={"n0": "a:1", "n1": "b:2"}, leader_id="n1").encode())
    assert body["peers"] == {"n0": "a:1", "n1": "b:2"} and body["leaderId"] == "n1"
    transfer = LeadershipTransferRequest(transfer_id="n0", transferee_id="n2", take_leadership_ledger_index=8, term=3)
    assert LeadershipTransferRequest.decode(transfer.encode()) == transfer
    assert set(json.loads(transfer.encode())) >= {"transferId", "transfereeId", "takeLeadershipLedgerIndex"}


def test_bad_bodies_are_refused_with_the_field_named():
    with pytest.raises(ValueError, match="voteResult"):
        VoteResponse.decode(b'{"voteResult":"MAYBE"}')
    with pytest.raises(ValueError, match="term"):
        VoteRequest.decode(b'{"term":"x"}')
    with pytest.raises(ValueError, match="body"):
        AppendEntryRequest.decode(b'{"body":"***"}')
    with pytest.raises(ValueError):
        PushEntryRequest.decode(b"[1]")


# ---------------------------------------------------------------------------------------------
# The follower's EntryHandler on COMPARE, TRUNCATE and APPEND (no network: its queue is driven directly)

class _FakeNode:
    """The little of a Node the EntryHandler uses: a clock, a log, a trace."""

    def __init__(self):
        import logging
        self.loop = None
        self.log = logging.getLogger("test-dledger")
        self.time = 0

    def now_ms(self):
        return self.time

    def trace(self, kind, **fields):
        pass


def _follower(tmp_path, bodies):
    from rmqlab.dledger.dledger_config import DLedgerConfig
    from rmqlab.dledger.dledger_entry_pusher import DLedgerEntryPusher
    from rmqlab.dledger.member_state import MemberState
    from rmqlab.dledger.store.dledger_memory_store import DLedgerMemoryStore

    config = DLedgerConfig(group="g", self_id="n1", peers="n0-h:1;n1-h:2;n2-h:3", store_base_dir=str(tmp_path))
    state = MemberState(config)
    state.curr_term = 2
    state.change_to_follower(2, "n0")
    store = DLedgerMemoryStore(config, state)
    for i, (term, body) in enumerate(bodies):
        store.append_as_follower(DLedgerEntry(index=i, term=term, body=body), 2, "n0")
    return DLedgerEntryPusher(config, state, store, rpc=None, node=_FakeNode()), store


def _push(pusher, type_, index, term, body, commit_index=-1):
    import asyncio

    async def run():
        future = pusher.handle_push(PushEntryRequest(group="g", remote_id="n1", leader_id="n0", term=2, type=type_,
                                                     entry=DLedgerEntry(index=index, term=term, body=body),
                                                     commit_index=commit_index))
        await pusher.entry_handler.do_work()
        return future.result()

    return asyncio.run(run())


def test_follower_compare_answers_whether_its_entry_equals_the_leaders(tmp_path):
    pusher, store = _follower(tmp_path, [(1, b"a"), (1, b"b"), (1, b"stale")])
    same = _push(pusher, PushEntryType.COMPARE, 1, 1, b"b")
    assert (same.code, same.begin_index, same.end_index, same.index) == (Code.SUCCESS, 0, 2, 1)
    # Same index and term but another body: DLedgerEntry.equals compares the bodies.
    assert _push(pusher, PushEntryType.COMPARE, 2, 1, b"other").code == Code.INCONSISTENT_STATE
    assert _push(pusher, PushEntryType.COMPARE, 2, 2, b"stale").code == Code.INCONSISTENT_STATE
    assert _push(pusher, PushEntryType.COMPARE, 7, 1, b"x").code == Code.INCONSISTENT_STATE  # beyond its end


def test_follower_truncate_then_append_replaces_its_tail(tmp_path):
    pusher, store = _follower(tmp_path, [(1, b"a"), (1, b"b"), (1, b"stale")])
    truncated = _push(pusher, PushEntryType.TRUNCATE, 1, 1, b"b")
    assert truncated.code == Code.SUCCESS and store.get_ledger_end_index() == 1
    appended = _push(pusher, PushEntryType.APPEND, 2, 2, b"new")
    assert appended.code == Code.SUCCESS and store.get(2).body == b"new" and store.get(2).term == 2
    # An APPEND that does not continue the log is parked, not applied.
    import asyncio

    async def park():
        future = pusher.entry_handler.handle_push(PushEntryRequest(
            group="g", remote_id="n1", leader_id="n0", term=2, type=PushEntryType.APPEND,
            entry=DLedgerEntry(index=5, term=2, body=b"gap")))
        await pusher.entry_handler.do_work()
        return future.done()

    assert asyncio.run(park()) is False and 5 in pusher.entry_handler.write_request_map
    # A COMPARE clears the parked APPENDs (the leader starts over).
    assert _push(pusher, PushEntryType.COMPARE, 2, 2, b"new").code == Code.SUCCESS
    assert pusher.entry_handler.write_request_map == {}
