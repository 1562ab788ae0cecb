"""A reader for the proxy's ``rmq-proxy.json`` that keeps the line of every key.

RocketMQ's proxy reads the file with fastjson 1.2 (proxy/.../config/Configuration.java:
``JSON.parseObject(text, ProxyConfig.class)``). fastjson's lexer skips ``//`` and ``/* */``
comments between tokens, so rmqlab accepts them too (conf/rmq-proxy.json starts with one); the
comments are blanked out, newlines kept, and the rest must be strict JSON. Only the top-level
object is walked key by key, because every ProxyConfig setting is a scalar.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from rmqlab.config.errors import ConfigError
from rmqlab.config.properties import read_config_bytes

_JSON_WHITESPACE = " \t\n\r"


@dataclass(frozen=True)
class JsonEntry:
    """One top-level member of the JSON object and the 1-based line its key is on."""

    key: str
    value: Any
    line: int


def _blank_comments(text: str, source: str) -> str:
    out = list(text)
    i = 0
    n = len(text)
    in_string = False
    while i < n:
        c = text[i]
        if in_string:
            if c == "\\":
                i += 2
                continue
            if c == '"':
                in_string = False
            i += 1
            continue
        if c == '"':
            in_string = True
            i += 1
            continue
        if c == "/" and i + 1 < n and text[i + 1] == "/":
            while i < n and text[i] != "\n":
                out[i] = " "
                i += 1
            continue
        if c == "/" and i + 1 < n and text[i + 1] == "*":
            end = text.find("*/", i + 2)
            if end < 0:
                line = text.count("\n", 0, i) + 1
                raise ConfigError(f"{source}:{line}: unterminated /* comment")
            for k in range(i, end + 2):
                if text[k] != "\n":
                    out[k] = " "
            i = end + 2
            continue
        i += 1
    return "".join(out)


def parse_json_object(text: str, source: str = "<string>") -> list[JsonEntry]:
    """Parse a JSON object into its top-level members, in file order, with line numbers."""
    text = _blank_comments(text, source)

    def line_of(pos: int) -> int:
        return text.count("\n", 0, pos) + 1

    def fail(pos: int, what: str) -> ConfigError:
        return ConfigError(f"{source}:{line_of(pos)}: {what}")

    decoder = json.JSONDecoder()
    n = len(text)

    def skip(pos: int) -> int:
        while pos < n and text[pos] in _JSON_WHITESPACE:
            pos += 1
        return pos

    pos = skip(0)
    if pos >= n or text[pos] != "{":
        raise fail(pos, "expected a JSON object ('{') holding the proxy settings")
    pos = skip(pos + 1)
    entries: list[JsonEntry] = []
    if pos < n and text[pos] == "}":
        pos += 1
    else:
        while True:
            if pos >= n or text[pos] != '"':
                raise fail(pos, "expected a quoted key")
            key_pos = pos
            try:
                key, pos = json.decoder.scanstring(text, pos + 1)
            except json.JSONDecodeError as e:
                raise fail(e.pos, f"bad JSON string: {e.msg}") from None
            pos = skip(pos)
            if pos >= n or text[pos] != ":":
                raise fail(pos, f"expected ':' after key '{key}'")
            pos = skip(pos + 1)
            try:
                value, pos = decoder.raw_decode(text, pos)
            except json.JSONDecodeError as e:
                raise fail(e.pos, f"bad JSON value for '{key}': {e.msg}") from None
            entries.append(JsonEntry(key, value, line_of(key_pos)))
            pos = skip(pos)
            if pos < n and text[pos] == ",":
                pos = skip(pos + 1)
                continue
            if pos < n and text[pos] == "}":
                pos += 1
                break
            raise fail(pos, "expected ',' or '}'")
    pos = skip(pos)
    if pos != n:
        raise fail(pos, "unexpected text after the JSON object")
    return entries


def read_json_file(path: str) -> list[JsonEntry]:
    """Read and parse a JSON configuration file; a missing or empty file is a ConfigError."""
    data = read_config_bytes(path)
    if not data:
        # RocketMQ's Configuration.loadJsonConfig refuses an empty file the same way.
        raise ConfigError(f"{path}: configuration file is empty")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        line = data[:e.start].count(b"\n") + 1
        raise ConfigError(f"{path}:{line}: not valid UTF-8 (byte 0x{data[e.start]:02x})") from None
    if text.startswith("\ufeff"):
        text = text[1:]
    return parse_json_object(text, path)
