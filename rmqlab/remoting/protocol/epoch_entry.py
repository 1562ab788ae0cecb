"""EpochEntry: the commitlog range one master epoch wrote.

RocketMQ's ``remoting/src/main/java/org/apache/rocketmq/remoting/protocol/EpochEntry.java``: the
broker's epoch file (rmqlab.store.epoch_file_cache) holds them, the HA handshake and the
GET_BROKER_EPOCH_CACHE body carry them.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from rmqlab.common.checkpoint_file import INT_MAX, LONG_MAX


def _check_int(name: str, value: object, high: int) -> None:
    if not isinstance(value, int) or isinstance(value, bool):
        raise TypeError(f"EpochEntry {name} must be an int, got {type(value).__name__} {value!r}")
    # Deviation: Java accepts any int/long. A negative epoch or offset would be written as a line
    # such as "-1-100" that splits into three parts and is skipped on load, leaving a file
    # neither RocketMQ nor rmqlab can read back; the upper bounds keep the value a Java int/long.
    if not 0 <= value <= high:
        raise ValueError(f"EpochEntry {name} must be in [0, {high}], got {value}")


@dataclass
class EpochEntry:
    """One epoch: commitlog range [start_offset, end_offset) written by that master.

    end_offset defaults to LONG_MAX ("open / current"). Equality compares all three fields.
    """

    epoch: int
    start_offset: int
    end_offset: int = LONG_MAX

    def __post_init__(self) -> None:
        _check_int("epoch", self.epoch, INT_MAX)
        _check_int("startOffset", self.start_offset, LONG_MAX)
        _check_int("endOffset", self.end_offset, LONG_MAX)

    def copy(self) -> EpochEntry:
        """The copy constructor `new EpochEntry(entry)`."""
        return EpochEntry(self.epoch, self.start_offset, self.end_offset)

    def to_dict(self) -> dict[str, int]:
        """The JSON object with RocketMQ's keys, for nesting in a remoting body."""
        return {"endOffset": self.end_offset, "epoch": self.epoch, "startOffset": self.start_offset}

    def to_json(self) -> str:
        """RemotingSerializable.toJson: compact, keys in alphabetical order as fastjson writes them."""
        return json.dumps(self.to_dict(), sort_keys=True, separators=(",", ":"))

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> EpochEntry:
        """Build from a decoded JSON object; `endOffset` may be absent (Java field default LONG_MAX).

        Unknown keys are ignored, as fastjson does. Missing `epoch`/`startOffset` or non-integer
        values raise ValueError naming the key.
        """
        if not isinstance(data, Mapping):
            raise ValueError(f"EpochEntry JSON must be an object, got {type(data).__name__}")
        for key in ("epoch", "startOffset"):
            if key not in data:
                raise ValueError(f"EpochEntry JSON {dict(data)!r} has no {key!r}")
        values = {}
        for key in ("epoch", "startOffset", "endOffset"):
            value = data.get(key, LONG_MAX)
            if not isinstance(value, int) or isinstance(value, bool):
                raise ValueError(f"EpochEntry JSON {key!r} must be an integer, got {value!r}")
            values[key] = value
        try:
            return cls(values["epoch"], values["startOffset"], values["endOffset"])
        except (TypeError, ValueError) as exc:
            raise ValueError(f"EpochEntry JSON {dict(data)!r}: {exc}") from None

    @classmethod
    def from_json(cls, text: str | bytes) -> EpochEntry:
        """RemotingSerializable.decode for one entry; ValueError on malformed JSON."""
        try:
            data = json.loads(text)
        except ValueError as exc:
            raise ValueError(f"EpochEntry JSON is malformed: {exc}") from None
        return cls.from_dict(data)
