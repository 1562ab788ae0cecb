"""The transport interface of rmqlab's 5.x client: MessagingService calls to an endpoint, whatever
carries them. Two implementations: FramedTransport (the simulator: rmqlab.proto.framed over
the node's streams) and GrpcioTransport (real processes: grpc.aio). The client core sees only
this module, so it never imports grpcio.

    await transport.unary(endpoint, "SendMessage", request, SendMessageResponse, metadata, timeout_ms)
    async for response in transport.server_stream(endpoint, "ReceiveMessage", request, ..., timeout_ms)
    stream = await transport.bidi(endpoint, "Telemetry", TelemetryCommand, metadata)
    stream.write(command); await stream.read()  # None at the end; stream.cancel()

Failures are RpcError with gRPC's status code name. `sent` says whether the request may have
reached the server: False only when it certainly did not (the connection could not be made).
"""

from __future__ import annotations

import abc
from collections.abc import AsyncIterator
from typing import Any

SERVICE_NAME = "apache.rocketmq.v2.MessagingService"
Metadata = list[tuple[str, str]]


class RpcError(Exception):
    def __init__(self, code: str, details: str, sent: bool = True):
        super().__init__(f"{code}: {details}")
        self.code = code
        self.details = details
        self.sent = sent


class BidiStream(abc.ABC):
    @abc.abstractmethod
    def write(self, message: Any) -> None:
        """Send one request message (RpcError when the stream has ended)."""

    @abc.abstractmethod
    async def read(self) -> Any:
        """The next response message; None when the server ended the stream with OK; RpcError
        when it ended with another status or the connection was lost."""

    @abc.abstractmethod
    def done_writing(self) -> None:
        """Half-close: no more requests (the server then ends the stream)."""

    @abc.abstractmethod
    def cancel(self) -> None:
        """End the stream from this side (idempotent)."""


class RpcTransport(abc.ABC):
    @abc.abstractmethod
    async def unary(self, endpoint: str, method: str, request: Any, response_class: type, metadata: Metadata,
                    timeout_ms: float) -> Any:
        """One request, one response."""

    @abc.abstractmethod
    def server_stream(self, endpoint: str, method: str, request: Any, response_class: type, metadata: Metadata,
                      timeout_ms: float) -> AsyncIterator[Any]:
        """One request, the responses until the server ends the stream (RpcError if not OK)."""

    @abc.abstractmethod
    async def bidi(self, endpoint: str, method: str, response_class: type, metadata: Metadata) -> BidiStream:
        """A stream both ways, without a deadline (Telemetry lives as long as the client)."""

    @abc.abstractmethod
    async def close(self) -> None:
        """Close every connection (calls in flight fail)."""

    def drop(self) -> None:
        """The process died: forget the connections without a goodbye."""


def default_transport(node) -> RpcTransport:
    """The framed transport inside the simulator (grpcio cannot open sockets there), grpcio on
    the real runtime."""
    from rmqlab.runtime.sim.node import SimNode

    if isinstance(node, SimNode):
        from rmqlab.client.grpc.framed_transport import FramedTransport

        return FramedTransport(node)
    from rmqlab.client.grpc.grpcio_transport import GrpcioTransport

    return GrpcioTransport()
