"""ControllerResult: what a controller request computes (``impl/event/ControllerResult.java``).

The events to replicate (empty for a read or a rejection), the response header, the body, the
response code (SUCCESS unless set) and the remark. Computing one never changes the metadata; the
events change it when the Raft layer applies them (``ReplicasInfoManager.apply_event``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Generic, TypeVar

from rmqlab.controller.impl.event.event_message import EventMessage
from rmqlab.remoting.protocol.header.command_custom_header import CommandCustomHeader
from rmqlab.remoting.remoting_command import RemotingCommand
from rmqlab.remoting.response_code import ResponseCode

T = TypeVar("T", bound=CommandCustomHeader)


@dataclass
class ControllerResult(Generic[T]):
    response: T | None = None
    events: list[EventMessage] = field(default_factory=list)
    body: bytes | None = None
    response_code: int = ResponseCode.SUCCESS
    remark: str | None = None

    def set_code_and_remark(self, response_code: int, remark: str | None) -> None:
        """``setCodeAndRemark``."""
        self.response_code = response_code
        self.remark = remark

    def add_event(self, event: EventMessage) -> None:
        """``addEvent``."""
        self.events.append(event)

    def to_response_command(self) -> RemotingCommand:
        """The remoting response, as the controller builds it once the events are committed
        (``DLedgerController``: ``createResponseCommandWithHeader(code, header)`` plus body and remark)."""
        ext = self.response.to_ext_fields() if self.response is not None else None
        return RemotingCommand.create_response_command(self.response_code, self.remark, ext_fields=ext, body=self.body)
