"""Errors of the remoting layer, mirroring RocketMQ's ``org.apache.rocketmq.remoting.exception``.

* :class:`FrameError` - bytes on a connection are not a valid frame (bad length, bad header). The
  connection that carried them is closed, as Netty's decoder does (``NettyDecoder`` closes the
  channel on any decode exception); nothing else is affected.
* :class:`RemotingCommandError` - a well-formed command lacks a field or holds a value of the wrong
  type (RocketMQ's ``RemotingCommandException``, thrown while decoding a custom header).
* :class:`RemotingConnectError` - no connection (refused, unreachable, or lost while a request was
  waiting for its response).
* :class:`RemotingTimeoutError` - no response within the request's timeout.
"""

from __future__ import annotations


class RemotingError(Exception):
    """Base class of every remoting failure."""


class FrameError(RemotingError, ValueError):
    """Undecodable bytes on a connection; ``reason`` says what was wrong.

    ``commands`` holds the commands the same ``FrameDecoder.feed`` call decoded completely before
    the bad frame (in order): they arrived intact and are still handled, as Netty hands frames to
    the pipeline one by one before the bad one closes the channel.
    """

    def __init__(self, reason: str, commands: list | None = None):
        super().__init__(reason)
        self.reason = reason
        self.commands = commands if commands is not None else []


class RemotingCommandError(RemotingError, ValueError):
    """A command's field is missing or not of the type its reader needs."""


class RemotingConnectError(RemotingError, ConnectionError):
    """The connection to ``addr`` could not be made, or was lost before the response came."""

    def __init__(self, addr: str, reason: str):
        super().__init__(f"{addr}: {reason}")
        self.addr = addr
        self.reason = reason


class RemotingTimeoutError(RemotingError, TimeoutError):
    """No response from ``addr`` within ``timeout_ms`` (RocketMQ's ``RemotingTimeoutException``)."""

    def __init__(self, addr: str, timeout_ms: float, detail: str = ""):
        text = f"wait response on the channel <{addr}> timeout, {timeout_ms:g}(ms)"
        super().__init__(f"{text}: {detail}" if detail else text)
        self.addr = addr
        self.timeout_ms = timeout_ms
