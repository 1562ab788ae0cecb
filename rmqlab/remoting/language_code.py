"""LanguageCode: which client library wrote a command (RocketMQ's ``LanguageCode.java``).

A JSON header spells it by name (``"language":"CPP"`` from the C++ client), the ROCKETMQ binary
header as one byte. Servers only report it; nothing in the protocol depends on it. rmqlab's own
components write ``JAVA`` like the RocketMQ processes they stand in for, so a client cannot tell
them apart by this field.
"""

from __future__ import annotations

import enum


class LanguageCode(enum.IntEnum):
    JAVA = 0
    CPP = 1
    DOTNET = 2
    PYTHON = 3
    DELPHI = 4
    ERLANG = 5
    RUBY = 6
    OTHER = 7
    HTTP = 8
    GO = 9
    PHP = 10
    OMS = 11
    RUST = 12
    NODE_JS = 13

    @classmethod
    def value_of(cls, code: int) -> LanguageCode | None:
        """``LanguageCode.valueOf(byte)``: the language with that wire byte, or None (as in Java)."""
        try:
            return cls(code)
        except ValueError:
            return None

    @classmethod
    def get_code(cls, name: str) -> LanguageCode | None:
        """``LanguageCode.getCode(String)``: the language with that name, or None."""
        return cls.__members__.get(name)
