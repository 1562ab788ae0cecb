"""Writing a custom header into a command that already has extFields.

``RemotingCommand.makeCustomHeaderToNet`` adds a header's non-null fields to the command's
extFields map, keeping what is there: a send response carries MSG_REGION and TRACE_ON (added by
``preSend``) beside SendMessageResponseHeader's fields.
"""

from __future__ import annotations

from rmqlab.remoting.protocol.header.command_custom_header import CommandCustomHeader
from rmqlab.remoting.remoting_command import RemotingCommand


def write_header(command: RemotingCommand, header: CommandCustomHeader) -> RemotingCommand:
    """Add ``header``'s fields to ``command``'s extFields; returns ``command``."""
    for key, value in header.to_ext_fields().items():
        command.add_ext_field(key, value)
    return command
