"""DLedgerEntry (io.openmessaging.storage.dledger.entry.DLedgerEntry, 0.3.1.2).

One Raft log entry as DLedger stores it: a 48-byte header, then the body. In DLedger CommitLog
mode the body is one message in RocketMQ's commitlog format.

    off  field      type
    0    magic      int   1 (MAGIC_1)
    4    size       int   48 + body length
    8    index      long  0-based, contiguous
    16   term       long
    24   pos        long  absolute offset of this entry in the data files
    32   channel    int   reserved, 0
    36   chainCrc   int   never computed by 0.3.1.2: 0
    40   bodyCrc    int   never computed by 0.3.1.2: 0
    44   bodySize   int
    48   body
"""

from __future__ import annotations

import dataclasses

MAGIC_1 = 1
POS_OFFSET = 4 + 4 + 8 + 8
HEADER_SIZE = POS_OFFSET + 8 + 4 + 4 + 4
BODY_OFFSET = HEADER_SIZE + 4


@dataclasses.dataclass(eq=False)
class DLedgerEntry:
    magic: int = MAGIC_1
    size: int = 0
    index: int = -1
    term: int = -1
    pos: int = -1
    channel: int = 0
    chain_crc: int = 0
    body_crc: int = 0
    body: bytes = b""

    def compute_size_in_bytes(self) -> int:
        self.size = BODY_OFFSET + len(self.body)
        return self.size

    def __eq__(self, other: object) -> bool:
        """DLedgerEntry.equals: size, magic, index, term, channel, pos and the body bytes.

        chainCrc and bodyCrc are not compared (0.3.1.2 never fills them). The leader's COMPARE and
        TRUNCATE steps decide with this equality whether a follower's entry is the leader's.
        """
        if not isinstance(other, DLedgerEntry):
            return NotImplemented
        return (self.size, self.magic, self.index, self.term, self.channel, self.pos, self.body) == (
            other.size, other.magic, other.index, other.term, other.channel, other.pos, other.body)

    __hash__ = None  # type: ignore[assignment]  # mutable, compared by value
