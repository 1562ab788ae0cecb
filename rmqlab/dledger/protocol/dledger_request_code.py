"""DLedgerRequestCode (io.openmessaging.storage.dledger.protocol.DLedgerRequestCode, 0.3.1.2).

The remoting request codes DLedger's members send each other. They ride on RocketMQ remoting as a
command whose `code` is one of these, with no extFields and the request object's JSON as the body.
"""

from __future__ import annotations

import enum


class DLedgerRequestCode(enum.IntEnum):
    UNKNOWN = -1
    METADATA = 50000
    APPEND = 50001
    GET = 50002
    VOTE = 51001
    HEART_BEAT = 51002
    PULL = 51003
    PUSH = 51004
    LEADERSHIP_TRANSFER = 51005

    @classmethod
    def value_of(cls, code: int) -> DLedgerRequestCode:
        """DLedgerRequestCode.valueOf(int): an unknown number reads as UNKNOWN."""
        try:
            return cls(code)
        except ValueError:
            return cls.UNKNOWN
