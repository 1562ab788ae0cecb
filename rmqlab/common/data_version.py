"""DataVersion: the version stamp carried by every broker metadata file.

Implements RocketMQ's
``remoting/src/main/java/org/apache/rocketmq/remoting/protocol/DataVersion.java`` (and
``broker/.../BrokerPreOnlineService.java``). A broker stamps topics.json, consumerOffset.json,
delayOffset.json and subscriptionGroup.json with one; RIP-32's pre-online step and the slave's
metadata sync adopt a peer's table only when ``local.compare(remote) <= 0``, so the stamp is what
stops a restarted master from rolling consumer offsets back (RIP-32 "Slave Acting Master Mode",
"Pre-online mechanism").

Fields and their JSON keys (fastjson writes bean properties in alphabetical order):

* ``counter`` - bumped by every :meth:`DataVersion.next_version`;
* ``stateVersion`` - the message store's state-machine version (the master epoch in controller
  mode, ``AutoSwitchHAService`` calls ``setStateMachineVersion(masterEpoch)``; 0 otherwise);
* ``timestamp`` - epoch milliseconds of the last change.

Deviation: Java initialises ``timestamp`` with ``System.currentTimeMillis()``; rmqlab modules never
read the wall clock, so the caller passes the time (managers pass their injected ``clock()``).
"""

from __future__ import annotations

import json
from rmqlab.common.java_compat import INT64_MAX, INT64_MIN
from typing import Any


# fastjson's bean order: properties sorted by name.
JSON_KEYS = ("counter", "stateVersion", "timestamp")


def _check_long(name: str, value: Any) -> int:
    # bool is an int subclass in Python; JSON true/false must not pass as a number.
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError(f"{name}: expected an integer, got {type(value).__name__} {value!r}")
    if not INT64_MIN <= value <= INT64_MAX:
        raise ValueError(f"{name}: {value} does not fit a Java long")
    return value


class DataVersion:
    """A (stateVersion, counter, timestamp) stamp; see the module docstring."""

    __slots__ = ("state_version", "timestamp", "counter")

    def __init__(self, state_version: int = 0, timestamp: int = 0, counter: int = 0):
        self.state_version = _check_long("stateVersion", state_version)
        self.timestamp = _check_long("timestamp", timestamp)
        self.counter = _check_long("counter", counter)

    def next_version(self, now_ms: int, state_version: int = 0) -> None:
        """RocketMQ ``nextVersion(stateVersion)``: stamp ``now_ms``, set the state version, counter + 1.

        As in Java, the one-argument form ``nextVersion()`` passes 0, so it *resets* a non-zero
        stateVersion; callers that know the store's state-machine version pass it.
        """
        self.timestamp = _check_long("timestamp", now_ms)
        self.state_version = _check_long("stateVersion", state_version)
        self.counter += 1

    def assign_new_one(self, other: DataVersion) -> None:
        """RocketMQ ``assignNewOne``: copy all three fields from ``other``."""
        self.timestamp = other.timestamp
        self.state_version = other.state_version
        self.counter = other.counter

    def compare(self, other: DataVersion) -> int:
        """RocketMQ ``compare``: -1/0/1 ordering by stateVersion, then counter, then timestamp."""
        mine = (self.state_version, self.counter, self.timestamp)
        theirs = (other.state_version, other.counter, other.timestamp)
        return (mine > theirs) - (mine < theirs)

    def copy(self) -> DataVersion:
        return DataVersion(self.state_version, self.timestamp, self.counter)

    def to_json_dict(self) -> dict[str, int]:
        return {"counter": self.counter, "stateVersion": self.state_version, "timestamp": self.timestamp}

    @classmethod
    def from_json_dict(cls, data: Any, where: str = "dataVersion") -> DataVersion:
        """Build from a decoded JSON object; a wrong shape raises ``ValueError`` naming ``where``.

        Missing keys keep the Java defaults (0) the way fastjson leaves unset properties alone:
        files written before RocketMQ 5 carry no ``stateVersion``. (Java's default timestamp would be
        "now"; without a clock here it is 0, which only makes such a file compare as older.)
        Unknown keys are ignored, as fastjson does.
        """
        if not isinstance(data, dict):
            raise ValueError(f"{where}: expected a JSON object, got {type(data).__name__} {data!r}")
        return cls(
            state_version=_check_long(f"{where}.stateVersion", data.get("stateVersion", 0)),
            timestamp=_check_long(f"{where}.timestamp", data.get("timestamp", 0)),
            counter=_check_long(f"{where}.counter", data.get("counter", 0)),
        )

    def to_json(self) -> str:
        """Compact JSON as RocketMQ's ``RemotingSerializable.toJson(false)`` writes it."""
        return json.dumps(self.to_json_dict(), separators=(",", ":"))

    @classmethod
    def from_json(cls, text: str) -> DataVersion:
        try:
            data = json.loads(text)
        except json.JSONDecodeError as e:
            raise ValueError(f"dataVersion: not valid JSON ({e})") from e
        return cls.from_json_dict(data)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, DataVersion):
            return NotImplemented
        return (self.state_version, self.timestamp, self.counter) == (
            other.state_version,
            other.timestamp,
            other.counter,
        )

    # Mutable (next_version changes it in place), so unhashable as Python expects of mutable
    # values; Java's hashCode on a mutable key is a trap RocketMQ never relies on.
    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return (
            f"DataVersion(state_version={self.state_version}, timestamp={self.timestamp}, "
            f"counter={self.counter})"
        )
