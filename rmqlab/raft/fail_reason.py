"""FailReason and RaftError: how a replicated write ends when it does not succeed.

pysyncobj calls a write's callback with `(result, failReason)`, failReason one of the integers of
`pysyncobj.config.FAIL_REASON`. `FailReason` is the same set as an enum (so traces and test
failures show names, not numbers); `RaftError` is what an awaited write raises for every reason
other than SUCCESS.

What the reasons mean for the caller (pysyncobj 0.3.17, syncobj.py):

  QUEUE_FULL       the replica's command queue (commandsQueueSize) is full: not appended anywhere
  MISSING_LEADER   no leader known and commandsWaitLeader is off: not appended anywhere
  DISCARDED        the entry was appended by a leader, but another entry was committed at its
                   index (a newer leader overwrote it): certainly not applied
  NOT_LEADER       forwarded to a node that was no longer leader: not appended
  LEADER_CHANGED   the leader changed while a forwarded write waited for its log index: the
                   outcome is unknown (it may still commit)
  REQUEST_DENIED   a membership or leadership request was refused
  UNKNOWN_OUTCOME  the replica cannot tell whether it was applied (rmqlab also uses it when the
                   replica that held the write crashed before it completed)
"""

from __future__ import annotations

import enum

from pysyncobj.config import FAIL_REASON


class FailReason(enum.IntEnum):
    SUCCESS = FAIL_REASON.SUCCESS
    QUEUE_FULL = FAIL_REASON.QUEUE_FULL
    MISSING_LEADER = FAIL_REASON.MISSING_LEADER
    DISCARDED = FAIL_REASON.DISCARDED
    NOT_LEADER = FAIL_REASON.NOT_LEADER
    LEADER_CHANGED = FAIL_REASON.LEADER_CHANGED
    REQUEST_DENIED = FAIL_REASON.REQUEST_DENIED
    UNKNOWN_OUTCOME = FAIL_REASON.UNKNOWN_OUTCOME

    @property
    def certainly_not_applied(self) -> bool:
        """True when the write can safely be retried: no replica will ever apply it."""
        return self in (FailReason.QUEUE_FULL, FailReason.MISSING_LEADER, FailReason.DISCARDED,
                        FailReason.NOT_LEADER, FailReason.REQUEST_DENIED)


class RaftError(Exception):
    """A replicated write that did not succeed; `reason` says why (a FailReason)."""

    def __init__(self, reason: FailReason, detail: str = ""):
        self.reason = FailReason(reason)
        self.detail = detail
        super().__init__(f"{self.reason.name}{': ' + detail if detail else ''}")
