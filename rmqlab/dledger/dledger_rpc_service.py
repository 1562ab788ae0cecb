"""DLedgerRpcNettyService (io.openmessaging.storage.dledger.DLedgerRpcNettyService, 0.3.1.2) on rmqlab's remoting.

A member listens on the address its id has in `peers` with a RemotingServer of its own (DLedger's
"exclusive" mode) and reaches the others with a RemotingClient, one connection per peer address.
A request is a remoting command: code = DLedgerRequestCode, no extFields, body = the request's
fastjson JSON; the answer is a command with remoting code 200 and the response's JSON as its body
(request_or_response explains the JSON). Calls are invokeAsync with 3000 ms, timed out by the
remoting layer's response-table scan as in RocketMQ. A failed call answers as DLedger does:
heartbeat, push, append and leadership transfer with code NETWORK_ERROR, vote with an empty
VoteResponse (result UNKNOWN, which the candidate does not count as valid).

Deviation: get() and metadata() as clients answer UNSUPPORTED, as 0.3.1.2's do; PULL has no handler.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, TypeVar

from rmqlab.dledger.protocol.dledger_protocol_bodies import (AppendEntryRequest, AppendEntryResponse,
                                                             GetEntriesRequest, GetEntriesResponse, HeartBeatRequest,
                                                             HeartBeatResponse, LeadershipTransferRequest,
                                                             LeadershipTransferResponse, MetadataRequest,
                                                             MetadataResponse, PushEntryRequest, PushEntryResponse,
                                                             VoteRequest, VoteResponse)
from rmqlab.dledger.protocol.dledger_request_code import DLedgerRequestCode
from rmqlab.dledger.protocol.dledger_response_code import DLedgerResponseCode
from rmqlab.dledger.protocol.request_or_response import RequestOrResponse
from rmqlab.remoting.exceptions import RemotingCommandError, RemotingError
from rmqlab.remoting.remoting_client import RemotingClient
from rmqlab.remoting.remoting_command import RemotingCommand
from rmqlab.remoting.remoting_helper import string_to_address
from rmqlab.remoting.remoting_server import RemotingServer

if TYPE_CHECKING:
    from rmqlab.dledger.dledger_server import DLedgerServer
    from rmqlab.remoting.remoting_channel import RemotingChannel
    from rmqlab.runtime.node import Node

R = TypeVar("R", bound=RequestOrResponse)

# DLedgerRpcNettyService: every invokeAsync waits 3000 ms.
RPC_TIMEOUT_MS = 3000

_REQUEST_TYPES: dict[DLedgerRequestCode, type[RequestOrResponse]] = {
    DLedgerRequestCode.METADATA: MetadataRequest,
    DLedgerRequestCode.APPEND: AppendEntryRequest,
    DLedgerRequestCode.GET: GetEntriesRequest,
    DLedgerRequestCode.VOTE: VoteRequest,
    DLedgerRequestCode.HEART_BEAT: HeartBeatRequest,
    DLedgerRequestCode.PUSH: PushEntryRequest,
    DLedgerRequestCode.LEADERSHIP_TRANSFER: LeadershipTransferRequest,
}


def wrap_request(code: DLedgerRequestCode, request: RequestOrResponse) -> RemotingCommand:
    """RemotingCommand.createRequestCommand(code, null) with the request's JSON as the body."""
    return RemotingCommand.create_request_command(int(code), None, body=request.encode())


def wrap_response(response: RequestOrResponse) -> RemotingCommand:
    """handleResponse: remoting code 200 (DLedger's SUCCESS), the response's JSON as the body."""
    return RemotingCommand.create_response_command(int(DLedgerResponseCode.SUCCESS), None, body=response.encode())


class DLedgerRpcNettyService:
    def __init__(self, server: DLedgerServer, node: Node, listen_address: str | None = None):
        self.dledger = server
        self.node = node
        # The member's address in `peers`; a relay in front of it may make it listen elsewhere.
        self.listen_address = listen_address or server.member_state.get_self_addr()
        host, port = string_to_address(self.listen_address)
        self.remoting_server = RemotingServer(node, host, port)
        self.remoting_client = RemotingClient(node)
        for code in (DLedgerRequestCode.METADATA, DLedgerRequestCode.APPEND, DLedgerRequestCode.GET,
                     DLedgerRequestCode.PULL, DLedgerRequestCode.PUSH, DLedgerRequestCode.VOTE,
                     DLedgerRequestCode.HEART_BEAT, DLedgerRequestCode.LEADERSHIP_TRANSFER):
            self.remoting_server.register_processor(int(code), self.process_request)

    async def startup(self) -> None:
        await self.remoting_server.start()
        self.node.log.info("listen the port: %d", self.remoting_server.port)

    async def shutdown(self) -> None:
        await self.remoting_server.shutdown()
        await self.remoting_client.shutdown()

    def get_peer_addr(self, group: str | None, peer_id: str | None) -> str:
        addr = self.dledger.member_state.get_peer_addr(peer_id) if peer_id is not None else None
        if addr is None:
            raise RemotingError(f"no address for peer {peer_id!r} of group {group!r}")
        return addr

    # -- the serving side -----------------------------------------------------------------------------
    async def process_request(self, channel: RemotingChannel, request: RemotingCommand) -> RemotingCommand | None:
        code = DLedgerRequestCode.value_of(request.code)
        body_type = _REQUEST_TYPES.get(code)
        if body_type is None:
            self.node.log.error("Unknown request code %d from %s", request.code, channel.remote_addr)
            return None  # DLedger answers nothing: the caller times out
        try:
            body = body_type.decode(request.body)
        except ValueError as e:
            raise RemotingCommandError(f"{code.name}: {e}") from None
        server = self.dledger
        if code is DLedgerRequestCode.METADATA:
            response: RequestOrResponse = await server.handle_metadata(body)
        elif code is DLedgerRequestCode.APPEND:
            response = await server.handle_append(body)
        elif code is DLedgerRequestCode.GET:
            response = await server.handle_get(body)
        elif code is DLedgerRequestCode.PUSH:
            response = await server.handle_push(body)
        elif code is DLedgerRequestCode.VOTE:
            response = await server.handle_vote(body)
        elif code is DLedgerRequestCode.HEART_BEAT:
            response = await server.handle_heart_beat(body)
        else:
            response = await server.handle_leadership_transfer(body)
        return wrap_response(response)

    # -- the calling side ------------------------------------------------------------------------------
    async def _invoke(self, code: DLedgerRequestCode, request: RequestOrResponse, response_type: type[R]) -> R:
        """Send and parse; RemotingError / ValueError on failure (the callers map them)."""
        addr = self.get_peer_addr(request.group, request.remote_id)
        command = await self.remoting_client.invoke_async(addr, wrap_request(code, request), RPC_TIMEOUT_MS)
        return response_type.decode(command.body)

    async def heart_beat(self, request: HeartBeatRequest) -> HeartBeatResponse:
        try:
            return await self._invoke(DLedgerRequestCode.HEART_BEAT, request, HeartBeatResponse)
        except (RemotingError, OSError, ValueError) as e:
            self.node.log.debug("HeartBeat request failed, %s: %s", request.base_info(), e)
            return HeartBeatResponse(code=DLedgerResponseCode.NETWORK_ERROR)

    async def vote(self, request: VoteRequest) -> VoteResponse:
        try:
            return await self._invoke(DLedgerRequestCode.VOTE, request, VoteResponse)
        except (RemotingError, OSError, ValueError) as e:
            self.node.log.debug("Vote request failed, %s: %s", request.base_info(), e)
            return VoteResponse()

    async def _with_network_error(self, code: DLedgerRequestCode, request: RequestOrResponse, response_type: type[R]) -> R:
        try:
            return await self._invoke(code, request, response_type)
        except (RemotingError, OSError, ValueError) as e:
            self.node.log.debug("%s request failed, %s: %s", code.name, request.base_info(), e)
            response = response_type().copy_base_info(request)
            response.code = DLedgerResponseCode.NETWORK_ERROR
            return response

    async def append(self, request: AppendEntryRequest) -> AppendEntryResponse:
        return await self._with_network_error(DLedgerRequestCode.APPEND, request, AppendEntryResponse)

    async def push(self, request: PushEntryRequest) -> PushEntryResponse:
        return await self._with_network_error(DLedgerRequestCode.PUSH, request, PushEntryResponse)

    async def leadership_transfer(self, request: LeadershipTransferRequest) -> LeadershipTransferResponse:
        return await self._with_network_error(DLedgerRequestCode.LEADERSHIP_TRANSFER, request,
                                              LeadershipTransferResponse)

    async def get(self, request: GetEntriesRequest) -> GetEntriesResponse:
        return GetEntriesResponse(code=DLedgerResponseCode.UNSUPPORTED)

    async def metadata(self, request: MetadataRequest) -> MetadataResponse:
        return MetadataResponse(code=DLedgerResponseCode.UNSUPPORTED)
