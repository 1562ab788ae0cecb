"""Messages as the producer sends them and as the store keeps them (``MessageExtEncoder``).

Mirrors RocketMQ's ``Message`` → ``MessageExt`` → ``MessageExtBrokerInner`` hierarchy with
snake_case fields. Hosts are ``(ip_str, port)`` tuples instead of ``InetSocketAddress``; the ip
must be an IPv4 or IPv6 literal (rmqlab never resolves names).
"""

from __future__ import annotations

import functools
import ipaddress
import struct
from collections.abc import Iterable
from dataclasses import dataclass, field

from rmqlab.common.java_compat import java_parse_int, java_string_hash_code
from rmqlab.common.message.message_const import MessageConst
from rmqlab.common.message.message_version import MessageVersion

Host = tuple[str, int]

_PORT = struct.Struct(">i")


class MessageFormatError(ValueError):
    """A message (or message bytes) that cannot be encoded or decoded, with the reason."""


def _parse_ip(host: Host, what: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address:
    if not (isinstance(host, tuple) and len(host) == 2 and isinstance(host[0], str)
            and isinstance(host[1], int) and not isinstance(host[1], bool)):
        raise MessageFormatError(f"{what} {host!r} is not an (ip_str, port) tuple")
    return _parse_ip_cached(host[0], host[1], what)


@functools.lru_cache(maxsize=4096)
def _parse_ip_cached(ip: str, port: int, what: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address:
    # Cached: every append encodes the born and store hosts, and a broker sees few distinct ones.
    if not 0 <= port <= 65535:
        # InetSocketAddress refuses ports outside 0..65535.
        raise MessageFormatError(f"{what} port {port} is outside 0..65535")
    try:
        return ipaddress.ip_address(ip)
    except ValueError:
        raise MessageFormatError(f"{what} {ip!r} is not an IPv4 or IPv6 address literal") from None


def is_ipv6_host(host: Host, what: str = "host") -> bool:
    """True for an IPv6 host (stored as 16 address bytes, with the V6 sys flag bit)."""
    return _parse_ip(host, what).version == 6


def socket_address_to_bytes(host: Host, what: str = "host") -> bytes:
    """``MessageExt.socketAddress2ByteBuffer``: the address bytes (4 or 16) then the port as a
    big-endian int - the BORNHOST/STOREHOSTADDRESS field and the head of an offset message id."""
    try:
        return _socket_address_bytes(host)
    except (TypeError, MessageFormatError):  # unhashable or invalid: re-check to name the field
        _parse_ip(host, what)
        raise


@functools.lru_cache(maxsize=4096)
def _socket_address_bytes(host: Host) -> bytes:
    # Cached on the (ip, port) tuple: every append encodes the born and store hosts.
    return _parse_ip(host, "host").packed + _PORT.pack(host[1])


def bytes_to_socket_address(data: bytes | bytearray | memoryview, what: str = "host") -> Host:
    """Inverse of :func:`socket_address_to_bytes` for 8 (IPv4) or 20 (IPv6) bytes.

    An IPv4-mapped IPv6 address stays IPv6 here; Java's InetAddress.getByAddress would turn it
    into an Inet4Address, which no longer matches the V6 sys flag the bytes were stored with."""
    data = bytes(data)
    if len(data) not in (8, 20):
        raise MessageFormatError(f"{what} field is {len(data)} bytes; expected 8 (IPv4) or 20 (IPv6)")
    port = _PORT.unpack_from(data, len(data) - 4)[0]
    if not 0 <= port <= 65535:
        raise MessageFormatError(f"{what} port {port} is outside 0..65535")
    return str(ipaddress.ip_address(data[:-4])), port


@dataclass
class Message:
    """``Message``: what a producer sends (topic, body, flag, properties).

    Unlike RocketMQ's producer constructors, which add ``WAIT=true``, ``properties`` starts
    empty, so the stored bytes hold exactly the properties put here. Properties keep insertion
    order (Java's HashMap order is arbitrary; the stored string is what counts)."""

    topic: str
    body: bytes | None
    flag: int = 0
    properties: dict[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not isinstance(self.topic, str):
            raise TypeError(f"topic must be str, not {type(self.topic).__name__}")
        if isinstance(self.body, (bytearray, memoryview)):
            self.body = bytes(self.body)
        elif self.body is not None and not isinstance(self.body, bytes):
            raise TypeError(f"body must be bytes, not {type(self.body).__name__}")
        if not isinstance(self.flag, int) or isinstance(self.flag, bool):
            raise TypeError(f"flag must be int, not {type(self.flag).__name__}")
        if self.properties is None:
            self.properties = {}
        elif not isinstance(self.properties, dict):
            raise TypeError(f"properties must be a dict, not {type(self.properties).__name__}")

    def put_property(self, name: str, value: str) -> None:
        """Set a property (system names included, as Message.putProperty)."""
        if not isinstance(name, str) or not isinstance(value, str):
            raise TypeError(f"property name and value must be str: {name!r}={value!r}")
        self.properties[name] = value

    def put_user_property(self, name: str, value: str) -> None:
        """``Message.putUserProperty``: refuses system names and blank names or values."""
        if name in MessageConst.STRING_HASH_SET:
            raise MessageFormatError(f"the property {name!r} is used by the system; choose another name")
        if not isinstance(name, str) or not isinstance(value, str) or not name.strip() or not value.strip():
            raise MessageFormatError(f"the name or value of a property can not be blank: {name!r}={value!r}")
        self.properties[name] = value

    def get_property(self, name: str) -> str | None:
        return self.properties.get(name)

    def clear_property(self, name: str) -> None:
        self.properties.pop(name, None)

    @property
    def tags(self) -> str | None:
        """The TAGS property (one tag; the ConsumeQueue stores its Java hashCode)."""
        return self.properties.get(MessageConst.PROPERTY_TAGS)

    @tags.setter
    def tags(self, tags: str) -> None:
        self.put_property(MessageConst.PROPERTY_TAGS, tags)

    @property
    def keys(self) -> str | None:
        """The KEYS property: index keys separated by a space (MessageConst.KEY_SEPARATOR)."""
        return self.properties.get(MessageConst.PROPERTY_KEYS)

    @keys.setter
    def keys(self, keys: str | Iterable[str]) -> None:
        # Message.setKeys(Collection) joins with KEY_SEPARATOR; a str is stored as given.
        if not isinstance(keys, str):
            keys = MessageConst.KEY_SEPARATOR.join(keys)
        self.put_property(MessageConst.PROPERTY_KEYS, keys)

    @property
    def delay_time_level(self) -> int:
        """The DELAY property as an int (0 when absent), as Message.getDelayTimeLevel."""
        t = self.properties.get(MessageConst.PROPERTY_DELAY_TIME_LEVEL)
        return 0 if t is None else java_parse_int(t)

    @delay_time_level.setter
    def delay_time_level(self, level: int) -> None:
        self.put_property(MessageConst.PROPERTY_DELAY_TIME_LEVEL, str(level))

    @property
    def wait_store_msg_ok(self) -> bool:
        """The WAIT property; absent means true (Message.isWaitStoreMsgOK)."""
        result = self.properties.get(MessageConst.PROPERTY_WAIT_STORE_MSG_OK)
        # Boolean.parseBoolean: only a case-insensitive "true" is true.
        return True if result is None else result.lower() == "true"

    @wait_store_msg_ok.setter
    def wait_store_msg_ok(self, wait: bool) -> None:
        self.put_property(MessageConst.PROPERTY_WAIT_STORE_MSG_OK, "true" if wait else "false")


@dataclass
class MessageExt(Message):
    """``MessageExt``: a message with the fields the store assigned.

    ``body`` is None when decoded with ``read_body=False``. ``msg_id`` is the offset message id
    (store host + commitlog offset, :func:`message_decoder.create_message_id`)."""

    queue_id: int = 0
    queue_offset: int = 0
    commit_log_offset: int = 0
    sys_flag: int = 0
    born_timestamp: int = 0
    born_host: Host | None = None
    store_timestamp: int = 0
    store_host: Host | None = None
    reconsume_times: int = 0
    prepared_transaction_offset: int = 0
    body_crc: int = 0
    store_size: int = 0
    msg_id: str | None = None

    @property
    def tags_code(self) -> int:
        """``MessageExtBrokerInner.tagsString2tagsCode``: Java hashCode of TAGS, 0 without tags.
        (Delayed messages get a deliver timestamp instead; that happens at dispatch, see
        dispatch_request.check_message_and_return_size.)"""
        tags = self.tags
        return java_string_hash_code(tags) if tags else 0

    @property
    def born_host_bytes(self) -> bytes:
        if self.born_host is None:
            raise MessageFormatError("born_host is not set")
        return socket_address_to_bytes(self.born_host, "born_host")

    @property
    def store_host_bytes(self) -> bytes:
        if self.store_host is None:
            raise MessageFormatError("store_host is not set")
        return socket_address_to_bytes(self.store_host, "store_host")


@dataclass
class MessageExtBrokerInner(MessageExt):
    """``MessageExtBrokerInner``: what the broker hands to the store to append.

    ``properties_string`` is, as in RocketMQ, the serialized properties the CommitLog writes as
    given: the broker fills it (from the wire string, or by serializing after adding its own
    properties), so an append never re-serializes. Unset, it is derived from ``properties``;
    ``put_property`` / ``clear_property`` reset it. Code that edits ``properties`` directly
    after setting it must reset it too (``properties_string = None``), as RocketMQ's broker calls
    setPropertiesString again. ``version`` follows the topic length."""

    _properties_string: str | None = field(default=None, repr=False, compare=False)

    @property
    def properties_string(self) -> str:
        if self._properties_string is not None:
            return self._properties_string
        from rmqlab.common.message.message_decoder import message_properties_to_string
        return message_properties_to_string(self.properties)

    @properties_string.setter
    def properties_string(self, value: str | None) -> None:
        if value is not None and not isinstance(value, str):
            raise TypeError(f"properties_string must be str or None, not {type(value).__name__}")
        self._properties_string = value

    def put_property(self, name: str, value: str) -> None:
        super().put_property(name, value)
        self._properties_string = None

    def clear_property(self, name: str) -> None:
        super().clear_property(name)
        self._properties_string = None

    @property
    def version(self) -> MessageVersion:
        """V2 for topics longer than 127 UTF-8 bytes, else V1 (``MessageExtEncoder``)."""
        return MessageVersion.for_topic_length(len(self.topic.encode("utf-8", "surrogatepass")))
