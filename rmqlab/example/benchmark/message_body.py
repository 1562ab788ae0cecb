"""The benchmark's message bodies: derived from the message's key, so a consumer (and a checker
reading its trace) can tell a body that does not belong to its key.

RocketMQ's benchmark Producer sends one random alphanumeric body of ``-s`` bytes for every
message. rmqlab's is the key repeated (separated by ``.``) and cut to ``-s`` bytes, never shorter
than the key itself: a body is correct exactly when ``body == build_body(key, len(body))``. A
message without a key gets ``-s`` bytes of ``.``.
"""

from __future__ import annotations

FILLER = b"."


def build_body(key: str | None, size: int) -> bytes:
    """The body of a message with ``key``: at least ``size`` bytes (more only if the key is longer)."""
    if not key:
        return FILLER * size
    unit = key.encode() + FILLER
    if size <= len(unit) - 1:
        return key.encode()
    return (unit * (size // len(unit) + 1))[:size]


def body_matches(key: str | None, body: bytes) -> bool:
    """True when ``body`` is the one the benchmark producer builds for ``key``."""
    return body == build_body(key, len(body))
