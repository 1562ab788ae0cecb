"""GrpcServer (proxy/grpc/GrpcServer.java): MessagingService on a grpc.aio server, plaintext,
in the node's asyncio loop. The only module of the Proxy that touches grpcio.

Requests arrive as bytes and are parsed here, so a request that is not valid protobuf is answered
INVALID_ARGUMENT naming the method, instead of grpcio's generic INTERNAL "Exception deserializing
request". Every request and response message is traced as frame.recv / frame.send with
proto "grpc", the method, and for responses the status code name.
"""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING

import grpc

from rmqlab.proto.status import status_name
from rmqlab.proxy.grpc.v2.client_activity import StreamAbort
from rmqlab.proxy.grpc.v2.grpc_messaging_activity import (BIDI_STREAM, SERVER_STREAM, SERVICE_NAME, UNARY,
                                                          GrpcMessagingActivity, InvalidRequest, MethodSpec)
from rmqlab.proxy.grpc.v2.proxy_context import ProxyContext
from rmqlab.runtime.real import bind_error

if TYPE_CHECKING:
    from rmqlab.runtime.node import Node

log = logging.getLogger("rmqlab.proxy")


def _peer(context) -> str:
    peer = context.peer() or ""  # "ipv4:127.0.0.1:5555"
    return peer.split(":", 1)[1] if peer.startswith(("ipv4:", "ipv6:")) else peer


class GrpcServer:
    def __init__(self, node: Node, activity: GrpcMessagingActivity, host: str, port: int,
                 max_inbound_message_size: int):
        self.node = node
        self.activity = activity
        self.host = host
        self.port = port
        self.max_inbound_message_size = max_inbound_message_size
        self._server: grpc.aio.Server | None = None

    async def start(self) -> None:
        server = grpc.aio.server(options=[("grpc.max_receive_message_length", self.max_inbound_message_size),
                                          ("grpc.so_reuseport", 0)])
        handlers = {name: self._handler(spec) for name, spec in self.activity.methods.items()}
        server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler(SERVICE_NAME, handlers),))
        # grpcio reports a failed bind without its cause (older versions return 0, newer raise
        # RuntimeError("Failed to bind ...")): name the address and the OS's reason instead.
        try:
            bound = server.add_insecure_port(f"{self.host}:{self.port}")
        except RuntimeError:
            bound = 0
        if bound == 0:
            raise bind_error(self.host, self.port)
        self.port = bound
        await server.start()
        self._server = server

    async def shutdown(self, grace_s: float = 1.0) -> None:
        if self._server is not None:
            await self._server.stop(grace_s)
            self._server = None

    # -- per call ---------------------------------------------------------------------------------
    def _context(self, context) -> ProxyContext:
        remaining = context.time_remaining()
        return ProxyContext.from_metadata(context.invocation_metadata(), remote_address=_peer(context),
                                          local_address=f"{self.host}:{self.port}",
                                          remaining_ms=None if remaining is None else remaining * 1000)

    def _trace(self, kind: str, spec: MethodSpec, peer: str, size: int, message=None) -> None:
        fields = {"proto": "grpc", "peer": peer, "size": size, "method": spec.name}
        status = status_name(message) if message is not None else None
        if status is not None:
            fields["status"] = status
        self.node.trace(kind, **fields)

    async def _parse(self, spec: MethodSpec, data: bytes, context, peer: str):
        self._trace("frame.recv", spec, peer, len(data))
        try:
            return spec.parse_request(data)
        except InvalidRequest as e:
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, str(e))

    def _out(self, spec: MethodSpec, peer: str, message) -> bytes:
        data = message.SerializeToString()
        self._trace("frame.send", spec, peer, len(data), message)
        return data

    def _handler(self, spec: MethodSpec):
        if spec.shape == UNARY:
            async def unary(data: bytes, context):
                peer = _peer(context)
                request = await self._parse(spec, data, context, peer)
                response = await self.activity.call_unary(spec, self._context(context), request)
                return self._out(spec, peer, response)
            return grpc.unary_unary_rpc_method_handler(unary)

        if spec.shape == SERVER_STREAM:
            async def server_stream(data: bytes, context):
                peer = _peer(context)
                request = await self._parse(spec, data, context, peer)
                async for response in spec.handler(self._context(context), request):
                    yield self._out(spec, peer, response)
            return grpc.unary_stream_rpc_method_handler(server_stream)

        assert spec.shape == BIDI_STREAM

        async def bidi(request_iterator, context):
            # grpcio's reader/writer API rather than a generator, so the Proxy can also write
            # commands of its own (RecoverOrphanedTransactionCommand) through ctx.push.
            peer = _peer(context)
            lock = asyncio.Lock()

            async def write(message) -> None:
                async with lock:
                    await context.write(self._out(spec, peer, message))

            async def requests():
                async for data in request_iterator:
                    yield await self._parse(spec, data, context, peer)

            ctx = self._context(context)
            ctx.push = write
            try:
                async for response in spec.handler(ctx, requests()):
                    await write(response)
            except StreamAbort as e:
                await context.abort(getattr(grpc.StatusCode, e.grpc_code), e.message)
        return grpc.stream_stream_rpc_method_handler(bidi)
