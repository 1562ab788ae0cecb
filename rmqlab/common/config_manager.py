"""ConfigManager: load and persist one broker metadata JSON file the way RocketMQ does.

Implements ``common/src/main/java/org/apache/rocketmq/common/ConfigManager.java``
for the files under ``<storePathRootDir>/config`` (topics.json, consumerOffset.json,
delayOffset.json, subscriptionGroup.json).

Persist (``ConfigManager.persist`` since RocketMQ ISSUE #9706, Sept 2025; before it,
``MixAll.string2File`` copied the old content to ``.bak`` and overwrote the file in place, unsynced,
so a power loss could tear both):

1. encode the table, pretty-printed;
2. if ``<file>`` exists, atomically rename it to ``<file>.bak`` and fsync the directory;
3. create the directory if needed, write the new content to ``<file>``, fsync the file, fsync the
   directory.

There is no temporary file: the rename in step 2 is what makes it crash-safe, together with
:meth:`ConfigManager.load`, which falls back to ``<file>.bak`` whenever ``<file>`` is missing, empty
or unreadable. What a crash leaves behind:

* before step 2: ``<file>`` = previous version (intact) -> load reads it;
* after step 2, before or during step 3: ``<file>`` missing or a torn prefix, ``<file>.bak`` =
  previous version -> load falls back to the backup;
* after step 3: ``<file>`` = new version.

Load (``ConfigManager.load``/``loadBak``): read ``<file>``; if it is missing, empty or fails to decode,
read ``<file>.bak``. A missing or empty backup counts as "nothing stored" (the manager keeps its
built-in defaults), exactly like RocketMQ's ``loadBak`` returning true: that is the state after the
very first persist crashed mid-write. A backup that fails to decode makes RocketMQ's ``load()``
return false and the broker refuse to start; here :class:`ConfigFileError` is raised naming both
files.

The files are written in fastjson 1.2.83's dialect (RocketMQ's ``RemotingSerializable.toJson``):
tab-indented pretty format, no space after ``:``, ``null`` members omitted, and **integer map keys
unquoted** (``{0:250,1:250}`` - consumerOffset.json and delayOffset.json), which is not standard
JSON. :func:`to_fastjson` writes that dialect and :func:`parse_fastjson` reads it (and plain JSON).
"""

from __future__ import annotations

import abc
import json
import logging
import os
import threading
from rmqlab.common.java_compat import INT32_MAX, INT32_MIN, INT64_MAX, INT64_MIN
from collections.abc import Callable, Iterable, Mapping
from typing import Any

log = logging.getLogger(__name__)


BAK_SUFFIX = ".bak"


class ConfigFileError(Exception):
    """A config file and its backup are both unusable; the broker must not start on them."""

    def __init__(self, message: str, paths: Iterable[str]):
        super().__init__(message)
        self.paths = tuple(paths)


# ---------------------------------------------------------------------------------------------
# fastjson dialect
# ---------------------------------------------------------------------------------------------

# fastjson 1.2.83 IOUtils.specicalFlags_doubleQuotes: these get a one-letter escape ...
_SHORT_ESCAPES = {'"': '\\"', "\\": "\\\\", "\b": "\\b", "\t": "\\t", "\n": "\\n", "\f": "\\f", "\r": "\\r"}


def _fastjson_quote(text: str) -> str:
    out = ['"']
    for ch in text:
        code = ord(ch)
        if ch in _SHORT_ESCAPES:
            out.append(_SHORT_ESCAPES[ch])
        elif code < 0x20 or 0x7F <= code < 0xA0:
            # ... and these a \\uXXXX escape with upper-case hex; everything else is written raw.
            out.append(f"\\u{code:04X}")
        else:
            out.append(ch)
    out.append('"')
    return "".join(out)


def _write_fastjson(out: list[str], value: Any, pretty: bool, depth: int) -> None:
    if value is None:
        out.append("null")
    elif value is True:
        out.append("true")
    elif value is False:
        out.append("false")
    elif isinstance(value, int):
        out.append(str(value))
    elif isinstance(value, str):
        out.append(_fastjson_quote(value))
    elif isinstance(value, Mapping):
        # MapSerializer / JavaBeanSerializer: a String key starts a new line in pretty format, a
        # number key does not (so {0:1,1:2} stays on one line); a non-empty map closes on a new line.
        out.append("{")
        first = True
        for key, item in value.items():
            if item is None:
                continue  # WriteMapNullValue is off in RocketMQ
            if not first:
                out.append(",")
            if isinstance(key, str):
                if pretty:
                    out.append("\n" + "\t" * (depth + 1))
                out.append(_fastjson_quote(key))
            elif isinstance(key, int) and not isinstance(key, bool):
                out.append(str(key))
            else:
                raise TypeError(f"fastjson map key must be str or int, got {type(key).__name__}")
            out.append(":")
            _write_fastjson(out, item, pretty, depth + 1)
            first = False
        if pretty and value:
            out.append("\n" + "\t" * depth)
        out.append("}")
    elif isinstance(value, (list, tuple)):
        # CollectionCodec (HashSet, arrays) never pretty-prints.
        out.append("[")
        for i, item in enumerate(value):
            if i:
                out.append(",")
            _write_fastjson(out, item, pretty, depth)
        out.append("]")
    else:
        raise TypeError(f"cannot write {type(value).__name__} as fastjson")


def to_fastjson(value: Any, pretty: bool = False) -> str:
    """Serialise ``value`` (dicts, lists, str, int, bool) exactly as fastjson 1.2.83 would.

    Dict order is kept, so a caller that models a Java bean passes its properties sorted by name.
    """
    out: list[str] = []
    _write_fastjson(out, value, pretty, 0)
    return "".join(out)


def _quote_bare_int_keys(text: str) -> str:
    """Turn fastjson's unquoted integer object keys into quoted ones so ``json`` can read them."""
    out: list[str] = []
    stack: list[str] = []
    expect_key = False
    i, n = 0, len(text)
    while i < n:
        ch = text[i]
        if ch == '"':
            j = i + 1
            while j < n and text[j] != '"':
                j += 2 if text[j] == "\\" else 1
            out.append(text[i : j + 1])
            i = j + 1
            expect_key = False
            continue
        if expect_key and (ch == "-" or ch.isdigit()):
            j = i + 1 if ch == "-" else i
            while j < n and "0" <= text[j] <= "9":
                j += 1
            k = j
            while k < n and text[k] in " \t\r\n":
                k += 1
            if j > i and text[i:j] != "-" and k < n and text[k] == ":":
                out.append('"' + text[i:j] + '"')
                i = j
                expect_key = False
                continue
        if ch in "{[":
            stack.append(ch)
            expect_key = ch == "{"
        elif ch in "}]":
            if stack:
                stack.pop()
            expect_key = False
        elif ch == ",":
            expect_key = bool(stack) and stack[-1] == "{"
        elif ch not in " \t\r\n":
            expect_key = False
        out.append(ch)
        i += 1
    return "".join(out)


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON number")


def parse_fastjson(text: str) -> Any:
    """Parse JSON as RocketMQ writes it (bare integer keys allowed); raises ``ValueError``.

    Integer keys come back as strings (``"0"``), as they would from standard JSON.
    """
    try:
        # Most texts are standard JSON already (no bare keys): the character scan below is only
        # for the rest, and it changes nothing in a text that parses as it is.
        return json.loads(text, parse_constant=_reject_constant)
    except json.JSONDecodeError:
        pass
    try:
        return json.loads(_quote_bare_int_keys(text), parse_constant=_reject_constant)
    except json.JSONDecodeError as e:
        # Columns shift by the quotes added above, lines do not.
        raise ValueError(f"not valid JSON: {e.msg} at line {e.lineno}") from e


# ---------------------------------------------------------------------------------------------
# Checks for decoded JSON values (each names the JSON path of a bad value)
# ---------------------------------------------------------------------------------------------


def check_object(value: Any, where: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise ValueError(f"{where}: expected a JSON object, got {_describe(value)}")
    return value


def check_int(value: Any, where: str, java_type: str = "int") -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError(f"{where}: expected an integer, got {_describe(value)}")
    lo, hi = (INT32_MIN, INT32_MAX) if java_type == "int" else (INT64_MIN, INT64_MAX)
    if not lo <= value <= hi:
        raise ValueError(f"{where}: {value} does not fit a Java {java_type}")
    return value


def check_long(value: Any, where: str) -> int:
    return check_int(value, where, "long")


def check_bool(value: Any, where: str) -> bool:
    if not isinstance(value, bool):
        raise ValueError(f"{where}: expected true or false, got {_describe(value)}")
    return value


def check_str(value: Any, where: str) -> str:
    if not isinstance(value, str):
        raise ValueError(f"{where}: expected a string, got {_describe(value)}")
    return value


def check_str_map(value: Any, where: str) -> dict[str, str]:
    """A Java ``Map<String, String>``; JSON null reads as empty (RocketMQ treats null as no entries)."""
    if value is None:
        return {}
    obj = check_object(value, where)
    return {k: check_str(v, f"{where}.{k}") for k, v in obj.items()}


def check_int_key(key: str, where: str) -> int:
    """An ``Integer`` map key (``{0:5}`` in fastjson, ``{"0":5}`` in plain JSON)."""
    text = key.strip()
    body = text[1:] if text[:1] in "+-" else text
    if not body or not body.isascii() or not body.isdigit():
        raise ValueError(f"{where}: key {key!r} is not an integer")
    return check_int(int(text), f"{where}[{key}]")


def _describe(value: Any) -> str:
    names = {dict: "object", list: "array", str: "string", bool: "boolean", type(None): "null"}
    kind = names.get(type(value), type(value).__name__)
    shown = repr(value)
    return f"{kind} {shown[:60] + '...' if len(shown) > 60 else shown}"


# ---------------------------------------------------------------------------------------------
# File steps (module-level so a test can replace one to simulate a crash at that point)
# ---------------------------------------------------------------------------------------------


def _read_text(path: str) -> str | None:
    """``MixAll.file2String``: the content, or None when the file does not exist."""
    try:
        with open(path, "rb") as f:
            data = f.read()
    except FileNotFoundError:
        return None
    # Undecodable bytes are a corrupt file like any other (ValueError).
    return data.decode("utf-8")


def _fsync_directory(directory: str) -> None:
    """``MixAll.fsyncDirectory``: make a rename or a new directory entry durable."""
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _move_to_backup(path: str, bak_path: str) -> None:
    """``Files.move(..., ATOMIC_MOVE)`` (rename(2), replacing an older backup), then fsync the dir."""
    os.replace(path, bak_path)
    _fsync_directory(os.path.dirname(bak_path) or ".")


def _write_and_fsync(path: str, data: bytes) -> None:
    """Write ``data`` as the whole file and ``force(true)`` it.

    RocketMQ opens a ``RandomAccessFile(config, "rw")`` here, which does not truncate; the file was
    just renamed away so it is new either way. O_TRUNC keeps a stray longer file from leaving a tail.
    """
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        view = memoryview(data)
        while view:
            written = os.write(fd, view)
            view = view[written:]
        os.fsync(fd)
    finally:
        os.close(fd)


class ConfigManager(abc.ABC):
    """Base of the managers of ``<storePathRootDir>/config/*.json`` (see the module docstring)."""

    def __init__(self) -> None:
        # RocketMQ's persist() is synchronized; the simulator may persist from several threads.
        self._persist_lock = threading.RLock()

    @abc.abstractmethod
    def config_file_path(self) -> str:
        """Absolute path of the main file (``configFilePath``)."""

    @abc.abstractmethod
    def encode(self, pretty: bool = False) -> str:
        """The table as RocketMQ serialises it."""

    @abc.abstractmethod
    def decode(self, json_str: str) -> None:
        """Adopt the content of a file; raise ``ValueError`` naming the bad value, changing nothing."""

    def load(self) -> str | None:
        """Load the main file or its backup; return the path adopted, or None if nothing is stored.

        Raises :class:`ConfigFileError` when the backup is needed but cannot be decoded.
        """
        path = self.config_file_path()
        bak_path = path + BAK_SUFFIX
        main_problem: str | None = None
        try:
            text = _read_text(path)
        except ValueError as e:
            text, main_problem = None, f"not UTF-8 text ({e})"
        if text is not None:
            if not text:
                main_problem = "the file is empty"
            else:
                try:
                    self.decode(text)
                    log.info("load %s OK", path)
                    return path
                except ValueError as e:
                    main_problem = str(e)
        if main_problem is not None:
            log.warning("config file %s is corrupt (%s); trying backup %s", path, main_problem, bak_path)

        try:
            bak_text = _read_text(bak_path)
        except ValueError as e:
            raise self._both_unusable(path, main_problem, bak_path, f"not UTF-8 text ({e})") from e
        if not bak_text:
            # loadBak: a missing or empty backup means "nothing stored" and load succeeds.
            if main_problem is not None:
                log.warning("no usable backup %s; %s starts from its defaults", bak_path, path)
                self._discard_invalid(path)
            return None
        try:
            self.decode(bak_text)
        except ValueError as e:
            raise self._both_unusable(path, main_problem, bak_path, str(e)) from e
        log.info("load %s OK", bak_path)
        if main_problem is not None:
            self._discard_invalid(path)
        return bak_path

    @staticmethod
    def _both_unusable(path: str, main_problem: str | None, bak_path: str, bak_problem: str) -> ConfigFileError:
        main_state = "is missing" if main_problem is None else f"is corrupt ({main_problem})"
        return ConfigFileError(
            f"cannot load {path}: it {main_state}, and the backup {bak_path} is corrupt ({bak_problem})",
            (path, bak_path),
        )

    @staticmethod
    def _discard_invalid(path: str) -> None:
        # RocketMQ deletes an invalid main file so the next persist() cannot rename it over the good
        # backup. Deviation: RocketMQ deletes it before even trying the backup; rmqlab deletes it
        # only once the backup was adopted, so a refused start leaves both files to inspect.
        try:
            os.remove(path)
        except FileNotFoundError:
            pass

    def persist(self) -> None:
        """Write the table with RocketMQ's backup-then-write scheme (module docstring).

        Deviation: RocketMQ logs and swallows an I/O error here; rmqlab lets it propagate so a full
        disk (or a crash injected by the simulator) is visible to the caller.
        """
        with self._persist_lock:
            data = self.encode(pretty=True).encode("utf-8")
            path = self.config_file_path()
            if os.path.exists(path):
                _move_to_backup(path, path + BAK_SUFFIX)
            directory = os.path.dirname(path) or "."
            os.makedirs(directory, exist_ok=True)
            _write_and_fsync(path, data)
            # Make the new directory entry durable too (RocketMQ fsyncs the directory here).
            _fsync_directory(directory)


def state_version_source(state_machine_version: Callable[[], int] | None) -> Callable[[], int]:
    """The store's ``getStateMachineVersion`` for ``DataVersion.next_version``; 0 without a store."""
    return state_machine_version if state_machine_version is not None else (lambda: 0)
