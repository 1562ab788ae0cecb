"""DLedgerEntryCoder (io.openmessaging.storage.dledger.entry.DLedgerEntryCoder, 0.3.1.2).

The bytes of an entry and of its index unit, big-endian as Java's ByteBuffer writes them.

Entry (header of 48 bytes, then the body; field table in dledger_entry.py):
magic int, size int, index long, term long, pos long, channel int, chainCrc int, bodyCrc int,
bodySize int, body.

Index unit (DLedgerMmapFileStore.INDEX_UNIT_SIZE = 32 bytes, unit i at i x 32 of the index files):
magic int, pos long, size int, index long, term long — not the entry's field order: pos comes
before size.

Java's coder writes into a reused ByteBuffer and `setPos` / `setIndexTerm` patch that buffer at its
position; here they patch a bytearray at `offset` (0: the start of the encoded entry).
"""

from __future__ import annotations

import struct

from rmqlab.dledger.entry.dledger_entry import BODY_OFFSET, POS_OFFSET, DLedgerEntry

INDEX_UNIT_SIZE = 32

_HEADER = struct.Struct(">iiqqqiiii")  # magic, size, index, term, pos, channel, chainCrc, bodyCrc, bodySize
_INDEX_UNIT = struct.Struct(">iqiqq")  # magic, pos, size, index, term
_LONG = struct.Struct(">q")
_INT = struct.Struct(">i")
assert _HEADER.size == BODY_OFFSET and _INDEX_UNIT.size == INDEX_UNIT_SIZE


def encode(entry: DLedgerEntry) -> bytearray:
    """The entry's bytes; sets `entry.size` (computeSizeInBytes) as Java's encode does."""
    size = entry.compute_size_in_bytes()
    buf = bytearray(size)
    _HEADER.pack_into(buf, 0, entry.magic, size, entry.index, entry.term, entry.pos, entry.channel,
                      entry.chain_crc, entry.body_crc, len(entry.body))
    buf[BODY_OFFSET:] = entry.body
    return buf


def encode_index(pos: int, size: int, magic: int, index: int, term: int) -> bytes:
    """encodeIndex(pos, size, magic, index, term): the 32-byte index unit."""
    return _INDEX_UNIT.pack(magic, pos, size, index, term)


def decode_index(buf, offset: int = 0) -> tuple[int, int, int, int, int]:
    """An index unit as (magic, pos, size, index, term) — what the store reads field by field."""
    return _INDEX_UNIT.unpack_from(buf, offset)


def decode_header(buf, offset: int = 0) -> tuple[int, int, int, int, int, int, int, int, int]:
    """The nine header fields (magic, size, index, term, pos, channel, chainCrc, bodyCrc, bodySize)."""
    return _HEADER.unpack_from(buf, offset)


def decode(buf, read_body: bool = True, offset: int = 0) -> DLedgerEntry:
    """decode(ByteBuffer, readBody). As in Java, the body is read only when bodySize < size."""
    magic, size, index, term, pos, channel, chain_crc, body_crc, body_size = _HEADER.unpack_from(buf, offset)
    entry = DLedgerEntry(magic=magic, size=size, index=index, term=term, pos=pos, channel=channel,
                         chain_crc=chain_crc, body_crc=body_crc)
    if read_body and body_size < size:
        start = offset + BODY_OFFSET
        entry.body = bytes(buf[start:start + body_size])
    return entry


def set_pos(buf: bytearray, pos: int, offset: int = 0) -> None:
    """setPos: write `pos` into the header at POS_OFFSET."""
    _LONG.pack_into(buf, offset + POS_OFFSET, pos)


def get_pos(buf, offset: int = 0) -> int:
    return _LONG.unpack_from(buf, offset + POS_OFFSET)[0]


def set_index_term(buf: bytearray, index: int, term: int, magic: int, offset: int = 0) -> None:
    """setIndexTerm: magic at 0, skip size, index at 8, term at 16."""
    _INT.pack_into(buf, offset, magic)
    _LONG.pack_into(buf, offset + 8, index)
    _LONG.pack_into(buf, offset + 16, term)
