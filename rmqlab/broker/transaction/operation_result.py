"""OperationResult (RocketMQ ``broker/.../transaction/OperationResult.java``): the half message a
commit or rollback names, and the response code of the lookup."""

from __future__ import annotations

from dataclasses import dataclass

from rmqlab.common.message.message import MessageExt
from rmqlab.remoting.response_code import ResponseCode


@dataclass
class OperationResult:
    prepare_message: MessageExt | None = None
    response_remark: str | None = None
    response_code: int = ResponseCode.SUCCESS
