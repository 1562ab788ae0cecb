"""CONTROLLER_GET_METADATA_INFO (1005) response header (``header/controller/GetMetaDataResponseHeader.java``).

Any controller answers it, leader or not (RIP-44, "GetControllerMetadata"): brokers and
``mqadmin`` use it to find the leader, the only controller that serves the other requests.
"""

from __future__ import annotations

from dataclasses import dataclass

from rmqlab.remoting.protocol.header.command_custom_header import BOOLEAN, STRING, CommandCustomHeader, header_field


@dataclass
class GetMetaDataResponseHeader(CommandCustomHeader):
    group: str | None = header_field("group", STRING)
    controller_leader_id: str | None = header_field("controllerLeaderId", STRING)
    controller_leader_address: str | None = header_field("controllerLeaderAddress", STRING)
    # The Java field is a primitive boolean named isLeader; the extFields key is the field name.
    is_leader: bool = header_field("isLeader", BOOLEAN, default=False)
    # ";"-separated peer addresses.
    peers: str | None = header_field("peers", STRING)
