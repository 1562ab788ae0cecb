"""Address strings in RocketMQ configuration: ``host:port``, ``a;b`` lists and DLedger peers.

RocketMQ splits namesrvAddr and controllerAddr on ";" and each entry on its last ":"
(NetworkUtil.string2SocketAddress); BrokerStartup exits with "The Name Server Address[...]
illegal" when an entry does not parse. controllerDLegerPeers is DLedger's
``id-host:port;id-host:port`` (RocketMQ's "主备自动切换模式部署", controller deployment). These helpers parse the same
syntax and, for the config fields, return the "expected ..." text when a value is malformed.
"""

from __future__ import annotations

_ADDR_EXPECTED = "host:port"
_LIST_EXPECTED = "host:port entries separated by ';', e.g. 127.0.0.1:9876;127.0.0.1:9886"
_PEERS_EXPECTED = "id-host:port entries separated by ';', e.g. n0-127.0.0.1:9877;n1-127.0.0.1:9878"


def parse_addr(text: str) -> tuple[str, int]:
    """Split ``host:port`` at its last colon (as RocketMQ does); ValueError when malformed."""
    host, sep, port_text = text.rpartition(":")
    if not sep or not host or any(c.isspace() for c in host) or not port_text.isascii() or not port_text.isdigit():
        raise ValueError(f"{text!r} is not host:port")
    port = int(port_text)
    if not 1 <= port <= 65535:
        raise ValueError(f"{text!r}: port {port} is outside 1..65535")
    return host, port


def split_addr_list(text: str) -> list[str]:
    """The entries of a ``;``-separated address list. Like Java's String.split, trailing empty
    entries are dropped ("a;" is one entry); an empty entry in the middle is kept (and then fails
    to parse, as it does in RocketMQ)."""
    parts = [p.strip() for p in text.split(";")]
    while parts and parts[-1] == "":
        parts.pop()
    return parts


def check_addr_list(text: str) -> str | None:
    """Field check for namesrvAddr / controllerAddr: None when every entry is host:port."""
    if text.strip() == "":
        return None  # empty means "not configured"; the cross-field checks decide if that is fine
    try:
        for entry in split_addr_list(text):
            parse_addr(entry)
    except ValueError:
        return _LIST_EXPECTED
    return None


def parse_dleger_peers(text: str) -> dict[str, str]:
    """``n0-127.0.0.1:9877;n1-...`` -> {"n0": "127.0.0.1:9877", ...}; ValueError when malformed,
    when an id or an address repeats. The id is what precedes the first '-'."""
    peers: dict[str, str] = {}
    entries = split_addr_list(text)
    if not entries:
        raise ValueError("no peers")
    for entry in entries:
        peer_id, sep, addr = entry.partition("-")
        if not sep or not peer_id or any(c.isspace() for c in peer_id):
            raise ValueError(f"{entry!r} is not id-host:port")
        parse_addr(addr)
        if peer_id in peers:
            raise ValueError(f"peer id {peer_id!r} appears twice")
        if addr in peers.values():
            raise ValueError(f"address {addr!r} appears twice")
        peers[peer_id] = addr
    return peers


def check_dleger_peers(text: str) -> str | None:
    """Field check for controllerDLegerPeers."""
    if text.strip() == "":
        return None  # missing peers are reported by the controller's cross-field check
    try:
        parse_dleger_peers(text)
    except ValueError as e:
        return f"{_PEERS_EXPECTED} ({e})"
    return None
