"""BrokerMetadata and TempBrokerMetadata: a controller-mode broker's identity files
(``broker/.../controller/ReplicasManager.java``, ``store/.../ha/autoswitch/BrokerMetadata.java``).

RocketMQ's ``store/src/main/java/org/apache/rocketmq/store/ha/autoswitch/BrokerMetadata.java``,
``TempBrokerMetadata.java`` and their base ``MetadataFile``. The controller assigns each broker of
a set a persistent id (1, 2, 3, ...); the broker keeps it in two small text files:

* ``<storePathBrokerIdentity>`` (default ``<storePathRootDir>/brokerIdentity``):
  ``cluster#brokerName#brokerId`` — the id is the broker's once the controller accepted it;
* ``<storePathBrokerIdentity>-temp``: ``cluster#brokerName#brokerId#registerCheckCode`` — the id
  the broker is trying to claim, with the check code (``brokerAddress;currentTimeMillis``) that
  lets it claim the same id again after a crash between CONTROLLER_APPLY_BROKER_ID and writing the
  real file.

Writing deletes the old file first, then writes the text (``MetadataFile.writeToFile``); reading
a missing file leaves the fields unset (``isLoaded`` false).

Deviations: RocketMQ keeps these classes in its store module; rmqlab keeps them beside their only
user, the ReplicasManager. A file that does not split into the expected fields is reported as
ValueError and leaves the fields unset (Java's ``decodeFromStr`` may set the first fields before
failing with an ArrayIndexOutOfBoundsException). The text is fsynced so a machine crash of the
simulator's crash model cannot lose an id the controller has accepted (Java writes through the page
cache without forcing it).
"""

from __future__ import annotations

import os


def _read_text(path: str) -> str | None:
    """``MixAll.file2String``: the content, or None when the file does not exist."""
    try:
        with open(path, "rb") as f:
            return f.read().decode("utf-8")
    except FileNotFoundError:
        return None


def _write_text(path: str, text: str) -> None:
    """``MixAll.string2File`` after the delete: the parent directories, then the whole text."""
    parent = os.path.dirname(path)
    if parent:
        os.makedirs(parent, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        view = memoryview(text.encode("utf-8"))
        while view:
            view = view[os.write(fd, view):]
        os.fsync(fd)
    finally:
        os.close(fd)


def _delete(path: str) -> None:
    """``UtilAll.deleteFile``: remove it if it is there."""
    try:
        os.remove(path)
    except FileNotFoundError:
        pass


def _java_str(value: object) -> str:
    """How Java's StringBuilder appends a field (null as "null")."""
    return "null" if value is None else str(value)


class BrokerMetadata:
    """``cluster#brokerName#brokerId`` in ``file_path``."""

    FIELDS = 3

    def __init__(self, file_path: str):
        self.file_path = file_path
        self.cluster_name: str | None = None
        self.broker_name: str | None = None
        self.broker_id: int | None = None

    # -- MetadataFile ------------------------------------------------------------------------------
    def update_and_persist(self, cluster_name: str, broker_name: str, broker_id: int) -> None:
        self.cluster_name, self.broker_name, self.broker_id = cluster_name, broker_name, broker_id
        self.write_to_file()

    def write_to_file(self) -> None:
        _delete(self.file_path)
        _write_text(self.file_path, self.encode_to_str())

    def read_from_file(self) -> None:
        """Load the file if it exists; ValueError (fields left as they were) if it is malformed."""
        text = _read_text(self.file_path)
        if text is not None:
            self.decode_from_str(text)

    def file_exists(self) -> bool:
        return os.path.exists(self.file_path)

    def clear(self) -> None:
        self.clear_in_mem()
        _delete(self.file_path)

    # -- the format ----------------------------------------------------------------------------------
    def encode_to_str(self) -> str:
        return "#".join(_java_str(v) for v in self._values())

    def _values(self) -> list[object]:
        return [self.cluster_name, self.broker_name, self.broker_id]

    def decode_from_str(self, text: str) -> None:
        parts = self._split(text)
        self.cluster_name, self.broker_name, self.broker_id = parts[0], parts[1], _parse_long(parts[2], text)

    def _split(self, text: str) -> list[str]:
        # Java's String.split drops trailing empty strings; a short file is an error either way.
        parts = text.split("#")
        while parts and parts[-1] == "":
            parts.pop()
        if len(parts) < self.FIELDS:
            raise ValueError(f"{self.file_path}: {text!r} does not have the {self.FIELDS} '#'-separated fields "
                             f"of {type(self).__name__}")
        return parts

    def is_loaded(self) -> bool:
        return bool(self.cluster_name) and bool(self.broker_name) and self.broker_id is not None

    def clear_in_mem(self) -> None:
        self.cluster_name = self.broker_name = self.broker_id = None

    def __eq__(self, other: object) -> bool:
        if type(other) is not type(self):
            return NotImplemented
        return self._values() == other._values()

    __hash__ = None  # type: ignore[assignment]  # mutable

    def __repr__(self) -> str:
        return (f"{type(self).__name__}{{clusterName='{self.cluster_name}', brokerName='{self.broker_name}', "
                f"brokerId={self.broker_id}, filePath='{self.file_path}'}}")


class TempBrokerMetadata(BrokerMetadata):
    """``cluster#brokerName#brokerId#registerCheckCode`` in ``file_path`` (``<identity>-temp``)."""

    FIELDS = 4

    def __init__(self, file_path: str):
        super().__init__(file_path)
        self.register_check_code: str | None = None

    def update_and_persist(self, cluster_name: str, broker_name: str, broker_id: int,  # type: ignore[override]
                           register_check_code: str) -> None:
        self.cluster_name, self.broker_name, self.broker_id = cluster_name, broker_name, broker_id
        self.register_check_code = register_check_code
        self.write_to_file()

    def _values(self) -> list[object]:
        return [self.cluster_name, self.broker_name, self.broker_id, self.register_check_code]

    def decode_from_str(self, text: str) -> None:
        parts = self._split(text)
        broker_id = _parse_long(parts[2], text)
        self.cluster_name, self.broker_name, self.broker_id = parts[0], parts[1], broker_id
        self.register_check_code = parts[3]

    def is_loaded(self) -> bool:
        return super().is_loaded() and bool(self.register_check_code)

    def clear_in_mem(self) -> None:
        super().clear_in_mem()
        self.register_check_code = None

    def __repr__(self) -> str:
        return (f"TempBrokerMetadata{{registerCheckCode='{self.register_check_code}', "
                f"clusterName='{self.cluster_name}', brokerName='{self.broker_name}', brokerId={self.broker_id}, "
                f"filePath='{self.file_path}'}}")


def _parse_long(text: str, whole: str) -> int:
    """``Long.valueOf``: optional sign and decimal digits, in range."""
    body = text[1:] if text[:1] in "+-" else text
    if not body or not body.isascii() or not body.isdigit():
        raise ValueError(f"brokerId {text!r} in {whole!r} is not a number")
    value = int(text)
    if not -2 ** 63 <= value < 2 ** 63:
        raise ValueError(f"brokerId {text!r} in {whole!r} is out of the range of a Java long")
    return value


__all__ = ["BrokerMetadata", "TempBrokerMetadata"]
