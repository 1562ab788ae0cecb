"""DLedgerStore (io.openmessaging.storage.dledger.store.DLedgerStore, 0.3.1.2): the log a member keeps.

The leader appends with `append_as_leader` (the store assigns index, term and pos), a follower
with `append_as_follower` (the entry arrives with them, and must be the next index of the same
term's leader); `truncate` makes a follower's log end at the leader's entry; `update_committed_index`
moves the commit point, which only ever grows. Every append and truncate updates the member
state's ledger end (index and term), which the election's vote checks read.
"""

from __future__ import annotations

import abc
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from rmqlab.dledger.entry.dledger_entry import DLedgerEntry
    from rmqlab.dledger.member_state import MemberState


class DLedgerStore(abc.ABC):
    def get_member_state(self) -> MemberState | None:
        return None

    @abc.abstractmethod
    def append_as_leader(self, entry: DLedgerEntry) -> DLedgerEntry:
        """Assign index = end + 1, term = the member's term, pos; write; return the stored entry.

        Raises DLedgerException(NOT_LEADER) unless the member leads, DISK_FULL when the disk is full.
        """

    @abc.abstractmethod
    def append_as_follower(self, entry: DLedgerEntry, leader_term: int, leader_id: str) -> DLedgerEntry:
        """Write the leader's entry as is. Raises DLedgerException(NOT_FOLLOWER / INCONSISTENT_TERM /
        INCONSISTENT_LEADER / INCONSISTENT_INDEX / INCONSISTENT_STATE) as DLedger does."""

    @abc.abstractmethod
    def get(self, index: int) -> DLedgerEntry:
        """The entry at `index`. Raises DLedgerException(INDEX_OUT_OF_RANGE) outside [begin, end]."""

    @abc.abstractmethod
    def get_committed_index(self) -> int: ...

    def update_committed_index(self, term: int, committed_index: int) -> None:  # noqa: B027
        """DLedgerStore's default does nothing; the stores override it."""

    @abc.abstractmethod
    def get_ledger_end_term(self) -> int: ...

    @abc.abstractmethod
    def get_ledger_end_index(self) -> int: ...

    @abc.abstractmethod
    def get_ledger_begin_index(self) -> int: ...

    def update_ledger_end_index_and_term(self) -> None:
        member_state = self.get_member_state()
        if member_state is not None:
            member_state.update_ledger_index_and_term(self.get_ledger_end_index(), self.get_ledger_end_term())

    def flush(self) -> None:  # noqa: B027
        """Make what was written durable (the mapped-file store flushes; memory has nothing to do)."""

    def truncate(self, entry: DLedgerEntry, leader_term: int, leader_id: str) -> int:
        """Make the log end at the leader's `entry` (kept if equal, else written); return the new end
        index. DLedgerStore's default answers -1 (not supported)."""
        return -1

    def startup(self) -> None:  # noqa: B027
        """Load and recover (the mapped-file store); start background flushing."""

    def shutdown(self) -> None:  # noqa: B027
        """Flush and write the checkpoint."""
