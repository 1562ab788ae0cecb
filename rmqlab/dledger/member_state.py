"""MemberState (io.openmessaging.storage.dledger.MemberState, 0.3.1.2): who this member is in the group.

Role, term, vote, leader, and the ledger end the vote checks compare. A member starts as CANDIDATE
with the term it persisted (0 when new). `change_to_candidate(t)` does not change the term — it
only raises `known_max_term_in_group`; `next_term()` does the bump (to that known maximum, or +1)
and clears the vote. The term and the vote are persisted to `<root>/currterm` (a Java properties
file with keys currTerm and voteLeader) on every change, as DLedger's IOUtils.string2File writes
it: the old content to `currterm.bak`, the new one to `currterm.tmp`, then renamed into place.
"""

from __future__ import annotations

import enum
import os

from rmqlab.dledger.dledger_config import DLedgerConfig
from rmqlab.dledger.protocol.dledger_response_code import DLedgerResponseCode, check
from rmqlab.dledger.utils.io_utils import file_to_string, string_to_file, string_to_properties

TERM_PERSIST_FILE = "currterm"
TERM_PERSIST_KEY_TERM = "currTerm"
TERM_PERSIST_KEY_VOTE_FOR = "voteLeader"


class Role(enum.Enum):
    UNKNOWN = "UNKNOWN"
    CANDIDATE = "CANDIDATE"
    LEADER = "LEADER"
    FOLLOWER = "FOLLOWER"


def parse_peers(peers: str) -> dict[str, str]:
    """"n0-host:port;n1-host:port" → {id: address}; the id is the text before the first '-'."""
    peer_map: dict[str, str] = {}
    for peer_info in peers.split(";"):
        peer_self_id = peer_info.split("-")[0]
        peer_map[peer_self_id] = peer_info[len(peer_self_id) + 1:]
    return peer_map


class MemberState:
    def __init__(self, config: DLedgerConfig):
        self.dledger_config = config
        self.group = config.group
        self.self_id = config.self_id
        self.peers = config.peers
        self.peer_map = parse_peers(config.peers)
        self.role = Role.CANDIDATE
        self.leader_id: str | None = None
        self.curr_term = 0
        self.curr_vote_for: str | None = None
        self.ledger_end_index = -1
        self.ledger_end_term = -1
        self.known_max_term_in_group = -1
        self.peers_live_table: dict[str, bool] = {}
        self.transferee: str | None = None
        self.term_to_take_leadership = -1
        self._load_term()

    # -- persistence ------------------------------------------------------------------------------

    def _term_file(self) -> str:
        return os.path.join(self.dledger_config.get_default_path(), TERM_PERSIST_FILE)

    def _load_term(self) -> None:
        text = file_to_string(self._term_file())
        if text is None:
            return
        props = string_to_properties(text)
        if TERM_PERSIST_KEY_TERM in props:
            self.curr_term = int(props[TERM_PERSIST_KEY_TERM])
        if TERM_PERSIST_KEY_VOTE_FOR in props:
            self.curr_vote_for = props[TERM_PERSIST_KEY_VOTE_FOR] or None

    def _persist_term(self) -> None:
        string_to_file(f"{TERM_PERSIST_KEY_TERM}={self.curr_term}\n{TERM_PERSIST_KEY_VOTE_FOR}={self.curr_vote_for or ''}\n",
                       self._term_file())

    # -- transitions --------------------------------------------------------------------------------

    def set_curr_vote_for(self, vote_for: str | None) -> None:
        self.curr_vote_for = vote_for
        self._persist_term()

    def next_term(self) -> int:
        check(self.role is Role.CANDIDATE, DLedgerResponseCode.ILLEGAL_MEMBER_STATE, f"{self.role.name} != CANDIDATE")
        if self.known_max_term_in_group > self.curr_term:
            self.curr_term = self.known_max_term_in_group
        else:
            self.curr_term += 1
        self.curr_vote_for = None
        self._persist_term()
        return self.curr_term

    def change_to_leader(self, term: int) -> None:
        check(self.curr_term == term, DLedgerResponseCode.ILLEGAL_MEMBER_STATE, f"{self.curr_term} != {term}")
        self.role = Role.LEADER
        self.leader_id = self.self_id
        self.peers_live_table.clear()

    def change_to_follower(self, term: int, leader_id: str) -> None:
        check(self.curr_term == term, DLedgerResponseCode.ILLEGAL_MEMBER_STATE, f"{self.curr_term} != {term}")
        self.role = Role.FOLLOWER
        self.leader_id = leader_id
        self.transferee = None

    def change_to_candidate(self, term: int) -> None:
        check(term >= self.curr_term, DLedgerResponseCode.ILLEGAL_MEMBER_STATE, f"should {term} >= {self.curr_term}")
        if term > self.known_max_term_in_group:
            self.known_max_term_in_group = term
        # The term itself is promoted by next_term() on the elector's next pass, as in DLedger.
        self.role = Role.CANDIDATE
        self.leader_id = None
        self.transferee = None

    def set_transferee(self, transferee: str | None) -> None:
        check(self.role is Role.LEADER, DLedgerResponseCode.ILLEGAL_MEMBER_STATE, f"{self.self_id} is not leader")
        self.transferee = transferee

    # -- queries ------------------------------------------------------------------------------------

    def get_self_addr(self) -> str:
        return self.peer_map[self.self_id]

    def get_leader_addr(self) -> str | None:
        return self.peer_map.get(self.leader_id) if self.leader_id else None

    def get_peer_addr(self, peer_id: str) -> str | None:
        return self.peer_map.get(peer_id)

    def is_leader(self) -> bool:
        return self.role is Role.LEADER

    def is_follower(self) -> bool:
        return self.role is Role.FOLLOWER

    def is_candidate(self) -> bool:
        return self.role is Role.CANDIDATE

    def peer_size(self) -> int:
        return len(self.peer_map)

    def is_quorum(self, num: int) -> bool:
        return num >= self.peer_size() // 2 + 1

    def is_peer_member(self, peer_id: str | None) -> bool:
        return peer_id is not None and peer_id in self.peer_map

    def update_ledger_index_and_term(self, index: int, term: int) -> None:
        self.ledger_end_index = index
        self.ledger_end_term = term
