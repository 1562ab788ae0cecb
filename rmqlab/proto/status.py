"""The names of `apache.rocketmq.v2.Code` values, as both ends trace them."""

from __future__ import annotations

from rmqlab.proto.v2 import definition_pb2 as pb


def code_name(code: int) -> str:
    return pb.Code.Name(code)


def status_name(message) -> str | None:
    """The code name of a response message's `status`, for the trace; None when it has none."""
    try:
        return code_name(message.status.code) if message.HasField("status") else None
    except ValueError:  # no such field in this message type
        return None
