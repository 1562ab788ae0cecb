"""SYSFLAG bits of a stored message (RocketMQ ``common/sysflag/MessageSysFlag``).

The two host bits decide the layout: BORNHOST and STOREHOSTADDRESS take 8 bytes (IPv4 address +
int port) without them and 20 bytes (IPv6 address + int port) with them.
"""

from __future__ import annotations


class MessageSysFlag:
    """Bit values and helpers of ``MessageSysFlag``."""

    COMPRESSED_FLAG = 0x1
    MULTI_TAGS_FLAG = 0x1 << 1
    TRANSACTION_NOT_TYPE = 0
    TRANSACTION_PREPARED_TYPE = 0x1 << 2
    TRANSACTION_COMMIT_TYPE = 0x2 << 2
    TRANSACTION_ROLLBACK_TYPE = 0x3 << 2
    BORNHOST_V6_FLAG = 0x1 << 4
    STOREHOSTADDRESS_V6_FLAG = 0x1 << 5
    NEED_UNWRAP_FLAG = 0x1 << 6
    INNER_BATCH_FLAG = 0x1 << 7

    # Compression type lives in bits 8..10 (CompressionType value 1 LZ4, 2 ZSTD, 3 ZLIB).
    COMPRESSION_LZ4_TYPE = 0x1 << 8
    COMPRESSION_ZSTD_TYPE = 0x2 << 8
    COMPRESSION_ZLIB_TYPE = 0x3 << 8
    COMPRESSION_TYPE_COMPARATOR = 0x7 << 8

    @staticmethod
    def get_transaction_value(flag: int) -> int:
        """The transaction type bits (one of the ``TRANSACTION_*_TYPE`` values)."""
        return flag & MessageSysFlag.TRANSACTION_ROLLBACK_TYPE

    @staticmethod
    def reset_transaction_value(flag: int, transaction_type: int) -> int:
        """``flag`` with its transaction type replaced by ``transaction_type``."""
        return (flag & ~MessageSysFlag.TRANSACTION_ROLLBACK_TYPE) | transaction_type

    @staticmethod
    def clear_compressed_flag(flag: int) -> int:
        return flag & ~MessageSysFlag.COMPRESSED_FLAG

    @staticmethod
    def get_compression_type(flag: int) -> int:
        """The CompressionType value in bits 8..10 (0 none, 1 LZ4, 2 ZSTD, 3 ZLIB)."""
        return (flag & MessageSysFlag.COMPRESSION_TYPE_COMPARATOR) >> 8

    @staticmethod
    def check(flag: int, expected_flag: int) -> bool:
        """True when any bit of ``expected_flag`` is set in ``flag``."""
        return (flag & expected_flag) != 0

    @staticmethod
    def born_host_length(flag: int) -> int:
        """Bytes BORNHOST takes in the stored layout: 8 (IPv4) or 20 (IPv6)."""
        return 20 if flag & MessageSysFlag.BORNHOST_V6_FLAG else 8

    @staticmethod
    def store_host_length(flag: int) -> int:
        """Bytes STOREHOSTADDRESS takes in the stored layout: 8 (IPv4) or 20 (IPv6)."""
        return 20 if flag & MessageSysFlag.STOREHOSTADDRESS_V6_FLAG else 8
