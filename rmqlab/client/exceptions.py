"""Errors a client raises (``client/exception/MQClientException.java``, ``MQBrokerException.java``,
``common/ClientErrorCode.java``).

* :class:`MQClientException` - the client could not do what was asked: no route for the topic,
  no name server, every send attempt failed, a bad argument. ``response_code`` is a broker
  response code or one of :class:`ClientErrorCode`'s client-side codes.
* :class:`MQBrokerException` - a broker (or name server) answered with an error code.

Remoting failures (:class:`rmqlab.remoting.RemotingConnectError`, ``RemotingTimeoutError``) pass
through unchanged where Java lets ``RemotingException`` through.
"""

from __future__ import annotations

from rmqlab.remoting.exceptions import RemotingConnectError, RemotingTimeoutError
from rmqlab.remoting.response_code import ResponseCode


class ClientErrorCode:
    """``ClientErrorCode``: what an MQClientException's code means when no broker answered."""

    CONNECT_BROKER_EXCEPTION = 10001
    ACCESS_BROKER_TIMEOUT = 10002
    BROKER_NOT_EXIST_EXCEPTION = 10003
    NO_NAME_SERVER_EXCEPTION = 10004
    NOT_FOUND_TOPIC_EXCEPTION = 10005
    REQUEST_TIMEOUT_EXCEPTION = 10006


class MQClientException(Exception):
    def __init__(self, response_code: int, error_message: str, cause: BaseException | None = None):
        text = f"CODE: {response_code}  DESC: {error_message}" if response_code != -1 else error_message
        super().__init__(text)
        self.response_code = response_code
        self.error_message = error_message
        if cause is not None:
            self.__cause__ = cause


class MQBrokerException(Exception):
    def __init__(self, response_code: int, error_message: str | None, broker_addr: str | None = None):
        text = f"CODE: {response_code}  DESC: {error_message}"
        if broker_addr:
            text += f"  BROKER: {broker_addr}"
        super().__init__(text)
        self.response_code = response_code
        self.error_message = error_message
        self.broker_addr = broker_addr


def request_never_sent(e: BaseException) -> bool:
    """True when ``e`` proves the request never left this client: the connection could not be
    opened (refused, unreachable, the connect timed out) or the client was shut down.

    Everything else - a timeout, a connection lost while waiting - leaves the request's effect
    unknown, which is what a history checker must be told (``info``, not ``fail``). The remoting
    layer says which case it was in the reason of RemotingConnectError ("connect failed: ...").
    """
    if isinstance(e, RemotingConnectError):
        return e.reason.startswith("connect failed") or e.reason == "the client is shut down"
    return False


def outcome_unknown(e: BaseException) -> bool:
    """True when the request may have taken effect although it failed (see request_never_sent).

    A broker's SYSTEM_ERROR is such a failure: the put may be in the log. DLedger CommitLog mode
    answers it when the quorum did not ack in time (WAIT_QUORUM_ACK_TIMEOUT → "in-sync replicas
    not enough"), and the entry stays in the leader's log, committed if a majority comes back
    (store/dledger/DLedgerCommitLog.java); UNKNOWN_ERROR and a put that threw answer it too. (Controller
    mode's IN_SYNC_REPLICAS_NOT_ENOUGH refuses before appending, but a client cannot tell the two apart.)"""
    if isinstance(e, RemotingTimeoutError):
        return True
    if isinstance(e, MQBrokerException) and e.response_code == ResponseCode.SYSTEM_ERROR:
        return True
    if isinstance(e, RemotingConnectError):
        return not request_never_sent(e)
    return False
