"""DLedgerResponseCode (io.openmessaging.storage.dledger.protocol.DLedgerResponseCode, 0.3.1.2).

DLedger's own result codes. SUCCESS is 200, not RocketMQ remoting's 0: a DLedger response travels
as a remoting command whose `code` is 200 and whose JSON body carries the real result in `code`.
"""

from __future__ import annotations

import enum


class DLedgerResponseCode(enum.IntEnum):
    UNKNOWN = -1
    SUCCESS = 200
    TIMEOUT = 300
    METADATA_ERROR = 301
    NETWORK_ERROR = 302
    UNSUPPORTED = 303
    UNKNOWN_GROUP = 400
    UNKNOWN_MEMBER = 401
    UNEXPECTED_MEMBER = 402
    EXPIRED_TERM = 403
    NOT_LEADER = 404
    NOT_FOLLOWER = 405
    INCONSISTENT_STATE = 406
    INCONSISTENT_TERM = 407
    INCONSISTENT_INDEX = 408
    INCONSISTENT_LEADER = 409
    INDEX_OUT_OF_RANGE = 410
    UNEXPECTED_ARGUMENT = 411
    REPEATED_REQUEST = 412
    REPEATED_PUSH = 413
    DISK_ERROR = 414
    DISK_FULL = 415
    TERM_NOT_READY = 416
    FALL_BEHIND_TOO_MUCH = 417
    TAKE_LEADERSHIP_FAILED = 418
    INDEX_LESS_THAN_LOCAL_BEGIN = 419
    REQUEST_WITH_EMPTY_BODYS = 420
    PUSH_REQUEST_IS_FULL = 421
    INTERNAL_ERROR = 500
    TERM_CHANGED = 501
    WAIT_QUORUM_ACK_TIMEOUT = 502
    LEADER_PENDING_FULL = 503
    ILLEGAL_MEMBER_STATE = 504
    LEADER_NOT_READY = 505
    LEADER_TRANSFERRING = 506

    @classmethod
    def value_of(cls, code: int) -> DLedgerResponseCode:
        """DLedgerResponseCode.valueOf(int): an unknown number reads as UNKNOWN, as in DLedger."""
        try:
            return cls(code)
        except ValueError:
            return cls.UNKNOWN


class DLedgerException(Exception):
    """DLedgerException: a failure that carries the response code the caller answers with."""

    def __init__(self, code: DLedgerResponseCode, message: str):
        super().__init__(f"{code.name}: {message}")
        self.code = code


def check(condition: bool, code: DLedgerResponseCode, message: str) -> None:
    """PreConditions.check: raise DLedgerException(code) unless `condition`."""
    if not condition:
        raise DLedgerException(code, message)
