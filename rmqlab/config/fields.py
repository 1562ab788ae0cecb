"""Typed configuration fields: RocketMQ's Java field types, and turning text into them.

Every configuration dataclass field is declared with one of the factories below; the factory
records a :class:`FieldSpec` in the field's metadata. The loader uses the spec to turn the text
of a ``.properties`` value (or a Python override) into the field's value, with the checks
RocketMQ's MixAll.properties2Object performs (Integer.parseInt, Long.parseLong, Enum.valueOf) and
a few it does not (booleans, ranges, address syntax), each failing loudly instead of silently.
"""

from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass, field
from enum import Enum
from typing import Any
from collections.abc import Callable

from rmqlab.common.java_compat import INT32_MAX, INT32_MIN, INT64_MAX, INT64_MIN, java_parse_int

# A check receives the coerced value and returns None when it is acceptable, otherwise the
# text that completes "expected ..." (e.g. "host:port entries separated by ';'").
Check = Callable[[Any], "str | None"]


class BadValue(ValueError):
    """A value that does not fit its field; ``expected`` completes the sentence "expected ..."."""

    def __init__(self, expected: str) -> None:
        super().__init__(expected)
        self.expected = expected


@dataclass(frozen=True)
class FieldSpec:
    """How one configuration field is parsed: its Java type and rmqlab's extra checks."""

    kind: str  # "int" (Java int), "long", "bool", "str", "path" or "enum"
    enum_type: type[Enum] | None = None
    min: int | None = None
    max: int | None = None
    nonempty: bool = False
    check: Check | None = None
    # "path" fields that are None until set mean "derived from another field" (RocketMQ's null).
    nullable: bool = False

    def expectation(self) -> str:
        """What a valid value looks like, for error messages."""
        if self.kind in ("int", "long"):
            java_min, java_max = (INT32_MIN, INT32_MAX) if self.kind == "int" else (INT64_MIN, INT64_MAX)
            low = java_min if self.min is None else self.min
            high = java_max if self.max is None else self.max
            return f"an integer in {low}..{high} (Java {self.kind})"
        if self.kind == "bool":
            return "true or false"
        if self.kind == "enum":
            assert self.enum_type is not None
            return "one of " + ", ".join(m.name for m in self.enum_type)
        if self.kind == "path":
            return "a non-empty path"
        return "a non-empty string" if self.nonempty else "a string"


def spec_of(f: dataclasses.Field) -> FieldSpec:
    return f.metadata["spec"]


def _make(default: Any, spec: FieldSpec) -> Any:
    return field(default=default, metadata={"spec": spec})


def int_field(default: int, *, min: int | None = None, max: int | None = None, check: Check | None = None) -> Any:
    """A Java ``int`` (parsed like Integer.parseInt; rmqlab adds the [min, max] check)."""
    return _make(default, FieldSpec("int", min=min, max=max, check=check))


def long_field(default: int, *, min: int | None = None, max: int | None = None) -> Any:
    """A Java ``long`` (parsed like Long.parseLong; rmqlab adds the [min, max] check)."""
    return _make(default, FieldSpec("long", min=min, max=max))


def bool_field(default: bool) -> Any:
    """A Java ``boolean``."""
    return _make(default, FieldSpec("bool"))


def str_field(default: str | None, *, nonempty: bool = False, check: Check | None = None) -> Any:
    """A Java ``String`` (None stands for Java's null and prints as an empty value)."""
    return _make(default, FieldSpec("str", nonempty=nonempty, check=check))


def path_field(default: str | None) -> Any:
    """A file-system path. ``~`` is expanded and a relative path is made absolute against the
    current directory at load time, which is what Java's File does with ``user.dir``; resolving
    once means a later chdir in a notebook cannot move a broker's store. A default of None means
    "derived" (RocketMQ's null, e.g. storePathCommitLog = <root>/commitlog)."""
    if default is None:
        return _make(None, FieldSpec("path", nullable=True))
    return field(default_factory=lambda: resolve_path(default), metadata={"spec": FieldSpec("path")})


def enum_field(default: Enum) -> Any:
    """A Java enum, set by its constant's exact name like ``Enum.valueOf``."""
    return _make(default, FieldSpec("enum", enum_type=type(default)))


def resolve_path(text: str) -> str:
    return os.path.abspath(os.path.expanduser(text))


def _check_range(spec: FieldSpec, value: int) -> int:
    if (spec.min is not None and value < spec.min) or (spec.max is not None and value > spec.max):
        raise BadValue(spec.expectation())
    return value


def _run_check(spec: FieldSpec, value: Any) -> Any:
    if spec.check is not None and value is not None:
        problem = spec.check(value)
        if problem is not None:
            raise BadValue(problem)
    return value


def parse_text(spec: FieldSpec, text: str) -> Any:
    """Turn the (already trimmed) text of a value into the field's Python value.

    Raises BadValue when the text does not fit."""
    if spec.kind in ("int", "long"):
        try:
            value = java_parse_int(text, 32 if spec.kind == "int" else 64)
        except ValueError:
            raise BadValue(spec.expectation()) from None
        return _run_check(spec, _check_range(spec, value))
    if spec.kind == "bool":
        # Java's Boolean.parseBoolean turns anything but "true" into false, so a typo such as
        # "ture" silently disables a feature; rmqlab accepts only true/false (any case).
        lowered = text.lower()
        if lowered not in ("true", "false"):
            raise BadValue(spec.expectation())
        return lowered == "true"
    if spec.kind == "enum":
        assert spec.enum_type is not None
        try:
            return spec.enum_type[text]  # exact, case-sensitive, like Enum.valueOf
        except KeyError:
            raise BadValue(spec.expectation()) from None
    if spec.kind == "path":
        if not text:
            # RocketMQ's null means "derived"; an empty value in a file is taken the same way.
            if spec.nullable:
                return None
            raise BadValue(spec.expectation())
        return resolve_path(text)
    if spec.nonempty and not text:
        raise BadValue(spec.expectation())
    return _run_check(spec, text)


def parse_python(spec: FieldSpec, value: Any) -> Any:
    """Accept a Python override: text goes through :func:`parse_text`; otherwise the value must
    already have the field's type (bool is not accepted for an int field, nor 1 for a bool)."""
    if isinstance(value, str):
        return parse_text(spec, value.strip())
    if spec.kind in ("int", "long"):
        if isinstance(value, bool) or not isinstance(value, int):
            raise BadValue(spec.expectation())
        return _run_check(spec, _check_range(spec, _java_range(spec, value)))
    if spec.kind == "bool":
        if not isinstance(value, bool):
            raise BadValue(spec.expectation())
        return value
    if spec.kind == "enum":
        if isinstance(value, spec.enum_type):
            return value
        raise BadValue(spec.expectation())
    if value is None and (spec.nullable or (spec.kind == "str" and not spec.nonempty)):
        return None
    if spec.kind == "path" and isinstance(value, os.PathLike):
        return parse_text(spec, os.fspath(value))
    raise BadValue(spec.expectation())


def _java_range(spec: FieldSpec, value: int) -> int:
    low, high = (INT32_MIN, INT32_MAX) if spec.kind == "int" else (INT64_MIN, INT64_MAX)
    if not low <= value <= high:
        raise BadValue(spec.expectation())
    return value


def format_value(value: Any) -> str:
    """A value as RocketMQ's MixAll.printObjectProperties prints it: null as empty, booleans as
    Java's true/false, enums by name."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, Enum):
        return value.name
    return str(value)


def config_fields(cls_or_obj: Any) -> tuple[dataclasses.Field, ...]:
    """The configuration fields of a config dataclass, in declaration order."""
    return tuple(f for f in dataclasses.fields(cls_or_obj) if "spec" in f.metadata)
