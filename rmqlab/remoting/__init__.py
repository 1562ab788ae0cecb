"""RocketMQ's remoting protocol, mirroring
``org.apache.rocketmq.remoting``: the command and its wire format (RemotingCommand, JSON and
ROCKETMQ headers), request and response codes, an I/O-free frame decoder, and the server, client
and channel that carry commands over a Node's connections on either runtime.
"""

from rmqlab.common.java_compat import java_hash_map_order
from rmqlab.remoting.exceptions import (FrameError, RemotingCommandError, RemotingConnectError,
                                        RemotingError, RemotingTimeoutError)
from rmqlab.remoting.frame_decoder import FRAME_MAX_LENGTH, FrameDecoder
from rmqlab.remoting.language_code import LanguageCode
from rmqlab.remoting.remoting_abstract import ChannelEventListener, RemotingAbstract, RequestProcessor
from rmqlab.remoting.remoting_channel import RemotingChannel
from rmqlab.remoting.remoting_client import RemotingClient
from rmqlab.remoting.remoting_command import (RemotingCommand, SerializeType, create_request_command,
                                              create_response_command)
from rmqlab.remoting.remoting_helper import get_request_code_desc, get_response_code_desc
from rmqlab.remoting.remoting_server import RemotingServer
from rmqlab.remoting.request_code import RequestCode
from rmqlab.remoting.response_code import RemotingSysResponseCode, ResponseCode

__all__ = [
    "FrameError", "RemotingCommandError", "RemotingConnectError", "RemotingError", "RemotingTimeoutError",
    "FRAME_MAX_LENGTH", "FrameDecoder", "LanguageCode", "ChannelEventListener", "RemotingAbstract",
    "RequestProcessor", "RemotingChannel", "RemotingClient", "RemotingCommand", "SerializeType",
    "create_request_command", "create_response_command", "java_hash_map_order", "get_request_code_desc",
    "get_response_code_desc", "RemotingServer", "RequestCode", "RemotingSysResponseCode", "ResponseCode",
]
