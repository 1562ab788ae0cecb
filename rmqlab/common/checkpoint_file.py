"""CheckpointFile: a small list of entries persisted as text lines with a CRC and a `.bak` copy.

Implements RocketMQ's `common/.../utils/CheckpointFile.java` together with the
`MixAll.string2File` / `file2String` helpers it writes through. A file written here is
byte-for-byte what RocketMQ writes on Linux, so either system can read the other's files::

    <number of entries>\\n
    <CRC32 & 0x7FFFFFFF of the UTF-8 bytes of all entry lines, "\\n" included, in decimal>\\n
    <entry line>\\n                    (one per entry, in list order)

Writing copies the previous main-file content to `<path>.bak` first, so a main file torn by a
crash in the middle of a write can be recovered from the backup when reading.

Reading rules (deviations from RocketMQ are marked at the code that implements them):

* A missing file yields no entries; so does a well-formed file whose count line is 0.
* The main file is *unusable* when it cannot be read or decoded, a header line is missing or is
  not an integer, an entry line does not parse, the number of parsed entries differs from line 1,
  line 2 is non-zero and differs from the recomputed CRC (0 disables the check, as in RocketMQ),
  or the optional validator rejects the entries.
* Lines the serializer declines (it returns None) are skipped, as in RocketMQ; they still count
  towards the CRC, and the count check normally catches them.
* The backup is read when the main file is unusable, missing or holds no entries. If the backup
  is needed and cannot supply entries, `CheckpointFileCorruptError` names both files and the
  problem with each (see `CheckpointFile.read` for why this deviates from RocketMQ).
"""

from __future__ import annotations

import logging
import os
import re
import threading
import zlib

from rmqlab.common.java_compat import INT32_MAX, INT32_MIN, INT64_MAX, INT64_MIN
from collections.abc import Callable, Sequence
from typing import Generic, Protocol, TypeVar

T = TypeVar("T")

BAK_SUFFIX = ".bak"
# CheckpointFile.NOT_CHECK_CRC_MAGIC_CODE: a stored CRC of 0 disables the CRC check on read.
NOT_CHECK_CRC_MAGIC_CODE = 0

# Java's int/long limits under the names the epoch file code uses.
INT_MIN, INT_MAX, LONG_MIN, LONG_MAX = INT32_MIN, INT32_MAX, INT64_MIN, INT64_MAX

# RocketMQ writes System.lineSeparator(). rmqlab always writes "\n" so its files are identical on
# every platform and equal to what RocketMQ writes on Linux (`MixAll.string2File`).
_LINE_SEPARATOR = "\n"
# Java's BufferedReader.readLine ends a line at "\n", "\r" or "\r\n"; str.splitlines would also
# split at \v, \f, \x1c-\x1e, \x85, \u2028 and \u2029, which Java does not.
_LINE_BREAK = re.compile(r"\r\n|\r|\n")
# Integer.parseInt / Long.parseLong syntax: optional sign, then digits. Python's int() would also
# accept surrounding whitespace and "_" separators, which Java rejects.
_JAVA_INTEGER = re.compile(r"[+-]?[0-9]+")


def crc32(data: bytes) -> int:
    """CRC32 masked to 31 bits, as `UtilAll.crc32` computes it."""
    return zlib.crc32(data) & 0x7FFFFFFF


def parse_java_integer(text: str, bits: int) -> int:
    """Parse `text` as Java's Integer.parseInt (bits=32) or Long.parseLong (bits=64) would.

    Raises ValueError naming the text when Java would throw NumberFormatException. (Java also
    accepts non-ASCII Unicode digits; files are written with ASCII digits only, so rmqlab does
    not.)
    """
    low, high = (INT_MIN, INT_MAX) if bits == 32 else (LONG_MIN, LONG_MAX)
    if not _JAVA_INTEGER.fullmatch(text):
        raise ValueError(f"{text!r} is not a decimal integer")
    # Leading zeros are legal in Java; more than 19 significant digits never fit in 64 bits (and
    # checking first keeps int() away from its 4300-digit limit).
    significant = text.lstrip("+-").lstrip("0")
    value = int(text) if len(significant) <= 19 else None
    if value is None or not low <= value <= high:
        raise ValueError(f"{text!r} does not fit in a {bits}-bit signed integer")
    return value


class CheckpointSerializer(Protocol[T]):
    """CheckpointFile.CheckpointSerializer: one entry <-> one line."""

    def to_line(self, entry: T) -> str:
        """The entry as one line: non-empty, without line breaks."""
        ...

    def from_line(self, line: str) -> T | None:
        """The entry on `line`; None to skip the line; ValueError when the line is malformed."""
        ...


class CheckpointFileCorruptError(ValueError):
    """Neither the checkpoint file nor its `.bak` copy could supply the entries.

    `problems` lists (file path, what was wrong) for each file that was consulted.
    """

    def __init__(self, problems: Sequence[tuple[str, str]]):
        self.problems = list(problems)
        detail = "; ".join(f"{path}: {reason}" for path, reason in self.problems)
        super().__init__(f"unusable checkpoint file and backup: {detail}")


class _Unusable(Exception):
    """Internal: one file's content failed a check; `reason` says which."""

    def __init__(self, reason: str):
        super().__init__(reason)
        self.reason = reason


class CheckpointFile(Generic[T]):
    """A list of entries persisted in RocketMQ's checkpoint format (`CheckpointFile`).

    `validator`, if given, is called with the parsed entries of a file and raises ValueError to
    declare them inconsistent (the file is then unusable and the backup is tried). RocketMQ has no
    such hook; EpochFileCache uses it to reject out-of-order epoch files.
    `logger` receives the warnings about falling back to the backup.
    """

    def __init__(
        self,
        file_path: str | os.PathLike[str],
        serializer: CheckpointSerializer[T],
        *,
        validator: Callable[[list[T]], None] | None = None,
        logger: logging.Logger | None = None,
    ):
        self._file_path = os.fspath(file_path)
        self._serializer = serializer
        self._validator = validator
        self._log = logger if logger is not None else logging.getLogger("rmqlab.common")
        # RocketMQ synchronizes write/read on the instance and string2File on the class; one lock
        # per file gives the same exclusion for every writer that shares this object.
        self._lock = threading.Lock()

    @property
    def file_path(self) -> str:
        return self._file_path

    def get_back_file_path(self) -> str:
        """CheckpointFile.getBackFilePath: `<path>.bak`."""
        return self._file_path + BAK_SUFFIX

    # ------------------------------------------------------------------ writing

    def write(self, entries: Sequence[T]) -> None:
        """Persist `entries`: copy the current main file to `.bak`, then rewrite the main file.

        Empty list - FIXED, not mirrored: RocketMQ's `CheckpointFile.write` returns without touching
        the disk when the list is empty, so a list truncated to nothing comes back after a restart.
        rmqlab removes `.bak` and then the main file instead. "No file" is how a new store looks and
        both RocketMQ and rmqlab read it as an empty list, so the directory stays readable by
        RocketMQ with the same meaning. Order: a crash after removing `.bak` leaves the old main
        file, i.e. the truncation simply did not happen; removing the main file first could leave an
        old `.bak` that would be resurrected.

        Durability - deviation: MixAll.string2File at RocketMQ commit 8fc57f1 writes in place and
        never forces the data to disk, so after a power loss the file can be stale or torn (the
        CRC line and `.bak` exist to survive that). rmqlab fsyncs the backup before the main file
        is overwritten, the main file, and the directory entry. Then at every instant at least one
        of the two files holds a complete, durable checkpoint, which is what makes the `.bak`
        fallback sound. The cost is negligible: the epoch file changes only on role and epoch
        changes. Like RocketMQ (since ISSUE #5905 dropped its tmp-file + rename) the main file is
        rewritten in place, so a torn main file and the recovery from `.bak` remain reproducible.
        """
        entries = list(entries)
        main_path, bak_path = self._file_path, self.get_back_file_path()
        with self._lock:
            if not entries:
                _remove_if_exists(bak_path)
                _remove_if_exists(main_path)
                _fsync_directory(main_path)
                return
            content = self._encode(entries)
            parent = os.path.dirname(main_path)
            if parent:
                os.makedirs(parent, exist_ok=True)  # MixAll.string2FileNotSafe: mkdirs
            previous = _read_bytes(main_path)
            if previous is not None:
                try:
                    self._parse(previous)
                except _Unusable as exc:
                    # Deviation: MixAll copies whatever the main file holds. When the main file is
                    # torn, the current `.bak` is the last good checkpoint (it is what was loaded),
                    # and overwriting it with the torn bytes would leave two bad files if this
                    # write were interrupted too. Keep it.
                    self._log.warning(
                        "checkpoint file %s is unusable (%s); keeping %s instead of copying it over",
                        main_path, exc.reason, bak_path)
                else:
                    # Byte-for-byte copy; MixAll decodes and re-encodes the text, which only
                    # differs for bytes that are not valid UTF-8 (and those would not parse).
                    _write_durably(bak_path, previous)
            _write_durably(main_path, content.encode("utf-8"))
            _fsync_directory(main_path)

    def _encode(self, entries: list[T]) -> str:
        lines = []
        for entry in entries:
            line = self._serializer.to_line(entry)
            # Deviation: RocketMQ silently omits a null/empty line but still counts the entry,
            # producing a file it cannot read back (count mismatch). Refuse to write one.
            if not isinstance(line, str) or not line or _LINE_BREAK.search(line):
                raise ValueError(f"{self._file_path}: serializer produced an invalid line {line!r} for {entry!r}")
            lines.append(line + _LINE_SEPARATOR)
        body = "".join(lines)
        crc = crc32(body.encode("utf-8"))
        return f"{len(entries)}{_LINE_SEPARATOR}{crc}{_LINE_SEPARATOR}{body}"

    # ------------------------------------------------------------------ reading

    def read(self) -> list[T]:
        """Read the entries, falling back to `<path>.bak` as RocketMQ's `CheckpointFile.read` does.

        Returns [] when neither file exists. Raises CheckpointFileCorruptError when the backup
        is needed but missing, unusable or empty after the main file was unusable, or unusable
        after the main file was missing or empty.

        Deviations from RocketMQ, all about failing loudly instead of forgetting epochs:
        * An unparsable number (count, CRC or entry line) throws NumberFormatException in
          RocketMQ, which escapes the IOException handling: the `.bak` is never tried and the
          broker fails to start. rmqlab treats it like any other damage and tries the `.bak`.
        * When the `.bak` is unusable too, RocketMQ's initCacheFromFile logs and returns false,
          and AutoSwitchHAService ignores that: the broker runs with an empty epoch cache. When
          the main file is damaged and there is no `.bak`, RocketMQ returns an empty list without
          even logging. An empty epoch cache makes a slave skip truncation in the handshake
          (`AutoSwitchHAClient.doTruncate`) and lets divergent data stand, so rmqlab raises an error naming
          both files instead; an operator who really wants to start empty deletes the files.
        """
        main_path, bak_path = self._file_path, self.get_back_file_path()
        with self._lock:
            main_problem: str | None = None
            try:
                main_entries = self._read_one(main_path)
            except _Unusable as exc:
                main_problem, main_entries = exc.reason, None
            else:
                if main_entries:
                    return main_entries
            # Like RocketMQ: the backup is read when the main file is unusable, missing or empty.
            main_state = main_problem or ("missing" if main_entries is None else "holds no entries")
            try:
                bak_entries = self._read_one(bak_path)
            except _Unusable as exc:
                raise CheckpointFileCorruptError([(main_path, main_state), (bak_path, exc.reason)]) from None
            if main_problem is not None and not bak_entries:
                bak_state = "missing" if bak_entries is None else "holds no entries"
                raise CheckpointFileCorruptError([(main_path, main_problem), (bak_path, bak_state)])
            if bak_entries:
                self._log.warning("checkpoint file %s is %s; loaded %d entries from backup %s",
                                  main_path, main_state, len(bak_entries), bak_path)
                return bak_entries
            return []

    def _read_one(self, path: str) -> list[T] | None:
        """Entries of one file, None when it does not exist; _Unusable when damaged."""
        try:
            data = _read_bytes(path)
        except OSError as exc:
            raise _Unusable(f"cannot be read ({exc.strerror or exc})") from None
        return None if data is None else self._parse(data)

    def _parse(self, data: bytes) -> list[T]:
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise _Unusable(f"is not valid UTF-8 (byte {exc.start})") from None
        lines = _LINE_BREAK.split(text)
        if lines[-1] == "":
            lines.pop()  # readLine reports no empty line after the final line break
        if not lines:
            raise _Unusable("is empty (no entry-count line)")
        try:
            expected = parse_java_integer(lines[0], 32)
        except ValueError as exc:
            raise _Unusable(f"line 1 (entry count): {exc}") from None
        if len(lines) < 2:
            raise _Unusable("has no line 2 (CRC)")
        try:
            stored_crc = parse_java_integer(lines[1], 32)
        except ValueError as exc:
            raise _Unusable(f"line 2 (CRC): {exc}") from None
        entries: list[T] = []
        skipped: list[int] = []
        for number, line in enumerate(lines[2:], start=3):
            try:
                entry = self._serializer.from_line(line)
            except ValueError as exc:
                raise _Unusable(f"line {number} {line!r}: {exc}") from None
            if entry is None:
                skipped.append(number)
            else:
                entries.append(entry)
        # Same order of checks as RocketMQ: count first, then CRC.
        if len(entries) != expected:
            reason = f"line 1 says {expected} entries but {len(entries)} were found"
            if skipped:
                reason += f" (unrecognised line(s) {', '.join(map(str, skipped))} skipped)"
            raise _Unusable(reason)
        # The CRC covers every entry line, skipped ones included, each ended by the separator.
        truth = crc32("".join(line + _LINE_SEPARATOR for line in lines[2:]).encode("utf-8"))
        if stored_crc != NOT_CHECK_CRC_MAGIC_CODE and stored_crc != truth:
            raise _Unusable(f"CRC mismatch: line 2 says {stored_crc}, the entry lines give {truth}")
        if self._validator is not None:
            try:
                self._validator(entries)
            except ValueError as exc:
                raise _Unusable(str(exc)) from None
        return entries


def _read_bytes(path: str) -> bytes | None:
    """MixAll.file2String on bytes: the content, or None when the file does not exist."""
    try:
        with open(path, "rb") as f:
            return f.read()
    except FileNotFoundError:
        return None


def _write_durably(path: str, data: bytes) -> None:
    # In place, like IOTinyUtils.writeStringToFile (FileOutputStream truncates, then writes).
    with open(path, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())


def _remove_if_exists(path: str) -> None:
    try:
        os.remove(path)
    except FileNotFoundError:
        pass


def _fsync_directory(file_path: str) -> None:
    """Make a file's creation or removal durable (POSIX; directories cannot be fsync'd elsewhere)."""
    if os.name != "posix":
        return
    directory = os.path.dirname(file_path) or "."
    try:
        fd = os.open(directory, os.O_RDONLY)
    except FileNotFoundError:
        return  # nothing was ever created there
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
