"""BoundaryType (``common/src/main/java/org/apache/rocketmq/common/BoundaryType.java``): which end
of a run of messages sharing a store timestamp SEARCH_OFFSET_BY_TIMESTAMP answers.

On the wire the request header carries the constant's Java ``toString()`` (its name, "LOWER" or
"UPPER"); the broker reads it with ``getType``: "upper" in any case is UPPER, anything else
(absent, unknown) is LOWER.
"""

from __future__ import annotations

import enum


class BoundaryType(enum.Enum):
    LOWER = "lower"
    UPPER = "upper"

    @classmethod
    def get_type(cls, name: str | None) -> BoundaryType:
        """``BoundaryType.getType``: UPPER only for "upper" (any case), else LOWER."""
        return cls.UPPER if name is not None and name.lower() == cls.UPPER.value else cls.LOWER
