"""What the benchmark producer and consumer share: validation errors that name the flag, the plain
dict form (``to_dict`` / ``from_dict``) in which a client description is stored and sent to a
process — later the "client operations" of a recorded workload — and an interruptible pause."""

from __future__ import annotations

import asyncio
import dataclasses
from typing import Any, ClassVar

from rmqlab.remoting.exceptions import RemotingConnectError


def check(ok: bool, flag: str, what: str, value: Any) -> None:
    """ValueError naming the flag, what it must be and what it got, unless `ok`."""
    if not ok:
        raise ValueError(f"{flag} must be {what}, not {value!r}")


class SpecDict:
    """Mixin for a frozen dataclass with a ``kind``: its dict form, with the kind as a field."""

    kind: ClassVar[str]

    def to_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, **dataclasses.asdict(self)}

    @classmethod
    def from_dict(cls, data: dict[str, Any]):
        """The description `data` holds; ValueError for another kind or an unknown field."""
        data = dict(data)
        if data.pop("kind", cls.kind) != cls.kind:
            raise ValueError(f"not a {cls.kind} description: {data!r}")
        unknown = sorted(set(data) - {f.name for f in dataclasses.fields(cls)})
        if unknown:
            raise ValueError(f"unknown {cls.kind} field(s): {', '.join(unknown)}")
        return cls(**data)


async def pause(node: Any, stopping: asyncio.Event, ms: float) -> None:
    """Sleep ``ms`` on the node's clock, or less if ``stopping`` is set meanwhile."""
    if ms <= 0:
        return
    sleep = asyncio.ensure_future(node.sleep(ms))
    stop = asyncio.ensure_future(stopping.wait())
    try:
        await asyncio.wait([sleep, stop], return_when=asyncio.FIRST_COMPLETED)
    finally:
        sleep.cancel()
        stop.cancel()


def describe_failure(e: BaseException) -> str:
    """An exception with the causes under it ("No route info ...: cannot connect to ..."), each
    said once: the client's messages often repeat their cause's text."""
    parts: list[str] = []
    seen: set[int] = set()
    while e is not None and id(e) not in seen:
        seen.add(id(e))
        text = f"cannot reach {e}" if isinstance(e, RemotingConnectError) else (str(e) or type(e).__name__)
        if not any(text in p for p in parts):
            parts.append(text)
        e = e.__cause__  # explicit causes only: the context may be the failure being explained
    return ": ".join(parts)
