"""Messages and their stored format, mirroring RocketMQ's
``org.apache.rocketmq.common.message`` package. The encoder lives with the store
(``rmqlab.store.message_ext_encoder``), as ``MessageExtEncoder`` does in RocketMQ."""

from rmqlab.common.message.message import (Host, Message, MessageExt, MessageExtBrokerInner,
                                           MessageFormatError, bytes_to_socket_address,
                                           is_ipv6_host, socket_address_to_bytes)
from rmqlab.common.message.message_const import MessageConst
from rmqlab.common.message.message_decoder import (create_message_id, decode, decode_message_id,
                                                   decodes, message_properties_to_string,
                                                   string_to_message_properties)
from rmqlab.common.message.message_sys_flag import MessageSysFlag
from rmqlab.common.message.message_version import (BLANK_MAGIC_CODE, MESSAGE_MAGIC_CODE,
                                                   MESSAGE_MAGIC_CODE_V2, MessageVersion)

__all__ = [
    "Host", "Message", "MessageExt", "MessageExtBrokerInner", "MessageFormatError",
    "bytes_to_socket_address", "is_ipv6_host", "socket_address_to_bytes", "MessageConst",
    "create_message_id", "decode", "decode_message_id", "decodes", "message_properties_to_string",
    "string_to_message_properties", "MessageSysFlag", "BLANK_MAGIC_CODE", "MESSAGE_MAGIC_CODE",
    "MESSAGE_MAGIC_CODE_V2", "MessageVersion",
]
