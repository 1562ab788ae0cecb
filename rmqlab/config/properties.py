"""A reader for Java ``.properties`` files, the format of RocketMQ's broker.conf and friends.

RocketMQ's start-up classes (BrokerStartup, NamesrvStartup, ControllerStartup) read their ``-c``
file with ``java.util.Properties.load``. This module follows the rules of that method that a
configuration file can meet:

* a line whose first non-blank character is ``#`` or ``!`` is a comment, and so is a blank line;
* the key ends at the first unescaped ``=``, ``:`` or white space; then white space, at most one
  ``=`` or ``:``, and more white space are skipped (``a=b``, ``a: b``, ``a b`` all set ``a``);
* a line ending in an odd number of backslashes continues on the next line, whose leading white
  space is dropped (a comment line never continues);
* escapes: ``\\t \\n \\r \\f``, ``\\uXXXX``, and a backslash before any other character stands for
  that character (``\\=`` , ``\\:``, ``\\ `` , ``\\\\``).

Two deliberate differences, both so that what a student sees is what the broker gets:

* values are trimmed at both ends. Java trims only the start, and MixAll.properties2Object trims
  only String values, so ``listenPort=10911 `` (a trailing blank) makes Integer.parseInt fail and
  RocketMQ silently keeps the default port;
* the file is decoded as UTF-8. ``Properties.load(InputStream)`` decodes ISO-8859-1, which turns
  UTF-8 text into mojibake; for the ASCII files RocketMQ ships the two agree.

Every entry keeps the line its key starts on, so errors can say ``file:line``.
"""

from __future__ import annotations

from dataclasses import dataclass

from rmqlab.config.errors import ConfigError

_WHITESPACE = " \t\f"
_SIMPLE_ESCAPES = {"t": "\t", "n": "\n", "r": "\r", "f": "\f"}


@dataclass(frozen=True)
class PropertyEntry:
    """One ``key=value`` of a properties file: the unescaped, trimmed key and value, and the
    1-based line on which the key starts."""

    key: str
    value: str
    line: int


def _natural_lines(text: str) -> list[str]:
    # Java ends a line at \n, \r or \r\n; str.splitlines would also split at \v, \x1c and other
    # separators that Properties treats as ordinary characters.
    lines: list[str] = []
    start = 0
    i = 0
    n = len(text)
    while i < n:
        c = text[i]
        if c == "\n" or c == "\r":
            lines.append(text[start:i])
            if c == "\r" and i + 1 < n and text[i + 1] == "\n":
                i += 1
            start = i + 1
        i += 1
    if start < n:
        lines.append(text[start:])
    return lines


def _ends_with_continuation(line: str) -> bool:
    count = 0
    for c in reversed(line):
        if c != "\\":
            break
        count += 1
    return count % 2 == 1


def _unescape(raw: str, source: str, line: int) -> str:
    out: list[str] = []
    i = 0
    n = len(raw)
    while i < n:
        c = raw[i]
        if c != "\\":
            out.append(c)
            i += 1
            continue
        i += 1
        if i >= n:
            break  # a lone trailing backslash (only possible at end of file) stands for nothing
        c = raw[i]
        if c == "u":
            digits = raw[i + 1:i + 5]
            if len(digits) != 4 or any(d not in "0123456789abcdefABCDEF" for d in digits):
                raise ConfigError(f"{source}:{line}: malformed \\uxxxx escape '\\u{digits}' (Java Properties needs four hex digits)")
            out.append(chr(int(digits, 16)))
            i += 5
            continue
        out.append(_SIMPLE_ESCAPES.get(c, c))
        i += 1
    # Java keeps \uD83D\uDE00 as a surrogate pair inside a UTF-16 string; join such pairs so the
    # Python string holds the character they encode.
    return "".join(out).encode("utf-16", "surrogatepass").decode("utf-16", "surrogatepass")


def _split_key_value(logical: str) -> tuple[str, str]:
    """Split a logical line (continuations joined, escapes still in place) into raw key and value."""
    n = len(logical)
    i = 0
    while i < n:
        c = logical[i]
        if c == "\\":
            i += 2  # an escaped character never ends the key
            continue
        if c in "=:" or c in _WHITESPACE:
            break
        i += 1
    key_end = min(i, n)
    j = key_end
    while j < n and logical[j] in _WHITESPACE:
        j += 1
    if j < n and logical[j] in "=:":
        j += 1
        while j < n and logical[j] in _WHITESPACE:
            j += 1
    return logical[:key_end], logical[j:]


def parse_properties(text: str, source: str = "<string>") -> list[PropertyEntry]:
    """Parse the text of a ``.properties`` file into entries, in file order (a repeated key
    appears once per occurrence; Java keeps the last). ``source`` names the file in errors."""
    entries: list[PropertyEntry] = []
    lines = _natural_lines(text)
    i = 0
    while i < len(lines):
        first_line_no = i + 1
        line = lines[i].lstrip(_WHITESPACE)
        i += 1
        if not line or line[0] in "#!":
            continue
        parts = []
        while _ends_with_continuation(line):
            parts.append(line[:-1])
            if i >= len(lines):
                line = ""
                break
            line = lines[i].lstrip(_WHITESPACE)
            i += 1
        parts.append(line)
        raw_key, raw_value = _split_key_value("".join(parts))
        key = _unescape(raw_key, source, first_line_no).strip()
        value = _unescape(raw_value, source, first_line_no).strip()
        entries.append(PropertyEntry(key, value, first_line_no))
    return entries


def read_config_bytes(path: str) -> bytes:
    """The bytes of a configuration file; a missing or unreadable file is a ConfigError."""
    try:
        with open(path, "rb") as f:
            return f.read()
    except FileNotFoundError:
        raise ConfigError(f"{path}: configuration file not found") from None
    except IsADirectoryError:
        raise ConfigError(f"{path}: is a directory, not a configuration file") from None
    except OSError as e:
        raise ConfigError(f"{path}: cannot read configuration file: {e.strerror}") from None


def read_properties_file(path: str) -> list[PropertyEntry]:
    """Read and parse a ``.properties`` file; a missing or undecodable file is a ConfigError."""
    data = read_config_bytes(path)
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        line = data[:e.start].count(b"\n") + 1
        raise ConfigError(f"{path}:{line}: not valid UTF-8 (byte 0x{data[e.start]:02x})") from None
    if text.startswith("\ufeff"):
        text = text[1:]  # a UTF-8 byte order mark, as some Windows editors write
    return parse_properties(text, path)
