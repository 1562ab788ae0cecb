"""CommandCustomHeader: a request's or response's typed header fields, carried in ``extFields``.

RocketMQ's ``remoting/.../CommandCustomHeader.java`` with ``RemotingCommand.decodeCommandCustomHeader``
(reading) and ``makeCustomHeaderToNet`` (writing). Each header class declares its fields with their
Java name (the extFields key) and Java type; a field annotated ``@CFNotNull`` in Java must be present.

A header here is a dataclass whose fields are declared with :func:`header_field`::

    @dataclass
    class GetRouteInfoRequestHeader(CommandCustomHeader):
        topic: str = header_field("topic", STRING, not_null=True)

    header = GetRouteInfoRequestHeader.decode(request)    # decodeCommandCustomHeader
    request = RemotingCommand.create_request_command(105, header.to_ext_fields())

Writing leaves None values out and spells everything as Java's ``toString()`` does (the remoting
layer turns ints and bools into strings on the wire). Reading accepts what real clients send:
strings, or JSON numbers and booleans (the C++ client), through RemotingCommand's typed readers.

Deviation, on purpose: Java's reader swallows every per-field problem (its "the custom field <x> is
null" exception and a NumberFormatException alike are caught and only logged, ROCKETMQ-75), leaving
the field null or at its default; the handler then usually dies of a NullPointerException
(SYSTEM_ERROR) or, worse, carries on with a null name and corrupts its tables. Here a missing
``@CFNotNull`` field or a value of the wrong type raises :class:`RemotingCommandError` with RocketMQ's
own text (``the custom field <brokerId> is null``), which a processor answers as SYSTEM_ERROR
before touching any state. Java also skips the whole check when a request has no extFields at all;
here that is the same as each field missing.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, ClassVar, TypeVar

from rmqlab.remoting.remoting_command import ExtValue, RemotingCommand

# Java field types (their canonical names decide the parser in decodeCommandCustomHeader).
STRING = "String"
INTEGER = "Integer"
LONG = "Long"
BOOLEAN = "Boolean"

_READERS = {
    STRING: RemotingCommand.ext_str,
    INTEGER: RemotingCommand.ext_int,
    LONG: RemotingCommand.ext_long,
    BOOLEAN: RemotingCommand.ext_bool,
}

_META_KEY = "rmqlab.header"

H = TypeVar("H", bound="CommandCustomHeader")


@dataclass(frozen=True)
class HeaderFieldSpec:
    """One extFields entry: its Java name, Java type and whether it is ``@CFNotNull``."""

    wire_name: str
    java_type: str
    not_null: bool


def header_field(wire_name: str, java_type: str, *, not_null: bool = False, default: Any = None) -> Any:
    """Declare a header field (a dataclass field carrying its :class:`HeaderFieldSpec`).

    ``default`` is Java's field initialiser: what the field holds when the request leaves it out
    (None for an object type without one)."""
    if java_type not in _READERS:
        raise ValueError(f"header field {wire_name}: unknown Java type {java_type!r}")
    return dataclasses.field(default=default,
                             metadata={_META_KEY: HeaderFieldSpec(wire_name, java_type, not_null)})


@dataclass
class CommandCustomHeader:
    """Base of every custom header; subclasses are dataclasses of :func:`header_field` fields."""

    # Computed once per class (looked up in the class's own __dict__, so never inherited).
    _cached_specs: ClassVar[tuple[tuple[str, HeaderFieldSpec], ...] | None] = None
    _cached_decode_plan: ClassVar[tuple | None] = None

    @classmethod
    def field_specs(cls) -> tuple[tuple[str, HeaderFieldSpec], ...]:
        """(attribute name, spec) of every header field, in declaration order."""
        specs = cls.__dict__.get("_cached_specs")
        if specs is None:
            specs = tuple((f.name, f.metadata[_META_KEY]) for f in dataclasses.fields(cls) if _META_KEY in f.metadata)
            cls._cached_specs = specs
        return specs

    @classmethod
    def decode(cls: type[H], command: RemotingCommand) -> H:
        """``decodeCommandCustomHeader``: the header from ``command``'s extFields.

        Raises RemotingCommandError for a missing ``@CFNotNull`` field or a malformed value (see
        the module docstring), or whatever :meth:`check_fields` raises."""
        values: dict[str, Any] = {}
        ext = command.ext_fields or {}
        for attr, wire_name, java_type, not_null, max_digits, read in cls._decode_plan():
            value = ext.get(wire_name)
            # The common spellings read directly: a string for a String field, a short run of
            # ASCII digits (in range by its length) for an Integer or Long one. Anything else,
            # absent values included, goes through the typed reader, which decides or explains.
            if type(value) is str and (java_type == STRING or (
                    max_digits and len(value) <= max_digits and value.isdigit() and value.isascii())):
                values[attr] = value if java_type == STRING else int(value)
            elif not_null:
                values[attr] = read(command, wire_name)
            else:
                value = read(command, wire_name, None)
                if value is not None:
                    values[attr] = value
        header = cls(**values)
        header.check_fields()
        return header

    @classmethod
    def _decode_plan(cls) -> tuple[tuple[str, str, str, bool, int, Any], ...]:
        """Per field: attribute, wire name, Java type, not-null, the most decimal digits that
        always fit the Java type (0 if not an integer type), reader; computed once per class."""
        plan = cls.__dict__.get("_cached_decode_plan")
        if plan is None:
            digits = {INTEGER: 9, LONG: 18}  # 999999999 < 2**31, 999999999999999999 < 2**63
            plan = tuple((attr, spec.wire_name, spec.java_type, spec.not_null, digits.get(spec.java_type, 0),
                          _READERS[spec.java_type]) for attr, spec in cls.field_specs())
            cls._cached_decode_plan = plan
        return plan

    def check_fields(self) -> None:
        """``checkFields``: a header's own validation after decoding (none by default, as in
        every name-server header)."""

    def to_ext_fields(self) -> dict[str, ExtValue]:
        """``makeCustomHeaderToNet``: the non-None fields by their Java names."""
        out: dict[str, ExtValue] = {}
        for attr, spec in self.field_specs():
            value = getattr(self, attr)
            if value is not None:
                out[spec.wire_name] = value
        return out
