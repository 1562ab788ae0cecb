"""GET_ROUTEINFO_BY_TOPIC (105) request header (``GetRouteInfoRequestHeader.java``).

Java's class extends TopicRequestHeader/RpcRequestHeader, whose extra fields (``lo``, ``ns``,
``nsd``, ``bname``, ``oway``) concern static topics and proxying; the name server reads only these.
"""

from __future__ import annotations

from dataclasses import dataclass

from rmqlab.remoting.protocol.header.command_custom_header import BOOLEAN, STRING, CommandCustomHeader, header_field


@dataclass
class GetRouteInfoRequestHeader(CommandCustomHeader):
    topic: str = header_field("topic", STRING, not_null=True)
    # Ask for standard JSON (quoted broker-id keys) whatever the request's version says.
    accept_standard_json_only: bool | None = header_field("acceptStandardJsonOnly", BOOLEAN)
