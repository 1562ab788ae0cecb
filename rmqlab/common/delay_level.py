"""messageDelayLevel: the delay levels of scheduled messages (level i, from 1, is the i-th delay).

One parser for everyone that reads the setting: the config validation, the dispatcher (a delayed
message's consume-queue tags code is its deliver time) and ScheduleMessageService. Mirrors
ScheduleMessageService.parseDelayLevel / DefaultMessageStore.computeDeliverTimestamp.
"""

from __future__ import annotations

import re

DEFAULT_MESSAGE_DELAY_LEVEL = "1s 5s 10s 30s 1m 2m 3m 4m 5m 6m 7m 8m 9m 10m 20m 30m 1h 2h"

# ScheduleMessageService.parseDelayLevel's timeUnitTable.
TIME_UNIT_MILLIS = {"s": 1000, "m": 1000 * 60, "h": 1000 * 60 * 60, "d": 1000 * 60 * 60 * 24}

# Long.parseLong accepts an optional sign and decimal digits.
_LEVEL_RE = re.compile(r"([+-]?[0-9]+)(.)", re.ASCII | re.DOTALL)


def parse_delay_level(level_string: str) -> dict[int, int]:
    """``parseDelayLevel``: ``{level: delay millis}`` for levels 1..n; ``ValueError`` names the bad entry.

    Like Java, entries are separated by single spaces (``split(" ")``), so a doubled space is an
    empty entry and an error. Deviation: a negative delay, which Java accepts and which then
    delivers at once, is rejected as a configuration mistake.
    """
    table: dict[int, int] = {}
    for index, entry in enumerate(level_string.split(" ")):
        level = index + 1
        where = f"messageDelayLevel {level_string!r}: level {level} ({entry!r})"
        if entry == "":
            raise ValueError(f"{where} is empty; entries are separated by single spaces")
        match = _LEVEL_RE.fullmatch(entry)
        if match is None:
            raise ValueError(f"{where} is not <number><unit>, e.g. 10s")
        number, unit = int(match.group(1)), match.group(2)
        if unit not in TIME_UNIT_MILLIS:
            raise ValueError(f"{where} has unit {unit!r}; the units are s, m, h, d")
        if number < 0:
            raise ValueError(f"{where} is negative")
        table[level] = number * TIME_UNIT_MILLIS[unit]
    return table


def compute_deliver_timestamp(delay_level_table: dict[int, int], delay_level: int, store_timestamp: int) -> int:
    """``computeDeliverTimestamp``: store time + the level's delay, or + 1 s for a level missing
    from the table."""
    delay = delay_level_table.get(delay_level)
    return store_timestamp + (delay if delay is not None else 1000)
