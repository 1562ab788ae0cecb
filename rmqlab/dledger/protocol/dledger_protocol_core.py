"""DLedger's protocol decisions as tables and pure functions, without sockets or clocks.

Theory of operation
-------------------
A DLedger group is 2f+1 members, each with a MemberState (role, term, vote, leader, ledger end)
and a log (DLedgerStore). Two mechanisms run on every member:

* **Election** (DLedgerLeaderElector). A member starts as CANDIDATE with the term it persisted. A
  candidate asks every member, itself included, for a vote (VOTE) carrying its term and its
  ledger end (index, term); each voter answers with a VoteResult (handle_vote, VOTE_TABLE: the log
  checks come *before* the term check, and a voter that sees a larger term does not vote but
  becomes candidate of that term and answers REJECT_TERM_NOT_READY). The candidate tallies
  (VoteTally, parse_vote_result, TALLY_TABLE): a quorum of ACCEPT makes it LEADER; otherwise it
  waits a random 300-1000 ms (more when a leader exists or its log is behind) and tries again,
  bumping its term only after WAIT_TO_VOTE_NEXT. There is no pre-vote. A leader sends HEART_BEAT
  every 2 s (heartbeat handling: HEART_BEAT_TABLE); without a quorum of successes for 6 s it steps
  down (heartbeat_outcome, HEARTBEAT_OUTCOME_TABLE). A follower that hears no heartbeat for 6 s
  becomes candidate.

* **Replication** (DLedgerEntryPusher). The leader appends to its own log and parks an
  AppendFuture; one EntryDispatcher per follower pushes entries (PUSH). After a term or leader
  change a dispatcher first finds where the follower's log agrees with its own: COMPARE walks
  back from the leader's end (decide_compare, COMPARE_TABLE), TRUNCATE makes the follower's log
  end at the agreed entry, then APPEND streams from there; any error or INCONSISTENT_STATE goes
  back to COMPARE (DISPATCHER_TRANSITIONS). Each follower's acknowledged index is its *watermark*
  (per term; the leader's own is its ledger end). The QuorumAckChecker takes the watermark a
  majority has reached (quorum_index) as the commit index and completes the futures up to it;
  futures that wait longer than maxWaitAckTimeMs complete with WAIT_QUORUM_ACK_TIMEOUT.

This module holds each of those decisions as a function of plain values, with its table; the
elector, the pusher and the server (dledger_leader_elector, dledger_entry_pusher, dledger_server)
gather the values, call these and perform the actions. Row numbers in the tables are the order in
which DLedger checks the conditions: the first row that matches decides.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from rmqlab.dledger.protocol.dledger_protocol_bodies import ParseResult, PushEntryType, VoteResult
from rmqlab.dledger.protocol.dledger_response_code import DLedgerResponseCode as Code

__all__ = [
    "is_quorum", "HeartBeatAction", "HeartBeatDecision", "HEART_BEAT_TABLE", "handle_heart_beat",
    "VoteAction", "VoteDecision", "VOTE_TABLE", "handle_vote", "VoteTally", "NextVote", "TallyDecision",
    "TALLY_TABLE", "parse_vote_result", "HeartbeatTally", "HeartbeatOutcome", "HEARTBEAT_OUTCOME_TABLE",
    "heartbeat_outcome", "CompareDecision", "COMPARE_TABLE", "decide_compare", "revise_compare_index",
    "DISPATCHER_TRANSITIONS", "quorum_index",
]


def is_quorum(num: int, peer_size: int) -> bool:
    """MemberState.isQuorum: num >= peers/2 + 1."""
    return num >= peer_size // 2 + 1


# ---------------------------------------------------------------------------------------------
# HEART_BEAT on the receiver (DLedgerLeaderElector.handleHeartBeat)

class HeartBeatAction(enum.Enum):
    NONE = "none"
    REFRESH = "refresh"                  # lastLeaderHeartBeatTime := now
    BECOME_FOLLOWER = "become_follower"  # changeRoleToFollower(term, leaderId)
    BECOME_CANDIDATE = "become_candidate"  # changeRoleToCandidate(term); needIncreaseTermImmediately


@dataclass(frozen=True)
class HeartBeatDecision:
    row: int
    code: Code
    term: int   # the response's term: the receiver's for the rejections, -1 (new HeartBeatResponse()) else
    action: HeartBeatAction


HEART_BEAT_TABLE: tuple[tuple[int, str, Code, str, HeartBeatAction], ...] = (
    # row, condition, code, response term, action
    (1, "leaderId is not a peer", Code.UNKNOWN_MEMBER, "currTerm", HeartBeatAction.NONE),
    (2, "leaderId is this member", Code.UNEXPECTED_MEMBER, "currTerm", HeartBeatAction.NONE),
    (3, "term < currTerm", Code.EXPIRED_TERM, "currTerm", HeartBeatAction.NONE),
    (4, "term == currTerm, leaderId == my leader", Code.SUCCESS, "-1", HeartBeatAction.REFRESH),
    (5, "term == currTerm, no leader known", Code.SUCCESS, "-1", HeartBeatAction.BECOME_FOLLOWER),
    (6, "term == currTerm, another leader known", Code.INCONSISTENT_LEADER, "-1", HeartBeatAction.NONE),
    (7, "term > currTerm", Code.TERM_NOT_READY, "-1", HeartBeatAction.BECOME_CANDIDATE),
)


def handle_heart_beat(*, self_id: str, peers: Iterable[str], curr_term: int, leader_id: str | None,
                      request_leader_id: str | None, request_term: int) -> HeartBeatDecision:
    """The receiver's answer to a HEART_BEAT (HEART_BEAT_TABLE). Row 7 is DLedger's "to make it
    simple": a member that sees a larger term does not follow at once; it becomes candidate of that
    term, bumps its own term on the elector's next pass, and follows on the next heartbeat."""
    def decide(row: int) -> HeartBeatDecision:
        _, _, code, term, action = HEART_BEAT_TABLE[row - 1]
        return HeartBeatDecision(row, code, curr_term if term == "currTerm" else -1, action)

    if request_leader_id is None or request_leader_id not in set(peers):
        return decide(1)
    if request_leader_id == self_id:
        return decide(2)
    if request_term < curr_term:
        return decide(3)
    if request_term == curr_term:
        if request_leader_id == leader_id:
            return decide(4)
        if leader_id is None:
            return decide(5)
        return decide(6)
    return decide(7)


# ---------------------------------------------------------------------------------------------
# VOTE on the voter (DLedgerLeaderElector.handleVote)

class VoteAction(enum.Enum):
    NONE = "none"
    STEP_DOWN = "step_down"  # changeRoleToCandidate(request term); needIncreaseTermImmediately
    ACCEPT = "accept"        # setCurrVoteFor(candidate), persisted


@dataclass(frozen=True)
class VoteDecision:
    row: int
    result: VoteResult
    term: int  # the response's term
    action: VoteAction


VOTE_TABLE: tuple[tuple[int, str, VoteResult, str, VoteAction], ...] = (
    # row, condition, result, response term, action
    (1, "leaderId (the candidate) is not a peer", VoteResult.REJECT_UNKNOWN_LEADER, "currTerm", VoteAction.NONE),
    (2, "candidate is this member, not its self-vote", VoteResult.REJECT_UNEXPECTED_LEADER, "currTerm",
     VoteAction.NONE),
    (3, "request ledgerEndTerm < mine", VoteResult.REJECT_EXPIRED_LEDGER_TERM, "currTerm", VoteAction.NONE),
    (4, "equal ledgerEndTerm, request ledgerEndIndex < mine", VoteResult.REJECT_SMALL_LEDGER_END_INDEX, "currTerm",
     VoteAction.NONE),
    (5, "request term < currTerm", VoteResult.REJECT_EXPIRED_VOTE_TERM, "currTerm", VoteAction.NONE),
    (6, "equal term, voted for another, a leader is known", VoteResult.REJECT_ALREADY_HAS_LEADER, "currTerm",
     VoteAction.NONE),
    (7, "equal term, voted for another, no leader known", VoteResult.REJECT_ALREADY_VOTED, "currTerm",
     VoteAction.NONE),
    (8, "request term > currTerm", VoteResult.REJECT_TERM_NOT_READY, "currTerm", VoteAction.STEP_DOWN),
    (9, "request term < my ledgerEndTerm", VoteResult.REJECT_TERM_SMALL_THAN_LEDGER, "ledgerEndTerm",
     VoteAction.NONE),
    (10, "not self, taking leadership, my log >= the candidate's", VoteResult.REJECT_TAKING_LEADERSHIP,
     "currTerm", VoteAction.NONE),
    (11, "otherwise", VoteResult.ACCEPT, "currTerm", VoteAction.ACCEPT),
)


def handle_vote(*, self_id: str, peers: Iterable[str], curr_term: int, curr_vote_for: str | None,
                leader_id: str | None, ledger_end_term: int, ledger_end_index: int, taking_leadership: bool,
                request_leader_id: str | None, request_term: int, request_ledger_end_term: int,
                request_ledger_end_index: int, is_self: bool) -> VoteDecision:
    """The voter's answer (VOTE_TABLE; DLedger's rows 6 and 7 are one `if` with two results).

    The log checks (rows 3-4) precede the term check: a candidate with a stale log but a larger
    term is refused without the voter adopting its term. A voter that sees a larger term (row 8)
    never votes in the same breath: it becomes candidate of that term and answers
    REJECT_TERM_NOT_READY, and the candidate revotes at once when ACCEPT + NOT_READY is a quorum.
    """
    def decide(row: int) -> VoteDecision:
        _, _, result, term, action = VOTE_TABLE[row - 1]
        return VoteDecision(row, result, ledger_end_term if term == "ledgerEndTerm" else curr_term, action)

    if request_leader_id is None or request_leader_id not in set(peers):
        return decide(1)
    if not is_self and request_leader_id == self_id:
        return decide(2)
    if request_ledger_end_term < ledger_end_term:
        return decide(3)
    if request_ledger_end_term == ledger_end_term and request_ledger_end_index < ledger_end_index:
        return decide(4)
    if request_term < curr_term:
        return decide(5)
    if request_term == curr_term:
        if curr_vote_for is not None and curr_vote_for != request_leader_id:
            return decide(6) if leader_id is not None else decide(7)
    else:
        return decide(8)
    if request_term < ledger_end_term:
        return decide(9)
    if (not is_self and taking_leadership and request_ledger_end_term == ledger_end_term
            and ledger_end_index >= request_ledger_end_index):
        return decide(10)
    return decide(11)


# ---------------------------------------------------------------------------------------------
# The candidate's tally (DLedgerLeaderElector.maintainAsCandidate)

@dataclass
class VoteTally:
    """The counters of one round of votes, updated per response (the candidate's own included)."""
    term: int
    all_num: int = 0
    valid_num: int = 0
    accepted_num: int = 0
    not_ready_term_num: int = 0
    bigger_ledger_num: int = 0
    already_has_leader: bool = False
    known_max_term_in_group: int = -1

    def __post_init__(self) -> None:
        if self.known_max_term_in_group < self.term:
            self.known_max_term_in_group = self.term

    def add(self, result: VoteResult, term: int) -> None:
        """Count one response: its result and the term it carries."""
        if result is not VoteResult.UNKNOWN:  # a transport failure answers UNKNOWN: not valid
            self.valid_num += 1
        if result is VoteResult.ACCEPT:
            self.accepted_num += 1
        elif result is VoteResult.REJECT_ALREADY_HAS_LEADER:
            self.already_has_leader = True
        elif result in (VoteResult.REJECT_TERM_SMALL_THAN_LEDGER, VoteResult.REJECT_EXPIRED_VOTE_TERM):
            self.known_max_term_in_group = max(self.known_max_term_in_group, term)
        elif result in (VoteResult.REJECT_EXPIRED_LEDGER_TERM, VoteResult.REJECT_SMALL_LEDGER_END_INDEX):
            self.bigger_ledger_num += 1
        elif result is VoteResult.REJECT_TERM_NOT_READY:
            self.not_ready_term_num += 1
        self.all_num += 1

    def can_decide(self, peer_size: int) -> bool:
        """The vote latch opens early: a leader is known, ACCEPT (or ACCEPT + NOT_READY) is a quorum, or
        every member answered."""
        return (self.already_has_leader or is_quorum(self.accepted_num, peer_size)
                or is_quorum(self.accepted_num + self.not_ready_term_num, peer_size) or self.all_num == peer_size)


class NextVote(enum.Enum):
    """When the candidate asks again, relative to getNextTimeToRequestVote() (now + 300..1000 ms)."""
    RANDOM = "now + rand(min..max vote interval)"
    RANDOM_PLUS_LEAK = "now + rand + heartBeatTimeIntervalMs * maxHeartBeatLeak"
    RANDOM_PLUS_MAX = "now + rand + maxVoteIntervalMs"
    UNCHANGED = "unchanged (already due: revote on the next pass)"
    NONE = "no more votes: leader"


@dataclass(frozen=True)
class TallyDecision:
    row: int
    result: ParseResult
    next_vote: NextVote
    adopt_term: int | None = None  # changeRoleToCandidate(knownMaxTermInGroup)


TALLY_TABLE: tuple[tuple[int, str, ParseResult, NextVote], ...] = (
    (1, "knownMaxTermInGroup > term (a voter has a larger term)", ParseResult.WAIT_TO_VOTE_NEXT, NextVote.RANDOM),
    (2, "some voter answered REJECT_ALREADY_HAS_LEADER", ParseResult.WAIT_TO_REVOTE, NextVote.RANDOM_PLUS_LEAK),
    (3, "valid answers are not a quorum", ParseResult.WAIT_TO_REVOTE, NextVote.RANDOM),
    (4, "valid minus bigger-ledger answers are not a quorum", ParseResult.WAIT_TO_REVOTE, NextVote.RANDOM_PLUS_MAX),
    (5, "ACCEPT is a quorum", ParseResult.PASSED, NextVote.NONE),
    (6, "ACCEPT + REJECT_TERM_NOT_READY is a quorum", ParseResult.REVOTE_IMMEDIATELY, NextVote.UNCHANGED),
    (7, "otherwise", ParseResult.WAIT_TO_VOTE_NEXT, NextVote.RANDOM),
)


def parse_vote_result(tally: VoteTally, peer_size: int) -> TallyDecision:
    """What the candidate makes of a round (TALLY_TABLE). WAIT_TO_VOTE_NEXT makes the next round
    bump the term; WAIT_TO_REVOTE and REVOTE_IMMEDIATELY keep it."""
    def decide(row: int, adopt: int | None = None) -> TallyDecision:
        _, _, result, next_vote = TALLY_TABLE[row - 1]
        return TallyDecision(row, result, next_vote, adopt)

    if tally.known_max_term_in_group > tally.term:
        return decide(1, tally.known_max_term_in_group)
    if tally.already_has_leader:
        return decide(2)
    if not is_quorum(tally.valid_num, peer_size):
        return decide(3)
    if not is_quorum(tally.valid_num - tally.bigger_ledger_num, peer_size):
        return decide(4)
    if is_quorum(tally.accepted_num, peer_size):
        return decide(5)
    if is_quorum(tally.accepted_num + tally.not_ready_term_num, peer_size):
        return decide(6)
    return decide(7)


# ---------------------------------------------------------------------------------------------
# The leader's heartbeat round (DLedgerLeaderElector.sendHeartbeats)

@dataclass
class HeartbeatTally:
    """One round of heartbeats; the leader counts itself as a success."""
    all_num: int = 1
    succ_num: int = 1
    not_ready_num: int = 0
    max_term: int = -1
    inconsistent_leader: bool = False

    def add(self, code: int, term: int) -> None:
        code = Code.value_of(code)
        if code is Code.SUCCESS:
            self.succ_num += 1
        elif code is Code.EXPIRED_TERM:
            self.max_term = term
        elif code is Code.INCONSISTENT_LEADER:
            self.inconsistent_leader = True
        elif code is Code.TERM_NOT_READY:
            self.not_ready_num += 1
        self.all_num += 1

    def can_decide(self, peer_size: int) -> bool:
        return (is_quorum(self.succ_num, peer_size) or is_quorum(self.succ_num + self.not_ready_num, peer_size)
                or self.all_num == peer_size)


class HeartbeatOutcome(enum.Enum):
    SUCCEEDED = "lastSuccHeartBeatTime := now"
    RESEND_NOW = "lastSendHeartBeatTime := -1 (the next pass sends again)"
    STEP_DOWN_TO_MAX_TERM = "changeRoleToCandidate(maxTerm)"
    STEP_DOWN = "changeRoleToCandidate(term)"
    KEEP = "stay leader, wait for the next round"


HEARTBEAT_OUTCOME_TABLE: tuple[tuple[int, str, HeartbeatOutcome], ...] = (
    (1, "SUCCESS (self included) is a quorum", HeartbeatOutcome.SUCCEEDED),
    (2, "SUCCESS + TERM_NOT_READY is a quorum", HeartbeatOutcome.RESEND_NOW),
    (3, "an EXPIRED_TERM answer carried a larger term", HeartbeatOutcome.STEP_DOWN_TO_MAX_TERM),
    (4, "an answer was INCONSISTENT_LEADER", HeartbeatOutcome.STEP_DOWN),
    (5, "no successful round for more than maxHeartBeatLeak * interval", HeartbeatOutcome.STEP_DOWN),
    (6, "otherwise", HeartbeatOutcome.KEEP),
)


def heartbeat_outcome(tally: HeartbeatTally, *, term: int, peer_size: int, ms_since_last_success: int,
                      heart_beat_time_interval_ms: int, max_heart_beat_leak: int) -> tuple[int, HeartbeatOutcome]:
    """(row, outcome) of a heartbeat round (HEARTBEAT_OUTCOME_TABLE); decided when the latch opens or
    after heartBeatTimeIntervalMs, whichever comes first."""
    if is_quorum(tally.succ_num, peer_size):
        return 1, HeartbeatOutcome.SUCCEEDED
    if is_quorum(tally.succ_num + tally.not_ready_num, peer_size):
        return 2, HeartbeatOutcome.RESEND_NOW
    if tally.max_term > term:
        return 3, HeartbeatOutcome.STEP_DOWN_TO_MAX_TERM
    if tally.inconsistent_leader:
        return 4, HeartbeatOutcome.STEP_DOWN
    if ms_since_last_success > max_heart_beat_leak * heart_beat_time_interval_ms:
        return 5, HeartbeatOutcome.STEP_DOWN
    return 6, HeartbeatOutcome.KEEP


# ---------------------------------------------------------------------------------------------
# The leader's dispatcher per follower (DLedgerEntryPusher.EntryDispatcher)

# (from, event) -> to. changeState(index, target) is the only way the type changes.
DISPATCHER_TRANSITIONS: Mapping[tuple[PushEntryType, str], PushEntryType] = {
    (PushEntryType.APPEND, "term or leader changed"): PushEntryType.COMPARE,
    (PushEntryType.COMPARE, "term or leader changed"): PushEntryType.COMPARE,
    (PushEntryType.TRUNCATE, "term or leader changed"): PushEntryType.COMPARE,
    (PushEntryType.COMPARE, "follower's entry equal, compareIndex == follower end"): PushEntryType.APPEND,
    (PushEntryType.COMPARE, "truncate index found"): PushEntryType.TRUNCATE,
    (PushEntryType.TRUNCATE, "TRUNCATE answered SUCCESS"): PushEntryType.APPEND,
    (PushEntryType.APPEND, "an APPEND answered INCONSISTENT_STATE"): PushEntryType.COMPARE,
    (PushEntryType.APPEND, "exception (then 500 ms sleep)"): PushEntryType.COMPARE,
    (PushEntryType.COMPARE, "exception (then 500 ms sleep)"): PushEntryType.COMPARE,
    (PushEntryType.TRUNCATE, "exception (then 500 ms sleep)"): PushEntryType.COMPARE,
    (PushEntryType.APPEND, "entry below the leader's begin (INDEX_LESS_THAN_LOCAL_BEGIN)"): PushEntryType.COMPARE,
}


def revise_compare_index(compare_index: int, leader_begin: int, leader_end: int) -> int:
    """doCompare's start: -1 means begin at the leader's end; an index outside [begin, end] too."""
    if compare_index == -1 or compare_index > leader_end or compare_index < leader_begin:
        return leader_end
    return compare_index


@dataclass(frozen=True)
class CompareDecision:
    row: int
    next_type: PushEntryType       # APPEND, TRUNCATE, or COMPARE (again, at compare_index)
    index: int                     # APPEND/TRUNCATE: the index to change state at; COMPARE: next compareIndex


COMPARE_TABLE: tuple[tuple[int, str, str], ...] = (
    (1, "SUCCESS and compareIndex == follower end", "APPEND at compareIndex"),
    (2, "SUCCESS, follower has more", "TRUNCATE at compareIndex"),
    (3, "follower's range and the leader's are disjoint", "TRUNCATE at leader begin"),
    (4, "compareIndex < follower begin", "TRUNCATE at leader begin"),
    (5, "compareIndex > follower end", "COMPARE at follower end"),
    (6, "otherwise (the entries differ)", "COMPARE at compareIndex - 1"),
    (7, "rows 5-6 went below the leader's begin", "TRUNCATE at leader begin"),
)


def decide_compare(*, compare_index: int, code: int, follower_begin: int, follower_end: int,
                   leader_begin: int, leader_end: int) -> CompareDecision:
    """The leader's step after a COMPARE answer (COMPARE_TABLE). `code` must be SUCCESS or
    INCONSISTENT_STATE (any other answer is an error: the dispatcher starts over)."""
    if code == Code.SUCCESS:
        if compare_index == follower_end:
            return CompareDecision(1, PushEntryType.APPEND, compare_index)
        return CompareDecision(2, PushEntryType.TRUNCATE, compare_index)
    if follower_end < leader_begin or follower_begin > leader_end:
        return CompareDecision(3, PushEntryType.TRUNCATE, leader_begin)
    if compare_index < follower_begin:
        return CompareDecision(4, PushEntryType.TRUNCATE, leader_begin)
    row, next_index = (5, follower_end) if compare_index > follower_end else (6, compare_index - 1)
    if next_index < leader_begin:
        return CompareDecision(7, PushEntryType.TRUNCATE, leader_begin)
    return CompareDecision(row, PushEntryType.COMPARE, next_index)


# ---------------------------------------------------------------------------------------------
# The commit index (QuorumAckChecker)

def quorum_index(watermarks: Mapping[str, int]) -> int:
    """The index a majority holds: the watermarks (the leader's included) sorted descending, the
    element at size/2. With 3 members the 2nd largest, with 5 the 3rd; -1 entries count."""
    ordered = sorted(watermarks.values(), reverse=True)
    return ordered[len(ordered) // 2]
