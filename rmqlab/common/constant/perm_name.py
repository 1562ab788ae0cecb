"""PermName: topic permission bits (``common/src/main/java/org/apache/rocketmq/common/constant/PermName.java``)."""

from __future__ import annotations


class PermName:
    """Topic permission bits (``PermName``): 6 = read+write, 7 adds "inherit" (auto-create template)."""

    PERM_PRIORITY = 0x1 << 3
    PERM_READ = 0x1 << 2
    PERM_WRITE = 0x1 << 1
    PERM_INHERIT = 0x1 << 0

    @staticmethod
    def is_readable(perm: int) -> bool:
        return perm & PermName.PERM_READ == PermName.PERM_READ

    @staticmethod
    def is_writeable(perm: int) -> bool:
        return perm & PermName.PERM_WRITE == PermName.PERM_WRITE

    @staticmethod
    def is_inherited(perm: int) -> bool:
        return perm & PermName.PERM_INHERIT == PermName.PERM_INHERIT

    @staticmethod
    def is_valid(perm: int) -> bool:
        return 0 <= perm < PermName.PERM_PRIORITY

    @staticmethod
    def perm2string(perm: int) -> str:
        return (
            ("R" if PermName.is_readable(perm) else "-")
            + ("W" if PermName.is_writeable(perm) else "-")
            + ("X" if PermName.is_inherited(perm) else "-")
        )
