"""RemotingHelper: small helpers every remoting user needs (RocketMQ's ``RemotingHelper.java`` and
``UtilAll.exceptionSimpleDesc``): code names for traces and logs, ``host:port`` parsing, and the
one-line exception text a SYSTEM_ERROR response carries as its remark.
"""

from __future__ import annotations

from rmqlab.remoting.request_code import RequestCode
from rmqlab.remoting.response_code import ResponseCode


def _code_names(cls: type) -> dict[int, str]:
    names: dict[int, str] = {}
    for klass in reversed(cls.__mro__):
        for name, value in vars(klass).items():
            if name.isupper() and isinstance(value, int):
                if value in names and names[value] != name:
                    # Two names for one number would make traces ambiguous; RocketMQ has none.
                    raise ValueError(f"{cls.__name__}: {name} and {names[value]} are both {value}")
                names[value] = name
    return names


REQUEST_CODE_NAMES: dict[int, str] = _code_names(RequestCode)
RESPONSE_CODE_NAMES: dict[int, str] = _code_names(ResponseCode)


def get_request_code_desc(code: int) -> str:
    """``RemotingHelper.getRequestCodeDesc``: the request code's name, or the number as text."""
    return REQUEST_CODE_NAMES.get(code, str(code))


def get_response_code_desc(code: int) -> str:
    """``RemotingHelper.getResponseCodeDesc``: the response code's name, or the number as text."""
    return RESPONSE_CODE_NAMES.get(code, str(code))


def string_to_address(addr: str) -> tuple[str, int]:
    """``RemotingHelper.string2SocketAddress`` without the DNS lookup: ``"host:port"`` → (host, port).

    The port is what follows the last colon, so ``[::1]:9876`` works (brackets are removed); a
    malformed address raises ValueError naming it.
    """
    host, sep, port_text = addr.rpartition(":")
    if not sep or not host or not port_text.isdigit():
        raise ValueError(f"address {addr!r} is not host:port")
    port = int(port_text)
    if not 0 < port < 65536:
        raise ValueError(f"address {addr!r}: port {port} is out of range")
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    return host, port


def peer_address(peername: object) -> str:
    """``parseChannelRemoteAddr``: a stream's ``get_extra_info("peername")`` as ``host:port``.

    The real runtime gives a socket address tuple; a runtime may already give a string; an
    unknown peer is ``"?"``.
    """
    if isinstance(peername, tuple) and len(peername) >= 2:
        host, port = peername[0], peername[1]
        return f"[{host}]:{port}" if ":" in str(host) else f"{host}:{port}"
    if isinstance(peername, str) and peername:
        return peername
    return "?"


def exception_simple_desc(e: BaseException) -> str:
    """``UtilAll.exceptionSimpleDesc``: the exception and where it was raised, on one line.

    Java writes ``e.toString()`` (class name, ": ", message) then ``", "`` and the innermost stack
    frame (``Class.method(File.java:line)``); this is the Python equivalent:
    ``ValueError: boom, process(processors.py:42)``.
    """
    text = f"{type(e).__name__}: {e}" if str(e) else type(e).__name__
    tb = e.__traceback__
    if tb is None:
        return text
    while tb.tb_next is not None:
        tb = tb.tb_next
    code = tb.tb_frame.f_code
    filename = code.co_filename.replace("\\", "/").rsplit("/", 1)[-1]
    return f"{text}, {code.co_name}({filename}:{tb.tb_lineno})"


# A log line quotes at most this much of what a peer sent: a header value may be megabytes long
# (a frame holds up to 16 MiB), and one bad request must not write that into the log.
LOG_TEXT_MAX = 300


def clip(text: object, limit: int = LOG_TEXT_MAX) -> str:
    """``text`` (str() of it) cut to ``limit`` characters, saying how long it was."""
    s = text if isinstance(text, str) else str(text)
    if len(s) <= limit:
        return s
    return f"{s[:limit]}... ({len(s)} characters)"
