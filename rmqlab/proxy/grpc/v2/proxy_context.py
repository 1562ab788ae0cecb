"""ProxyContext (proxy/common/ProxyContext.java): who is calling and how long they will wait.

Built by the transport from the call's metadata (what rocketmq-python-client 5.1.2 sends: x-mq-client-id,
x-mq-language, x-mq-client-version, ...) and deadline; activities never see the transport.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any


@dataclass
class ProxyContext:
    client_id: str = ""
    remote_address: str = ""
    local_address: str = ""
    language: str = ""
    client_version: str = ""
    # Milliseconds left before the caller's deadline; None when the call has no deadline.
    remaining_ms: float | None = None
    # On a Telemetry stream: writes a server-initiated TelemetryCommand to the client (the
    # transport's; GrpcClientChannel.writeTelemetryCommand). None on other calls.
    push: Callable[[Any], Awaitable[None]] | None = field(default=None, compare=False, repr=False)

    @classmethod
    def from_metadata(cls, metadata, remote_address: str = "", local_address: str = "",
                      remaining_ms: float | None = None) -> ProxyContext:
        md = {k.lower(): v for k, v in (metadata or ())}
        return cls(client_id=md.get("x-mq-client-id", ""), remote_address=remote_address,
                   local_address=local_address, language=md.get("x-mq-language", ""),
                   client_version=md.get("x-mq-client-version", ""), remaining_ms=remaining_ms)
