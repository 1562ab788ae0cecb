"""DLedgerMemoryStore (io.openmessaging.storage.dledger.store.DLedgerMemoryStore, 0.3.1.2).

DLedger's in-memory log, as DLedger has it: entries in a dict, nothing on disk. Like DLedger's,
it moves its committed index with every append (leader or follower) — it is a store for testing
the election and the pusher, whose quorum is computed from the followers' watermarks, not from the
store's committed index. The broker in DLedger CommitLog mode uses the mapped-file store.
It does not fill `pos` or `size` either, as DLedger's does not.
"""

from __future__ import annotations

from rmqlab.dledger.dledger_config import DLedgerConfig
from rmqlab.dledger.entry.dledger_entry import DLedgerEntry
from rmqlab.dledger.member_state import MemberState
from rmqlab.dledger.protocol.dledger_response_code import DLedgerResponseCode, DLedgerException, check
from rmqlab.dledger.store.dledger_store import DLedgerStore


class DLedgerMemoryStore(DLedgerStore):
    def __init__(self, dledger_config: DLedgerConfig, member_state: MemberState):
        self.dledger_config = dledger_config
        self.member_state = member_state
        self.ledger_begin_index = -1
        self.ledger_end_index = -1
        self.committed_index = -1
        self.ledger_end_term = -1
        self.cached_entries: dict[int, DLedgerEntry] = {}

    def get_member_state(self) -> MemberState:
        return self.member_state

    def append_as_leader(self, entry: DLedgerEntry) -> DLedgerEntry:
        ms = self.member_state
        check(ms.is_leader(), DLedgerResponseCode.NOT_LEADER, f"{ms.self_id} is not the leader")
        check(ms.transferee is None, DLedgerResponseCode.LEADER_TRANSFERRING, f"transferring to {ms.transferee}")
        self.ledger_end_index += 1
        self.committed_index += 1
        self.ledger_end_term = ms.curr_term
        entry.index = self.ledger_end_index
        entry.term = ms.curr_term
        self.cached_entries[entry.index] = entry
        if self.ledger_begin_index == -1:
            self.ledger_begin_index = self.ledger_end_index
        self.update_ledger_end_index_and_term()
        return entry

    def truncate(self, entry: DLedgerEntry, leader_term: int, leader_id: str) -> int:
        return self.append_as_follower(entry, leader_term, leader_id).index

    def append_as_follower(self, entry: DLedgerEntry, leader_term: int, leader_id: str) -> DLedgerEntry:
        ms = self.member_state
        check(ms.is_follower(), DLedgerResponseCode.NOT_FOLLOWER, f"{ms.self_id} is not a follower")
        check(leader_term == ms.curr_term, DLedgerResponseCode.INCONSISTENT_TERM, f"{leader_term} != {ms.curr_term}")
        check(leader_id == ms.leader_id, DLedgerResponseCode.INCONSISTENT_LEADER, f"{leader_id} != {ms.leader_id}")
        self.ledger_end_term = entry.term
        self.ledger_end_index = entry.index
        self.committed_index = entry.index
        self.cached_entries[entry.index] = entry
        if self.ledger_begin_index == -1:
            self.ledger_begin_index = self.ledger_end_index
        self.update_ledger_end_index_and_term()
        return entry

    def get(self, index: int) -> DLedgerEntry:
        entry = self.cached_entries.get(index)
        if entry is None:
            # DLedger's returns null; callers here get the code the mapped-file store answers with.
            raise DLedgerException(DLedgerResponseCode.INDEX_OUT_OF_RANGE, f"no entry {index}")
        return entry

    def get_ledger_end_index(self) -> int:
        return self.ledger_end_index

    def get_ledger_begin_index(self) -> int:
        return self.ledger_begin_index

    def get_committed_index(self) -> int:
        return self.committed_index

    def get_ledger_end_term(self) -> int:
        return self.ledger_end_term
