"""GrpcioTransport: rmqlab's 5.x client over real gRPC (grpc.aio), for real processes; the only
module of the client that imports grpcio. One channel per endpoint, in the running event loop.

grpcio does not say whether a failed call's request left this process, so every failure counts
as possibly sent (RpcError.sent stays True): a send that fails here is traced as indeterminate
unless the Proxy answered a status saying it stored nothing. The client's own frames are not
traced (the Proxy traces its side of every call).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import grpc

from rmqlab.client.grpc.rpc import SERVICE_NAME, BidiStream, Metadata, RpcError, RpcTransport


def _serialize(message: Any) -> bytes:
    return message.SerializeToString()


def _error(e: grpc.aio.AioRpcError) -> RpcError:
    return RpcError(e.code().name, e.details() or "")


class GrpcioTransport(RpcTransport):
    def __init__(self):
        self._channels: dict[str, grpc.aio.Channel] = {}

    def _channel(self, endpoint: str) -> grpc.aio.Channel:
        channel = self._channels.get(endpoint)
        if channel is None:
            channel = self._channels[endpoint] = grpc.aio.insecure_channel(endpoint)
        return channel

    def _path(self, method: str) -> str:
        return f"/{SERVICE_NAME}/{method}"

    async def unary(self, endpoint: str, method: str, request: Any, response_class: type, metadata: Metadata,
                    timeout_ms: float) -> Any:
        call = self._channel(endpoint).unary_unary(self._path(method), request_serializer=_serialize,
                                                   response_deserializer=response_class.FromString)
        try:
            return await call(request, metadata=metadata, timeout=timeout_ms / 1000.0)
        except grpc.aio.AioRpcError as e:
            raise _error(e) from None

    async def server_stream(self, endpoint: str, method: str, request: Any, response_class: type,
                            metadata: Metadata, timeout_ms: float) -> AsyncIterator[Any]:
        stub = self._channel(endpoint).unary_stream(self._path(method), request_serializer=_serialize,
                                                    response_deserializer=response_class.FromString)
        call = stub(request, metadata=metadata, timeout=timeout_ms / 1000.0)
        try:
            async for response in call:
                yield response
        except grpc.aio.AioRpcError as e:
            raise _error(e) from None
        finally:
            call.cancel()

    async def bidi(self, endpoint: str, method: str, response_class: type, metadata: Metadata) -> BidiStream:
        stub = self._channel(endpoint).stream_stream(self._path(method), request_serializer=_serialize,
                                                     response_deserializer=response_class.FromString)
        return _GrpcioBidi(stub(metadata=metadata))

    async def close(self) -> None:
        channels, self._channels = self._channels, {}
        for channel in channels.values():
            await channel.close()

    def drop(self) -> None:
        self._channels = {}


class _GrpcioBidi(BidiStream):
    """write() and done_writing() queue behind each other (grpc.aio takes one write at a time)."""

    def __init__(self, call):
        self.call = call
        self._last: asyncio.Future | None = None

    def _chain(self, action) -> None:
        previous = self._last

        async def run() -> None:
            if previous is not None:
                await previous
            try:
                await action()
            except (grpc.aio.AioRpcError, grpc.aio.UsageError, RuntimeError):
                pass  # the stream ended; read() reports how

        self._last = asyncio.ensure_future(run())

    def write(self, message: Any) -> None:
        if self.call.done():
            raise RpcError("CANCELLED", "the stream has ended")
        self._chain(lambda: self.call.write(message))

    async def read(self) -> Any:
        try:
            response = await self.call.read()
        except grpc.aio.AioRpcError as e:
            raise _error(e) from None
        if response is grpc.aio.EOF:
            code = await self.call.code()
            if code != grpc.StatusCode.OK:
                raise RpcError(code.name, await self.call.details() or "")
            return None
        return response

    def done_writing(self) -> None:
        self._chain(self.call.done_writing)

    def cancel(self) -> None:
        self.call.cancel()
