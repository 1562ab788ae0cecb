"""Custom headers (``org.apache.rocketmq.remoting.protocol.header``): typed views of ``extFields``."""

from rmqlab.remoting.protocol.header.command_custom_header import (BOOLEAN, INTEGER, LONG, STRING,
                                                                   CommandCustomHeader, HeaderFieldSpec,
                                                                   header_field)
from rmqlab.remoting.protocol.header.get_broker_member_group_request_header import GetBrokerMemberGroupRequestHeader

__all__ = ["BOOLEAN", "INTEGER", "LONG", "STRING", "CommandCustomHeader", "HeaderFieldSpec", "header_field",
           "GetBrokerMemberGroupRequestHeader"]
