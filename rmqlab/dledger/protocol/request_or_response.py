"""RequestOrResponse (io.openmessaging.storage.dledger.protocol.RequestOrResponse, 0.3.1.2) and the JSON
every DLedger body travels as.

DLedgerRpcNettyService sends each request as a RocketMQ remoting command: code = the
DLedgerRequestCode, no extFields, body = ``JSON.toJSONBytes(request)`` (fastjson); the response is a
command with remoting code 200 (DLedger's SUCCESS, not RocketMQ's 0) whose body is the response
object's JSON, with the real result in its ``code`` property. fastjson writes a bean's *getter*
properties (``getX()``/``isX()``), in alphabetical order, leaving out nulls; enums as their names;
``byte[]`` as a Base64 string (fastjson's ``SerializeWriter.writeByteArray``; not checked against a
running JVM here). So computed getters travel too: PushEntryRequest sends ``batch``, ``count``,
``firstEntryIndex``, ``lastEntryIndex`` and ``totalSize``, which the receiver ignores (no setters).
Reading (``JSON.parseObject``) fills what has a setter, and a getter-only list (``batchEntry``).
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Mapping
from typing import Any, ClassVar, TypeVar

from rmqlab.dledger.entry.dledger_entry import DLedgerEntry
from rmqlab.dledger.protocol.dledger_response_code import DLedgerResponseCode
from rmqlab.remoting.protocol.remoting_serializable import decode_json, encode

T = TypeVar("T", bound="RequestOrResponse")


def bytes_to_json(data: bytes | None) -> str | None:
    """byte[] as fastjson writes it: standard Base64 with padding."""
    return None if data is None else base64.b64encode(data).decode("ascii")


def bytes_from_json(value: Any, what: str) -> bytes | None:
    if value is None:
        return None
    if not isinstance(value, str):
        raise ValueError(f"{what}: a byte[] is a Base64 string, not {type(value).__name__}")
    try:
        return base64.b64decode(value, validate=True)
    except binascii.Error as e:
        raise ValueError(f"{what}: not Base64 ({e})") from None


def _int(obj: Mapping[str, Any], name: str, default: int | None) -> int | None:
    value = obj.get(name)
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError(f"{name}: expected a number, got {value!r}")
    return value


def _str(obj: Mapping[str, Any], name: str) -> str | None:
    value = obj.get(name)
    if value is not None and not isinstance(value, str):
        raise ValueError(f"{name}: expected a string, got {value!r}")
    return value


def entry_to_json(entry: DLedgerEntry) -> dict[str, Any]:
    """DLedgerEntry's getter properties: body, bodyCrc, chainCrc, channel, index, magic, pos, size, term."""
    return {"body": bytes_to_json(entry.body), "bodyCrc": entry.body_crc, "chainCrc": entry.chain_crc,
            "channel": entry.channel, "index": entry.index, "magic": entry.magic, "pos": entry.pos,
            "size": entry.size, "term": entry.term}


def entry_from_json(obj: Any) -> DLedgerEntry:
    if not isinstance(obj, Mapping):
        raise ValueError(f"a DLedgerEntry is a JSON object, not {obj!r}")
    # Java's field defaults: magic, size, index, term, pos 0/-1 as DLedgerEntry declares them.
    default = DLedgerEntry()
    return DLedgerEntry(magic=_int(obj, "magic", default.magic), size=_int(obj, "size", default.size),
                        index=_int(obj, "index", default.index), term=_int(obj, "term", default.term),
                        pos=_int(obj, "pos", default.pos), channel=_int(obj, "channel", 0),
                        chain_crc=_int(obj, "chainCrc", 0), body_crc=_int(obj, "bodyCrc", 0),
                        body=bytes_from_json(obj.get("body"), "body") or b"")


class RequestOrResponse:
    """The fields every DLedger request and response carries; `code` defaults to SUCCESS (200)."""

    # Subclasses: their own properties as (JSON name, attribute) pairs, encoded by _prop_to_json.
    _PROPS: ClassVar[tuple[tuple[str, str], ...]] = ()

    def __init__(self, **fields: Any):
        self.group: str | None = None
        self.remote_id: str | None = None
        self.local_id: str | None = None
        self.code: int = DLedgerResponseCode.SUCCESS
        self.leader_id: str | None = None
        self.term: int = -1
        self._init_props()
        for name, value in fields.items():
            if not hasattr(self, name):
                raise TypeError(f"{type(self).__name__} has no field {name!r}")
            setattr(self, name, value)

    def _init_props(self) -> None:
        """Subclasses set their own fields' Java defaults here."""

    def copy_base_info(self: T, other: RequestOrResponse) -> T:
        """RequestOrResponse.copyBaseInfo: group, term, code, localId, remoteId, leaderId."""
        self.group, self.term, self.code = other.group, other.term, other.code
        self.local_id, self.remote_id, self.leader_id = other.local_id, other.remote_id, other.leader_id
        return self

    def base_info(self) -> str:
        return (f"info[group={self.group},term={self.term},code={self.code},local={self.local_id},"
                f"remote={self.remote_id},leader={self.leader_id}]")

    # -- JSON ---------------------------------------------------------------------------------------
    def _extra_json(self) -> dict[str, Any]:
        """Computed getter properties (written, never read)."""
        return {}

    def _prop_to_json(self, json_name: str, value: Any) -> Any:
        return value

    def _prop_from_json(self, json_name: str, value: Any) -> Any:
        return value

    def to_json_dict(self) -> dict[str, Any]:
        props: dict[str, Any] = {"code": int(self.code), "group": self.group, "leaderId": self.leader_id,
                                 "localId": self.local_id, "remoteId": self.remote_id, "term": self.term}
        for json_name, attr in self._PROPS:
            props[json_name] = self._prop_to_json(json_name, getattr(self, attr))
        props.update(self._extra_json())
        # fastjson's SortField: properties in alphabetical order; nulls are left out by to_json.
        return {k: props[k] for k in sorted(props)}

    def encode(self) -> bytes:
        """JSON.toJSONBytes(this)."""
        return encode(self.to_json_dict())

    @classmethod
    def from_json_dict(cls: type[T], obj: Any) -> T:
        if not isinstance(obj, Mapping):
            raise ValueError(f"{cls.__name__}: the body is a JSON object, not {type(obj).__name__}")
        out = cls()
        out.group, out.remote_id, out.local_id = _str(obj, "group"), _str(obj, "remoteId"), _str(obj, "localId")
        out.leader_id = _str(obj, "leaderId")
        out.code = _int(obj, "code", DLedgerResponseCode.SUCCESS)
        out.term = _int(obj, "term", -1)
        for json_name, attr in cls._PROPS:
            if json_name in obj and obj[json_name] is not None:
                setattr(out, attr, out._prop_from_json(json_name, obj[json_name]))
        return out

    @classmethod
    def decode(cls: type[T], body: bytes | None) -> T:
        """JSON.parseObject(body, cls); ValueError when the body is not such an object."""
        return cls.from_json_dict(decode_json(body, cls.__name__))

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.to_json_dict()!r})"

    def __eq__(self, other: object) -> bool:
        if type(other) is not type(self):
            return NotImplemented
        return self.to_json_dict() == other.to_json_dict()  # type: ignore[attr-defined]

    __hash__ = None  # type: ignore[assignment]


def long_prop(value: Any, name: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError(f"{name}: expected a number, got {value!r}")
    return value
